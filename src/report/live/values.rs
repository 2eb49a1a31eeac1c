//! The exported metric families ([`LiveMetrics`]) and one device's handle on them
//! ([`LiveFeed`]).
//!
//! Every name starts with `gmprof_`; every series carries the process's labels
//! ([`ProcessLabels`]: `rank`, `local_rank`, `world_size`, `host`, each only where known)
//! and `device` (the CUDA device ordinal of the profiler that feeds it). Times are seconds,
//! sizes bytes. A value gmprof did not measure is absent (no series), never 0: a range group
//! whose instances had no GPU time has no `gmprof_range_gpu_seconds_total` series, a run
//! without PM sampling no `gmprof_dram_bytes_per_second`.
//!
//! Time sums are kept in whole nanoseconds ([`NanosCounter`]) and shown in seconds, so
//! `gmprof_range_gpu_seconds_total × 10⁹` is exactly the Σ of the rows' `gpu_time_ns` (and of
//! `report.json`'s streamed aggregates), not a sum of rounded floats.
//!
//! Imports `sums` (what a drain hands over); a leaf otherwise.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use super::sums::{Direction, DrainSums, MAX_RANGE_GROUPS, OTHER_RANGE};

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
    fn pairs(&self) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    device: Option<u32>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RangeLabels {
    device: Option<u32>,
    range: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RangeDramLabels {
    device: Option<u32>,
    range: String,
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DramLabels {
    device: Option<u32>,
    direction: &'static str,
}

/// A counter of nanoseconds, exported in seconds: summed exactly, divided once per scrape.
#[derive(Clone, Debug, Default)]
pub struct NanosCounter(Arc<AtomicU64>);

impl NanosCounter {
    /// Adds `ns`.
    pub fn add(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::Relaxed);
    }

    /// The sum, ns.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for NanosCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for NanosCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        encoder.encode_counter::<NoLabelSet, f64, u64>(&(self.get() as f64 / 1e9), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

/// Step wall time's histogram buckets: 1 ms to about 131 s, doubling.
fn step_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 18))
}

/// Every family; clones share the values.
#[derive(Clone, Debug)]
struct Families {
    steps: Family<DeviceLabels, Counter>,
    step_wall: Family<DeviceLabels, Histogram, fn() -> Histogram>,
    last_step: Family<DeviceLabels, Gauge>,
    last_step_wall: Family<DeviceLabels, FloatGauge>,
    last_step_gpu: Family<DeviceLabels, FloatGauge>,
    last_step_kernels: Family<DeviceLabels, Gauge>,
    last_step_transfers: Family<DeviceLabels, Gauge>,
    kernels: Family<DeviceLabels, Counter>,
    kernel_gpu: Family<DeviceLabels, NanosCounter>,
    transfers: Family<DeviceLabels, Counter>,
    transfer_bytes: Family<DeviceLabels, Counter>,
    range_instances: Family<RangeLabels, Counter>,
    range_gpu: Family<RangeLabels, NanosCounter>,
    range_wall: Family<RangeLabels, NanosCounter>,
    range_kernels: Family<RangeLabels, Counter>,
    range_transfer_bytes: Family<RangeLabels, Counter>,
    range_dram_bytes: Family<RangeDramLabels, FloatCounter>,
    dram_rate: Family<DramLabels, FloatGauge>,
    pm_samples: Family<DeviceLabels, Counter>,
    pm_samples_lost: Family<DeviceLabels, Counter>,
    records_dropped: Family<DeviceLabels, Counter>,
    flagged_rows: Family<DeviceLabels, Counter>,
    warnings: Family<DeviceLabels, Gauge>,
    drains: Family<DeviceLabels, Counter>,
    drain_failures: Family<DeviceLabels, Counter>,
}

impl Families {
    fn new() -> Self {
        Self {
            steps: Family::default(),
            step_wall: Family::new_with_constructor(step_histogram),
            last_step: Family::default(),
            last_step_wall: Family::default(),
            last_step_gpu: Family::default(),
            last_step_kernels: Family::default(),
            last_step_transfers: Family::default(),
            kernels: Family::default(),
            kernel_gpu: Family::default(),
            transfers: Family::default(),
            transfer_bytes: Family::default(),
            range_instances: Family::default(),
            range_gpu: Family::default(),
            range_wall: Family::default(),
            range_kernels: Family::default(),
            range_transfer_bytes: Family::default(),
            range_dram_bytes: Family::default(),
            dram_rate: Family::default(),
            pm_samples: Family::default(),
            pm_samples_lost: Family::default(),
            records_dropped: Family::default(),
            flagged_rows: Family::default(),
            warnings: Family::default(),
            drains: Family::default(),
            drain_failures: Family::default(),
        }
    }

    fn register(&self, r: &mut Registry) {
        let f = self.clone();
        r.register("steps", "Steps completed: rows of the steps table (steps/)", f.steps);
        r.register("step_wall_seconds", "Wall time of each step (push to pop of the step range)", f.step_wall);
        r.register("last_step", "Number of the last step completed (the steps table's step)", f.last_step);
        r.register("last_step_wall_seconds", "Wall time of the last step completed", f.last_step_wall);
        r.register("last_step_gpu_seconds", "GPU time (sum of kernel durations) of the last step", f.last_step_gpu);
        r.register("last_step_kernels", "Kernels of the last step completed", f.last_step_kernels);
        r.register("last_step_transfers", "Memcpys and memsets of the last step completed", f.last_step_transfers);
        r.register("kernels", "Kernels executed (rows of the kernels table)", f.kernels);
        r.register("kernel_gpu_seconds", "Sum of kernel durations", f.kernel_gpu);
        r.register("transfers", "Memcpys and memsets (rows of the transfers table)", f.transfers);
        r.register("transfer_bytes", "Bytes of memcpys and memsets", f.transfer_bytes);
        let instances = format!(
            "Completed instances of each range group (numbered paths folded, at most {MAX_RANGE_GROUPS} groups per \
             device, the rest in range=\"{OTHER_RANGE}\")"
        );
        r.register("range_instances", instances, f.range_instances);
        r.register("range_gpu_seconds", "Sum of the range group's GPU time (inclusive)", f.range_gpu);
        r.register("range_wall_seconds", "Sum of the range group's wall time (push to pop)", f.range_wall);
        r.register("range_kernels", "Kernels of the range group's instances (inclusive)", f.range_kernels);
        r.register("range_transfer_bytes", "Memcpy and memset bytes of the range group", f.range_transfer_bytes);
        r.register(
            "range_dram_bytes",
            "DRAM bytes of the range group, from its counters (dram__bytes_read.sum, dram__bytes_write.sum)",
            f.range_dram_bytes,
        );
        r.register(
            "dram_bytes_per_second",
            "DRAM bandwidth from PM sampling: the mean of the samples decoded since the last drain",
            f.dram_rate,
        );
        r.register("pm_samples", "PM samples decoded", f.pm_samples);
        r.register("pm_samples_lost", "PM samples lost (gaps between the samples kept)", f.pm_samples_lost);
        r.register("activity_records_dropped", "Activity records CUPTI dropped (process-wide)", f.records_dropped);
        r.register(
            "flagged_kernel_rows",
            "Kernel rows flagged: a status that is not ok (unmeasured, a rotation's by design, is not flagged)",
            f.flagged_rows,
        );
        r.register("warnings", "Distinct warnings of the streamed joins so far", f.warnings);
        r.register("drains", "Streamed drains done", f.drains);
        r.register("drain_failures", "Streamed drains that failed (their rows are lost)", f.drain_failures);
    }
}

/// The live metrics of one process: the registry a scrape encodes, and the families the
/// drains move. Share it with [`Arc`]; [`LiveMetrics::feed`] hands each profiler its handle.
#[derive(Debug)]
pub struct LiveMetrics {
    registry: Registry,
    families: Families,
}

impl LiveMetrics {
    /// Empty metrics of a process labelled `labels`.
    pub fn new(labels: &ProcessLabels) -> Self {
        let mut registry = Registry::with_prefix_and_labels("gmprof", labels.pairs().into_iter());
        let families = Families::new();
        families.register(&mut registry);
        let version = Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]);
        registry.register("build", "gmprof's version", version);
        Self { registry, families }
    }

    /// The handle of the profiler of device `device` (`None`: not known).
    pub fn feed(&self, device: Option<u32>) -> LiveFeed {
        LiveFeed { inner: Arc::new(FeedInner { device, families: self.families.clone(), ..FeedInner::default() }) }
    }

    /// The text a scrape gets ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

#[derive(Debug)]
struct FeedInner {
    device: Option<u32>,
    families: Families,
    /// Totals last set by [`LiveFeed::set_records_dropped`] and [`LiveFeed::set_pm_samples_lost`].
    records_dropped: AtomicU64,
    pm_samples_lost: AtomicU64,
}

impl Default for FeedInner {
    fn default() -> Self {
        Self {
            device: None,
            families: Families::new(),
            records_dropped: AtomicU64::new(0),
            pm_samples_lost: AtomicU64::new(0),
        }
    }
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

    fn labels(&self) -> DeviceLabels {
        DeviceLabels { device: self.inner.device }
    }

    /// Adds one drain's sums to the exported values and empties them (what they know of
    /// the range groups stays).
    pub fn publish(&self, sums: &mut DrainSums) {
        let f = &self.inner.families;
        let d = self.labels();
        let device = self.inner.device;
        f.drains.get_or_create(&d).inc_by(sums.drains);
        for step in sums.steps.drain(..) {
            f.steps.get_or_create(&d).inc();
            f.last_step.get_or_create(&d).set(i64::try_from(step.step).unwrap_or(i64::MAX));
            f.last_step_kernels.get_or_create(&d).set(i64::try_from(step.kernels).unwrap_or(i64::MAX));
            f.last_step_transfers.get_or_create(&d).set(i64::try_from(step.transfers).unwrap_or(i64::MAX));
            match step.wall_time_ns {
                Some(ns) => {
                    f.step_wall.get_or_create(&d).observe(ns as f64 / 1e9);
                    f.last_step_wall.get_or_create(&d).set(ns as f64 / 1e9);
                }
                None => {
                    f.last_step_wall.remove(&d);
                }
            }
            match step.gpu_time_ns {
                Some(ns) => {
                    f.last_step_gpu.get_or_create(&d).set(ns as f64 / 1e9);
                }
                None => {
                    f.last_step_gpu.remove(&d);
                }
            }
        }
        // Counts every drain measures are exported from the first drain on, 0 included.
        f.kernels.get_or_create(&d).inc_by(sums.kernels);
        f.transfers.get_or_create(&d).inc_by(sums.transfers);
        f.transfer_bytes.get_or_create(&d).inc_by(sums.transfer_bytes);
        f.flagged_rows.get_or_create(&d).inc_by(sums.flagged_rows);
        if let Some(ns) = sums.kernel_gpu_ns.take() {
            f.kernel_gpu.get_or_create(&d).add(ns);
        }
        for (range, r) in sums.ranges.drain() {
            let labels = RangeLabels { device, range };
            f.range_instances.get_or_create(&labels).inc_by(r.instances);
            f.range_kernels.get_or_create(&labels).inc_by(r.kernels);
            f.range_transfer_bytes.get_or_create(&labels).inc_by(r.transfer_bytes);
            if let Some(ns) = r.gpu_ns {
                f.range_gpu.get_or_create(&labels).add(ns);
            }
            if let Some(ns) = r.wall_ns {
                f.range_wall.get_or_create(&labels).add(ns);
            }
            for (direction, bytes) in [(Direction::Read, r.dram_read), (Direction::Write, r.dram_write)] {
                if let Some(b) = bytes {
                    let l = RangeDramLabels { device, range: labels.range.clone(), direction: direction.as_str() };
                    f.range_dram_bytes.get_or_create(&l).inc_by(b);
                }
            }
        }
        if sums.pm_seen {
            f.pm_samples.get_or_create(&d).inc_by(sums.pm_samples);
        }
        for (direction, mean) in sums.pm.take_means() {
            f.dram_rate.get_or_create(&DramLabels { device, direction: direction.as_str() }).set(mean);
        }
        if let Some(n) = sums.warnings.take() {
            f.warnings.get_or_create(&d).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        sums.clear_counts();
    }

    /// A drain failed (its rows are not in the part files, nor here).
    pub fn drain_failed(&self) {
        self.inner.families.drain_failures.get_or_create(&self.labels()).inc();
    }

    /// CUPTI's dropped activity records so far (a total: the counter moves by what is new).
    pub fn set_records_dropped(&self, total: u64) {
        let before = self.inner.records_dropped.fetch_max(total, Ordering::Relaxed);
        let counter = self.inner.families.records_dropped.get_or_create(&self.labels());
        counter.inc_by(total.saturating_sub(before));
    }

    /// PM sampling's lost samples so far (a total).
    pub fn set_pm_samples_lost(&self, total: u64) {
        let before = self.inner.pm_samples_lost.fetch_max(total, Ordering::Relaxed);
        let counter = self.inner.families.pm_samples_lost.get_or_create(&self.labels());
        counter.inc_by(total.saturating_sub(before));
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
    }
}
