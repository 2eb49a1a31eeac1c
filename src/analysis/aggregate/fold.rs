//! The per-range fold: [`aggregate`] adds each kernel and transfer row to its range's sums,
//! rolls nested ranges into their parents, and turns the sums into [`RangeRow`]s by each
//! metric's rule.
//!
//! Imports `rules`, `derived`, `rows` and `sums`; `aggregate/mod.rs` re-exports [`aggregate`]
//! and [`union_intervals`], and nothing in the folder imports it.

use super::derived::DramInputs;
use super::rows::{Aggregation, RangeRow};
use super::rules::{metric_rules, AggregationRule, MetricRule};
use super::sums::{MetricSums, RangeSums};
use crate::analysis::correlate::{Correlation, KernelRow, TimeSource};
use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{MetricSet, ProfilingMode, RangeId, GPU_TIME_METRIC};

/// Builds the per-range rows of a session; see the [module docs](super) for the rules.
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

/// One range's metric sums over its kernels, kept while the run goes (a streamed per_kernel
/// run's ranges, [`RangeInstances`](crate::analysis::online::RangeInstances)): the fold's
/// sums, inclusive once the children's are merged, and the values they give by the rules,
/// as [`aggregate`] gives them.
#[derive(Clone, Debug, Default)]
pub struct KernelMetricSums {
    sums: Vec<MetricSums>,
}

impl KernelMetricSums {
    /// Adds one kernel row's metrics (a whole-graph row's too), as the fold does.
    pub fn add(&mut self, row: &KernelRow) {
        if self.sums.len() < row.metrics.len() {
            self.sums.resize(row.metrics.len(), MetricSums::default());
        }
        let time = row.duration_ns.map(|t| t as f64);
        let window = row.range_duration_ns.map(|t| t as f64);
        for (acc, value) in self.sums.iter_mut().zip(&row.metrics) {
            acc.add(*value, time, window);
        }
    }

    /// Adds a nested range's sums.
    pub fn merge(&mut self, other: &KernelMetricSums) {
        if self.sums.len() < other.sums.len() {
            self.sums.resize(other.sums.len(), MetricSums::default());
        }
        for (acc, child) in self.sums.iter_mut().zip(&other.sums) {
            acc.merge(child);
        }
    }

    /// The range's metric values by `rules` (blank where no kernel had a value).
    pub fn values(&self, rules: &[MetricRule]) -> Vec<Option<f64>> {
        range_values(rules, &self.sums, rules.len())
    }
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
