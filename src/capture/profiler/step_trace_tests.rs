//! The whole-run step timeline of a streamed run (issue 42, item 5) through the capture path:
//! a GPU-less [`LaunchHarness`] session of hundreds of steps with a flight recorder and one
//! slow step, streamed by its own drains, written with [`Report::write_all`]. Its `trace.json`
//! holds one slice per step at the steps table's times, one per range group of each step at
//! `step_ranges/`'s GPU time, the flight window over its steps pointing at its own trace, and
//! passes `gmprof check-trace`; past a cap steps are bucketed with their extremes kept.

use std::ffi::CStr;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::harness::LaunchHarness;
use super::state::StreamConfig;
use crate::analysis::online::{FlightSettings, OnlineSettings, TriggerRule};
use crate::checked::activity::ActivityRecord;
use crate::report::stream::StreamSettings;
use crate::report::tables::parquet::part_reader::read_parts;
use crate::report::tables::parquet::parts::SegmentPolicy;
use crate::report::timeline::step_trace::{WINDOWS_JSON, WINDOWS_TID};
use crate::report::timeline::trace_check::{check_trace_json, CheckOptions};
use crate::report::Report;

const KERNELS: [(&CStr, &str); 2] = [(c"gemm", "gemm"), (c"softmax", "softmax")];
const MS: u64 = 1_000_000;
const STEPS: u64 = 600;
const SLOW: u64 = 300;

/// `STEPS` steps of 10 ms (200 ms more at [`SLOW`]), each `step` > `layer 0` (2 kernels) and
/// `step` > `optimizer` (1 kernel); records one step late, a drain every 50 steps.
fn run(dir: &Path, flight: Option<FlightSettings>) -> Report {
    let mut h = LaunchHarness::trace().unwrap();
    let config = StreamConfig {
        dir: dir.to_owned(),
        row_limit: 100,
        settings: StreamSettings {
            segment: SegmentPolicy { rows: 500, every: Duration::from_secs(3600), row_group: 128 },
            online: OnlineSettings::default(),
            flight,
            release_memory: true,
            release_every: crate::report::stream::DEFAULT_RELEASE_EVERY,
            live: None,
            window_trace: Default::default(),
            pm_kernel_rows: Default::default(),
        },
    };
    h.profiler().stream_into(config).unwrap();
    let mut late: Vec<ActivityRecord> = Vec::new();
    let (mut gpu_ns, mut wall_ns) = (5 * MS, 5 * MS);
    for step in 0..STEPS {
        let slow = step == SLOW;
        h.set_clock(wall_ns);
        h.push_range("step").unwrap();
        let mut records = Vec::new();
        for (range, kernels) in [("layer 0", 2u64), ("optimizer", 1)] {
            h.push_range(range).unwrap();
            for k in 0..kernels {
                let (symbol, name) = KERNELS[(k % 2) as usize];
                let id = h.launch_kernel(false, symbol);
                let duration = MS + (step + k) % 3 * 100_000 + if slow && k == 0 { 200 * MS } else { 0 };
                records.push(h.kernel_record(id, name, gpu_ns, gpu_ns + duration));
                gpu_ns += duration + 1_000;
            }
            h.pop_range().unwrap();
        }
        wall_ns += 10 * MS + if slow { 200 * MS } else { 0 } + step % 5 * 10_000;
        h.set_clock(wall_ns - 10);
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if step % 50 == 49 {
            h.stream_step();
        }
    }
    h.deliver(late);
    h.report()
}

/// `steps/` rows: (step, start, end, wall).
fn steps_table(dir: &Path) -> Vec<(u64, u64, u64, u64)> {
    let mut rows = Vec::new();
    let u = |v: Option<i64>| v.unwrap() as u64;
    read_parts(dir, "steps", &["step", "start_ns", "end_ns", "wall_time_ns"], |b| {
        for r in 0..b.len() {
            rows.push((u(b.int(0, r)?), u(b.int(1, r)?), u(b.int(2, r)?), u(b.int(3, r)?)));
        }
        Ok(())
    })
    .unwrap();
    rows
}

/// `step_ranges/` rows: (step, group, GPU time).
fn step_ranges(dir: &Path) -> Vec<(u64, String, u64)> {
    let mut rows = Vec::new();
    read_parts(dir, "step_ranges", &["step", "path", "gpu_time_ns"], |b| {
        for r in 0..b.len() {
            let path = b.text(1, r)?.unwrap().to_owned();
            rows.push((b.int(0, r)?.unwrap() as u64, path, b.int(2, r)?.unwrap() as u64));
        }
        Ok(())
    })
    .unwrap();
    rows
}

fn events<'a>(trace: &'a Value, cat: &str, ph: &str) -> Vec<&'a Value> {
    trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == cat && e["ph"] == ph).collect()
}

/// µs on the trace's clock back to ns on CUPTI's.
fn ns(us: &Value, origin: u64) -> u64 {
    origin + (us.as_f64().unwrap() * 1000.0).round() as u64
}

fn checked(text: &str) {
    let check = check_trace_json(text, &CheckOptions::default());
    assert!(check.is_ok(), "{check:?}");
}

#[test]
fn a_streamed_runs_trace_is_its_steps_groups_and_flight_windows() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(dir.path(), Some(FlightSettings::slow_step(TriggerRule::TimesMedian(3.0))));
    report.write_all(dir.path()).unwrap();
    let text = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
    checked(&text);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let origin = trace["otherData"]["origin_cupti_ns"].as_u64().unwrap();
    assert_eq!(trace["otherData"]["steps_per_slice"], 1);
    assert!(trace["otherData"]["warning"].is_null(), "{}", trace["otherData"]);

    // One slice per step, at the steps table's start and end.
    let table = steps_table(dir.path());
    assert_eq!(table.len() as u64, STEPS);
    let slices = events(&trace, "step", "X");
    assert_eq!(slices.len(), table.len());
    for (slice, (step, start, end, wall)) in slices.iter().zip(&table) {
        assert_eq!(slice["name"], format!("step {step}"));
        assert_eq!(slice["args"]["step"], *step);
        assert_eq!(ns(&slice["ts"], origin), *start, "{slice}");
        assert_eq!(ns(&slice["ts"], origin) + ns(&slice["dur"], 0), *end, "{slice}");
        assert_eq!(slice["args"]["wall_time_ns"], *wall);
        assert_eq!(slice["args"]["kernels"], 3);
    }
    assert_eq!(events(&trace, "step", "C").len(), table.len(), "one step-time sample per step");

    // One slice per step and group, lasting the group's GPU time in the step.
    let groups = step_ranges(dir.path());
    let group_slices = events(&trace, "step_group", "X");
    assert_eq!(group_slices.len(), groups.len());
    assert!(groups.len() as u64 >= 2 * STEPS, "{} group rows", groups.len());
    let mut by_step: Vec<(u64, String, u64)> = group_slices
        .iter()
        .map(|e| (e["args"]["step"].as_u64().unwrap(), e["name"].as_str().unwrap().to_owned(), ns(&e["dur"], 0)))
        .collect();
    by_step.sort();
    let mut expected = groups.clone();
    expected.sort();
    assert_eq!(by_step, expected);
    for e in &group_slices {
        let step = e["args"]["step"].as_u64().unwrap();
        let (_, start, _, _) = table.iter().find(|t| t.0 == step).unwrap();
        assert_eq!(ns(&e["ts"], origin), *start);
    }

    // The flight window: over its steps, pointing at its own trace; windows.json lists it.
    let flight = report.streamed.as_ref().unwrap().flight.as_ref().unwrap();
    assert_eq!(flight.windows.len(), 1);
    let w = &flight.windows[0];
    assert_eq!((w.first_step, w.last_step), (Some(SLOW - 4), Some(SLOW + 2)));
    let windows = events(&trace, "flight_window", "X");
    assert_eq!(windows.len(), 1);
    let slice = windows[0];
    assert_eq!((slice["name"].as_str(), slice["tid"].as_u64()), (Some("window-0"), Some(WINDOWS_TID)));
    assert_eq!(slice["args"]["trace"], "window-0/trace.json");
    let first = table.iter().find(|t| t.0 == SLOW - 4).unwrap();
    let last = table.iter().find(|t| t.0 == SLOW + 2).unwrap();
    assert_eq!(ns(&slice["ts"], origin), first.1);
    assert_eq!(ns(&slice["ts"], origin) + ns(&slice["dur"], 0), last.2);
    let index: Value = serde_json::from_slice(&std::fs::read(dir.path().join(WINDOWS_JSON)).unwrap()).unwrap();
    assert_eq!(index["windows"].as_array().unwrap().len(), 1);
    let entry = &index["windows"][0];
    assert_eq!((entry["dir"].as_str(), entry["trace_written"].as_bool()), (Some("window-0"), Some(true)));
    assert_eq!((entry["first_step"].as_u64(), entry["last_step"].as_u64()), (Some(SLOW - 4), Some(SLOW + 2)));
    assert_eq!(entry["why"], serde_json::json!(w.triggers));
    assert!(dir.path().join(entry["trace"].as_str().unwrap()).is_file());
    assert_eq!(trace["otherData"]["windows_index"], WINDOWS_JSON);

    // The bytes per event that the module docs' bound states.
    let bytes = |e: &Vec<&Value>| e.iter().map(|v| v.to_string().len()).sum::<usize>() / e.len().max(1);
    eprintln!(
        "bytes per step slice {}, counter sample {}, group slice {}",
        bytes(&slices),
        bytes(&events(&trace, "step", "C")),
        bytes(&group_slices)
    );
}

#[test]
fn past_the_cap_steps_are_bucketed_with_their_extremes_kept() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(dir.path(), None);
    let written = report.write_step_trace_with(dir.path(), 64).unwrap();
    assert_eq!((written.steps, written.steps_per_slice), (STEPS, STEPS.div_ceil(64)));
    assert!(!dir.path().join(WINDOWS_JSON).exists(), "no flight recorder, no index");
    let text = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
    checked(&text);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let slices = events(&trace, "step", "X");
    assert!(slices.len() <= 64, "{} slices", slices.len());
    assert_eq!(slices.len() as u64, STEPS.div_ceil(STEPS.div_ceil(64)));
    assert_eq!(slices.len() as u64, written.step_slices);
    let table = steps_table(dir.path());
    let walls: Vec<u64> = table.iter().map(|t| t.3).collect();
    let field =
        |k: &str| -> Vec<u64> { slices.iter().map(|s| s["args"]["wall_time_ns"][k].as_u64().unwrap()).collect() };
    assert_eq!(field("max").into_iter().max(), walls.iter().copied().max());
    assert_eq!(field("min").into_iter().min(), walls.iter().copied().min());
    assert_eq!(slices.iter().map(|s| s["args"]["steps"].as_u64().unwrap()).sum::<u64>(), STEPS);
    // The slow step's bucket: its maximum is the slow step, its mean far below it.
    let slow = slices
        .iter()
        .find(|s| {
            (s["args"]["first_step"].as_u64().unwrap()..=s["args"]["last_step"].as_u64().unwrap()).contains(&SLOW)
        })
        .unwrap();
    let slow_wall = table.iter().find(|t| t.0 == SLOW).unwrap().3;
    assert_eq!(slow["args"]["wall_time_ns"]["max"], slow_wall);
    assert!(slow["args"]["wall_time_ns"]["mean"].as_f64().unwrap() < slow_wall as f64 / 2.0);
    // The buckets tile the steps table: the first step's start to the last one's end.
    let origin = trace["otherData"]["origin_cupti_ns"].as_u64().unwrap();
    assert_eq!(ns(&slices[0]["ts"], origin), table[0].1);
    let end = slices.last().map(|s| ns(&s["ts"], origin) + ns(&s["dur"], 0));
    assert_eq!(end, table.last().map(|t| t.2));
    // Group slices: at most one per bucket and group, their GPU time the sum of their steps'.
    let groups = events(&trace, "step_group", "X");
    assert!(groups.len() <= slices.len() * 2, "{} group slices", groups.len());
    let bytes = |e: &Vec<&Value>| e.iter().map(|v| v.to_string().len()).sum::<usize>() / e.len().max(1);
    eprintln!("bytes per bucket slice {}, bucket group slice {}", bytes(&slices), bytes(&groups));
    let total: u64 = groups.iter().map(|g| g["args"]["gpu_time_ns"].as_u64().unwrap()).sum();
    assert_eq!(total, step_ranges(dir.path()).iter().map(|r| r.2).sum::<u64>());
}
