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
