//! Unit tests of the correlator on hand-built capture records.

use super::checkpoint::CheckpointPending;
use super::correlator::Correlator;
use super::names::{demangle_kernel_name, parse_decimal_u32, parse_range_counter_name, range_counter_name};
use super::rows::{KernelStatus, TimeSource, TransferStatus, TransferTiming};
use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{
    CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, MetricSpec, ProfilingMode, RangeId,
    ThreadId, TransferActivity, TransferCall, TransferKind, UntimedTransfer, GPU_TIME_METRIC,
};

pub(super) fn metrics() -> MetricSet {
    MetricSet {
        metrics: vec![
            MetricSpec {
                name: GPU_TIME_METRIC.into(),
                kind: MetricKind::Counter,
                unit: "nsecond".into(),
                description: String::new(),
            },
            MetricSpec {
                name: "dram__bytes_read.sum".into(),
                kind: MetricKind::Counter,
                unit: "byte".into(),
                description: String::new(),
            },
        ],
    }
}

pub(super) fn launch(correlation_id: u32, cycle: u32, ordinal: u32, range: Option<RangeId>) -> LaunchRecord {
    LaunchRecord {
        correlation_id,
        thread: 1,
        range,
        cycle,
        ordinal,
        api: LaunchApi::Runtime,
        api_name: "cudaLaunchKernel".into(),
        context_id: 1,
        launch_ns: None,
        unmeasured: false,
    }
}

pub(super) fn activity(correlation_id: u32, name: &str) -> KernelActivity {
    KernelActivity {
        correlation_id,
        name: name.into(),
        grid: [1, 1, 1],
        block: [128, 1, 1],
        registers_per_thread: 32,
        static_shared_memory: 16,
        dynamic_shared_memory: 1024,
        stream_id: 7,
        context_id: 1,
        device_id: 0,
        graph_id: 0,
        graph_node_id: 0,
        start_ns: 100,
        end_ns: 100,
    }
}

/// A memcpy or memset API call by `thread` in `range`, timed by its activity record.
pub(super) fn transfer_call(
    correlation_id: u32,
    thread: ThreadId,
    range: Option<RangeId>,
    api_name: &'static str,
) -> TransferCall {
    TransferCall { correlation_id, thread, range, api_name: api_name.into(), untimed: None, params: None }
}

pub(super) fn counters(cycle: u32, index: u32, name: &str, time: f64, bytes: f64) -> CounterRange {
    CounterRange { cycle, index, name: name.into(), values: vec![time, bytes] }
}

#[test]
fn canonical_decimal_only() {
    assert_eq!(parse_decimal_u32("0"), Some(0));
    assert_eq!(parse_decimal_u32("17"), Some(17));
    for bad in ["", "+1", "01", "1a", "-1", " 1", "99999999999"] {
        assert_eq!(parse_decimal_u32(bad), None, "{bad}");
    }
    let id = RangeId { slot: 3, generation: 9 };
    assert_eq!(parse_range_counter_name(&range_counter_name(id)), Some(id));
    assert_eq!(parse_range_counter_name("gmprof-range-3"), None);
}

#[test]
fn demangles_cpp_and_keeps_c_names() {
    assert_eq!(demangle_kernel_name("_Z6vecAddPfS_S_i"), "vecAdd(float*, float*, float*, int)");
    assert_eq!(demangle_kernel_name("plain_c_kernel"), "plain_c_kernel");
    assert_eq!(demangle_kernel_name("_Z!!notvalid"), "_Z!!notvalid");
}

#[test]
fn kernel_replay_joins_by_ordinal() {
    let mut tree = SessionTree::new();
    let r = tree.push("step", 1, 0);
    let mut c = Correlator::new();
    // Added out of order on purpose.
    c.add_counter_ranges(0, vec![counters(0, 1, "1", 20.0, 2000.0), counters(0, 0, "0", 10.0, 1000.0)]);
    c.add_activity(activity(11, "_Z1kv"));
    c.add_launch(launch(11, 0, 1, Some(r)));
    c.add_launch(launch(10, 0, 0, Some(r)));
    c.add_activity(activity(10, "k0"));
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.rows.len(), 2);
    assert_eq!(out.rows[0].correlation_id, 10);
    assert_eq!(out.rows[0].metrics, vec![Some(10.0), Some(1000.0)]);
    assert_eq!(out.rows[0].duration_ns, Some(10));
    assert_eq!(out.rows[1].kernel_name.as_deref(), Some("k()"));
    assert_eq!(out.rows[1].mangled_name.as_deref(), Some("_Z1kv"));
    assert_eq!(out.rows[1].shared_memory_bytes, Some(1040));
    assert_eq!(out.rows[1].range_path, "step");
    assert!(out.rows.iter().all(|r| r.status == KernelStatus::Ok));
    assert_eq!(out.counts.flagged_rows, 0);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn a_kernel_replay_kernel_without_a_launch_is_named_as_the_likely_cause_of_a_count_mismatch() {
    // torch.compile(mode="reduce-overhead") under kernel replay, H100: one record with
    // correlation id 0 and no launch, and one counter range more than launched kernels.
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    for (ordinal, id) in [11u32, 12, 13].into_iter().enumerate() {
        c.add_launch(launch(id, 0, ordinal as u32, None));
    }
    for id in [11u32, 0, 12, 13] {
        c.add_activity(activity(id, "fill"));
    }
    c.add_counter_ranges(0, (0..4).map(|i| counters(0, i, &i.to_string(), 1.0, 8.0)).collect());
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!((out.counts.count_mismatch, out.counts.unlaunched_activity), (3, 1));
    let hint = out.warnings.iter().filter(|w| w.contains("per_kernel names each range after its launch")).count();
    assert_eq!(hint, 1, "{:?}", out.warnings);

    // No unlaunched record: no such hint, though the counts still disagree.
    let mut c = Correlator::new();
    c.add_launch(launch(11, 0, 0, None));
    c.add_activity(activity(11, "fill"));
    c.add_counter_ranges(0, (0..2).map(|i| counters(0, i, &i.to_string(), 1.0, 8.0)).collect());
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.counts.count_mismatch, 1);
    assert!(out.warnings.iter().all(|w| !w.contains("per_kernel names")), "{:?}", out.warnings);
}

#[test]
fn name_mismatch_is_flagged_not_used() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(launch(1, 0, 0, None));
    c.add_launch(launch(2, 0, 1, None));
    c.add_activity(activity(1, "a"));
    c.add_activity(activity(2, "b"));
    c.add_counter_ranges(0, vec![counters(0, 0, "0", 1.0, 1.0), counters(0, 1, "7", 2.0, 2.0)]);
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.rows[0].status, KernelStatus::Ok);
    assert_eq!(out.rows[1].status, KernelStatus::NameMismatch);
    assert_eq!(out.rows[1].metrics, vec![None, None]);
    assert_eq!(out.counts.orphan_counter_ranges, 1);
    assert_eq!(out.rows[0].range_path, ROOT_PATH);
}

#[test]
fn per_kernel_joins_by_correlation_id() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(launch(41, 0, 0, None));
    c.add_launch(launch(42, 0, 1, None));
    c.add_activity(activity(41, "a"));
    c.add_activity(activity(42, "b"));
    c.add_counter_ranges(0, vec![counters(0, 0, "42", 5.0, 50.0), counters(0, 1, "99", 1.0, 1.0)]);
    let out = c.finish(&tree, &metrics(), ProfilingMode::PerKernel);
    assert_eq!(out.rows[0].status, KernelStatus::MissingCounters);
    assert_eq!(out.rows[1].metrics, vec![Some(5.0), Some(50.0)]);
    assert_eq!(out.rows[1].status, KernelStatus::Ok);
    assert_eq!(out.counts.orphan_counter_ranges, 1);
}

#[test]
fn extra_records_of_one_launch_stay_visible() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(launch(7, 0, 0, None));
    c.add_activity(activity(7, "a"));
    c.add_activity(activity(7, "b"));
    let out = c.finish(&tree, &metrics(), ProfilingMode::Trace);
    assert_eq!(out.rows.len(), 2);
    assert_eq!(out.rows[1].status, KernelStatus::UnlaunchedActivity);
}

#[test]
fn the_range_profilers_own_kernels_are_left_out_under_user_ranges() {
    let tree = SessionTree::new();
    for (mode, rows, internal) in [(ProfilingMode::PerKernel, 1, 1), (ProfilingMode::Trace, 2, 0)] {
        let mut c = Correlator::new();
        c.add_launch(launch(4, 0, 0, None));
        c.add_activity(activity(4, "vector_add"));
        let mut wait = activity(4, "WaitNs");
        wait.grid = [1, 1, 1];
        wait.block = [1, 1, 1];
        c.add_activity(wait);
        c.add_counter_ranges(0, vec![counters(0, 0, "4", 5.0, 50.0)]);
        let out = c.finish(&tree, &metrics(), mode);
        assert_eq!(out.rows.len(), rows, "{mode:?}");
        assert_eq!(out.counts.profiler_internal_kernels, internal);
        assert_eq!(out.rows[0].kernel_name.as_deref(), Some("vector_add"));
    }
}

#[test]
fn replay_mismatches_empty_the_kernel_and_its_ranges() {
    let mut tree = SessionTree::new();
    let outer = tree.push("step", 1, 0);
    let mut c = Correlator::new();
    c.add_launch(launch(1, 0, 0, Some(outer)));
    c.add_launch(launch(2, 0, 1, Some(outer)));
    c.add_activity(activity(1, "a"));
    c.add_activity(activity(2, "b"));
    c.add_counter_ranges(0, vec![counters(0, 0, "1", 5.0, 50.0), counters(0, 1, "2", 6.0, 60.0)]);
    c.flag_replay_mismatch(2);
    let out = c.finish(&tree, &metrics(), ProfilingMode::PerKernel);
    assert_eq!(out.rows[0].status, KernelStatus::Ok);
    assert_eq!(out.rows[1].status, KernelStatus::ReplayMismatch);
    assert_eq!(out.rows[1].metrics, vec![None, None], "never merged blindly");
    assert_eq!(out.counts.replay_mismatch, 1);

    let mut c = Correlator::new();
    c.add_counter_ranges(0, vec![counters(0, 0, &range_counter_name(outer), 9.0, 90.0)]);
    c.flag_range_replay_mismatch(outer);
    let out = c.finish(&tree, &metrics(), ProfilingMode::PerRange);
    assert!(!out.range_counters.contains_key(&outer));
    assert!(out.warnings.iter().any(|w| w.contains("step") && w.contains("discarded")), "{:?}", out.warnings);
}

#[test]
fn trace_mode_time_comes_from_activity() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(launch(1, 0, 0, None));
    let mut a = activity(1, "k");
    a.start_ns = 1000;
    a.end_ns = 1750;
    c.add_activity(a);
    let out = c.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
    assert_eq!(out.rows[0].duration_ns, Some(750));
    assert_eq!(out.rows[0].time_source, TimeSource::Activity);
    assert_eq!(out.rows[0].status, KernelStatus::Ok);
}

#[test]
fn kernels_cupti_delivered_without_times_are_counted_and_not_blamed_on_replay() {
    // Seen on an H100 under PM sampling at 10 µs: 117 trace-mode records with start = end = 0.
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(launch(1, 0, 0, None));
    c.add_launch(launch(2, 0, 1, None));
    let mut timed = activity(1, "k");
    timed.end_ns = 900;
    c.add_activity(timed);
    let mut untimed = activity(2, "k");
    (untimed.start_ns, untimed.end_ns) = (0, 0);
    c.add_activity(untimed);
    let out = c.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
    assert_eq!(out.rows[0].duration_ns, Some(800));
    assert_eq!(out.rows[1].duration_ns, None);
    let warning = out.warnings.iter().find(|w| w.contains("end <= start")).expect("the untimed record is said");
    assert!(warning.starts_with("1 kernel activity record(s)"), "{warning}");
    assert!(warning.contains("CUPTI delivered them without times"), "{warning}");
    assert!(!warning.contains("kernel replay"), "{warning}");
}

#[test]
fn nan_values_become_none_and_stale_ranges_go_to_root() {
    let mut tree = SessionTree::new();
    let stale = tree.push("old", 1, 0);
    tree.reset();
    let mut c = Correlator::new();
    c.add_launch(launch(1, 0, 0, Some(stale)));
    c.add_activity(activity(1, "k"));
    c.add_counter_ranges(0, vec![counters(0, 0, "0", 3.0, f64::NAN)]);
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.rows[0].metrics, vec![Some(3.0), None]);
    assert_eq!(out.rows[0].range_id, None);
    assert_eq!(out.rows[0].range_path, ROOT_PATH);
    assert_eq!(out.counts.unknown_range_ids, 1);
    assert!(out.warnings.iter().any(|w| w.contains("range id")));
}

#[test]
fn transfers_join_by_correlation_id() {
    let mut tree = SessionTree::new();
    let stale = tree.push("old", 1, 0);
    tree.reset();
    let r = tree.push("copying", 1, 0);
    let mut c = Correlator::new();
    let record = |correlation_id: u32, start_ns: u64| TransferActivity {
        correlation_id,
        kind: TransferKind::MemcpyHtoD,
        bytes: 100,
        start_ns,
        end_ns: start_ns + 10,
        stream_id: 2,
        context_id: 1,
        device_id: 0,
        graph_id: 0,
        graph_node_id: 0,
    };
    let call = |correlation_id: u32, thread: ThreadId, range: Option<RangeId>| {
        transfer_call(correlation_id, thread, range, "cuMemcpyHtoD_v2")
    };
    c.add_transfer_call(call(1, 5, Some(r)));
    // A repeated id: the first call wins.
    c.add_transfer_call(call(1, 6, None));
    // A range id of an earlier session: the root.
    c.add_transfer_call(call(2, 5, Some(stale)));
    c.add_transfer_activity(record(2, 50));
    c.add_transfer_activity(record(1, 40));
    let out = c.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
    assert_eq!(out.transfers.len(), 2);
    assert_eq!((out.transfers[0].correlation_id, out.transfers[0].thread), (1, Some(5)));
    assert_eq!((out.transfers[0].range_id, out.transfers[0].range_path.as_str()), (Some(r), "copying"));
    assert_eq!((out.transfers[1].range_id, out.transfers[1].range_path.as_str()), (None, ROOT_PATH));
    assert_eq!(out.transfers[1].status, TransferStatus::Ok);
    assert_eq!(out.counts.unknown_range_ids, 1);
    assert_eq!((out.counts.transfer_calls, out.counts.transfer_rows), (3, 2));
    assert_eq!(out.counts.transfer_calls_without_activity, 0);
    assert!(out.warnings.iter().any(|w| w.contains("repeat the correlation id")), "{:?}", out.warnings);
    assert_eq!(serde_json::to_string(&TransferStatus::Unlaunched).ok().as_deref(), Some("\"unlaunched\""));
}

#[test]
fn per_range_counters_are_joined_by_range_name() {
    let mut tree = SessionTree::new();
    let r = tree.push("step", 1, 0);
    tree.pop(1, 10).expect("pop");
    let mut c = Correlator::new();
    c.add_launch(launch(1, 0, 0, Some(r)));
    c.add_activity(activity(1, "k"));
    c.add_counter_ranges(0, vec![counters(0, 0, &range_counter_name(r), 9.0, 90.0)]);
    let out = c.finish(&tree, &metrics(), ProfilingMode::PerRange);
    assert_eq!(out.range_counters.get(&r), Some(&vec![Some(9.0), Some(90.0)]));
    assert_eq!(out.rows[0].status, KernelStatus::Ok);
    assert_eq!(out.rows[0].duration_ns, None);
}

#[test]
fn kernel_replay_checkpoint_keeps_decoded_cycles_and_leaves_the_running_one_out() {
    let mut tree = SessionTree::new();
    let step = tree.push("step", 1, 0);
    let mut c = Correlator::new();
    // Cycle 0 is decoded (two kernels with counters); cycle 1 runs (one launch, no counters).
    c.add_launch(launch(10, 0, 0, Some(step)));
    c.add_launch(launch(11, 0, 1, Some(step)));
    c.add_launch(launch(12, 1, 0, Some(step)));
    for id in [10, 11, 12] {
        c.add_activity(activity(id, "k"));
    }
    c.add_counter_ranges(0, vec![counters(0, 0, "0", 10.0, 100.0), counters(0, 1, "1", 20.0, 200.0)]);

    let (copy, pending) = c.checkpoint(ProfilingMode::KernelReplay, Some(1));
    assert_eq!(pending, CheckpointPending { kernels: 1, transfers: 0 });
    let out = copy.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.rows.iter().map(|r| r.correlation_id).collect::<Vec<_>>(), [10, 11]);
    assert_eq!(out.counts.flagged_rows, 0, "a checkpoint holds no row that later data would change");
    assert_eq!(out.rows[1].metrics, vec![Some(20.0), Some(200.0)]);

    // The original is untouched: the full join still sees the running cycle's launch.
    let full = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(full.rows.len(), 3);
}

#[test]
fn trace_checkpoint_leaves_out_launches_whose_activity_has_not_arrived() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(launch(1, 0, 0, None));
    c.add_launch(launch(2, 0, 1, None)); // still running: no activity yet
    c.add_activity(activity(1, "done"));
    c.add_activity(activity(99, "no launch")); // an activity without a launch stays a row
    c.add_transfer_call(transfer_call(5, 1, None, "cudaMemcpy"));

    let (copy, pending) = c.checkpoint(ProfilingMode::Trace, None);
    assert_eq!(pending, CheckpointPending { kernels: 1, transfers: 1 });
    let out = copy.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
    let ids: Vec<u32> = out.rows.iter().map(|r| r.correlation_id).collect();
    assert!(ids.contains(&1) && ids.contains(&99) && !ids.contains(&2), "{ids:?}");
    assert!(out.transfers.is_empty(), "the pending memcpy is not a row");
}

#[test]
fn per_kernel_checkpoint_drops_the_activity_of_left_out_launches() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_launch(launch(7, 2, 0, None));
    c.add_activity(activity(7, "k")); // arrived, but its counter cycle 2 is still running
    let (copy, pending) = c.checkpoint(ProfilingMode::PerKernel, Some(2));
    assert_eq!(pending.kernels, 1);
    let out = copy.finish(&tree, &metrics(), ProfilingMode::PerKernel);
    assert!(out.rows.is_empty(), "its activity must not come back as a row without a launch: {:?}", out.rows);
}

/// Kernel replay: memsets are calls with their size and no activity record; memcpys have
/// records. Calls arrive in correlation id order, records in any order.
#[test]
fn untimed_calls_are_rows_without_times_at_their_calls_place() {
    let mut tree = SessionTree::new();
    let step = tree.push("step", 1, 0);
    let mut c = Correlator::new();
    let copy = |correlation_id: u32, start_ns: u64| TransferActivity {
        correlation_id,
        kind: TransferKind::MemcpyHtoD,
        bytes: 4 << 20,
        start_ns,
        end_ns: start_ns + 400_000,
        stream_id: 7,
        context_id: 1,
        device_id: 0,
        graph_id: 0,
        graph_node_id: 0,
    };
    let call = |correlation_id: u32, untimed: Option<u64>| TransferCall {
        correlation_id,
        thread: 1,
        range: Some(step),
        api_name: if untimed.is_some() { "cudaMemsetAsync_v3020" } else { "cuMemcpyHtoDAsync_v2" }.into(),
        untimed: untimed.map(|bytes| UntimedTransfer { kind: TransferKind::Memset, bytes, device_id: Some(0) }),
        params: None,
    };
    for (id, untimed) in [(10, None), (11, Some(100 << 20)), (12, None), (13, Some(2_457_600)), (14, None)] {
        c.add_transfer_call(call(id, untimed));
    }
    // An untimed call whose record arrives after all: the record makes its one row.
    c.add_transfer_call(call(15, Some(1 << 20)));
    c.add_transfer_call(call(20, Some(6_291_456)));
    for (id, start) in [(14, 3_000_000), (10, 1_000_000), (12, 2_000_000)] {
        c.add_transfer_activity(copy(id, start));
    }
    let mut set = copy(15, 4_000_000);
    set.kind = TransferKind::Memset;
    set.bytes = 1 << 20;
    c.add_transfer_activity(set);

    let (_, pending) = c.checkpoint(ProfilingMode::KernelReplay, None);
    assert_eq!(pending.transfers, 0, "an untimed call waits for no record");
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    let order: Vec<(u32, TransferTiming)> = out.transfers.iter().map(|t| (t.correlation_id, t.timing)).collect();
    use TransferTiming::{Activity as A, ApiCall as U};
    assert_eq!(order, [(10, A), (11, U), (12, A), (13, U), (14, A), (15, A), (20, U)]);
    let zero_grads = &out.transfers[1];
    assert_eq!(
        (zero_grads.kind, zero_grads.bytes, zero_grads.range_path.as_str()),
        (TransferKind::Memset, 100 << 20, "step")
    );
    assert_eq!(
        (zero_grads.start_ns, zero_grads.end_ns, zero_grads.duration_ns, zero_grads.gbps()),
        (None, None, None, None)
    );
    assert_eq!((zero_grads.stream_id, zero_grads.device_id, zero_grads.thread), (None, Some(0), Some(1)));
    assert_eq!(
        (zero_grads.status, zero_grads.api_name.as_deref()),
        (TransferStatus::Ok, Some("cudaMemsetAsync_v3020"))
    );
    assert_eq!((out.transfers[5].bytes, out.transfers[5].duration_ns), (1 << 20, Some(400_000)));
    assert_eq!((out.counts.transfer_rows, out.counts.untimed_transfers), (7, 3));
    assert_eq!(out.counts.transfer_calls_without_activity, 0);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(serde_json::to_string(&TransferTiming::ApiCall).ok().as_deref(), Some("\"api_call\""));
}

#[test]
fn a_timed_call_without_its_record_is_still_reported_missing() {
    let tree = SessionTree::new();
    let mut c = Correlator::new();
    c.add_transfer_call(transfer_call(5, 1, None, "cudaMemcpy"));
    let untimed = UntimedTransfer { kind: TransferKind::Memset, bytes: 64, device_id: None };
    c.add_transfer_call(TransferCall { untimed: Some(untimed), ..transfer_call(6, 1, None, "cuMemsetD8_v2") });
    let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
    assert_eq!(out.transfers.iter().map(|t| t.correlation_id).collect::<Vec<_>>(), [6]);
    assert_eq!((out.transfers[0].device_id, out.counts.transfer_calls_without_activity), (None, 1));
    assert!(
        out.warnings.iter().any(|w| w.starts_with("1 memcpy/memset call(s) have no activity record")),
        "{:?}",
        out.warnings
    );
}
