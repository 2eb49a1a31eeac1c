//! Live metrics (issue 45) through the capture path: a GPU-less [`LaunchHarness`] session
//! whose stream settings carry a live feed streams from its first drain whatever its row
//! limit (a short run too), and what the feed exports after each drain and at the end equals
//! the run's steps table and report; PM sampling's samples give the DRAM bandwidth and the
//! sampler's lost samples the health counter.

use std::path::Path;
use std::sync::Arc;

use super::harness::LaunchHarness;
use super::state::StreamConfig;
use super::stream::StreamProgress;
use crate::checked::activity::LaunchClock;
use crate::model::pm::{PmMetric, PmSample};
use crate::report::live::{LiveMetrics, ProcessLabels};
use crate::report::stream::StreamSettings;

/// The value of the series of `name` (device 0) in `text`; `None` when it is absent.
fn value(text: &str, name: &str, extra: &str) -> Option<f64> {
    let prefix = format!("{name}{{host=\"h\",device=\"0\"{extra}}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map(|v| v.parse().unwrap())
}

fn config(dir: &Path, live: &LiveMetrics) -> StreamConfig {
    let settings = StreamSettings { live: Some(live.feed(Some(0))), ..StreamSettings::default() };
    // A row limit the run never reaches: live metrics stream it from its start anyway.
    StreamConfig { dir: dir.to_owned(), row_limit: 1_000_000, settings }
}

fn labels() -> ProcessLabels {
    ProcessLabels { host: Some("h".into()), ..ProcessLabels::default() }
}

#[test]
fn a_short_run_with_live_metrics_streams_from_its_start_and_exports_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let live = Arc::new(LiveMetrics::new(&labels()));
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config(dir.path(), &live)).unwrap();
    let mut gpu = 1_000_000;
    let mut late = Vec::new();
    let mut after_drains = Vec::new();
    for step in 0..12u64 {
        h.push_range(&format!("Train step {step}")).unwrap();
        h.push_range("forward").unwrap();
        let mut records = Vec::new();
        for _ in 0..3 {
            let id = h.launch_kernel(true, c"gemm");
            records.push(h.kernel_record(id, "gemm", gpu, gpu + 50_000 + step * 1_000));
            gpu += 60_000 + step * 1_000;
        }
        h.pop_range().unwrap();
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if step % 4 == 3 {
            let progress = h.stream_step();
            assert!(matches!(progress, StreamProgress::Streaming { .. }), "{progress:?}");
            let text = live.encode().unwrap();
            after_drains.push(value(&text, "gmprof_steps_total", "").unwrap_or(0.0));
        }
    }
    // Each drain exported the steps completed by then (a step's records arrive a step late).
    assert_eq!(after_drains, vec![3.0, 7.0, 11.0]);
    h.deliver(late);
    let report = h.report();
    let streamed = report.streamed.as_ref().expect("streamed from the start");
    assert!(streamed.why.starts_with("the run exported live metrics"), "{}", streamed.why);
    let text = live.encode().unwrap();
    assert_eq!(value(&text, "gmprof_steps_total", ""), Some(streamed.steps as f64));
    assert_eq!(streamed.steps, 12);
    let last = streamed.steps_table.last().unwrap();
    assert_eq!(value(&text, "gmprof_last_step", ""), Some(11.0));
    let gpu_ns = value(&text, "gmprof_last_step_gpu_seconds", "").map(|s| (s * 1e9).round() as u64);
    assert_eq!(gpu_ns, last.gpu_time_ns);
    assert_eq!(value(&text, "gmprof_kernels_total", ""), Some(36.0));
    let forward = streamed
        .aggregates
        .iter()
        .find(|a| a.key == "Train step #/forward" && a.quantity.as_str() == "gpu_time_ns")
        .unwrap();
    let got = value(&text, "gmprof_range_gpu_seconds_total", ",range=\"Train step #/forward\"");
    assert_eq!(got.map(|s| (s * 1e9).round() as u64), forward.summary.total_ns);
    // The harness has no CUPTI: no record dropped, counted as 0 at every drain.
    assert_eq!(value(&text, "gmprof_activity_records_dropped_total", ""), Some(0.0));
    // No PM sampling: no DRAM bandwidth, no PM counters.
    assert_eq!(value(&text, "gmprof_pm_samples_total", ""), None);
    assert!(!text.contains("gmprof_dram_bytes_per_second{"), "{text}");
}

#[test]
fn pm_samples_give_the_dram_bandwidth_and_lost_samples_the_health_counter() {
    let dir = tempfile::tempdir().unwrap();
    let live = Arc::new(LiveMetrics::new(&labels()));
    let mut h = LaunchHarness::trace_on_scripted_clock().unwrap();
    h.profiler().stream_into(config(dir.path(), &live)).unwrap();
    let metrics = vec![
        PmMetric::new("dram__bytes_read.sum.per_second", "byte/second"),
        PmMetric::new("dram__bytes_write.sum.per_second", "byte/second"),
    ];
    let kept = h.with_pm_sampler(metrics).unwrap();
    let sample = |start: u64, read: f64, write: Option<f64>| PmSample {
        start_ns: start,
        end_ns: start + 1_000,
        values: vec![Some(read), write],
    };
    h.push_range("step").unwrap();
    LaunchClock::set_scripted(10_000);
    let id = h.launch_kernel(false, c"gemm");
    h.pop_range().unwrap();
    h.deliver(vec![h.kernel_record(id, "gemm", 10_500, 14_000)]);
    {
        let mut k = kept.lock();
        k.samples.extend([sample(10_000, 1.0e12, Some(2.0e11)), sample(11_000, 3.0e12, None)]);
        k.missing_samples = 4;
    }
    h.stream_step();
    let text = live.encode().unwrap();
    // The mean of the drain's samples, each direction over the samples that have it.
    assert_eq!(value(&text, "gmprof_dram_bytes_per_second", ",direction=\"read\""), Some(2.0e12));
    assert_eq!(value(&text, "gmprof_dram_bytes_per_second", ",direction=\"write\""), Some(2.0e11));
    assert_eq!(value(&text, "gmprof_pm_samples_total", ""), Some(2.0));
    assert_eq!(value(&text, "gmprof_pm_samples_lost_total", ""), Some(4.0));
    // The next drain's samples replace the rate; lost samples count on.
    {
        let mut k = kept.lock();
        k.samples.push(sample(15_000, 5.0e11, Some(1.0e11)));
        k.missing_samples = 6;
    }
    h.stream_step();
    let text = live.encode().unwrap();
    assert_eq!(value(&text, "gmprof_dram_bytes_per_second", ",direction=\"read\""), Some(5.0e11));
    assert_eq!(value(&text, "gmprof_pm_samples_total", ""), Some(3.0));
    assert_eq!(value(&text, "gmprof_pm_samples_lost_total", ""), Some(6.0));
    drop(h.report());
}

#[test]
fn pc_samples_give_each_range_groups_stall_reasons_shared_by_gpu_time() {
    use crate::model::pc::{PcRecord, PcStallReason};
    let dir = tempfile::tempdir().unwrap();
    let live = Arc::new(LiveMetrics::new(&labels()));
    let mut h = LaunchHarness::trace().unwrap();
    h.profiler().stream_into(config(dir.path(), &live)).unwrap();
    let reason = |index, name: &str| PcStallReason { index, name: format!("smsp__pcsamp_warps_issue_stalled_{name}") };
    let kept = h
        .with_pc_sampler(vec![
            reason(1, "long_scoreboard"),
            reason(2, "long_scoreboard_not_issued"),
            reason(3, "selected"),
        ])
        .unwrap();
    let mut gpu = 1_000_000;
    let mut step = |h: &mut LaunchHarness, i: u64| {
        h.push_range(&format!("Train step {i}")).unwrap();
        let mut records = Vec::new();
        // gemm runs 3 µs in forward, 1 µs in backward: its samples go 3:1.
        for (range, ns) in [("forward", 3_000), ("backward", 1_000)] {
            h.push_range(range).unwrap();
            let id = h.launch_kernel(true, c"gemm");
            records.push(h.kernel_record(id, "gemm", gpu, gpu + ns));
            gpu += ns + 500;
            h.pop_range().unwrap();
        }
        h.pop_range().unwrap();
        h.deliver(records);
    };
    let record = |stalls: Vec<(u32, u64)>| PcRecord {
        cubin_crc: 7,
        function: "gemm".into(),
        pc_offset: 16,
        correlation_id: 0,
        stalls,
    };
    step(&mut h, 0);
    {
        let mut k = kept.lock();
        k.merge([record(vec![(1, 40), (2, 7), (3, 8)])]);
        (k.total_samples, k.dropped_samples) = (48, 2);
    }
    h.stream_step();
    let text = live.encode().unwrap();
    let stall = |text: &str, range: &str, reason: &str| {
        value(text, "gmprof_range_stall_samples_total", &format!(",range=\"{range}\",reason=\"{reason}\""))
    };
    assert_eq!(stall(&text, "Train step #/forward", "long_scoreboard"), Some(30.0), "{text}");
    assert_eq!(stall(&text, "Train step #/backward", "long_scoreboard"), Some(10.0));
    assert_eq!(stall(&text, "Train step #/forward", "selected"), Some(6.0));
    assert_eq!(stall(&text, "Train step #/backward", "selected"), Some(2.0));
    // The _not_issued twin is not a state of its own: never exported.
    assert!(!text.contains("not_issued"), "{text}");
    assert_eq!(value(&text, "gmprof_pc_samples_total", ""), Some(48.0));
    assert_eq!(value(&text, "gmprof_pc_samples_dropped_total", ""), Some(2.0));
    // The next drain adds only what is new, by the GPU time so far (still 3:1).
    step(&mut h, 1);
    kept.lock().merge([record(vec![(1, 4)])]);
    h.stream_step();
    let text = live.encode().unwrap();
    assert_eq!(stall(&text, "Train step #/forward", "long_scoreboard"), Some(33.0));
    assert_eq!(stall(&text, "Train step #/backward", "long_scoreboard"), Some(11.0));
    // Samples after the last drain are in the finish's last values.
    step(&mut h, 2);
    kept.lock().merge([record(vec![(3, 8)])]);
    let report = h.report();
    let text = live.encode().unwrap();
    assert_eq!(stall(&text, "Train step #/forward", "selected"), Some(12.0));
    assert_eq!(stall(&text, "Train step #/backward", "selected"), Some(4.0));
    // Every sample of the run's report is in one group's series.
    let exported: f64 = text
        .lines()
        .filter(|l| l.starts_with("gmprof_range_stall_samples_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert_eq!(exported, report.pc.as_ref().unwrap().sampled as f64);
    assert_eq!(exported, 60.0);
    // The report's own fold had no rows (they were streamed): it says so, and does not blame
    // lost launches.
    let pc = report.pc.as_ref().unwrap();
    assert!(pc.rows_streamed && pc.unattributed_samples == 60, "{pc:?}");
    let said = report.meta.warnings.iter().find(|w| w.starts_with("PC sampling: the run streamed its rows"));
    assert!(said.is_some_and(|w| w.contains("60 sample(s) are not folded")), "{:?}", report.meta.warnings);
    assert!(
        !report.meta.warnings.iter().any(|w| w.contains("launched before the session")),
        "{:?}",
        report.meta.warnings
    );
    let summary = crate::report::text::pc_summary::pc_lines(pc);
    assert!(summary[0].contains("not folded into ranges (rows streamed): 60"), "{summary:?}");
    // The drains' own time is exported as gmprof's overhead.
    assert!(value(&text, "gmprof_drain_seconds_total", "").unwrap() > 0.0);
    assert!(value(&text, "gmprof_drain_lock_seconds_total", "").unwrap() > 0.0);
}
