//! Timeline tests: Chrome trace export of reports built from synthetic capture records (no
//! GPU needed), and the trace checker, rule by rule.
//!
//! The golden file `tests/golden/trace.json` pins the trace format; rewrite it with
//! `GMPROF_BLESS=1 cargo test --test timeline`.

use std::collections::HashMap;

use gmprof::correlate::Correlator;
use gmprof::model::{
    ClockPair, ClockSync, CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, ProfilingMode,
    ThreadId, TransferActivity, TransferCall, TransferKind, GPU_TIME_METRIC,
};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;
use gmprof::timeline::{EventArgs, Phase, SYNTHETIC_PLACEMENT};
use gmprof::trace_check::{check_trace_file, check_trace_json, CheckOptions, Rule};
use gmprof::Error;
use serde_json::Value;

#[path = "common/golden.rs"]
mod golden;
#[path = "common/metrics.rs"]
mod metrics;
use golden::check_golden;
use metrics::spec;

const READ: &str = "dram__bytes_read.sum";
const SM_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";

fn metrics() -> MetricSet {
    MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"),
            spec(READ, MetricKind::Counter, "byte"),
            spec(SM_PCT, MetricKind::Throughput, "%"),
        ],
    }
}

/// A fake capture on a CUPTI-like clock: the CPU advances 1 µs per push, pop or launch;
/// each kernel starts 3 µs after its launch at the earliest, and after the previous kernel
/// of its stream, so kernels lag their ranges as they do on a real GPU.
struct Capture {
    tree: SessionTree,
    correlator: Correlator,
    mode: ProfilingMode,
    clock: u64,
    next_correlation: u32,
    cycle: u32,
    ordinal: u32,
    pending: Vec<CounterRange>,
    stream_free: HashMap<u32, u64>,
}

const CYCLE_SIZE: u32 = 4;
const CLOCK_START: u64 = 1_700_000_000_000;
const UNIX_START: u64 = 1_750_000_000_000_000_000;

impl Capture {
    fn new(mode: ProfilingMode) -> Self {
        Self {
            tree: SessionTree::new(),
            correlator: Correlator::new(),
            mode,
            clock: CLOCK_START,
            next_correlation: 1,
            cycle: 0,
            ordinal: 0,
            pending: Vec::new(),
            stream_free: HashMap::new(),
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1_000;
        self.clock
    }

    fn push(&mut self, name: &str, thread: ThreadId) {
        let t = self.tick();
        self.tree.push(name, thread, t);
    }

    fn pop(&mut self, thread: ThreadId) {
        let t = self.tick();
        self.tree.pop(thread, t).expect("balanced pop");
    }

    /// Launches a kernel of `time_ns` on `stream`, reading `read` bytes at `pct` % SM.
    fn launch(&mut self, thread: ThreadId, stream: u32, kernel: &str, time_ns: u64, read: f64, pct: f64) {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let launched = self.tick();
        self.correlator.add_launch(LaunchRecord {
            correlation_id,
            thread,
            range: self.tree.current(thread),
            cycle: self.cycle,
            ordinal: self.ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: Some(launched),
            unmeasured: false,
        });
        let free = self.stream_free.entry(stream).or_insert(0);
        let start = (launched + 3_000).max(*free);
        let end = start + time_ns;
        *free = end;
        let trace = self.mode == ProfilingMode::Trace;
        self.correlator.add_activity(KernelActivity {
            correlation_id,
            name: kernel.into(),
            grid: [132, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 32,
            static_shared_memory: 0,
            dynamic_shared_memory: 0,
            stream_id: stream,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
            // The range profiler collapses activity timestamps in counter modes.
            start_ns: if trace { start } else { end },
            end_ns: end,
        });
        if !trace {
            self.pending.push(CounterRange {
                cycle: self.cycle,
                index: self.ordinal,
                name: self.ordinal.to_string(),
                values: vec![time_ns as f64, read, pct],
            });
        }
        self.ordinal += 1;
        if self.ordinal == CYCLE_SIZE {
            self.end_cycle();
        }
    }

    /// A memcpy or memset of `bytes` on `stream`, taking `time_ns` on the GPU.
    fn transfer(&mut self, thread: ThreadId, stream: u32, kind: TransferKind, bytes: u64, time_ns: u64) {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let called = self.tick();
        self.correlator.add_transfer_call(TransferCall {
            correlation_id,
            thread,
            range: self.tree.current(thread),
            api_name: "cuMemcpyAsync".into(),
            untimed: None,
            params: None,
        });
        let free = self.stream_free.entry(stream).or_insert(0);
        let start = (called + 2_000).max(*free);
        *free = start + time_ns;
        self.correlator.add_transfer_activity(TransferActivity {
            correlation_id,
            kind,
            bytes,
            start_ns: start,
            end_ns: start + time_ns,
            stream_id: stream,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
        });
    }

    fn end_cycle(&mut self) {
        if self.ordinal == 0 {
            return;
        }
        let ranges = std::mem::take(&mut self.pending);
        if self.mode != ProfilingMode::Trace {
            self.correlator.add_counter_ranges(self.cycle, ranges);
        }
        self.cycle += 1;
        self.ordinal = 0;
    }

    fn report(mut self) -> Report {
        self.end_cycle();
        let mut info = CaptureInfo::new(self.mode);
        info.device_name = Some("NVIDIA H100 80GB HBM3".into());
        info.chip = Some("GH100".into());
        let finish = self.tick();
        // The wall clock runs 1 ns per µs fast of the CUPTI clock.
        let span = finish - CLOCK_START;
        info.clock = Some(ClockSync {
            start: ClockPair { cupti_ns: CLOCK_START, unix_ns: UNIX_START },
            finish: ClockPair { cupti_ns: finish, unix_ns: UNIX_START + span + span / 1000 },
        });
        info.warnings = self.tree.close_all_open(finish);
        let mut report = Report::analyze(info, &metrics(), &self.tree, self.correlator);
        report.meta.gmprof_version = "GOLDEN".into();
        report
    }
}

/// Two training steps on thread 100 (stream 7): forward, backward with a nested allreduce,
/// optimizer; a data loader on thread 200 (stream 13) overlapping the forward; kernels
/// outside ranges before and after; a weight upload per step, a memset in the data loader
/// and a copy out at the end.
fn training_report(mode: ProfilingMode) -> Report {
    let mut c = Capture::new(mode);
    c.launch(100, 7, "init_weights", 5_000, 0.0, 10.0);
    for step in 0..2u64 {
        c.push("train_step", 100);
        c.transfer(100, 7, TransferKind::MemcpyHtoD, 4 << 20, 2_000);
        c.push("data_loader", 200);
        c.transfer(200, 13, TransferKind::Memset, 1 << 20, 500);
        c.push("forward", 100);
        c.launch(100, 7, "_Z4gemmILi128EEvPKfS1_Pfi", 20_000 + step, 8e6, 80.0);
        c.launch(200, 13, "decode_jpeg", 3_000, 6e5, 20.0);
        c.launch(100, 7, "_Z7softmaxPfi", 10_000, 1e6, 40.0);
        c.pop(100);
        c.pop(200);
        c.push("backward", 100);
        c.launch(100, 7, "_Z4gemmILi128EEvPKfS1_Pfi", 40_000, 1.6e7, 90.0);
        c.push("allreduce", 100);
        c.launch(100, 7, "ncclKernel_AllReduce", 15_000, 3e6, 5.0);
        c.pop(100);
        c.pop(100);
        c.push("optimizer", 100);
        c.launch(100, 7, "adam_step", 7_000, 2.8e6, 30.0);
        c.pop(100);
        c.pop(100);
    }
    c.launch(100, 7, "copy_out", 1_000, 1e3, 2.0);
    c.transfer(100, 7, TransferKind::MemcpyDtoH, 1 << 10, 800);
    c.report()
}

fn export(report: &Report) -> String {
    let mut out = Vec::new();
    report.write_chrome_trace_to(&mut out).expect("export");
    String::from_utf8(out).expect("utf8")
}

fn events(text: &str) -> Vec<Value> {
    let root: Value = serde_json::from_str(text).expect("trace parses");
    root["traceEvents"].as_array().expect("traceEvents array").clone()
}

fn count(events: &[Value], ph: &str, cat: Option<&str>) -> usize {
    events.iter().filter(|e| e["ph"] == ph && cat.is_none_or(|c| e["cat"] == c)).count()
}

fn assert_accepted(text: &str) {
    let report = check_trace_json(text, &CheckOptions::default());
    assert!(report.is_ok(), "violations: {:#?}", report.violations);
    assert!(report.events > 0);
}

#[test]
fn trace_mode_export_matches_golden_and_passes_the_checker() {
    let report = training_report(ProfilingMode::Trace);
    let trace = report.to_chrome_trace();
    let pretty = serde_json::to_string_pretty(&trace).expect("pretty") + "\n";
    check_golden("trace.json", &pretty);

    // The compact file is the same value as the pretty golden.
    let compact = export(&report);
    let a: Value = serde_json::from_str(&compact).expect("compact");
    let b: Value = serde_json::from_str(&pretty).expect("pretty");
    assert_eq!(a, b);
    assert_accepted(&compact);
}

#[test]
fn trace_mode_uses_measured_kernel_times() {
    let report = training_report(ProfilingMode::Trace);
    let trace = report.to_chrome_trace();
    let info = &trace.other_data;
    assert_eq!(info.kernel_placement, "measured");
    assert!(info.note.is_none());
    // The origin is the first timestamp of the session (the first launch's kernel starts
    // 3 µs after it; the first push comes later).
    let first_push = report.ranges.iter().filter_map(|r| r.start_ns).min().expect("ranges");
    let first_kernel = report.kernels.iter().filter_map(|k| k.start_ns).min().expect("kernels");
    assert_eq!(info.origin_cupti_ns, first_push.min(first_kernel));
    let clock = report.meta.clock.expect("clock pairs");
    assert_eq!(info.origin_unix_ns, Some(clock.to_unix_ns(info.origin_cupti_ns)));

    // Kernel events are sorted by track and time; match them to rows by correlation id.
    for event in trace.trace_events.iter().filter(|e| e.cat == Some("kernel")) {
        let EventArgs::Kernel(args) = &event.args else { panic!("kernel args") };
        let k = report.kernels.iter().find(|k| k.correlation_id == args.correlation_id).expect("row");
        let start = (k.start_ns.expect("start") - info.origin_cupti_ns) as f64 / 1000.0;
        assert_eq!(event.ts, Some(start));
        assert_eq!(event.dur, Some((k.end_ns.unwrap() - k.start_ns.unwrap()) as f64 / 1000.0));
        assert!(args.placement.is_none());
        assert_eq!(event.pid, 100);
        assert_eq!(event.tid, u64::from(k.stream_id.unwrap()));
    }
}

#[test]
fn kernel_replay_export_is_synthetic_and_passes_the_checker() {
    let report = training_report(ProfilingMode::KernelReplay);
    let text = export(&report);
    assert_accepted(&text);

    let trace = report.to_chrome_trace();
    assert_eq!(trace.other_data.kernel_placement, SYNTHETIC_PLACEMENT);
    assert!(trace.other_data.note.as_deref().is_some_and(|n| n.contains("synthetic")));
    let kernels: Vec<_> = trace.trace_events.iter().filter(|e| e.cat == Some("kernel")).collect();
    assert_eq!(kernels.len(), report.kernels.len());
    let mut last_end = 0.0f64;
    let mut by_time = kernels.clone();
    by_time.sort_by(|a, b| a.ts.unwrap().total_cmp(&b.ts.unwrap()));
    for event in by_time {
        let EventArgs::Kernel(args) = &event.args else { panic!("kernel args") };
        assert_eq!(args.placement, Some(SYNTHETIC_PLACEMENT));
        // Durations are the counter's; kernels never overlap on the device.
        assert_eq!(event.dur, Some(args.duration_ns.expect("duration") as f64 / 1000.0));
        assert!(event.ts.unwrap() >= last_end - 1e-9, "{event:?} overlaps the kernel before");
        last_end = event.ts.unwrap() + event.dur.unwrap();
        // A kernel in a range starts no earlier than the range's push.
        if let Some(id) = &args.range_id {
            let range = trace
                .trace_events
                .iter()
                .find(|e| matches!(&e.args, EventArgs::Range(r) if &r.range_id == id))
                .expect("range event");
            assert!(event.ts.unwrap() >= range.ts.unwrap());
        }
    }

    // Synthetic kernels go around the measured transfers of their device.
    let transfers: Vec<_> = trace.trace_events.iter().filter(|e| e.cat == Some("transfer")).collect();
    assert_eq!(transfers.len(), report.transfers.len());
    for k in &kernels {
        let (k_start, k_end) = (k.ts.unwrap(), k.ts.unwrap() + k.dur.unwrap());
        for t in &transfers {
            let (t_start, t_end) = (t.ts.unwrap(), t.ts.unwrap() + t.dur.unwrap());
            assert!(k_end <= t_start + 1e-9 || t_end <= k_start + 1e-9, "{k:?} overlaps {t:?}");
        }
    }

    // Counter tracks: one sample per metric with a value and range.
    let counters: Vec<_> = trace.trace_events.iter().filter(|e| e.ph == Phase::Counter).collect();
    let ranges = report.ranges.iter().filter(|r| r.range_id.is_some());
    let expected: usize = ranges.map(|r| r.metrics.iter().filter(|m| m.is_some()).count()).sum();
    assert_eq!(counters.len(), expected);
    assert!(counters.iter().all(|c| c.pid == 1 && matches!(c.args, EventArgs::Counter { .. })));
    assert!(counters.iter().any(|c| c.name == READ));
}

#[test]
fn round_trip_has_the_expected_events() {
    for mode in [ProfilingMode::Trace, ProfilingMode::KernelReplay] {
        let report = training_report(mode);
        let events = events(&export(&report));
        let ranges = report.ranges.iter().filter(|r| r.range_id.is_some()).count();
        assert_eq!(ranges, 12, "two steps of six ranges");
        assert_eq!(count(&events, "X", Some("range")), ranges);
        assert_eq!(count(&events, "X", Some("kernel")), report.kernels.len());
        assert_eq!(report.kernels.len(), 2 + 2 * 6);
        assert_eq!(count(&events, "X", Some("transfer")), report.transfers.len());
        assert_eq!(report.transfers.len(), 2 * 2 + 1);
        let upload = events.iter().find(|e| e["name"] == "memcpy_htod").expect("upload");
        assert_eq!(upload["args"]["bytes"], 4 << 20);
        assert_eq!(upload["args"]["range_path"], "train_step");
        assert_eq!(upload["args"]["status"], "ok");
        assert_eq!(upload["dur"], 2.0);
        assert_eq!(upload["tid"], 7);
        assert!(events.iter().any(|e| e["name"] == "memset" && e["tid"] == 13));
        // CPU and GPU 0; threads 100 and 200, streams 7 and 13, plus the counter track.
        let names = |name: &str| events.iter().filter(|e| e["ph"] == "M" && e["name"] == name).count();
        assert_eq!(names("process_name"), 2);
        let counter_track = usize::from(mode != ProfilingMode::Trace);
        assert_eq!(names("thread_name"), 4 + counter_track);
        // Metadata first.
        let first_timed = events.iter().position(|e| e["ph"] != "M").expect("timed events");
        assert!(events[first_timed..].iter().all(|e| e["ph"] != "M"));
        assert_eq!(count(&events, "C", None) > 0, mode != ProfilingMode::Trace);

        let gpu = events.iter().find(|e| e["name"] == "process_name" && e["pid"] == 100).expect("GPU process");
        assert_eq!(gpu["args"]["name"], "GPU 0: NVIDIA H100 80GB HBM3");
        let forward = events.iter().find(|e| e["cat"] == "range" && e["name"] == "forward").expect("forward");
        assert_eq!(forward["args"]["path"], "train_step/forward");
        assert_eq!(forward["args"]["kernel_count"], 2);
        assert!(forward["args"]["parent_id"].is_string());
        assert!(forward["args"]["range_id"].as_str().is_some_and(|id| id.contains('.')));
        // Trace mode collects no counters.
        assert_eq!(forward["args"]["metrics"][READ].as_f64().is_some_and(|v| v > 0.0), mode != ProfilingMode::Trace);
        let softmax = events.iter().find(|e| e["name"] == "softmax(float*, int)").expect("demangled kernel");
        assert_eq!(softmax["args"]["range_path"], "train_step/forward");
        assert_eq!(softmax["args"]["grid"], serde_json::json!([132, 1, 1]));
        assert_eq!(softmax["args"]["status"], "ok");
        // The whole trace sits near 0 µs, not at the CUPTI epoch.
        assert!(events.iter().filter_map(|e| e["ts"].as_f64()).all(|ts| (0.0..10_000.0).contains(&ts)));
        let root: Value = serde_json::from_str(&export(&report)).expect("parse");
        assert_eq!(root["displayTimeUnit"], "ns");
        assert_eq!(root["otherData"]["mode"], mode.as_str());
        assert_eq!(root["otherData"]["dropped_activity_records"], 0);
    }
}

#[test]
fn files_are_written_and_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.json");
    training_report(ProfilingMode::Trace).write_chrome_trace(&path).expect("write");
    let report = check_trace_file(&path, &CheckOptions::default()).expect("check");
    assert!(report.is_ok(), "{:?}", report.violations);
    assert!(matches!(
        check_trace_file(dir.path().join("absent.json"), &CheckOptions::default()),
        Err(Error::Io { .. })
    ));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, [0xff, 0xfe]).expect("write");
    let report = check_trace_file(&bad, &CheckOptions::default()).expect("check");
    assert_eq!(report.count(Rule::InvalidJson), 1);
    assert!(matches!(
        training_report(ProfilingMode::Trace).write_chrome_trace(dir.path().join("no/such/dir.json")),
        Err(Error::Io { .. })
    ));
}

#[test]
fn an_empty_report_exports_an_empty_valid_trace() {
    let report = Report::analyze(
        CaptureInfo::new(ProfilingMode::KernelReplay),
        &metrics(),
        &SessionTree::new(),
        Correlator::new(),
    );
    let text = export(&report);
    assert!(events(&text).is_empty());
    assert!(check_trace_json(&text, &CheckOptions::default()).is_ok());
}

// ---- The checker, rule by rule -----------------------------------------------------------

fn violations(text: &str) -> Vec<Rule> {
    check_trace_json(text, &CheckOptions::default()).violations.iter().map(|v| v.rule).collect()
}

fn assert_only(text: &str, rule: Rule) {
    let report = check_trace_json(text, &CheckOptions::default());
    assert!(!report.is_ok(), "{text} was accepted");
    assert!(report.violations.iter().all(|v| v.rule == rule), "{text}: expected only {rule}: {:#?}", report.violations);
}

#[test]
fn good_traces_are_accepted() {
    // Object form, with metadata, nested X events, B/E pairs, a counter and an instant.
    assert_accepted(
        r#"{"traceEvents":[
            {"ph":"M","name":"process_name","pid":1,"args":{"name":"p"}},
            {"ph":"M","name":"thread_name","pid":1,"tid":5,"args":{"name":"t"}},
            {"ph":"B","name":"outer","ts":0,"pid":1,"tid":5},
            {"ph":"B","name":"inner","ts":1,"pid":1,"tid":5},
            {"ph":"E","ts":2,"pid":1,"tid":5},
            {"ph":"E","name":"outer","ts":3,"pid":1,"tid":5},
            {"ph":"X","name":"a","ts":10,"dur":10,"pid":1,"tid":5},
            {"ph":"X","name":"b","ts":10,"dur":5,"pid":1,"tid":5},
            {"ph":"X","name":"c","ts":15,"dur":5,"pid":1,"tid":5},
            {"ph":"X","name":"d","ts":20,"dur":0,"pid":1,"tid":5},
            {"ph":"C","name":"bytes","ts":0,"pid":1,"tid":0,"args":{"value":3}},
            {"ph":"i","name":"mark","ts":4,"pid":"gpu","tid":"s","s":"t"}
        ],"displayTimeUnit":"ns"}"#,
    );
    // Array form.
    assert_accepted(r#"[{"ph":"B","name":"x","ts":1,"pid":1,"tid":1},{"ph":"E","name":"x","ts":2,"pid":1,"tid":1}]"#);
    // Ranges and kernels in gmprof's shape; the kernel starts after the range ended, within
    // the allowance.
    assert_accepted(
        r#"{"traceEvents":[
            {"ph":"X","cat":"range","name":"step","ts":0,"dur":100,"pid":1,"tid":1,"args":{"range_id":"0.0"}},
            {"ph":"X","cat":"range","name":"fwd","ts":10,"dur":90,"pid":1,"tid":1,"args":{"range_id":"1.0","parent_id":"0.0"}},
            {"ph":"X","cat":"kernel","name":"k","ts":1500,"dur":5,"pid":100,"tid":7,"args":{"range_id":"1.0"}},
            {"ph":"X","cat":"kernel","name":"k0","ts":9.5,"dur":5,"pid":100,"tid":8,"args":{"range_id":"1.0"}}
        ]}"#,
    );
}

#[test]
fn rule_invalid_json() {
    for text in ["{not json", r#"{"events":[]}"#, r#"{"traceEvents":3}"#, "42", r#"[1]"#] {
        assert_eq!(violations(text), vec![Rule::InvalidJson], "{text}");
    }
    let report = check_trace_json("[1, {\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1}]", &CheckOptions::default());
    assert_eq!(report.events, 2);
    assert_eq!(report.violations[0].event_index, Some(0));
}

#[test]
fn rule_missing_field() {
    for text in [
        r#"[{"name":"x","ts":1,"pid":1,"tid":1,"dur":1}]"#,
        r#"[{"ph":"X","name":"x","pid":1,"tid":1,"dur":1}]"#,
        r#"[{"ph":"X","name":"x","ts":1,"tid":1,"dur":1}]"#,
        r#"[{"ph":"X","name":"x","ts":1,"pid":1,"dur":1}]"#,
        r#"[{"ph":"X","ts":1,"pid":1,"tid":1,"dur":1}]"#,
        r#"[{"ph":"X","name":"x","ts":1,"pid":1,"tid":1}]"#,
        r#"[{"ph":"X","name":"x","ts":"1","pid":1,"tid":1,"dur":1}]"#,
        r#"[{"ph":"X","name":"x","ts":1,"pid":1.5,"tid":1,"dur":1}]"#,
        r#"[{"ph":"M","name":"process_name","args":{"name":"p"}}]"#,
        r#"[{"ph":"M","pid":1,"args":{"name":"p"}}]"#,
        r#"[{"ph":"C","name":"c","pid":1,"tid":0,"args":{"value":1}}]"#,
    ] {
        let report = check_trace_json(text, &CheckOptions::default());
        assert_eq!(report.violations.len(), 1, "{text}: {:?}", report.violations);
        assert_eq!(report.violations[0].rule, Rule::MissingField, "{text}");
        assert_eq!(report.violations[0].event_index, Some(0));
    }
    // Metadata needs no ts or tid; an end event needs no name.
    assert_accepted(r#"[{"ph":"M","name":"process_name","pid":1,"args":{"name":"p"}}]"#);
    assert_accepted(r#"[{"ph":"B","name":"x","ts":1,"pid":1,"tid":1},{"ph":"E","ts":2,"pid":1,"tid":1}]"#);
}

#[test]
fn rule_negative_duration() {
    assert_only(r#"[{"ph":"X","name":"x","ts":10,"dur":-1,"pid":1,"tid":1}]"#, Rule::NegativeDuration);
}

#[test]
fn rule_unbalanced_begin_end() {
    // E without B.
    assert_only(r#"[{"ph":"E","name":"x","ts":1,"pid":1,"tid":1}]"#, Rule::UnbalancedBeginEnd);
    // B never ended.
    assert_only(r#"[{"ph":"B","name":"x","ts":1,"pid":1,"tid":1}]"#, Rule::UnbalancedBeginEnd);
    // Name mismatch.
    assert_only(
        r#"[{"ph":"B","name":"x","ts":1,"pid":1,"tid":1},{"ph":"E","name":"y","ts":2,"pid":1,"tid":1}]"#,
        Rule::UnbalancedBeginEnd,
    );
    // A B and an E on different tracks do not pair: two violations.
    let text = r#"[{"ph":"B","name":"x","ts":1,"pid":1,"tid":1},{"ph":"E","name":"x","ts":2,"pid":1,"tid":2}]"#;
    assert_eq!(violations(text), vec![Rule::UnbalancedBeginEnd, Rule::UnbalancedBeginEnd]);
}

#[test]
fn rule_child_outside_parent() {
    // The child is on another thread (no track nesting involved) and ends after its parent.
    assert_only(
        r#"[
            {"ph":"X","cat":"range","name":"p","ts":0,"dur":10,"pid":1,"tid":1,"args":{"range_id":"0.0"}},
            {"ph":"X","cat":"range","name":"c","ts":5,"dur":10,"pid":1,"tid":2,"args":{"range_id":"1.0","parent_id":"0.0"}}
        ]"#,
        Rule::ChildOutsideParent,
    );
    // Starting before the parent too; numeric ids work as well.
    assert_only(
        r#"[
            {"ph":"X","cat":"range","name":"c","ts":0,"dur":1,"pid":1,"tid":2,"args":{"range_id":2,"parent_id":1}},
            {"ph":"X","cat":"range","name":"p","ts":5,"dur":10,"pid":1,"tid":1,"args":{"range_id":1}}
        ]"#,
        Rule::ChildOutsideParent,
    );
    // A parent missing from the trace is not checked.
    assert_accepted(
        r#"[{"ph":"X","cat":"range","name":"c","ts":0,"dur":1,"pid":1,"tid":2,"args":{"range_id":"2.0","parent_id":"9.9"}}]"#,
    );
}

#[test]
fn rule_partial_overlap() {
    assert_only(
        r#"[{"ph":"X","name":"a","ts":0,"dur":10,"pid":1,"tid":1},{"ph":"X","name":"b","ts":5,"dur":10,"pid":1,"tid":1}]"#,
        Rule::PartialOverlap,
    );
    // The same on two tracks is fine.
    assert_accepted(
        r#"[{"ph":"X","name":"a","ts":0,"dur":10,"pid":1,"tid":1},{"ph":"X","name":"b","ts":5,"dur":10,"pid":1,"tid":2}]"#,
    );
}

#[test]
fn rule_timestamp_backwards() {
    assert_only(
        r#"[{"ph":"X","name":"a","ts":10,"dur":1,"pid":1,"tid":1},{"ph":"X","name":"b","ts":5,"dur":1,"pid":1,"tid":1}]"#,
        Rule::TimestampBackwards,
    );
    assert_only(
        r#"[{"ph":"C","name":"c","ts":10,"pid":1,"tid":0,"args":{"value":1}},{"ph":"C","name":"c","ts":9,"pid":1,"tid":0,"args":{"value":2}}]"#,
        Rule::TimestampBackwards,
    );
}

#[test]
fn rule_kernel_outside_range() {
    let trace = |kernel_ts: f64| {
        format!(
            r#"[{{"ph":"X","cat":"range","name":"r","ts":100,"dur":50,"pid":1,"tid":1,"args":{{"range_id":"3.1"}}}},
               {{"ph":"X","cat":"kernel","name":"k","ts":{kernel_ts},"dur":1,"pid":100,"tid":7,"args":{{"range_id":"3.1"}}}}]"#
        )
    };
    // Before the push, beyond clock granularity.
    assert_only(&trace(98.5), Rule::KernelOutsideRange);
    // Within the granularity, inside, and after the pop within the allowance: fine.
    for ts in [99.5, 120.0, 150.0 + 1999.0] {
        assert_accepted(&trace(ts));
    }
    // After the pop beyond the allowance.
    assert_only(&trace(150.0 + 2001.0), Rule::KernelOutsideRange);
    // The same, behind a queue of kernels on its stream that kept the GPU busy: fine. With a
    // gap of more than the allowance before it on the stream, it is not.
    let queued = |gap: f64| {
        format!(
            r#"[{{"ph":"X","cat":"range","name":"r","ts":100,"dur":50,"pid":1,"tid":1,"args":{{"range_id":"3.1"}}}},
               {{"ph":"X","cat":"kernel","name":"q","ts":120,"dur":{},"pid":100,"tid":7,"args":{{"range_id":"3.1"}}}},
               {{"ph":"X","cat":"kernel","name":"k","ts":5000,"dur":1,"pid":100,"tid":7,"args":{{"range_id":"3.1"}}}}]"#,
            5000.0 - 120.0 - gap
        )
    };
    assert_accepted(&queued(1500.0));
    assert_only(&queued(2500.0), Rule::KernelOutsideRange);
    // The allowance is an option.
    let strict = CheckOptions { launch_latency_allowance_us: 10.0 };
    let report = check_trace_json(&trace(170.0), &strict);
    assert_eq!(report.violations.iter().map(|v| v.rule).collect::<Vec<_>>(), vec![Rule::KernelOutsideRange]);
    assert!(report.violations[0].message.contains("after its range ended"), "{}", report.violations[0]);
}

#[test]
fn violations_serialize_with_snake_case_rules() {
    let report =
        check_trace_json(r#"[{"ph":"X","name":"x","ts":10,"dur":-1,"pid":1,"tid":1}]"#, &CheckOptions::default());
    let json = serde_json::to_value(&report).expect("serialize");
    assert_eq!(json["violations"][0]["rule"], "negative_duration");
    assert_eq!(json["violations"][0]["event_index"], 0);
    assert_eq!(report.violations[0].to_string(), "negative_duration: event 0: \"x\" has dur -1");
}

/// A real export with one backward kernel changed by `edit`.
fn broken_export(edit: impl Fn(&mut Value)) -> Vec<Rule> {
    let report = training_report(ProfilingMode::Trace);
    let mut root: Value = serde_json::from_str(&export(&report)).expect("parse");
    let events = root["traceEvents"].as_array_mut().expect("events");
    let kernel = events
        .iter_mut()
        .find(|e| e["cat"] == "kernel" && e["args"]["range_path"] == "train_step/backward")
        .expect("a backward kernel");
    assert!(kernel["args"]["launch_ts"].as_f64().is_some_and(|l| l > 0.0), "{kernel}");
    edit(kernel);
    violations(&root.to_string())
}

#[test]
fn a_broken_export_is_caught() {
    // A kernel moved before its range: before its launch call too.
    let rules = broken_export(|k| k["ts"] = serde_json::json!(0.0));
    assert!(rules.contains(&Rule::KernelBeforeLaunch), "{rules:?}");
    assert!(rules.contains(&Rule::TimestampBackwards), "{rules:?}");
    // The same without its launch call: the heuristic catches it.
    let rules = broken_export(|k| {
        k["ts"] = serde_json::json!(0.0);
        k["args"].as_object_mut().unwrap().remove("launch_ts");
    });
    assert!(rules.contains(&Rule::KernelOutsideRange), "{rules:?}");
    // A launch call outside the range the kernel names (a wrong attribution).
    let rules = broken_export(|k| k["args"]["launch_ts"] = serde_json::json!(0.0));
    assert_eq!(rules, [Rule::KernelOutsideRange]);
}
