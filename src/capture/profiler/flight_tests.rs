//! The flight recorder through the capture path (issue 42): a GPU-less [`LaunchHarness`]
//! session of thousands of steps, streamed by its own drains, with a slow step (200 ms of
//! extra GPU work) or none. The slow step's window holds it with its kernel rows, the steps
//! table marks the window's steps, a steady run makes no window, the rate limit holds, and a
//! run ending by a signal writes the ring.

use std::ffi::CStr;
use std::path::Path;
use std::time::Duration;

use super::harness::{Faults, LaunchHarness};
use super::state::StreamConfig;
use crate::analysis::online::{FlightSettings, OnlineSettings, TriggerRule};
use crate::checked::activity::ActivityRecord;
use crate::model::RunEnd;
use crate::report::stream::{StreamSettings, WHY_JSON, WINDOW_FILES};
use crate::report::tables::parquet::parts::{part_files, SegmentPolicy};
use crate::report::tables::parquet::read;
use crate::report::{Report, TraceOptions};

const KERNELS: [(&CStr, &str); 3] = [(c"gemm", "gemm"), (c"softmax", "softmax"), (c"layernorm", "layernorm")];
const PER_STEP: u64 = 4;
const MS: u64 = 1_000_000;
/// A steady step: 10 ms of wall time, 4 kernels of 1 to 1.3 ms.
const STEP_WALL: u64 = 10 * MS;

fn config(dir: &Path, flight: FlightSettings) -> StreamConfig {
    config_traced(dir, flight, TraceOptions::default())
}

fn config_traced(dir: &Path, flight: FlightSettings, window_trace: TraceOptions) -> StreamConfig {
    StreamConfig {
        dir: dir.to_owned(),
        row_limit: 200_000,
        settings: StreamSettings {
            segment: SegmentPolicy { rows: 5_000, every: Duration::from_secs(3600), row_group: 1_024 },
            online: OnlineSettings::default(),
            flight: Some(flight),
            release_memory: true,
            release_every: crate::report::stream::DEFAULT_RELEASE_EVERY,
            live: None,
            window_trace,
            pm_kernel_rows: Default::default(),
        },
    }
}

/// `steps` steps of `step` around a `layer` range of [`PER_STEP`] kernels; each step in
/// `slow` also runs `slow_kernel`, 200 ms, and takes 200 ms longer. Records arrive one step
/// late; the session streams every 50 steps. Returns the harness, not finished.
fn run(steps: u64, slow: &[u64], flight: FlightSettings, dir: &Path) -> LaunchHarness {
    run_traced(steps, slow, flight, dir, TraceOptions::default())
}

/// [`run`], the windows' `trace.json` in the form `trace` asks for.
fn run_traced(steps: u64, slow: &[u64], flight: FlightSettings, dir: &Path, trace: TraceOptions) -> LaunchHarness {
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config_traced(dir, flight, trace)).unwrap();
    let mut late: Vec<ActivityRecord> = Vec::new();
    let mut gpu_ns = 1_000_000;
    let mut wall_ns = 1_000_000;
    for step in 0..steps {
        let is_slow = slow.contains(&step);
        h.set_clock(wall_ns);
        h.push_range("step").unwrap();
        h.push_range("layer 0").unwrap();
        let mut records = Vec::new();
        for k in 0..PER_STEP {
            let (symbol, name) = KERNELS[(k % 3) as usize];
            let id = h.launch_kernel(k % 2 == 0, symbol) + u32::from(k % 2 == 0);
            let duration = MS + (step + k) % 4 * 100_000;
            records.push(h.kernel_record(id, name, gpu_ns, gpu_ns + duration));
            gpu_ns += duration + 1_000;
        }
        if is_slow {
            let id = h.launch_kernel(false, c"slow_kernel");
            records.push(h.kernel_record(id, "slow_kernel", gpu_ns, gpu_ns + 200 * MS));
            gpu_ns += 200 * MS + 1_000;
        }
        h.pop_range().unwrap();
        wall_ns += STEP_WALL + if is_slow { 200 * MS } else { 0 };
        h.set_clock(wall_ns - 10);
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if step % 50 == 49 {
            h.stream_step();
        }
    }
    h.deliver(late);
    h
}

fn ints(dir: &Path, table: &str, columns: [&str; 2]) -> Vec<(Option<i64>, Option<i64>)> {
    let mut out = Vec::new();
    for part in part_files(&dir.join(table)).unwrap() {
        for batch in read::batches(&part, &columns).unwrap() {
            let b = batch.unwrap();
            out.extend((0..b.len()).map(|r| (b.int(0, r).unwrap(), b.int(1, r).unwrap())));
        }
    }
    out
}

fn window_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("window-"))
        .collect();
    names.sort();
    names
}

fn slow_3x() -> FlightSettings {
    FlightSettings::slow_step(TriggerRule::TimesMedian(3.0))
}

#[test]
fn one_slow_step_in_6000_makes_one_window_that_holds_it_with_its_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let h = run(6_000, &[3_000], slow_3x(), dir.path());
    // Written by a drain while the run goes on (out of the session's lock), not at the finish.
    assert!(dir.path().join("window-0").join("kernels.parquet").is_file());
    let report = h.report();
    let streamed = report.streamed.as_ref().expect("a flight recorder streams");
    assert!(streamed.why.contains("flight recorder"), "{}", streamed.why);
    assert_eq!(streamed.steps, 6_000);
    let flight = streamed.flight.as_ref().expect("the summary lists the flight recorder");
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let w = &flight.windows[0];
    assert_eq!((w.window, w.dir.as_str()), (0, "window-0"));
    // The ring (the trigger step and 4 before it) and the 2 steps after it.
    assert_eq!((w.trigger_step, w.first_step, w.last_step), (Some(3_000), Some(2_996), Some(3_002)));
    assert_eq!(w.kernels, 7 * PER_STEP + 1);
    let why = "slow step: step 3000 took 204.600 ms of GPU time (wall time 210.000 ms), more than 3x the running \
               median of 4.600 ms over 101 steps";
    assert_eq!(w.triggers, [why]);
    assert!(w.ended_early.is_none() && w.steps_without_detail.is_empty());
    assert_eq!((flight.suppressed, flight.dropped_rows), (0, 0));
    assert_eq!(window_dirs(dir.path()), ["window-0"]);

    // The window's outputs: the usual tables of its steps, with the slow step's kernels.
    let win = dir.path().join("window-0");
    for file in WINDOW_FILES.iter().chain([&WHY_JSON]) {
        assert!(win.join(file).is_file(), "{file} is missing");
    }
    let kernels = std::fs::read_to_string(win.join("kernels.csv")).unwrap();
    assert_eq!(kernels.lines().filter(|l| l.contains("slow_kernel")).count(), 1);
    let data_rows = kernels.lines().filter(|l| !l.starts_with('#')).count() - 1;
    assert_eq!(data_rows as u64, 7 * PER_STEP + 1, "{kernels}");
    let ranges = std::fs::read_to_string(win.join("ranges.csv")).unwrap();
    assert_eq!(ranges.lines().filter(|l| l.contains(r#","step","step",0,"#)).count(), 7, "{ranges}");
    assert_eq!(read::row_count(&win.join(WINDOW_FILES[4])).unwrap(), 7 * PER_STEP + 1);
    let why: serde_json::Value = serde_json::from_slice(&std::fs::read(win.join(WHY_JSON)).unwrap()).unwrap();
    assert_eq!(why["trigger_step"], 3_000);
    assert_eq!(why["steps"].as_array().unwrap().len(), 7);
    assert_eq!(why["steps"][4]["gpu_time_ns"].as_u64().unwrap() / MS, 204, "{why}");
    let trace = std::fs::read_to_string(win.join("trace.json")).unwrap();
    assert!(trace.contains("slow_kernel"));
    let window_report = Report::from_json(&std::fs::read_to_string(win.join("report.json")).unwrap()).unwrap();
    assert_eq!(window_report.kernels.len() as u64, 7 * PER_STEP + 1);
    assert_eq!(window_report.meta.kernel_count, 7 * PER_STEP + 1);
    assert!(window_report.meta.warnings.iter().any(|w| w.contains("only steps 2996 to 3002")));

    // The steps table marks the window's steps, and only them.
    let marks = ints(dir.path(), "steps", ["step", "flight_window"]);
    assert_eq!(marks.len(), 6_000);
    assert!(marks.iter().enumerate().all(|(i, (s, _))| *s == Some(i as i64)), "steps in order");
    let marked: Vec<i64> = marks.iter().filter(|(_, w)| w.is_some()).map(|(s, _)| s.unwrap()).collect();
    assert_eq!(marked, (2_996..=3_002).collect::<Vec<_>>());
    assert!(marks.iter().all(|(_, w)| w.is_none() || *w == Some(0)));
    let in_report: Vec<u64> =
        streamed.steps_table.iter().filter(|s| s.flight_window == Some(0)).map(|s| s.step).collect();
    assert_eq!(in_report, (2_996..=3_002).collect::<Vec<_>>());

    // report.json and the text list it.
    report.write_all(dir.path()).unwrap();
    let back: Report = serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(back.streamed.as_ref().and_then(|s| s.flight.as_ref()), Some(flight));
    let text = crate::report::text::streamed::streamed_text(streamed);
    assert!(text.contains("flight recorder: 1 window(s)") && text.contains("window-0/"), "{text}");
}

#[test]
fn a_steady_run_makes_no_window() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(6_000, &[], slow_3x(), dir.path()).report();
    let streamed = report.streamed.expect("streamed");
    let flight = streamed.flight.clone().expect("a flight recorder");
    assert!(flight.windows.is_empty() && flight.suppressed == 0, "{flight:#?}");
    assert!(window_dirs(dir.path()).is_empty());
    assert_eq!(streamed.steps, 6_000);
    assert!(ints(dir.path(), "steps", ["step", "flight_window"]).iter().all(|(_, w)| w.is_none()));
    let text = crate::report::text::streamed::streamed_text(&streamed);
    assert!(text.contains("flight recorder: no window"), "{text}");
}

#[test]
fn windows_are_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    let settings = FlightSettings { max_windows: 2, ..slow_3x() };
    // 1 050 is 50 steps after 1 000 (at least 100 apart); 1 600 is past the 2 windows.
    let report = run(1_800, &[1_000, 1_050, 1_200, 1_600], settings, dir.path()).report();
    let flight = report.streamed.unwrap().flight.unwrap();
    let triggers: Vec<Option<u64>> = flight.windows.iter().map(|w| w.trigger_step).collect();
    assert_eq!(triggers, [Some(1_000), Some(1_200)]);
    assert_eq!(flight.suppressed, 2);
    assert!(flight.suppressed_first[0].contains("50 steps after the last window's trigger"), "{flight:?}");
    assert!(flight.suppressed_first[1].contains("its 2 windows already"), "{flight:?}");
    assert_eq!(window_dirs(dir.path()), ["window-0", "window-1"]);
}

#[test]
fn an_absolute_rule_judges_from_the_first_steps_and_a_slow_step_in_an_open_window_joins_it() {
    let dir = tempfile::tempdir().unwrap();
    let settings = FlightSettings::slow_step("100ms".parse().unwrap());
    let report = run(300, &[3, 4], settings, dir.path()).report();
    let flight = report.streamed.unwrap().flight.unwrap();
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let w = &flight.windows[0];
    assert_eq!((w.trigger_step, w.first_step, w.last_step), (Some(3), Some(0), Some(5)));
    assert!(w.triggers[0].contains("above 100.000 ms"), "{w:?}");
    assert!(w.triggers[1].starts_with("while open: slow step: step 4"), "{w:?}");
}

#[test]
fn a_run_ended_by_a_signal_writes_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    let h = run(500, &[], slow_3x(), dir.path());
    let report = h.finish(RunEnd::Signal { signal: 15, name: "SIGTERM".into() }, Faults::default()).unwrap();
    let flight = report.streamed.unwrap().flight.unwrap();
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let w = &flight.windows[0];
    assert_eq!((w.trigger_step, w.first_step, w.last_step), (None, Some(495), Some(499)));
    assert!(w.triggers[0].contains("ended abnormally") && w.triggers[0].contains("SIGTERM"), "{w:?}");
    assert_eq!(w.kernels, 5 * PER_STEP);
    assert!(dir.path().join("window-0").join("kernels.csv").is_file());
}

#[test]
fn a_window_asked_for_opens_at_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let h = run(200, &[], slow_3x(), dir.path());
    assert!(h.profiler().request_flight_window("SIGUSR1"));
    let report = h.report();
    let flight = report.streamed.unwrap().flight.unwrap();
    // Asked after the last step: the window opens at the run's end, on the ring.
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    assert!(flight.windows[0].triggers[0].contains("asked for (SIGUSR1)"), "{flight:?}");
}

#[test]
fn a_wall_time_rule_judges_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let settings = FlightSettings::slow_step_rule("wall:3x".parse().unwrap());
    let report = run(600, &[300], settings, dir.path()).report();
    let flight = report.streamed.unwrap().flight.unwrap();
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let w = &flight.windows[0];
    assert_eq!(w.trigger_step, Some(300));
    assert!(
        w.triggers[0].starts_with("slow step: step 300 took 210.000 ms of wall time (GPU time 204.600 ms)"),
        "{w:?}"
    );
}

#[test]
fn a_range_group_that_jumps_opens_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let settings = FlightSettings { group_jump: Some(TriggerRule::TimesMedian(3.0)), ..FlightSettings::default() };
    let report = run(600, &[300], settings, dir.path()).report();
    let flight = report.streamed.unwrap().flight.unwrap();
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let w = &flight.windows[0];
    assert_eq!(w.trigger_step, Some(300));
    assert!(w.triggers[0].starts_with("range group jump: `step/layer #` took 204.600 ms"), "{w:?}");
}

#[test]
fn a_drain_larger_than_the_bound_loses_no_row_of_its_window() {
    let dir = tempfile::tempdir().unwrap();
    // A drain brings 50 steps of rows (6 each, 300) before any of them completes: more than
    // the bound of 250, but the drain holds them anyway, and once their steps complete the
    // ring keeps only its last steps. Nothing is dropped, and the window has every row.
    let settings = FlightSettings { max_rows: 250, ..slow_3x() };
    let report = run(600, &[300], settings, dir.path()).report();
    let flight = report.streamed.unwrap().flight.unwrap();
    assert_eq!(flight.dropped_rows, 0, "{flight:#?}");
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let whole = run(600, &[300], slow_3x(), tempfile::tempdir().unwrap().path()).report();
    let want = whole.streamed.unwrap().flight.unwrap().windows[0].kernels;
    assert_eq!(flight.windows[0].kernels, want, "the same window as with the default bound");
}

#[test]
fn the_ring_holds_at_most_its_row_bound() {
    let dir = tempfile::tempdir().unwrap();
    // 20 rows cannot hold the ring's steps (6 rows each): at each drain's end the oldest give
    // up their rows, counted and said, and the run goes on (the window, taken within its
    // drain, is whole).
    let settings = FlightSettings { max_rows: 20, ..slow_3x() };
    let report = run(600, &[300], settings, dir.path()).report();
    let streamed = report.streamed.unwrap();
    let flight = streamed.flight.clone().unwrap();
    assert!(flight.dropped_rows > 0, "{flight:#?}");
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    assert_eq!(streamed.kernels, 600 * PER_STEP + 1, "the streamed tables keep every row");
    let text = crate::report::text::streamed::streamed_text(&streamed);
    assert!(text.contains("row(s) not kept: the recorder was at its row bound"), "{text}");
}

#[test]
fn a_run_inside_one_top_level_range_keeps_its_latest_rows_for_an_abnormal_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config(dir.path(), FlightSettings { max_rows: 100, ..slow_3x() })).unwrap();
    // `step` inside `train`: no top-level range repeats, so there are no steps, and every
    // row waits under `train` until the end.
    h.push_range("train").unwrap();
    let mut gpu_ns = 1_000;
    for step in 0..300u64 {
        h.push_range("step").unwrap();
        let id = h.launch_kernel(false, c"gemm");
        h.deliver(vec![h.kernel_record(id, "gemm", gpu_ns, gpu_ns + 1_000)]);
        gpu_ns += 2_000;
        h.pop_range().unwrap();
        if step % 50 == 49 {
            h.stream_step();
        }
    }
    let report = h.finish(RunEnd::Signal { signal: 15, name: "SIGTERM".into() }, Faults::default()).unwrap();
    let flight = report.streamed.unwrap().flight.unwrap();
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let w = &flight.windows[0];
    assert_eq!((w.trigger_step, w.first_step), (None, None));
    assert!(w.kernels > 0 && w.kernels < 100, "{w:?}");
    assert!(flight.dropped_rows > 0);
    // The window holds the latest rows, the last kernel's among them.
    let json = std::fs::read_to_string(dir.path().join("window-0").join("report.json")).unwrap();
    let window = Report::from_json(&json).unwrap();
    assert_eq!(window.kernels.iter().filter_map(|k| k.start_ns).max(), Some(gpu_ns - 2_000));
}

#[test]
fn a_copy_that_returns_a_cuda_error_asks_for_a_window() {
    use crate::sys::cupti::CUpti_driver_api_trace_cbid_enum as D;
    let dir = tempfile::tempdir().unwrap();
    let mut h = run(200, &[], slow_3x(), dir.path());
    // An illegal address (700) surfaces at the next copy, and every later one fails too.
    let mut copy = [0u8; 64];
    for _ in 0..3 {
        let api = super::harness::TransferApi {
            domain: crate::checked::callback::ApiDomain::Driver,
            cbid: D::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2.0,
            name: c"cuMemcpyHtoDAsync_v2",
            params: copy.as_mut_ptr().cast(),
        };
        h.transfer(api, None, 700);
    }
    let flight = h.report().streamed.unwrap().flight.unwrap();
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let triggers = &flight.windows[0].triggers;
    assert_eq!(triggers.len(), 1, "asked once however often it failed: {triggers:?}");
    assert!(triggers[0].contains("cuMemcpyHtoDAsync_v2 returned CUDA error 700"), "{triggers:?}");
}

#[test]
fn a_window_that_cannot_be_written_is_said_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    // A file where window-0/ would go.
    std::fs::write(dir.path().join("window-0"), "in the way").unwrap();
    let report = run(600, &[300, 450], slow_3x(), dir.path()).report();
    let streamed = report.streamed.unwrap();
    let flight = streamed.flight.clone().unwrap();
    assert_eq!(flight.windows.len(), 2, "{flight:#?}");
    assert_eq!(flight.errors.len(), 1, "{flight:#?}");
    assert!(flight.errors[0].starts_with("window-0 could not be written"), "{flight:?}");
    assert!(dir.path().join("window-1").join("why.json").is_file());
    assert_eq!(streamed.steps, 600);
    let text = crate::report::text::streamed::streamed_text(&streamed);
    assert!(text.contains("window-0 could not be written"), "{text}");
}

/// With `--trace-format kineto` a window's `trace.json` is a Kineto trace of its steps (what
/// HTA reads: its rank, every kernel of the window as a `kernel` event); the whole run's
/// trace stays the step timeline.
#[test]
fn a_window_of_a_kineto_run_is_a_kineto_trace_of_its_steps() {
    use crate::report::kineto::DistributedInfo;
    let dir = tempfile::tempdir().unwrap();
    let distributed = DistributedInfo { rank: 1, world_size: Some(2), local_rank: Some(1), rank_variable: None };
    let h = run_traced(400, &[300], slow_3x(), dir.path(), TraceOptions::kineto(Some(4242), Some(distributed)));
    let report = h.report();
    let flight = report.streamed.as_ref().unwrap().flight.as_ref().unwrap();
    assert_eq!(flight.windows.len(), 1, "{flight:#?}");
    let text = std::fs::read_to_string(dir.path().join("window-0").join("trace.json")).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(trace["distributedInfo"]["rank"], 1);
    assert_eq!(trace["distributedInfo"]["world_size"], 2);
    let events = trace["traceEvents"].as_array().unwrap();
    let kernels: Vec<&str> =
        events.iter().filter(|e| e["cat"] == "kernel").map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(kernels.len() as u64, flight.windows[0].kernels);
    assert_eq!(kernels.iter().filter(|n| **n == "slow_kernel").count(), 1);
    // The harness's GPU clock is synthetic and its launch instants are the host's, so
    // `check-trace`'s launch-order rules do not apply here; a GPU run's window is checked by
    // `gmprof check-trace` in scripts/gpu/ecosystem-validate.sh.
}
