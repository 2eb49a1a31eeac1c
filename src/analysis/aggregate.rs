//! Aggregation: per-range rows from per-kernel rows, with the right rule per metric type.
//!
//! Layer 3 (the safe profiler). Takes the [`Correlation`] of a session (one [`KernelRow`]
//! per kernel) and the [`SessionTree`], and produces one [`RangeRow`] per range instance,
//! plus a root row (path [`ROOT_PATH`]) for kernels launched outside any range. Rows are
//! *inclusive*: a range's values cover its own kernels and those of every nested range, as a
//! profiler user reads "train_step took X"; `self_kernel_count` tells the two apart.
//!
//! How a metric combines over a range's kernels depends on what it is
//! ([`AggregationRule`], chosen by [`rule_for`]):
//!
//! - **Counters** ([`MetricKind::Counter`]) are summed. Kernels of a range run one after the
//!   other (the range profiler serializes them), so the range's count of bytes, cycles,
//!   instructions or nanoseconds is the sum of its kernels' counts. This holds for every
//!   rollup of a counter: `.sum` and `.avg` (the mean over units, a linear function of the
//!   per-unit counts) sum exactly; for `.max`/`.min` the sum of the per-kernel maxima
//!   (minima) is the accumulated count of each kernel's busiest (idlest) unit, an upper
//!   (lower) bound of the range-wide per-unit max (min) that CUPTI would report for the
//!   range as one block. Kernels that overlap on several streams would be double counted in
//!   time-like counters; the range profiler does not overlap them.
//! - **Rates gmprof can decompose** are recomputed from summed counters
//!   ([`AggregationRule::RatioOfSums`]): `X.per_second` when its base counter `X` was
//!   collected is `Σ X / Σ kernel time`, and the derived DRAM bandwidths are
//!   `Σ bytes / Σ kernel time` (bytes/ns = GB/s), with the kernel times of the kernel rows
//!   (`duration_ns`, see [`kernel_time_input`]).
//! - **Every other ratio or throughput** (percent of peak, per-instruction ratios) is
//!   duration-weighted ([`AggregationRule::DurationWeighted`]): `Σ(vᵢ·wᵢ) / Σ wᵢ` with
//!   `wᵢ` the window the kernel's counters were measured over, its counter range's
//!   `gpu__time_duration.sum` (`range_duration_ns`: the kernel itself in kernel_replay, the
//!   kernel plus the GPU's wait for its launch in per_kernel). That is the ratio's value
//!   over the ranges' measured time. A plain mean of ratios is never used: a 1 µs kernel at
//!   100% and a 3 µs kernel at 0% are 25% busy over the range, not 50%. For a rate
//!   `vᵢ = cᵢ/wᵢ` this equals `Σcᵢ/Σwᵢ` exactly. Without windows the value is left empty
//!   rather than guessed.
//! - In [`ProfilingMode::PerRange`] CUPTI measured each range as one block, so its values
//!   are used as measured ([`AggregationRule::MeasuredPerRange`]).
//!
//! A kernel without a value for a metric is left out of that metric's sums (numerator and
//! denominator alike); the range's `flagged_kernel_count` says when that happened.
//!
//! # Time and transfers
//!
//! `gpu_time_ns` is the *sum* of kernel durations, in every mode, with durations from the
//! mode's [`TimeSource`]: activity timestamps in trace, per_kernel and per_range,
//! `gpu__time_duration.sum` in kernel_replay. So a range's GPU time counts the time its
//! kernels ran, not the time the GPU waited for the CPU to launch them (in per_range,
//! CUPTI's measurement of the whole range, idle time included, stays in the
//! `gpu__time_duration.sum` metric column). Where activity timestamps are real, kernels
//! may overlap (several streams), so a range also gets `gpu_busy_ns`: the length of the
//! union of its kernels' `[start_ns, end_ns)` intervals (inclusive of nested ranges, across
//! streams and devices), the time at least one of its kernels was running. It is at most
//! `gpu_time_ns`, and smaller exactly when kernels overlapped. Kernel replay collapses
//! activity timestamps (start == end), so `gpu_busy_ns` is `None` there.
//!
//! Memcpy and memset rows ([`TransferRow`]) are attributed like kernels (the calling thread's
//! innermost range, the root row without a call) and summed, inclusive of nested ranges:
//! `transfer_count`, `transfer_bytes` (memcpy and memset together, also split into
//! `memcpy_bytes` and `memset_bytes`), `transfer_time_ns` (Σ durations) and
//! `transfer_gbps` = bytes / time (bytes per ns = GB/s, `None` when the time is 0). They do
//! not count as kernels. Untimed transfers (memsets under kernel replay, timing `api_call`)
//! count in `transfer_count`, the byte sums and `untimed_transfer_count`, but not in
//! `transfer_time_ns` and `transfer_gbps`, which are over timed transfers only:
//! `transfer_time_ns` is `None` when the range has transfers and none was timed, and
//! `transfer_gbps` divides the timed transfers' bytes by their time.

use serde::{Deserialize, Serialize};

use crate::analysis::correlate::{Correlation, KernelRow, TimeSource, TransferRow};
use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{
    MetricKind, MetricSet, MetricSpec, ProfilingMode, RangeId, ThreadId, TransferKind, GPU_TIME_METRIC,
};

/// Suffix of a rate metric whose base counter is the name without it.
pub const PER_SECOND_SUFFIX: &str = ".per_second";

/// Bytes per DRAM sector, to turn `dram__sectors_*` into bytes.
pub const DRAM_SECTOR_BYTES: f64 = 32.0;

/// Names of the derived DRAM bandwidth columns.
pub const DRAM_READ_GBPS: &str = "dram_read_gbps";
/// See [`DRAM_READ_GBPS`].
pub const DRAM_WRITE_GBPS: &str = "dram_write_gbps";
/// See [`DRAM_READ_GBPS`].
pub const DRAM_TOTAL_GBPS: &str = "dram_total_gbps";

/// How a metric's per-kernel values combine into a range's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregationRule {
    /// Σ over the range's kernels.
    Sum,
    /// Recomputed from summed counters: Σ numerator / Σ GPU time (scaled to the unit).
    RatioOfSums,
    /// Σ(value·time) / Σ time over kernels with both.
    DurationWeighted,
    /// CUPTI measured the whole range ([`ProfilingMode::PerRange`]); used as measured.
    MeasuredPerRange,
}

impl AggregationRule {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregationRule::Sum => "sum",
            AggregationRule::RatioOfSums => "ratio_of_sums",
            AggregationRule::DurationWeighted => "duration_weighted",
            AggregationRule::MeasuredPerRange => "measured_per_range",
        }
    }
}

/// The rule chosen for one metric, recorded in the report's metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricRule {
    /// The metric.
    pub metric: MetricSpec,
    /// How it is aggregated.
    pub rule: AggregationRule,
    /// The metrics its range value is computed from (itself, or a base counter and the GPU
    /// time metric).
    pub inputs: Vec<String>,
}

/// A column gmprof derives from collected metrics, recorded in the report's metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DerivedMetric {
    /// Column name, e.g. `dram_read_gbps`.
    pub name: String,
    /// Unit of the column.
    pub unit: String,
    /// The formula, in words.
    pub formula: String,
    /// The collected metrics it is computed from; empty when they were not collected and the
    /// column is left empty.
    pub inputs: Vec<String>,
    /// Its rule.
    pub rule: AggregationRule,
}

/// One range instance's aggregated values (or the root row's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeRow {
    /// The range, `None` for the root row.
    pub range_id: Option<RangeId>,
    /// Path from the outermost range, or [`ROOT_PATH`].
    pub path: String,
    /// The range's own name.
    pub name: String,
    /// 0 for top-level ranges and the root row.
    pub depth: u32,
    /// How many earlier instances of this path the session had.
    pub instance: u32,
    /// The thread that pushed it; `None` for the root row.
    pub thread: Option<ThreadId>,
    /// Kernels of this range and its nested ranges.
    pub kernel_count: u64,
    /// Kernels launched while this range itself was innermost.
    pub self_kernel_count: u64,
    /// Of `kernel_count`, rows whose status is not `ok`.
    pub flagged_kernel_count: u64,
    /// Σ kernel durations, ns; `None` when kernels had no known duration.
    pub gpu_time_ns: Option<u64>,
    /// Pop − push, ns, when both are known.
    pub wall_time_ns: Option<u64>,
    /// Push timestamp, ns on the CUPTI clock (the clock of activity records).
    #[serde(default)]
    pub start_ns: Option<u64>,
    /// Pop timestamp, ns on the CUPTI clock; `None` while open.
    #[serde(default)]
    pub end_ns: Option<u64>,
    /// The enclosing range, `None` for top-level ranges and the root row.
    #[serde(default)]
    pub parent_id: Option<RangeId>,
    /// Length of the union of the kernels' `[start_ns, end_ns)` intervals, ns (inclusive of
    /// nested ranges): time at least one kernel ran. In the modes whose time source is
    /// activity (trace, per_kernel, per_range); `None` in kernel_replay and when no kernel of
    /// the range has timestamps.
    #[serde(default)]
    pub gpu_busy_ns: Option<u64>,
    /// Memcpy and memset operations of this range and its nested ranges.
    #[serde(default)]
    pub transfer_count: u64,
    /// Σ bytes of those transfers (memcpy and memset).
    #[serde(default)]
    pub transfer_bytes: u64,
    /// Σ bytes copied by memcpy.
    #[serde(default)]
    pub memcpy_bytes: u64,
    /// Σ bytes set by memset.
    #[serde(default)]
    pub memset_bytes: u64,
    /// Transfers among `transfer_count` that were not timed (timing `api_call`).
    #[serde(default)]
    pub untimed_transfer_count: u64,
    /// Σ durations of the timed transfers, ns; `None` when the range has transfers and
    /// none of them was timed.
    #[serde(default)]
    pub transfer_time_ns: Option<u64>,
    /// Bytes of the timed transfers / `transfer_time_ns`, GB/s; `None` when that time is
    /// 0 or not measured.
    #[serde(default)]
    pub transfer_gbps: Option<f64>,
    /// One value per metric of the session's [`MetricSet`], by its rule.
    pub metrics: Vec<Option<f64>>,
    /// Σ DRAM bytes read.
    pub dram_read_bytes: Option<f64>,
    /// Σ DRAM bytes written.
    pub dram_write_bytes: Option<f64>,
    /// Σ read bytes / Σ GPU time, GB/s.
    pub dram_read_gbps: Option<f64>,
    /// Σ written bytes / Σ GPU time, GB/s.
    pub dram_write_gbps: Option<f64>,
    /// Σ (read + written) bytes / Σ GPU time, GB/s.
    pub dram_total_gbps: Option<f64>,
}

/// The per-range result of a session.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregation {
    /// The rule of each metric, in metric-set order.
    pub rules: Vec<MetricRule>,
    /// The derived columns and their inputs.
    pub derived: Vec<DerivedMetric>,
    /// The root row first (only when kernels ran outside every range), then one row per range
    /// instance in push order.
    pub ranges: Vec<RangeRow>,
    /// Σ duration of every kernel with one, ns; in [`ProfilingMode::PerRange`] Σ of the
    /// measured top-level ranges. `None` when kernels ran and none had a time.
    pub total_gpu_time_ns: Option<u64>,
    /// Explanations of values left empty.
    pub warnings: Vec<String>,
}

/// The rule for `spec` within the metric set `set` (outside [`ProfilingMode::PerRange`]).
pub fn rule_for(spec: &MetricSpec, set: &MetricSet) -> AggregationRule {
    if per_second_base(spec, set).is_some() {
        return AggregationRule::RatioOfSums;
    }
    match spec.kind {
        MetricKind::Counter => AggregationRule::Sum,
        MetricKind::Ratio | MetricKind::Throughput => AggregationRule::DurationWeighted,
    }
}

/// Index of the base counter of a `.per_second` metric, when that counter is in the set.
fn per_second_base(spec: &MetricSpec, set: &MetricSet) -> Option<usize> {
    let base = spec.name.strip_suffix(PER_SECOND_SUFFIX)?;
    let index = set.index_of(base)?;
    (set.metrics.get(index)?.kind == MetricKind::Counter).then_some(index)
}

/// The rule of every metric of `set` in `mode`.
pub fn metric_rules(set: &MetricSet, mode: ProfilingMode) -> Vec<MetricRule> {
    set.metrics
        .iter()
        .map(|spec| {
            let rule =
                if mode == ProfilingMode::PerRange { AggregationRule::MeasuredPerRange } else { rule_for(spec, set) };
            let inputs = match rule {
                AggregationRule::RatioOfSums => {
                    let base = spec.name.strip_suffix(PER_SECOND_SUFFIX).unwrap_or(&spec.name);
                    vec![base.to_owned(), kernel_time_input(mode).to_owned()]
                }
                AggregationRule::DurationWeighted => {
                    vec![spec.name.clone(), GPU_TIME_METRIC.to_owned()]
                }
                AggregationRule::Sum | AggregationRule::MeasuredPerRange => vec![spec.name.clone()],
            };
            MetricRule { metric: spec.clone(), rule, inputs }
        })
        .collect()
}

/// What a rate's time comes from, as named in [`MetricRule::inputs`] and
/// [`DerivedMetric::inputs`]: the kernels' durations (`duration_ns` of the kernel rows), which
/// is `gpu__time_duration.sum` in kernel_replay and activity end − start in the other modes
/// ([`TimeSource::for_mode`]).
pub fn kernel_time_input(mode: ProfilingMode) -> &'static str {
    match TimeSource::for_mode(mode) {
        TimeSource::GpuTimeDuration => GPU_TIME_METRIC,
        TimeSource::Activity => KERNEL_DURATION_INPUT,
    }
}

/// The name [`kernel_time_input`] gives kernel durations taken from activity timestamps: the
/// `duration_ns` column of the kernel rows.
pub const KERNEL_DURATION_INPUT: &str = "duration_ns";

/// Where a DRAM byte count comes from.
#[derive(Clone, Copy, Debug)]
struct ByteSource {
    index: usize,
    scale: f64,
}

/// The metric indices the DRAM columns are computed from.
#[derive(Clone, Copy, Debug)]
struct DramInputs {
    read: Option<ByteSource>,
    write: Option<ByteSource>,
    /// `dram__bytes.sum`, used for the total only when read or write is missing.
    total: Option<ByteSource>,
}

impl DramInputs {
    fn find(set: &MetricSet) -> Self {
        let source = |bytes: &str, sectors: &str| {
            set.index_of(bytes)
                .map(|index| ByteSource { index, scale: 1.0 })
                .or_else(|| set.index_of(sectors).map(|index| ByteSource { index, scale: DRAM_SECTOR_BYTES }))
        };
        Self {
            read: source("dram__bytes_read.sum", "dram__sectors_read.sum"),
            write: source("dram__bytes_write.sum", "dram__sectors_write.sum"),
            total: source("dram__bytes.sum", "dram__sectors.sum"),
        }
    }

    fn read_bytes(&self, values: &[Option<f64>]) -> Option<f64> {
        bytes(self.read, values)
    }

    fn write_bytes(&self, values: &[Option<f64>]) -> Option<f64> {
        bytes(self.write, values)
    }

    fn total_bytes(&self, values: &[Option<f64>]) -> Option<f64> {
        if self.read.is_some() && self.write.is_some() {
            Some(self.read_bytes(values)? + self.write_bytes(values)?)
        } else {
            bytes(self.total, values)
        }
    }

    fn describe(&self, set: &MetricSet, mode: ProfilingMode) -> Vec<DerivedMetric> {
        let name_of = |s: Option<ByteSource>| s.and_then(|s| set.metrics.get(s.index)).map(|m| m.name.clone());
        let time = kernel_time_input(mode);
        let with_time = |mut inputs: Vec<String>| {
            let time_known = time != GPU_TIME_METRIC || set.index_of(GPU_TIME_METRIC).is_some();
            if inputs.is_empty() || !time_known {
                Vec::new()
            } else {
                inputs.push(time.to_owned());
                inputs
            }
        };
        let time_text = if time == GPU_TIME_METRIC {
            GPU_TIME_METRIC.to_owned()
        } else {
            format!("kernel durations ({time}, from activity timestamps)")
        };
        let read: Vec<String> = name_of(self.read).into_iter().collect();
        let write: Vec<String> = name_of(self.write).into_iter().collect();
        let total: Vec<String> = if self.read.is_some() && self.write.is_some() {
            read.iter().chain(&write).cloned().collect()
        } else {
            name_of(self.total).into_iter().collect()
        };
        let column = |name: &str, what: &str, inputs: Vec<String>| DerivedMetric {
            name: name.to_owned(),
            unit: "GB/s".to_owned(),
            formula: format!("sum of DRAM bytes {what} / sum of {time_text} (bytes/ns = GB/s); sectors count 32 bytes"),
            inputs: with_time(inputs),
            rule: AggregationRule::RatioOfSums,
        };
        vec![
            column(DRAM_READ_GBPS, "read", read),
            column(DRAM_WRITE_GBPS, "written", write),
            column(DRAM_TOTAL_GBPS, "read and written", total),
        ]
    }
}

fn bytes(source: Option<ByteSource>, values: &[Option<f64>]) -> Option<f64> {
    let source = source?;
    values.get(source.index).copied().flatten().map(|v| v * source.scale)
}

/// Running sums of one metric over a set of kernels.
#[derive(Clone, Copy, Debug, Default)]
struct MetricSums {
    /// Σ v over kernels with a value.
    sum: f64,
    /// Kernels with a value.
    count: u64,
    /// Σ v over kernels with a value and a duration.
    timed_sum: f64,
    /// Σ t (kernel duration) over kernels with a value and a duration.
    time: f64,
    /// Σ v·w over kernels with a value and a counter window `w`.
    weighted_sum: f64,
    /// Σ w over kernels with a value and a counter window.
    weight: f64,
}

impl MetricSums {
    /// Adds one kernel's value, with its duration `time` (for rates) and the window its
    /// counters were measured over, `window` (for duration weighting).
    fn add(&mut self, value: Option<f64>, time: Option<f64>, window: Option<f64>) {
        let Some(v) = value else { return };
        self.sum += v;
        self.count += 1;
        if let Some(t) = time {
            self.timed_sum += v;
            self.time += t;
        }
        if let Some(w) = window {
            self.weighted_sum += v * w;
            self.weight += w;
        }
    }

    fn merge(&mut self, other: &MetricSums) {
        self.sum += other.sum;
        self.count += other.count;
        self.timed_sum += other.timed_sum;
        self.time += other.time;
        self.weighted_sum += other.weighted_sum;
        self.weight += other.weight;
    }

    fn total(&self) -> Option<f64> {
        (self.count > 0).then_some(self.sum)
    }

    fn weighted_mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.weighted_sum / self.weight)
    }

    /// Σv / Σt over kernels with both, per ns.
    fn per_ns(&self) -> Option<f64> {
        (self.time > 0.0).then(|| self.timed_sum / self.time)
    }
}

/// Running sums of one range (self, then inclusive after roll-up).
#[derive(Clone, Debug, Default)]
struct RangeSums {
    kernels: u64,
    self_kernels: u64,
    flagged: u64,
    time_ns: u64,
    timed_kernels: u64,
    /// Read, write, total DRAM bytes.
    dram: [MetricSums; 3],
    transfers: TransferSums,
}

/// Running sums of a range's memcpy and memset rows.
#[derive(Clone, Copy, Debug, Default)]
struct TransferSums {
    count: u64,
    memcpy_bytes: u64,
    memset_bytes: u64,
    /// Rows without times; their bytes are in the sums above, not in `timed_bytes`.
    untimed: u64,
    timed_bytes: u64,
    time_ns: u64,
}

impl TransferSums {
    fn add(&mut self, row: &TransferRow) {
        self.count += 1;
        match row.kind {
            TransferKind::Memset => self.memset_bytes = self.memset_bytes.saturating_add(row.bytes),
            _ => self.memcpy_bytes = self.memcpy_bytes.saturating_add(row.bytes),
        }
        match row.duration_ns {
            Some(d) => {
                self.timed_bytes = self.timed_bytes.saturating_add(row.bytes);
                self.time_ns = self.time_ns.saturating_add(d);
            }
            None => self.untimed += 1,
        }
    }

    fn merge(&mut self, other: &TransferSums) {
        self.count += other.count;
        self.memcpy_bytes = self.memcpy_bytes.saturating_add(other.memcpy_bytes);
        self.memset_bytes = self.memset_bytes.saturating_add(other.memset_bytes);
        self.untimed += other.untimed;
        self.timed_bytes = self.timed_bytes.saturating_add(other.timed_bytes);
        self.time_ns = self.time_ns.saturating_add(other.time_ns);
    }

    fn bytes(&self) -> u64 {
        self.memcpy_bytes.saturating_add(self.memset_bytes)
    }

    /// Σ durations of the timed rows; `None` when there are rows and none was timed.
    fn time_ns(&self) -> Option<u64> {
        (self.count == 0 || self.untimed < self.count).then_some(self.time_ns)
    }

    /// Timed bytes per timed ns (GB/s).
    fn gbps(&self) -> Option<f64> {
        (self.time_ns > 0).then(|| self.timed_bytes as f64 / self.time_ns as f64)
    }
}

impl RangeSums {
    fn merge(&mut self, other: &RangeSums) {
        self.kernels += other.kernels;
        self.flagged += other.flagged;
        self.time_ns += other.time_ns;
        self.timed_kernels += other.timed_kernels;
        for (mine, theirs) in self.dram.iter_mut().zip(&other.dram) {
            mine.merge(theirs);
        }
        self.transfers.merge(&other.transfers);
    }
}

/// Builds the per-range rows of a session; see the [module docs](self) for the rules.
pub fn aggregate(
    tree: &SessionTree,
    correlation: &Correlation,
    metrics: &MetricSet,
    mode: ProfilingMode,
) -> Aggregation {
    let metric_count = metrics.metrics.len();
    let rules = metric_rules(metrics, mode);
    let dram = DramInputs::find(metrics);
    let mut warnings = Vec::new();

    // Dense per-range arrays: index = slot for ranges, `root` for the root row.
    let root = tree.len();
    let slots = root + 1;
    let mut sums: Vec<RangeSums> = vec![RangeSums::default(); slots];
    let mut metric_sums: Vec<MetricSums> = vec![MetricSums::default(); slots * metric_count];

    let index_of = |id: Option<RangeId>| id.and_then(|id| tree.dense_index(id)).filter(|i| *i < root).unwrap_or(root);
    // Kernel intervals per range, for the busy time (modes with real activity timestamps).
    let track_busy = TimeSource::for_mode(mode) == TimeSource::Activity;
    let mut intervals: Vec<Vec<(u64, u64)>> = if track_busy { vec![Vec::new(); slots] } else { Vec::new() };
    let mut total_gpu_time_ns = 0u64;
    let mut timed_kernels = 0u64;
    for row in &correlation.rows {
        let index = index_of(row.range_id);
        add_kernel(&mut sums[index], &mut metric_sums[index * metric_count..(index + 1) * metric_count], row, &dram);
        if !row.granularity.is_kernel_execution() {
            // A whole-graph row: its kernels are rows of their own.
            continue;
        }
        if let Some(t) = row.duration_ns {
            total_gpu_time_ns = total_gpu_time_ns.saturating_add(t);
            timed_kernels += 1;
        }
        if track_busy {
            if let (Some(start), Some(end)) = (row.start_ns, row.end_ns) {
                intervals[index].push((start, end.max(start)));
            }
        }
    }
    for transfer in &correlation.transfers {
        sums[index_of(transfer.range_id)].transfers.add(transfer);
    }

    // Roll children into parents, deepest first, so every row becomes inclusive. Parents
    // are found through the tree, not through slot order.
    let mut by_depth: Vec<(u32, usize, usize)> = tree
        .nodes()
        .filter_map(|node| {
            let index = tree.dense_index(node.id)?;
            let parent = tree.dense_index(node.parent?)?;
            Some((node.depth, index, parent))
        })
        .collect();
    by_depth.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    for (_, child, parent) in by_depth {
        if child == parent || child >= root || parent >= root {
            continue;
        }
        let child_sums = sums[child].clone();
        sums[parent].merge(&child_sums);
        if track_busy {
            // The child's list is final (its children came before it): coalesce it, then
            // hand the parent the coalesced intervals.
            let child_intervals = std::mem::take(&mut intervals[child]);
            let coalesced = union_intervals(child_intervals);
            intervals[parent].extend_from_slice(&coalesced);
            intervals[child] = coalesced;
        }
        for m in 0..metric_count {
            let child_metric = metric_sums[child * metric_count + m];
            metric_sums[parent * metric_count + m].merge(&child_metric);
        }
    }

    let window_known = mode == ProfilingMode::Trace || metrics.index_of(GPU_TIME_METRIC).is_some();
    if !window_known && mode != ProfilingMode::PerRange {
        // Weighting needs each kernel's counter window; rates need kernel durations, which
        // come from the same metric only in kernel_replay.
        let time_from_counters = TimeSource::for_mode(mode) == TimeSource::GpuTimeDuration;
        let weighted: Vec<&str> = rules
            .iter()
            .filter(|r| {
                r.rule == AggregationRule::DurationWeighted
                    || (r.rule == AggregationRule::RatioOfSums && time_from_counters)
            })
            .map(|r| r.metric.name.as_str())
            .collect();
        if !weighted.is_empty() {
            warnings.push(format!(
                "{GPU_TIME_METRIC} was not collected, so these metrics cannot be weighted by \
                 kernel time and are left empty per range: {}",
                weighted.join(", ")
            ));
        }
    }

    // Busy time per range from the (now inclusive) interval lists.
    let busy: Vec<Option<u64>> = if track_busy {
        intervals
            .into_iter()
            .zip(&sums)
            .map(|(list, s)| {
                let timed = !list.is_empty();
                (s.kernels == 0 || timed).then(|| union_intervals(list).iter().map(|(a, b)| b - a).sum())
            })
            .collect()
    } else {
        vec![None; slots]
    };

    let mut ranges = Vec::with_capacity(slots);
    if sums[root].kernels > 0 || sums[root].transfers.count > 0 {
        let values = range_values(&rules, &metric_sums[root * metric_count..], metric_count);
        let mut row = build_row(None, &sums[root], values, None);
        row.gpu_busy_ns = busy[root];
        ranges.push(row);
    }
    for node in tree.nodes() {
        let Some(index) = tree.dense_index(node.id).filter(|i| *i < root) else {
            continue;
        };
        let row_sums = &sums[index];
        let mut row = if mode == ProfilingMode::PerRange {
            let measured = correlation.range_counters.get(&node.id);
            let values = measured.cloned().unwrap_or_else(|| vec![None; metric_count]);
            per_range_row(row_sums, values, &dram)
        } else {
            let values =
                range_values(&rules, &metric_sums[index * metric_count..(index + 1) * metric_count], metric_count);
            build_row(Some(node.id), row_sums, values, None)
        };
        row.range_id = Some(node.id);
        row.path.clone_from(&node.path);
        row.name.clone_from(&node.name);
        row.depth = node.depth;
        row.instance = node.instance;
        row.thread = Some(node.thread);
        row.wall_time_ns = node.wall_ns();
        row.start_ns = Some(node.push_ns);
        row.end_ns = node.pop_ns;
        row.parent_id = node.parent;
        row.gpu_busy_ns = busy[index];
        ranges.push(row);
    }

    let total_gpu_time_ns = if mode == ProfilingMode::PerRange {
        // Kernels have no time of their own: the measured top-level ranges hold it.
        let measured: Vec<u64> =
            ranges.iter().filter(|r| r.depth == 0 && r.range_id.is_some()).filter_map(|r| r.gpu_time_ns).collect();
        (correlation.rows.is_empty() || !measured.is_empty())
            .then(|| measured.iter().fold(0u64, |a, b| a.saturating_add(*b)))
    } else {
        (correlation.rows.is_empty() || timed_kernels > 0).then_some(total_gpu_time_ns)
    };
    Aggregation { rules, derived: dram.describe(metrics, mode), ranges, total_gpu_time_ns, warnings }
}

/// Sorts and coalesces half-open intervals `[start, end)` into disjoint ones in start order;
/// touching intervals merge, empty ones vanish.
pub fn union_intervals(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.retain(|(start, end)| end > start);
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// Adds one kernel's values to its own range's sums.
fn add_kernel(sums: &mut RangeSums, metric_sums: &mut [MetricSums], row: &KernelRow, dram: &DramInputs) {
    let time = row.duration_ns.map(|t| t as f64);
    // Ratios were measured over the kernel's counter range: weigh them by its length.
    let window = row.range_duration_ns.map(|t| t as f64);
    // A whole-graph row (per_kernel) brings the counters of its graph launch; its kernels,
    // and their time, are counted from its graph-node rows.
    if row.granularity.is_kernel_execution() {
        sums.kernels += 1;
        sums.self_kernels += 1;
        if row.status.is_flagged() {
            sums.flagged += 1;
        }
        if let Some(t) = row.duration_ns {
            sums.time_ns = sums.time_ns.saturating_add(t);
            sums.timed_kernels += 1;
        }
    }
    for (acc, value) in metric_sums.iter_mut().zip(&row.metrics) {
        acc.add(*value, time, window);
    }
    sums.dram[0].add(dram.read_bytes(&row.metrics), time, window);
    sums.dram[1].add(dram.write_bytes(&row.metrics), time, window);
    sums.dram[2].add(dram.total_bytes(&row.metrics), time, window);
}

/// A range's metric values from its (inclusive) sums, by each metric's rule.
fn range_values(rules: &[MetricRule], metric_sums: &[MetricSums], metric_count: usize) -> Vec<Option<f64>> {
    let mut values = Vec::with_capacity(metric_count);
    for (m, rule) in rules.iter().enumerate() {
        let Some(own) = metric_sums.get(m) else {
            values.push(None);
            continue;
        };
        let value = match rule.rule {
            AggregationRule::Sum | AggregationRule::MeasuredPerRange => own.total(),
            AggregationRule::DurationWeighted => own.weighted_mean(),
            AggregationRule::RatioOfSums => {
                // Base counter's Σ over kernels with a time, per second.
                let base = rule
                    .inputs
                    .first()
                    .and_then(|name| rules.iter().position(|r| &r.metric.name == name))
                    .and_then(|i| metric_sums.get(i));
                base.and_then(MetricSums::per_ns).map(|per_ns| per_ns * 1e9)
            }
        };
        values.push(value);
    }
    values
}

/// A row from summed kernels (every mode but PerRange).
fn build_row(range_id: Option<RangeId>, sums: &RangeSums, metrics: Vec<Option<f64>>, wall: Option<u64>) -> RangeRow {
    RangeRow {
        range_id,
        path: ROOT_PATH.to_owned(),
        name: ROOT_PATH.to_owned(),
        depth: 0,
        instance: 0,
        thread: None,
        kernel_count: sums.kernels,
        self_kernel_count: sums.self_kernels,
        flagged_kernel_count: sums.flagged,
        gpu_time_ns: (sums.kernels == 0 || sums.timed_kernels > 0).then_some(sums.time_ns),
        wall_time_ns: wall,
        start_ns: None,
        end_ns: None,
        parent_id: None,
        gpu_busy_ns: None,
        transfer_count: sums.transfers.count,
        transfer_bytes: sums.transfers.bytes(),
        memcpy_bytes: sums.transfers.memcpy_bytes,
        memset_bytes: sums.transfers.memset_bytes,
        untimed_transfer_count: sums.transfers.untimed,
        transfer_time_ns: sums.transfers.time_ns(),
        transfer_gbps: sums.transfers.gbps(),
        metrics,
        dram_read_bytes: sums.dram[0].total(),
        dram_write_bytes: sums.dram[1].total(),
        dram_read_gbps: sums.dram[0].per_ns(),
        dram_write_gbps: sums.dram[1].per_ns(),
        dram_total_gbps: sums.dram[2].per_ns(),
    }
}

/// A row from CUPTI's measurement of the whole range (PerRange mode). Its GPU time is the sum
/// of its kernels' durations (activity timestamps), as in every mode; CUPTI's measured
/// `gpu__time_duration.sum` of the range, which also counts the time the GPU waited for
/// launches while the range was open, stays in the metric columns.
fn per_range_row(sums: &RangeSums, values: Vec<Option<f64>>, dram: &DramInputs) -> RangeRow {
    let mut row = build_row(None, sums, Vec::new(), None);
    let time = row.gpu_time_ns.map(|t| t as f64);
    let per_ns = |b: Option<f64>| Some(b? / time.filter(|t| *t > 0.0)?);
    let read = dram.read_bytes(&values);
    let write = dram.write_bytes(&values);
    let total = dram.total_bytes(&values);
    row.dram_read_bytes = read;
    row.dram_write_bytes = write;
    row.dram_read_gbps = per_ns(read);
    row.dram_write_gbps = per_ns(write);
    row.dram_total_gbps = per_ns(total);
    row.metrics = values;
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, kind: MetricKind) -> MetricSpec {
        MetricSpec { name: name.into(), kind, unit: String::new(), description: String::new() }
    }

    #[test]
    fn rules_by_kind_and_name() {
        let set = MetricSet {
            metrics: vec![
                spec(GPU_TIME_METRIC, MetricKind::Counter),
                spec("dram__bytes_read.sum", MetricKind::Counter),
                spec("dram__bytes_read.sum.per_second", MetricKind::Throughput),
                spec("lts__t_bytes.sum.per_second", MetricKind::Throughput),
                spec("sm__throughput.avg.pct_of_peak_sustained_elapsed", MetricKind::Throughput),
                spec("smsp__inst_executed.avg.per_cycle_active", MetricKind::Ratio),
                spec("sm__cycles_active.max", MetricKind::Counter),
            ],
        };
        let rules: Vec<AggregationRule> = set.metrics.iter().map(|m| rule_for(m, &set)).collect();
        assert_eq!(
            rules,
            vec![
                AggregationRule::Sum,
                AggregationRule::Sum,
                AggregationRule::RatioOfSums,
                AggregationRule::DurationWeighted,
                AggregationRule::DurationWeighted,
                AggregationRule::DurationWeighted,
                AggregationRule::Sum,
            ]
        );
        let recorded = metric_rules(&set, ProfilingMode::KernelReplay);
        assert_eq!(recorded[2].inputs, vec!["dram__bytes_read.sum", GPU_TIME_METRIC]);
        assert!(metric_rules(&set, ProfilingMode::PerRange)
            .iter()
            .all(|r| r.rule == AggregationRule::MeasuredPerRange));
        assert_eq!(
            serde_json::to_string(&AggregationRule::DurationWeighted).ok().as_deref(),
            Some("\"duration_weighted\"")
        );
    }

    #[test]
    fn weighted_mean_is_not_a_plain_mean() {
        let mut s = MetricSums::default();
        s.add(Some(0.0), Some(3.0), Some(3.0));
        s.add(Some(100.0), Some(1.0), Some(1.0));
        s.add(None, Some(50.0), Some(50.0));
        assert_eq!(s.weighted_mean(), Some(25.0));
        let mut t = MetricSums::default();
        t.add(Some(7.0), None, None);
        assert_eq!(t.weighted_mean(), None);
        assert_eq!(t.total(), Some(7.0));
    }

    #[test]
    fn rates_use_kernel_time_and_weights_use_the_counter_window() {
        // per_kernel: 1000 bytes in a 2 µs kernel measured by a 6 µs range.
        let mut s = MetricSums::default();
        s.add(Some(1000.0), Some(2000.0), Some(6000.0));
        s.add(Some(3000.0), Some(2000.0), Some(2000.0));
        assert_eq!(s.per_ns(), Some(1.0), "4000 bytes over 4000 ns of kernels");
        assert_eq!(s.weighted_mean(), Some((1000.0 * 6000.0 + 3000.0 * 2000.0) / 8000.0));
        assert_eq!(kernel_time_input(ProfilingMode::KernelReplay), GPU_TIME_METRIC);
        assert_eq!(kernel_time_input(ProfilingMode::PerKernel), KERNEL_DURATION_INPUT);
    }

    #[test]
    fn intervals_union_half_open() {
        assert_eq!(union_intervals(vec![]), vec![]);
        assert_eq!(union_intervals(vec![(5, 5), (3, 2)]), vec![], "empty and reversed vanish");
        assert_eq!(
            union_intervals(vec![(10, 20), (0, 5), (5, 8), (15, 30), (40, 41)]),
            vec![(0, 8), (10, 30), (40, 41)]
        );
        assert_eq!(union_intervals(vec![(0, 100), (10, 20)]), vec![(0, 100)]);
    }

    #[test]
    fn sectors_count_32_bytes() {
        let set = MetricSet {
            metrics: vec![
                spec("dram__sectors_read.sum", MetricKind::Counter),
                spec("dram__bytes_write.sum", MetricKind::Counter),
            ],
        };
        let inputs = DramInputs::find(&set);
        let values = [Some(2.0), Some(10.0)];
        assert_eq!(inputs.read_bytes(&values), Some(64.0));
        assert_eq!(inputs.write_bytes(&values), Some(10.0));
        assert_eq!(inputs.total_bytes(&values), Some(74.0));
        assert_eq!(inputs.total_bytes(&[Some(2.0), None]), None);
        let described = inputs.describe(&set, ProfilingMode::KernelReplay);
        assert!(described.iter().all(|d| d.inputs.is_empty()), "no time metric: no inputs");
    }
}
