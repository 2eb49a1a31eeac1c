//! Streamed outputs in the counter modes (issue 42, "every mode"): a GPU-less
//! [`LaunchHarness`] session in per_range and per_kernel whose counter cycles are scripted
//! ([`LaunchHarness::end_counter_cycle`]) and evaluated one cycle late, so counters arrive
//! after their kernels and ranges completed. Past the row limit, the kernels and ranges in
//! the part files are those heard, each with the metric values of a whole-file run of the
//! same workload (blank where its counters are missing); the aggregates equal a
//! recomputation from the parts; the steps table has one row per step; and the session
//! holds only what waits for its activity or its counter cycle.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::path::Path;
use std::time::Duration;

use super::harness::LaunchHarness;
use super::state::StreamConfig;
use super::stream::StreamProgress;
use crate::analysis::online::{AggregateQuantity, AggregateTable, OnlineSettings};
use crate::checked::activity::ActivityRecord;
use crate::model::{ProfilingMode, GPU_TIME_METRIC};
use crate::report::stream::StreamSettings;
use crate::report::tables::parquet::parts::{part_files, SegmentPolicy};
use crate::report::tables::parquet::read;
use crate::report::Report;

const NAMES: [(&CStr, &str); 3] = [(c"gemm", "gemm"), (c"softmax", "softmax"), (c"layernorm", "layernorm")];
const LAYERS: u64 = 2;
const KERNELS_PER_LAYER: u64 = 5;
const PER_STEP: u64 = LAYERS * KERNELS_PER_LAYER;
const STEPS: u64 = 120;

fn config(dir: &Path, row_limit: u64) -> StreamConfig {
    StreamConfig {
        dir: dir.to_owned(),
        row_limit,
        settings: StreamSettings {
            segment: SegmentPolicy { rows: 200, every: Duration::from_secs(3600), row_group: 64 },
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

/// The counters the scripted image holds for `key`: a value of its own, or none (about one
/// in nine: the counters are missing).
fn value(key: &str) -> Option<f64> {
    let h = key.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    (h % 9 != 0).then_some(100.0 + (h % 1000) as f64)
}

/// A training run: `step` around two `layer` ranges of five kernels. Activity records arrive
/// one step late; a counter cycle ends every 7 launches (per_kernel) or every 3 steps
/// (per_range: CUPTI cycles between top-level ranges), and the evaluator finishes each three
/// cycles (per_kernel) or one cycle (per_range) late; the session streams every 2 steps. Returns the most launches and ranges held
/// after a drain, and the report.
fn run(h: &mut LaunchHarness, mode: ProfilingMode) -> ((u64, u64), Report) {
    let mut late: Vec<ActivityRecord> = Vec::new();
    let mut most_held = (0, 0);
    let mut gpu_ns = 1_000_000;
    let mut launches = 0u64;
    let mut cycles = 0usize;
    // Cycles the evaluator lags behind: per_kernel's span steps, so a cycle waits for its
    // counters after all its kernels' activity is in.
    let lag = if mode == ProfilingMode::PerKernel { 3 } else { 1 };
    let mut end_cycle = |h: &mut LaunchHarness| {
        h.end_counter_cycle(value);
        cycles += 1;
        if cycles > lag {
            h.evaluate_counter_cycles(1);
        }
    };
    for step in 0..STEPS {
        h.push_range("step").unwrap();
        let mut records = Vec::new();
        for layer in 0..LAYERS {
            h.push_range(&format!("layer {layer}")).unwrap();
            for k in 0..KERNELS_PER_LAYER {
                let (symbol, name) = NAMES[(k % 3) as usize];
                let runtime = k % 2 == 0;
                let id = h.launch_kernel(runtime, symbol) + u32::from(runtime);
                records.push(h.kernel_record(id, name, gpu_ns, gpu_ns + 100 + (launches % 7) * 10));
                gpu_ns += 1_000;
                launches += 1;
                if mode == ProfilingMode::PerKernel && launches % 7 == 0 {
                    end_cycle(h);
                }
            }
            h.pop_range().unwrap();
        }
        h.pop_range().unwrap();
        if mode == ProfilingMode::PerRange && step % 3 == 2 {
            end_cycle(h);
        }
        h.deliver(std::mem::replace(&mut late, records));
        if step % 2 == 1 {
            if let StreamProgress::Streaming { launches_held, ranges_held, .. } = h.stream_step() {
                most_held = (most_held.0.max(launches_held), most_held.1.max(ranges_held));
            }
        }
    }
    h.deliver(late);
    end_cycle(h);
    let report = std::mem::replace(h, LaunchHarness::trace().unwrap()).report();
    (most_held, report)
}

/// Kernel rows by correlation id: status, duration and GPU-time metric.
type Kernels = BTreeMap<u64, (String, Option<i64>, Option<f64>)>;
/// Range rows by (path, instance): kernels, GPU time and GPU-time metric.
type Ranges = BTreeMap<(String, i64), (i64, Option<i64>, Option<f64>)>;

fn kernels_in_parts(dir: &Path) -> Kernels {
    let mut out = Kernels::new();
    for part in part_files(&dir.join("kernels")).unwrap() {
        for batch in read::batches(&part, &["correlation_id", "status", "duration_ns", GPU_TIME_METRIC]).unwrap() {
            let b = batch.unwrap();
            for r in 0..b.len() {
                let id = b.int(0, r).unwrap().unwrap() as u64;
                let row = (b.text(1, r).unwrap().unwrap().to_owned(), b.int(2, r).unwrap(), b.float(3, r).unwrap());
                assert!(out.insert(id, row).is_none(), "kernel {id} written twice");
            }
        }
    }
    out
}

fn kernels_of(report: &Report) -> Kernels {
    report
        .kernels
        .iter()
        .map(|k| {
            let duration = k.duration_ns.map(|d| d as i64);
            (u64::from(k.correlation_id), (k.status.as_str().to_owned(), duration, k.metrics[0]))
        })
        .collect()
}

fn ranges_in_parts(dir: &Path) -> Ranges {
    let mut out = Ranges::new();
    for part in part_files(&dir.join("ranges")).unwrap() {
        let columns = ["path", "instance", "kernel_count", "gpu_time_ns", GPU_TIME_METRIC];
        for batch in read::batches(&part, &columns).unwrap() {
            let b = batch.unwrap();
            for r in 0..b.len() {
                let key = (b.text(0, r).unwrap().unwrap().to_owned(), b.int(1, r).unwrap().unwrap());
                let row = (b.int(2, r).unwrap().unwrap(), b.int(3, r).unwrap(), b.float(4, r).unwrap());
                assert!(out.insert(key.clone(), row).is_none(), "range {key:?} written twice");
            }
        }
    }
    out
}

fn ranges_of(report: &Report) -> Ranges {
    report
        .ranges
        .iter()
        .filter(|g| g.range_id.is_some())
        .map(|g| {
            let key = (g.path.clone(), i64::from(g.instance));
            (key, (g.kernel_count as i64, g.gpu_time_ns.map(|t| t as i64), g.metrics[0]))
        })
        .collect()
}

fn streams_like_the_whole_file_run(mode: ProfilingMode) {
    let dir = tempfile::tempdir().unwrap();
    let mut streamed = LaunchHarness::new(mode).unwrap();
    streamed.profiler().stream_into(config(dir.path(), 100)).unwrap();
    let ((launches_held, ranges_held), report) = run(&mut streamed, mode);
    let mut plain = LaunchHarness::new(mode).unwrap();
    let (_, whole) = run(&mut plain, mode);
    let kernels = STEPS * PER_STEP;
    assert_eq!(whole.kernels.len() as u64, kernels);
    let missing = whole.kernels.iter().filter(|k| k.metrics[0].is_none()).count();
    assert!(missing > 0 && missing < kernels as usize / 2 || mode == ProfilingMode::PerRange, "{missing} missing");

    // The session held only what waited for its activity or its counter cycle: a few steps.
    assert!(launches_held > 0 && launches_held <= 6 * PER_STEP, "launches held: {launches_held}");
    assert!(ranges_held <= 10 * (LAYERS + 1), "ranges held: {ranges_held}");

    let s = report.streamed.as_ref().expect("past the row limit the report is the streamed one");
    assert!(report.kernels.is_empty() && report.ranges.is_empty(), "no rows held in the report");
    assert_eq!(s.kernels, kernels);

    // Every kernel heard, with the whole-file run's status, duration and counters.
    let parts = kernels_in_parts(dir.path());
    assert_eq!(parts.len() as u64, kernels);
    assert_eq!(parts, kernels_of(&whole));
    assert_eq!(report.meta.counts.missing_counters, whole.meta.counts.missing_counters);
    assert_eq!(report.meta.counts.flagged_rows, whole.meta.counts.flagged_rows);

    // Every range instance, with the whole-file run's sums and metrics.
    let ranges = ranges_in_parts(dir.path());
    assert_eq!(ranges.len() as u64, STEPS * (1 + LAYERS));
    assert_eq!(ranges, ranges_of(&whole));
    let measured = ranges.values().filter(|r| r.2.is_some()).count();
    assert!(measured > ranges.len() / 2, "{measured} of {} ranges have counters", ranges.len());
    if mode == ProfilingMode::PerRange {
        let blank = ranges.len() - measured;
        assert!(blank > 0, "some ranges' counters are missing, and blank");
        let said = format!("{blank} range instance(s) were streamed with blank metrics");
        assert!(report.meta.warnings.iter().any(|w| w.starts_with(&said)), "{:?}", report.meta.warnings);
    }

    // The aggregates equal a recomputation from the parts.
    let mut by_name: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let names: BTreeMap<u64, String> = whole
        .kernels
        .iter()
        .map(|k| (u64::from(k.correlation_id), k.kernel_name.clone().unwrap_or_default()))
        .collect();
    for (id, (_, duration, _)) in &parts {
        if let Some(d) = duration {
            let e = by_name.entry(names[id].clone()).or_default();
            e.0 += 1;
            e.1 += *d as u64;
        }
    }
    let aggregated: BTreeMap<String, (u64, u64)> = s
        .aggregates
        .iter()
        .filter(|a| a.table == AggregateTable::Kernel && a.quantity == AggregateQuantity::DurationNs)
        .map(|a| (a.key.clone(), (a.summary.count, a.summary.total_ns.unwrap_or(0))))
        .collect();
    assert_eq!(aggregated, by_name);

    // One steps row per step.
    assert_eq!(s.step_group.as_deref(), Some("step"));
    assert_eq!(s.steps, STEPS);
    assert!(s.steps_table.iter().enumerate().all(|(i, r)| r.step == i as u64 && r.kernels == PER_STEP));
}

#[test]
fn a_per_range_run_streams_each_range_once_its_counters_are_in() {
    streams_like_the_whole_file_run(ProfilingMode::PerRange);
}

#[test]
fn ranges_nested_below_the_measured_levels_are_blank_without_a_warning() {
    // One measured level: the layers under each step have no counters by design, and only
    // the steps' missing counters are lost (said), as the whole-file report says them.
    let dir = tempfile::tempdir().unwrap();
    let mut h = LaunchHarness::new(ProfilingMode::PerRange).unwrap();
    h.profiler().stream_into(config(dir.path(), 100)).unwrap();
    h.measure_levels(1);
    let (_, report) = run(&mut h, ProfilingMode::PerRange);
    let ranges = ranges_in_parts(dir.path());
    let blank =
        |nested: bool| ranges.iter().filter(|((path, _), r)| path.contains('/') == nested && r.2.is_none()).count();
    assert!(blank(true) > 0, "the script leaves some nested ranges without counters");
    let said: Vec<&String> =
        report.meta.warnings.iter().filter(|w| w.contains("streamed with blank metrics")).collect();
    match blank(false) {
        0 => assert!(said.is_empty(), "{said:?}"),
        n => assert!(said.len() == 1 && said[0].starts_with(&format!("{n} range instance(s)")), "{said:?}"),
    }
}

#[test]
fn a_per_kernel_run_streams_each_kernel_once_its_counters_are_in() {
    streams_like_the_whole_file_run(ProfilingMode::PerKernel);
}

#[test]
fn a_range_waits_for_its_counter_cycle_and_is_written_when_it_is_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = LaunchHarness::new(ProfilingMode::PerRange).unwrap();
    h.profiler().stream_into(config(dir.path(), 0)).unwrap();
    h.push_range("step").unwrap();
    let id = h.launch_kernel(false, c"gemm");
    h.pop_range().unwrap();
    h.deliver(vec![h.kernel_record(id, "gemm", 10, 20)]);
    // Complete but for its counters, whose cycle is still being filled: held.
    let held = |p: StreamProgress| match p {
        StreamProgress::Streaming { drained, ranges_held, .. } => (drained.kernels, drained.ranges, ranges_held),
        other => panic!("not streaming: {other:?}"),
    };
    assert_eq!(held(h.stream_step()), (1, 0, 1));
    // The cycle ends; the evaluator has not finished it: still held.
    h.end_counter_cycle(|_| Some(42.0));
    assert_eq!(held(h.stream_step()), (0, 0, 1));
    // Evaluated: written, with its counters, and gone from the session.
    h.evaluate_counter_cycles(1);
    assert_eq!(held(h.stream_step()), (0, 1, 0));
    let report = h.report();
    assert!(report.streamed.is_some());
    let ranges = ranges_in_parts(dir.path());
    assert_eq!(ranges.get(&("step".to_owned(), 0)), Some(&(1, Some(10), Some(42.0))));
}

#[test]
fn kernel_replay_does_not_stream_yet() {
    let dir = tempfile::tempdir().unwrap();
    let h = LaunchHarness::new(ProfilingMode::KernelReplay).unwrap();
    let e = h.profiler().stream_into(config(dir.path(), 10)).unwrap_err().to_string();
    assert!(e.contains("kernel_replay") && e.contains("per_kernel"), "{e}");
}
