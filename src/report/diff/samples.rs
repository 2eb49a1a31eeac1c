//! One side of a diff as samples: per range group and kernel, the steady-state instances'
//! values of each quantity.
//!
//! Layer 3 (the safe profiler), report output, under [`super`]. Range rows are grouped as
//! the summary groups them ([`fold_numbers`]), warm-up rows ([`warmup_rows`]) and the
//! kernels launched in them are left out, and the processes of a run are pooled.
//!
//! A streamed run (issue 42) has no rows in its report: its range groups and kernels come
//! from the whole run's aggregates ([`Aggregated`]: count, total and median of GPU time;
//! `report.json`'s, and each further CUDA context's from its `context-N/aggregates/` parts),
//! warm-up included, and they have no per-instance values to rank-test.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::model::{DiffOptions, Kind, DERIVED, GPU_TIME, KERNELS};
use crate::analysis::online::{AggregateQuantity, AggregateRow, AggregateTable, NO_NAME};
use crate::report::runs::merge::ProcessReport;
use crate::report::runs::rank_ranges::context_dirs;
use crate::report::tables::parquet::part_reader::whole_run_aggregates;
use crate::report::text::group::{fold_numbers, warmup_rows, GroupBy};

/// One range group or kernel of one side: its values per quantity.
#[derive(Default)]
pub(super) struct Entity {
    /// Steady-state instances (all processes).
    pub(super) instances: u64,
    /// Values per quantity, in quantity order.
    values: BTreeMap<usize, Vec<f64>>,
    /// GPU time of the streamed processes' instances, from their aggregates.
    aggregated: Option<Aggregated>,
}

/// What the aggregates of streamed processes say of one range group's or kernel's GPU time.
#[derive(Clone, Copy, Debug, Default)]
struct Aggregated {
    /// Instances with a value.
    n: u64,
    /// Σ values, ns.
    total: f64,
    /// The median (DDSketch's p50), while one aggregate row makes the entity.
    median: Option<f64>,
    /// Aggregate rows folded in.
    rows: u32,
}

/// One side's numbers of one quantity of an entity: count, mean, median.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Stats {
    /// Values.
    pub(super) n: u64,
    /// Σ values.
    pub(super) total: f64,
    /// Σ / n (`None` without values).
    pub(super) mean: Option<f64>,
    /// The median (`None` without values, or when several streamed processes' or range
    /// groups' medians were pooled: medians do not add up).
    pub(super) median: Option<f64>,
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
    /// Labels of the streamed processes (compared from their aggregates).
    pub(super) streamed: Vec<String>,
    /// Aggregate parts that could not be read and were left out: `label: part: why`.
    pub(super) left_out: Vec<String>,
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
        let mut streamed = Vec::new();
        let mut left_out = Vec::new();
        for p in processes {
            let report = &p.report;
            if let Some(s) = &report.streamed {
                streamed.push(p.label.clone());
                add_aggregates(&mut ranges, &mut kernels, &s.aggregates, options.group_by);
                // Each further CUDA context's whole-run aggregates, from its parts.
                for context in context_dirs(&p.dir).unwrap_or_default() {
                    let name = context.file_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
                    match whole_run_aggregates(&context) {
                        Ok((rows, skipped)) => {
                            add_aggregates(&mut ranges, &mut kernels, &rows, options.group_by);
                            left_out.extend(skipped.iter().map(|s| format!("{}: {name}/{s}", p.label)));
                        }
                        Err(e) => left_out.push(format!("{}: {name}: {e}", p.label)),
                    }
                }
                if let Some(t) = report.meta.total_gpu_time_ns {
                    total += t as f64;
                    any_total = true;
                }
                continue;
            }
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
        Samples {
            processes: n,
            quantities,
            ranges,
            kernels,
            total_ns: any_total.then_some(total / n as f64),
            streamed,
            left_out,
        }
    }

    /// Whether `entity`'s GPU time comes (in part) from streamed processes' aggregates: it
    /// then has no instance values to rank-test, and no other quantity.
    pub(super) fn aggregated(&self, entity: &Entity) -> bool {
        entity.aggregated.is_some()
    }

    /// `entity`'s count, mean and median of `quantity`, from its values and its aggregates.
    pub(super) fn stats(&self, entity: &Entity, quantity: &str) -> Stats {
        let values = self.values(entity, quantity);
        let agg = entity.aggregated.filter(|_| quantity == GPU_TIME).unwrap_or_default();
        let n = values.len() as u64 + agg.n;
        let total = values.iter().sum::<f64>() + agg.total;
        let median = match (values.is_empty(), agg.rows) {
            (false, 0) => super::rank_test::median(values),
            (true, 1) => agg.median,
            _ => None,
        };
        Stats { n, total, mean: (n > 0).then(|| total / n as f64), median }
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

/// Adds a streamed process's whole-run aggregates: range groups' and kernels' GPU time.
fn add_aggregates(
    ranges: &mut BTreeMap<String, Entity>,
    kernels: &mut BTreeMap<String, Entity>,
    aggregates: &[AggregateRow],
    group_by: GroupBy,
) {
    for a in aggregates {
        let (map, key) = match (a.table, a.quantity) {
            (AggregateTable::Range, AggregateQuantity::GpuTimeNs) => {
                let key = match group_by {
                    // The key is the folded path; its last part is the folded name.
                    GroupBy::Name => a.key.rsplit('/').next().unwrap_or(&a.key).to_owned(),
                    _ => a.key.clone(),
                };
                (&mut *ranges, key)
            }
            (AggregateTable::Kernel, AggregateQuantity::DurationNs) if a.key != NO_NAME => {
                (&mut *kernels, a.key.clone())
            }
            _ => continue,
        };
        let entity = map.entry(key).or_default();
        let s = &a.summary;
        entity.instances += s.count + s.missing;
        let agg = entity.aggregated.get_or_insert_with(Aggregated::default);
        agg.n += s.count;
        agg.total += s.total_ns.unwrap_or(0) as f64;
        agg.median = s.p50_ns.map(|v| v as f64);
        agg.rows += 1;
    }
}
