//! Kernels of one stream that overlap on the GPU (programmatic dependent launch on Hopper):
//! trace.json keeps their timestamps and draws the later one on an extra lane of the stream,
//! so the trace passes `gmprof check-trace`. The numbers are an H100's (CUDA 13.0).

use gmprof::correlate::Correlator;
use gmprof::model::{MetricSet, ProfilingMode, TransferActivity, TransferCall, TransferKind};
use gmprof::report::lanes::{lane_tid, OVERLAP_TID_BASE};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;
use gmprof::timeline::{ChromeTrace, EventArgs, Phase, TraceEvent};
use gmprof::trace_check::{check_trace_json, CheckOptions, Rule};

#[path = "common/kernels.rs"]
mod kernels;
use kernels::{kernel_activity, launch_record};

/// The session's first timestamp: `ts` 0 of the trace.
const ORIGIN: u64 = 1_800_000_000_000_000;
const THREAD: u64 = 4242;

/// A trace-mode report: one range `step` from `ORIGIN` to `end_us`, and kernels (name, start
/// µs, end µs from `ORIGIN`) launched in it, in that order, on stream 7.
fn report(kernels: &[(&str, f64, f64)], end_us: f64) -> Report {
    let ns = |us: f64| ORIGIN + (us * 1000.0).round() as u64;
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    tree.push("step", THREAD, ORIGIN);
    for (i, &(name, start, end)) in kernels.iter().enumerate() {
        let id = i as u32 + 1;
        correlator.add_launch(launch_record(&tree, THREAD, id, id - 1));
        correlator.add_activity(kernel_activity(id, name, ns(start), ns(end)));
    }
    tree.pop(THREAD, ns(end_us)).expect("balanced");
    Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, correlator)
}

fn text(trace: &ChromeTrace) -> String {
    serde_json::to_string(trace).expect("serialize")
}

/// The kernel events of `trace` by name: (tid, ts, dur).
fn kernel(trace: &ChromeTrace, name: &str) -> (u64, f64, f64) {
    let e = trace.trace_events.iter().find(|e| e.cat == Some("kernel") && e.name == name).expect(name);
    (e.tid, e.ts.expect("ts"), e.dur.expect("dur"))
}

fn thread_names(trace: &ChromeTrace) -> Vec<(u64, String)> {
    trace
        .trace_events
        .iter()
        .filter(|e| e.ph == Phase::Metadata && e.name == "thread_name" && e.pid == 100)
        .filter_map(|e| match &e.args {
            EventArgs::Name { name } => Some((e.tid, name.clone())),
            _ => None,
        })
        .collect()
}

fn assert_checks(trace: &ChromeTrace) {
    let check = check_trace_json(&text(trace), &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);
}

const PREPARE: &str = "triton_red_fused__log_softmax__unsafe_view_prepare_softmax_online_view_13";
const NLL: &str = "triton_red_fused__log_softmax__unsafe_view_nll_loss_forward_sub_view_14";

#[test]
fn two_triton_kernels_96_ns_apart_get_two_lanes() {
    // nanoGPT under torch.compile, trace mode: the second kernel starts 96 ns before the
    // first one ends.
    let r = report(&[(PREPARE, 13_501_327.679, 13_501_471.777), (NLL, 13_501_471.681, 13_501_476.129)], 13_502_000.0);
    let trace = r.to_chrome_trace();
    assert_eq!(trace.other_data.origin_cupti_ns, ORIGIN);
    let (tid_a, ts_a, dur_a) = kernel(&trace, PREPARE);
    let (tid_b, ts_b, dur_b) = kernel(&trace, NLL);
    assert_eq!(tid_a, 7, "the first kernel stays on its stream's track");
    assert_eq!(tid_b, lane_tid(7, 1));
    assert_eq!(tid_b, OVERLAP_TID_BASE + 7 * 65_536);
    // Timestamps are CUPTI's, to the nanosecond.
    assert!((ts_a - 13_501_327.679).abs() < 1e-6 && (ts_a + dur_a - 13_501_471.777).abs() < 1e-6);
    assert!((ts_b - 13_501_471.681).abs() < 1e-6 && (ts_b + dur_b - 13_501_476.129).abs() < 1e-6);
    assert!(ts_b < ts_a + dur_a, "they do overlap");
    assert_eq!(trace.other_data.overlap_lane_events, 1);
    assert_eq!(thread_names(&trace), [(7, "stream 7".to_owned()), (tid_b, "stream 7 · overlapped".to_owned())]);
    // kernels.csv's rows keep the activity timestamps.
    assert_eq!(r.kernels[1].start_ns, Some(ORIGIN + 13_501_471_681));
    assert_eq!(r.kernels[0].end_ns, Some(ORIGIN + 13_501_471_777));
    assert_checks(&trace);

    // On one track the same two slices are what check-trace rejected.
    let mut one_track = trace.clone();
    one_track.trace_events.retain(|e| !(e.ph == Phase::Metadata && e.tid == tid_b));
    for e in one_track.trace_events.iter_mut().filter(|e| e.tid == tid_b) {
        e.tid = 7;
    }
    let check = check_trace_json(&text(&one_track), &CheckOptions::default());
    assert_eq!(check.count(Rule::PartialOverlap), 1, "{:?}", check.violations);
}

#[test]
fn split_k_reduce_overlapping_its_gemm_gets_a_lane_and_the_next_kernel_returns() {
    // cuBLASLt's split-K GEMM and its reduce (the shape of nanoGPT's eager bf16 GEMMs; the
    // numbers are made up in that shape): the reduce starts 0.416 µs before the GEMM ends;
    // the next kernel starts after both.
    const GEMM: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
    const REDUCE: &str =
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false>";
    let r = report(
        &[(GEMM, 1_000.000, 1_042.368), (REDUCE, 1_041.952, 1_044.160), ("gelu_kernel", 1_044.800, 1_050.000)],
        1_100.0,
    );
    let trace = r.to_chrome_trace();
    assert_eq!(kernel(&trace, GEMM).0, 7);
    assert_eq!(kernel(&trace, REDUCE).0, lane_tid(7, 1));
    assert_eq!(kernel(&trace, "gelu_kernel").0, 7, "lane 0 is free again");
    assert_eq!(trace.other_data.overlap_lane_events, 1);
    assert_checks(&trace);
}

#[test]
fn three_mutually_overlapping_kernels_need_three_lanes_and_no_more() {
    let r = report(
        &[
            ("a", 10.0, 40.0),
            ("b", 20.0, 50.0),
            ("c", 30.0, 45.0),
            // Starts when a ended: a's lane 0 is free. Then d overlaps b and c: lane 2 is
            // free (c ended at 45) before a new lane would open.
            ("d", 40.0, 60.0),
            ("e", 46.0, 70.0),
        ],
        100.0,
    );
    let trace = r.to_chrome_trace();
    let tids: Vec<u64> = ["a", "b", "c", "d", "e"].iter().map(|n| kernel(&trace, n).0).collect();
    assert_eq!(tids, [7, lane_tid(7, 1), lane_tid(7, 2), 7, lane_tid(7, 2)]);
    assert_eq!(trace.other_data.overlap_lane_events, 3);
    let names: Vec<String> = thread_names(&trace).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["stream 7", "stream 7 · overlapped", "stream 7 · overlapped 2"]);
    assert_checks(&trace);
}

#[test]
fn a_copy_overlapping_a_kernel_of_its_stream_gets_a_lane_too() {
    // A memcpy on stream 7 measured from 25 µs to 35 µs (memcpys and kernels share the track).
    let mut correlator = Correlator::new();
    let mut tree = SessionTree::new();
    tree.push("step", THREAD, ORIGIN);
    correlator.add_launch(launch_record(&tree, THREAD, 1, 0));
    correlator.add_activity(kernel_activity(1, "k", ORIGIN + 10_000, ORIGIN + 30_000));
    correlator.add_transfer_call(TransferCall {
        correlation_id: 2,
        thread: THREAD,
        range: tree.current(THREAD),
        api_name: "cuMemcpyAsync".into(),
        untimed: None,
        params: None,
    });
    correlator.add_transfer_activity(TransferActivity {
        correlation_id: 2,
        kind: TransferKind::MemcpyDtoD,
        bytes: 1 << 20,
        start_ns: ORIGIN + 25_000,
        end_ns: ORIGIN + 35_000,
        stream_id: 7,
        context_id: 1,
        device_id: 0,
        graph_id: 0,
        graph_node_id: 0,
    });
    tree.pop(THREAD, ORIGIN + 100_000).expect("balanced");
    let r = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, correlator);
    let trace = r.to_chrome_trace();
    let copy: &TraceEvent = trace.trace_events.iter().find(|e| e.cat == Some("transfer")).expect("copy");
    assert_eq!(copy.tid, lane_tid(7, 1));
    assert_eq!(kernel(&trace, "k").0, 7);
    assert_checks(&trace);
}
