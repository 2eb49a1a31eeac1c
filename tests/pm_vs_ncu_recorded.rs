//! Per-kernel DRAM read bytes from PM sampling against ncu's, on data recorded on a GPU.
//!
//! Recorded on an NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0, CUPTI 13.0.1),
//! 2026-11-26, by `SECTIONS=ncu bash scripts/gpu/pm-rate.sh`: llm.c's `train_gpt2cu` (GPT-2
//! d12, B=8, T=1024) under `gmprof run --mode trace --pm-sampling
//! dram__bytes_read.sum.per_second,dram__bytes_write.sum.per_second --pm-interval 20us`, and
//! under `ncu --cache-control none --clock-control none --metrics
//! dram__bytes_read.sum,gpu__time_duration.sum`. llm.c stops ncu's profiling after step 3, so
//! the data are the first 4 960 kernels (steps 0 to 3, validation included) of the 20-step run:
//! tests/data/pm/h100_llmc_4steps_trace_pm_20us.json.zst holds gmprof's report.json cut to
//! those kernels and the 22 122 samples around them (the folded rows left out: the test folds
//! again, with this build), and tests/data/pm/h100_llmc_4steps_ncu_dram_read.csv.zst ncu's
//! per-kernel bytes and times in launch order.
//!
//! Issue 29's acceptance pairs the two in launch order and bounds |gmprof / ncu - 1| over the
//! kernels reading 1 MB or more: of 50 µs or more, median 5 % and p90 15 %; of 20 µs or more,
//! median 10 %. `scripts/check/pm_vs_ncu.py` does the same on a GPU run's files.
use gmprof::analysis::pm_fold::{fold_report, PmScope};
use gmprof::report::Report;

#[path = "common/recorded.rs"]
mod recorded;

fn text(name: &str) -> String {
    recorded::unzstd("pm", name)
}

/// A kernel's base name, as ncu's and CUPTI's demanglers both give it (ncu writes
/// `void native::<unnamed>::f<float>(const float *)` where CUPTI writes
/// `void at::native::(anonymous namespace)::f<float>(float const*)`: both give `f`), as
/// scripts/check/pm_vs_ncu.py does.
fn short(name: &str) -> String {
    let name = name.replace("void ", "").replace("(anonymous namespace)::", "").replace("<unnamed>::", "");
    let name = name.split(['(', '<']).next().unwrap_or(&name).trim();
    name.rsplit("::").next().unwrap_or(name).to_owned()
}

/// (ncu's time ns, ncu's bytes, gmprof's bytes) of every kernel, paired in launch order.
fn pairs() -> Vec<(f64, f64, f64)> {
    let report: Report = serde_json::from_str(&text("h100_llmc_4steps_trace_pm_20us.json.zst")).unwrap();
    let pm = report.pm.as_ref().unwrap();
    let folded = fold_report(&pm.to_capture(), &report.ranges, &report.kernels);
    let metric = folded.metrics.iter().position(|m| m.name == "dram__bytes_read.sum.per_second").unwrap();
    let mut kernels: Vec<_> = folded.rows.iter().filter(|r| r.scope == PmScope::Kernel).collect();
    kernels.sort_by_key(|r| r.start_ns);
    let ncu = text("h100_llmc_4steps_ncu_dram_read.csv.zst");
    let mut reader = csv::Reader::from_reader(ncu.as_bytes());
    let ncu: Vec<(String, f64, f64)> = reader.deserialize().map(|r| r.unwrap()).collect();
    assert_eq!((ncu.len(), kernels.len()), (4960, 4960));
    ncu.iter()
        .zip(&kernels)
        .map(|((name, bytes, time), row)| {
            let ours = row.kernel_name.as_deref().unwrap();
            assert_eq!(&short(ours), name, "launch order differs");
            let total = row.values[metric].and_then(|v| v.total).expect("every kernel has a PM value");
            (*time, *bytes, total)
        })
        .collect()
}

/// Median and p90 of |gmprof / ncu - 1| over kernels of `floor_us` or more reading 1 MB or more.
fn errors(pairs: &[(f64, f64, f64)], floor_us: f64) -> (usize, f64, f64) {
    let mut e: Vec<f64> = pairs
        .iter()
        .filter(|(t, b, _)| *t >= floor_us * 1e3 && *b >= 1e6)
        .map(|(_, b, p)| (p / b - 1.0).abs())
        .collect();
    e.sort_by(f64::total_cmp);
    let at = |q: f64| e[((q * e.len() as f64) as usize).min(e.len() - 1)];
    (e.len(), at(0.5), at(0.9))
}

#[test]
fn per_kernel_dram_bytes_at_20us_meet_issue_29s_limits_against_ncu() {
    let pairs = pairs();
    let (n50, median50, p90_50) = errors(&pairs, 50.0);
    let (n20, median20, _) = errors(&pairs, 20.0);
    let (n200, median200, p90_200) = errors(&pairs, 200.0);
    eprintln!(
        ">= 200 us: {n200} kernels, median {:.2} %, p90 {:.2} %; >= 50 us: {n50}, median {:.2} %, p90 {:.2} %; \
         >= 20 us: {n20}, median {:.2} %",
        median200 * 100.0,
        p90_200 * 100.0,
        median50 * 100.0,
        p90_50 * 100.0,
        median20 * 100.0
    );
    assert_eq!((n200, n50, n20), (121, 1993, 3647));
    // This build: 0.21 / 1.41 %, 2.34 / 11.04 %, 4.13 %. Launches iterated to convergence on
    // their own windows gave 2.68 / 15.28 % at 50 µs, over the limit.
    assert!(median50 <= 0.05 && p90_50 <= 0.15, "50 us: median {median50}, p90 {p90_50}");
    assert!(median20 <= 0.10, "20 us: median {median20}");
    assert!(median200 <= 0.005 && p90_200 <= 0.02, "200 us: median {median200}, p90 {p90_200}");
    // The bytes are conserved: the paired kernels' sum is within 0.2 % of ncu's.
    let (ours, theirs) = pairs.iter().fold((0.0, 0.0), |(a, b), (_, n, p)| (a + p, b + n));
    assert!((ours / theirs - 1.0).abs() < 0.002, "{ours} vs {theirs}");
}
