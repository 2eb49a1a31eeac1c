//! Mid-run counter cycles (CUPTI's range profiler stopped, decoded and started again while the
//! launching thread waited) reach the report: report.json, the summary's `profiler pauses`
//! line, and a "gmprof: counter cycles" track in trace.json that `gmprof check-trace` accepts.
use gmprof::correlate::Correlator;
use gmprof::model::{MetricSet, ProfilerPause, ProfilingMode, ThreadId};
use gmprof::report::timeline::{EventArgs, PAUSE_TID};
use gmprof::report::trace_check::{check_trace_json, CheckOptions};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;

#[path = "common/kernels.rs"]
mod kernels;
use kernels::launch_kernel;

const T0: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// Three steps of one kernel each, with a counter cycle inside steps 1 and 2.
fn report(pauses: Vec<ProfilerPause>) -> Report {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let thread: ThreadId = 42;
    for step in 0..3u32 {
        let t = T0 + u64::from(step) * 30 * MS;
        tree.push("step", thread, t);
        launch_kernel(&tree, &mut correlator, thread, step + 1, "k", t + 20 * MS, t + 21 * MS);
        tree.pop(thread, t + 25 * MS).unwrap();
    }
    let mut info = CaptureInfo::new(ProfilingMode::Trace);
    info.profiler_pauses = pauses;
    Report::analyze(info, &MetricSet::default(), &tree, correlator)
}

fn pauses() -> Vec<ProfilerPause> {
    vec![
        ProfilerPause { cycle: 0, ranges: 2000, start_ns: T0 + 31 * MS, end_ns: T0 + 46 * MS, thread: 42 },
        ProfilerPause { cycle: 1, ranges: 2000, start_ns: T0 + 61 * MS, end_ns: T0 + 71 * MS, thread: 42 },
    ]
}

#[test]
fn pauses_are_in_the_summary_the_json_and_the_timeline() {
    let report = report(pauses());
    let summary = report.summary().to_string();
    assert!(
        summary.contains(
            "profiler pauses: 2 mid-run counter cycle(s) held the launching thread 25.000 ms in total (longest 15.000 ms)"
        ),
        "{summary}"
    );
    let json = serde_json::to_string(&report).unwrap();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.meta.profiler_pauses, pauses());

    let trace = report.to_chrome_trace();
    let slices: Vec<_> = trace.trace_events.iter().filter(|e| e.tid == PAUSE_TID && e.cat == Some("gmprof")).collect();
    assert_eq!(slices.len(), 2);
    assert_eq!(slices[0].name, "counter cycle 0 (CUPTI stop, decode, start)");
    assert_eq!(slices[0].dur, Some(15_000.0));
    // 31 ms after the first push, the trace's origin.
    assert_eq!(slices[0].ts, Some(31_000.0));
    assert!(matches!(slices[1].args, EventArgs::Pause { cycle: 1, ranges: 2000, thread: 42 }));
    assert!(
        trace
            .trace_events
            .iter()
            .any(|e| e.tid == PAUSE_TID
                && matches!(&e.args, EventArgs::Name { name } if name == "gmprof: counter cycles"))
    );
    let text = serde_json::to_string(&trace).unwrap();
    let checked = check_trace_json(&text, &CheckOptions::default());
    assert!(checked.is_ok(), "{:?}", checked.violations);
}

#[test]
fn without_pauses_nothing_changes() {
    let report = report(Vec::new());
    assert!(!report.summary().to_string().contains("profiler pauses"));
    assert!(!serde_json::to_string(&report).unwrap().contains("profiler_pauses"));
    assert!(!report.to_chrome_trace().trace_events.iter().any(|e| e.tid == PAUSE_TID));
}

/// gmprof's own callback time (`GMPROF_SELF_TIME=1`) reaches the summary and report.json only
/// when it was measured; the difference of two snapshots is what a session reports.
#[test]
fn self_time_is_reported_when_measured() {
    use gmprof::model::SelfTime;
    let at_start =
        SelfTime { api_callbacks: 10, api_callback_ns: 5_000, activity_buffers: 1, activity_buffer_ns: 70_000 };
    let at_finish =
        SelfTime { api_callbacks: 4_010, api_callback_ns: 1_205_000, activity_buffers: 2, activity_buffer_ns: 470_000 };
    let session = at_finish.since(at_start);
    assert_eq!(
        session,
        SelfTime { api_callbacks: 4_000, api_callback_ns: 1_200_000, activity_buffers: 1, activity_buffer_ns: 400_000 }
    );
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    tree.push("step", 1, T0);
    launch_kernel(&tree, &mut correlator, 1, 1, "k", T0 + MS, T0 + 2 * MS);
    tree.pop(1, T0 + 3 * MS).unwrap();
    let mut info = CaptureInfo::new(ProfilingMode::Trace);
    info.self_time = Some(session);
    let report = Report::analyze(info, &MetricSet::default(), &tree, correlator);
    let summary = report.summary().to_string();
    assert!(
        summary.contains(
            "gmprof's own time: 4000 API callback(s) took 1.200 ms inside the program's CUDA calls (300 ns each); \
             1 activity buffer(s) took 400.00 us on CUPTI's thread"
        ),
        "{summary}"
    );
    let back: Report = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    assert_eq!(back.meta.self_time, Some(session));
    assert!(!self::report(Vec::new()).summary().to_string().contains("own time"));
    assert!(!serde_json::to_string(&self::report(Vec::new())).unwrap().contains("self_time"));
}
