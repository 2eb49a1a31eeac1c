//! GPU tests of kernel and range time in the user-replay modes against trace mode, and of
//! background counter evaluation. Need an NVIDIA GPU; run with `--features gpu` and
//! `--test-threads=1`.
//!
//! Trace mode's activity timestamps are the reference (no counters, kernels run as they
//! would). The same launches run once per mode in one process, and kernels are paired in
//! launch order.
#![cfg(feature = "gpu")]

#[path = "../examples/workloads/mod.rs"]
mod workloads;

use gmprof::correlate::{KernelStatus, TimeSource};
use gmprof::report::Report;
use gmprof::{Profiler, ProfilingMode};
use workloads::{quantile, Gpu, Mlp};

const READ: &str = "dram__bytes_read.sum";
const WRITE: &str = "dram__bytes_write.sum";

/// Targets of the issue: per-kernel time within 3 % of the reference at the median and 8 %
/// at the 90th percentile, for kernels of at least [`SHORT_NS`].
const MEDIAN_TOLERANCE: f64 = 0.03;
const P90_TOLERANCE: f64 = 0.08;
/// Below this, kernels are compared in ns: activity timestamps come in steps of 32 ns on an
/// H200 and two runs of a 1 µs kernel differ by up to about 200 ns (trace against trace as
/// well), which is 20 % of it.
const SHORT_NS: u64 = 2000;
/// The bound for kernels shorter than [`SHORT_NS`], at the 90th percentile. (On 2026-11-23
/// per_range measured 256 ns against a first bound of 250 ns: 8 timestamp steps.)
const SHORT_P90_NS: f64 = 400.0;

fn profile(mode: ProfilingMode, steps: usize, mut step: impl FnMut()) -> Report {
    let mut builder = Profiler::builder().mode(mode);
    if mode != ProfilingMode::Trace {
        builder = builder.metrics([READ, WRITE]);
    }
    let prof = builder.build().expect("profiler");
    for _ in 0..steps {
        prof.replay(|_| {
            let _s = prof.range("step");
            step();
        })
        .expect("replay");
    }
    let report = prof.finish().expect("report");
    println!("{}", report.summary());
    assert_eq!(report.meta.mode, mode);
    assert_eq!(report.meta.dropped_activity_records, 0);
    assert_eq!(report.meta.dropped_counter_ranges, 0);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{:?}", report.meta.warnings);
    report
}

/// Per kernel, paired in launch order with the kernel names checked pair by pair:
/// |duration / reference − 1| of kernels of at least [`SHORT_NS`] in the reference, and
/// |duration − reference| in ns of the shorter ones.
fn differences(reference: &Report, other: &Report) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(reference.kernels.len(), other.kernels.len(), "the same launches in both modes");
    let (mut relative, mut absolute) = (Vec::new(), Vec::new());
    for (r, o) in reference.kernels.iter().zip(&other.kernels) {
        assert_eq!(r.kernel_name, o.kernel_name, "launch order pairs the same kernels");
        let (r_ns, o_ns) = (r.duration_ns.expect("trace duration"), o.duration_ns.expect("duration"));
        if r_ns >= SHORT_NS {
            relative.push((o_ns as f64 / r_ns as f64 - 1.0).abs());
        } else {
            absolute.push((o_ns as f64 - r_ns as f64).abs());
        }
    }
    (relative, absolute)
}

fn step_gpu_time(report: &Report) -> u64 {
    report.ranges.iter().filter(|r| r.path == "step").map(|r| r.gpu_time_ns.expect("step GPU time")).sum()
}

/// Σ of the `gpu__time_duration.sum` column over the `step` ranges.
fn step_counter_window(report: &Report) -> f64 {
    let i = report.metric_names().iter().position(|m| *m == gmprof::model::GPU_TIME_METRIC).expect("time metric");
    report.ranges.iter().filter(|r| r.path == "step").map(|r| r.metrics[i].expect("window")).sum()
}

#[test]
fn user_replay_kernel_times_match_trace_mode() {
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(workloads::MIXED_LARGE).unwrap();
    let mut mlp = Mlp::new(&gpu, workloads::mixed_mlp_config()).expect("MLP");
    let mut step = || {
        workloads::mixed_step(&mut gpu, &mut mlp).unwrap();
        gpu.sync().unwrap();
    };
    step(); // cuBLAS set-up and lazy module loading, outside every session
    let steps = 6;
    let trace = profile(ProfilingMode::Trace, steps, &mut step);
    let per_kernel = profile(ProfilingMode::PerKernel, steps, &mut step);
    let per_range = profile(ProfilingMode::PerRange, steps, &mut step);
    assert!(trace.kernels.len() >= steps * 20, "{} kernels", trace.kernels.len());

    for report in [&per_kernel, &per_range] {
        let mode = report.meta.mode;
        assert_eq!(report.meta.time_source, TimeSource::Activity);
        let (diffs, short) = differences(&trace, report);
        let (median, p90) = (quantile(&diffs, 0.5).unwrap(), quantile(&diffs, 0.9).unwrap());
        println!(
            "{}: {} kernels of >= 2 us, |Δ| against trace median {:.2}% p90 {:.2}% max {:.2}%; {} shorter \
             kernels, |Δ| median {:.0} ns p90 {:.0} ns max {:.0} ns",
            mode.as_str(),
            diffs.len(),
            median * 100.0,
            p90 * 100.0,
            quantile(&diffs, 1.0).unwrap() * 100.0,
            short.len(),
            quantile(&short, 0.5).unwrap_or(0.0),
            quantile(&short, 0.9).unwrap_or(0.0),
            quantile(&short, 1.0).unwrap_or(0.0)
        );
        assert!(diffs.len() >= steps * 15, "most kernels are of >= 2 us");
        assert!(median <= MEDIAN_TOLERANCE, "{}: median |Δ| {:.2}%", mode.as_str(), median * 100.0);
        assert!(p90 <= P90_TOLERANCE, "{}: p90 |Δ| {:.2}%", mode.as_str(), p90 * 100.0);
        let short_p90 = quantile(&short, 0.9).unwrap_or(0.0);
        assert!(short_p90 <= SHORT_P90_NS, "{}: p90 |Δ| of short kernels {short_p90} ns", mode.as_str());
        // Kernels never overlap here (one stream): busy time is the sum of kernel times.
        let step_row = report.ranges.iter().find(|r| r.path == "step").expect("step");
        assert!(step_row.gpu_busy_ns.is_some_and(|b| b <= step_row.gpu_time_ns.unwrap()));
    }

    // per_kernel keeps its CUPTI ranges' duration: the kernel plus the wait for its launch.
    let extra: Vec<f64> = per_kernel
        .kernels
        .iter()
        .map(|k| k.range_duration_ns.expect("range duration") as f64 - k.duration_ns.unwrap() as f64)
        .collect();
    println!(
        "per_kernel range_duration_ns - duration_ns: p10 {:.0} ns, median {:.0} ns, p90 {:.0} ns",
        quantile(&extra, 0.1).unwrap(),
        quantile(&extra, 0.5).unwrap(),
        quantile(&extra, 0.9).unwrap()
    );
    assert!(quantile(&extra, 0.5).unwrap() > 0.0, "the range opens before its kernel starts");
    // DRAM reads of the large add: 8 bytes per element, as kernel_replay and ncu measure.
    let read = per_kernel.metric_names().iter().position(|m| *m == READ).unwrap();
    let large = per_kernel
        .kernels
        .iter()
        .filter(|k| {
            k.kernel_name.as_deref() == Some("vector_add")
                && k.grid.is_some_and(|g| g[0] as usize * 256 >= workloads::MIXED_LARGE)
        })
        .map(|k| k.metrics[read].unwrap())
        .collect::<Vec<_>>();
    assert_eq!(large.len(), steps);
    for bytes in large {
        let want = 8.0 * workloads::MIXED_LARGE as f64;
        assert!((bytes / want - 1.0).abs() <= 0.02, "large add read {bytes} bytes, want {want}");
    }
}

#[test]
fn cpu_bound_range_gpu_time_matches_trace_mode() {
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(1 << 16).unwrap();
    let mut step = || {
        workloads::cpu_bound_step(&mut gpu, 20, 50).unwrap();
        gpu.sync().unwrap();
    };
    step();
    let steps = 10;
    let trace = profile(ProfilingMode::Trace, steps, &mut step);
    let reference = step_gpu_time(&trace) as f64;
    for mode in [ProfilingMode::PerKernel, ProfilingMode::PerRange] {
        let report = profile(mode, steps, &mut step);
        let gpu_time = step_gpu_time(&report) as f64;
        println!(
            "{}: step GPU time {:.1} us against trace {:.1} us ({:+.2}%); the counter windows sum to {:.1} us",
            mode.as_str(),
            gpu_time / 1e3,
            reference / 1e3,
            (gpu_time / reference - 1.0) * 100.0,
            step_counter_window(&report) / 1e3
        );
        assert!((gpu_time / reference - 1.0).abs() <= 0.10, "{}: {gpu_time} ns against {reference} ns", mode.as_str());
    }
}

/// Background evaluation gives the same counters as evaluation on the launching thread,
/// across many cycles, with nothing dropped or flagged.
#[test]
fn background_evaluation_keeps_every_counter() {
    // 3 × 64 MiB: more than L2, so every add reads its 8n bytes from DRAM.
    let n = 1 << 24;
    let kernels = 1000;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.vector_add(n).unwrap();
    gpu.sync().unwrap();
    let mut reads = Vec::new();
    for background in [true, false] {
        let prof = Profiler::builder()
            .mode(ProfilingMode::PerKernel)
            .metrics([READ])
            .max_ranges_per_cycle(100)
            .background_evaluation(background)
            .build()
            .expect("profiler");
        {
            let _r = prof.range("many");
            for _ in 0..kernels {
                gpu.vector_add(n).unwrap();
            }
            gpu.sync().unwrap();
        }
        let report = prof.finish().expect("report");
        assert_eq!(report.kernels.len(), kernels);
        assert_eq!(report.meta.counter_cycles, 10, "cycled every 100 ranges");
        assert_eq!(report.meta.dropped_counter_ranges, 0);
        assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);
        assert!(report.kernels.iter().all(|k| k.status == KernelStatus::Ok));
        let i = report.metric_names().iter().position(|m| *m == READ).unwrap();
        let values: Vec<f64> = report.kernels.iter().map(|k| k.metrics[i].expect("read bytes")).collect();
        for v in &values {
            let want = 8.0 * n as f64;
            assert!((v / want - 1.0).abs() <= 0.02, "read {v} bytes, want {want}");
        }
        reads.push(values);
    }
    let total = |v: &Vec<f64>| v.iter().sum::<f64>();
    assert!((total(&reads[0]) / total(&reads[1]) - 1.0).abs() <= 0.01);
}

/// Kernel replay numbers CUPTI's auto ranges across cycles; the evaluator thread rebases
/// the names per cycle, so every row still passes the ordinal check.
#[test]
fn kernel_replay_cycles_through_the_evaluator() {
    let kernels = 120;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.reset_tiny_count().unwrap();
    let prof = Profiler::builder()
        .mode(ProfilingMode::KernelReplay)
        .metrics([READ])
        .max_ranges_per_cycle(50)
        .build()
        .expect("profiler");
    {
        let _r = prof.range("many");
        for _ in 0..kernels {
            gpu.tiny_kernel().unwrap();
        }
        gpu.sync().unwrap();
    }
    let report = prof.finish().expect("report");
    assert_eq!(gpu.tiny_count().unwrap() as usize, kernels);
    assert_eq!(report.meta.time_source, TimeSource::GpuTimeDuration);
    assert_eq!(report.meta.counter_cycles, 3);
    assert_eq!(report.meta.dropped_counter_ranges, 0);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);
    assert!(report.kernels.iter().all(|k| k.duration_ns.is_some() && k.range_duration_ns == k.duration_ns));
}
