//! The whole-run step timeline of a streamed run (`trace.json` and `windows.json` read from
//! the `steps/` and `step_ranges/` parts): a handful of steps written as part files, with the
//! cases a long run meets (a step overlapping the one before it, a group longer than its step,
//! a step without times, a flight window). The golden file `tests/golden/step_trace.json`
//! pins the format (both files); rewrite it with `GMPROF_BLESS=1 cargo test --test step_trace`.

use std::path::Path;
use std::time::Duration;

use gmprof::analysis::online::{FlightSummary, StepGroup, StepRow, WindowEntry};
use gmprof::correlate::Correlator;
use gmprof::model::{MetricSet, ProfilingMode};
use gmprof::report::parquet::parts::{PartWriter, SegmentPolicy};
use gmprof::report::parquet::streamed::{push_step, push_step_range, step_columns, step_range_columns};
use gmprof::report::stream::StreamedSummary;
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;
use gmprof::trace_check::{check_trace_json, CheckOptions};
use serde_json::{json, Value};

#[path = "common/golden.rs"]
mod golden;

fn step(n: u64, times: Option<(u64, u64)>, window: Option<u64>, groups: &[(&str, u64)]) -> StepRow {
    StepRow {
        step: n,
        path: "step".into(),
        start_ns: times.map(|t| t.0),
        end_ns: times.map(|t| t.1),
        wall_time_ns: times.map(|t| t.1 - t.0),
        gpu_time_ns: Some(groups.iter().map(|g| g.1).sum()),
        kernels: groups.len() as u64,
        transfers: 0,
        window: 0,
        flight_window: window,
        groups: groups.iter().map(|g| StepGroup { path: g.0.into(), count: 1, gpu_time_ns: Some(g.1) }).collect(),
    }
}

fn write_parts(dir: &Path, steps: &[StepRow]) {
    let policy = SegmentPolicy { rows: 2, every: Duration::from_secs(3600), row_group: 2 };
    let mut s = PartWriter::create(&dir.join("steps"), "steps", step_columns(), Vec::new(), policy).unwrap();
    let mut g =
        PartWriter::create(&dir.join("step_ranges"), "step_ranges", step_range_columns(), Vec::new(), policy).unwrap();
    for row in steps {
        s.row(|w| push_step(w, row)).unwrap();
        for group in &row.groups {
            g.row(|w| push_step_range(w, row.step, group)).unwrap();
        }
    }
    s.finish().unwrap();
    g.finish().unwrap();
}

fn report(flight: bool) -> Report {
    let mut report = Report::analyze(
        CaptureInfo::new(ProfilingMode::Trace),
        &MetricSet::default(),
        &SessionTree::new(),
        Correlator::new(),
    );
    report.meta.gmprof_version = "GOLDEN".into();
    let window = WindowEntry {
        window: 0,
        dir: "window-0".into(),
        trigger_step: Some(4),
        first_step: Some(3),
        last_step: Some(4),
        triggers: vec!["slow step: step 4".into()],
        kernels: 1,
        ..WindowEntry::default()
    };
    report.streamed = Some(StreamedSummary {
        steps: 5,
        step_group: Some("step".into()),
        flight: flight.then(|| FlightSummary { windows: vec![window], ..FlightSummary::default() }),
        ..StreamedSummary::default()
    });
    report
}

const US: u64 = 1_000;

fn steps() -> Vec<StepRow> {
    vec![
        step(0, Some((1_000 * US, 2_000 * US)), None, &[("step/fwd", 600 * US), ("step/bwd", 300 * US)]),
        // A group longer than its step (two streams): cut at the step's end.
        step(1, Some((2_000 * US, 3_000 * US)), None, &[("step/fwd", 1_500 * US)]),
        // Starts before step 1 ended (another thread): the overlap lane.
        step(2, Some((2_500 * US, 4_000 * US)), None, &[("step/fwd", 100 * US)]),
        step(3, None, Some(0), &[("step/fwd", 100 * US)]),
        step(4, Some((5_000 * US, 6_000 * US)), Some(0), &[("step/fwd", 200 * US), ("step/opt", 50 * US)]),
    ]
}

#[test]
fn step_trace_matches_golden_and_passes_the_checker() {
    let dir = tempfile::tempdir().unwrap();
    write_parts(dir.path(), &steps());
    std::fs::create_dir(dir.path().join("window-0")).unwrap();
    std::fs::write(dir.path().join("window-0/trace.json"), "{\"traceEvents\":[]}").unwrap();
    let written = report(true).write_step_trace(dir.path()).unwrap();
    assert_eq!((written.steps, written.step_slices, written.group_slices, written.windows), (5, 4, 6, 1));

    let text = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{check:?}");
    let trace: Value = serde_json::from_str(&text).unwrap();
    let index: Value = serde_json::from_slice(&std::fs::read(dir.path().join("windows.json")).unwrap()).unwrap();
    let both = json!({"trace.json": trace, "windows.json": index});
    golden::check_golden("step_trace.json", &(serde_json::to_string_pretty(&both).unwrap() + "\n"));

    // `gmprof check-trace` accepts it, and names a group slice moved out of its step.
    let cli = |path: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gmprof")).arg("check-trace").arg(path).output().unwrap()
    };
    let out = cli(&dir.path().join("trace.json"));
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("OK"), "{out:?}");
    let mut planted = trace.clone();
    for e in planted["traceEvents"].as_array_mut().unwrap() {
        if e["cat"] == "step_group" && e["args"]["step"] == 4 {
            e["ts"] = json!(100.0);
        }
    }
    let bad = dir.path().join("planted.json");
    std::fs::write(&bad, planted.to_string()).unwrap();
    let out = cli(&bad);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("step_timeline").count(), 2, "{out:?}");

    let events = trace["traceEvents"].as_array().unwrap();
    let named = |name: &str| events.iter().find(|e| e["name"] == name && e["ph"] == "X").unwrap();
    assert_eq!(named("step 2")["tid"], 1 + (1 << 20), "the overlap lane");
    let cut: Vec<&Value> = events.iter().filter(|e| e["args"]["cut"].is_string()).collect();
    assert_eq!(cut.len(), 1);
    assert_eq!((cut[0]["dur"].as_f64(), cut[0]["args"]["gpu_time_ns"].as_u64()), (Some(1_000.0), Some(1_500 * US)));
    assert_eq!(trace["otherData"]["steps_without_times"], 1);
    // The window spans the steps that have times (step 3 has none).
    let w = named("window-0");
    assert_eq!((w["ts"].as_f64(), w["dur"].as_f64()), (Some(4_000.0), Some(1_000.0)));
    assert_eq!(w["args"]["trace"], "window-0/trace.json");
}

#[test]
fn without_a_flight_recorder_there_is_no_index_and_without_parts_no_steps() {
    let dir = tempfile::tempdir().unwrap();
    let written = report(false).write_step_trace(dir.path()).unwrap();
    assert_eq!((written.steps, written.step_slices), (0, 0));
    assert!(!dir.path().join("windows.json").exists());
    let text = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
    assert!(check_trace_json(&text, &CheckOptions::default()).is_ok());
    let trace: Value = serde_json::from_str(&text).unwrap();
    assert!(trace["otherData"]["warning"].as_str().unwrap().contains("streamed 5 step rows"), "{trace}");

    write_parts(dir.path(), &steps());
    // A cap of 2 slices: steps 0..2 and 3..4, each step's extremes kept.
    let written = report(false).write_step_trace_with(dir.path(), 2).unwrap();
    assert_eq!((written.steps_per_slice, written.step_slices), (3, 2));
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("trace.json")).unwrap()).unwrap();
    let first = trace["traceEvents"].as_array().unwrap().iter().find(|e| e["name"] == "steps 0..2").unwrap();
    assert_eq!(
        first["args"]["wall_time_ns"],
        json!({"mean": 1_166_666.666_666_666_7, "min": 1_000_000, "max": 1_500_000})
    );
    assert_eq!((first["ts"].as_f64(), first["dur"].as_f64()), (Some(0.0), Some(3_000.0)));
}
