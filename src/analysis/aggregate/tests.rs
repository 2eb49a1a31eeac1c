//! Unit tests of the metric rules, the running sums, the DRAM inputs and the interval union;
//! they import the files they test, never `aggregate/mod.rs`.

use super::derived::DramInputs;
use super::fold::union_intervals;
use super::rules::{kernel_time_input, metric_rules, rule_for, AggregationRule, KERNEL_DURATION_INPUT};
use super::sums::MetricSums;
use crate::model::{MetricKind, MetricSet, MetricSpec, ProfilingMode, GPU_TIME_METRIC};

fn spec(name: &str, kind: MetricKind) -> MetricSpec {
    MetricSpec { name: name.into(), kind, unit: String::new(), description: String::new() }
}

#[test]
fn rules_by_kind_and_name() {
    let set = MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, MetricKind::Counter),
            spec("dram__bytes_read.sum", MetricKind::Counter),
            spec("dram__bytes_read.sum.per_second", MetricKind::Throughput),
            spec("lts__t_bytes.sum.per_second", MetricKind::Throughput),
            spec("sm__throughput.avg.pct_of_peak_sustained_elapsed", MetricKind::Throughput),
            spec("smsp__inst_executed.avg.per_cycle_active", MetricKind::Ratio),
            spec("sm__cycles_active.max", MetricKind::Counter),
        ],
    };
    let rules: Vec<AggregationRule> = set.metrics.iter().map(|m| rule_for(m, &set)).collect();
    assert_eq!(
        rules,
        vec![
            AggregationRule::Sum,
            AggregationRule::Sum,
            AggregationRule::RatioOfSums,
            AggregationRule::DurationWeighted,
            AggregationRule::DurationWeighted,
            AggregationRule::DurationWeighted,
            AggregationRule::Sum,
        ]
    );
    let recorded = metric_rules(&set, ProfilingMode::KernelReplay);
    assert_eq!(recorded[2].inputs, vec!["dram__bytes_read.sum", GPU_TIME_METRIC]);
    assert!(metric_rules(&set, ProfilingMode::PerRange).iter().all(|r| r.rule == AggregationRule::MeasuredPerRange));
    assert_eq!(
        serde_json::to_string(&AggregationRule::DurationWeighted).ok().as_deref(),
        Some("\"duration_weighted\"")
    );
}

#[test]
fn weighted_mean_is_not_a_plain_mean() {
    let mut s = MetricSums::default();
    s.add(Some(0.0), Some(3.0), Some(3.0));
    s.add(Some(100.0), Some(1.0), Some(1.0));
    s.add(None, Some(50.0), Some(50.0));
    assert_eq!(s.weighted_mean(), Some(25.0));
    let mut t = MetricSums::default();
    t.add(Some(7.0), None, None);
    assert_eq!(t.weighted_mean(), None);
    assert_eq!(t.total(), Some(7.0));
}

#[test]
fn rates_use_kernel_time_and_weights_use_the_counter_window() {
    // per_kernel: 1000 bytes in a 2 µs kernel measured by a 6 µs range.
    let mut s = MetricSums::default();
    s.add(Some(1000.0), Some(2000.0), Some(6000.0));
    s.add(Some(3000.0), Some(2000.0), Some(2000.0));
    assert_eq!(s.per_ns(), Some(1.0), "4000 bytes over 4000 ns of kernels");
    assert_eq!(s.weighted_mean(), Some((1000.0 * 6000.0 + 3000.0 * 2000.0) / 8000.0));
    assert_eq!(kernel_time_input(ProfilingMode::KernelReplay), GPU_TIME_METRIC);
    assert_eq!(kernel_time_input(ProfilingMode::PerKernel), KERNEL_DURATION_INPUT);
}

#[test]
fn intervals_union_half_open() {
    assert_eq!(union_intervals(vec![]), vec![]);
    assert_eq!(union_intervals(vec![(5, 5), (3, 2)]), vec![], "empty and reversed vanish");
    assert_eq!(union_intervals(vec![(10, 20), (0, 5), (5, 8), (15, 30), (40, 41)]), vec![(0, 8), (10, 30), (40, 41)]);
    assert_eq!(union_intervals(vec![(0, 100), (10, 20)]), vec![(0, 100)]);
}

#[test]
fn sectors_count_32_bytes() {
    let set = MetricSet {
        metrics: vec![
            spec("dram__sectors_read.sum", MetricKind::Counter),
            spec("dram__bytes_write.sum", MetricKind::Counter),
        ],
    };
    let inputs = DramInputs::find(&set);
    let values = [Some(2.0), Some(10.0)];
    assert_eq!(inputs.read_bytes(&values), Some(64.0));
    assert_eq!(inputs.write_bytes(&values), Some(10.0));
    assert_eq!(inputs.total_bytes(&values), Some(74.0));
    assert_eq!(inputs.total_bytes(&[Some(2.0), None]), None);
    let described = inputs.describe(&set, ProfilingMode::KernelReplay);
    assert!(described.iter().all(|d| d.inputs.is_empty()), "no time metric: no inputs");
}
