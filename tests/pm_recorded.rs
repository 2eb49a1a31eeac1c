//! PM folding on samples recorded on a GPU: `examples/pm_validate.rs` on an NVIDIA H100
//! (driver 580.159.04, CUDA 13.0, CUPTI 13.0.1), 2026-11-23. Its trace-mode reports with PM
//! sampling at 20, 100 and 200 µs and its per_range report (the reference DRAM bytes of each
//! range) are in tests/data/pm/, zstd-compressed, with the folded rows left out: the test folds
//! the recorded samples again, with this build, and compares every top-level range of 1 ms or
//! more (a memory-bound `add` of 1.2 ms and a 2 ms MLP `train_step`, 10 of each) with per_range.
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use gmprof::analysis::pm_fold::{fold, fold_report, PmScope};
use gmprof::report::Report;

fn load(name: &str) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pm").join(name);
    let file = std::fs::File::open(&path).unwrap();
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(file).unwrap().read_to_string(&mut text).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// (path, instance) → DRAM bytes read + written, from per_range counters.
fn reference() -> HashMap<(String, u32), f64> {
    let per_range = load("h100_pm_validate_per_range.json.zst");
    let metric = |name: &str| per_range.meta.metrics.iter().position(|m| m.metric.name == name).unwrap();
    let (read, write) = (metric("dram__bytes_read.sum"), metric("dram__bytes_write.sum"));
    per_range
        .ranges
        .iter()
        .filter(|r| r.depth == 0 && r.range_id.is_some())
        .map(|r| ((r.path.clone(), r.instance), r.metrics[read].unwrap() + r.metrics[write].unwrap()))
        .collect()
}

/// Worst |error| of the folded and of the overlap-weighted DRAM bytes, over the ranges compared.
fn worst_errors(interval: &str) -> (f64, f64, usize) {
    let traced = load(&format!("h100_pm_validate_trace_pm_{interval}.json.zst"));
    let reference = reference();
    let pm = traced.pm.as_ref().unwrap();
    let folded = fold_report(&pm.to_capture(), &traced.ranges, &traced.kernels);
    assert_eq!(folded.alignment.method, "same_clock");
    let idx = |name: &str| folded.metrics.iter().position(|m| m.name == name).unwrap();
    let (read, write) = (idx("dram__bytes_read.sum.per_second"), idx("dram__bytes_write.sum.per_second"));
    let (mut worst, mut worst_plain, mut compared) = (0.0f64, 0.0f64, 0);
    for row in folded.rows.iter().filter(|r| r.scope == PmScope::Range && r.depth == Some(0)) {
        if row.end_ns - row.start_ns < 1_000_000 {
            continue;
        }
        let reference = reference[&(row.path.clone(), row.instance.unwrap())];
        let bytes = row.values[read].unwrap().total.unwrap() + row.values[write].unwrap().total.unwrap();
        let plain = |m: usize| fold(&folded.samples, m, true, row.start_ns, row.end_ns).unwrap().total.unwrap();
        let plain_bytes = plain(read) + plain(write);
        worst = worst.max((bytes / reference - 1.0).abs());
        worst_plain = worst_plain.max((plain_bytes / reference - 1.0).abs());
        compared += 1;
        // Mean throughput is bytes over the range's GPU time.
        let duration = (row.end_ns - row.start_ns) as f64 * 1e-9;
        let mean = row.values[read].unwrap().mean + row.values[write].unwrap().mean;
        assert!((mean * duration / bytes - 1.0).abs() < 1e-9);
    }
    eprintln!(
        "{interval}: {compared} ranges, worst {:.2} % (overlap weighting alone {:.2} %)",
        worst * 100.0,
        worst_plain * 100.0
    );
    (worst, worst_plain, compared)
}

#[test]
fn recorded_h100_samples_give_per_range_dram_bytes_within_one_percent_at_every_interval() {
    for interval in ["20us", "100us", "200us"] {
        let (worst, _, compared) = worst_errors(interval);
        assert_eq!(compared, 20, "{interval}");
        // The acceptance bound is 5 %; this build gives 0.58, 0.40 and 0.78 %.
        assert!(worst < 0.01, "{interval}: worst {:.2} %", worst * 100.0);
    }
}

#[test]
fn overlap_weighting_alone_would_be_off_on_the_same_samples() {
    // What the fold did before: 13.8 % at 100 µs, 29.5 % at 200 µs.
    for (interval, at_least) in [("100us", 0.10), ("200us", 0.20)] {
        let (_, plain, _) = worst_errors(interval);
        assert!(plain > at_least, "{interval}: {plain}");
    }
}
