//! Benchmark of the analysis layer: correlate and aggregate one million kernels (3 metrics,
//! 1000 ranges, 500 counter cycles), as at the end of a long profiling session.
//!
//! A second benchmark runs the same session in trace mode, where kernels overlap (so every
//! range computes the union of its kernel intervals) and one memcpy in ten kernels goes
//! through the transfer join, then builds the report and its per-label statistics.
//!
//! Run with `cargo bench --bench analysis`; criterion reports kernels per second.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use gmprof::aggregate::aggregate;
use gmprof::correlate::Correlator;
use gmprof::model::{
    CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, MetricSpec, ProfilingMode,
    TransferActivity, TransferCall, TransferKind, GPU_TIME_METRIC,
};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;

const KERNELS: u32 = 1_000_000;
const RANGES: u32 = 1000;
const CYCLE: u32 = 2000;
const KERNEL_NAMES: [&str; 4] =
    ["_Z4gemmILi128EEvPKfS1_Pfi", "_Z7softmaxPfi", "_Z9layernormPKfPfS1_i", "ncclKernel_AllReduce_RING_LL_Sum_float"];

/// The capture records of a synthetic session.
struct Capture {
    tree: SessionTree,
    launches: Vec<LaunchRecord>,
    activities: Vec<KernelActivity>,
    cycles: Vec<(u32, Vec<CounterRange>)>,
}

fn metrics() -> MetricSet {
    let spec = |name: &str, kind, unit: &str| MetricSpec {
        name: name.into(),
        kind,
        unit: unit.into(),
        description: String::new(),
    };
    MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"),
            spec("dram__bytes_read.sum", MetricKind::Counter, "byte"),
            spec("sm__throughput.avg.pct_of_peak_sustained_elapsed", MetricKind::Throughput, "%"),
        ],
    }
}

fn capture() -> Capture {
    let mut tree = SessionTree::new();
    let mut launches = Vec::with_capacity(KERNELS as usize);
    let mut activities = Vec::with_capacity(KERNELS as usize);
    let mut cycles = Vec::new();
    let mut ranges = Vec::with_capacity(CYCLE as usize);
    let per_range = KERNELS / RANGES;
    let mut current = None;
    for i in 0..KERNELS {
        if i % per_range == 0 {
            if current.is_some() {
                let _ = tree.pop(1, u64::from(i));
            }
            // Ten top-level steps of 100 nested layers each.
            if i % (per_range * 100) == 0 {
                let _ = tree.pop(1, u64::from(i));
                tree.push("step", 1, u64::from(i));
            }
            current = Some(tree.push("layer", 1, u64::from(i)));
        }
        let (cycle, ordinal) = (i / CYCLE, i % CYCLE);
        launches.push(LaunchRecord {
            correlation_id: i + 1,
            thread: 1,
            range: current,
            cycle,
            ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
        activities.push(KernelActivity {
            correlation_id: i + 1,
            name: KERNEL_NAMES[(i % 4) as usize].into(),
            grid: [80, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 40,
            static_shared_memory: 0,
            dynamic_shared_memory: 4096,
            stream_id: 7,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
            start_ns: u64::from(i),
            end_ns: u64::from(i),
        });
        ranges.push(CounterRange {
            cycle,
            index: ordinal,
            name: ordinal.to_string(),
            values: vec![f64::from(1000 + i % 97), f64::from(i % 4096) * 1024.0, f64::from(i % 100)],
        });
        if ordinal == CYCLE - 1 {
            cycles.push((cycle, std::mem::take(&mut ranges)));
        }
    }
    let _ = tree.close_all_open(u64::from(KERNELS));
    Capture { tree, launches, activities, cycles }
}

fn correlate_and_aggregate(c: &mut Criterion) {
    let data = capture();
    let metrics = metrics();
    let mut group = c.benchmark_group("analysis");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(15));
    group.throughput(Throughput::Elements(u64::from(KERNELS)));
    group.bench_function("correlate_aggregate_1m_kernels", |b| {
        b.iter_batched(
            || {
                let mut correlator = Correlator::new();
                for l in &data.launches {
                    correlator.add_launch(l.clone());
                }
                for a in &data.activities {
                    correlator.add_activity(a.clone());
                }
                for (cycle, ranges) in &data.cycles {
                    correlator.add_counter_ranges(*cycle, ranges.clone());
                }
                correlator
            },
            |correlator| {
                let correlation = correlator.finish(&data.tree, &metrics, ProfilingMode::KernelReplay);
                let aggregation = aggregate(&data.tree, &correlation, &metrics, ProfilingMode::KernelReplay);
                assert_eq!(correlation.rows.len(), KERNELS as usize);
                (correlation, aggregation)
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

/// Trace mode: kernel `i` runs `[2i, 2i + 3)`, overlapping the next by 1 ns; one memcpy per
/// ten kernels.
fn trace_report_and_stats(c: &mut Criterion) {
    let data = capture();
    let activities: Vec<KernelActivity> = data
        .activities
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut a = a.clone();
            a.start_ns = 2 * i as u64;
            a.end_ns = a.start_ns + 3;
            a
        })
        .collect();
    let transfers: Vec<(TransferCall, TransferActivity)> = data
        .launches
        .iter()
        .step_by(10)
        .enumerate()
        .map(|(i, l)| {
            let correlation_id = KERNELS + 1 + i as u32;
            let start_ns = 20 * i as u64 + 1;
            (
                TransferCall {
                    correlation_id,
                    thread: l.thread,
                    range: l.range,
                    api_name: "cuMemcpyAsync".into(),
                    untimed: None,
                    params: None,
                },
                TransferActivity {
                    correlation_id,
                    kind: TransferKind::MemcpyHtoD,
                    bytes: 4096,
                    start_ns,
                    end_ns: start_ns + 2,
                    stream_id: 8,
                    context_id: 1,
                    device_id: 0,
                    graph_id: 0,
                    graph_node_id: 0,
                },
            )
        })
        .collect();
    let metrics = MetricSet::default();
    let mut group = c.benchmark_group("analysis");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(15));
    group.throughput(Throughput::Elements(u64::from(KERNELS)));
    group.bench_function("trace_report_stats_1m_kernels_100k_transfers", |b| {
        b.iter_batched(
            || {
                let mut correlator = Correlator::new();
                for l in &data.launches {
                    correlator.add_launch(l.clone());
                }
                for a in &activities {
                    correlator.add_activity(a.clone());
                }
                for (call, record) in &transfers {
                    correlator.add_transfer_call(call.clone());
                    correlator.add_transfer_activity(record.clone());
                }
                correlator
            },
            |correlator| {
                let report = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &metrics, &data.tree, correlator);
                let stats = report.stats();
                assert_eq!(report.transfers.len(), transfers.len());
                assert!(report.ranges.iter().all(|r| r.gpu_busy_ns <= r.gpu_time_ns));
                (report, stats)
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, correlate_and_aggregate, trace_report_and_stats);
criterion_main!(benches);
