//! Streamed outputs through the capture path (issue 42): a GPU-less [`LaunchHarness`]
//! session whose launches go through CUPTI's callback trampoline, streamed by its own
//! drains. Past the row limit every kernel heard is in the part files, the aggregates equal
//! a recomputation from them, the steps table has a row per step and the session holds only
//! what is in flight; below it the report is the whole-session one.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::path::Path;
use std::time::Duration;

use super::harness::LaunchHarness;
use super::state::StreamConfig;
use super::stream::StreamProgress;
use crate::analysis::online::{AggregateQuantity, AggregateTable, OnlineSettings};
use crate::checked::activity::ActivityRecord;
use crate::report::stream::StreamSettings;
use crate::report::tables::parquet::parts::{part_files, SegmentPolicy};
use crate::report::tables::parquet::read;
use crate::report::Report;

const NAMES: [(&CStr, &str); 3] = [(c"gemm", "gemm"), (c"softmax", "softmax"), (c"layernorm", "layernorm")];
const LAYERS: u64 = 2;
const KERNELS_PER_LAYER: u64 = 5;
const PER_STEP: u64 = LAYERS * KERNELS_PER_LAYER;

fn config(dir: &Path, row_limit: u64) -> StreamConfig {
    StreamConfig {
        dir: dir.to_owned(),
        row_limit,
        settings: StreamSettings {
            segment: SegmentPolicy { rows: 500, every: Duration::from_secs(3600), row_group: 128 },
            online: OnlineSettings { window_steps: 50, ..OnlineSettings::default() },
            flight: None,
            release_memory: true,
            release_every: crate::report::stream::DEFAULT_RELEASE_EVERY,
            live: None,
            window_trace: Default::default(),
            pm_kernel_rows: Default::default(),
        },
    }
}

/// A training run of `steps` steps: `step` around two `layer` ranges of five kernels each;
/// each step's activity records arrive one step late (the GPU runs behind), and every
/// `drain_every` steps the session streams. Returns the most launches and ranges held after a
/// streaming drain, and the report.
fn run(h: &mut LaunchHarness, steps: u64, drain_every: u64) -> ((u64, u64), Report) {
    let mut late: Vec<ActivityRecord> = Vec::new();
    let mut most_held = (0, 0);
    let mut gpu_ns = 1_000_000;
    for step in 0..steps {
        h.push_range("step").unwrap();
        let mut records = Vec::new();
        for layer in 0..LAYERS {
            h.push_range(&format!("layer {layer}")).unwrap();
            for k in 0..KERNELS_PER_LAYER {
                let (symbol, name) = NAMES[(k % 3) as usize];
                // Every other launch through the runtime: its record carries the nested
                // driver call's id, which the session maps to the runtime call's.
                let runtime = k % 2 == 0;
                let id = h.launch_kernel(runtime, symbol) + u32::from(runtime);
                let duration = 100 + (step * PER_STEP + layer * KERNELS_PER_LAYER + k) % 7 * 10;
                records.push(h.kernel_record(id, name, gpu_ns, gpu_ns + duration));
                gpu_ns += 1_000;
            }
            h.pop_range().unwrap();
        }
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if step % drain_every == drain_every - 1 {
            if let StreamProgress::Streaming { launches_held, ranges_held, .. } = h.stream_step() {
                most_held = (most_held.0.max(launches_held), most_held.1.max(ranges_held));
                // The nested ids of calls drained are dropped too.
                assert!(h.aliases_held() as u64 <= launches_held, "{} aliases", h.aliases_held());
            }
        }
    }
    h.deliver(late);
    let report = std::mem::replace(h, LaunchHarness::trace().unwrap()).report();
    (most_held, report)
}

fn column_ints(dir: &Path, table: &str, column: &str) -> Vec<Option<i64>> {
    let mut out = Vec::new();
    for part in part_files(&dir.join(table)).unwrap() {
        for batch in read::batches(&part, &[column]).unwrap() {
            let b = batch.unwrap();
            out.extend((0..b.len()).map(|r| b.int(0, r).unwrap()));
        }
    }
    out
}

fn kernels_in_parts(dir: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for part in part_files(&dir.join("kernels")).unwrap() {
        for batch in read::batches(&part, &["kernel_name", "duration_ns"]).unwrap() {
            let b = batch.unwrap();
            for r in 0..b.len() {
                let e = out.entry(b.text(0, r).unwrap().unwrap().to_owned()).or_default();
                e.0 += 1;
                e.1 += b.int(1, r).unwrap().unwrap() as u64;
            }
        }
    }
    out
}

#[test]
fn a_run_past_the_row_limit_streams_every_kernel_and_holds_only_what_is_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config(dir.path(), 1_000)).unwrap();
    let steps = 400;
    let ((launches_held, ranges_held), report) = run(&mut h, steps, 5);
    let kernels = steps * PER_STEP;

    // The session's memory stays bounded: at most the steps since the last drain and the
    // step whose records are late, whatever the run's length.
    assert!(launches_held > 0 && launches_held <= 7 * PER_STEP, "launches held: {launches_held}");
    assert!(ranges_held <= 7 * (LAYERS + 1) + 1, "ranges held: {ranges_held}");

    let streamed = report.streamed.as_ref().expect("past the row limit the report is the streamed one");
    assert!(report.kernels.is_empty() && report.ranges.is_empty(), "no rows held in the report");
    assert_eq!(streamed.row_limit, 1_000);
    assert!(streamed.why.contains("GMPROF_ROW_LIMIT"), "{}", streamed.why);
    // Each drain past the limit is timed: 80 drains were asked for, those past the first
    // 1 000 launches (step 100 on) streamed; the part under the session's lock is within
    // the whole drain's time.
    let times = streamed.drain_times.expect("the drains' times");
    assert_eq!(times.drains, (steps - 100) / 5, "{times:?}");
    assert!(times.session_lock_ns <= times.total_ns && times.session_lock_max_ns <= times.total_max_ns, "{times:?}");
    assert!(times.total_max_ns <= times.total_ns && times.total_max_ns > 0, "{times:?}");
    // Each drain gave the allocator's free pages back, timed.
    assert!(times.release_ns > 0 && times.release_max_ns <= times.release_ns, "{times:?}");

    // Every kernel heard is in the parts, none flagged.
    let parts = kernels_in_parts(dir.path());
    assert_eq!(parts.values().map(|v| v.0).sum::<u64>(), kernels);
    assert_eq!(streamed.kernels, kernels);
    assert_eq!(report.meta.kernel_count, kernels);
    assert_eq!(report.meta.counts.flagged_rows, 0, "{:?}", report.meta.warnings);
    assert!(part_files(&dir.path().join("kernels")).unwrap().len() >= (kernels / 500) as usize);

    // The whole run's aggregates equal a recomputation from the parts, exactly.
    let by_name: Vec<_> = streamed
        .aggregates
        .iter()
        .filter(|a| a.table == AggregateTable::Kernel && a.quantity == AggregateQuantity::DurationNs)
        .map(|a| (a.key.clone(), (a.summary.count, a.summary.total_ns.unwrap())))
        .collect();
    assert_eq!(by_name.into_iter().collect::<BTreeMap<_, _>>(), parts);
    let total: u64 = parts.values().map(|v| v.1).sum();
    assert_eq!(report.meta.total_gpu_time_ns, Some(total));
    let step_group = streamed
        .aggregates
        .iter()
        .find(|a| a.table == AggregateTable::Range && a.key == "step" && a.quantity == AggregateQuantity::GpuTimeNs)
        .expect("the step group's aggregate");
    assert_eq!((step_group.summary.count, step_group.summary.total_ns), (steps, Some(total)));

    // The steps table: one row per step, in order, each with its kernels.
    assert_eq!(streamed.step_group.as_deref(), Some("step"));
    assert_eq!(streamed.steps, steps);
    let step_numbers = column_ints(dir.path(), "steps", "step");
    assert_eq!(step_numbers, (0..steps as i64).map(Some).collect::<Vec<_>>());
    // Numbered in the program's order (each drain completes several steps at once, and the
    // session tree reuses the slots of ranges that left it).
    let starts = column_ints(dir.path(), "steps", "start_ns");
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "steps out of order: {starts:?}");
    assert!(column_ints(dir.path(), "steps", "kernels").iter().all(|k| *k == Some(PER_STEP as i64)));
    // report.json's steps table: the same rows.
    assert_eq!(streamed.steps_table.len() as u64, steps);
    assert_eq!(streamed.steps_table_left_out, 0);
    assert!(streamed.steps_table.iter().enumerate().all(|(i, r)| r.step == i as u64 && r.kernels == PER_STEP));
    // Ranges: every instance (no root row: no kernel ran outside the ranges).
    assert_eq!(column_ints(dir.path(), "ranges", "instance").len() as u64, steps * (1 + LAYERS));

    // The outputs: report.json with the aggregates, no whole-file row tables (an earlier
    // checkpoint's are removed).
    std::fs::write(dir.path().join("kernels.csv"), "stale checkpoint").unwrap();
    report.write_all(dir.path()).unwrap();
    assert!(!dir.path().join("kernels.csv").exists() && !dir.path().join("kernels.parquet").exists());
    let back: Report = serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(back.streamed.as_ref(), Some(streamed));
    let text = crate::report::text::streamed::streamed_text(streamed);
    assert!(text.starts_with("streamed: 4000 kernels, 0 transfers, 1200 range instances, 400 steps"), "{text}");
    assert!(text.contains("step/layer #") && text.contains("gemm"), "{text}");
}

#[test]
fn a_run_below_the_row_limit_is_the_whole_session_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut streamed = LaunchHarness::trace().unwrap();
    streamed.profiler().stream_into(config(dir.path(), 10_000)).unwrap();
    let mut plain = LaunchHarness::trace().unwrap();
    let (held, with_stream) = run(&mut streamed, 40, 5);
    let (_, without) = run(&mut plain, 40, 5);
    assert_eq!(held, (0, 0), "nothing streamed below the limit");
    assert!(with_stream.streamed.is_none());
    assert!(!dir.path().join("kernels").exists(), "no part files below the limit");
    let rows = |r: &Report| {
        r.kernels
            .iter()
            .map(|k| (k.kernel_name.clone(), k.start_ns, k.end_ns, k.range_path.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(with_stream.kernels.len() as u64, 40 * PER_STEP);
    assert_eq!(rows(&with_stream), rows(&without));
    let ranges = |r: &Report| r.ranges.iter().map(|g| (g.path.clone(), g.instance, g.gpu_time_ns)).collect::<Vec<_>>();
    assert_eq!(ranges(&with_stream), ranges(&without));
    assert_eq!(with_stream.meta.warnings, without.meta.warnings);
}

#[test]
fn a_run_that_passes_the_limit_after_its_last_drain_streams_at_the_finish() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config(dir.path(), 100)).unwrap();
    // No drain during the run (every 1000 steps).
    let (_, report) = run(&mut h, 30, 1_000);
    let streamed = report.streamed.expect("streamed at the finish");
    assert_eq!(streamed.kernels, 30 * PER_STEP);
    assert_eq!(kernels_in_parts(dir.path()).values().map(|v| v.0).sum::<u64>(), 30 * PER_STEP);
}

#[test]
fn a_drain_that_completes_more_ranges_than_one_hold_removes_them_in_batches_and_writes_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config(dir.path(), 1_000)).unwrap();
    // Two drains, each completing 1 500 steps of 3 ranges: more than REMOVALS_PER_HOLD
    // (4 096) each, so each leaves the session tree in two holds of its lock.
    let steps = 3_000;
    let ((_, ranges_held), report) = run(&mut h, steps, 1_500);
    let per_step = LAYERS + 1;
    assert!(1_500 * per_step > super::stream::REMOVALS_PER_HOLD as u64);
    // After each drain the tree holds only the last step, whose records are late.
    assert!(ranges_held <= per_step, "ranges held after a drain: {ranges_held}");
    let streamed = report.streamed.as_ref().expect("streamed");
    assert_eq!(streamed.kernels, steps * PER_STEP);
    assert_eq!(report.meta.counts.flagged_rows, 0, "{:?}", report.meta.warnings);
    // Every range instance once, every step once and in order.
    let instances = column_ints(dir.path(), "ranges", "instance");
    assert_eq!(instances.len() as u64, steps * per_step);
    assert_eq!(column_ints(dir.path(), "steps", "step"), (0..steps as i64).map(Some).collect::<Vec<_>>());
    assert!(column_ints(dir.path(), "steps", "kernels").iter().all(|k| *k == Some(PER_STEP as i64)));
    let times = streamed.drain_times.expect("the drains' times");
    assert_eq!(times.drains, 2, "{times:?}");
}

/// The child of [`a_process_killed_mid_run_leaves_complete_part_files`]: streams a run that
/// never ends into `GMPROF_TEST_STREAM_CHILD`; without it, nothing.
#[test]
fn child_streams_until_killed() {
    let Some(dir) = std::env::var_os("GMPROF_TEST_STREAM_CHILD") else { return };
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config(Path::new(&dir), 100)).unwrap();
    let mut late = Vec::new();
    let mut gpu_ns = 1_000;
    for step in 0.. {
        h.push_range("step").unwrap();
        let mut records = Vec::new();
        for k in 0..PER_STEP {
            let (symbol, name) = NAMES[(k % 3) as usize];
            let id = h.launch_kernel(false, symbol);
            records.push(h.kernel_record(id, name, gpu_ns, gpu_ns + 100));
            gpu_ns += 1_000;
        }
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if step % 5 == 4 {
            h.stream_step();
        }
    }
}

#[test]
fn a_process_killed_mid_run_leaves_complete_part_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "capture::profiler::stream_tests::child_streams_until_killed", "--nocapture"])
        .env("GMPROF_TEST_STREAM_CHILD", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let kernels = dir.path().join("kernels");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while part_files(&kernels).map_or(0, |p| p.len()) < 4 {
        assert!(std::time::Instant::now() < deadline, "the child wrote no parts");
        assert!(child.try_wait().unwrap().is_none(), "the child ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no handler, no finish
    child.wait().unwrap();
    // Every part file is complete and readable, with its segment's rows; the open segment is
    // at most a hidden temporary file.
    let parts = part_files(&kernels).unwrap();
    assert!(parts.len() >= 4);
    for part in &parts {
        assert_eq!(read::row_count(part).unwrap(), 500, "{}", part.display());
    }
    for entry in std::fs::read_dir(&kernels).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(name.starts_with("part-") || name.starts_with(".part-"), "{name}");
    }
}
