//! PC sampling capture: CUPTI's PC sampler on one context and its drain thread.
//!
//! Layer 3. [`PcSession::start`] enables CUPTI's PC sampling on the context (CUPTI lists the
//! stall reasons only after that), lists the chip's stall reasons and configures continuous
//! collection ([`crate::checked::pc_sampling`]; kernels run as they would; kernel-serialized
//! collection, which gives each record its launch's correlation id, is an opt-in), every
//! [`DEFAULT_PERIOD_EXPONENT`] cycles unless asked, and reads back the period CUPTI uses. A
//! thread of its own then drains CUPTI's parsed records every
//! [`PcSamplingConfig::drain_period`] (again at once while CUPTI says more are waiting) and
//! merges them into a [`PcCapture`], counting dropped samples and drains that found the
//! hardware buffer full. [`PcSession::finish`] stops that thread and, on the finishing
//! thread, drains the rest and disables sampling, which makes CUPTI copy the last records into
//! the configured buffer; the capture goes to [`crate::analysis::pc_fold`]. On an H100 the
//! drain thread ran beside llm.c and nanoGPT without a fault; `GMPROF_PC_DRAIN_MS=0` still
//! turns it off (everything is then taken at the end, into a buffer 25 drains large), since
//! CUPTI documents no thread rule for `cuptiPCSamplingGetData`.
//!
//! It runs beside trace mode only: beside the range profiler CUPTI configured it without an
//! error and delivered no sample, so a counter mode is refused at start
//! ([`beside_counters_message`]).

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::checked::driver::Context;
use crate::checked::pc_sampling::{self as pcs, Collection, Drained, PcSampling, PcSamplingSetup};
use crate::checked::Cupti;
use crate::error::{Error, Result};
use crate::model::pc::{PcCapture, PcInstruction, PcRecord, PcSource, PcStallReason};

/// Environment variable that turns PC sampling on: `1`/`on`/`default` (CUPTI's interval) or
/// an interval ([`parse_interval`]); `0`/`off` or unset: off.
pub const PC_SAMPLING_ENV: &str = "GMPROF_PC_SAMPLING";
/// Environment variable with the collection: `continuous` (default) or `serialized`.
pub const PC_COLLECTION_ENV: &str = "GMPROF_PC_COLLECTION";
/// Environment variable with a file to write the raw capture to (JSON of [`PcCapture`]), for
/// recorded CPU tests.
pub const PC_RECORD_ENV: &str = "GMPROF_PC_RECORD";
/// Environment variable with the drain period in ms (default 100); `0`: no drain thread, the
/// records are taken at the end only, on the finishing thread.
pub const PC_DRAIN_MS_ENV: &str = "GMPROF_PC_DRAIN_MS";
/// Environment variable with how long CUPTI's worker threads sleep between parses of the
/// hardware buffer, ms (default: CUPTI's, 100).
pub const PC_WORKER_SLEEP_MS_ENV: &str = "GMPROF_PC_WORKER_SLEEP_MS";
/// Environment variable with the size of the device buffer the samples go to, MiB (default
/// 512).
pub const PC_HW_BUFFER_MB_ENV: &str = "GMPROF_PC_HW_BUFFER_MB";

/// gmprof's default period, 2^13 cycles. CUPTI's own default on an H100 (2^11) fills the
/// 512 MiB hardware buffer on a busy GPU faster than CUPTI's worker threads empty it: four of
/// five 30-step runs of llm.c's GPT-2 lost 24 % to 85 % of their samples that way, and the
/// loss does not show per range (a kernel's samples are shared among its launches). At 2^13
/// no run lost any (validation/2026-11-25-pc-sampling-h100.log).
pub const DEFAULT_PERIOD_EXPONENT: u32 = 13;

/// Shortest and longest period CUPTI accepts, as 2^N cycles.
pub const PERIOD_EXPONENT_RANGE: std::ops::RangeInclusive<u32> = 5..=31;

/// How to sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcSamplingConfig {
    /// Every 2^N cycles ([`DEFAULT_PERIOD_EXPONENT`] unless asked); `None`: CUPTI's default
    /// (chosen by CUPTI from the SM count: 2^11 on an H100). The period used is read back and
    /// reported.
    pub period_exponent: Option<u32>,
    /// Kernel serialization.
    pub collection: Collection,
    /// How often the drain thread takes CUPTI's parsed records; zero: no drain thread, the
    /// records are taken at the end on the finishing thread.
    pub drain_period: Duration,
    /// Records one drain takes at most (more wait for the next call).
    pub max_pcs: usize,
    /// Bytes of CUPTI's buffer of parsed records (~16 bytes per PC and reason).
    pub scratch_buffer_bytes: usize,
    /// Bytes of the device buffer the samples go to.
    pub hardware_buffer_bytes: usize,
    /// How long CUPTI's worker threads sleep between parses of the hardware buffer, ms
    /// (`None`: CUPTI's default, 100).
    pub worker_sleep_ms: Option<u32>,
    /// Write the raw capture there at the end.
    pub record_to: Option<PathBuf>,
}

impl Default for PcSamplingConfig {
    fn default() -> Self {
        PcSamplingConfig {
            period_exponent: Some(DEFAULT_PERIOD_EXPONENT),
            collection: Collection::Continuous,
            drain_period: Duration::from_millis(100),
            max_pcs: 20_000,
            scratch_buffer_bytes: 16 << 20,
            hardware_buffer_bytes: 512 << 20,
            worker_sleep_ms: None,
            record_to: None,
        }
    }
}

/// Parses an interval: the exponent N of 2^N cycles (`12`, `2^12`) or a power of two of
/// cycles (`4096cycles`), N from 5 to 31.
pub fn parse_interval(text: &str) -> Result<u32> {
    let t = text.trim().to_ascii_lowercase();
    let bad = || {
        Error::InvalidConfig(format!(
            "PC sampling interval '{text}': use N for every 2^N cycles (N from 5 to 31, e.g. 12 or 2^12), a power \
             of two of cycles (4096cycles), or cupti for CUPTI's default"
        ))
    };
    let exponent = if let Some(c) = t.strip_suffix("cycles") {
        let cycles: u64 = c.trim().parse().map_err(|_| bad())?;
        if !cycles.is_power_of_two() {
            return Err(bad());
        }
        cycles.trailing_zeros()
    } else {
        t.strip_prefix("2^").unwrap_or(&t).trim().parse::<u32>().map_err(|_| bad())?
    };
    if PERIOD_EXPONENT_RANGE.contains(&exponent) {
        Ok(exponent)
    } else {
        Err(bad())
    }
}

impl PcSamplingConfig {
    /// The configuration `value` (of `--pc-sampling=VALUE` or [`PC_SAMPLING_ENV`]) asks for;
    /// `None` when it turns sampling off.
    pub fn from_value(value: &str) -> Result<Option<PcSamplingConfig>> {
        let v = value.trim().to_ascii_lowercase();
        if matches!(v.as_str(), "0" | "false" | "off" | "no") {
            return Ok(None);
        }
        let period_exponent = if matches!(v.as_str(), "" | "1" | "true" | "on" | "yes" | "default") {
            Some(DEFAULT_PERIOD_EXPONENT)
        } else if v == "cupti" {
            None
        } else {
            Some(parse_interval(&v)?)
        };
        Ok(Some(PcSamplingConfig { period_exponent, ..Default::default() }))
    }

    /// The configuration the environment asks for; `None` when sampling is not asked for.
    pub fn from_env() -> Result<Option<PcSamplingConfig>> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// [`PcSamplingConfig::from_env`] through `lookup` (the seam tests use).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<PcSamplingConfig>> {
        let Some(value) = lookup(PC_SAMPLING_ENV).filter(|v| !v.trim().is_empty()) else { return Ok(None) };
        let Some(mut cfg) = Self::from_value(&value)? else { return Ok(None) };
        if let Some(c) = lookup(PC_COLLECTION_ENV).filter(|v| !v.trim().is_empty()) {
            cfg.collection = parse_collection(&c)?;
        }
        cfg.record_to = lookup(PC_RECORD_ENV).filter(|v| !v.trim().is_empty()).map(PathBuf::from);
        if let Some(ms) = lookup(PC_DRAIN_MS_ENV).filter(|v| !v.trim().is_empty()) {
            let ms: u64 = ms
                .trim()
                .parse()
                .map_err(|_| Error::InvalidConfig(format!("{PC_DRAIN_MS_ENV}='{ms}': use milliseconds, 0 for none")))?;
            cfg.drain_period = Duration::from_millis(ms);
        }
        if let Some(ms) = lookup(PC_WORKER_SLEEP_MS_ENV).filter(|v| !v.trim().is_empty()) {
            let ms: u32 = ms.trim().parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                Error::InvalidConfig(format!("{PC_WORKER_SLEEP_MS_ENV}='{ms}': use milliseconds, at least 1"))
            })?;
            cfg.worker_sleep_ms = Some(ms);
        }
        if let Some(mb) = lookup(PC_HW_BUFFER_MB_ENV).filter(|v| !v.trim().is_empty()) {
            let mb: usize =
                mb.trim().parse().ok().filter(|mb| *mb > 0).ok_or_else(|| {
                    Error::InvalidConfig(format!("{PC_HW_BUFFER_MB_ENV}='{mb}': use MiB, at least 1"))
                })?;
            cfg.hardware_buffer_bytes = mb << 20;
        }
        Ok(Some(cfg))
    }
}

/// Parses a collection: `continuous` or `serialized` (`kernel_serialized`).
pub fn parse_collection(text: &str) -> Result<Collection> {
    match text.trim().to_ascii_lowercase().as_str() {
        "continuous" => Ok(Collection::Continuous),
        "serialized" | "kernel_serialized" => Ok(Collection::KernelSerialized),
        other => Err(Error::InvalidConfig(format!("PC sampling collection '{other}': use continuous or serialized"))),
    }
}

fn collection_name(c: Collection) -> &'static str {
    match c {
        Collection::Continuous => "continuous",
        Collection::KernelSerialized => "kernel_serialized",
    }
}

/// Why PC sampling does not run beside a counter mode (`mode`): measured on an H100 with
/// CUPTI 13.0, CUPTI enabled and configured it beside the range profiler (per_range) without
/// an error and then delivered no sample over 16 685 kernels of llm.c's GPT-2 in 27 drains.
pub fn beside_counters_message(mode: &str) -> String {
    format!(
        "--pc-sampling runs beside --mode trace only: beside {mode} mode CUPTI samples no PCs while the range \
         profiler holds the counters (0 samples over 16685 kernels on an H100, CUPTI 13.0). Sample with --mode \
         trace --pc-sampling and run {mode} separately"
    )
}

/// Why PC sampling is refused beside PM sampling: both use the GPU's performance monitors.
/// With both on, CUPTI took no PC sample, `cuptiPCSamplingDisable` failed with
/// `CUPTI_ERROR_UNKNOWN` and a later `cuptiActivityFlushAll` crashed the program (nanoGPT on an
/// H200, CUPTI 13.0.1; validation/2026-11-27-ecosystem.md).
pub fn beside_pm_sampling_message() -> String {
    "--pc-sampling does not run beside --pm-sampling: both use the GPU's performance monitors, and with both on \
     CUPTI took no PC sample and then crashed the program at its exit (H200, CUPTI 13.0.1). Run them as two runs: \
     --pc-sampling for the stall reasons, --pm-sampling for DRAM bandwidth over time"
        .to_owned()
}

/// Adds one drain to `capture`: its counts, and its records merged.
fn keep(capture: &mut PcCapture, drained: Drained) {
    capture.drains += 1;
    capture.total_samples += drained.total_samples;
    capture.dropped_samples += drained.dropped_samples;
    capture.non_user_samples += drained.non_user_samples;
    if drained.hardware_buffer_full {
        capture.hardware_buffer_full += 1;
    }
    capture.merge(drained.records.into_iter().map(|r| PcRecord {
        cubin_crc: r.cubin_crc,
        function: r.function_name,
        pc_offset: r.pc_offset,
        correlation_id: r.correlation_id,
        stalls: r.stalls.into_iter().filter(|(_, n)| *n > 0).map(|(i, n)| (i, u64::from(n))).collect(),
    }));
}

/// Drains until CUPTI says nothing more waits (at most `rounds` calls).
fn drain_all(sampling: &mut PcSampling, capture: &Mutex<PcCapture>, rounds: usize) -> Result<()> {
    for _ in 0..rounds {
        let drained = sampling.drain()?;
        let more = drained.remaining_pcs > 0 && !drained.records.is_empty();
        keep(&mut capture.lock(), drained);
        if !more {
            break;
        }
    }
    Ok(())
}

/// Instructions whose source line is looked up at most (those with the most samples).
pub const MAX_SOURCE_LOOKUPS: usize = 5_000;

/// The file and line (and SASS text, with nvdisasm) of the instructions with the most
/// samples, from the kept cubins.
fn add_source_lines(cupti: &Cupti, capture: &mut PcCapture) {
    let mut samples: std::collections::HashMap<(String, u64, u64), u64> = std::collections::HashMap::new();
    for r in &capture.records {
        *samples.entry((r.function.clone(), r.cubin_crc, r.pc_offset)).or_default() +=
            r.stalls.iter().map(|(_, n)| n).sum::<u64>();
    }
    let mut wanted: Vec<((String, u64, u64), u64)> = samples.into_iter().collect();
    wanted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let wanted: Vec<(String, u64, u64)> = wanted.into_iter().take(MAX_SOURCE_LOOKUPS).map(|(k, _)| k).collect();
    let (lines, text, notes) = crate::capture::cubins::annotate(cupti, &wanted);
    capture.errors.extend(notes.into_iter().map(|n| format!("source lines: {n}")));
    let mut instructions: Vec<PcInstruction> = text
        .into_iter()
        .map(|((function, cubin_crc, pc_offset), sass)| PcInstruction { cubin_crc, function, pc_offset, sass })
        .collect();
    instructions.sort_by(|a, b| (&a.function, a.cubin_crc, a.pc_offset).cmp(&(&b.function, b.cubin_crc, b.pc_offset)));
    capture.instructions = instructions;
    let mut found: Vec<PcSource> = lines
        .into_iter()
        .map(|((function, cubin_crc, pc_offset), (file, line))| PcSource { cubin_crc, function, pc_offset, file, line })
        .collect();
    found.sort_by(|a, b| (&a.function, a.cubin_crc, a.pc_offset).cmp(&(&b.function, b.cubin_crc, b.pc_offset)));
    capture.sources = found;
}

/// A running PC sampler and its drain thread (none when the drain period is 0).
#[derive(Debug)]
pub struct PcSession {
    /// The sampler: the drain thread's between drains, the finishing thread's at the end.
    sampling: Arc<Mutex<Option<PcSampling>>>,
    drains: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
    kept: Arc<Mutex<PcCapture>>,
    cupti: Cupti,
    lines: bool,
    record_to: Option<PathBuf>,
    /// No sampler behind it ([`PcSession::scripted`]).
    scripted: bool,
}

/// Drains every `period` until told to stop (or the sampler is gone), on a thread of its own.
fn drain_loop(
    sampling: Arc<Mutex<Option<PcSampling>>>,
    capture: Arc<Mutex<PcCapture>>,
    stopped: mpsc::Receiver<()>,
    period: Duration,
) {
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
        let mut guard = sampling.lock();
        let Some(s) = guard.as_mut() else { return };
        if let Err(e) = drain_all(s, &capture, 64) {
            capture.lock().errors.push(format!("periodic draining stopped: {e}; the rest is taken at the end"));
            return;
        }
    }
}

impl PcSession {
    /// Starts sampling on `ctx`, beside trace mode (the profiler refuses a counter mode
    /// before it gets here: [`beside_counters_message`]).
    pub fn start(cupti: &Cupti, ctx: Context, cfg: &PcSamplingConfig) -> Result<PcSession> {
        // CUPTI lists the stall reasons only once sampling is enabled on the context (before,
        // cuptiPCSamplingGetNumStallReasons fails with CUPTI_ERROR_INVALID_OPERATION: seen on
        // an H100, CUPTI 13.0). A failure after this disables it again (drop).
        let mut sampling = PcSampling::enable(cupti, ctx)?;
        let reasons = pcs::stall_reasons(cupti, ctx)?;
        if reasons.is_empty() {
            return Err(Error::InvalidConfig("CUPTI lists no PC sampling stall reasons for this device".into()));
        }
        // Without periodic drains the buffer CUPTI fills at disable holds everything.
        let final_max_pcs = if cfg.drain_period.is_zero() { cfg.max_pcs * 25 } else { cfg.max_pcs * 4 };
        sampling.configure(&PcSamplingSetup {
            period_exponent: cfg.period_exponent,
            reasons: reasons.iter().map(|r| r.index).collect(),
            scratch_buffer_bytes: cfg.scratch_buffer_bytes,
            hardware_buffer_bytes: cfg.hardware_buffer_bytes,
            collection: cfg.collection,
            worker_sleep_ms: cfg.worker_sleep_ms,
            max_pcs: cfg.max_pcs,
            final_max_pcs,
        })?;
        let mut errors = Vec::new();
        // Cubins for the source lines of the sampled instructions; without them the lines are
        // blank.
        let lines = crate::capture::cubins::watch();
        if let Err(e) = &lines {
            errors.push(format!("source lines unavailable: {e}"));
        }
        let period_exponent = match sampling.period_exponent() {
            Ok(e) => Some(e),
            Err(e) => {
                errors.push(format!("could not read the sampling period back: {e}"));
                cfg.period_exponent
            }
        };
        let kept = Arc::new(Mutex::new(PcCapture {
            reasons: reasons.into_iter().map(|r| PcStallReason { index: r.index, name: r.name }).collect(),
            period_exponent,
            collection: collection_name(cfg.collection).to_owned(),
            errors,
            ..Default::default()
        }));
        let sampling = Arc::new(Mutex::new(Some(sampling)));
        let drains = if cfg.drain_period.is_zero() {
            None
        } else {
            let (stop, stopped) = mpsc::channel::<()>();
            let (s, c, period) = (Arc::clone(&sampling), Arc::clone(&kept), cfg.drain_period);
            let thread = std::thread::Builder::new()
                .name("gmprof-pc-drain".into())
                .spawn(move || drain_loop(s, c, stopped, period))
                .map_err(|e| Error::InvalidState(format!("could not start the PC sampling drain thread: {e}")))?;
            Some((stop, thread))
        };
        Ok(PcSession {
            sampling,
            drains,
            kept,
            cupti: *cupti,
            lines: lines.is_ok(),
            record_to: cfg.record_to.clone(),
            scripted: false,
        })
    }

    /// A session with no sampler behind it, for CPU tests of what comes after the drains:
    /// the caller keeps records in `kept` as the drain thread does; [`PcSession::finish`]
    /// returns what is in it.
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn scripted(kept: Arc<Mutex<PcCapture>>) -> Result<PcSession> {
        Ok(PcSession {
            sampling: Arc::new(Mutex::new(None)),
            drains: None,
            kept,
            cupti: Cupti::stand_in()?,
            lines: false,
            record_to: None,
            scripted: true,
        })
    }

    /// Reads the samples drained so far under their lock (the live metrics' running totals,
    /// without a copy of every record).
    pub fn read<R>(&self, f: impl FnOnce(&PcCapture) -> R) -> R {
        f(&self.kept.lock())
    }

    /// The samples drained so far, for a checkpoint while the session runs.
    pub fn snapshot(&self) -> PcCapture {
        self.kept.lock().clone()
    }

    /// Stops the drain thread, then on the calling thread drains the rest and disables
    /// sampling; returns the capture, with the error of the disable when it failed (the
    /// samples before it are kept).
    pub fn finish(self) -> (PcCapture, Option<String>) {
        let PcSession { sampling, drains, kept, cupti, lines, record_to, scripted } = self;
        if let Some((stop, thread)) = drains {
            let _ = stop.send(());
            if thread.join().is_err() {
                kept.lock().errors.push("the PC sampling drain thread panicked".into());
            }
        }
        let mut final_error = None;
        match sampling.lock().take() {
            Some(mut s) => {
                if let Err(e) = drain_all(&mut s, &kept, 64) {
                    kept.lock().errors.push(format!("the last drain failed: {e}"));
                }
                match s.shutdown() {
                    Ok((last, full)) => {
                        let mut capture = kept.lock();
                        if full {
                            capture.errors.push(format!(
                                "the records CUPTI handed over at the end filled gmprof's buffer ({} instructions): \
                                 CUPTI discards the ones that do not fit",
                                last.records.len()
                            ));
                        }
                        keep(&mut capture, last);
                    }
                    Err(e) => {
                        kept.lock().errors.push(format!("disabling PC sampling: {e}"));
                        final_error = Some(e.to_string());
                    }
                }
            }
            None if scripted => {}
            None => final_error = Some("PC sampling was already finished".to_owned()),
        }
        let mut capture = std::mem::take(&mut *kept.lock());
        if lines {
            add_source_lines(&cupti, &mut capture);
        }
        tracing::info!(
            "gmprof: PC sampling: {} drain(s), {} sample(s), {} dropped, {} PC record(s)",
            capture.drains,
            capture.total_samples,
            capture.dropped_samples,
            capture.records.len()
        );
        if let Some(path) = record_to {
            match serde_json::to_vec(&capture) {
                Ok(bytes) => {
                    if let Err(e) = std::fs::write(&path, bytes) {
                        tracing::warn!("gmprof: could not record PC samples to {}: {e}", path.display());
                    }
                }
                Err(e) => tracing::warn!("gmprof: could not serialize PC samples: {e}"),
            }
        }
        (capture, final_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checked::pc_sampling::PcRecordRaw;

    #[test]
    fn intervals_parse_as_exponents_or_powers_of_two() {
        assert_eq!(parse_interval("12").unwrap(), 12);
        assert_eq!(parse_interval(" 2^9 ").unwrap(), 9);
        assert_eq!(parse_interval("4096cycles").unwrap(), 12);
        assert!(parse_interval("4").is_err(), "below 2^5");
        assert!(parse_interval("32").is_err(), "above 2^31");
        assert!(parse_interval("3000cycles").is_err(), "not a power of two");
        assert!(parse_interval("fast").unwrap_err().to_string().contains("'fast'"));
    }

    #[test]
    fn environment_and_flag_values_turn_sampling_on_with_an_interval() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(PcSamplingConfig::from_lookup(env(&[])).unwrap(), None);
        assert_eq!(PcSamplingConfig::from_lookup(env(&[(PC_SAMPLING_ENV, "off")])).unwrap(), None);
        let on = PcSamplingConfig::from_lookup(env(&[(PC_SAMPLING_ENV, "1")])).unwrap().unwrap();
        assert_eq!((on.period_exponent, on.collection), (Some(DEFAULT_PERIOD_EXPONENT), Collection::Continuous));
        let set = PcSamplingConfig::from_lookup(env(&[
            (PC_SAMPLING_ENV, "10"),
            (PC_COLLECTION_ENV, "serialized"),
            (PC_RECORD_ENV, "/tmp/pc.json"),
            (PC_DRAIN_MS_ENV, "0"),
            (PC_WORKER_SLEEP_MS_ENV, "20"),
            (PC_HW_BUFFER_MB_ENV, "2048"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(set.period_exponent, Some(10));
        assert_eq!(set.collection, Collection::KernelSerialized);
        assert_eq!(set.record_to.as_deref(), Some(std::path::Path::new("/tmp/pc.json")));
        assert!(set.drain_period.is_zero());
        assert_eq!((set.worker_sleep_ms, on.worker_sleep_ms), (Some(20), None));
        assert_eq!((set.hardware_buffer_bytes, on.hardware_buffer_bytes), (2048 << 20, 512 << 20));
        assert!(PcSamplingConfig::from_lookup(env(&[(PC_SAMPLING_ENV, "1"), (PC_DRAIN_MS_ENV, "soon")])).is_err());
        assert!(PcSamplingConfig::from_lookup(env(&[(PC_SAMPLING_ENV, "1"), (PC_WORKER_SLEEP_MS_ENV, "0")])).is_err());
        assert!(PcSamplingConfig::from_lookup(env(&[(PC_SAMPLING_ENV, "40")])).is_err());
        assert_eq!(PcSamplingConfig::from_value("default").unwrap().unwrap().period_exponent, Some(13));
        assert!(PcSamplingConfig::from_value("cupti").unwrap().unwrap().period_exponent.is_none());
    }

    #[test]
    fn drains_add_their_counts_and_merge_their_records() {
        let mut capture = PcCapture::default();
        let raw = |pc, n| PcRecordRaw {
            cubin_crc: 1,
            pc_offset: pc,
            function_index: 0,
            function_name: "k".into(),
            correlation_id: 0,
            stalls: vec![(3, n), (4, 0)],
        };
        keep(
            &mut capture,
            Drained { records: vec![raw(16, 5)], total_samples: 9, dropped_samples: 1, ..Default::default() },
        );
        keep(
            &mut capture,
            Drained {
                records: vec![raw(16, 2)],
                total_samples: 4,
                non_user_samples: 2,
                hardware_buffer_full: true,
                ..Default::default()
            },
        );
        assert_eq!(capture.records.len(), 1);
        assert_eq!(capture.records[0].stalls, vec![(3, 7)], "zero counts are left out");
        assert_eq!(
            (capture.drains, capture.total_samples, capture.dropped_samples, capture.non_user_samples),
            (2, 13, 1, 2)
        );
        assert_eq!(capture.hardware_buffer_full, 1);
    }

    #[test]
    fn a_refusal_beside_a_counter_mode_says_what_to_do() {
        let e = beside_counters_message("per_range");
        assert!(e.contains("beside per_range mode") && e.contains("--mode trace --pc-sampling"), "{e}");
        assert!(e.contains("run per_range separately"), "{e}");
    }
}
