//! Metric rules: how each metric's per-kernel values combine into a range's value
//! ([`AggregationRule`], chosen by [`rule_for`] and [`metric_rules`]), and what a rate's time
//! comes from ([`kernel_time_input`]).
//!
//! The bottom of the folder: imports only `model` and `correlate`'s [`TimeSource`]; `derived`,
//! `rows` and `fold` import it, and `aggregate/mod.rs` re-exports it.

use serde::{Deserialize, Serialize};

use crate::analysis::correlate::TimeSource;
use crate::model::{MetricKind, MetricSet, MetricSpec, ProfilingMode, GPU_TIME_METRIC};

/// Suffix of a rate metric whose base counter is the name without it.
pub const PER_SECOND_SUFFIX: &str = ".per_second";

/// How a metric's per-kernel values combine into a range's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregationRule {
    /// Σ over the range's kernels.
    Sum,
    /// Recomputed from summed counters: Σ numerator / Σ GPU time (scaled to the unit).
    RatioOfSums,
    /// Σ(value·time) / Σ time over kernels with both.
    DurationWeighted,
    /// CUPTI measured the whole range ([`ProfilingMode::PerRange`]); used as measured.
    MeasuredPerRange,
}

impl AggregationRule {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregationRule::Sum => "sum",
            AggregationRule::RatioOfSums => "ratio_of_sums",
            AggregationRule::DurationWeighted => "duration_weighted",
            AggregationRule::MeasuredPerRange => "measured_per_range",
        }
    }
}

/// The rule chosen for one metric, recorded in the report's metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricRule {
    /// The metric.
    pub metric: MetricSpec,
    /// How it is aggregated.
    pub rule: AggregationRule,
    /// The metrics its range value is computed from (itself, or a base counter and the GPU
    /// time metric).
    pub inputs: Vec<String>,
}

/// The rule for `spec` within the metric set `set` (outside [`ProfilingMode::PerRange`]).
pub fn rule_for(spec: &MetricSpec, set: &MetricSet) -> AggregationRule {
    if per_second_base(spec, set).is_some() {
        return AggregationRule::RatioOfSums;
    }
    match spec.kind {
        MetricKind::Counter => AggregationRule::Sum,
        MetricKind::Ratio | MetricKind::Throughput => AggregationRule::DurationWeighted,
    }
}

/// Index of the base counter of a `.per_second` metric, when that counter is in the set.
fn per_second_base(spec: &MetricSpec, set: &MetricSet) -> Option<usize> {
    let base = spec.name.strip_suffix(PER_SECOND_SUFFIX)?;
    let index = set.index_of(base)?;
    (set.metrics.get(index)?.kind == MetricKind::Counter).then_some(index)
}

/// The rule of every metric of `set` in `mode`.
pub fn metric_rules(set: &MetricSet, mode: ProfilingMode) -> Vec<MetricRule> {
    set.metrics
        .iter()
        .map(|spec| {
            let rule =
                if mode == ProfilingMode::PerRange { AggregationRule::MeasuredPerRange } else { rule_for(spec, set) };
            let inputs = match rule {
                AggregationRule::RatioOfSums => {
                    let base = spec.name.strip_suffix(PER_SECOND_SUFFIX).unwrap_or(&spec.name);
                    vec![base.to_owned(), kernel_time_input(mode).to_owned()]
                }
                AggregationRule::DurationWeighted => {
                    vec![spec.name.clone(), GPU_TIME_METRIC.to_owned()]
                }
                AggregationRule::Sum | AggregationRule::MeasuredPerRange => vec![spec.name.clone()],
            };
            MetricRule { metric: spec.clone(), rule, inputs }
        })
        .collect()
}

/// What a rate's time comes from, as named in [`MetricRule::inputs`] and
/// [`DerivedMetric::inputs`]: the kernels' durations (`duration_ns` of the kernel rows), which
/// is `gpu__time_duration.sum` in kernel_replay and activity end − start in the other modes
/// ([`TimeSource::for_mode`]).
///
/// [`DerivedMetric::inputs`]: super::DerivedMetric::inputs
pub fn kernel_time_input(mode: ProfilingMode) -> &'static str {
    match TimeSource::for_mode(mode) {
        TimeSource::GpuTimeDuration => GPU_TIME_METRIC,
        TimeSource::Activity => KERNEL_DURATION_INPUT,
    }
}

/// The name [`kernel_time_input`] gives kernel durations taken from activity timestamps: the
/// `duration_ns` column of the kernel rows.
pub const KERNEL_DURATION_INPUT: &str = "duration_ns";
