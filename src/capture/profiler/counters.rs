//! Counter cycles: the range profiler's configuration, and the cycle of a counter data image
//! (stop, decode, hand the image to the evaluator, re-arm, start) that keeps host memory
//! bounded however many kernels run. Evaluation runs on the [`Evaluator`] thread.

use std::time::Instant;

use crate::capture::metrics::MetricCatalog;
use crate::checked::activity;
use crate::checked::driver::Context;
use crate::checked::host::ProfilerHost;
use crate::checked::range_profiler::{RangeConfig, RangeMode, RangeProfiler, ReplayMode};
use crate::checked::target::{self, ProfilerApi};
use crate::checked::Cupti;
use crate::error::Result;
use crate::model::{MetricSet, ProfilingMode, GPU_TIME_METRIC};

use super::builder::ProfilerBuilder;
use super::evaluator::Evaluator;
use super::state::{Counters, Profiler, Restart, Shared};

/// What `start_counters` sets up.
pub(super) struct CounterSetup {
    pub(super) counters: Counters,
    pub(super) metric_set: MetricSet,
    /// per_kernel in rotation: its state, for the session state.
    pub(super) rotation: Option<super::rotation::Rotation>,
    pub(super) names: Vec<String>,
    pub(super) passes: usize,
    pub(super) chip: String,
    pub(super) mode: ProfilingMode,
}

impl Profiler {
    /// Sets up the range profiler of a counter mode: metrics, configuration, counter image.
    pub(super) fn start_counters(
        cfg: &ProfilerBuilder,
        cupti: &Cupti,
        context: Context,
        device: i32,
    ) -> Result<CounterSetup> {
        tracing::debug!("gmprof: initializing the profiler API");
        let api = ProfilerApi::initialize(cupti)?;
        let chip = target::chip_name(cupti, device as usize)?;
        tracing::debug!(chip, "gmprof: chip");
        // Metrics: gpu__time_duration.sum first, then the user's, without duplicates.
        let mut names: Vec<String> = vec![GPU_TIME_METRIC.to_owned()];
        for m in &cfg.metrics {
            let m = m.trim();
            if !m.is_empty() && !names.iter().any(|n| n == m) {
                names.push(m.to_owned());
            }
        }
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let catalog = MetricCatalog::for_chip(cupti, &chip)?;
        let specs = catalog.validate(&name_refs)?;
        drop(catalog);
        let availability = target::counter_availability(cupti, context)?;
        tracing::debug!(bytes = availability.len(), "gmprof: counter availability");
        let mut host: ProfilerHost = ProfilerHost::new(cupti, &chip, Some(&availability))?;
        host.add_metrics(&name_refs)?;
        let config_image = host.config_image()?;
        let metric_passes = host.num_passes(&config_image)?;
        // Under user replay CUPTI measures one nesting level per pass of the metric set.
        let passes = match cfg.mode {
            Some(ProfilingMode::PerRange) => metric_passes * cfg.max_nesting_levels as usize,
            _ => metric_passes,
        };
        let mode = cfg.mode.unwrap_or(if passes <= 1 || cfg.iteration_replay.is_some() {
            ProfilingMode::PerKernel
        } else {
            ProfilingMode::KernelReplay
        });
        tracing::info!(passes, metrics = ?names, mode = mode.as_str(), "gmprof: metric set needs {passes} replay pass(es)");

        let range_profiler = RangeProfiler::enable(cupti, context)?;
        tracing::debug!("gmprof: range profiler enabled");
        let per_range = range_profiler
            .counter_data_size(&name_refs, 2, 2)?
            .saturating_sub(range_profiler.counter_data_size(&name_refs, 1, 1)?)
            .max(1);
        // The budget covers every image: two with background evaluation.
        let images = if cfg.background_evaluation { super::evaluator::MAX_IMAGES } else { 1 };
        let ranges_per_cycle = (cfg.counter_image_budget / images / per_range).clamp(1, cfg.max_ranges_per_cycle);
        let mut counter_data =
            range_profiler.create_counter_data(&name_refs, ranges_per_cycle, ranges_per_cycle as u32)?;
        let (range, replay, num_nesting_levels) = match mode {
            ProfilingMode::PerRange => (RangeMode::User, ReplayMode::User, cfg.max_nesting_levels),
            ProfilingMode::PerKernel => (RangeMode::User, ReplayMode::User, 1),
            _ => (RangeMode::Auto, ReplayMode::Kernel, 1),
        };
        let config = RangeConfig {
            range,
            replay,
            max_ranges_per_pass: ranges_per_cycle,
            num_nesting_levels,
            min_nesting_level: 1,
            pass_index: 0,
            target_nesting_level: 1,
        };
        // SAFETY: both images move into `Counters`, whose heap buffers never reallocate and
        // outlive the range profiler (it is disabled before they drop).
        unsafe { range_profiler.set_config(&config_image, &mut counter_data, &config)? };
        tracing::info!(
            ranges_per_cycle,
            image_bytes = counter_data.len(),
            bytes_per_range = per_range,
            images,
            "gmprof: counter image"
        );
        let rotation = rotation(cfg, mode, passes)?;
        let evaluator = Evaluator::spawn(*cupti, host, names.clone(), range, cfg.background_evaluation)?;
        Ok(CounterSetup {
            counters: Counters {
                range_profiler: Some(range_profiler),
                counter_data,
                config_image,
                config,
                _api: api,
                cycle: 0,
                ordinal_in_cycle: 0,
                ranges_in_cycle: 0,
                rotating: rotation.is_some(),
                rotation_cycles: cfg.rotation_cycles,
                dropped_ranges: 0,
                lost_ranges: 0,
                running: false,
                user_depth: 0,
                evaluator,
                background_evaluation: cfg.background_evaluation,
                pauses: Vec::new(),
                pushed: Vec::new(),
                broken: None,
                restart: None,
            },
            metric_set: MetricSet { metrics: specs },
            rotation,
            names,
            passes,
            chip,
            mode,
        })
    }
}

impl Shared {
    /// `call`, tried once more when it fails: a CUPTI call that fails once and works when
    /// tried again loses nothing, and a warning of the report says it failed. Returns the
    /// first error when both tries fail. The same warning is said once however often it
    /// happens. Called with the capture lock held (never the state lock, which the warning
    /// takes).
    pub(super) fn retried<T>(&self, call: impl Fn() -> Result<T>) -> Result<T> {
        let first = match call() {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let Ok(again) = call() else { return Err(first) };
        let warning = format!("{first}; it worked when tried again, so nothing was lost");
        let warnings = &mut self.state.lock().warnings;
        if !warnings.contains(&warning) {
            warnings.push(warning);
        }
        Ok(again)
    }

    /// A streamed drain's counters: the cycles the evaluator finished go to the correlator,
    /// and the first cycle whose counters are not known yet is returned
    /// ([`Evaluator::settled_below`]; what waits for it is held back). `None` without a
    /// counter image (trace). Takes the capture lock, then the state lock.
    pub(super) fn settle_counter_cycles(&self) -> Option<u32> {
        let (settled, evaluated) = {
            let mut guard = self.capture.lock();
            let counters = guard.as_mut().and_then(|c| c.counters.as_mut())?;
            // The watermark first: every cycle below it is in what is taken after it.
            let settled = counters.evaluator.settled_below(counters.cycle);
            (settled, counters.evaluator.take_evaluated())
        };
        if !evaluated.is_empty() {
            let mut state = self.state.lock();
            for (cycle, ranges) in evaluated {
                state.correlator.add_counter_ranges(cycle, ranges);
            }
        }
        Some(settled)
    }

    /// Ends a full counter cycle and starts the next one: stop, decode and hand the image to
    /// the evaluator, re-arm, start. Each range profiler call is tried once more when it
    /// fails ([`Shared::retried`]). A stop that still fails leaves the profiler running (the
    /// next launch tries again, and what did not fit the image is counted as dropped); a
    /// decode that still fails loses that cycle's counters only (counted and said); a re-arm
    /// or start that still fails is tried again at the next launch or range
    /// ([`Shared::restart_cycle`]).
    pub(super) fn cycle_counter_image(&self, counters: &mut Counters) -> Result<()> {
        let t0 = Instant::now();
        let paused_at = activity::timestamp(&self.cupti).ok();
        let (cycle, ranges) = (counters.cycle, counters.ordinal_in_cycle);
        self.stop_cycle(counters)?;
        if let Err(e) = self.collect_cycle(counters) {
            self.drop_cycle(counters, true, &format!("could not be decoded ({e})"), "the next cycle goes on");
        }
        next_cycle(counters);
        counters.restart = Some(Restart::Rearm);
        let t_start = Instant::now();
        self.restart_cycle(counters)?;
        let stats = &mut counters.evaluator.stats;
        stats.start += t_start.elapsed();
        stats.longest = stats.longest.max(t0.elapsed());
        if let (Some(start_ns), Ok(end_ns)) = (paused_at, activity::timestamp(&self.cupti)) {
            let thread = super::launch::current_thread_id();
            counters.pauses.push(crate::model::ProfilerPause { cycle, ranges, start_ns, end_ns, thread });
        }
        Ok(())
    }

    /// At a launch or a range push where a new cycle may begin (no CUPTI range open, no
    /// replay): cycles a full image, or brings a cycle that failed back to running. A
    /// failure is said once, when the cycle fails; the next launch tries again.
    pub(super) fn next_cycle_if_due(&self, counters: &mut Counters) {
        let full = counters.cycle_due();
        if counters.running && full {
            if let Err(e) = self.cycle_counter_image(counters) {
                tracing::error!("gmprof: could not cycle the counter image: {e}");
                self.state.lock().warnings.push(format!("counter image cycle failed: {e}"));
            }
        } else if counters.restart.is_some() {
            if counters.ordinal_in_cycle > 0 {
                // Launches (or ranges) came while the profiler was stopped: no counters.
                let what = "never ran: the profiler could not be started again";
                self.drop_cycle(counters, false, what, "the next cycle goes on");
                next_cycle(counters);
            }
            if let Err(e) = self.restart_cycle(counters) {
                tracing::debug!("gmprof: the counter cycle could not start again yet: {e}");
            }
        }
    }

    /// Brings a cycle that a failed re-arm or start left stopped back to running: what is
    /// left of re-arm and start. `counters.restart` stays set until it works.
    pub(super) fn restart_cycle(&self, counters: &mut Counters) -> Result<()> {
        if counters.restart == Some(Restart::Rearm) {
            self.rearm(counters)?;
            counters.restart = Some(Restart::Start);
        }
        if counters.restart == Some(Restart::Start) {
            if let Some(rp) = counters.range_profiler.as_ref() {
                self.retried(|| rp.start())?;
                counters.running = true;
            }
            counters.restart = None;
        }
        Ok(())
    }

    /// A counter cycle whose counters are lost (`what` happened to it; `then`: what comes
    /// next): its launches (its ranges in per_range) are counted in the dropped counter
    /// ranges and a warning says why. When the profiler ran in it (`ran`), CUPTI numbered
    /// its auto ranges, and the evaluator skips their numbers.
    pub(super) fn drop_cycle(&self, counters: &mut Counters, ran: bool, what: &str, then: &str) {
        let cycle = counters.cycle;
        let (lost, unit) = match self.mode {
            ProfilingMode::PerRange => (u64::from(counters.ordinal_in_cycle), "range(s)"),
            _ if counters.rotating => (u64::from(counters.ranges_in_cycle), "measured launch(es)"),
            _ => (self.state.lock().correlator.launches_in_cycle(cycle), "launch(es)"),
        };
        if ran {
            counters.evaluator.skip(cycle, lost);
        }
        if lost == 0 {
            return;
        }
        counters.dropped_ranges += lost;
        counters.lost_ranges += lost;
        self.state.lock().warnings.push(format!(
            "counter cycle {cycle} {what}: the counters of its {lost} {unit} are dropped (counted in the dropped \
             counter ranges) and left blank; {then}"
        ));
    }

    /// Re-initializes the image and configuration for the next cycle (numbered by
    /// [`next_cycle`]).
    pub(super) fn rearm(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        let t0 = Instant::now();
        let image = std::cell::RefCell::new(&mut counters.counter_data);
        self.retried(|| rp.initialize_counter_data(&mut image.borrow_mut()))?;
        // SAFETY: the images live in `counters` and outlive the range profiler.
        self.retried(|| unsafe { rp.set_config(&counters.config_image, &mut image.borrow_mut(), &counters.config) })?;
        counters.evaluator.stats.rearm += t0.elapsed();
        Ok(())
    }

    /// Stops the range profiler at the end of a cycle.
    pub(super) fn stop_cycle(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        let t0 = Instant::now();
        let stop = self.retried(|| rp.stop())?;
        counters.running = false;
        counters.evaluator.stats.stop += t0.elapsed();
        if !stop.all_passes_submitted {
            self.state.lock().warnings.push(format!(
                "counter cycle {}: CUPTI reported pass {} without all passes submitted",
                counters.cycle, stop.pass_index
            ));
        }
        Ok(())
    }

    /// Decodes the stopped cycle and hands the image to the evaluator, which turns it into
    /// counter ranges for the correlator (collected at finish). `counters.counter_data` is
    /// then a spare image, to be re-armed before the profiler starts again. A cycle whose
    /// counters cannot be trusted (`counters.broken`) is dropped instead.
    pub(super) fn collect_cycle(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        counters.user_depth = 0;
        let t0 = Instant::now();
        let dropped = self.retried(|| rp.decode())?;
        counters.evaluator.stats.decode += t0.elapsed();
        if dropped > 0 {
            tracing::warn!("gmprof: CUPTI dropped {dropped} counter range(s) in cycle {}", counters.cycle);
            counters.dropped_ranges += dropped as u64;
        }
        if let Some(why) = counters.broken.take() {
            self.drop_cycle(counters, true, &format!("cannot be trusted ({why})"), "the other cycles keep theirs");
            return Ok(());
        }
        let expected = match self.mode {
            ProfilingMode::PerRange => u64::from(counters.ordinal_in_cycle),
            _ if counters.rotating => u64::from(counters.ranges_in_cycle),
            _ => self.state.lock().correlator.launches_in_cycle(counters.cycle),
        };
        counters.evaluator.hand_off(counters.cycle, dropped, expected, &mut counters.counter_data)
    }
}

/// Numbers the next counter cycle: launches (ranges) from now on are its.
pub(super) fn next_cycle(counters: &mut Counters) {
    counters.cycle += 1;
    counters.ordinal_in_cycle = 0;
    counters.ranges_in_cycle = 0;
}

/// The rotation a per_kernel session asked for ([`ProfilerBuilder::rotate`]); refused with the
/// reason where it cannot run.
fn rotation(cfg: &ProfilerBuilder, mode: ProfilingMode, passes: usize) -> Result<Option<super::rotation::Rotation>> {
    let Some(every) = cfg.rotate else { return Ok(None) };
    if passes > 1 {
        return Err(crate::error::Error::InvalidConfig(format!(
            "rotation measures metric sets that fit one pass, and this one needs {passes}: split the metrics \
             across runs (each one-pass set rotates on its own), or drop --rotate for kernel replay"
        )));
    }
    if mode != ProfilingMode::PerKernel {
        return Err(crate::error::Error::InvalidConfig(format!(
            "rotation measures per_kernel counters, but the mode is {}: use --mode per_kernel",
            mode.as_str()
        )));
    }
    if cfg.iteration_replay.is_some() {
        return Err(crate::error::Error::InvalidConfig(
            "rotation and iteration replay both pick which step measures what: use one of them".into(),
        ));
    }
    let glob = cfg.rotation_step.as_deref().map(super::builder::iteration_pattern).transpose()?;
    Ok(Some(super::rotation::Rotation::new(every, glob, cfg.rotation_cycles)))
}

impl Counters {
    /// Whether the image holds as many ranges as a cycle takes.
    pub(super) fn image_full(&self) -> bool {
        let used = if self.rotating { self.ranges_in_cycle } else { self.ordinal_in_cycle };
        used as usize >= self.config.max_ranges_per_pass
    }

    /// Whether a full image is cycled mid-run: always, but in a rotation that stops measuring
    /// when it is full instead.
    pub(super) fn cycle_due(&self) -> bool {
        self.image_full() && (!self.rotating || self.rotation_cycles)
    }
}
