//! PM sampling in a streamed run (issue 42) through the capture path: a GPU-less
//! [`LaunchHarness`] session with a scripted PM sampler whose decoder runs behind the GPU,
//! on one scripted GPU time line (launch stamps, kernel records and samples). Past the row
//! limit every sample decoded is in `pm_samples/` once, every kernel in `pm/` with the
//! values a whole-file run of the same script gives it, and the samples held stay bounded.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::harness::LaunchHarness;
use super::state::StreamConfig;
use super::stream::StreamProgress;
use crate::analysis::online::OnlineSettings;
use crate::analysis::pm_fold::PmScope;
use crate::checked::activity::{ActivityRecord, LaunchClock};
use crate::model::pm::{PmCapture, PmMetric, PmSample};
use crate::report::stream::pm::TAIL_SAMPLES;
use crate::report::stream::StreamSettings;
use crate::report::tables::parquet::parts::{part_files, SegmentPolicy};
use crate::report::tables::parquet::read;
use crate::report::Report;

/// Kernels and their DRAM read rate (byte/s) while they run; the GPU idles at 1 GB/s.
const KERNELS: [(&CStr, &str, u64, f64); 3] = [
    (c"gemm", "gemm", 6_000, 2.0e12),
    (c"softmax", "softmax", 2_500, 0.8e12),
    (c"layernorm", "layernorm", 1_500, 1.4e12),
];
const IDLE_RATE: f64 = 1.0e9;
const PER_STEP: u64 = 10;
/// The sampling interval, ns.
const WINDOW: u64 = 2_000;
/// How far the decoder runs behind the GPU, ns: two to four steps, so that kernels whose
/// records came wait for it.
const DECODE_LAG: u64 = 250_000;
const T0: u64 = 1_000_000_000;
const ROW_LIMIT: u64 = 1_000;
const DRAIN_EVERY: u64 = 5;

fn metrics() -> Vec<PmMetric> {
    vec![
        PmMetric::new("dram__bytes_read.sum.per_second", "byte/second"),
        PmMetric::new("gr__cycles_active.avg.pct_of_peak_sustained_elapsed", "%"),
    ]
}

/// The samples of `[from, to)` in windows of [`WINDOW`] from [`T0`], valued from the kernels'
/// intervals `busy` (name index, start, end): each window's average rate and busy percent.
fn samples(busy: &[(usize, u64, u64)], from: u64, to: u64) -> Vec<PmSample> {
    let mut out = Vec::new();
    let mut start = from;
    while start + WINDOW <= to {
        let end = start + WINDOW;
        let (mut bytes, mut busy_ns) = (0.0f64, 0u64);
        for &(k, s, e) in busy.iter().filter(|(_, s, e)| *s < end && *e > start) {
            let overlap = e.min(end) - s.max(start);
            bytes += KERNELS[k].3 * overlap as f64 * 1e-9;
            busy_ns += overlap;
        }
        bytes += IDLE_RATE * (WINDOW - busy_ns) as f64 * 1e-9;
        let rate = bytes / (WINDOW as f64 * 1e-9);
        out.push(PmSample {
            start_ns: start,
            end_ns: end,
            values: vec![Some(rate), Some(100.0 * busy_ns as f64 / WINDOW as f64)],
        });
        start = end;
    }
    out
}

/// What one scripted run saw: the samples the decoder kept, the most samples the session
/// held after a streaming drain, and the report.
struct Run {
    decoded: Vec<PmSample>,
    most_held: u64,
    drains: u64,
    /// The most launches held after a drain.
    most_launches: u64,
    /// The most launches held after a drain once the decoder had stopped.
    most_launches_after_stop: u64,
    /// Each launch's kernel (index in [`KERNELS`]) by correlation id.
    kinds: BTreeMap<i64, usize>,
    report: Report,
}

/// `steps` steps of [`PER_STEP`] kernels under a `step` range on one GPU time line: each
/// launch is stamped just before its kernel starts, the kernels' records arrive one step
/// late, the decoder keeps the samples up to [`DECODE_LAG`] behind the GPU, and every
/// [`DRAIN_EVERY`] steps the session streams (when `stream` names a directory). From step
/// `stop_at` on, the decoder has stopped: no sample more.
fn run(steps: u64, stream: Option<&Path>, stop_at: Option<u64>) -> Run {
    let mut h = LaunchHarness::trace_on_scripted_clock().unwrap();
    if let Some(dir) = stream {
        h.profiler().stream_into(config(dir)).unwrap();
    }
    let kept: Arc<Mutex<PmCapture>> = h.with_pm_sampler(metrics()).unwrap();
    let mut busy: Vec<(usize, u64, u64)> = Vec::new();
    let mut late: Vec<ActivityRecord> = Vec::new();
    let (mut gpu_ns, mut decoded_to) = (T0, T0);
    let mut decoded = Vec::new();
    let (mut most_held, mut drains, mut most_launches_after_stop, mut most_launches) = (0, 0, 0, 0);
    let mut kinds = BTreeMap::new();
    for step in 0..steps {
        h.push_range("step").unwrap();
        let mut records = Vec::new();
        for k in 0..PER_STEP {
            let kind = ((step + k) % 3) as usize;
            let (symbol, name, duration, _) = KERNELS[kind];
            LaunchClock::set_scripted(gpu_ns - 300);
            let id = h.launch_kernel(false, symbol);
            kinds.insert(i64::from(id), kind);
            records.push(h.kernel_record(id, name, gpu_ns, gpu_ns + duration));
            busy.push((kind, gpu_ns, gpu_ns + duration));
            // Idle gaps of 0.5 to 2 windows between kernels.
            gpu_ns += duration + 1_000 + (k % 4) * 1_000;
        }
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if stop_at == Some(step) {
            h.end_pm_decoding();
        }
        let decoding = stop_at.is_none_or(|s| step < s);
        // The decoder keeps the samples up to its lag behind the GPU.
        let to = if decoding { gpu_ns.saturating_sub(DECODE_LAG) } else { decoded_to };
        let to = decoded_to + (to.saturating_sub(decoded_to)) / WINDOW * WINDOW;
        let new = samples(&busy, decoded_to, to);
        decoded_to = to;
        decoded.extend(new.iter().cloned());
        kept.lock().samples.extend(new);
        busy.retain(|(_, _, e)| *e + 10 * WINDOW > decoded_to);
        if step % DRAIN_EVERY == DRAIN_EVERY - 1 {
            if let StreamProgress::Streaming { pm_samples_held, launches_held, .. } = h.stream_step() {
                most_held = most_held.max(pm_samples_held.expect("the run samples PM"));
                drains += 1;
                if !decoding {
                    most_launches_after_stop = most_launches_after_stop.max(launches_held);
                }
                most_launches = most_launches.max(launches_held);
            }
        }
    }
    h.deliver(late);
    // At the finish the decoder keeps the rest (up to the last kernel's end).
    let end = if stop_at.is_some() { decoded_to } else { gpu_ns.next_multiple_of(WINDOW) + WINDOW };
    let rest = samples(&busy, decoded_to, end);
    decoded.extend(rest.iter().cloned());
    kept.lock().samples.extend(rest);
    Run { decoded, most_held, drains, kinds, most_launches_after_stop, most_launches, report: h.report() }
}

fn config(dir: &Path) -> StreamConfig {
    StreamConfig {
        dir: dir.to_owned(),
        row_limit: ROW_LIMIT,
        settings: StreamSettings {
            segment: SegmentPolicy { rows: 700, every: Duration::from_secs(3600), row_group: 128 },
            online: OnlineSettings { window_steps: 50, ..OnlineSettings::default() },
            flight: None,
            release_memory: false,
            release_every: crate::report::stream::DEFAULT_RELEASE_EVERY,
            live: None,
            window_trace: Default::default(),
            pm_kernel_rows: Default::default(),
        },
    }
}

/// One kernel's value of one metric: (samples, peak, coverage, windows, edge_share, mean,
/// total, confidence).
type Value = (i64, Option<f64>, Option<f64>, Option<f64>, Option<f64>, Option<f64>, Option<f64>, Option<String>);

/// `pm/`'s kernel rows by (correlation id, metric).
fn pm_parts(dir: &Path) -> BTreeMap<(i64, String), Value> {
    let columns = [
        "scope",
        "correlation_id",
        "metric",
        "samples",
        "peak",
        "coverage",
        "windows",
        "edge_share",
        "mean",
        "total",
        "confidence",
    ];
    let mut out = BTreeMap::new();
    for part in part_files(&dir.join("pm")).unwrap() {
        for batch in read::batches(&part, &columns).unwrap() {
            let b = batch.unwrap();
            for r in 0..b.len() {
                assert_eq!(b.text(0, r).unwrap(), Some("kernel"));
                let key = (b.int(1, r).unwrap().unwrap(), b.text(2, r).unwrap().unwrap().to_owned());
                let f = |i| b.float(i, r).unwrap();
                let value = (
                    b.int(3, r).unwrap().unwrap(),
                    f(4),
                    f(5),
                    f(6),
                    f(7),
                    f(8),
                    f(9),
                    b.text(10, r).unwrap().map(str::to_owned),
                );
                assert!(out.insert(key.clone(), value).is_none(), "{key:?} is in pm/ twice");
            }
        }
    }
    out
}

/// A whole-file report's kernel rows of its PM table, as [`pm_parts`] reads them.
fn pm_whole(report: &Report) -> BTreeMap<(i64, String), Value> {
    let pm = report.pm.as_ref().expect("the whole-file run has its PM table");
    let mut out = BTreeMap::new();
    for row in pm.rows.iter().filter(|r| r.scope == PmScope::Kernel) {
        for (m, metric) in pm.metrics.iter().enumerate() {
            let v = row.values[m];
            let value = (
                v.map_or(0, |v| i64::from(v.samples)),
                v.map(|v| v.peak),
                v.map(|v| v.coverage),
                v.map(|v| v.windows),
                v.and_then(|v| v.edge_share),
                v.map(|v| v.mean),
                v.and_then(|v| v.total),
                v.and_then(|v| v.confidence).map(|c| c.as_str().to_owned()),
            );
            out.insert((i64::from(row.correlation_id.unwrap()), metric.name.clone()), value);
        }
    }
    out
}

fn sample_starts(dir: &Path) -> Vec<u64> {
    let mut out = Vec::new();
    for part in part_files(&dir.join("pm_samples")).unwrap() {
        for batch in read::batches(&part, &["start_ns"]).unwrap() {
            let b = batch.unwrap();
            out.extend((0..b.len()).map(|r| b.int(0, r).unwrap().unwrap() as u64));
        }
    }
    out
}

fn relative(a: Option<f64>, b: Option<f64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) if a == b => 0.0,
        (Some(a), Some(b)) => (a - b).abs() / a.abs().max(b.abs()),
        (None, None) => 0.0,
        _ => f64::INFINITY,
    }
}

#[test]
fn a_streamed_pm_run_writes_every_sample_once_and_each_kernel_with_its_whole_file_values() {
    let steps = 300;
    let dir = tempfile::tempdir().unwrap();
    let streamed = run(steps, Some(dir.path()), None);
    let whole = run(steps, None, None);
    assert_eq!(streamed.decoded, whole.decoded, "the same script");
    let summary = streamed.report.streamed.as_ref().expect("past the row limit the run streams");
    assert!(whole.report.streamed.is_none());
    assert!(streamed.drains >= (steps - ROW_LIMIT / PER_STEP) / DRAIN_EVERY - 1, "{} drains", streamed.drains);

    // Kernels whose records came waited for the decoder: more launches are held than the
    // step whose records are late, and no more than its lag's worth.
    assert!(streamed.most_launches > 2 * PER_STEP, "{} launches held", streamed.most_launches);
    assert!(streamed.most_launches <= (DECODE_LAG / 40_000 + 2) * PER_STEP, "{}", streamed.most_launches);

    // Every sample decoded is in pm_samples/ exactly once, in time order.
    let starts = sample_starts(dir.path());
    let decoded: Vec<u64> = streamed.decoded.iter().map(|s| s.start_ns).collect();
    assert_eq!(starts, decoded);
    let table = |name: &str| summary.tables.iter().find(|t| t.table == name).map(|t| t.rows);
    assert_eq!(table("pm_samples"), Some(decoded.len() as u64));
    assert_eq!(table("pm"), Some(steps * PER_STEP * 2), "one row per kernel and metric");
    let pm = streamed.report.pm.as_ref().expect("the report keeps the sampler's section");
    assert_eq!(pm.sample_count, decoded.len() as u64);
    assert!(pm.samples.is_empty() && pm.rows.is_empty(), "no sample nor row held in the report");
    assert!(summary.why.contains("pm/, pm_samples/"), "{}", summary.why);
    // The whole-file PM table is not written beside the parts (it would be empty).
    streamed.report.write_all(dir.path()).unwrap();
    assert!(dir.path().join("report.json").exists() && !dir.path().join("pm.csv").exists());
    assert!(!dir.path().join("pm.parquet").exists());
    let text = streamed.report.summary().to_string();
    assert!(text.contains(&format!("PM sampling: {} samples", decoded.len())) && text.contains("in pm/"), "{text}");

    // Each kernel's values: those of the whole-file run. What the fold reads off the samples
    // over the kernel's interval is equal; the attributed mean and total come from each
    // drain's kernels in place of the whole run's, and differ by little.
    let parts = pm_parts(dir.path());
    let whole_rows = pm_whole(&whole.report);
    assert_eq!(parts.len() as u64, steps * PER_STEP * 2);
    assert_eq!(parts.keys().collect::<Vec<_>>(), whole_rows.keys().collect::<Vec<_>>());
    let (mut worst_mean, mut worst_total) = (0.0f64, 0.0f64);
    for (key, s) in &parts {
        let w = &whole_rows[key];
        assert_eq!((s.0, s.1, s.2, s.3, s.4), (w.0, w.1, w.2, w.3, w.4), "{key:?}");
        assert!(s.0 > 0, "{key:?}: every kernel is covered by samples");
        worst_mean = worst_mean.max(relative(s.5, w.5));
        worst_total = worst_total.max(relative(s.6, w.6));
    }
    // Each run recovers the script's rates (the samples are exactly what the attribution
    // models), so the two agree to rounding.
    let truth = |rows: &BTreeMap<(i64, String), Value>| {
        rows.iter()
            .filter(|(k, _)| k.1.starts_with("dram"))
            .map(|(k, v)| relative(v.5, Some(KERNELS[streamed.kinds[&k.0]].3)))
            .fold(0.0f64, f64::max)
    };
    assert!(truth(&parts) < 1e-6 && truth(&whole_rows) < 1e-6, "{} {}", truth(&parts), truth(&whole_rows));
    // Confidence too: a drain's launches of each kernel fill enough windows together.
    let confidence_differs = parts.iter().filter(|(k, s)| s.7 != whole_rows[*k].7).count();
    assert_eq!(confidence_differs, 0);
    assert!(worst_mean < 1e-6 && worst_total < 1e-6, "mean off by {worst_mean}, total by {worst_total}");
    assert!(
        !streamed.report.meta.warnings.iter().any(|w| w.contains("blank PM")),
        "{:?}",
        streamed.report.meta.warnings
    );

    // The samples held after a drain stay bounded: those since the oldest kernel still
    // waiting (the step being launched, whose records have not come) and the tail, whatever
    // the run's length.
    let bound = busy_span_per_step() / WINDOW + TAIL_SAMPLES as u64 + 1;
    assert!(streamed.most_held > 0, "samples are held between drains");
    assert!(streamed.most_held <= bound, "held {} samples, bound {bound}", streamed.most_held);
    assert!(streamed.most_held * 10 < decoded.len() as u64, "held {} of {}", streamed.most_held, decoded.len());
}

/// The GPU time one step takes in [`run`]'s script, at most.
fn busy_span_per_step() -> u64 {
    let longest = KERNELS.iter().map(|k| k.2).max().unwrap();
    PER_STEP * (longest + 1_000 + 3 * 1_000)
}

#[test]
fn kernels_stop_waiting_when_the_decoder_stops_and_the_uncovered_ones_are_blank_and_counted() {
    let (steps, stop_at) = (200, 150);
    let dir = tempfile::tempdir().unwrap();
    let streamed = run(steps, Some(dir.path()), Some(stop_at));
    let whole = run(steps, None, Some(stop_at));
    assert!(streamed.report.streamed.is_some());
    // Once the decoder stopped, kernels are not held for it: only what is in flight.
    assert!(streamed.most_launches_after_stop <= (DRAIN_EVERY + 1) * PER_STEP, "{}", streamed.most_launches_after_stop);
    assert_eq!(sample_starts(dir.path()), streamed.decoded.iter().map(|s| s.start_ns).collect::<Vec<_>>());

    // Every kernel is in pm/ once; those past the last sample have blank values (never 0),
    // as in the whole-file run, and are counted and said.
    let parts = pm_parts(dir.path());
    let whole_rows = pm_whole(&whole.report);
    assert_eq!(parts.len() as u64, steps * PER_STEP * 2);
    let blank: Vec<_> = parts.iter().filter(|(k, v)| k.1.starts_with("dram") && v.0 == 0).collect();
    assert!(blank.len() as u64 >= (steps - stop_at - 2) * PER_STEP, "{} blank", blank.len());
    for (key, v) in &blank {
        assert_eq!((v.1, v.2, v.5, v.6), (None, None, None, None), "{key:?}: blank, not 0");
        assert_eq!(whole_rows[*key].0, 0, "{key:?}: blank in the whole-file run too");
    }
    let said = streamed.report.meta.warnings.iter().find(|w| w.contains("blank PM values")).expect("said");
    assert!(said.starts_with(&format!("PM sampling: {} kernel(s)", blank.len())), "{said}");
    for (key, s) in &parts {
        let w = &whole_rows[key];
        assert_eq!((s.0, s.1, s.2, s.3, s.4), (w.0, w.1, w.2, w.3, w.4), "{key:?}");
    }
}
