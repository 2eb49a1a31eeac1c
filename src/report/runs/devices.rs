//! One process, several GPUs: the reports of a process's CUDA contexts combined into one.
//!
//! Layer 3, report. A process that drives several GPUs (a pipeline over two devices,
//! `nn.DataParallel`, JAX with every local device, an inference server) has one profiler
//! per CUDA context, each with its own range profiler, counters and replay; the NVTX and
//! user ranges are process-wide and are opened on every profiler live at the push. Each
//! profiler finishes into a [`Report`] of its context; [`combine`] makes the process's one
//! report of them:
//!
//! - **Ranges** ([`Report::ranges`]) are process-wide: one row per range instance, holding
//!   every device's kernels. A range a profiler saw is matched to the first context's
//!   instance of the same thread and path that was open when it was pushed (a context
//!   created late adopts the ranges open on its creating thread, and sees later pushes);
//!   ranges only a later context saw are added. Counts, GPU time, bytes and counter metrics
//!   are summed over the devices; ratios and throughputs are weighted by each device's GPU
//!   time; `gpu_busy_ns` is the union of the kernels' intervals over all devices.
//! - **Per device** ([`Report::range_devices`], `range_devices.csv`): each range instance's
//!   row on each device whose kernels or transfers it held, as that device's profiler
//!   measured it, with the combined row's ids.
//! - **Kernels and transfers** of every device, in launch (correlation id) order; each row
//!   has its `device_id`. The timeline puts each device in its own track group.
//! - **Metadata**: counts summed, warnings prefixed with their device, and
//!   [`ReportMeta::devices`](crate::report::ReportMeta::devices) with each device's kernels and GPU
//!   time (the summary's `GPUs:` line).

use std::collections::{BTreeMap, HashMap};

/// The per-device range table a process that profiled several GPUs writes.
pub const RANGE_DEVICES_CSV: &str = "range_devices.csv";

use crate::analysis::aggregate::{AggregationRule, RangeRow};
use crate::model::{MetricKind, RangeId, UnprofiledContext};
pub use crate::report::model::{DeviceShare, RangeDeviceRow};
use crate::report::model::{Report, ReportMeta};

/// One context's report, with what identifies its device.
#[derive(Clone, Debug)]
pub struct ContextReport {
    /// The device ordinal.
    pub device_id: u32,
    /// CUPTI's context id.
    pub context_id: Option<u32>,
    /// The report its profiler finished into.
    pub report: Report,
}

/// Combines the reports of one process's contexts, the first context's first (its ranges
/// order the result). One report comes back unchanged.
pub fn combine(mut parts: Vec<ContextReport>) -> Option<Report> {
    if parts.len() <= 1 {
        return parts.pop().map(|p| p.report);
    }
    let mut ids = RangeMatcher::new(&parts[0].report.ranges, parts.iter().flat_map(|p| &p.report.ranges));
    let maps: Vec<HashMap<RangeId, RangeId>> =
        parts.iter().enumerate().map(|(i, p)| ids.map_part(i, &p.report.ranges)).collect();
    let remap = |i: usize, id: Option<RangeId>| id.map(|id| maps[i].get(&id).copied().unwrap_or(id));

    let base = &parts[0].report;
    let rules = base.meta.metrics.clone();
    // Metric columns by name: a later context's set may be in another order.
    let metric_names: Vec<&str> = rules.iter().map(|r| r.metric.name.as_str()).collect();
    let columns: Vec<Vec<Option<usize>>> = parts
        .iter()
        .map(|p| metric_names.iter().map(|n| p.report.meta.metrics.iter().position(|r| r.metric.name == *n)).collect())
        .collect();
    let reorder = |i: usize, values: &[Option<f64>]| -> Vec<Option<f64>> {
        columns[i].iter().map(|c| c.and_then(|c| values.get(c).copied().flatten())).collect()
    };

    // Each device's rows, with the combined ids and metric order.
    let mut per_device: Vec<RangeDeviceRow> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        for row in &part.report.ranges {
            if row.kernel_count == 0 && row.transfer_count == 0 {
                continue;
            }
            let mut row = row.clone();
            row.range_id = remap(i, row.range_id);
            row.parent_id = remap(i, row.parent_id);
            row.metrics = reorder(i, &row.metrics);
            per_device.push(RangeDeviceRow { device_id: part.device_id, row });
        }
    }

    let mut kernels = Vec::new();
    let mut transfers = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        kernels.extend(part.report.kernels.iter().cloned().map(|mut k| {
            k.range_id = remap(i, k.range_id);
            k.metrics = reorder(i, &k.metrics);
            k
        }));
        transfers.extend(part.report.transfers.iter().cloned().map(|mut t| {
            t.range_id = remap(i, t.range_id);
            t
        }));
    }
    kernels.sort_by_key(|k| k.correlation_id);
    transfers.sort_by_key(|t| (t.start_ns.is_none(), t.start_ns, t.correlation_id));

    // The combined rows: identity from the first context that saw the range, values summed.
    let busy = busy_union(&ids.rows, &kernels);
    let mut shares_of: HashMap<Option<RangeId>, Vec<&RangeRow>> = HashMap::new();
    for d in &per_device {
        shares_of.entry(d.row.range_id).or_default().push(&d.row);
    }
    let mut ranges: Vec<RangeRow> = ids
        .rows
        .iter()
        .map(|identity| {
            let shares = shares_of.get(&identity.range_id).map(Vec::as_slice).unwrap_or_default();
            let mut row = combine_rows(identity, shares, &rules);
            if let Some(b) = busy.get(&identity.range_id) {
                row.gpu_busy_ns = row.gpu_busy_ns.map(|_| *b);
            }
            row
        })
        .collect();
    // Push order across contexts (ranges only a later context saw fall into place), then
    // instances counted again along it.
    ranges.sort_by_key(|r| (r.range_id.is_some(), r.start_ns));
    let mut seen: HashMap<String, u32> = HashMap::new();
    for r in ranges.iter_mut().filter(|r| r.range_id.is_some()) {
        let n = seen.entry(r.path.clone()).or_default();
        r.instance = *n;
        *n += 1;
    }
    let instance_of: HashMap<Option<RangeId>, u32> = ranges.iter().map(|r| (r.range_id, r.instance)).collect();
    let order: HashMap<Option<RangeId>, usize> = ranges.iter().enumerate().map(|(i, r)| (r.range_id, i)).collect();
    for d in &mut per_device {
        d.row.instance = instance_of.get(&d.row.range_id).copied().unwrap_or(d.row.instance);
    }
    per_device.sort_by_key(|d| (order.get(&d.row.range_id).copied().unwrap_or(usize::MAX), d.device_id));

    let meta = combine_meta(&parts, &kernels);
    let mut pm = None;
    let mut sampled = Vec::new();
    let mut pc = None;
    let mut pc_sampled = Vec::new();
    let mut device_timers = Vec::new();
    let mut device_regions = Vec::new();
    let mut probes = Vec::new();
    let mut rotated: Vec<(u32, crate::analysis::rotation::RotationReport)> = Vec::new();
    // A streamed context's summary (the first one; each context streams into its own
    // directory, see the README's streamed outputs).
    let mut streamed = None;
    for (i, part) in parts.iter_mut().enumerate() {
        streamed = streamed.or_else(|| part.report.streamed.take());
        if let Some(mut p) = part.report.pm.take() {
            sampled.push(part.device_id);
            if pm.is_none() {
                for row in &mut p.rows {
                    row.range_id = remap(i, row.range_id);
                }
                pm = Some(p);
            }
        }
        if let Some(p) = part.report.pc.take() {
            pc_sampled.push(part.device_id);
            // Its ranges are named by path and instance, which combining keeps.
            pc.get_or_insert(p);
        }
        device_timers.append(&mut part.report.device_timers);
        device_regions.append(&mut part.report.device_regions);
        probes.append(&mut part.report.probes);
        if let Some(r) = part.report.rotation.take() {
            rotated.push((part.device_id, r));
        }
    }
    let mut report = Report {
        meta,
        ranges,
        kernels,
        transfers,
        pm,
        pc,
        device_timers,
        device_regions,
        probes,
        range_devices: per_device,
        streamed,
        rotation: None,
    };
    if rotated.len() > 1 {
        report.meta.warnings.push(format!(
            "per_kernel ran in rotation on devices {}: the rotation section holds device {}'s positions only",
            rotated.iter().map(|(d, _)| d.to_string()).collect::<Vec<_>>().join(", "),
            rotated[0].0
        ));
    }
    report.rotation = rotated.into_iter().next().map(|(_, r)| r);
    if pc_sampled.len() > 1 {
        report.meta.warnings.push(format!(
            "PC sampling ran on devices {}: stalls.csv and pc_samples.csv hold device {}'s samples only",
            list(&pc_sampled),
            pc_sampled[0]
        ));
    }
    if sampled.len() > 1 {
        report.meta.warnings.push(format!(
            "PM sampling ran on devices {}: pm.csv holds device {}'s samples only",
            list(&sampled),
            sampled[0]
        ));
    }
    Some(report)
}

fn list(devices: &[u32]) -> String {
    devices.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// Matches the range rows of each context to the process-wide rows.
struct RangeMatcher {
    /// The process-wide rows (identity fields; values are filled in later).
    rows: Vec<RangeRow>,
    /// (thread, path) → indexes into `rows`.
    by_key: HashMap<(Option<u64>, String), Vec<usize>>,
    next_slot: u32,
}

impl RangeMatcher {
    fn new<'a>(first: &[RangeRow], all: impl Iterator<Item = &'a RangeRow>) -> Self {
        let next_slot = all.filter_map(|r| r.range_id).map(|id| id.slot + 1).max().unwrap_or(0);
        let mut m = RangeMatcher { rows: Vec::new(), by_key: HashMap::new(), next_slot };
        for r in first {
            m.add(r.clone());
        }
        m
    }

    fn add(&mut self, row: RangeRow) -> usize {
        let index = self.rows.len();
        if row.range_id.is_some() {
            // Kept in push-time order, so a lookup starts at the latest push before its own.
            let start = row.start_ns;
            let rows = &self.rows;
            let list = self.by_key.entry((row.thread, row.path.clone())).or_default();
            let at = list.partition_point(|c| rows[*c].start_ns <= start);
            list.insert(at, index);
        }
        self.rows.push(row);
        index
    }

    /// Part `part`'s range ids → process-wide ids (the first part's map to themselves).
    fn map_part(&mut self, part: usize, rows: &[RangeRow]) -> HashMap<RangeId, RangeId> {
        let mut map = HashMap::new();
        if part == 0 {
            for r in rows {
                if let Some(id) = r.range_id {
                    map.insert(id, id);
                }
            }
            return map;
        }
        let mut taken: std::collections::HashSet<usize> = std::collections::HashSet::new();
        for r in rows {
            let Some(id) = r.range_id else {
                if !self.rows.iter().any(|x| x.range_id.is_none()) {
                    self.add(r.clone());
                }
                continue;
            };
            let parent = r.parent_id.and_then(|p| map.get(&p).copied());
            let start = r.start_ns.unwrap_or(0);
            // The latest instance of this thread and path open at the push, under the same
            // parent.
            let found = self.by_key.get(&(r.thread, r.path.clone())).and_then(|candidates| {
                // From the latest instance pushed before this one, back to the first still
                // open at that moment.
                let before = candidates.partition_point(|c| self.rows[*c].start_ns.is_none_or(|s| s <= start));
                candidates[..before].iter().rev().copied().find(|c| {
                    let x = &self.rows[*c];
                    !taken.contains(c)
                        && x.end_ns.is_none_or(|e| e >= start)
                        && (r.parent_id.is_none() || x.parent_id == parent)
                })
            });
            let index = match found {
                Some(c) => c,
                None => {
                    let mut row = r.clone();
                    row.range_id = Some(RangeId { slot: self.next_slot, generation: 0 });
                    self.next_slot += 1;
                    row.parent_id = parent;
                    self.add(row)
                }
            };
            taken.insert(index);
            if let Some(mapped) = self.rows[index].range_id {
                map.insert(id, mapped);
            }
        }
        map
    }
}

/// A process-wide row: `identity`'s ids, names and times; the devices' values combined.
fn combine_rows(
    identity: &RangeRow,
    shares: &[&RangeRow],
    rules: &[crate::analysis::aggregate::MetricRule],
) -> RangeRow {
    let mut row = identity.clone();
    if shares.len() == 1 && shares[0].range_id == identity.range_id {
        let s = shares[0];
        // One device: its values as measured.
        row.kernel_count = s.kernel_count;
        row.self_kernel_count = s.self_kernel_count;
        row.flagged_kernel_count = s.flagged_kernel_count;
        row.gpu_time_ns = s.gpu_time_ns;
        row.gpu_busy_ns = s.gpu_busy_ns;
        copy_values(&mut row, s);
        return row;
    }
    let sum = |f: fn(&RangeRow) -> u64| shares.iter().map(|s| f(s)).sum::<u64>();
    let sum_opt = |f: fn(&RangeRow) -> Option<u64>| {
        shares.iter().filter_map(|s| f(s)).fold(None, |a: Option<u64>, v| Some(a.unwrap_or(0) + v))
    };
    row.kernel_count = sum(|r| r.kernel_count);
    row.self_kernel_count = sum(|r| r.self_kernel_count);
    row.flagged_kernel_count = sum(|r| r.flagged_kernel_count);
    row.gpu_time_ns = sum_opt(|r| r.gpu_time_ns);
    row.gpu_busy_ns = sum_opt(|r| r.gpu_busy_ns);
    row.transfer_count = sum(|r| r.transfer_count);
    row.transfer_bytes = sum(|r| r.transfer_bytes);
    row.memcpy_bytes = sum(|r| r.memcpy_bytes);
    row.memset_bytes = sum(|r| r.memset_bytes);
    row.untimed_transfer_count = sum(|r| r.untimed_transfer_count);
    row.transfer_time_ns = sum_opt(|r| r.transfer_time_ns);
    row.transfer_gbps = weighted(shares.iter().map(|s| (s.transfer_gbps, s.transfer_time_ns)));
    // A device that ran kernels in the range and has no value makes the total unknown.
    let measured: Vec<&&RangeRow> = shares.iter().filter(|s| s.kernel_count > 0).collect();
    row.metrics = rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let values = measured.iter().map(|s| (s.metrics.get(i).copied().flatten(), s.gpu_time_ns));
            if values.clone().any(|(v, _)| v.is_none()) || measured.is_empty() {
                return None;
            }
            let summed = rule.rule == AggregationRule::Sum
                || (rule.rule == AggregationRule::MeasuredPerRange && rule.metric.kind == MetricKind::Counter);
            if summed {
                Some(values.map(|(v, _)| v.unwrap_or(0.0)).sum())
            } else {
                weighted(values)
            }
        })
        .collect();
    let bytes = |f: fn(&RangeRow) -> Option<f64>| {
        if measured.is_empty() || measured.iter().any(|s| f(s).is_none()) {
            None
        } else {
            Some(measured.iter().filter_map(|s| f(s)).sum::<f64>())
        }
    };
    row.dram_read_bytes = bytes(|r| r.dram_read_bytes);
    row.dram_write_bytes = bytes(|r| r.dram_write_bytes);
    let per_ns = |b: Option<f64>| match (b, row.gpu_time_ns) {
        (Some(b), Some(t)) if t > 0 => Some(b / t as f64),
        _ => None,
    };
    row.dram_read_gbps = per_ns(row.dram_read_bytes);
    row.dram_write_gbps = per_ns(row.dram_write_bytes);
    row.dram_total_gbps = match (row.dram_read_bytes, row.dram_write_bytes) {
        (Some(r), Some(w)) => per_ns(Some(r + w)),
        _ => None,
    };
    row
}

fn copy_values(row: &mut RangeRow, s: &RangeRow) {
    row.transfer_count = s.transfer_count;
    row.transfer_bytes = s.transfer_bytes;
    row.memcpy_bytes = s.memcpy_bytes;
    row.memset_bytes = s.memset_bytes;
    row.untimed_transfer_count = s.untimed_transfer_count;
    row.transfer_time_ns = s.transfer_time_ns;
    row.transfer_gbps = s.transfer_gbps;
    row.metrics = s.metrics.clone();
    row.dram_read_bytes = s.dram_read_bytes;
    row.dram_write_bytes = s.dram_write_bytes;
    row.dram_read_gbps = s.dram_read_gbps;
    row.dram_write_gbps = s.dram_write_gbps;
    row.dram_total_gbps = s.dram_total_gbps;
}

/// Σ value × weight / Σ weight over the pairs with both; `None` without a weight.
fn weighted(values: impl Iterator<Item = (Option<f64>, Option<u64>)>) -> Option<f64> {
    let (mut sum, mut weight) = (0.0, 0u64);
    for (v, w) in values {
        if let (Some(v), Some(w)) = (v, w) {
            sum += v * w as f64;
            weight += w;
        }
    }
    (weight > 0).then(|| sum / weight as f64)
}

/// Per range (nested ranges included): the length of the union of its kernels' intervals
/// over every device.
fn busy_union(rows: &[RangeRow], kernels: &[crate::analysis::correlate::KernelRow]) -> HashMap<Option<RangeId>, u64> {
    let parent: HashMap<RangeId, Option<RangeId>> =
        rows.iter().filter_map(|r| r.range_id.map(|id| (id, r.parent_id))).collect();
    let mut spans: HashMap<Option<RangeId>, Vec<(u64, u64)>> = HashMap::new();
    for k in kernels {
        let (Some(s), Some(e)) = (k.start_ns, k.end_ns) else { continue };
        if e <= s || !k.granularity.is_kernel_execution() {
            continue;
        }
        let mut at = k.range_id;
        let mut guard = 0;
        loop {
            spans.entry(at).or_default().push((s, e));
            match at {
                Some(id) if guard < 4096 => {
                    at = parent.get(&id).copied().flatten();
                    guard += 1;
                    if at.is_none() {
                        break;
                    }
                }
                _ => break,
            }
        }
    }
    spans
        .into_iter()
        .map(|(id, mut v)| {
            v.sort_unstable();
            let (mut total, mut end) = (0u64, 0u64);
            for (s, e) in v {
                let s = s.max(end);
                if e > s {
                    total += e - s;
                    end = e;
                }
            }
            (id, total)
        })
        .collect()
}

fn combine_meta(parts: &[ContextReport], kernels: &[crate::analysis::correlate::KernelRow]) -> ReportMeta {
    let mut meta = parts[0].report.meta.clone();
    let names: Vec<String> = parts.iter().filter_map(|p| p.report.meta.device_name.clone()).collect();
    let mut distinct = names.clone();
    distinct.dedup();
    if distinct.len() > 1 {
        meta.device_name = Some(names.join(" + "));
    }
    meta.kernel_count = parts.iter().map(|p| p.report.meta.kernel_count).sum();
    meta.total_gpu_time_ns = parts
        .iter()
        .filter_map(|p| p.report.meta.total_gpu_time_ns)
        .fold(None, |a: Option<u64>, v| Some(a.unwrap_or(0) + v));
    meta.counter_cycles = parts.iter().map(|p| p.report.meta.counter_cycles).sum();
    meta.dropped_counter_ranges = parts.iter().map(|p| p.report.meta.dropped_counter_ranges).sum();
    meta.dropped_activity_records = parts.iter().map(|p| p.report.meta.dropped_activity_records).sum();
    meta.flagged_kernel_rows = parts.iter().map(|p| p.report.meta.flagged_kernel_rows).sum();
    meta.orphan_counter_ranges = parts.iter().map(|p| p.report.meta.orphan_counter_ranges).sum();
    for p in &parts[1..] {
        meta.counts.add(&p.report.meta.counts);
    }
    // Each warning once, with the devices that gave it (process-wide counts, such as the
    // activity buffer pool's, reach every context's report).
    let mut warnings: Vec<(String, Vec<u32>)> = Vec::new();
    for p in parts {
        for w in &p.report.meta.warnings {
            match warnings.iter_mut().find(|(text, _)| text == w) {
                Some((_, devices)) => devices.push(p.device_id),
                None => warnings.push((w.clone(), vec![p.device_id])),
            }
        }
    }
    meta.warnings = warnings
        .into_iter()
        .map(|(w, devices)| {
            let label = if devices.len() == 1 { "device" } else { "devices" };
            format!("{label} {}: {w}", list(&devices))
        })
        .collect();
    meta.started_unix_ns = parts.iter().filter_map(|p| p.report.meta.started_unix_ns).min();
    meta.finished_unix_ns = parts.iter().filter_map(|p| p.report.meta.finished_unix_ns).max();
    // The run's end is the last context's to finish.
    meta.run_end = parts
        .iter()
        .filter(|p| p.report.meta.run_end.is_some())
        .max_by_key(|p| p.report.meta.finished_unix_ns)
        .and_then(|p| p.report.meta.run_end.clone());
    meta.profiler_pauses = parts.iter().flat_map(|p| p.report.meta.profiler_pauses.iter().cloned()).collect();
    meta.profiler_pauses.sort_by_key(|p| p.start_ns);
    // Contexts no profiler measured: the most any report heard of each, leaving out the
    // profiled ones.
    let profiled: Vec<u32> = parts.iter().filter_map(|p| p.context_id).collect();
    let mut unprofiled: BTreeMap<u32, UnprofiledContext> = BTreeMap::new();
    for c in parts.iter().flat_map(|p| &p.report.meta.unprofiled_contexts) {
        if profiled.contains(&c.context_id) {
            continue;
        }
        let e = unprofiled.entry(c.context_id).or_insert_with(|| c.clone());
        e.launches = e.launches.max(c.launches);
        e.kernels = e.kernels.max(c.kernels);
        e.device_id = e.device_id.or(c.device_id);
    }
    meta.unprofiled_contexts = unprofiled.into_values().collect();
    meta.devices = parts
        .iter()
        .map(|p| {
            let mine =
                kernels.iter().filter(|k| k.device_id == Some(p.device_id) && k.granularity.is_kernel_execution());
            DeviceShare {
                device_id: p.device_id,
                context_id: p.context_id,
                device_name: p.report.meta.device_name.clone(),
                kernel_count: p.report.meta.kernel_count,
                gpu_time_ns: p.report.meta.total_gpu_time_ns.or_else(|| {
                    mine.filter_map(|k| k.duration_ns).fold(None, |a: Option<u64>, v| Some(a.unwrap_or(0) + v))
                }),
                flagged_kernel_rows: p.report.meta.flagged_kernel_rows,
                dropped_activity_records: p.report.meta.dropped_activity_records,
            }
        })
        .collect();
    meta
}
