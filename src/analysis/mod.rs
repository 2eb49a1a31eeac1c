//! Analysis: turns capture's records into rows.
//!
//! Stage 2 of the pipeline (`ways_in → capture → analysis → report`). [`correlate`] joins
//! launch records, activity records and decoded counter ranges into one row per kernel and
//! per transfer; [`mod@aggregate`] sums them into one row per range by each metric's rule;
//! [`pm_fold`] and [`pc_fold`] fold the samplers' records into ranges and kernels; [`online`]
//! keeps aggregates and the steps table while rows stream past.
//! `report` runs them and builds its value from the rows
//! ([`Report::analyze`](crate::report::Report::analyze)).
//!
//! May import: `model`, `error` and `device_timers`. Never `report`: it sits above analysis
//! and imports it, so the rows know nothing of the report made of them (what a check needs of
//! a report, [`pm_check`] takes as rows). Never `capture`, `probe`, `checked` or `ways_in`:
//! analysis runs on recorded data alone, which is what the CPU tests feed it.

pub mod aggregate;
pub mod correlate;
pub mod online;
pub mod pc_fold;
pub mod pm_check;
pub mod pm_deconvolve;
pub mod pm_fold;
pub mod rotation;

use crate::model::MetricSet;

/// Marks the name of a metric CUPTI counts by SASS patching (`smsp__sass_*`, `sm__sass_*`).
pub const SASS_METRIC_MARK: &str = "__sass_";

/// SASS metrics count instructions by patching the kernel's code, which CUPTI's range
/// profiler does not do: it reads them as 0 for every kernel (an FP32 SGEMM with 0 FFMAs was
/// seen on an H200 with CUPTI 13.0). A SASS metric that is 0 for every kernel with a value is
/// therefore not measured: its values become blanks, and a warning says so.
pub(crate) fn blank_unmeasured_sass_metrics(
    metrics: &MetricSet,
    rows: &mut [correlate::KernelRow],
    ranges: &mut [aggregate::RangeRow],
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (index, spec) in metrics.metrics.iter().enumerate() {
        if !spec.name.contains(SASS_METRIC_MARK) {
            continue;
        }
        let mut values = rows.iter().filter_map(|r| r.metrics.get(index).copied().flatten()).peekable();
        if values.peek().is_none() || !values.all(|v| v == 0.0) {
            continue;
        }
        for row in rows.iter_mut() {
            if let Some(v) = row.metrics.get_mut(index) {
                *v = None;
            }
        }
        for row in ranges.iter_mut() {
            if let Some(v) = row.metrics.get_mut(index) {
                *v = None;
            }
        }
        warnings.push(format!(
            "{} read 0 for every kernel: SASS metrics need instruction patching, which CUPTI's range profiler \
             does not do, so it is left empty (not measured)",
            spec.name
        ));
    }
    warnings
}
