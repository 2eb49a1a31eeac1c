//! One side of a diff as samples: per range group and kernel, the steady-state instances'
//! values of each quantity.
//!
//! Layer 3 (the safe profiler), report output, under [`super`]. Range rows are grouped as
//! the summary groups them ([`fold_numbers`]), warm-up rows ([`warmup_rows`]) and the
//! kernels launched in them are left out, and the processes of a run are pooled.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::model::{DiffOptions, Kind, DERIVED, GPU_TIME, KERNELS};
use crate::report::runs::merge::ProcessReport;
use crate::report::text::group::{fold_numbers, warmup_rows, GroupBy};

/// One range group or kernel of one side: its values per quantity.
#[derive(Default)]
pub(super) struct Entity {
    /// Steady-state instances (all processes).
    pub(super) instances: u64,
    /// Values per quantity, in quantity order.
    values: BTreeMap<usize, Vec<f64>>,
}

/// One side's entities.
pub(super) struct Samples {
    pub(super) processes: usize,
    /// Quantity names; an entity's values are keyed by index into this.
    pub(super) quantities: Vec<String>,
    ranges: BTreeMap<String, Entity>,
    kernels: BTreeMap<String, Entity>,
    /// Σ steady top-level GPU time per process.
    pub(super) total_ns: Option<f64>,
}

impl Samples {
    pub(super) fn of(processes: &[ProcessReport], options: &DiffOptions) -> Samples {
        let mut quantities: Vec<String> = vec![GPU_TIME.to_owned(), KERNELS.to_owned()];
        let mut index: HashMap<String, usize> = quantities.iter().cloned().enumerate().map(|(i, q)| (q, i)).collect();
        let mut quantity = |name: &str| -> usize {
            if let Some(&i) = index.get(name) {
                return i;
            }
            quantities.push(name.to_owned());
            index.insert(name.to_owned(), quantities.len() - 1);
            quantities.len() - 1
        };
        let mut ranges: BTreeMap<String, Entity> = BTreeMap::new();
        let mut kernels: BTreeMap<String, Entity> = BTreeMap::new();
        let mut total = 0.0;
        let mut any_total = false;
        for p in processes {
            let report = &p.report;
            let metric_index: Vec<usize> = report.meta.metrics.iter().map(|m| quantity(&m.metric.name)).collect();
            let derived_index: Vec<usize> = DERIVED.iter().map(|d| quantity(d)).collect();
            let warm = warmup_rows(&report.ranges, options.skip_first);
            let mut warm_ids = HashSet::new();
            for (row, &w) in report.ranges.iter().zip(&warm) {
                if w {
                    if let Some(id) = row.range_id {
                        warm_ids.insert(id);
                    }
                    continue;
                }
                let key = match options.group_by {
                    GroupBy::Name => fold_numbers(&row.name).into_owned(),
                    _ => fold_numbers(&row.path).into_owned(),
                };
                let entity = ranges.entry(key).or_default();
                entity.instances += 1;
                let mut push = |q: usize, v: Option<f64>| {
                    if let Some(v) = v.filter(|v| v.is_finite()) {
                        entity.values.entry(q).or_default().push(v);
                    }
                };
                push(0, row.gpu_time_ns.map(|v| v as f64));
                push(1, Some(row.kernel_count as f64));
                for (&q, &v) in metric_index.iter().zip(&row.metrics) {
                    push(q, v);
                }
                let derived = [row.dram_read_gbps, row.dram_write_gbps, row.dram_total_gbps];
                for (&q, v) in derived_index.iter().zip(derived) {
                    push(q, v);
                }
                if row.depth == 0 {
                    if let Some(t) = row.gpu_time_ns {
                        total += t as f64;
                        any_total = true;
                    }
                }
            }
            for k in &report.kernels {
                if k.range_id.is_some_and(|id| warm_ids.contains(&id)) {
                    continue;
                }
                let Some(name) = k.kernel_name.as_ref().or(k.mangled_name.as_ref()) else { continue };
                let entity = kernels.entry(name.clone()).or_default();
                entity.instances += 1;
                let mut push = |q: usize, v: Option<f64>| {
                    if let Some(v) = v.filter(|v| v.is_finite()) {
                        entity.values.entry(q).or_default().push(v);
                    }
                };
                push(0, k.duration_ns.map(|v| v as f64));
                for (&q, &v) in metric_index.iter().zip(&k.metrics) {
                    push(q, v);
                }
            }
        }
        let n = processes.len().max(1);
        Samples { processes: n, quantities, ranges, kernels, total_ns: any_total.then_some(total / n as f64) }
    }

    pub(super) fn entities(&self, kind: Kind) -> &BTreeMap<String, Entity> {
        match kind {
            Kind::Range => &self.ranges,
            Kind::Kernel => &self.kernels,
        }
    }

    pub(super) fn values<'a>(&'a self, entity: &'a Entity, quantity: &str) -> &'a [f64] {
        self.quantities
            .iter()
            .position(|q| q == quantity)
            .and_then(|i| entity.values.get(&i))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}
