//! Two runs compared: each side read ([`read_side`]), its samples gathered, each quantity
//! rank-tested, adjusted for the number of tests and judged ([`Diff::read`], [`Diff::of`]).

use std::collections::HashMap;
use std::path::Path;

use super::comparable::comparability;
use super::model::{Diff, DiffOptions, DiffRow, Kind, SideInfo, Verdict, GPU_TIME, KERNELS, MIN_SAMPLES};
use super::rank_test::{self, holm, mann_whitney, median};
use super::samples::{Entity, Samples};
use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::runs::merge::{result_dirs, ProcessReport};
use crate::report::runs::rank_ranges::{streamed_without_report, STREAMED_WITHOUT_REPORT};
use crate::report::text::group::GroupBy;

/// Reads one side: a directory of one or several processes' outputs, or a `report.json`.
pub fn read_side(path: &Path) -> Result<Vec<ProcessReport>> {
    if path.is_file() {
        let report = Report::read_json(path)?;
        let label = path.display().to_string();
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        return Ok(vec![ProcessReport { label, dir, report }]);
    }
    if !path.is_dir() {
        return Err(Error::InvalidConfig(format!("{}: no such directory or report.json", path.display())));
    }
    if streamed_without_report(path) {
        // A streamed run killed before its report: no aggregates to compare.
        return Err(Error::InvalidConfig(format!("{}: {STREAMED_WITHOUT_REPORT}", path.display())));
    }
    if result_dirs(path, &["report.json"]).is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{} holds no gmprof report (report.json, in it or in its process directories)",
            path.display()
        )));
    }
    ProcessReport::read_all(path)
}

impl Diff {
    /// Reads both sides ([`read_side`]) and compares them.
    pub fn read(base: &Path, new: &Path, options: DiffOptions) -> Result<Diff> {
        if !(options.threshold_pct >= 0.0 && options.threshold_pct.is_finite()) {
            return Err(Error::InvalidConfig(format!("threshold {} %: give a percentage >= 0", options.threshold_pct)));
        }
        if !(options.min_impact_pct >= 0.0 && options.min_impact_pct.is_finite()) {
            return Err(Error::InvalidConfig(format!(
                "min impact {} %: give a percentage >= 0",
                options.min_impact_pct
            )));
        }
        if !(options.alpha > 0.0 && options.alpha < 1.0) {
            return Err(Error::InvalidConfig(format!("alpha {}: give a level between 0 and 1", options.alpha)));
        }
        if options.group_by == GroupBy::Instance {
            return Err(Error::InvalidConfig(
                "diff groups by path or name: instances are the samples it compares, not rows".into(),
            ));
        }
        let b = read_side(base)?;
        let n = read_side(new)?;
        Ok(Diff::of(&base.display().to_string(), &b, &new.display().to_string(), &n, options))
    }

    /// Compares `base` with `new`.
    pub fn of(
        base_path: &str,
        base: &[ProcessReport],
        new_path: &str,
        new: &[ProcessReport],
        options: DiffOptions,
    ) -> Diff {
        let b = Samples::of(base, &options);
        let n = Samples::of(new, &options);
        let base_info = side_info(base_path, base, &b);
        let new_info = side_info(new_path, new, &n);
        let mut rows = Vec::new();
        for kind in [Kind::Range, Kind::Kernel] {
            let (mut kind_rows, aggregated) = compare_kind(kind, &b, &n);
            adjust_and_judge(&mut kind_rows, &options);
            judge_aggregated(&mut kind_rows, &aggregated, &options);
            sort_by_impact(&mut kind_rows);
            rows.extend(kind_rows);
        }
        let tested = |kind: Kind| rows.iter().filter(|r| r.kind == kind && r.p_value.is_some()).count();
        let tests = (tested(Kind::Range) + tested(Kind::Kernel)) as u64;
        let method = format!(
            "two-sided Mann-Whitney U rank test on the steady-state instances (exact up to {} pairs without ties, \
             else normal approximation), Holm-adjusted within ranges ({} tests) and within kernels ({} tests); a \
             change is marked when p < {} and the medians differ by at least {} % (and, for GPU time, its impact \
             is at least {} % of the total); fewer than {} values on a side: too_few",
            rank_test::EXACT_MAX_PRODUCT,
            tested(Kind::Range),
            tested(Kind::Kernel),
            options.alpha,
            options.threshold_pct,
            options.min_impact_pct,
            MIN_SAMPLES
        );
        let mut method = method;
        let mut warnings = comparability(base, new, &base_info, &new_info);
        warnings.extend(b.left_out.iter().chain(&n.left_out).map(|l| format!("left out, unreadable: {l}")));
        let streamed: Vec<&String> = b.streamed.iter().chain(&n.streamed).collect();
        if !streamed.is_empty() {
            let names: Vec<&str> = streamed.iter().map(|s| s.as_str()).collect();
            method.push_str(&format!(
                "; streamed runs ({}) have no instance values: their range groups and kernels are compared from the \
                 whole run's aggregates (GPU time only; median within {} %), without a rank test (p blank), by the \
                 change of the mean per instance, marked when it is at least {} % and its impact at least {} %",
                names.join(", "),
                crate::analysis::online::RELATIVE_ERROR * 100.0,
                options.threshold_pct,
                options.min_impact_pct
            ));
            if options.skip_first > 0 {
                warnings.push(format!(
                    "--skip-first {} is not applied to the streamed runs ({}): their aggregates hold the whole run, \
                     warm-up included",
                    options.skip_first,
                    names.join(", ")
                ));
            }
        }
        Diff { base: base_info, new: new_info, options, method, tests, rows, warnings }
    }
}

/// What a side is, for the outputs.
fn side_info(path: &str, processes: &[ProcessReport], samples: &Samples) -> SideInfo {
    let first = processes.first().map(|p| &p.report.meta);
    SideInfo {
        path: path.to_owned(),
        processes: processes.iter().map(|p| p.label.clone()).collect(),
        device_name: first.and_then(|m| m.device_name.clone()),
        chip: first.and_then(|m| m.chip.clone()),
        mode: first.map(|m| m.mode.as_str().to_owned()).unwrap_or_default(),
        metrics: first.map(|m| m.metrics.iter().map(|r| r.metric.name.clone()).collect()).unwrap_or_default(),
        total_gpu_time_ns: samples.total_ns,
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Every row of `kind`, tested but not yet adjusted or judged, and which of them compare
/// aggregates (no rank test; see [`judge_aggregated`]).
fn compare_kind(kind: Kind, b: &Samples, n: &Samples) -> (Vec<DiffRow>, Vec<bool>) {
    let (be, ne) = (b.entities(kind), n.entities(kind));
    let mut names: Vec<&String> = be.keys().chain(ne.keys()).collect();
    names.sort();
    names.dedup();
    // Quantities in the base's order, then those only the new run has; kernels have no
    // kernel count.
    let mut quantities: Vec<&str> = b.quantities.iter().map(String::as_str).collect();
    for q in &n.quantities {
        if !quantities.contains(&q.as_str()) {
            quantities.push(q);
        }
    }
    let per_process = |count: u64, side: &Samples| count as f64 / side.processes as f64;
    let mut rows = Vec::new();
    let mut aggregated = Vec::new();
    for name in names {
        match (be.get(name), ne.get(name)) {
            (Some(bv), Some(nv)) if b.aggregated(bv) || n.aggregated(nv) => {
                rows.push(aggregate_row(kind, name, (b, bv), (n, nv)));
                aggregated.push(true);
            }
            (Some(bv), Some(nv)) => {
                for &q in &quantities {
                    if kind == Kind::Kernel && q == KERNELS {
                        continue;
                    }
                    let (x, y) = (b.values(bv, q), n.values(nv, q));
                    let in_base = b.quantities.iter().any(|s| s == q);
                    let in_new = n.quantities.iter().any(|s| s == q);
                    if !(in_base && in_new) {
                        continue; // a metric one run did not collect: a comparability warning
                    }
                    if x.is_empty() && y.is_empty() && q != GPU_TIME {
                        continue; // e.g. DRAM bandwidth in trace mode
                    }
                    let (bm, nm) = (median(x), median(y));
                    let change = bm.zip(nm).map(|(b, n)| n - b);
                    let change_pct = change.zip(bm).and_then(|(c, b)| (b != 0.0).then(|| 100.0 * c / b.abs()));
                    let enough = x.len() >= MIN_SAMPLES && y.len() >= MIN_SAMPLES;
                    let p = if enough { mann_whitney(x, y).map(|t| t.p) } else { None };
                    let verdict = if x.is_empty() && y.is_empty() {
                        Verdict::Unmeasured
                    } else if !enough {
                        Verdict::TooFew
                    } else {
                        Verdict::Noise
                    };
                    let new_count = per_process(nv.instances, n);
                    let impact_ns =
                        (q == GPU_TIME).then(|| mean(y).zip(mean(x)).map(|(ny, bx)| (ny - bx) * new_count)).flatten();
                    rows.push(DiffRow {
                        kind,
                        name: name.clone(),
                        quantity: q.to_owned(),
                        base_count: per_process(bv.instances, b),
                        new_count,
                        base_n: x.len() as u64,
                        new_n: y.len() as u64,
                        base_median: bm,
                        new_median: nm,
                        base_mean: mean(x),
                        new_mean: mean(y),
                        change,
                        change_pct,
                        p_value: p,
                        p_adjusted: None,
                        verdict,
                        impact_ns,
                        impact_pct: None,
                    });
                    aggregated.push(false);
                }
            }
            (one_b, one_n) => {
                let (side, entity, verdict, sign) = match (one_b, one_n) {
                    (Some(e), None) => (b, e, Verdict::OnlyBase, -1.0),
                    (None, Some(e)) => (n, e, Verdict::OnlyNew, 1.0),
                    _ => continue,
                };
                let stats = side.stats(entity, GPU_TIME);
                let count = per_process(entity.instances, side);
                let total = (stats.n > 0).then(|| stats.total / side.processes as f64);
                let is_base = verdict == Verdict::OnlyBase;
                let (m, avg) = (stats.median, stats.mean);
                rows.push(DiffRow {
                    kind,
                    name: name.clone(),
                    quantity: GPU_TIME.to_owned(),
                    base_count: if is_base { count } else { 0.0 },
                    new_count: if is_base { 0.0 } else { count },
                    base_n: if is_base { stats.n } else { 0 },
                    new_n: if is_base { 0 } else { stats.n },
                    base_median: if is_base { m } else { None },
                    new_median: if is_base { None } else { m },
                    base_mean: if is_base { avg } else { None },
                    new_mean: if is_base { None } else { avg },
                    change: None,
                    change_pct: None,
                    p_value: None,
                    p_adjusted: None,
                    verdict,
                    impact_ns: total.map(|t| sign * t),
                    impact_pct: None,
                });
                aggregated.push(false);
            }
        }
    }
    let base_total = b.total_ns.filter(|t| *t > 0.0);
    for row in &mut rows {
        row.impact_pct = row.impact_ns.zip(base_total).map(|(i, t)| 100.0 * i / t);
    }
    (rows, aggregated)
}

/// The GPU time row of an entity that a streamed side has from its aggregates: counts, means
/// and (where one aggregate row makes it) medians; the change is that of the mean, exact
/// where the median is within the sketch's error; no rank test.
fn aggregate_row(kind: Kind, name: &str, (b, bv): (&Samples, &Entity), (n, nv): (&Samples, &Entity)) -> DiffRow {
    let (x, y) = (b.stats(bv, GPU_TIME), n.stats(nv, GPU_TIME));
    let change = x.mean.zip(y.mean).map(|(b, n)| n - b);
    let change_pct = change.zip(x.mean).and_then(|(c, b)| (b != 0.0).then(|| 100.0 * c / b.abs()));
    let verdict = if x.n == 0 && y.n == 0 {
        Verdict::Unmeasured
    } else if (x.n as usize) < MIN_SAMPLES || (y.n as usize) < MIN_SAMPLES {
        Verdict::TooFew
    } else {
        Verdict::Noise
    };
    let new_count = nv.instances as f64 / n.processes as f64;
    DiffRow {
        kind,
        name: name.to_owned(),
        quantity: GPU_TIME.to_owned(),
        base_count: bv.instances as f64 / b.processes as f64,
        new_count,
        base_n: x.n,
        new_n: y.n,
        base_median: x.median,
        new_median: y.median,
        base_mean: x.mean,
        new_mean: y.mean,
        change,
        change_pct,
        p_value: None,
        p_adjusted: None,
        verdict,
        impact_ns: change.map(|c| c * new_count),
        impact_pct: None,
    }
}

/// The verdict of the rows [`aggregate_row`] made (those of `aggregated`): a change of the
/// mean of at least the threshold, with an impact of at least the minimum, is marked.
fn judge_aggregated(rows: &mut [DiffRow], aggregated: &[bool], options: &DiffOptions) {
    for (row, _) in rows.iter_mut().zip(aggregated).filter(|(r, &a)| a && r.verdict == Verdict::Noise) {
        let big_enough = row.change_pct.is_none_or(|c| c.abs() >= options.threshold_pct)
            && row.impact_pct.is_none_or(|i| i.abs() >= options.min_impact_pct);
        if big_enough && row.change.is_some_and(|c| c != 0.0) {
            row.verdict = if row.change.unwrap_or(0.0) > 0.0 { Verdict::Slower } else { Verdict::Faster };
        }
    }
}

/// Holm's adjustment over the rows' p-values, then each tested row's verdict.
fn adjust_and_judge(rows: &mut [DiffRow], options: &DiffOptions) {
    let tested: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].p_value.is_some()).collect();
    let p: Vec<f64> = tested.iter().map(|&i| rows[i].p_value.unwrap_or(1.0)).collect();
    for (&i, adjusted) in tested.iter().zip(holm(&p)) {
        let row = &mut rows[i];
        row.p_adjusted = Some(adjusted);
        let big_enough = row.change_pct.is_none_or(|c| c.abs() >= options.threshold_pct)
            && (row.quantity != GPU_TIME || row.impact_pct.is_none_or(|i| i.abs() >= options.min_impact_pct));
        let moved = row.change.is_some_and(|c| c != 0.0);
        if adjusted < options.alpha && big_enough && moved {
            let up = row.change.unwrap_or(0.0) > 0.0;
            row.verdict = match (row.quantity == GPU_TIME, up) {
                (true, true) => Verdict::Slower,
                (true, false) => Verdict::Faster,
                (false, true) => Verdict::Higher,
                (false, false) => Verdict::Lower,
            };
        }
    }
}

/// Entities by |impact| of their GPU time row (largest first, then by name), each entity's
/// rows together in quantity order.
fn sort_by_impact(rows: &mut [DiffRow]) {
    let mut impact: HashMap<String, f64> = HashMap::new();
    for r in rows.iter().filter(|r| r.quantity == GPU_TIME) {
        impact.insert(r.name.clone(), r.impact_ns.map(f64::abs).unwrap_or(0.0));
    }
    let mut position: HashMap<(String, String), usize> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        position.insert((r.name.clone(), r.quantity.clone()), i);
    }
    let quantity_rank =
        |r: &DiffRow| -> usize { position.get(&(r.name.clone(), r.quantity.clone())).copied().unwrap_or(0) };
    rows.sort_by(|x, y| {
        let (ix, iy) = (impact.get(&x.name).copied().unwrap_or(0.0), impact.get(&y.name).copied().unwrap_or(0.0));
        iy.total_cmp(&ix).then_with(|| x.name.cmp(&y.name)).then_with(|| quantity_rank(x).cmp(&quantity_rank(y)))
    });
}
