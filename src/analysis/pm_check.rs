//! Checking PM-folded range values against a per_range report of the same program.
//!
//! per_range counts each top-level range exactly (the range profiler's counters), so it is
//! the reference for what PM sampling's fold ([`super::pm_fold`]) attributes to the same
//! ranges. [`compare_with_per_range`] pairs each top-level range of a fold with the range of
//! the same path and instance in the per_range report and gives, for the metrics compared
//! (summed: [`DRAM_BYTES`] is DRAM bytes read + written), the fold's total, the total that
//! overlap weighting alone gives ([`fold`] of the same samples), and the reference.
//! `examples/pm_refold.rs` prints it for recorded reports; `tests/pm_recorded.rs` holds the
//! H100 recording to its bounds.

use std::collections::HashMap;

use super::aggregate::{MetricRule, RangeRow};
use super::pm_fold::{fold, PmReport, PmScope};

/// DRAM bytes: the PM rate metrics and the per_range counters whose sums are compared.
pub const DRAM_BYTES: &[(&str, &str)] = &[
    ("dram__bytes_read.sum.per_second", "dram__bytes_read.sum"),
    ("dram__bytes_write.sum.per_second", "dram__bytes_write.sum"),
];

/// What the check reads of a per_range report: its metric columns and its range rows. A
/// [`Report`](crate::report::Report) gives them (`&report` converts).
#[derive(Clone, Copy, Debug)]
pub struct PerRange<'a> {
    /// The report's metrics, in column order
    /// ([`ReportMeta::metrics`](crate::report::ReportMeta::metrics)).
    pub metrics: &'a [MetricRule],
    /// Its range rows.
    pub ranges: &'a [RangeRow],
}

/// One top-level range: the fold's amount and overlap weighting's against per_range's.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeCheck {
    /// Range path.
    pub path: String,
    /// Instance of the path.
    pub instance: u32,
    /// The folded interval, ns on the activity clock.
    pub start_ns: u64,
    /// Its end, ns.
    pub end_ns: u64,
    /// The fold's total (sum over the metrics); `None` when a metric has none.
    pub attributed: Option<f64>,
    /// The fold's mean rates (summed) times the interval's duration: equals `attributed`
    /// when the fold is consistent.
    pub attributed_from_mean: Option<f64>,
    /// The total overlap weighting alone gives on the same samples; `None` likewise.
    pub overlap_weighted: Option<f64>,
    /// per_range's value (sum over the counters).
    pub reference: f64,
}

impl RangeCheck {
    /// The interval's duration, ns.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// `attributed / reference − 1`.
    pub fn error(&self) -> Option<f64> {
        self.attributed.map(|v| v / self.reference - 1.0)
    }

    /// `overlap_weighted / reference − 1`.
    pub fn overlap_error(&self) -> Option<f64> {
        self.overlap_weighted.map(|v| v / self.reference - 1.0)
    }
}

/// The ranges compared, and those left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerRangeCheck {
    /// Top-level ranges at least the minimum duration long with a per_range value, in the
    /// fold's order.
    pub ranges: Vec<RangeCheck>,
    /// Top-level ranges long enough but without a per_range value (no range of that path
    /// and instance, or a counter not measured there).
    pub unmatched: usize,
}

fn worst(errors: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let mut worst: Option<f64> = None;
    for e in errors {
        let e = e?.abs();
        worst = Some(worst.map_or(e, |w| w.max(e)));
    }
    worst
}

impl PerRangeCheck {
    /// The largest `|error|`; `None` when no range was compared or one has no value.
    pub fn worst(&self) -> Option<f64> {
        worst(self.ranges.iter().map(RangeCheck::error))
    }

    /// The largest `|overlap_error|`, likewise.
    pub fn worst_overlap(&self) -> Option<f64> {
        worst(self.ranges.iter().map(RangeCheck::overlap_error))
    }
}

/// Compares the top-level ranges of `folded` (a [`fold_report`](super::pm_fold::fold_report))
/// lasting at least `min_duration_ns` with the same ranges (path and instance) of
/// `per_range` (a per_range [`Report`](crate::report::Report), or its rows as [`PerRange`]),
/// for `metrics` (pairs of a PM rate metric of the fold and a per_range counter, each side
/// summed; see [`DRAM_BYTES`]). An error names a metric missing on either side.
pub fn compare_with_per_range<'a>(
    folded: &PmReport,
    per_range: impl Into<PerRange<'a>>,
    metrics: &[(&str, &str)],
    min_duration_ns: u64,
) -> Result<PerRangeCheck, String> {
    let per_range = per_range.into();
    let mut pm = Vec::new();
    let mut counters = Vec::new();
    for &(rate, counter) in metrics {
        pm.push(folded.metrics.iter().position(|m| m.name == rate).ok_or(format!("no PM metric {rate}"))?);
        counters.push(
            per_range
                .metrics
                .iter()
                .position(|m| m.metric.name == counter)
                .ok_or(format!("no per_range metric {counter}"))?,
        );
    }
    let reference: HashMap<(&str, u32), f64> = per_range
        .ranges
        .iter()
        .filter(|r| r.depth == 0 && r.range_id.is_some())
        .filter_map(|r| {
            let values: Option<Vec<f64>> = counters.iter().map(|&i| r.metrics.get(i).copied().flatten()).collect();
            Some(((r.path.as_str(), r.instance), values?.iter().sum()))
        })
        .collect();
    let sum = |values: Vec<Option<f64>>| values.into_iter().sum::<Option<f64>>();
    let mut check = PerRangeCheck::default();
    for row in folded.rows.iter().filter(|r| r.scope == PmScope::Range && r.depth == Some(0)) {
        if row.end_ns - row.start_ns < min_duration_ns {
            continue;
        }
        let instance = row.instance.unwrap_or(0);
        let Some(&reference) = reference.get(&(row.path.as_str(), instance)) else {
            check.unmatched += 1;
            continue;
        };
        let value = |m: usize| row.values.get(m).copied().flatten();
        let duration_s = (row.end_ns - row.start_ns) as f64 * 1e-9;
        check.ranges.push(RangeCheck {
            path: row.path.clone(),
            instance,
            start_ns: row.start_ns,
            end_ns: row.end_ns,
            attributed: sum(pm.iter().map(|&m| value(m).and_then(|v| v.total)).collect()),
            attributed_from_mean: sum(pm.iter().map(|&m| value(m).map(|v| v.mean * duration_s)).collect()),
            overlap_weighted: sum(pm
                .iter()
                .map(|&m| fold(&folded.samples, m, true, row.start_ns, row.end_ns).and_then(|v| v.total))
                .collect()),
            reference,
        });
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(attributed: Option<f64>, overlap: Option<f64>) -> RangeCheck {
        RangeCheck {
            path: "add".into(),
            instance: 0,
            start_ns: 0,
            end_ns: 1_000_000,
            attributed,
            attributed_from_mean: attributed,
            overlap_weighted: overlap,
            reference: 100.0,
        }
    }

    #[test]
    fn the_worst_error_is_the_largest_magnitude_and_needs_every_value() {
        let mut check = PerRangeCheck::default();
        assert_eq!(check.worst(), None, "nothing compared");
        check.ranges = vec![range(Some(101.0), Some(80.0)), range(Some(98.0), Some(115.0))];
        assert!((check.worst().unwrap() - 0.02).abs() < 1e-12);
        assert!((check.worst_overlap().unwrap() - 0.20).abs() < 1e-12);
        assert_eq!(check.ranges[1].duration_ns(), 1_000_000);
        check.ranges.push(range(None, Some(100.0)));
        assert_eq!(check.worst(), None, "a range without a value is not skipped");
        assert!((check.worst_overlap().unwrap() - 0.20).abs() < 1e-12);
    }
}
