//! Analysis-layer tests of trace-mode data: GPU busy time (the union of overlapping
//! kernels), memcpy and memset rows and their attribution, and a million kernels correlated
//! and aggregated exactly. Split from `analysis.rs`, which holds the synthetic training loop
//! and the golden outputs.

use std::time::Instant;

use gmprof::aggregate::aggregate;
use gmprof::correlate::{Correlator, TransferStatus};
use gmprof::model::{
    ClockPair, ClockSync, CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, ProfilingMode,
    RangeId, ThreadId, TransferActivity, TransferCall, TransferKind, GPU_TIME_METRIC,
};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::{SessionTree, ROOT_PATH};

#[path = "common/analysis.rs"]
mod analysis_helpers;
#[path = "common/kernels.rs"]
mod kernels;
#[path = "common/metrics.rs"]
mod metrics;
use analysis_helpers::range;
use metrics::spec;

const READ: &str = "dram__bytes_read.sum";
const SM_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";

#[test]
fn a_million_kernels_correlate_and_aggregate_exactly() {
    const KERNELS: u32 = 1_000_000;
    const RANGES: u32 = 1000;
    const CYCLE: u32 = 2000;
    let metrics = MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"),
            spec(READ, MetricKind::Counter, "byte"),
            spec(SM_PCT, MetricKind::Throughput, "%"),
        ],
    };
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let mut ranges = Vec::with_capacity(CYCLE as usize);
    let mut expected_bytes: u64 = 0;
    let mut expected_time: u64 = 0;
    let per_range = KERNELS / RANGES;
    let mut current = None;
    for i in 0..KERNELS {
        if i % per_range == 0 {
            if current.is_some() {
                tree.pop(1, u64::from(i)).expect("pop");
            }
            current = Some(tree.push("layer", 1, u64::from(i)));
        }
        let (cycle, ordinal) = (i / CYCLE, i % CYCLE);
        let time = 1000 + u64::from(i % 97);
        let bytes = u64::from(i % 4096) * 1024;
        expected_bytes += bytes;
        expected_time += time;
        correlator.add_launch(LaunchRecord { cycle, ..kernels::launch_record(&tree, 1, i + 1, ordinal) });
        correlator.add_activity(kernels::kernel_activity(i + 1, "_Z4gemmILi128EEvPKfS1_Pfi", 0, 0));
        ranges.push(CounterRange {
            cycle,
            index: ordinal,
            name: ordinal.to_string(),
            values: vec![time as f64, bytes as f64, 50.0],
        });
        if ordinal == CYCLE - 1 {
            correlator.add_counter_ranges(cycle, std::mem::take(&mut ranges));
        }
    }
    tree.pop(1, u64::from(KERNELS)).expect("pop");

    let started = Instant::now();
    let correlation = correlator.finish(&tree, &metrics, ProfilingMode::KernelReplay);
    let correlated = started.elapsed();
    let aggregation = aggregate(&tree, &correlation, &metrics, ProfilingMode::KernelReplay);
    let total = started.elapsed();
    eprintln!("1M kernels: correlate {correlated:?}, correlate+aggregate {total:?}");

    assert_eq!(correlation.rows.len(), KERNELS as usize);
    assert_eq!(correlation.counts.flagged_rows, 0);
    assert_eq!(aggregation.ranges.len(), RANGES as usize);
    assert_eq!(aggregation.total_gpu_time_ns, Some(expected_time));
    let bytes: f64 = aggregation.ranges.iter().filter_map(|r| r.metrics[1]).sum();
    assert_eq!(bytes, expected_bytes as f64, "integer sums below 2^53 are exact in f64");
    let time: u64 = aggregation.ranges.iter().filter_map(|r| r.gpu_time_ns).sum();
    assert_eq!(time, expected_time);
    assert!(aggregation.ranges.iter().all(|r| r.kernel_count == u64::from(per_range)));
    assert!(aggregation.ranges.iter().all(|r| r.metrics[2] == Some(50.0)));
    assert_eq!(
        correlation.rows[12_345].kernel_name.as_deref(),
        Some("void gemm<128>(float const*, float const*, float*, int)")
    );
}

/// A trace-mode kernel of `range` on `stream`, running `[start, end)`.
fn trace_kernel(c: &mut Correlator, correlation_id: u32, range: Option<RangeId>, stream: u32, start: u64, end: u64) {
    c.add_launch(kernels::launch_record_in(range, 1, correlation_id, correlation_id));
    c.add_activity(KernelActivity { stream_id: stream, ..kernels::kernel_activity(correlation_id, "k", start, end) });
}

#[test]
fn busy_time_is_the_union_of_overlapping_kernels() {
    let mut tree = SessionTree::new();
    let step = tree.push("step", 1, 0);
    let mut c = Correlator::new();
    // Two streams overlap by 50 ns: sum 200, union [0, 150) = 150.
    trace_kernel(&mut c, 0, Some(step), 1, 0, 100);
    trace_kernel(&mut c, 1, Some(step), 2, 50, 150);
    let inner = tree.push("inner", 1, 130);
    // Overlaps the parent's second kernel by 10 ns, then a disjoint one and one inside it.
    trace_kernel(&mut c, 2, Some(inner), 1, 140, 200);
    trace_kernel(&mut c, 3, Some(inner), 1, 300, 310);
    trace_kernel(&mut c, 4, Some(inner), 2, 302, 305);
    tree.pop(1, 400).expect("pop inner");
    tree.pop(1, 500).expect("pop step");
    // Outside every range: the root row, [1000, 1010) and a touching [1010, 1020).
    trace_kernel(&mut c, 5, None, 1, 1000, 1010);
    trace_kernel(&mut c, 6, None, 2, 1010, 1020);
    let report = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, c);

    let inner_row = range(&report, "step/inner", 0);
    assert_eq!(inner_row.gpu_time_ns, Some(60 + 10 + 3));
    assert_eq!(inner_row.gpu_busy_ns, Some(60 + 10), "[140,200) + [300,310) ⊇ [302,305)");
    let step_row = range(&report, "step", 0);
    assert_eq!(step_row.gpu_time_ns, Some(100 + 100 + 73), "kernel_time sum keeps overlaps");
    // Inclusive: [0,150) ∪ [140,200) ∪ [300,310) = [0,200) + [300,310).
    assert_eq!(step_row.gpu_busy_ns, Some(210));
    assert!(step_row.gpu_busy_ns < step_row.gpu_time_ns);
    let root = range(&report, ROOT_PATH, 0);
    assert_eq!((root.gpu_time_ns, root.gpu_busy_ns), (Some(20), Some(20)));

    // The column is in the CSV.
    let mut out = Vec::new();
    report.write_csv_to(&mut out).expect("csv");
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(out.as_slice());
    let headers = reader.headers().expect("headers").clone();
    let busy = headers.iter().position(|h| h == "gpu_busy_ns").expect("gpu_busy_ns");
    let values: Vec<String> = reader.records().map(|r| r.expect("record")[busy].to_owned()).collect();
    assert_eq!(values, ["20", "210", "70"]);
}

fn transfer_record(
    correlation_id: u32,
    kind: TransferKind,
    bytes: u64,
    start_ns: u64,
    end_ns: u64,
) -> TransferActivity {
    TransferActivity {
        correlation_id,
        kind,
        bytes,
        start_ns,
        end_ns,
        stream_id: 3,
        context_id: 1,
        device_id: 0,
        graph_id: 0,
        graph_node_id: 0,
    }
}

fn transfer_call(correlation_id: u32, thread: ThreadId, range: Option<RangeId>) -> TransferCall {
    TransferCall { correlation_id, thread, range, api_name: "cuMemcpyAsync".into(), untimed: None, params: None }
}

#[test]
fn transfers_go_to_the_calling_threads_range() {
    let mut tree = SessionTree::new();
    let a = tree.push("a", 1, 0);
    let b = tree.push("b", 2, 1);
    let ac = tree.push("c", 1, 2);
    let mut c = Correlator::new();
    // Records arrive before their calls and out of time order on purpose.
    c.add_transfer_activity(transfer_record(12, TransferKind::MemcpyDtoH, 3000, 200, 300));
    c.add_transfer_activity(transfer_record(10, TransferKind::MemcpyHtoD, 1000, 0, 100));
    c.add_transfer_activity(transfer_record(11, TransferKind::Memset, 500, 10, 20));
    c.add_transfer_call(transfer_call(10, 1, Some(a)));
    c.add_transfer_call(TransferCall { api_name: "cuMemsetD32Async".into(), ..transfer_call(11, 2, Some(b)) });
    c.add_transfer_call(transfer_call(12, 1, Some(ac)));
    // No call recorded: the root row.
    c.add_transfer_activity(transfer_record(99, TransferKind::MemcpyDtoD, 64, 50, 50));
    // A call whose record CUPTI dropped.
    c.add_transfer_call(transfer_call(13, 1, Some(a)));
    // A memcpy node of a graph launch: no call, the graph launch's correlation id.
    c.add_launch(LaunchRecord {
        api: LaunchApi::Graph,
        api_name: "cuGraphLaunch".into(),
        ..kernels::launch_record_in(Some(b), 2, 20, 0)
    });
    c.add_transfer_activity(transfer_record(20, TransferKind::MemcpyPtoP, 800, 400, 410));
    tree.pop(1, 500).expect("pop c");
    tree.pop(1, 600).expect("pop a");
    tree.pop(2, 700).expect("pop b");
    let mut info = CaptureInfo::new(ProfilingMode::Trace);
    info.clock = Some(ClockSync {
        start: ClockPair { cupti_ns: 0, unix_ns: 1_000_000 },
        finish: ClockPair { cupti_ns: 1_000, unix_ns: 1_000_900 },
    });
    let report = Report::analyze(info, &MetricSet::default(), &tree, c);

    let t = &report.transfers;
    let ids: Vec<u32> = t.iter().map(|t| t.correlation_id).collect();
    assert_eq!(ids, [10, 11, 99, 12, 20], "time order");
    assert_eq!((t[0].range_path.as_str(), t[0].thread, t[0].status), ("a", Some(1), TransferStatus::Ok));
    assert_eq!((t[1].range_path.as_str(), t[1].thread), ("b", Some(2)));
    assert_eq!(t[1].api_name.as_deref(), Some("cuMemsetD32Async"));
    assert_eq!((t[2].range_path.as_str(), t[2].range_id, t[2].thread), (ROOT_PATH, None, None));
    assert_eq!(t[2].status, TransferStatus::Unlaunched);
    assert_eq!((t[3].range_path.as_str(), t[3].duration_ns), ("a/c", Some(100)));
    assert_eq!((t[4].range_path.as_str(), t[4].thread, t[4].status), ("b", Some(2), TransferStatus::GraphTransfer));
    assert_eq!(t[0].gbps(), Some(10.0));
    assert_eq!(t[2].gbps(), None, "zero duration");

    let counts = &report.meta.counts;
    assert_eq!((counts.transfer_calls, counts.transfer_records, counts.transfer_rows), (4, 5, 5));
    assert_eq!((counts.unlaunched_transfers, counts.graph_transfers), (1, 1));
    assert_eq!(counts.transfer_calls_without_activity, 1);
    assert!(report.meta.warnings.iter().any(|w| w.contains("status unlaunched")), "{:?}", report.meta.warnings);
    assert!(report.meta.warnings.iter().any(|w| w.contains("no activity record")));

    // Per range, inclusive of nested ranges.
    let row_a = range(&report, "a", 0);
    assert_eq!(
        (row_a.transfer_count, row_a.transfer_bytes, row_a.memcpy_bytes, row_a.memset_bytes),
        (2, 4000, 4000, 0)
    );
    assert_eq!(row_a.transfer_time_ns, Some(200));
    assert_eq!(row_a.transfer_gbps, Some(20.0));
    assert_eq!(row_a.kernel_count, 0, "transfers are not kernels");
    let row_c = range(&report, "a/c", 0);
    assert_eq!((row_c.transfer_count, row_c.transfer_bytes, row_c.transfer_gbps), (1, 3000, Some(30.0)));
    let row_b = range(&report, "b", 0);
    assert_eq!((row_b.transfer_count, row_b.memcpy_bytes, row_b.memset_bytes), (2, 800, 500));
    assert_eq!((row_b.transfer_bytes, row_b.transfer_time_ns), (1300, Some(20)));
    // The root row exists for an unlaunched transfer alone.
    let root = &report.ranges[0];
    assert_eq!((root.range_id, root.kernel_count, root.transfer_count, root.transfer_bytes), (None, 0, 1, 64));
    assert_eq!((root.transfer_time_ns, root.transfer_gbps), (Some(0), None));

    // Clock drift: the wall clock gained 900 − 1000 = −100 ns.
    assert_eq!(report.meta.clock_drift_ns, Some(-100));
    assert!(report.summary().to_string().contains("clock drift -100 ns"), "{}", report.summary());
    assert!(report.summary().to_string().contains("transfers: 5 | memcpy 4864 B | memset 500 B"));

    // The transfer CSV reads back.
    let mut out = Vec::new();
    report.write_transfers_csv_to(&mut out).expect("csv");
    let text = String::from_utf8(out).expect("utf8");
    assert!(text.contains("# clock_drift_ns: -100\n"), "{text}");
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(text.as_bytes());
    let headers = reader.headers().expect("headers").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("{name}"));
    let (kind, path, status, thread) = (col("kind"), col("range_path"), col("status"), col("thread"));
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    let kinds: Vec<&str> = records.iter().map(|r| &r[kind]).collect();
    assert_eq!(kinds, ["memcpy_htod", "memset", "memcpy_dtod", "memcpy_dtoh", "memcpy_ptop"]);
    assert_eq!((&records[2][path], &records[2][status], &records[2][thread]), (ROOT_PATH, "unlaunched", ""));
}

#[test]
fn gmprofs_own_transfers_are_left_out_and_counted() {
    // train_loop under `gmprof run --probe block_sched,gmem_bytes` on an H100: every probed
    // launch zeroes and reads back two map buffers inside CUPTI's callbacks, where CUPTI
    // reports no call; their 240 records were "unlaunched" rows with a warning.
    let mut tree = SessionTree::new();
    let step = tree.push("step", 1, 0);
    let mut c = Correlator::new();
    c.add_transfer_call(transfer_call(10, 1, Some(step)));
    c.add_transfer_activity(transfer_record(10, TransferKind::MemcpyHtoD, 4096, 0, 10));
    for (i, id) in [31u32, 35, 41, 45].iter().enumerate() {
        let t = 100 + 100 * i as u64;
        c.add_transfer_activity(transfer_record(*id, TransferKind::Memset, 65536, t, t + 2));
        c.add_transfer_activity(transfer_record(id + 1, TransferKind::MemcpyDtoH, 65536, t + 50, t + 60));
    }
    // A genuinely unrecorded transfer of the same kind but another size stays.
    c.add_transfer_activity(transfer_record(77, TransferKind::MemcpyDtoH, 1024, 900, 910));
    c.add_internal_transfers(TransferKind::Memset, 65536, 4);
    c.add_internal_transfers(TransferKind::MemcpyDtoH, 65536, 4);
    tree.pop(1, 1000).expect("pop step");
    let report = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, c);
    let ids: Vec<u32> = report.transfers.iter().map(|t| t.correlation_id).collect();
    assert_eq!(ids, [10, 77]);
    assert_eq!(report.transfers[1].status, TransferStatus::Unlaunched);
    assert_eq!(report.meta.counts.profiler_internal_transfers, 8);
    assert_eq!(report.meta.counts.unlaunched_transfers, 1);
    let w = report.meta.warnings.join("\n");
    assert!(w.contains("1 memcpy/memset record(s) have no recorded call"), "{w}");
    // With more internal transfers noted than records (a record CUPTI dropped), nothing else goes.
    let mut c = Correlator::new();
    c.add_transfer_activity(transfer_record(5, TransferKind::Memset, 8, 0, 1));
    c.add_internal_transfers(TransferKind::Memset, 8, 3);
    let report = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &SessionTree::new(), c);
    assert!(report.transfers.is_empty());
    assert_eq!(report.meta.counts.profiler_internal_transfers, 1);
    assert!(report.meta.warnings.is_empty(), "{:?}", report.meta.warnings);
}
