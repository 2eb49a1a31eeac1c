//! The live metrics of a process ([`LiveMetrics`]: the [`Store`] of its values and the
//! registry a scrape encodes) and one device's handle on them ([`LiveFeed`]).
//!
//! Every name starts with `gmprof_`; every series carries the process's labels
//! ([`ProcessLabels`]: `rank`, `local_rank`, `world_size`, `host`, each only where known)
//! and `device` (the CUDA device ordinal of the profiler that feeds it). Times are seconds,
//! sizes bytes. A value gmprof did not measure is absent (no series), never 0: a range group
//! whose instances had no GPU time has no `gmprof_range_gpu_seconds_total` series, a run
//! without PM sampling no `gmprof_dram_bytes_per_second`.
//!
//! Time sums are kept in whole nanoseconds ([`Value::Nanos`]) and shown in seconds, so
//! `gmprof_range_gpu_seconds_total × 10⁹` is exactly the Σ of the rows' `gpu_time_ns` (and of
//! `report.json`'s streamed aggregates), not a sum of rounded floats.
//!
//! Imports `store` (the values) and `sums` (what a drain hands over).

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::store::{definitions, Fam, SeriesKey, Store, StoreCollector, Value};
use super::sums::{Direction, DrainSums, MAX_RANGE_GROUPS, MAX_STALL_REASONS, OTHER_RANGE, OTHER_REASON};

/// The content type of [`LiveMetrics::encode`]'s text (OpenMetrics 1.0, which Prometheus
/// scrapes as it scrapes its own text format).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The labels every series of a process carries: from torchrun's environment (`RANK`,
/// `LOCAL_RANK`, `WORLD_SIZE`) where it is set, and the host name. `None` leaves the label
/// out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessLabels {
    /// The global rank (`RANK`).
    pub rank: Option<u32>,
    /// The rank on this host (`LOCAL_RANK`).
    pub local_rank: Option<u32>,
    /// The ranks of the job (`WORLD_SIZE`).
    pub world_size: Option<u32>,
    /// The host name.
    pub host: Option<String>,
}

impl ProcessLabels {
    /// The labels set, in order (`rank`, `local_rank`, `world_size`, `host`).
    pub fn pairs(&self) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
        let mut out = Vec::new();
        for (name, value) in [("rank", self.rank), ("local_rank", self.local_rank), ("world_size", self.world_size)] {
            if let Some(v) = value {
                out.push((Cow::Borrowed(name), Cow::Owned(v.to_string())));
            }
        }
        if let Some(host) = &self.host {
            out.push((Cow::Borrowed("host"), Cow::Owned(host.clone())));
        }
        out
    }
}

/// The live metrics of one process: the values both exports read, and the registry a scrape
/// encodes. Share it with [`Arc`]; [`LiveMetrics::feed`] hands each profiler its handle.
#[derive(Debug)]
pub struct LiveMetrics {
    registry: Registry,
    store: Arc<Store>,
    labels: ProcessLabels,
    /// When the values started counting (the cumulative sums' start), ns since the epoch.
    started_unix_ns: u64,
    otlp_pushes: AtomicU64,
    otlp_failures: AtomicU64,
}

impl LiveMetrics {
    /// Empty metrics of a process labelled `labels`.
    pub fn new(labels: &ProcessLabels) -> Self {
        let range_help = format!(
            "Completed instances of each range group (numbered paths folded, at most {MAX_RANGE_GROUPS} groups per \
             device, the rest in range=\"{OTHER_RANGE}\")"
        );
        let stall_help = format!(
            "PC samples of the kernels launched directly in the range group, by stall reason (a kernel's samples \
             shared among its groups by GPU time; at most {MAX_STALL_REASONS} reasons per group, the rest in \
             reason=\"{OTHER_REASON}\")"
        );
        let store = Arc::new(Store::new(definitions(range_help, stall_help)));
        let mut registry = Registry::with_prefix_and_labels("gmprof", labels.pairs().into_iter());
        registry.register_collector(Box::new(StoreCollector(Arc::clone(&store))));
        let version = Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]);
        registry.register("build", "gmprof's version", version);
        let started_unix_ns =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Self {
            registry,
            store,
            labels: labels.clone(),
            started_unix_ns,
            otlp_pushes: AtomicU64::new(0),
            otlp_failures: AtomicU64::new(0),
        }
    }

    /// The handle of the profiler of device `device` (`None`: not known).
    pub fn feed(&self, device: Option<u32>) -> LiveFeed {
        LiveFeed {
            inner: Arc::new(FeedInner {
                device,
                store: Arc::clone(&self.store),
                records_dropped: AtomicU64::new(0),
                pm_samples_lost: AtomicU64::new(0),
            }),
        }
    }

    /// The text a scrape gets ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }

    /// The values.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The process's labels.
    pub fn labels(&self) -> &ProcessLabels {
        &self.labels
    }

    /// When the values started counting, ns since the Unix epoch.
    pub fn started_unix_ns(&self) -> u64 {
        self.started_unix_ns
    }

    /// An OTLP push ended: accepted (`ok`) or failed; counted in the health metrics.
    pub fn otlp_pushed(&self, ok: bool) {
        let (counter, family) =
            if ok { (&self.otlp_pushes, Fam::OtlpPushes) } else { (&self.otlp_failures, Fam::OtlpPushFailures) };
        counter.fetch_add(1, Ordering::Relaxed);
        self.store.update(|u| u.add(family, &SeriesKey::default(), 1));
    }

    /// OTLP pushes accepted and failed so far.
    pub fn otlp_counts(&self) -> (u64, u64) {
        (self.otlp_pushes.load(Ordering::Relaxed), self.otlp_failures.load(Ordering::Relaxed))
    }

    /// A step the process heard while no profiler streams (an on-demand run, idle or
    /// capturing): its number and, where known, its wall time.
    pub fn idle_step(&self, step: u64, wall_ns: Option<u64>) {
        let d = SeriesKey::default();
        self.store.update(|u| {
            u.add(Fam::Steps, &d, 1);
            u.set(Fam::LastStep, &d, Value::Int(i64::try_from(step).unwrap_or(i64::MAX)));
            match wall_ns {
                Some(ns) => {
                    u.observe(Fam::StepWall, &d, ns as f64 / 1e9);
                    u.set(Fam::LastStepWall, &d, Value::Float(ns as f64 / 1e9));
                }
                None => u.remove(Fam::LastStepWall, &d),
            }
        });
    }
}

#[derive(Debug)]
struct FeedInner {
    device: Option<u32>,
    store: Arc<Store>,
    /// Totals last set by [`LiveFeed::set_records_dropped`] and [`LiveFeed::set_pm_samples_lost`].
    records_dropped: AtomicU64,
    pm_samples_lost: AtomicU64,
}

/// One profiler's (one device's) handle on the [`LiveMetrics`]: cheap to clone, `Send` and
/// `Sync`. The stream writer hands it each drain's [`DrainSums`]; the capture's stream tick
/// sets the counts only it knows.
#[derive(Clone, Debug)]
pub struct LiveFeed {
    inner: Arc<FeedInner>,
}

impl LiveFeed {
    /// The device ordinal of its series.
    pub fn device(&self) -> Option<u32> {
        self.inner.device
    }

    fn key(&self) -> SeriesKey {
        SeriesKey::device(self.inner.device)
    }

    /// Adds one drain's sums to the exported values and empties them (what they know of
    /// the range groups stays).
    pub fn publish(&self, sums: &mut DrainSums) {
        let d = self.key();
        let device = self.inner.device;
        let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
        sums.stalls.attribute();
        self.inner.store.update(|u| {
            u.add(Fam::Drains, &d, sums.drains);
            for step in sums.steps.drain(..) {
                u.add(Fam::Steps, &d, 1);
                u.set(Fam::LastStep, &d, int(step.step));
                u.set(Fam::LastStepKernels, &d, int(step.kernels));
                u.set(Fam::LastStepTransfers, &d, int(step.transfers));
                match step.wall_time_ns {
                    Some(ns) => {
                        u.observe(Fam::StepWall, &d, ns as f64 / 1e9);
                        u.set(Fam::LastStepWall, &d, Value::Float(ns as f64 / 1e9));
                    }
                    None => u.remove(Fam::LastStepWall, &d),
                }
                match step.gpu_time_ns {
                    Some(ns) => u.set(Fam::LastStepGpu, &d, Value::Float(ns as f64 / 1e9)),
                    None => u.remove(Fam::LastStepGpu, &d),
                }
            }
            // Counts every drain measures are exported from the first drain on, 0 included.
            u.add(Fam::Kernels, &d, sums.kernels);
            u.add(Fam::Transfers, &d, sums.transfers);
            u.add(Fam::TransferBytes, &d, sums.transfer_bytes);
            u.add(Fam::FlaggedRows, &d, sums.flagged_rows);
            if let Some(ns) = sums.kernel_gpu_ns.take() {
                u.add_nanos(Fam::KernelGpu, &d, ns);
            }
            for (range, r) in sums.ranges.drain() {
                let key = SeriesKey { device, range: Some(range), ..SeriesKey::default() };
                u.add(Fam::RangeInstances, &key, r.instances);
                u.add(Fam::RangeKernels, &key, r.kernels);
                u.add(Fam::RangeTransferBytes, &key, r.transfer_bytes);
                if let Some(ns) = r.gpu_ns {
                    u.add_nanos(Fam::RangeGpu, &key, ns);
                }
                if let Some(ns) = r.wall_ns {
                    u.add_nanos(Fam::RangeWall, &key, ns);
                }
                for (direction, bytes) in [(Direction::Read, r.dram_read), (Direction::Write, r.dram_write)] {
                    if let Some(b) = bytes {
                        let k = SeriesKey { direction: Some(direction.as_str()), ..key.clone() };
                        u.add_float(Fam::RangeDramBytes, &k, b);
                    }
                }
            }
            for ((range, reason), n) in sums.stalls.take() {
                let key = SeriesKey { device, range: Some(range), reason: Some(reason), ..SeriesKey::default() };
                u.add(Fam::RangeStallSamples, &key, n);
            }
            if let Some((samples, dropped)) = sums.pc_counts.take() {
                u.set(Fam::PcSamples, &d, Value::Count(samples));
                u.set(Fam::PcSamplesDropped, &d, Value::Count(dropped));
            }
            if sums.pm_seen {
                u.add(Fam::PmSamples, &d, sums.pm_samples);
            }
            for (direction, mean) in sums.pm.take_means() {
                let key = SeriesKey { device, direction: Some(direction.as_str()), ..SeriesKey::default() };
                u.set(Fam::DramRate, &key, Value::Float(mean));
            }
            if let Some(n) = sums.warnings.take() {
                u.set(Fam::Warnings, &d, int(n));
            }
        });
        sums.clear_counts();
    }

    /// A drain failed (its rows are not in the part files, nor here).
    pub fn drain_failed(&self) {
        self.inner.store.update(|u| u.add(Fam::DrainFailures, &self.key(), 1));
    }

    /// One drain's time: `total_ns` on the stream thread, `locked_ns` of it (and of the
    /// drain's other holds) under the session's lock, which the program's launches wait for.
    pub fn drain_time(&self, total_ns: u64, locked_ns: u64) {
        let d = self.key();
        self.inner.store.update(|u| {
            u.add_nanos(Fam::DrainSeconds, &d, total_ns);
            u.add_nanos(Fam::DrainLockSeconds, &d, locked_ns);
        });
    }

    /// gmprof's time inside CUPTI's callbacks so far, process-wide (totals, ns, so no
    /// `device` label), where `GMPROF_SELF_TIME=1` measures it.
    pub fn set_callback_times(&self, api_ns: u64, buffer_ns: u64) {
        self.inner.store.update(|u| {
            for (callback, ns) in [("api", api_ns), ("buffer", buffer_ns)] {
                let key = SeriesKey { callback: Some(callback), ..SeriesKey::default() };
                u.set(Fam::CallbackSeconds, &key, Value::Nanos(ns));
            }
        });
    }

    /// CUPTI's dropped activity records so far (a total: the counter moves by what is new).
    pub fn set_records_dropped(&self, total: u64) {
        let before = self.inner.records_dropped.fetch_max(total, Ordering::Relaxed);
        self.inner.store.update(|u| u.add(Fam::RecordsDropped, &self.key(), total.saturating_sub(before)));
    }

    /// PM sampling's lost samples so far (a total).
    pub fn set_pm_samples_lost(&self, total: u64) {
        let before = self.inner.pm_samples_lost.fetch_max(total, Ordering::Relaxed);
        self.inner.store.update(|u| u.add(Fam::PmSamplesLost, &self.key(), total.saturating_sub(before)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::online::StepRow;

    fn line<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        text.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
    }

    #[test]
    fn a_drains_sums_become_series_and_what_was_not_measured_stays_absent() {
        let live = LiveMetrics::new(&ProcessLabels { rank: Some(5), ..ProcessLabels::default() });
        let feed = live.feed(Some(1));
        let mut sums = DrainSums::new(&["dram__bytes_read.sum".into(), "dram__bytes_write.sum".into()]);
        sums.drains = 1;
        sums.ranges.insert(
            "Train step #/forward".into(),
            super::super::sums::RangeSums {
                instances: 3,
                gpu_ns: Some(1_500_000_001),
                wall_ns: None,
                kernels: 9,
                transfer_bytes: 0,
                dram_read: Some(4.5e9),
                dram_write: None,
            },
        );
        sums.step(&StepRow {
            step: 7,
            wall_time_ns: Some(20_000_000),
            gpu_time_ns: None,
            kernels: 4,
            transfers: 2,
            ..StepRow::default()
        });
        feed.publish(&mut sums);
        let text = live.encode().unwrap();
        let r = r#"{rank="5",device="1",range="Train step #/forward""#;
        assert_eq!(line(&text, &format!("gmprof_range_instances_total{r}}}")), Some("3"));
        // Whole nanoseconds, shown in seconds.
        assert_eq!(line(&text, &format!("gmprof_range_gpu_seconds_total{r}}}")), Some("1.500000001"));
        assert_eq!(
            line(&text, &format!("gmprof_range_dram_bytes_total{r},direction=\"read\"}}")),
            Some("4500000000.0")
        );
        // Not measured: no wall time, no DRAM writes, no step GPU time, no PM.
        for absent in
            ["gmprof_range_wall_seconds_total{", "direction=\"write\"", "gmprof_last_step_gpu_seconds{", "gmprof_pm_"]
        {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
        let d = r#"{rank="5",device="1"}"#;
        assert_eq!(line(&text, &format!("gmprof_last_step{d}")), Some("7"));
        assert_eq!(line(&text, &format!("gmprof_last_step_transfers{d}")), Some("2"));
        assert_eq!(line(&text, &format!("gmprof_last_step_wall_seconds{d}")), Some("0.02"));
        assert_eq!(line(&text, &format!("gmprof_steps_total{d}")), Some("1"));
        assert_eq!(line(&text, &format!("gmprof_drains_total{d}")), Some("1"));
        // A later step without a wall time: the last step's wall time is gone, not stale.
        sums.step(&StepRow { step: 8, wall_time_ns: None, gpu_time_ns: Some(5), ..StepRow::default() });
        feed.publish(&mut sums);
        let text = live.encode().unwrap();
        assert_eq!(line(&text, &format!("gmprof_last_step_wall_seconds{d}")), None, "{text}");
        assert_eq!(line(&text, &format!("gmprof_last_step_gpu_seconds{d}")), Some("5e-9"));
        assert_eq!(line(&text, &format!("gmprof_step_wall_seconds_count{d}")), Some("1"));
        assert_eq!(line(&text, &format!("gmprof_steps_total{d}")), Some("2"));
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# TYPE gmprof_build info").count(), 1, "{text}");
        // gmprof's own time: the drains' (per device), the callbacks' (process-wide totals).
        feed.drain_time(3_000_000_000, 250_000_000);
        feed.drain_time(1_000_000_000, 0);
        feed.set_callback_times(1_500, 2_000_000_000);
        feed.set_callback_times(2_500, 3_000_000_000);
        let text = live.encode().unwrap();
        assert_eq!(line(&text, &format!("gmprof_drain_seconds_total{d}")), Some("4.0"));
        assert_eq!(line(&text, &format!("gmprof_drain_lock_seconds_total{d}")), Some("0.25"));
        assert_eq!(line(&text, r#"gmprof_callback_seconds_total{rank="5",callback="api"}"#), Some("0.0000025"));
        assert_eq!(line(&text, r#"gmprof_callback_seconds_total{rank="5",callback="buffer"}"#), Some("3.0"));
        // Families with no series are not described at all.
        assert!(!text.contains("gmprof_otlp_push_failures"), "{text}");
    }
}
