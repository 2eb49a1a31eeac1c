//! Aggregation rules on hand-computed values: how each kind of metric (counter, throughput,
//! ratio, per-second rate, max) folds its kernels into a range, the DRAM bandwidths derived
//! from them, and what stays empty when an input is missing. Split from `analysis.rs`.

use gmprof::aggregate::{aggregate, rule_for, AggregationRule};
use gmprof::correlate::Correlator;
use gmprof::model::{CounterRange, MetricKind, MetricSet, ProfilingMode, GPU_TIME_METRIC};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;

#[path = "common/analysis.rs"]
mod analysis_helpers;
#[path = "common/kernels.rs"]
mod kernels;
#[path = "common/metrics.rs"]
mod metrics;
use analysis_helpers::{activity, assert_close, range};
use metrics::spec;

const SM_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";

#[test]
fn aggregation_rules_match_hand_computed_values() {
    let metrics = MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"),
            spec(SM_PCT, MetricKind::Throughput, "%"),
            spec("dram__sectors_read.sum", MetricKind::Counter, "sector"),
            spec("dram__sectors_write.sum", MetricKind::Counter, "sector"),
            spec("dram__sectors_read.sum.per_second", MetricKind::Throughput, "sector/second"),
            spec("smsp__inst_executed.avg.per_cycle_active", MetricKind::Ratio, "inst/cycle"),
            spec("sm__cycles_active.max", MetricKind::Counter, "cycle"),
        ],
    };
    let rules: Vec<AggregationRule> = metrics.metrics.iter().map(|m| rule_for(m, &metrics)).collect();
    assert_eq!(
        rules,
        [
            AggregationRule::Sum,
            AggregationRule::DurationWeighted,
            AggregationRule::Sum,
            AggregationRule::Sum,
            AggregationRule::RatioOfSums,
            AggregationRule::DurationWeighted,
            AggregationRule::Sum,
        ]
    );

    let mut tree = SessionTree::new();
    let r = tree.push("region", 1, 0);
    let mut correlator = Correlator::new();
    // (time ns, SM %, sectors read, sectors written, IPC, max active cycles)
    let kernels = [
        (1000.0, 0.0, 100.0, 50.0, 1.0, 700.0),
        (3000.0, 100.0, 300.0, f64::NAN, 3.0, 2100.0),
        // No time measured: left out of every weighted sum, still counted.
        (f64::NAN, 60.0, 40.0, 10.0, 9.0, 5.0),
    ];
    for (i, k) in kernels.iter().enumerate() {
        let i = i as u32;
        correlator.add_launch(kernels::launch_record_in(Some(r), 1, i + 1, i));
        correlator.add_activity(activity(i + 1, "k"));
        let per_second = k.2 / k.0 * 1e9;
        correlator.add_counter_ranges(
            0,
            vec![CounterRange {
                cycle: 0,
                index: i,
                name: i.to_string(),
                values: vec![k.0, k.1, k.2, k.3, per_second, k.4, k.5],
            }],
        );
    }
    tree.pop(1, 1).expect("pop");
    let correlation = correlator.finish(&tree, &metrics, ProfilingMode::KernelReplay);
    let aggregation = aggregate(&tree, &correlation, &metrics, ProfilingMode::KernelReplay);
    let row = &aggregation.ranges[0];
    assert_eq!(row.kernel_count, 3);
    assert_eq!(row.gpu_time_ns, Some(4000));
    let v = |i: usize| row.metrics[i];
    assert_close(v(0), 4000.0);
    // 0% for 1 µs and 100% for 3 µs: 75%, not the plain mean 50% (nor 53.3% with kernel 3).
    assert_close(v(1), 75.0);
    assert_close(v(2), 440.0);
    assert_close(v(3), 60.0);
    // Σ sectors (of timed kernels) / Σ time: 400 sectors / 4000 ns = 1e8 sectors/s.
    assert_close(v(4), 1e8);
    // IPC weighted by time: (1·1000 + 3·3000) / 4000 = 2.5.
    assert_close(v(5), 2.5);
    assert_close(v(6), 2805.0);
    // Bandwidths from sectors × 32 over the time of kernels with values.
    assert_close(row.dram_read_bytes, 440.0 * 32.0);
    assert_close(row.dram_read_gbps, 400.0 * 32.0 / 4000.0);
    assert_close(row.dram_write_gbps, 50.0 * 32.0 / 1000.0);
    assert_close(row.dram_total_gbps, 150.0 * 32.0 / 1000.0);
}

#[test]
fn empty_derived_columns_without_their_inputs() {
    let metrics = MetricSet { metrics: vec![spec(SM_PCT, MetricKind::Throughput, "%")] };
    let mut tree = SessionTree::new();
    let r = tree.push("r", 1, 0);
    let mut correlator = Correlator::new();
    correlator.add_launch(kernels::launch_record_in(Some(r), 1, 1, 0));
    correlator.add_activity(activity(1, "k"));
    correlator.add_counter_ranges(0, vec![CounterRange { cycle: 0, index: 0, name: "0".into(), values: vec![50.0] }]);
    let report = Report::analyze(CaptureInfo::new(ProfilingMode::KernelReplay), &metrics, &tree, correlator);
    let row = range(&report, "r", 0);
    assert_eq!(row.metrics, vec![None], "no time: a weighted value is not guessed");
    assert_eq!((row.dram_read_gbps, row.dram_total_gbps, row.gpu_time_ns), (None, None, None));
    assert_eq!(report.kernels[0].metrics, vec![Some(50.0)]);
    assert!(report.meta.derived_metrics.iter().all(|d| d.inputs.is_empty()));
    assert!(report.meta.warnings.iter().any(|w| w.contains(GPU_TIME_METRIC)));
}
