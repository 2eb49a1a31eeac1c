//! What `gmprof diff` compares and finds, as values: the options ([`DiffOptions`]), each row
//! ([`DiffRow`]: a quantity of a range group or kernel, base against new, with its
//! [`Verdict`]), each side ([`SideInfo`]), the whole [`Diff`], and CI gates ([`Gate`]).
//!
//! Every file of `diff` imports these, and this file imports none of them.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::report::text::group::GroupBy;

/// Values a side needs for a quantity to be tested.
pub const MIN_SAMPLES: usize = 4;

/// The quantity of a row that holds GPU time per instance.
pub const GPU_TIME: &str = "gpu_time_ns";
/// The quantity of a range row that holds kernels per instance.
pub const KERNELS: &str = "kernels";
/// Derived columns compared after the metrics.
pub(super) const DERIVED: [&str; 3] = ["dram_read_gbps", "dram_write_gbps", "dram_total_gbps"];

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

impl Diff {
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
