//! Range instances completed while the run goes: [`RangeInstances`] sums the rows of each
//! drain into their ranges and, once a range is complete, makes its [`RangeRow`] (inclusive
//! of its nested ranges, as [`aggregate`](crate::analysis::aggregate::aggregate) makes them)
//! and hands its sums to its parent.
//!
//! A range instance is **complete** when it is closed, none of its launches or transfer
//! calls waits for an activity record ([`PendingByRange`]), and every range nested in it is
//! complete. Its row then has kernel, flagged and transfer counts, GPU time (Σ kernel
//! durations), wall time, start and end; `gpu_busy_ns` (the union of kernel intervals) is
//! not kept online and is blank, as are the DRAM columns derived from counters. In
//! per_range, the counters CUPTI measured for the range are its metrics (the drains hold a
//! range back until its counter cycle is decoded; blank when its counters are missing); in
//! per_kernel, its metrics are its kernels' counters summed by each metric's rule, as
//! [`aggregate`](crate::analysis::aggregate::aggregate) sums them.
//! The caller removes a completed range from the session tree
//! ([`SessionTree::remove`]), so the tree holds only ranges open or in flight.
//!
//! Memory: the sums of ranges that have rows and are not complete yet.
//!
//! Imports `model` and the rows of `correlate` and `aggregate`.

use std::collections::HashMap;

use crate::analysis::aggregate::{metric_rules, KernelMetricSums, MetricRule, RangeRow};
use crate::analysis::correlate::{Correlation, PendingByRange};
use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{MetricSet, ProfilingMode, RangeId, TransferKind};

#[derive(Clone, Debug, Default)]
struct Sums {
    kernels: u64,
    self_kernels: u64,
    flagged: u64,
    gpu_time_ns: Option<u64>,
    transfers: u64,
    memcpy_bytes: u64,
    memset_bytes: u64,
    untimed_transfers: u64,
    timed_transfer_bytes: u64,
    transfer_time_ns: u64,
    counters: Option<Vec<Option<f64>>>,
    /// per_kernel: the range's kernels' counters, summed as the whole-session fold does.
    kernel_metrics: KernelMetricSums,
}

impl Sums {
    fn merge_inclusive(&mut self, child: &Sums) {
        self.kernels += child.kernels;
        self.flagged += child.flagged;
        if let Some(t) = child.gpu_time_ns {
            self.gpu_time_ns = Some(self.gpu_time_ns.unwrap_or(0).saturating_add(t));
        }
        self.transfers += child.transfers;
        self.memcpy_bytes += child.memcpy_bytes;
        self.memset_bytes += child.memset_bytes;
        self.untimed_transfers += child.untimed_transfers;
        self.timed_transfer_bytes += child.timed_transfer_bytes;
        self.transfer_time_ns += child.transfer_time_ns;
        self.kernel_metrics.merge(&child.kernel_metrics);
    }

    fn row(&self, metric_count: usize, rules: Option<&[MetricRule]>) -> RangeRow {
        let timed = self.transfers - self.untimed_transfers;
        let transfer_time_ns = (self.transfers == 0 || timed > 0).then_some(self.transfer_time_ns);
        RangeRow {
            range_id: None,
            path: ROOT_PATH.to_owned(),
            name: ROOT_PATH.to_owned(),
            depth: 0,
            instance: 0,
            thread: None,
            kernel_count: self.kernels,
            self_kernel_count: self.self_kernels,
            flagged_kernel_count: self.flagged,
            gpu_time_ns: self.gpu_time_ns,
            wall_time_ns: None,
            start_ns: None,
            end_ns: None,
            parent_id: None,
            gpu_busy_ns: None,
            transfer_count: self.transfers,
            transfer_bytes: self.memcpy_bytes + self.memset_bytes,
            memcpy_bytes: self.memcpy_bytes,
            memset_bytes: self.memset_bytes,
            untimed_transfer_count: self.untimed_transfers,
            transfer_time_ns,
            transfer_gbps: transfer_time_ns.filter(|t| *t > 0).map(|t| self.timed_transfer_bytes as f64 / t as f64),
            metrics: match (&self.counters, rules) {
                (Some(measured), _) => measured.clone(),
                (None, Some(rules)) => self.kernel_metrics.values(rules),
                (None, None) => vec![None; metric_count],
            },
            dram_read_bytes: None,
            dram_write_bytes: None,
            dram_read_gbps: None,
            dram_write_gbps: None,
            dram_total_gbps: None,
        }
    }
}

/// Sums of ranges in flight; see the [module docs](self).
#[derive(Debug, Default)]
pub struct RangeInstances {
    sums: HashMap<Option<RangeId>, Sums>,
    metric_count: usize,
    /// The metrics' rules where ranges sum their kernels' counters (per_kernel,
    /// kernel_replay); `None` where they are measured per range (per_range) or absent.
    rules: Option<Vec<MetricRule>>,
    completed: u64,
}

impl RangeInstances {
    /// Ranges of a run in `mode` collecting `metrics`.
    pub fn new(metrics: &MetricSet, mode: ProfilingMode) -> Self {
        let by_kernel = matches!(mode, ProfilingMode::PerKernel | ProfilingMode::KernelReplay);
        Self {
            sums: HashMap::new(),
            metric_count: metrics.metrics.len(),
            rules: by_kernel.then(|| metric_rules(metrics, mode)),
            completed: 0,
        }
    }

    /// Ranges with sums that are not complete yet.
    pub fn in_flight(&self) -> usize {
        self.sums.len()
    }

    /// Range rows made so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Adds one drain's rows (kernels, transfers, per_range's counters) to their ranges.
    pub fn add(&mut self, correlation: &Correlation) {
        for k in &correlation.rows {
            let s = self.sums.entry(k.range_id).or_default();
            if self.rules.is_some() {
                s.kernel_metrics.add(k);
            }
            if !k.granularity.is_kernel_execution() {
                continue;
            }
            s.kernels += 1;
            s.self_kernels += 1;
            s.flagged += u64::from(k.status.is_flagged());
            if let Some(t) = k.duration_ns {
                s.gpu_time_ns = Some(s.gpu_time_ns.unwrap_or(0).saturating_add(t));
            }
        }
        for t in &correlation.transfers {
            let s = self.sums.entry(t.range_id).or_default();
            s.transfers += 1;
            match t.kind {
                TransferKind::Memset => s.memset_bytes += t.bytes,
                _ => s.memcpy_bytes += t.bytes,
            }
            match t.duration_ns {
                Some(d) => {
                    s.transfer_time_ns += d;
                    s.timed_transfer_bytes += t.bytes;
                }
                None => s.untimed_transfers += 1,
            }
        }
        for (id, values) in &correlation.range_counters {
            self.sums.entry(Some(*id)).or_default().counters = Some(values.clone());
        }
    }

    /// The ranges of `tree` that are complete now, deepest first (each with its top-level
    /// ancestor), their sums handed to their parents. The caller removes them from the tree.
    pub fn complete(&mut self, tree: &SessionTree, pending: &PendingByRange) -> Vec<(RangeRow, Option<RangeId>)> {
        // Deepest first (children before parents), and at each depth in the order the ranges
        // were pushed: slots are reused once ranges leave the tree, so their order is not
        // the program's, and the steps table numbers steps in the order they come here.
        let mut candidates: Vec<(u32, u64, RangeId)> = tree
            .nodes()
            .filter(|n| !n.is_open() && pending.get(&n.id).copied().unwrap_or(0) == 0)
            .map(|n| (n.depth, n.push_ns, n.id))
            .collect();
        candidates.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.slot.cmp(&b.2.slot)));
        let mut done: std::collections::HashSet<RangeId> = std::collections::HashSet::new();
        let mut out = Vec::new();
        for (_, _, id) in candidates {
            let Some(node) = tree.get(id) else { continue };
            if !node.children.iter().all(|c| done.contains(c) || tree.get(*c).is_none()) {
                continue;
            }
            let sums = self.sums.remove(&Some(id)).unwrap_or_default();
            let mut row = sums.row(self.metric_count, self.rules.as_deref());
            row.range_id = Some(id);
            row.path.clone_from(&node.path);
            row.name.clone_from(&node.name);
            row.depth = node.depth;
            row.instance = node.instance;
            row.thread = Some(node.thread);
            row.wall_time_ns = node.wall_ns();
            row.start_ns = Some(node.push_ns);
            row.end_ns = node.pop_ns;
            row.parent_id = node.parent;
            if let Some(parent) = node.parent {
                self.sums.entry(Some(parent)).or_default().merge_inclusive(&sums);
            }
            let mut top = id;
            while let Some(p) = tree.get(top).and_then(|n| n.parent) {
                top = p;
            }
            done.insert(id);
            self.completed += 1;
            out.push((row, Some(top)));
        }
        out
    }

    /// The root row (kernels and transfers outside every range), at the end of the run;
    /// `None` when there were none.
    pub fn root(&mut self) -> Option<RangeRow> {
        self.sums.remove(&None).map(|s| s.row(self.metric_count, self.rules.as_deref()))
    }
}
