//! Unit tests of CUDA graph handling on recorded-like sequences: what CUPTI 13.0 reported
//! for a captured and replayed PyTorch step on an H100 (captured launches with no activity
//! and, under per_kernel, an empty counter range each; graph kernels under the graph
//! launch's correlation id with graph and node ids; in kernel replay one auto range per
//! kernel node and each node's record twice).

use super::correlator::Correlator;
use super::rows::{Granularity, KernelStatus, TransferStatus};
use super::tests::{activity, counters, launch, metrics};
use crate::analysis::aggregate::aggregate;
use crate::model::session::SessionTree;
use crate::model::{
    CapturedNode, KernelActivity, LaunchApi, LaunchRecord, MetricSet, ProfilingMode, RangeId, TransferActivity,
    TransferCall, TransferKind,
};

fn graph_launch(correlation_id: u32, cycle: u32, ordinal: u32, range: Option<RangeId>) -> LaunchRecord {
    let mut l = launch(correlation_id, cycle, ordinal, range);
    l.api = LaunchApi::Graph;
    l.api_name = "cudaGraphLaunch_v10000".into();
    l
}

/// A kernel node record of graph 3: node `node`, running over [start, end].
fn node(correlation_id: u32, name: &str, node: u64, start: u64, end: u64) -> KernelActivity {
    let mut a = activity(correlation_id, name);
    a.graph_id = 3;
    a.graph_node_id = node;
    a.start_ns = start;
    a.end_ns = end;
    a
}

fn captured(node_id: u64, node_type: u32) -> Vec<CapturedNode> {
    vec![CapturedNode { graph_id: 1, node_id, node_type }]
}

fn transfer(correlation_id: u32, kind: TransferKind, graph_node_id: u64) -> TransferActivity {
    TransferActivity {
        correlation_id,
        kind,
        bytes: 64,
        start_ns: 500,
        end_ns: 510,
        stream_id: 7,
        context_id: 1,
        device_id: 0,
        graph_id: if graph_node_id == 0 { 0 } else { 3 },
        graph_node_id,
    }
}

/// "capture" holds three captured launches, a captured memset and one kernel that ran;
/// "step 0" and "step 1" each launch the graph: kernels a, b, c and a memset node.
fn trace_session() -> (SessionTree, Correlator, [RangeId; 3]) {
    let mut tree = SessionTree::new();
    let capture = tree.push("capture", 1, 0);
    let mut c = Correlator::new();
    c.add_launch(launch(10, 0, 0, Some(capture)));
    c.add_activity(node(10, "warm", 0, 50, 60));
    for (i, id) in [11u32, 12, 13].into_iter().enumerate() {
        c.add_launch(launch(id, 0, i as u32 + 1, Some(capture)));
        c.add_captured_call(id, captured(100 + i as u64, 0));
    }
    c.add_transfer_call(TransferCall {
        correlation_id: 14,
        thread: 1,
        range: Some(capture),
        api_name: "cudaMemsetAsync".into(),
        untimed: None,
        params: None,
    });
    c.add_captured_call(14, captured(103, 2));
    tree.pop(1, 1).expect("pop");
    let mut steps = [capture; 2];
    for (step, id) in [20u32, 30].into_iter().enumerate() {
        let r = tree.push(&format!("step {step}"), 1, 2);
        steps[step] = r;
        c.add_launch(graph_launch(id, 0, 4 + step as u32, Some(r)));
        let t = 1000 * (step as u64 + 1);
        // Out of order on purpose: rows follow execution order.
        c.add_activity(node(id, "b", 201, t + 20, t + 30));
        c.add_activity(node(id, "a", 200, t, t + 10));
        c.add_activity(node(id, "c", 202, t + 40, t + 45));
        c.add_transfer_activity(transfer(id, TransferKind::Memset, 203));
        tree.pop(1, 3).expect("pop");
    }
    (tree, c, [capture, steps[0], steps[1]])
}

#[test]
fn trace_graph_kernels_are_rows_of_their_launch_range_and_captured_calls_are_not_missing() {
    let (tree, c, [capture, step0, step1]) = trace_session();
    let out = c.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
    assert_eq!(out.counts.flagged_rows, 0, "{:?}", out.warnings);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(out.rows.len(), 1 + 2 * 3);
    assert_eq!((out.rows[0].range_id, out.rows[0].granularity), (Some(capture), Granularity::Kernel));
    let names: Vec<&str> = out.rows[1..4].iter().map(|r| r.kernel_name.as_deref().unwrap_or("")).collect();
    assert_eq!(names, ["a", "b", "c"]);
    for (rows, range) in [(&out.rows[1..4], step0), (&out.rows[4..7], step1)] {
        for (r, id) in rows.iter().zip([200u64, 201, 202]) {
            assert_eq!(r.range_id, Some(range));
            assert_eq!((r.granularity, r.graph_id, r.graph_node_id), (Granularity::GraphNode, Some(3), Some(id)));
            assert_eq!(r.status, KernelStatus::Ok);
        }
    }
    assert_eq!(out.rows[4].duration_ns, Some(10));
    let counts = &out.counts;
    assert_eq!((counts.captured_launches, counts.captured_transfers), (3, 1));
    assert_eq!((counts.graph_launches, counts.graph_node_rows), (2, 6));
    assert_eq!(counts.transfer_calls_without_activity, 0);
    assert_eq!(out.transfers.len(), 2);
    assert!(out.transfers.iter().all(|t| t.status == TransferStatus::GraphTransfer && t.graph_node_id == Some(203)));
    assert_eq!(out.transfers[0].range_id, Some(step0));

    let agg = aggregate(&tree, &out, &MetricSet::default(), ProfilingMode::Trace);
    let step = agg.ranges.iter().find(|r| r.range_id == Some(step0)).expect("step 0");
    assert_eq!((step.kernel_count, step.gpu_time_ns), (3, Some(25)));
    let capture_row = agg.ranges.iter().find(|r| r.range_id == Some(capture)).expect("capture");
    assert_eq!(capture_row.kernel_count, 1);
}

#[test]
fn per_kernel_graph_launch_gets_one_whole_graph_counter_row() {
    let (tree, mut c, [_, step0, _]) = trace_session();
    // One user range per launch, named by correlation id, captured launches included
    // (CUPTI reports their ranges though nothing ran in them).
    let mut ranges = vec![counters(0, 0, "10", 10.0, 100.0)];
    for (i, id) in [11u32, 12, 13].into_iter().enumerate() {
        ranges.push(counters(0, i as u32 + 1, &id.to_string(), 1.0, 0.0));
    }
    ranges.push(counters(0, 4, "20", 60.0, 6000.0));
    ranges.push(counters(0, 5, "30", 61.0, 6100.0));
    c.add_counter_ranges(0, ranges);
    let out = c.finish(&tree, &metrics(), ProfilingMode::PerKernel);
    assert_eq!(out.counts.flagged_rows, 0, "{:?}", out.warnings);
    assert_eq!(out.counts.orphan_counter_ranges, 0);
    assert_eq!(out.rows.len(), 1 + 2 * 4);
    let whole = &out.rows[1];
    assert_eq!((whole.granularity, whole.graph_kernels, whole.graph_id), (Granularity::Graph, Some(3), Some(3)));
    assert_eq!(whole.metrics, vec![Some(60.0), Some(6000.0)]);
    assert_eq!(whole.kernel_name.as_deref(), Some("graph 3: 3 kernel(s): a, b, c"));
    assert_eq!((whole.start_ns, whole.end_ns, whole.duration_ns), (Some(1000), Some(1045), Some(25)));
    assert_eq!(whole.range_duration_ns, Some(60));
    assert!(out.rows[2..5].iter().all(|r| r.granularity == Granularity::GraphNode && r.metrics == vec![None, None]));

    let agg = aggregate(&tree, &out, &metrics(), ProfilingMode::PerKernel);
    let step = agg.ranges.iter().find(|r| r.range_id == Some(step0)).expect("step 0");
    // Kernels and time from the nodes, bytes from the whole-graph row: nothing twice.
    assert_eq!((step.kernel_count, step.gpu_time_ns), (3, Some(25)));
    assert_eq!(step.metrics[1], Some(6000.0));
    assert_eq!(agg.total_gpu_time_ns, Some(10 + 2 * 25));
}

#[test]
fn kernel_replay_matches_one_auto_range_per_graph_node_in_execution_order() {
    let mut tree = SessionTree::new();
    let r = tree.push("step", 1, 0);
    let mut c = Correlator::new();
    // Cycle 0: a kernel, then a captured launch (no auto range).
    c.add_launch(launch(1, 0, 0, Some(r)));
    c.add_activity(activity(1, "k"));
    c.add_launch(launch(2, 0, 1, Some(r)));
    c.add_captured_call(2, captured(9, 0));
    // Cycle 1: a graph launch alone; kernel replay collapses start onto end and reports
    // every node twice.
    c.add_launch(graph_launch(3, 1, 0, Some(r)));
    for _ in 0..2 {
        c.add_activity(node(3, "z", 300, 900, 900));
        c.add_activity(node(3, "y", 301, 700, 700));
        c.add_activity(node(3, "x", 302, 800, 800));
    }
    // The range profiler's own WaitNs kernels run last, under the launch's correlation id,
    // with auto ranges of their own (seen on an H100 with CUPTI 13.0).
    for (n, t) in [(0u64, 950u64), (0, 960)] {
        let mut w = node(3, "WaitNs", n, t, t);
        w.grid = [1, 1, 1];
        w.block = [1, 1, 1];
        c.add_activity(w);
    }
    c.add_counter_ranges(0, vec![counters(0, 0, "0", 5.0, 50.0)]);
    c.add_counter_ranges(
        1,
        vec![
            counters(1, 0, "0", 7.0, 70.0),
            counters(1, 1, "1", 8.0, 80.0),
            counters(1, 2, "2", 9.0, 90.0),
            counters(1, 3, "3", 1.0, 0.0),
            counters(1, 4, "4", 1.0, 0.0),
        ],
    );
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.counts.flagged_rows, 0, "{:?}", out.warnings);
    assert_eq!(out.counts.repeated_graph_node_records, 3);
    assert_eq!(out.counts.captured_launches, 1);
    assert_eq!((out.counts.profiler_internal_kernels, out.counts.orphan_counter_ranges), (2, 0));
    let got: Vec<(&str, Option<f64>, Option<u64>)> =
        out.rows.iter().map(|r| (r.kernel_name.as_deref().unwrap_or(""), r.metrics[1], r.duration_ns)).collect();
    assert_eq!(
        got,
        [
            ("k", Some(50.0), Some(5)),
            ("y", Some(70.0), Some(7)),
            ("x", Some(80.0), Some(8)),
            ("z", Some(90.0), Some(9))
        ]
    );
    assert!(out.rows[1..].iter().all(|r| r.granularity == Granularity::GraphNode));
}

#[test]
fn kernel_replay_graph_with_too_few_ranges_is_flagged() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(graph_launch(3, 0, 0, None));
    c.add_activity(node(3, "a", 1, 10, 10));
    c.add_activity(node(3, "b", 2, 20, 20));
    c.add_counter_ranges(0, vec![counters(0, 0, "0", 7.0, 70.0)]);
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.rows.len(), 2);
    assert!(out.rows.iter().all(|r| r.status == KernelStatus::CountMismatch));
    assert_eq!(out.rows[0].metrics[1], Some(70.0), "the name confirms position 0");
    assert_eq!(out.rows[1].metrics[1], None);
    assert!(out.warnings.iter().any(|w| w.contains("1 counter range(s) for 2 kernel(s)")), "{:?}", out.warnings);
}

/// Graph kernels that CUPTI delivered without times (start == end: 3 130 of a GPT-2's 3 390
/// graph kernels on an H200 once the probes' SASS metrics had run) are rows with an empty
/// duration, and the warning says how many of the untimed records were graph kernels.
#[test]
fn untimed_graph_kernels_are_counted_apart_in_the_warning() {
    let mut tree = SessionTree::new();
    let step = tree.push("step 0", 1, 0);
    let mut c = Correlator::new();
    c.add_launch(launch(5, 0, 0, Some(step)));
    let mut eager = activity(5, "eager");
    (eager.start_ns, eager.end_ns) = (10, 10);
    c.add_activity(eager);
    c.add_launch(graph_launch(6, 0, 1, Some(step)));
    c.add_activity(node(6, "a", 200, 100, 100));
    c.add_activity(node(6, "b", 201, 120, 120));
    c.add_activity(node(6, "c", 202, 130, 140));
    tree.pop(1, 1).expect("pop");
    let out = c.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
    let untimed: Vec<Option<u64>> = out.rows.iter().map(|r| r.duration_ns).collect();
    assert_eq!(untimed, [None, None, None, Some(10)]);
    let warning = out.warnings.iter().find(|w| w.contains("end <= start")).expect("said");
    assert!(
        warning.starts_with("3 kernel activity record(s) (2 of them kernels of CUDA graph launches) have end <= start"),
        "{warning}"
    );
}
