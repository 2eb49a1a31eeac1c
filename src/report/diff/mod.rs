//! `gmprof diff`: two runs compared, range by range and kernel by kernel, with each change
//! judged against the noise of the runs themselves.
//!
//! Layer 3 (the safe profiler), report output. Imports [`crate::report::runs::merge`] (finding
//! and reading the processes of a run), [`crate::report::text::group`] (folding numbered names,
//! warm-up) and [`crate::report::text::summary`]'s formatting; nothing imports it but the command
//! line and Python.
//!
//! # What is compared
//!
//! Each side is one output directory: one process's (with `report.json`) or a run of
//! several processes (ranks), whose instances are pooled. Range rows are grouped as the
//! summary groups them (by path, numbers folded: `Train step #/Layer #`), kernels by name.
//! Warm-up instances (`skip_first`, as in `gmprof report --skip-first`) are left out. For
//! each range group and kernel, and each quantity measured on both sides (GPU time per
//! instance, kernels per range instance, every metric both runs collected, DRAM bandwidth),
//! the instances' values of the two runs are the two samples.
//!
//! # When a change is beyond noise
//!
//! A change is marked (`slower`/`faster` for GPU time, `higher`/`lower` otherwise) when
//! all hold:
//! - the two-sided Mann–Whitney U rank test ([`rank_test`]) rejects "no difference" at
//!   `alpha` (default 0.05) after Holm's adjustment over all tests of its kind (ranges, or
//!   kernels), so 20 or 200 rows compared do not make false alarms likelier;
//! - the medians differ by at least `threshold_pct` (default 2 %): a real but negligible
//!   shift, or a run-to-run drift of the GPU's clocks, is not a change worth a look;
//! - for GPU time, its impact on the total is at least `min_impact_pct` (default 0.1 %) of
//!   the base run's steady-state GPU time: on an H100, a 5.8 us backward of a position
//!   embedding measured 4 % (223 ns) faster beside a model whose MLPs were widened, beyond
//!   noise but 0.006 % of the step; 0 marks every change, however small.
//!
//! Anything else is `noise`; a quantity with fewer than [`MIN_SAMPLES`] values on a side is
//! `too_few` (with 3 against 3 the rank test cannot reach 0.05 at all); one measured on
//! neither side is `unmeasured`. Ranges and kernels present on one side only are listed
//! apart (`only_base`, `only_new`). Rows are sorted by impact on the total: the change of
//! the mean GPU time per instance times the new run's instances per process.
//!
//! # Comparable runs
//!
//! [`Diff::warnings`] says when the runs differ in GPU, chip, clocks' maximum, driver,
//! mode, time source or metric set, when either is partial, or when either has dropped
//! records or flagged rows: their numbers may then differ for reasons the code change did
//! not cause.

mod comparable;
pub mod export;
pub mod html;
pub mod rank_test;
mod samples;
pub mod table;

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::runs::merge::{result_dirs, ProcessReport};
use crate::report::text::group::GroupBy;

use self::comparable::comparability;
use self::rank_test::{holm, mann_whitney, median};
use self::samples::Samples;

/// Values a side needs for a quantity to be tested.
pub const MIN_SAMPLES: usize = 4;

/// The quantity of a row that holds GPU time per instance.
pub const GPU_TIME: &str = "gpu_time_ns";
/// The quantity of a range row that holds kernels per instance.
pub const KERNELS: &str = "kernels";
/// Derived columns compared after the metrics.
const DERIVED: [&str; 3] = ["dram_read_gbps", "dram_write_gbps", "dram_total_gbps"];

/// How [`Diff::of`] compares.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffOptions {
    /// Instances of each repeated range (and their kernels) left out as warm-up.
    pub skip_first: u32,
    /// Smallest change of the median, in percent, that is marked.
    pub threshold_pct: f64,
    /// Family-wise significance level of the rank tests.
    pub alpha: f64,
    /// Smallest impact on the total, in percent of the base run's steady-state GPU time, of
    /// a GPU time change that is marked.
    #[serde(default)]
    pub min_impact_pct: f64,
    /// What range rows are grouped by: `path` (default) or `name`.
    pub group_by: GroupBy,
}

impl Default for DiffOptions {
    fn default() -> Self {
        Self { skip_first: 0, threshold_pct: 2.0, alpha: 0.05, min_impact_pct: 0.1, group_by: GroupBy::Path }
    }
}

/// What a row compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A range group.
    Range,
    /// A kernel name.
    Kernel,
}

impl Kind {
    /// Its name in the outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Range => "range",
            Kind::Kernel => "kernel",
        }
    }
}

/// The judgement of one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// GPU time grew beyond noise and threshold.
    Slower,
    /// GPU time shrank beyond noise and threshold.
    Faster,
    /// Another quantity grew beyond noise and threshold.
    Higher,
    /// Another quantity shrank beyond noise and threshold.
    Lower,
    /// No change beyond noise, or one smaller than the threshold.
    Noise,
    /// Fewer than [`MIN_SAMPLES`] values on a side.
    TooFew,
    /// Measured on neither side (blank values).
    Unmeasured,
    /// The range or kernel ran in the base run only.
    OnlyBase,
    /// The range or kernel ran in the new run only.
    OnlyNew,
}

impl Verdict {
    /// Its name in the outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Higher => "higher",
            Verdict::Lower => "lower",
            Verdict::Noise => "noise",
            Verdict::TooFew => "too_few",
            Verdict::Unmeasured => "unmeasured",
            Verdict::OnlyBase => "only_base",
            Verdict::OnlyNew => "only_new",
        }
    }

    /// A change beyond noise and threshold.
    pub fn is_change(self) -> bool {
        matches!(self, Verdict::Slower | Verdict::Faster | Verdict::Higher | Verdict::Lower)
    }
}

/// One quantity of one range group or kernel, base against new.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffRow {
    /// Range group or kernel.
    pub kind: Kind,
    /// The folded range path (or name), or the kernel's name.
    pub name: String,
    /// [`GPU_TIME`], [`KERNELS`], a metric's full name or a derived column.
    pub quantity: String,
    /// Instances per process in the base run (steady state).
    pub base_count: f64,
    /// Instances per process in the new run (steady state).
    pub new_count: f64,
    /// Values of the quantity in the base run (blank values left out).
    pub base_n: u64,
    /// Values of the quantity in the new run.
    pub new_n: u64,
    /// Median per instance, base.
    pub base_median: Option<f64>,
    /// Median per instance, new.
    pub new_median: Option<f64>,
    /// Mean per instance, base.
    pub base_mean: Option<f64>,
    /// Mean per instance, new.
    pub new_mean: Option<f64>,
    /// New median − base median.
    pub change: Option<f64>,
    /// The change in percent of the base median (blank when that is 0).
    pub change_pct: Option<f64>,
    /// Two-sided p-value of the rank test.
    pub p_value: Option<f64>,
    /// The p-value after Holm's adjustment over the tests of this kind.
    pub p_adjusted: Option<f64>,
    /// The judgement.
    pub verdict: Verdict,
    /// GPU time rows: (new mean − base mean) × the new run's instances per process, ns: what
    /// the change costs the new run, per process. Ranges and kernels on one side only: ±
    /// their total. Blank for other quantities.
    pub impact_ns: Option<f64>,
    /// `impact_ns` in percent of the base run's steady-state GPU time per process.
    pub impact_pct: Option<f64>,
}

/// What a side of the diff is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideInfo {
    /// The path given.
    pub path: String,
    /// Its processes' labels (one for a single process).
    pub processes: Vec<String>,
    /// The GPU (the first process's).
    pub device_name: Option<String>,
    /// The chip.
    pub chip: Option<String>,
    /// The mode.
    pub mode: String,
    /// The collected metrics.
    pub metrics: Vec<String>,
    /// Steady-state GPU time per process: Σ of the top-level range rows (and the root row)
    /// after warm-up, ns.
    pub total_gpu_time_ns: Option<f64>,
}

/// Two runs compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// The baseline.
    pub base: SideInfo,
    /// The run compared with it.
    pub new: SideInfo,
    /// How rows were compared.
    pub options: DiffOptions,
    /// The test and the rule, in words.
    pub method: String,
    /// Rank tests made (each row with a p-value).
    pub tests: u64,
    /// Every row: ranges first, then kernels; within each, entities by |impact| (largest
    /// first), each entity's quantities together, GPU time first.
    pub rows: Vec<DiffRow>,
    /// Why the runs may not be comparable.
    pub warnings: Vec<String>,
}

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
            let mut kind_rows = compare_kind(kind, &b, &n);
            adjust_and_judge(&mut kind_rows, &options);
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
        let warnings = comparability(base, new, &base_info, &new_info);
        Diff { base: base_info, new: new_info, options, method, tests, rows, warnings }
    }

    /// The rows of one kind whose quantity is GPU time, in order.
    pub fn time_rows(&self, kind: Kind) -> impl Iterator<Item = &DiffRow> {
        self.rows.iter().filter(move |r| r.kind == kind && r.quantity == GPU_TIME)
    }

    /// Rows marked as a change.
    pub fn changes(&self) -> impl Iterator<Item = &DiffRow> {
        self.rows.iter().filter(|r| r.verdict.is_change())
    }

    /// The range rows that trip `gate`.
    pub fn tripped<'a>(&'a self, gate: &'a Gate) -> impl Iterator<Item = &'a DiffRow> + 'a {
        self.rows.iter().filter(move |r| r.kind == Kind::Range && gate.trips(r))
    }
}

/// A CI gate: a range whose quantity moved the wrong way beyond noise by more than `pct`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// [`GPU_TIME`] or a metric (or derived column) name.
    pub quantity: String,
    /// Whether a rise (true) or a fall (false) is bad.
    pub rise_is_bad: bool,
    /// The largest tolerated change, percent of the base median.
    pub pct: f64,
}

impl Gate {
    /// `--fail-if-slower PCT`.
    pub fn slower(pct: f64) -> Gate {
        Gate { quantity: GPU_TIME.to_owned(), rise_is_bad: true, pct }
    }

    /// Parses `METRIC=PCT` of `--fail-if-higher` (`rise_is_bad`) or `--fail-if-lower`.
    pub fn parse(text: &str, rise_is_bad: bool) -> Result<Gate> {
        let bad = || {
            Error::InvalidConfig(format!(
                "'{text}': give METRIC=PCT, e.g. dram__bytes_read.sum=5 (a change beyond noise of more than 5 %)"
            ))
        };
        let (quantity, pct) = text.rsplit_once('=').ok_or_else(bad)?;
        let pct: f64 = pct.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
        if quantity.trim().is_empty() || !(pct >= 0.0 && pct.is_finite()) {
            return Err(bad());
        }
        Ok(Gate { quantity: quantity.trim().to_owned(), rise_is_bad, pct })
    }

    /// Whether `row` trips the gate: its quantity changed beyond noise, in the bad
    /// direction, by more than the tolerance.
    pub fn trips(&self, row: &DiffRow) -> bool {
        if row.quantity != self.quantity || !row.verdict.is_change() {
            return false;
        }
        let Some(change) = row.change else { return false };
        let wrong_way = if self.rise_is_bad { change > 0.0 } else { change < 0.0 };
        // A change from a base median of 0 has no percentage: any change is beyond it.
        wrong_way && row.change_pct.is_none_or(|p| p.abs() > self.pct)
    }

    /// The gate in words: `GPU time slower by more than 5 %`.
    pub fn describe(&self) -> String {
        let what = if self.quantity == GPU_TIME { "GPU time".to_owned() } else { self.quantity.clone() };
        let way = match (self.quantity == GPU_TIME, self.rise_is_bad) {
            (true, true) => "slower",
            (true, false) => "faster",
            (false, true) => "higher",
            (false, false) => "lower",
        };
        format!("{what} {way} by more than {} %", self.pct)
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

/// Every row of `kind`, tested but not yet adjusted or judged.
fn compare_kind(kind: Kind, b: &Samples, n: &Samples) -> Vec<DiffRow> {
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
    for name in names {
        match (be.get(name), ne.get(name)) {
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
                }
            }
            (one_b, one_n) => {
                let (side, entity, verdict, sign) = match (one_b, one_n) {
                    (Some(e), None) => (b, e, Verdict::OnlyBase, -1.0),
                    (None, Some(e)) => (n, e, Verdict::OnlyNew, 1.0),
                    _ => continue,
                };
                let values = side.values(entity, GPU_TIME);
                let count = per_process(entity.instances, side);
                let total = (!values.is_empty()).then(|| values.iter().sum::<f64>() / side.processes as f64);
                let is_base = verdict == Verdict::OnlyBase;
                let (m, avg) = (median(values), mean(values));
                rows.push(DiffRow {
                    kind,
                    name: name.clone(),
                    quantity: GPU_TIME.to_owned(),
                    base_count: if is_base { count } else { 0.0 },
                    new_count: if is_base { 0.0 } else { count },
                    base_n: if is_base { values.len() as u64 } else { 0 },
                    new_n: if is_base { 0 } else { values.len() as u64 },
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
            }
        }
    }
    let base_total = b.total_ns.filter(|t| *t > 0.0);
    for row in &mut rows {
        row.impact_pct = row.impact_ns.zip(base_total).map(|(i, t)| 100.0 * i / t);
    }
    rows
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
