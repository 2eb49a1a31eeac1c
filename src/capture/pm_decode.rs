//! The PM sampling decode thread: drains CUPTI's hardware buffer, evaluates the samples on
//! a pool of threads and keeps them in time order.
//!
//! Layer 3, below [`crate::capture::pm_sampling`] (which configures and starts the sampler
//! and hands its objects over). Two seams keep it testable without a GPU: [`PmSource`] (the
//! sampler and its counter data image: decode, sample times, start, stop) and
//! [`SampleEvaluator`] (a host object that turns one sample of an image into metric
//! values). The CUPTI implementations are [`CuptiSource`] and [`HostEvaluator`].
//!
//! **Pipelined and parallel.** A drain decodes into the image, after the samples it already
//! holds, and reads the new samples' times. Once the image is half full (or full, or sampling
//! has stopped) it is moved out (an empty spare takes its place) and handed to the evaluation
//! pool, whose threads each own a host object and evaluate a contiguous share of the samples.
//! The drain then keeps the *previous* batch's values (waiting for them if need be) and goes on
//! decoding: CUPTI's decode, on this thread, and the host's evaluation, on the pool, overlap.
//! On an H100 with the default metrics a sample costs about 35 µs to decode and 13 to 28 µs
//! to evaluate (BENCHMARKS.md), so evaluating on the decode thread bounded a long run to
//! about 70 µs per sample; now the decode alone bounds it.
//!
//! **Images that do not fill.** When a decode fills the image, CUPTI drops the rest of the
//! records it read from the hardware buffer: on an H100 at 20 µs each of 5 such fills lost 0.5
//! to 22 ms of samples in a 20-step llm.c run (2 666 samples), with no overflow reported. So
//! an image spans [`crate::capture::pm_sampling::IMAGE_SPAN`] of samples and is handed over
//! half full, which leaves half of it for a drain that comes late; a fill that still happens is
//! counted and the next images are twice as large ([`PmSource::grow`]). Handing over half-full
//! images also pays an image's initialization once per half image, not once per drain.
//!
//! **Never stops for good.** The sampler overwrites its oldest records when its buffer is
//! full, so an overflow loses samples (a gap in the sample times, counted as missing) but
//! not the rest of the run. A failed decode or a sample that cannot be evaluated is counted
//! and said in [`PmCapture::errors`]; the thread goes on with the next drain and gives up
//! decoding only after [`MAX_CONSECUTIVE_FAILURES`] failed drains in a row. What was kept is always returned, and the final stop is asked of a
//! sampler that is running, so a finish after an overflow does not fail the outputs.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::checked::host::ProfilerHost;
use crate::checked::pm_sampling::{DecodeStop, Decoded, PmCounterData, PmSampler};
use crate::checked::Cupti;
use crate::error::{Error, Result};
use crate::model::pm::{PmCapture, PmSample};

/// Failed drains in a row after which decoding stops (the sampler is stopped).
pub const MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// Images one periodic drain fills at most before it looks at the stop request again.
pub const MAX_IMAGES_PER_DRAIN: u32 = 4;

/// Images the last drain fills at most (after the stop the buffer holds what it holds).
const MAX_IMAGES_AFTER_STOP: u32 = 100_000;

/// What the decode thread asks of the sampler and its counter data image.
pub trait PmSource: Send {
    /// Decodes the hardware buffer into the image, after the samples it holds.
    fn decode(&mut self) -> Result<Decoded>;
    /// Samples of the image that are complete.
    fn completed(&self) -> Result<usize>;
    /// Samples the image holds at most.
    fn capacity(&self) -> usize;
    /// Makes the images created from now on twice as large (up to a limit); called when a
    /// decode filled the image.
    fn grow(&mut self);
    /// Start and end (CUPTI clock, ns) of sample `index` of the image.
    fn sample_times(&self, index: usize) -> Result<(u64, u64)>;
    /// Moves the decoded image out, for evaluation on other threads, and puts an empty one
    /// in its place (a spare given back, or a new one).
    fn take_image(&mut self) -> Result<Vec<u8>>;
    /// An image evaluated and no longer needed, to be used again.
    fn give_back(&mut self, image: Vec<u8>);
    /// Empties the image for the next decode.
    fn reset_image(&mut self) -> Result<()>;
    /// Stops sampling.
    fn stop(&mut self) -> Result<()>;
    /// The CUPTI clock now, when it can be read.
    fn now(&self) -> Option<u64>;
}

/// Evaluates samples of a decoded image to one value per metric; one per pool thread.
pub trait SampleEvaluator: Send {
    /// The values of sample `index` of `image`.
    fn evaluate(&mut self, image: &[u8], index: usize) -> Result<Vec<f64>>;
}

/// Spare images kept for reuse: the one being evaluated comes back while the next is
/// decoded into.
const SPARE_IMAGES: usize = 2;

/// The CUPTI sampler and its counter data images.
pub struct CuptiSource {
    /// The CUPTI library (for the clock).
    pub cupti: Cupti,
    /// The sampler.
    pub sampler: PmSampler,
    /// The counter data image decodes go to.
    pub image: PmCounterData,
    /// The metrics, for a new image.
    pub metrics: Vec<String>,
    /// Samples a new image holds.
    pub image_samples: u32,
    /// Samples the current image holds.
    pub image_capacity: u32,
    /// The most samples [`PmSource::grow`] makes an image hold.
    pub max_image_samples: u32,
    /// Images given back, to be initialized and used again.
    pub spares: Vec<Vec<u8>>,
}

impl PmSource for CuptiSource {
    fn decode(&mut self) -> Result<Decoded> {
        self.sampler.decode(&mut self.image)
    }
    fn completed(&self) -> Result<usize> {
        Ok(self.image.info(&self.cupti)?.completed)
    }
    fn capacity(&self) -> usize {
        self.image_capacity as usize
    }
    fn grow(&mut self) {
        let grown = self.image_samples.saturating_mul(2).min(self.max_image_samples.max(self.image_samples));
        if grown != self.image_samples {
            self.image_samples = grown;
            // Spares of the old size are not used again.
            self.spares.clear();
        }
    }
    fn sample_times(&self, index: usize) -> Result<(u64, u64)> {
        self.sampler.sample_times(&self.image, index)
    }
    fn take_image(&mut self) -> Result<Vec<u8>> {
        let next = match self.spares.pop() {
            Some(bytes) => self.sampler.reuse_counter_data(bytes)?,
            None => {
                let refs: Vec<&str> = self.metrics.iter().map(String::as_str).collect();
                self.sampler.create_counter_data(&refs, self.image_samples)?
            }
        };
        self.image_capacity = self.image_samples;
        Ok(std::mem::replace(&mut self.image, next).into_bytes())
    }
    fn give_back(&mut self, image: Vec<u8>) {
        // Only images of the current size (after a `grow`, the older ones are dropped).
        if self.spares.len() < SPARE_IMAGES
            && self.image_capacity == self.image_samples
            && image.len() == self.image.bytes().len()
        {
            self.spares.push(image);
        }
    }
    fn reset_image(&mut self) -> Result<()> {
        self.sampler.initialize_counter_data(&mut self.image)
    }
    fn stop(&mut self) -> Result<()> {
        self.sampler.stop()
    }
    fn now(&self) -> Option<u64> {
        crate::checked::activity::timestamp(&self.cupti).ok()
    }
}

/// A PM sampling host object with the session's metrics added.
pub struct HostEvaluator {
    /// The host object (its metrics added).
    pub host: ProfilerHost,
    /// The metric names, in value order.
    pub names: Vec<String>,
}

impl SampleEvaluator for HostEvaluator {
    fn evaluate(&mut self, image: &[u8], index: usize) -> Result<Vec<f64>> {
        let refs: Vec<&str> = self.names.iter().map(String::as_str).collect();
        self.host.evaluate(image, index, &refs)
    }
}

/// Time the decode thread and the pool spent, by step.
#[derive(Clone, Copy, Debug, Default)]
pub struct DrainTiming {
    /// Drains of the hardware buffer.
    pub drains: u64,
    /// In CUPTI's decode (decode thread).
    pub decode: Duration,
    /// Reading sample times and swapping in an empty image (decode thread).
    pub handoff: Duration,
    /// Evaluating, summed over the pool's threads.
    pub evaluate: Duration,
    /// The decode thread waiting for the pool's values.
    pub waiting: Duration,
    /// Samples decoded.
    pub samples: u64,
    /// The longest drain.
    pub longest: Duration,
    /// The longest single decode call (CUPTI's).
    pub longest_decode: Duration,
    /// Images handed to the pool.
    pub images: u64,
    /// Evaluation threads.
    pub threads: usize,
}

impl DrainTiming {
    /// The log line at the end of a session.
    pub fn describe(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let us_per = |d: Duration| d.as_secs_f64() * 1e6 / self.samples.max(1) as f64;
        format!(
            "PM sampling: {} drain(s) of the hardware buffer, {} sample(s); decode {:.1} ms ({:.1} us per sample), \
             hand-off {:.1} ms ({:.1} us per sample), evaluation {:.1} ms on {} thread(s) ({:.1} us per sample), \
             waiting for evaluation {:.1} ms; longest drain {:.1} ms (longest decode call {:.1} ms); {} image(s) handed over",
            self.drains,
            self.samples,
            ms(self.decode),
            us_per(self.decode),
            ms(self.handoff),
            us_per(self.handoff),
            ms(self.evaluate),
            self.threads,
            us_per(self.evaluate),
            ms(self.waiting),
            ms(self.longest),
            ms(self.longest_decode),
            self.images
        )
    }

    /// The decode thread's time per sample (decode and hand-off), ns: what bounds the
    /// interval once evaluation runs on the pool.
    pub fn thread_ns_per_sample(&self) -> u64 {
        ((self.decode + self.handoff).as_nanos() as u64).checked_div(self.samples).unwrap_or(0)
    }

    /// The pool's evaluation time per sample and thread, ns.
    pub fn evaluate_ns_per_sample(&self) -> u64 {
        let per_thread = self.evaluate.as_nanos() as u64 / self.threads.max(1) as u64;
        per_thread.checked_div(self.samples).unwrap_or(0)
    }
}

/// Decides which decoded samples are kept and counts the others and the gaps.
#[derive(Clone, Copy, Debug, Default)]
pub struct SampleKeeper {
    /// The interval, when it is in time.
    pub interval_ns: Option<u64>,
    /// The end of the last kept sample.
    pub last_end: Option<u64>,
}

/// A sample longer than this many intervals is left out: the first sample CUPTI returns
/// spans the time before sampling started (951 ms at a 20 µs interval on an H100).
const MAX_SAMPLE_INTERVALS: u64 = 4;

impl SampleKeeper {
    /// Keeps one sample, or counts it as empty; counts the samples missing before it.
    pub fn keep(&mut self, capture: &mut PmCapture, start: u64, end: u64, values: Vec<f64>) {
        let too_long = self.interval_ns.is_some_and(|i| end.saturating_sub(start) > MAX_SAMPLE_INTERVALS * i);
        if end <= start || too_long {
            // Zero-length samples (at the start of sampling) cover no time; an over-long one
            // averages over time nobody sampled.
            capture.empty_samples += 1;
            return;
        }
        if let (Some(prev), Some(interval)) = (self.last_end, self.interval_ns) {
            let gap = start.saturating_sub(prev);
            if gap * 2 >= interval {
                capture.missing_samples += ((gap + interval / 2) / interval).max(1);
            }
        }
        self.last_end = Some(end);
        let values = values.into_iter().map(|v| v.is_finite().then_some(v)).collect();
        capture.samples.push(PmSample { start_ns: start, end_ns: end, values });
    }
}

/// At the end of a session: samples the sampler never recorded between the last kept one and
/// the stop (after a hardware-buffer overflow CUPTI may record nothing more) are counted as
/// missing, and a decode thread slower than the interval is said.
pub fn account_for_the_end(
    capture: &mut PmCapture,
    last_end: Option<u64>,
    stopped_at: Option<u64>,
    interval_ns: Option<u64>,
    timing: &DrainTiming,
) {
    let Some(interval) = interval_ns.filter(|i| *i > 0) else { return };
    if let (Some(stop), Some(last)) = (stopped_at, last_end) {
        let gap = stop.saturating_sub(last);
        if gap >= 2 * interval {
            let lost = gap / interval;
            capture.missing_samples += lost;
            let why = if capture.hw_buffer_overflows > 0 {
                "; after the hardware buffer overflowed, CUPTI recorded no more"
            } else {
                ""
            };
            capture.errors.push(format!(
                "no samples for the last {:.1} ms of the session ({lost} sample(s) missing){why}",
                gap as f64 / 1e6
            ));
        }
    }
    let thread = timing.thread_ns_per_sample();
    let pool = timing.evaluate_ns_per_sample();
    let bound = thread.max(pool);
    if timing.samples >= 1000 && bound > interval {
        let which = if thread >= pool {
            format!("decoding took {:.1} us per sample", thread as f64 / 1e3)
        } else {
            format!("evaluating took {:.1} us per sample on each of {} thread(s)", pool as f64 / 1e3, timing.threads)
        };
        capture.errors.push(format!(
            "{which}, longer than the {:.1} us interval: a long run fills the hardware buffer and loses samples; \
             an interval of {} us or more keeps up",
            interval as f64 / 1e3,
            (bound * 3 / 2).div_ceil(1000).next_multiple_of(10)
        ));
    }
}

/// One batch handed to the pool: an image copy and the samples to evaluate in it.
struct Batch {
    /// The image (shared with the pool's jobs until they end), given back once kept.
    image: Arc<Vec<u8>>,
    /// (index in the image, start, end), in time order.
    samples: Vec<(usize, u64, u64)>,
    /// One receiver per share, in order, with the share's number of samples: its values
    /// (or errors) and its time.
    shares: Vec<(usize, mpsc::Receiver<Share>)>,
}

/// What one pool thread gives back for its share of a batch.
struct Share {
    values: Vec<std::result::Result<Vec<f64>, String>>,
    took: Duration,
}

/// A job for one pool thread.
struct Job {
    image: Arc<Vec<u8>>,
    indices: Vec<usize>,
    reply: mpsc::Sender<Share>,
}

/// Threads that each own an evaluator.
struct Pool {
    senders: Vec<mpsc::Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    fn new(evaluators: Vec<Box<dyn SampleEvaluator>>) -> Result<Pool> {
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for (i, mut evaluator) in evaluators.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel::<Job>();
            let thread = std::thread::Builder::new()
                .name(format!("gmprof-pm-eval-{i}"))
                .spawn(move || {
                    for Job { image, indices, reply } in rx {
                        let t0 = Instant::now();
                        let values = indices
                            .iter()
                            .map(|&index| evaluator.evaluate(&image, index).map_err(|e| e.to_string()))
                            .collect();
                        // The image goes before the reply, so that the decode thread gets it
                        // back whole.
                        drop(image);
                        // The decode thread may have gone (it panicked): nothing to tell.
                        let _ = reply.send(Share { values, took: t0.elapsed() });
                    }
                })
                .map_err(|e| Error::InvalidState(format!("could not start a PM sampling evaluation thread: {e}")))?;
            senders.push(tx);
            threads.push(thread);
        }
        if senders.is_empty() {
            return Err(Error::InvalidConfig("PM sampling needs at least one evaluation thread".into()));
        }
        Ok(Pool { senders, threads })
    }

    /// Splits `samples` into contiguous shares, one per thread that gets any.
    fn submit(&self, image: Vec<u8>, samples: Vec<(usize, u64, u64)>) -> Batch {
        let image = Arc::new(image);
        let per = samples.len().div_ceil(self.senders.len()).max(1);
        let mut shares = Vec::new();
        for (chunk, sender) in samples.chunks(per).zip(&self.senders) {
            let (reply, rx) = mpsc::channel();
            let job = Job { image: Arc::clone(&image), indices: chunk.iter().map(|s| s.0).collect(), reply };
            if sender.send(job).is_ok() {
                shares.push((chunk.len(), rx));
            } else {
                // A thread that is gone: its share comes back as errors.
                let (tx, rx) = mpsc::channel();
                let _ = tx.send(Share {
                    values: vec![Err("the evaluation thread ended".into()); chunk.len()],
                    took: Duration::ZERO,
                });
                shares.push((chunk.len(), rx));
            }
        }
        Batch { image, samples, shares }
    }

    /// Ends the threads (dropping their evaluators) and waits for them.
    fn close(self) {
        drop(self.senders);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// The decode thread's state.
pub struct Decoder<S: PmSource> {
    source: S,
    pool: Option<Pool>,
    /// What was kept so far; shared with the session for checkpoints.
    capture: Arc<Mutex<PmCapture>>,
    keeper: SampleKeeper,
    /// The batch the pool is evaluating.
    in_flight: Option<Batch>,
    /// The samples of the current image whose times were read: (index, start, end). They are
    /// handed over with the image.
    held: Vec<(usize, u64, u64)>,
    /// Sampling was stopped for the last drain: no restart after an overflow.
    stopped: bool,
    /// The sampler runs.
    running: bool,
    /// Failed drains in a row.
    failures: u32,
    /// Decoding was given up.
    gave_up: bool,
    /// Samples that could not be evaluated, and the first error.
    unevaluated: (u64, Option<String>),
    timing: DrainTiming,
    stopped_at: Option<u64>,
    interval_ns: Option<u64>,
}

impl<S: PmSource> Decoder<S> {
    /// A decoder of `source` (sampling, started) evaluating on one thread per evaluator.
    pub fn new(
        source: S,
        evaluators: Vec<Box<dyn SampleEvaluator>>,
        capture: Arc<Mutex<PmCapture>>,
        interval_ns: Option<u64>,
    ) -> Result<Decoder<S>> {
        let threads = evaluators.len();
        Ok(Decoder {
            source,
            pool: Some(Pool::new(evaluators)?),
            capture,
            keeper: SampleKeeper { interval_ns, last_end: None },
            in_flight: None,
            held: Vec::new(),
            stopped: false,
            running: true,
            failures: 0,
            gave_up: false,
            unevaluated: (0, None),
            timing: DrainTiming { threads, ..Default::default() },
            stopped_at: None,
            interval_ns,
        })
    }

    /// One periodic drain (`last`: sampling stops first and everything is kept). Returns the
    /// error of the final stop, when the sampler was running and it failed.
    pub fn step(&mut self, last: bool) -> Option<String> {
        let mut final_error = None;
        if last {
            self.stopped = true;
            self.stopped_at = self.source.now();
            if self.running {
                self.running = false;
                if let Err(e) = self.source.stop() {
                    self.capture.lock().errors.push(format!("stopping PM sampling: {e}"));
                    final_error = Some(e.to_string());
                }
            }
        }
        // The last drain is tried again after a failure (up to the failures allowed in a
        // row): there is no later drain for what the hardware buffer still holds.
        while !self.gave_up {
            let started = Instant::now();
            self.timing.drains += 1;
            let drained = self.drain();
            self.timing.longest = self.timing.longest.max(started.elapsed());
            match drained {
                Ok(()) => {
                    self.failures = 0;
                    break;
                }
                Err(e) => {
                    self.fail(format!("decoding: {e}"));
                    if !last {
                        break;
                    }
                    if self.gave_up {
                        final_error.get_or_insert(format!("decoding the last samples: {e}"));
                    }
                }
            }
        }
        if last {
            self.collect_in_flight();
        }
        final_error
    }

    /// Counts a failed drain or restart; gives up after [`MAX_CONSECUTIVE_FAILURES`].
    fn fail(&mut self, what: String) {
        self.failures += 1;
        let giving_up = self.failures >= MAX_CONSECUTIVE_FAILURES;
        let note = if giving_up {
            format!("{what}; {MAX_CONSECUTIVE_FAILURES} failures in a row: decoding stopped, the samples kept so far are reported")
        } else {
            format!("{what} (decoding goes on)")
        };
        self.capture.lock().errors.push(note);
        if giving_up {
            self.gave_up = true;
            if self.running {
                self.running = false;
                let _ = self.source.stop();
            }
        } else {
            // An image a failed decode left half written is not decoded into again; the
            // samples it completed before are handed over with it.
            if self.held.is_empty() || self.hand_off().is_err() {
                self.held.clear();
                let _ = self.source.reset_image();
            }
        }
    }

    /// Moves the image out and hands it to the pool with its samples; keeps the batch before.
    fn hand_off(&mut self) -> Result<()> {
        let samples = std::mem::take(&mut self.held);
        let image = self.source.take_image()?;
        let Some(pool) = self.pool.as_ref() else {
            return Err(Error::InvalidState("the PM sampling evaluation threads have ended".into()));
        };
        self.timing.images += 1;
        let batch = pool.submit(image, samples);
        if let Some(previous) = self.in_flight.replace(batch) {
            self.keep_batch(previous);
        }
        Ok(())
    }

    /// Decodes until the hardware buffer is empty (the image was the limit: again), handing
    /// each image to the pool once it is half full, full, or sampling has stopped.
    fn drain(&mut self) -> Result<()> {
        // While sampling runs, a drain that is behind would never end (the sampler keeps
        // writing, idle GPU time included, and overwrites what the decode has not reached):
        // a few images at most, then the stop request is looked at again. After the stop
        // the buffer is finite; the bound only guards a stop that failed.
        let most = if self.stopped { MAX_IMAGES_AFTER_STOP } else { MAX_IMAGES_PER_DRAIN };
        for _ in 0..most {
            let t0 = Instant::now();
            let decoded = self.source.decode()?;
            let took = t0.elapsed();
            self.timing.decode += took;
            self.timing.longest_decode = self.timing.longest_decode.max(took);
            if decoded.overflow {
                self.capture.lock().hw_buffer_overflows += 1;
            }
            let full = decoded.stop == DecodeStop::CounterDataFull;
            if full {
                // CUPTI dropped what did not fit: counted, and the next images are larger.
                self.capture.lock().counter_data_full += 1;
                self.source.grow();
            }
            let t0 = Instant::now();
            let completed = self.source.completed()?;
            let read = self.held.last().map_or(0, |h| h.0 + 1);
            for index in read..completed {
                let (start, end) = self.source.sample_times(index)?;
                self.held.push((index, start, end));
            }
            self.timing.samples += completed.saturating_sub(read) as u64;
            let half_full = completed * 2 >= self.source.capacity();
            let waited = self.timing.waiting;
            if !self.held.is_empty() && (full || self.stopped || half_full) {
                self.hand_off()?;
            } else if full {
                // Full without a complete sample: nothing to keep, start it again.
                self.source.reset_image()?;
            }
            // Waiting for the pool (in `keep_batch`) is counted apart.
            self.timing.handoff += t0.elapsed().saturating_sub(self.timing.waiting - waited);
            // An overflow (the sampler overwrites its oldest records: see
            // `PmSampler::set_config`) is counted; the samples lost show as a gap.
            if !full {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Waits for the batch in flight, if any, and keeps it.
    fn collect_in_flight(&mut self) {
        if let Some(batch) = self.in_flight.take() {
            self.keep_batch(batch);
        }
    }

    fn keep_batch(&mut self, batch: Batch) {
        let t0 = Instant::now();
        let mut values = Vec::with_capacity(batch.samples.len());
        for (len, rx) in batch.shares {
            match rx.recv() {
                Ok(share) if share.values.len() == len => {
                    self.timing.evaluate += share.took;
                    values.extend(share.values);
                }
                _ => values.extend(std::iter::repeat_n(Err("the evaluation thread ended".to_owned()), len)),
            }
        }
        self.timing.waiting += t0.elapsed();
        let Batch { image, samples, .. } = batch;
        if let Ok(image) = Arc::try_unwrap(image) {
            self.source.give_back(image);
        }
        let mut capture = self.capture.lock();
        let mut values = values.into_iter();
        for (_, start, end) in samples {
            match values.next() {
                Some(Ok(v)) => self.keeper.keep(&mut capture, start, end, v),
                Some(Err(e)) => {
                    self.unevaluated.0 += 1;
                    self.unevaluated.1.get_or_insert(e);
                }
                None => {
                    self.unevaluated.0 += 1;
                    self.unevaluated.1.get_or_insert_with(|| "no value came back".into());
                }
            }
        }
    }

    /// Ends the pool and accounts for the end; returns the source and the timing.
    pub fn finish(mut self) -> (S, DrainTiming) {
        self.collect_in_flight();
        if let Some(pool) = self.pool.take() {
            pool.close();
        }
        let mut capture = self.capture.lock();
        if self.unevaluated.0 > 0 {
            capture.errors.push(format!(
                "{} sample(s) could not be evaluated and are left out: {}",
                self.unevaluated.0,
                self.unevaluated.1.as_deref().unwrap_or("")
            ));
        }
        account_for_the_end(&mut capture, self.keeper.last_end, self.stopped_at, self.interval_ns, &self.timing);
        drop(capture);
        (self.source, self.timing)
    }
}

#[cfg(test)]
#[path = "pm_decode_tests.rs"]
mod tests;
