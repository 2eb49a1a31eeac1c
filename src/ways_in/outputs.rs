//! The outputs of a running program: checkpoints while it runs, the final write at its end,
//! and never a checkpoint over the final outputs.
//!
//! Every file is replaced whole ([`Report::write_all`] writes beside the target and renames),
//! so a program killed at any moment, SIGKILL and the OOM killer included, leaves the last
//! complete set: at worst the last checkpoint, which says so in `report.json`
//! ([`RunEnd::Checkpoint`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::capture::profiler::Profiler;
use crate::error::Result;
use crate::model::RunEnd;
use crate::report::{OutputFormats, Report, TraceFormat, TraceOptions};

/// How checkpoints and signals are set up (defined in [`crate::ways_in::settings`]).
pub use crate::ways_in::settings::EndSettings;

/// A checkpoint that took `t` is followed by at least `CHECKPOINT_COST_FACTOR × t` of waiting.
pub const CHECKPOINT_COST_FACTOR: u32 = 10;

/// The wait before the next checkpoint, given the interval and what the last one took.
pub fn next_wait(every: Duration, last_took: Duration) -> Duration {
    every.max(last_took * CHECKPOINT_COST_FACTOR)
}

/// The wait before the next streamed drain, given the interval and what the last one took:
/// the rest of the interval, and at once (after a short yield) when the drain took longer.
/// Unlike a checkpoint's ([`next_wait`]) it never waits longer for a slow drain: what a
/// drain leaves behind grows while it waits, so waiting longer makes the next drain longer
/// still (seen on an H100: llm.c at about 32 000 kernels a second drained after 60 s, then 170 s,
/// and the process grew to 6 GB).
pub fn next_drain_wait(every: Duration, last_took: Duration) -> Duration {
    every.saturating_sub(last_took).max(MIN_DRAIN_WAIT)
}

/// The least wait between two streamed drains.
pub const MIN_DRAIN_WAIT: Duration = Duration::from_millis(10);

/// One output directory and who may write it.
#[derive(Debug)]
pub struct Outputs {
    dir: PathBuf,
    formats: OutputFormats,
    /// How `trace.json` is written.
    trace: TraceOptions,
    /// The first step of an on-demand capture, once known ([`Outputs::set_first_step`]).
    first_step: Mutex<Option<u64>>,
    /// Held while writing; true once the final outputs are written.
    finished: Mutex<bool>,
    checkpoints: AtomicU64,
}

impl Outputs {
    /// Outputs into `dir`, in the formats of `GMPROF_FORMAT` (CSV and Parquet when unset; a
    /// value that is not a list of formats is warned about and the default written).
    pub fn new(dir: PathBuf) -> Self {
        let formats = OutputFormats::from_env().unwrap_or_else(|e| {
            tracing::warn!("gmprof: {e}; writing {}", OutputFormats::default());
            OutputFormats::default()
        });
        Self::with_formats(dir, formats)
    }

    /// Outputs into `dir` in `formats`, `trace.json` in the form of `GMPROF_TRACE_FORMAT`.
    pub fn with_formats(dir: PathBuf, formats: OutputFormats) -> Self {
        let trace = trace_options(&|k| std::env::var(k).ok());
        Self {
            dir,
            formats,
            trace,
            first_step: Mutex::new(None),
            finished: Mutex::new(false),
            checkpoints: AtomicU64::new(0),
        }
    }

    /// How `trace.json` is written.
    pub fn trace_options(&self) -> &TraceOptions {
        &self.trace
    }

    /// The outputs are an on-demand capture's whose first step is the program's step `step`:
    /// a Kineto `trace.json` numbers its steps from it ([`TraceOptions::first_step`]).
    pub fn set_first_step(&self, step: u64) {
        *self.first_step.lock() = Some(step);
    }

    /// How `trace.json` is written now: [`Outputs::trace_options`] with the first step.
    fn trace_now(&self) -> TraceOptions {
        let first = *self.first_step.lock();
        TraceOptions { first_step: first.or(self.trace.first_step), ..self.trace.clone() }
    }

    /// The table formats written.
    pub fn formats(&self) -> OutputFormats {
        self.formats
    }

    /// The directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Checkpoints written so far.
    pub fn checkpoints(&self) -> u64 {
        self.checkpoints.load(Ordering::Acquire)
    }

    /// Writes a checkpoint of `profiler` and returns how its report describes the run;
    /// `None` (nothing written) once the final outputs are. A session streaming past its
    /// row limit holds only the rows in flight: its checkpoint closes the open segments
    /// instead, so every row streamed so far is in a complete part file.
    pub fn write_checkpoint(&self, profiler: &Profiler, reason: &str) -> Result<Option<RunEnd>> {
        if profiler.is_streaming() {
            profiler.close_stream_segments()?;
            return Ok(None);
        }
        let report = profiler.checkpoint(reason)?;
        Ok(self.write_checkpoint_report(&report)?.then(|| report.meta.run_end.clone()).flatten())
    }

    /// Writes `report` as a checkpoint, unless the final outputs are written.
    pub fn write_checkpoint_report(&self, report: &Report) -> Result<bool> {
        let finished = self.finished.lock();
        if *finished {
            return Ok(false);
        }
        with_device_timers(report, crate::device_timers::collected()).write_all_traced(
            &self.dir,
            self.formats,
            &self.trace_now(),
        )?;
        self.checkpoints.fetch_add(1, Ordering::AcqRel);
        tracing::debug!(dir = %self.dir.display(), kernels = report.kernels.len(), "gmprof: checkpoint written");
        Ok(true)
    }

    /// Writes the final outputs; later checkpoints write nothing.
    pub fn write_final(&self, report: &Report) -> Result<()> {
        let mut finished = self.finished.lock();
        with_device_timers(report, crate::device_timers::take_all()).write_all_traced(
            &self.dir,
            self.formats,
            &self.trace_now(),
        )?;
        *finished = true;
        Ok(())
    }
}

/// This process's trace options, through `lookup` (its environment): the form of
/// `GMPROF_TRACE_FORMAT` (a value that is not one is warned about and gmprof's own trace
/// written), this pid, its rank, world size and local rank, and the step range a Kineto
/// trace's `ProfilerStep#N` events are made of ([`crate::report::kineto::STEP_RANGE_ENVS`]).
pub fn trace_options(lookup: &dyn Fn(&str) -> Option<String>) -> TraceOptions {
    let format = TraceFormat::from_lookup(lookup).unwrap_or_else(|e| {
        tracing::warn!("gmprof: {e}; writing the {} trace", TraceFormat::default());
        TraceFormat::default()
    });
    TraceOptions {
        format,
        pid: Some(std::process::id()),
        distributed: crate::ways_in::layout::distributed_info(lookup),
        step_range: crate::report::kineto::step_range_from(lookup),
        first_step: None,
    }
}

/// `report` with the process's collected in-kernel timer launches attached (borrowed as it
/// is when there are none).
fn with_device_timers(
    report: &Report,
    launches: Vec<crate::device_timers::TimedLaunch>,
) -> std::borrow::Cow<'_, Report> {
    if launches.is_empty() {
        return std::borrow::Cow::Borrowed(report);
    }
    let mut report = report.clone();
    report.attach_device_timers(launches);
    std::borrow::Cow::Owned(report)
}

/// Calls `tick` on a `gmprof-checkpoint` thread until it returns false: every `every`, or
/// [`CHECKPOINT_COST_FACTOR`] times as long as the last tick took, whichever is longer, so
/// checkpoints never take more than a tenth of a core however large the session grows.
pub fn spawn_checkpoints(every: Duration, tick: impl Fn() -> bool + Send + 'static) {
    spawn_periodic("gmprof-checkpoint", every, tick);
}

/// Calls `tick` on a thread named `name` as [`spawn_checkpoints`] does (the streamed
/// outputs' drains run so on `gmprof-stream`).
pub fn spawn_periodic(name: &str, every: Duration, tick: impl Fn() -> bool + Send + 'static) {
    spawn_ticks(name, every, next_wait, tick);
}

/// Runs `tick` on a thread named `name` every `every`, on its cadence: a tick that took
/// longer than `every` is followed by the next at once ([`next_drain_wait`]); the streamed
/// drains, whose work grows with the time between them.
pub fn spawn_paced(name: &str, every: Duration, tick: impl Fn() -> bool + Send + 'static) {
    spawn_ticks(name, every, next_drain_wait, tick);
}

fn spawn_ticks(
    name: &str,
    every: Duration,
    wait_after: fn(Duration, Duration) -> Duration,
    tick: impl Fn() -> bool + Send + 'static,
) {
    let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
        let mut wait = every;
        loop {
            std::thread::sleep(wait);
            let started = std::time::Instant::now();
            if !tick() {
                return;
            }
            wait = wait_after(every, started.elapsed());
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("gmprof: could not start the {name} thread: {e}; outputs are written at the end only");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn trace_options_come_from_the_environment() {
        const TORCHRUN: [(&str, &str); 4] =
            [("GMPROF_TRACE_FORMAT", "kineto"), ("RANK", "3"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "1")];
        let options = trace_options(&env(&TORCHRUN));
        assert_eq!(options.format, TraceFormat::Kineto);
        assert_eq!(options.pid, Some(std::process::id()));
        let d = options.distributed.unwrap();
        assert_eq!((d.rank, d.world_size, d.local_rank), (3, Some(4), Some(1)));
        // Unset: gmprof's own trace, and no rank outside a distributed job.
        let plain = trace_options(&env(&[]));
        assert_eq!((plain.format, plain.distributed), (TraceFormat::Chrome, None));
        // A value that is not a format: warned about, gmprof's own trace written.
        assert_eq!(trace_options(&env(&[("GMPROF_TRACE_FORMAT", "xml")])).format, TraceFormat::Chrome);
        // The step range: --step-range's, then --torch-steps's, then a rotation's.
        assert_eq!(options.step_range, None);
        const STEPS: [(&str, &str); 3] =
            [("GMPROF_ROTATE_STEP", "rot"), ("GMPROF_TORCH_STEPS", "step"), ("GMPROF_STEP_RANGE", "Train step *")];
        assert_eq!(trace_options(&env(&STEPS)).step_range.as_deref(), Some("Train step *"));
        assert_eq!(trace_options(&env(&STEPS[..2])).step_range.as_deref(), Some("step"));
        assert_eq!(trace_options(&env(&STEPS[..1])).step_range.as_deref(), Some("rot"));
        // A Kineto trace times API calls; gmprof's own trace and a bad value do not.
        assert!(crate::report::kineto::times_api_calls(&env(&TORCHRUN)));
        assert!(!crate::report::kineto::times_api_calls(&env(&[("GMPROF_TRACE_FORMAT", "xml")])));
        assert!(!crate::report::kineto::times_api_calls(&env(&[])));
    }

    #[test]
    fn a_capture_s_first_step_numbers_its_trace_s_steps() {
        let outputs = Outputs::with_formats(std::env::temp_dir().join("gmprof-unused"), OutputFormats::CSV);
        assert_eq!(outputs.trace_now().first_step, None);
        outputs.set_first_step(1236);
        assert_eq!(outputs.trace_now().first_step, Some(1236));
        assert_eq!(outputs.trace_now().pid, outputs.trace_options().pid);
    }
}
