//! Counter-image evaluation off the launching thread.
//!
//! When a counter cycle is full, the next launch stops the range profiler, decodes the image
//! and re-arms (see [`counters`](super::counters)). Evaluating the decoded image, one
//! `cuptiProfilerHostEvaluateToGpuValues` per range, is pure host work on the image's bytes,
//! and with 2000 ranges per cycle it is most of a cycle's cost. So the launching thread hands
//! the decoded image to an [`Evaluator`] thread, takes a spare image, re-arms with it and
//! goes on; the evaluator returns each image when it is done with it.
//!
//! Memory stays bounded: at most two images exist (the armed one and the one being
//! evaluated). If the evaluator has not finished a cycle by the time the next one is full,
//! the launching thread waits for it (counted in [`CycleStats::waits`]). With background
//! evaluation off ([`ProfilerBuilder::background_evaluation`](super::ProfilerBuilder::background_evaluation)),
//! the launching thread waits for every evaluation, as if it did the work itself, and one
//! image suffices.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::checked::host::ProfilerHost;
use crate::checked::range_profiler::{CounterDataImage, RangeMode};
use crate::checked::Cupti;
use crate::error::{Error, Result};
use crate::model::CounterRange;

/// Images that may exist at once with background evaluation: one armed, one evaluated.
pub(super) const MAX_IMAGES: usize = 2;

/// A decoded counter image and what evaluating it needs.
pub(super) struct CycleJob {
    pub(super) cycle: u32,
    pub(super) image: CounterDataImage,
    /// Ranges CUPTI dropped in this cycle (from the decode): auto-range numbering skips them.
    pub(super) dropped: usize,
    /// Ranges gmprof expects of the cycle (its launches, or its ranges in per_range): what
    /// is lost when the image cannot be read at all.
    pub(super) expected: u64,
}

/// Where a cycle's time went, for the log line at finish.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CycleStats {
    /// Counter cycles collected (full cycles, replay rounds and the last one).
    pub(super) cycles: u64,
    /// `cuptiRangeProfilerStop`, on the launching thread.
    pub(super) stop: Duration,
    /// `cuptiRangeProfilerDecodeData`, on the launching thread.
    pub(super) decode: Duration,
    /// Handing the image to the evaluator and taking a spare (waits included).
    pub(super) hand_off: Duration,
    /// Times the launching thread had to wait for the evaluator to return an image.
    pub(super) waits: u64,
    /// Time spent in those waits (part of `hand_off`).
    pub(super) waited: Duration,
    /// Re-initializing the image and `cuptiRangeProfilerSetConfig`.
    pub(super) rearm: Duration,
    /// `cuptiRangeProfilerStart` after a re-arm.
    pub(super) start: Duration,
    /// The longest a full cycle held the launching thread (stop to start).
    pub(super) longest: Duration,
}

/// What the evaluator produced over the session.
pub(super) struct EvaluatorOutput {
    /// Counter ranges of each evaluated cycle, in cycle order.
    pub(super) cycles: Vec<(u32, Vec<CounterRange>)>,
    /// Cycles that could not be evaluated, and why.
    pub(super) errors: Vec<String>,
    /// Counter ranges lost to evaluation failures (their values are blank): for the
    /// dropped counter ranges.
    pub(super) lost_ranges: u64,
    /// Time spent evaluating, and ranges evaluated.
    pub(super) evaluate: Duration,
    pub(super) ranges: u64,
    /// The host object, to shut down (`None` if the evaluator thread was lost).
    pub(super) host: Option<ProfilerHost>,
    /// Every image the evaluator held: kept alive until the range profiler is disabled.
    pub(super) images: Vec<CounterDataImage>,
}

/// Cycles evaluated and not yet taken, shared by the evaluator thread and the profiler: a
/// checkpoint takes them while the session runs ([`Evaluator::take_evaluated`]).
type Evaluated = std::sync::Arc<parking_lot::Mutex<Vec<(u32, Vec<CounterRange>)>>>;

/// Jobs the evaluator thread has done (evaluated, failed or skipped): a streamed run's
/// drains learn from it which cycles are settled ([`Evaluator::settled_below`]).
type Processed = std::sync::Arc<std::sync::atomic::AtomicUsize>;

/// The evaluator thread and the launching side's end of its channels.
pub(super) struct Evaluator {
    jobs: Option<SyncSender<CycleJob>>,
    evaluated: Evaluated,
    processed: Processed,
    /// The cycles of the jobs sent and not yet known done, oldest first.
    sent: std::collections::VecDeque<u32>,
    /// Jobs known done (popped from `sent`).
    done: usize,
    returned: Receiver<CounterDataImage>,
    worker: Option<JoinHandle<EvaluatorOutput>>,
    background: bool,
    /// Images in existence (armed, spare, or with the evaluator).
    images: usize,
    /// Spares taken back, ready to arm.
    spares: Vec<CounterDataImage>,
    pub(super) stats: CycleStats,
}

/// The evaluator thread's state.
struct Worker {
    cupti: Cupti,
    host: ProfilerHost,
    metric_names: Vec<String>,
    range_mode: RangeMode,
    /// Auto ranges CUPTI numbered in earlier cycles: CUPTI numbers auto ranges from the
    /// profiler's enable, not per image (CUPTI 13.0.1, H200), so names are rebased per cycle
    /// and the correlator's check (name == ordinal) stays a real check.
    auto_ranges_before: u64,
    /// Where each evaluated cycle goes.
    evaluated: Evaluated,
    /// Jobs done, whatever their outcome (after their cycle went to `evaluated`).
    processed: Processed,
}

impl Worker {
    /// The counter ranges of a decoded image. A range whose name or values cannot be read
    /// is left out (its launch or range gets no counters), counted in `lost` with the first
    /// such error; an image whose ranges cannot be counted is an error.
    fn evaluate(&mut self, job: &CycleJob, lost: &mut (u64, Option<Error>)) -> Result<Vec<CounterRange>> {
        if job.image.is_empty() {
            // A dropped cycle (Evaluator::skip): its auto ranges' numbers only.
            self.auto_ranges_before += job.dropped as u64;
            return Ok(Vec::new());
        }
        let image = job.image.bytes();
        let count = job.image.range_count(&self.cupti)?;
        let names: Vec<&str> = self.metric_names.iter().map(String::as_str).collect();
        let base = self.auto_ranges_before;
        let mut ranges = Vec::with_capacity(count);
        for index in 0..count {
            let read = self
                .host
                .range_name(image, index, "/")
                .and_then(|raw| self.host.evaluate(image, index, &names).map(|values| (raw, values)));
            let (raw_name, values) = match read {
                Ok(read) => read,
                Err(e) => {
                    lost.0 += 1;
                    lost.1.get_or_insert(e);
                    continue;
                }
            };
            let name = match (self.range_mode, raw_name.parse::<u64>()) {
                (RangeMode::Auto, Ok(n)) if n >= base => (n - base).to_string(),
                // An auto range of an earlier cycle that was dropped: not this cycle's.
                (RangeMode::Auto, Ok(_)) => continue,
                // A nested user range is named by its path; gmprof's own name is the last part.
                (RangeMode::User, _) => raw_name.rsplit('/').next().unwrap_or_default().to_owned(),
                _ => raw_name,
            };
            ranges.push(CounterRange { cycle: job.cycle, index: index as u32, name, values });
        }
        self.auto_ranges_before += (count + job.dropped) as u64;
        if tracing::enabled!(tracing::Level::DEBUG) {
            let names: Vec<&str> = ranges.iter().take(16).map(|r| r.name.as_str()).collect();
            tracing::debug!(
                cycle = job.cycle,
                ranges = ranges.len(),
                dropped = job.dropped,
                ?names,
                "gmprof: counter image evaluated"
            );
        }
        Ok(ranges)
    }

    fn run(mut self, jobs: Receiver<CycleJob>, returned: mpsc::Sender<CounterDataImage>) -> EvaluatorOutput {
        let mut output = EvaluatorOutput {
            cycles: Vec::new(),
            errors: Vec::new(),
            lost_ranges: 0,
            evaluate: Duration::ZERO,
            ranges: 0,
            host: None,
            images: Vec::new(),
        };
        for job in jobs {
            let t0 = Instant::now();
            let mut lost = (0, None);
            let lost_all = |output: &mut EvaluatorOutput, why: String| {
                output.lost_ranges += job.expected;
                output.errors.push(format!(
                    "counter cycle {}: {why}: the counters of its {} range(s) are dropped (counted in the dropped \
                     counter ranges) and left blank",
                    job.cycle, job.expected
                ));
            };
            match catch_unwind(AssertUnwindSafe(|| self.evaluate(&job, &mut lost))) {
                Ok(Ok(ranges)) => {
                    output.ranges += ranges.len() as u64;
                    self.evaluated.lock().push((job.cycle, ranges));
                }
                Ok(Err(e)) => lost_all(&mut output, format!("evaluation failed ({e})")),
                Err(_) => lost_all(&mut output, "an internal error in gmprof's evaluator lost them".into()),
            }
            self.processed.fetch_add(1, std::sync::atomic::Ordering::Release);
            if let (n @ 1.., Some(e)) = lost {
                output.lost_ranges += n;
                output.errors.push(format!(
                    "counter cycle {}: {n} counter range(s) could not be evaluated ({e}): they are dropped (counted in \
                     the dropped counter ranges) and their launches or ranges left blank",
                    job.cycle
                ));
            }
            output.evaluate += t0.elapsed();
            // The launching side may be gone (the session ends): keep the image instead. A
            // skipped cycle's empty image is no spare.
            if job.image.is_empty() {
                continue;
            }
            if let Err(mpsc::SendError(image)) = returned.send(job.image) {
                output.images.push(image);
            }
        }
        output.host = Some(self.host);
        output
    }
}

impl Evaluator {
    /// Starts the evaluator thread; it owns `host` until [`Evaluator::finish`].
    pub(super) fn spawn(
        cupti: Cupti,
        host: ProfilerHost,
        metric_names: Vec<String>,
        range_mode: RangeMode,
        background: bool,
    ) -> Result<Evaluator> {
        let (jobs, job_rx) = mpsc::sync_channel(MAX_IMAGES);
        let (return_tx, returned) = mpsc::channel();
        let evaluated = Evaluated::default();
        let processed = Processed::default();
        let worker = Worker {
            cupti,
            host,
            metric_names,
            range_mode,
            auto_ranges_before: 0,
            evaluated: evaluated.clone(),
            processed: processed.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("gmprof-evaluator".into())
            .spawn(move || worker.run(job_rx, return_tx))
            .map_err(|e| Error::InvalidState(format!("could not start gmprof's counter evaluator thread: {e}")))?;
        Ok(Evaluator {
            jobs: Some(jobs),
            evaluated,
            processed,
            sent: std::collections::VecDeque::new(),
            done: 0,
            returned,
            worker: Some(handle),
            background,
            images: 1,
            spares: Vec::new(),
            stats: CycleStats::default(),
        })
    }

    /// Hands the decoded `image` of cycle `cycle` to the evaluator and leaves in its place
    /// the image to arm next (it still needs re-initializing). Waits for the evaluator only
    /// when bounded memory requires it, or always when background evaluation is off. If the
    /// evaluator is gone, `image` stays as it was and an error says why.
    pub(super) fn hand_off(
        &mut self,
        cycle: u32,
        dropped: usize,
        expected: u64,
        image: &mut CounterDataImage,
    ) -> Result<()> {
        let t0 = Instant::now();
        let Some(jobs) = self.jobs.as_ref() else {
            return Err(Error::InvalidState("the counter evaluator has finished".into()));
        };
        let len = image.len();
        let job = CycleJob { cycle, image: std::mem::take(image), dropped, expected };
        if let Err(mpsc::SendError(job)) = jobs.send(job) {
            *image = job.image;
            return Err(Error::InvalidState("gmprof's counter evaluator thread stopped".into()));
        }
        self.sent.push_back(cycle);
        self.stats.cycles += 1;
        self.spares.extend(self.returned.try_iter());
        let spare = if !self.background {
            // Synchronous: the evaluation is part of the cycle, as if done right here.
            self.wait_for_image(false)
        } else if let Some(spare) = self.spares.pop() {
            Ok(spare)
        } else if self.images < MAX_IMAGES {
            // The second image, made once: zero pages until the re-arm initializes it.
            self.images += 1;
            Ok(CounterDataImage::zeroed(len))
        } else {
            self.wait_for_image(true)
        };
        self.stats.hand_off += t0.elapsed();
        *image = spare?;
        Ok(())
    }

    fn wait_for_image(&mut self, count_wait: bool) -> Result<CounterDataImage> {
        if let Some(image) = self.spares.pop() {
            return Ok(image);
        }
        let t0 = Instant::now();
        let image = self
            .returned
            .recv()
            .map_err(|_| Error::InvalidState("gmprof's counter evaluator thread stopped".into()))?;
        if count_wait {
            self.stats.waits += 1;
            self.stats.waited += t0.elapsed();
        }
        Ok(image)
    }

    /// The cycles evaluated since the last call, in cycle order (a checkpoint's counters).
    pub(super) fn take_evaluated(&self) -> Vec<(u32, Vec<CounterRange>)> {
        std::mem::take(&mut *self.evaluated.lock())
    }

    /// The first cycle whose counters are not known yet, with cycle `running` being filled:
    /// the oldest cycle handed over and not done, else `running`. Every cycle before it was
    /// evaluated (its counter ranges are in [`Evaluator::take_evaluated`], read after this),
    /// failed, or was dropped (its counters are missing). A streamed run's drain holds back
    /// what waits for a later cycle.
    pub(super) fn settled_below(&mut self, running: u32) -> u32 {
        let processed = self.processed.load(std::sync::atomic::Ordering::Acquire);
        while self.done < processed && self.sent.pop_front().is_some() {
            self.done += 1;
        }
        self.sent.front().copied().unwrap_or(running).min(running)
    }

    /// Cycle `cycle` was dropped before its image could be handed over: the evaluator counts
    /// its `ranges` auto ranges (CUPTI numbers them on from the enable) without evaluating
    /// anything.
    pub(super) fn skip(&mut self, cycle: u32, ranges: u64) {
        if let Some(jobs) = self.jobs.as_ref() {
            let job = CycleJob { cycle, image: CounterDataImage::default(), dropped: ranges as usize, expected: 0 };
            if jobs.send(job).is_ok() {
                self.sent.push_back(cycle);
            }
        }
    }

    /// Waits for every handed-over cycle and stops the thread (the evaluator stays, stopped).
    pub(super) fn finish(&mut self) -> EvaluatorOutput {
        self.stop()
    }

    fn stop(&mut self) -> EvaluatorOutput {
        drop(self.jobs.take());
        let mut output = match self.worker.take().map(JoinHandle::join) {
            Some(Ok(output)) => output,
            _ => EvaluatorOutput {
                cycles: Vec::new(),
                errors: vec!["gmprof's counter evaluator thread was lost; counters of its cycles are missing".into()],
                lost_ranges: 0,
                evaluate: Duration::ZERO,
                ranges: 0,
                host: None,
                images: Vec::new(),
            },
        };
        output.images.extend(self.returned.try_iter());
        output.images.append(&mut self.spares);
        output.cycles = self.take_evaluated();
        output
    }
}

impl Drop for Evaluator {
    /// A session dropped without `finish`: let the thread end (its results are dropped).
    fn drop(&mut self) {
        if self.worker.is_some() {
            let _ = self.stop();
        }
    }
}

impl CycleStats {
    /// One line for the log: where a cycle's time went on the launching thread.
    pub(super) fn describe(&self, output: &EvaluatorOutput, background: bool) -> String {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / self.cycles.max(1) as f64;
        format!(
            "{} counter cycle(s); per cycle on the launching thread: stop {:.0} us, decode {:.0} us, hand-off {:.0} us \
             ({} wait(s), {:.0} us in total), re-arm {:.0} us, start {:.0} us; longest cycle {:.0} us; evaluation {} \
             {:.0} us per cycle ({} ranges in total)",
            self.cycles,
            per(self.stop),
            per(self.decode),
            per(self.hand_off),
            self.waits,
            self.waited.as_secs_f64() * 1e6,
            per(self.rearm),
            per(self.start),
            self.longest.as_secs_f64() * 1e6,
            if background { "in the background" } else { "on the launching thread" },
            per(output.evaluate),
            output.ranges
        )
    }
}
