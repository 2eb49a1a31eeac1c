//! `args.launch_ts` and rule 7 made exact: a kernel belongs to the range its launch call lay
//! in, however long it waited on the GPU. The real case: llm.c's GPT-2 trainer under
//! per_kernel on an H100 (CUDA 13.0), where `check-trace` flagged a kernel launched inside
//! "attention_backward" that started 2077 µs after the range ended, its stream idle for more
//! than the 2 ms allowance before it while the range profiler did its own GPU work.

use gmprof::correlate::Correlator;
use gmprof::model::{CounterRange, LaunchRecord, MetricKind, MetricSet, ProfilingMode, GPU_TIME_METRIC};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;
use gmprof::timeline::EventArgs;
use gmprof::trace_check::{check_trace_json, CheckOptions, Rule};
use serde_json::Value;

#[path = "common/kernels.rs"]
mod kernels;
#[path = "common/metrics.rs"]
mod metrics;
use kernels::{kernel_activity, launch_record};

const SOFTMAX: &str =
    "softmax_autoregressive_backward_inplace_kernel(__nv_bfloat16*, __nv_bfloat16 const*, int, int, int, float)";

/// Rule 7 and 8's verdicts on the llm.c range and kernel (µs from the trace's origin): the
/// range [601340.763, 601479.327], the kernel at 603556.369 (2077.042 µs after the range's
/// end) for 12.5 µs, a kernel before it on stream 7 that ended 2.5 ms before it started,
/// and the kernel's `launch_ts` (`None`: not in the trace).
fn rules(launch_ts: Option<f64>, kernel_ts: f64) -> Vec<Rule> {
    let launch = launch_ts.map_or(String::new(), |l| format!(r#","launch_ts":{l}"#));
    let text = format!(
        r#"{{"traceEvents":[
        {{"ph":"X","cat":"range","name":"attention_backward","ts":601340.763,"dur":138.564,"pid":1,"tid":9,"args":{{"range_id":"45.0"}}}},
        {{"ph":"X","cat":"kernel","name":"matmul_backward_bias_kernel9","ts":601030.0,"dur":26.369,"pid":100,"tid":7,"args":{{"range_id":"44.0"}}}},
        {{"ph":"X","cat":"kernel","name":"{SOFTMAX}","ts":{kernel_ts},"dur":12.5,"pid":100,"tid":7,"args":{{"range_id":"45.0"{launch}}}}}
        ]}}"#
    );
    let report = check_trace_json(&text, &CheckOptions::default());
    assert_eq!(report.events, 3);
    report.violations.iter().map(|v| v.rule).collect()
}

#[test]
fn the_llmc_kernel_launched_inside_its_range_passes_however_late_it_ran() {
    // As written before launch_ts: the heuristic flags it (the report from the H100 run).
    assert_eq!(rules(None, 603_556.369), [Rule::KernelOutsideRange]);
    // Launched inside the range (any instant of it, its ends within the clock's granularity).
    for launch in [601_470.512, 601_340.763, 601_479.327, 601_340.0, 601_480.0] {
        assert_eq!(rules(Some(launch), 603_556.369), [], "launch_ts {launch}");
    }
    // Started within the clock's granularity of its launch: fine too.
    assert_eq!(rules(Some(601_470.512), 601_471.0), []);
}

#[test]
fn a_launch_outside_its_range_or_a_kernel_before_its_launch_is_still_caught() {
    // Launched after the range ended, or before it was pushed: a wrong attribution.
    assert_eq!(rules(Some(601_480.5), 603_556.369), [Rule::KernelOutsideRange]);
    assert_eq!(rules(Some(601_339.5), 603_556.369), [Rule::KernelOutsideRange]);
    // Started before its launch call: impossible whatever its range.
    assert_eq!(rules(Some(601_470.512), 601_469.0), [Rule::KernelBeforeLaunch]);
    // Both at once: launched after its range, and started before that launch.
    assert_eq!(rules(Some(603_600.0), 603_556.369), [Rule::KernelOutsideRange, Rule::KernelBeforeLaunch]);
    // A kernel outside any range is held to its launch call too.
    let text = r#"[{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":1,"pid":100,"tid":7,"args":{"launch_ts":12}}]"#;
    let report = check_trace_json(text, &CheckOptions::default());
    assert_eq!(report.violations.iter().map(|v| v.rule).collect::<Vec<_>>(), [Rule::KernelBeforeLaunch]);
    assert!(report.violations[0].message.contains("2 µs before its launch call"), "{}", report.violations[0]);
}

/// A per_kernel report in the llm.c case's shape (CUPTI ns, origin `T`): range
/// attention_backward pushed at T + 601340.763 µs and popped at T + 601479.327 µs; the
/// kernel before it ran at T + 601030 µs; softmax was launched at `launch` µs and ran from
/// T + 603556.369 µs for 12.5 µs.
fn per_kernel_report(launch: f64) -> Report {
    const T: u64 = 1_750_000_000_000_000;
    let ns = |us: f64| T + (us * 1000.0).round() as u64;
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    tree.push("step", 9, T);
    correlator.add_launch(LaunchRecord { launch_ns: Some(ns(601_020.0)), ..launch_record(&tree, 9, 1, 0) });
    correlator.add_activity(kernel_activity(1, "matmul_backward_bias_kernel9", ns(601_030.0), ns(601_056.369)));
    tree.push("attention_backward", 9, ns(601_340.763));
    correlator.add_launch(LaunchRecord { launch_ns: Some(ns(launch)), ..launch_record(&tree, 9, 2, 1) });
    correlator.add_activity(kernel_activity(
        2,
        "_Z46softmax_autoregressive_backward_inplace_kernelP13__nv_bfloat16PKS_iiif",
        ns(603_556.369),
        ns(603_568.869),
    ));
    tree.pop(9, ns(601_479.327)).expect("balanced");
    tree.pop(9, ns(604_000.0)).expect("balanced");
    // per_kernel: one counter range per kernel, named by its correlation id.
    let ranges = [(1, 26_369.0), (2, 12_500.0)].map(|(id, time)| CounterRange {
        cycle: 0,
        index: id - 1,
        name: id.to_string(),
        values: vec![time],
    });
    correlator.add_counter_ranges(0, ranges.to_vec());
    let metrics = MetricSet { metrics: vec![metrics::spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond")] };
    Report::analyze(CaptureInfo::new(ProfilingMode::PerKernel), &metrics, &tree, correlator)
}

fn trace_text(report: &Report) -> String {
    let mut out = Vec::new();
    report.write_chrome_trace_to(&mut out).expect("export");
    String::from_utf8(out).expect("utf8")
}

#[test]
fn per_kernel_traces_carry_launch_ts_and_pass_the_exact_rule() {
    let report = per_kernel_report(601_470.512);
    let k = &report.kernels[1];
    assert_eq!(k.range_path, "step/attention_backward");
    assert_eq!(k.launch_ns, Some(1_750_000_000_000_000 + 601_470_512));
    let trace = report.to_chrome_trace();
    let softmax = trace.trace_events.iter().find(|e| e.name == SOFTMAX).expect("softmax kernel");
    let EventArgs::Kernel(args) = &softmax.args else { panic!("kernel args") };
    assert_eq!(args.launch_ts, Some(601_470.512));
    assert_eq!(softmax.ts, Some(603_556.369));
    let text = trace_text(&report);
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);

    // Without launch_ts the same file breaks the heuristic, as the H100 run's did.
    let mut root: Value = serde_json::from_str(&text).expect("parse");
    for e in root["traceEvents"].as_array_mut().expect("events") {
        if let Some(args) = e["args"].as_object_mut() {
            args.remove("launch_ts");
        }
    }
    let check = check_trace_json(&root.to_string(), &CheckOptions::default());
    assert_eq!(check.violations.iter().map(|v| v.rule).collect::<Vec<_>>(), [Rule::KernelOutsideRange]);
    assert!(check.violations[0].message.contains("2077.04"), "{}", check.violations[0]);
}

#[test]
fn a_kernel_joined_to_the_wrong_range_fails_the_written_trace() {
    // The launch record says attention_backward, but its timestamp lies after the pop: what a
    // wrong attribution would look like in the file.
    let report = per_kernel_report(601_500.0);
    let check = check_trace_json(&trace_text(&report), &CheckOptions::default());
    assert_eq!(check.violations.iter().map(|v| v.rule).collect::<Vec<_>>(), [Rule::KernelOutsideRange]);
    assert!(check.violations[0].message.contains("after its range ended"), "{}", check.violations[0]);
}

#[test]
fn synthetic_positions_carry_no_launch_ts() {
    // Kernel replay places kernels from their range's push, before their launch call: no
    // launch_ts is written there, and the trace passes.
    let mut report = per_kernel_report(601_470.512);
    report.meta.time_source = gmprof::correlate::TimeSource::GpuTimeDuration;
    report.meta.mode = ProfilingMode::KernelReplay;
    let trace = report.to_chrome_trace();
    assert!(trace.trace_events.iter().all(|e| !matches!(&e.args, EventArgs::Kernel(k) if k.launch_ts.is_some())));
    let check = check_trace_json(&trace_text(&report), &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);
}
