//! PM sampling capture: the sampler of one device and its decode thread.
//!
//! [`PmSession::start`] checks the metrics against the chip's PM sampling tables, configures
//! CUPTI's sampler ([`crate::checked::pm_sampling`]), makes one host object per evaluation
//! thread and starts sampling; a thread of its own then drains the hardware buffer every
//! [`PmSamplingConfig::decode_period`] ([`crate::capture::pm_decode`]: CUPTI's decode on
//! that thread, evaluation on a pool, samples kept in time order, overflows, gaps and
//! failures counted). [`PmSession::finish`] stops sampling, decodes what is left and
//! returns the [`PmCapture`] that [`crate::analysis::pm_fold`] folds into the report.
//!
//! It runs beside trace mode (activity only) with no replay; whether it can run beside the
//! range profiler is CUPTI's decision, and [`PmSession::start`] says what to do when not.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;

use parking_lot::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::capture::metrics::MetricCatalog;
use crate::capture::pm_decode::{CuptiSource, Decoder, HostEvaluator, SampleEvaluator};
use crate::capture::pm_interval;
use crate::checked::host::ProfilerHost;
use crate::checked::pm_sampling::{self as pm, PmSampler, Trigger};
use crate::checked::target::ProfilerApi;
use crate::checked::Cupti;
use crate::error::{Error, Result};
use crate::model::pm::{PmCapture, PmInterval, PmMetric, PmSample};

/// The metrics sampled unless told otherwise (names from GH100's PM sampling tables; the
/// CPU test `gh100_samples_the_default_pm_metrics_in_one_pass` checks them): DRAM read and
/// write throughput in bytes per second; SM activity (`sm__throughput` itself needs 19
/// passes on GH100, and PM sampling has one), tensor pipe activity and GR active, in % of
/// peak.
pub const DEFAULT_PM_METRICS: [&str; 5] = [
    "dram__bytes_read.sum.per_second",
    "dram__bytes_write.sum.per_second",
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
];

/// Names some chips use for a default metric: the GDDR7 Blackwell chips (GB20x) count
/// DRAM bytes as `dram__bytes_op_read`/`_write` in their PM sampling tables.
pub const METRIC_ALTERNATIVES: [(&str, &str); 2] = [
    ("dram__bytes_read.sum.per_second", "dram__bytes_op_read.sum.per_second"),
    ("dram__bytes_write.sum.per_second", "dram__bytes_op_write.sum.per_second"),
];

/// Each name as `host` (a PM sampling host object) knows it: the name itself, or its
/// [`METRIC_ALTERNATIVES`] entry when only that one exists; with its unit. Unknown names come
/// back in the error, each with the closest names of the chip's PM sampling tables.
pub fn resolve_metrics(cupti: &Cupti, host: &ProfilerHost, names: &[String]) -> Result<Vec<PmMetric>> {
    let mut metrics = Vec::with_capacity(names.len());
    let mut unknown = Vec::new();
    let mut first_error = None;
    for name in names {
        let alternative = METRIC_ALTERNATIVES.iter().find(|(n, _)| n == name).map(|(_, a)| *a);
        let found = std::iter::once(name.as_str()).chain(alternative).find_map(|n| {
            host.metric_properties(n).map_err(|e| first_error.get_or_insert(e)).ok().map(|p| PmMetric::new(n, p.unit()))
        });
        match found {
            Some(m) => metrics.push(m),
            None => unknown.push(name.clone()),
        }
    }
    if !unknown.is_empty() {
        let refs: Vec<&str> = unknown.iter().map(String::as_str).collect();
        let catalog = MetricCatalog::for_pm_sampling(cupti, host.chip()).map(|c| c.validate(&refs));
        let unknown_names = matches!(catalog, Ok(Err(Error::UnknownMetrics { .. })));
        if let (false, Some(e)) = (unknown_names, first_error) {
            // The chip's tables know every name, or could not be read either: a call
            // failed, not the names.
            return Err(e);
        }
        let described = match catalog {
            Ok(Err(Error::UnknownMetrics { unknown, .. })) => unknown
                .iter()
                .map(|u| match u.suggestions.first() {
                    Some(best) => format!("{} (did you mean {best}?)", u.name),
                    None => u.name.clone(),
                })
                .collect::<Vec<_>>(),
            _ => unknown,
        };
        return Err(Error::InvalidConfig(format!(
            "chip {} cannot PM-sample {}: PM sampling has its own, smaller tables than the range profiler; \
             list them with `gmprof metrics --pm-sampling`",
            host.chip(),
            described.join(", ")
        )));
    }
    Ok(metrics)
}

/// Default sampling interval: 100 µs of GPU time. On an H100 with the default metrics
/// CUPTI's decode takes 34 to 36 µs per sample on llm.c (a sample is about 64 KiB of raw
/// records), so an interval under about 50 µs loses samples there; 100 µs keeps a margin.
/// Attribution to kernels keeps 100 µs samples within 0.7 % of per_range's DRAM bytes on
/// ranges of 1 ms or more (BENCHMARKS.md). `--pm-interval auto` measures the decode and picks
/// the interval (the two DRAM metrics sustain 20 µs).
pub const DEFAULT_INTERVAL_NS: u64 = 100_000;

/// Environment variable with the metrics to sample (`default` or a comma-separated list);
/// read by `gmprof run`'s injection and by the C ABI.
pub const PM_SAMPLING_ENV: &str = "GMPROF_PM_SAMPLING";
/// Environment variable with the interval (see [`parse_interval`]).
pub const PM_INTERVAL_ENV: &str = "GMPROF_PM_INTERVAL";

/// How to sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmSamplingConfig {
    /// Full metric names.
    pub metrics: Vec<String>,
    /// The sampling interval.
    pub interval: PmInterval,
    /// Bytes of the device-side buffer the samples go to between decodes.
    pub hardware_buffer_bytes: usize,
    /// How often the decode thread drains the hardware buffer.
    pub decode_period: Duration,
    /// Samples one counter data image holds (a fuller buffer takes several decodes).
    pub max_samples_per_image: u32,
    /// `--pm-interval auto`: [`crate::capture::pm_interval`] measures the decode before
    /// sampling starts and chooses the interval (`interval` is then unused).
    pub auto_interval: bool,
    /// Threads that evaluate samples, each with a host object of its own
    /// ([`crate::capture::pm_decode`]); [`default_eval_threads`] unless
    /// [`PM_EVAL_THREADS_ENV`] says.
    pub eval_threads: usize,
}

/// Environment variable with the number of PM sampling evaluation threads.
pub const PM_EVAL_THREADS_ENV: &str = "GMPROF_PM_EVAL_THREADS";

/// Evaluation threads unless told: a quarter of the CPUs this process may use, from 1 to 4.
/// On an H100 a sample takes 13 to 28 µs to evaluate with the default metrics, so 4 threads
/// keep up with intervals the decode keeps up with; the decode stays on one thread (CUPTI's).
pub fn default_eval_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 4).clamp(1, 4)
}

impl Default for PmSamplingConfig {
    fn default() -> Self {
        PmSamplingConfig {
            metrics: DEFAULT_PM_METRICS.iter().map(|m| (*m).to_owned()).collect(),
            interval: PmInterval::TimeNs(DEFAULT_INTERVAL_NS),
            hardware_buffer_bytes: 256 << 20,
            decode_period: Duration::from_millis(20),
            max_samples_per_image: 20_000,
            eval_threads: default_eval_threads(),
            auto_interval: false,
        }
    }
}

/// The two DRAM throughput metrics of [`DEFAULT_PM_METRICS`]: what `dram` in a metric list
/// stands for. CUPTI decodes a sample of them in about 4 µs on an H100 (the five defaults
/// take 28 to 84 µs), so they sustain a 20 µs interval for per-kernel bandwidth.
pub const DRAM_PM_METRICS: [&str; 2] = [DEFAULT_PM_METRICS[0], DEFAULT_PM_METRICS[1]];

/// Parses a metric list: `default` (or empty) for [`DEFAULT_PM_METRICS`], `dram` for
/// [`DRAM_PM_METRICS`], else comma-separated full names (`default` or `dram` inside the list
/// adds theirs).
pub fn parse_metrics(list: &str) -> Vec<String> {
    let mut wanted: Vec<&str> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item.eq_ignore_ascii_case("default") {
            wanted.extend(DEFAULT_PM_METRICS);
        } else if item.eq_ignore_ascii_case("dram") {
            wanted.extend(DRAM_PM_METRICS);
        } else {
            wanted.push(item);
        }
    }
    if wanted.is_empty() {
        wanted.extend(DEFAULT_PM_METRICS);
    }
    let mut out: Vec<String> = Vec::new();
    for m in wanted {
        if !out.iter().any(|o| o == m) {
            out.push(m.to_owned());
        }
    }
    out
}

/// Parses `--pm-interval`'s value: `auto` (`None`: chosen at start,
/// [`crate::capture::pm_interval`]) or an interval ([`parse_interval`]).
pub fn parse_interval_setting(text: &str) -> Result<Option<PmInterval>> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    parse_interval(text).map(Some).map_err(|_| {
        Error::InvalidConfig(format!(
            "PM sampling interval '{text}': use auto, or e.g. 20000 (ns), 20us, 1ms or 30000cycles"
        ))
    })
}

/// Parses an interval: nanoseconds (`20000`, `20000ns`, `20us`, `1ms`) or SYSCLK cycles
/// (`30000cycles`).
pub fn parse_interval(text: &str) -> Result<PmInterval> {
    let t = text.trim().to_ascii_lowercase();
    let bad = || {
        Error::InvalidConfig(format!("PM sampling interval '{text}': use e.g. 20000 (ns), 20us, 1ms or 30000cycles"))
    };
    let (number, scale, cycles) = if let Some(n) = t.strip_suffix("cycles") {
        (n, 1, true)
    } else if let Some(n) = t.strip_suffix("ns") {
        (n, 1, false)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1_000, false)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1_000_000, false)
    } else {
        (t.as_str(), 1, false)
    };
    let value: u64 = number.trim().parse().map_err(|_| bad())?;
    let value = value.checked_mul(scale).filter(|v| *v > 0).ok_or_else(bad)?;
    Ok(if cycles { PmInterval::Cycles(value) } else { PmInterval::TimeNs(value) })
}

/// The time a counter data image spans at the interval: a drain may be up to half of it late
/// (on an H100 under llm.c, drains came up to 62 ms late) before samples are lost.
pub const IMAGE_SPAN: Duration = Duration::from_millis(160);

/// Samples one decode period may produce at most: on an H100 with the default metrics a
/// sample takes about 64 KiB of the hardware buffer (256 MiB held about 4100 samples before
/// it overflowed at a 5 µs interval), so this keeps the default buffer a quarter full.
pub const MAX_SAMPLES_PER_DECODE: u64 = 1_000;

impl PmSamplingConfig {
    /// The decode period used: [`PmSamplingConfig::decode_period`], shortened (to no less
    /// than 1 ms) so that one period produces at most [`MAX_SAMPLES_PER_DECODE`] samples
    /// when the interval is in time.
    pub fn decode_period_for_interval(&self) -> Duration {
        match self.interval {
            PmInterval::TimeNs(ns) => {
                let cap = Duration::from_nanos(ns.saturating_mul(MAX_SAMPLES_PER_DECODE)).max(Duration::from_millis(1));
                self.decode_period.min(cap)
            }
            PmInterval::Cycles(_) => self.decode_period,
        }
    }

    /// Samples a counter data image holds: [`IMAGE_SPAN`] of samples at the interval, and at
    /// least two decode periods' worth, from 256 up to
    /// [`PmSamplingConfig::max_samples_per_image`]. Images are handed over half full
    /// ([`crate::capture::pm_decode`]), so a drain may come up to half the span late before
    /// CUPTI drops samples that do not fit; the image's initialization, which grows with its
    /// size, is paid once per half image.
    pub fn image_samples(&self) -> u32 {
        let samples = match self.interval {
            PmInterval::TimeNs(ns) => {
                let span = IMAGE_SPAN.max(2 * self.decode_period_for_interval());
                (span.as_nanos() as u64).div_ceil(ns.max(1))
            }
            PmInterval::Cycles(_) => u64::from(self.max_samples_per_image),
        };
        (samples.clamp(256, u64::from(self.max_samples_per_image.max(256)))) as u32
    }

    /// The configuration the environment asks for ([`PM_SAMPLING_ENV`], [`PM_INTERVAL_ENV`]);
    /// `None` when sampling is not asked for.
    pub fn from_env() -> Result<Option<PmSamplingConfig>> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// [`PmSamplingConfig::from_env`] through `lookup` (the seam tests use).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<PmSamplingConfig>> {
        let Some(metrics) = lookup(PM_SAMPLING_ENV).filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        if matches!(metrics.trim().to_ascii_lowercase().as_str(), "0" | "false" | "off" | "no") {
            return Ok(None);
        }
        let list = if matches!(metrics.trim().to_ascii_lowercase().as_str(), "1" | "true" | "on" | "yes") {
            "default".to_owned()
        } else {
            metrics
        };
        let mut cfg = PmSamplingConfig { metrics: parse_metrics(&list), ..Default::default() };
        if let Some(interval) = lookup(PM_INTERVAL_ENV).filter(|v| !v.trim().is_empty()) {
            match parse_interval_setting(&interval)? {
                Some(fixed) => cfg.interval = fixed,
                None => cfg.auto_interval = true,
            }
        }
        if let Some(threads) = lookup(PM_EVAL_THREADS_ENV).filter(|v| !v.trim().is_empty()) {
            cfg.eval_threads = match threads.trim().parse::<usize>() {
                Ok(n) if (1..=64).contains(&n) => n,
                _ => {
                    return Err(Error::InvalidConfig(format!(
                        "{PM_EVAL_THREADS_ENV}='{threads}': give the number of PM sampling evaluation threads, 1 to 64"
                    )))
                }
            };
        }
        Ok(Some(cfg))
    }
}

/// The CUPTI objects the decode thread hands back at its end: released, or left to the
/// process's exit (see `Teardown`).
pub struct PmLeftovers {
    sampler: PmSampler,
    api: ProfilerApi,
}

impl std::fmt::Debug for PmLeftovers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmLeftovers").finish_non_exhaustive()
    }
}

impl PmLeftovers {
    /// Disables the sampler and releases the profiler API (the host objects went with the
    /// evaluation threads).
    pub fn release(self) -> Result<()> {
        self.sampler.shutdown()?;
        self.api.shutdown()
    }
}

/// The decode thread's result: the samples, the CUPTI objects to release, and the error of
/// the final stop or drain, when it failed.
type DecodeResult = (PmCapture, Option<PmLeftovers>, Option<String>);

/// The error of a sampler that could not start: beside a counter mode, CUPTI's "hardware
/// busy" becomes a message that says what to do.
fn beside_error(e: Error, beside: Option<&str>) -> Error {
    match beside {
        Some(mode) if e.is_profiler_busy() => Error::InvalidConfig(format!(
            "PM sampling cannot run beside the range profiler ({mode} mode): {e}. CUPTI lets only one of them \
             hold a device's counters (CUPTI 13.0 on an H100 refuses with CUPTI_ERROR_HARDWARE_BUSY). Sample \
             with --mode trace --pm-sampling (nested ranges get values there too) and run {mode} separately"
        )),
        _ => e,
    }
}

/// A running PM sampler and its decode thread.
#[derive(Debug)]
pub struct PmSession {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<DecodeResult>,
    kept: Arc<Mutex<PmCapture>>,
}

impl PmSession {
    /// Starts sampling device `device_index` (chip `chip`). An error names metrics the chip
    /// cannot sample, and says what to do when the counters are held by another profiler
    /// (`beside` names the counter mode running next to it, if any).
    pub fn start(
        cupti: &Cupti,
        device_index: usize,
        chip: &str,
        cfg: &PmSamplingConfig,
        beside: Option<&str>,
    ) -> Result<PmSession> {
        Self::start_sampler(cupti, device_index, chip, cfg).map_err(|e| beside_error(e, beside))
    }

    fn start_sampler(cupti: &Cupti, device_index: usize, chip: &str, cfg: &PmSamplingConfig) -> Result<PmSession> {
        let api = ProfilerApi::initialize(cupti)?;
        let availability = pm::counter_availability(cupti, device_index)?;
        let mut host = ProfilerHost::new_pm_sampling(cupti, chip, Some(&availability))?;
        let metrics = resolve_metrics(cupti, &host, &cfg.metrics)?;
        let names: Vec<String> = metrics.iter().map(|m| m.name.clone()).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        host.add_metrics(&refs)?;
        let config_image = host.config_image()?;
        let passes = host.num_passes(&config_image)?;
        if passes > 1 {
            return Err(Error::InvalidConfig(format!(
                "these PM sampling metrics need {passes} passes; PM sampling has one: sample fewer metrics \
                 (sm__throughput alone needs 19 on GH100)"
            )));
        }
        let mut chosen = cfg.clone();
        let mut interval_chosen_by = None;
        if cfg.auto_interval {
            let calibration = pm_interval::calibrate(cupti, device_index, &config_image, &refs, &host)?;
            let ns = pm_interval::choose_interval(&calibration, cfg.eval_threads.max(1));
            chosen.interval = PmInterval::TimeNs(ns);
            interval_chosen_by = Some(pm_interval::describe(&calibration, cfg.eval_threads.max(1), ns));
            tracing::info!("gmprof: PM sampling interval {}", interval_chosen_by.as_deref().unwrap_or_default());
        }
        let cfg = &chosen;
        let mut sampler = PmSampler::enable(cupti, device_index)?;
        let trigger = match cfg.interval {
            PmInterval::TimeNs(ns) => Trigger::TimeNs(ns),
            PmInterval::Cycles(c) => Trigger::SysclkCycles(c),
        };
        sampler.set_config(config_image, cfg.hardware_buffer_bytes, trigger)?;
        let image_samples = cfg.image_samples();
        let image = sampler.create_counter_data(&refs, image_samples)?;
        // One host object per evaluation thread, each with the metrics added.
        let mut evaluators: Vec<Box<dyn SampleEvaluator>> =
            vec![Box::new(HostEvaluator { host, names: names.clone() })];
        for _ in 1..cfg.eval_threads.max(1) {
            let mut more = ProfilerHost::new_pm_sampling(cupti, chip, Some(&availability))?;
            more.add_metrics(&refs)?;
            evaluators.push(Box::new(HostEvaluator { host: more, names: names.clone() }));
        }
        sampler.start()?;
        let kept = Arc::new(Mutex::new(PmCapture {
            metrics,
            interval: Some(cfg.interval),
            interval_chosen_by,
            ..Default::default()
        }));
        let kept_for_thread = Arc::clone(&kept);
        let source = CuptiSource {
            cupti: *cupti,
            sampler,
            image,
            metrics: names,
            image_samples,
            image_capacity: image_samples,
            max_image_samples: cfg.max_samples_per_image.max(image_samples),
            spares: Vec::new(),
        };
        // A pool that cannot start drops the source: the sampler is disabled.
        let decoder = Decoder::new(source, evaluators, Arc::clone(&kept), cfg.interval.time_ns())?;
        let (stop, stopped) = mpsc::channel::<()>();
        let period = cfg.decode_period_for_interval();
        let thread = std::thread::Builder::new()
            .name("gmprof-pm-decode".into())
            .spawn(move || {
                let mut decoder = decoder;
                // Drains every period from the start: a drain that took long is followed by
                // the next at once, not a whole period later.
                let mut due = Instant::now() + period;
                let final_error = loop {
                    let wait = due.saturating_duration_since(Instant::now());
                    let last = !matches!(stopped.recv_timeout(wait), Err(RecvTimeoutError::Timeout));
                    due = (due + period).max(Instant::now());
                    let error = decoder.step(last);
                    if last {
                        break error;
                    }
                };
                let (source, timing) = decoder.finish();
                tracing::info!("gmprof: {}", timing.describe());
                let capture = std::mem::take(&mut *kept_for_thread.lock());
                (capture, Some(PmLeftovers { sampler: source.sampler, api }), final_error)
            })
            .map_err(|e| Error::InvalidState(format!("could not start the PM sampling decode thread: {e}")))?;
        Ok(PmSession { stop, thread, kept })
    }

    /// The samples kept so far (up to the last drain of the hardware buffer), for a
    /// checkpoint while the session runs.
    pub fn snapshot(&self) -> PmCapture {
        self.kept.lock().clone()
    }

    /// The samples decoded since the last call, taken out of the session (a streamed run,
    /// issue 42, writes them and keeps only those kernels may still need), and whether the
    /// decode thread still runs (once it stopped, no more samples come before the finish).
    /// The session then holds no sample: its [`PmSession::finish`] returns the samples
    /// decoded after the last call.
    pub fn take_decoded(&self) -> (Vec<PmSample>, bool) {
        let samples = std::mem::take(&mut self.kept.lock().samples);
        (samples, !self.thread.is_finished())
    }

    /// Samples lost so far: gaps between the samples kept ([`PmCapture::missing_samples`]).
    pub fn lost_samples(&self) -> u64 {
        self.kept.lock().missing_samples
    }

    /// The sampled metrics.
    pub fn metrics(&self) -> Vec<PmMetric> {
        self.kept.lock().metrics.clone()
    }

    /// A session with no sampler behind it, for CPU tests of what comes after the decode:
    /// the caller keeps samples in `kept` as the decode thread does; [`PmSession::finish`]
    /// returns what is in it.
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn scripted(kept: Arc<Mutex<PmCapture>>) -> Result<PmSession> {
        let (stop, stopped) = mpsc::channel::<()>();
        let for_thread = Arc::clone(&kept);
        let thread = std::thread::Builder::new()
            .name("gmprof-pm-scripted".into())
            .spawn(move || {
                let _ = stopped.recv();
                (std::mem::take(&mut *for_thread.lock()), None, None)
            })
            .map_err(|e| Error::InvalidState(format!("could not start the scripted PM thread: {e}")))?;
        Ok(PmSession { stop, thread, kept })
    }

    /// Ends a [scripted](PmSession::scripted) session's thread now, as a decode thread that
    /// stopped mid-run: what `kept` holds goes with it, nothing more is decoded.
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn end_decoding(&self) {
        let _ = self.stop.send(());
        while !self.thread.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Stops sampling, decodes the rest and returns the samples with the CUPTI objects to
    /// release, and the error of the stop or the last decode when one failed (the samples
    /// decoded before it are kept).
    pub fn finish(self) -> (PmCapture, Option<PmLeftovers>, Option<String>) {
        let _ = self.stop.send(());
        match self.thread.join() {
            Ok(result) => result,
            Err(_) => {
                let error = "the PM sampling decode thread panicked".to_owned();
                (PmCapture { errors: vec![error.clone()], ..Default::default() }, None, Some(error))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_in_time_and_cycles() {
        assert_eq!(parse_interval("20000").unwrap(), PmInterval::TimeNs(20_000));
        assert_eq!(parse_interval("20us").unwrap(), PmInterval::TimeNs(20_000));
        assert_eq!(parse_interval(" 1ms ").unwrap(), PmInterval::TimeNs(1_000_000));
        assert_eq!(parse_interval("500ns").unwrap(), PmInterval::TimeNs(500));
        assert_eq!(parse_interval("30000cycles").unwrap(), PmInterval::Cycles(30_000));
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("fast").is_err());
    }

    #[test]
    fn hardware_busy_beside_per_range_says_what_to_do() {
        let busy = || Error::Cupti {
            api: "cuptiPmSamplingGetCounterAvailability",
            code: 26,
            code_name: "CUPTI_ERROR_HARDWARE_BUSY".into(),
            description: "CUPTI_ERROR_HARDWARE_BUSY".into(),
            context: "reading the PM sampling availability image".into(),
            hint: None,
        };
        let text = beside_error(busy(), Some("per_range")).to_string();
        assert!(text.starts_with("PM sampling cannot run beside the range profiler (per_range mode)"), "{text}");
        assert!(text.contains("--mode trace --pm-sampling") && text.contains("CUPTI_ERROR_HARDWARE_BUSY"), "{text}");
        // Alone (trace mode) the error is CUPTI's own, with its hint about other profilers.
        assert!(matches!(beside_error(busy(), None), Error::Cupti { .. }));
    }

    #[test]
    fn the_decode_period_keeps_the_hardware_buffer_from_filling() {
        let at = |interval| PmSamplingConfig { interval, ..Default::default() }.decode_period_for_interval();
        assert_eq!(at(PmInterval::TimeNs(5_000)), Duration::from_millis(5));
        assert_eq!(at(PmInterval::TimeNs(20_000)), Duration::from_millis(20));
        assert_eq!(at(PmInterval::TimeNs(100_000)), Duration::from_millis(20));
        assert_eq!(at(PmInterval::TimeNs(500)), Duration::from_millis(1));
        assert_eq!(at(PmInterval::Cycles(10_000)), Duration::from_millis(20));
    }

    #[test]
    fn the_image_spans_160_ms_of_samples() {
        let at = |interval| PmSamplingConfig { interval, ..Default::default() }.image_samples();
        assert_eq!(at(PmInterval::TimeNs(20_000)), 8_000);
        assert_eq!(at(PmInterval::TimeNs(10_000)), 16_000);
        assert_eq!(at(PmInterval::TimeNs(5_000)), 20_000);
        assert_eq!(at(PmInterval::TimeNs(100_000)), 1_600);
        assert_eq!(at(PmInterval::TimeNs(1_000_000)), 256);
        assert_eq!(at(PmInterval::Cycles(10_000)), 20_000);
    }

    #[test]
    fn metric_lists_expand_default() {
        assert_eq!(parse_metrics("default"), DEFAULT_PM_METRICS.to_vec());
        assert_eq!(parse_metrics(""), DEFAULT_PM_METRICS.to_vec());
        assert_eq!(parse_metrics("a.sum, b.sum,a.sum"), vec!["a.sum", "b.sum"]);
        let both = parse_metrics("x.sum,default");
        assert_eq!(both.len(), 6);
        assert_eq!(both[0], "x.sum");
        assert_eq!(parse_metrics("DRAM"), ["dram__bytes_read.sum.per_second", "dram__bytes_write.sum.per_second"]);
        assert_eq!(parse_metrics("dram,default").len(), 5);
    }

    #[test]
    fn environment_turns_sampling_on_with_an_interval() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(PmSamplingConfig::from_lookup(env(&[])).unwrap(), None);
        assert_eq!(PmSamplingConfig::from_lookup(env(&[(PM_SAMPLING_ENV, "0")])).unwrap(), None);
        let on = PmSamplingConfig::from_lookup(env(&[(PM_SAMPLING_ENV, "default"), (PM_INTERVAL_ENV, "5us")]))
            .unwrap()
            .unwrap();
        assert_eq!(on.metrics, DEFAULT_PM_METRICS.to_vec());
        assert_eq!(on.interval, PmInterval::TimeNs(5_000));
        let e = PmSamplingConfig::from_lookup(env(&[(PM_SAMPLING_ENV, "1"), (PM_INTERVAL_ENV, "soon")])).unwrap_err();
        assert!(e.to_string().contains("'soon'"), "{e}");
        let auto = PmSamplingConfig::from_lookup(env(&[(PM_SAMPLING_ENV, "1"), (PM_INTERVAL_ENV, "Auto")])).unwrap();
        assert!(auto.unwrap().auto_interval);
        let e = parse_interval_setting("fastest").unwrap_err();
        assert!(e.to_string().contains("use auto, or e.g. 20000"), "{e}");
        let two = PmSamplingConfig::from_lookup(env(&[(PM_SAMPLING_ENV, "1"), (PM_EVAL_THREADS_ENV, "2")])).unwrap();
        assert_eq!(two.unwrap().eval_threads, 2);
        let e = PmSamplingConfig::from_lookup(env(&[(PM_SAMPLING_ENV, "1"), (PM_EVAL_THREADS_ENV, "0")])).unwrap_err();
        assert!(e.to_string().contains("GMPROF_PM_EVAL_THREADS='0'"), "{e}");
        assert!((1..=4).contains(&default_eval_threads()));
    }
}
