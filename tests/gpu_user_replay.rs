//! GPU tests of the user-replay modes (per-kernel and per-range counters through CUPTI user
//! ranges) against kernel replay, with closure replay for multi-pass metric sets and
//! replay-mismatch flagging. Need an NVIDIA GPU; run with `--features gpu` and
//! `--test-threads=1`.
#![cfg(feature = "gpu")]

#[path = "../examples/workloads/mod.rs"]
mod workloads;

use gmprof::correlate::KernelStatus;
use gmprof::report::Report;
use gmprof::{Profiler, ProfilingMode};
use workloads::Gpu;

const READ: &str = "dram__bytes_read.sum";
const WRITE: &str = "dram__bytes_write.sum";
/// Needs 8 passes on GH100 (measured): forces user replay to run the work 8 times.
const EIGHT_PASS: [&str; 4] = [
    READ,
    WRITE,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
];

fn metric(report: &Report, name: &str) -> usize {
    report.metric_names().iter().position(|m| *m == name).unwrap_or_else(|| panic!("{name} not in report"))
}

fn assert_close(what: &str, got: f64, want: f64, tolerance: f64) {
    let rel = (got - want).abs() / want;
    assert!(rel <= tolerance, "{what}: got {got}, want {want} (off by {:.2}%)", rel * 100.0);
}

/// Three ranges: `big` (one add of n), `halves` (two adds of n/2) inside `step`.
fn workload(prof: &Profiler, gpu: &mut Gpu, n: usize) {
    let _step = prof.range("step");
    {
        let _big = prof.range("big");
        gpu.vector_add(n).unwrap();
    }
    {
        let _halves = prof.range("halves");
        gpu.vector_add(n / 2).unwrap();
        gpu.vector_add(n / 2).unwrap();
    }
    gpu.sync().unwrap();
}

fn profile(mode: ProfilingMode, gpu: &mut Gpu, n: usize) -> Report {
    // Per-range measures two nesting levels: CUPTI needs a pass per level, so the work is
    // replayed twice.
    let levels = if mode == ProfilingMode::PerRange { 2 } else { 1 };
    let prof =
        Profiler::builder().mode(mode).metrics([READ, WRITE]).max_nesting_levels(levels).build().expect("profiler");
    assert_eq!(prof.passes(), levels as usize);
    prof.replay(|_| workload(&prof, gpu, n)).expect("replay");
    let report = prof.finish().expect("report");
    println!("{}", report.summary());
    assert_eq!(report.meta.mode, mode);
    assert_eq!(report.meta.dropped_counter_ranges, 0);
    report
}

fn per_kernel_values(report: &Report, name: &str) -> Vec<f64> {
    let i = metric(report, name);
    report.kernels.iter().map(|k| k.metrics[i].unwrap_or_else(|| panic!("{name} of {k:?}"))).collect()
}

#[test]
fn per_kernel_mode_matches_kernel_replay_within_two_percent() {
    let n = 1 << 24;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    let replayed = profile(ProfilingMode::KernelReplay, &mut gpu, n);
    let fast = profile(ProfilingMode::PerKernel, &mut gpu, n);
    assert_eq!(fast.meta.flagged_kernel_rows, 0, "warnings: {:?}", fast.meta.warnings);
    assert_eq!(fast.kernels.len(), 3);
    let (a, b) = (per_kernel_values(&replayed, READ), per_kernel_values(&fast, READ));
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_close(&format!("kernel {k} {READ}, per_kernel vs kernel_replay"), *y, *x, 0.02);
    }
    // DRAM writes happen when L2 evicts dirty lines, which can be after the kernel ends, so
    // each mode attributes part of them differently (measured on an H200: 82.5 MB per-kernel,
    // 80.6 MB kernel replay for a 67.1 MB output). Same order, not the same bytes.
    let (a, b) = (per_kernel_values(&replayed, WRITE), per_kernel_values(&fast, WRITE));
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_close(&format!("kernel {k} {WRITE}, per_kernel vs kernel_replay"), *y, *x, 0.25);
    }
    // Known answer: an add over n floats reads 8n bytes.
    assert_close("per-kernel read of the big add", per_kernel_values(&fast, READ)[0], 8.0 * n as f64, 0.02);
    assert!(fast.kernels.iter().all(|k| k.duration_ns.unwrap_or(0) > 0), "time from gpu__time_duration");
}

#[test]
fn per_range_mode_measures_nested_ranges_like_the_sum_of_kernel_replay() {
    let n = 1 << 24;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    let replayed = profile(ProfilingMode::KernelReplay, &mut gpu, n);
    let measured = profile(ProfilingMode::PerRange, &mut gpu, n);
    assert_eq!(measured.meta.orphan_counter_ranges, 0, "warnings: {:?}", measured.meta.warnings);
    // Reads only: see above for why writes are attributed by L2 eviction timing.
    for m in [READ] {
        let (ri, mi) = (metric(&replayed, m), metric(&measured, m));
        for path in ["step", "step/big", "step/halves"] {
            let want: f64 = replayed
                .kernels
                .iter()
                .filter(|k| k.range_path.starts_with(path))
                .map(|k| k.metrics[ri].unwrap())
                .sum();
            let row = measured.ranges.iter().find(|r| r.path == path).unwrap_or_else(|| panic!("no {path} row"));
            assert_eq!(row.kernel_count, replayed.ranges.iter().find(|r| r.path == path).unwrap().kernel_count);
            let got = row.metrics[mi].unwrap_or_else(|| panic!("{path}: no measured {m}"));
            assert_close(&format!("{path} {m}: per_range vs Σ kernel_replay"), got, want, 0.02);
        }
    }
    let step = measured.ranges.iter().find(|r| r.path == "step").unwrap();
    assert!(step.gpu_time_ns.unwrap_or(0) > 0, "range time from gpu__time_duration");
    assert_eq!(measured.kernels.len(), 3, "pass 0's kernels only");
    // Known answer: the big add writes its 4n-byte output within its range.
    let big = measured.ranges.iter().find(|r| r.path == "step/big").unwrap();
    assert_close("step/big writes", big.metrics[metric(&measured, WRITE)].unwrap(), 4.0 * n as f64, 0.05);

    // One level (the default, no replay needed): the outer range only.
    let prof = Profiler::builder().mode(ProfilingMode::PerRange).metrics([READ, WRITE]).build().expect("profiler");
    assert_eq!(prof.passes(), 1);
    workload(&prof, &mut gpu, n);
    let one = prof.finish().expect("report");
    let read = metric(&one, READ);
    let row = |p: &str| one.ranges.iter().find(|r| r.path == p).unwrap().metrics[read];
    assert_close("outer range, one level", row("step").expect("measured"), 8.0 * n as f64 * 2.0, 0.02);
    assert_eq!(row("step/big"), None, "deeper than the measured levels: no counters of its own");
}

#[test]
fn closure_replay_collects_an_eight_pass_set_in_both_user_modes() {
    let n = 1 << 24;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    for mode in [ProfilingMode::PerKernel, ProfilingMode::PerRange] {
        let prof = Profiler::builder().mode(mode).metrics(EIGHT_PASS).build().expect("profiler");
        let passes = prof.passes();
        assert!(passes > 1, "the set needs several passes, got {passes}");
        let mut runs = Vec::new();
        prof.replay(|pass| {
            runs.push(pass);
            workload(&prof, &mut gpu, n);
        })
        .expect("replay");
        assert_eq!(runs, (0..passes).collect::<Vec<_>>(), "the closure runs once per pass");
        let report = prof.finish().expect("report");
        println!("{mode:?}: {passes} passes\n{}", report.summary());
        assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);
        assert!(!report.meta.warnings.iter().any(|w| w.contains("passes submitted")), "{:?}", report.meta.warnings);
        assert_eq!(report.kernels.len(), 3, "pass 0's kernels only");
        assert_eq!(report.ranges.iter().filter(|r| r.path == "step").count(), 1, "pass 0's ranges only");
        let read = metric(&report, READ);
        let sm = metric(&report, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
        // Per-range measures the outermost level (the default); per-kernel sums kernels.
        let (path, reads) = if mode == ProfilingMode::PerRange { ("step", 16.0) } else { ("step/big", 8.0) };
        let row = report.ranges.iter().find(|r| r.path == path).unwrap();
        let got = row.metrics[read].unwrap_or_else(|| panic!("{mode:?}: no reads for {path}"));
        assert_close(&format!("{mode:?}: read bytes of {path}, merged over passes"), got, reads * n as f64, 0.02);
        let pct = row.metrics[sm].expect("a throughput from another pass");
        assert!(pct > 0.0 && pct <= 100.0, "sm throughput {pct}%");
    }
}

#[test]
fn replay_passes_that_run_other_kernels_are_flagged_not_merged() {
    let n = 1 << 24;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    let prof = Profiler::builder().mode(ProfilingMode::PerKernel).metrics(EIGHT_PASS).build().expect("profiler");
    prof.replay(|pass| {
        let _r = prof.range("step");
        gpu.vector_add(n).unwrap();
        // Pass 3 runs a smaller grid in the second position.
        gpu.vector_add(if pass == 3 { n / 4 } else { n / 2 }).unwrap();
        gpu.sync().unwrap();
    })
    .expect("replay");
    let report = prof.finish().expect("report");
    println!("{}\n{:?}", report.summary(), report.meta.warnings);
    assert_eq!(report.kernels.len(), 2);
    assert_eq!(report.kernels[0].status, KernelStatus::Ok);
    assert_eq!(report.kernels[1].status, KernelStatus::ReplayMismatch);
    let read = metric(&report, READ);
    assert!(report.kernels[1].metrics[read].is_none(), "a mismatched kernel has no merged values");
    assert_close(
        "the matching kernel keeps its values",
        report.kernels[0].metrics[read].unwrap(),
        8.0 * n as f64,
        0.02,
    );
    assert!(report.meta.warnings.iter().any(|w| w.contains("replay pass 3")), "{:?}", report.meta.warnings);
}

#[test]
fn per_kernel_mode_has_no_kernel_limit() {
    let kernels = 5000;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.reset_tiny_count().unwrap();
    let prof = Profiler::builder()
        .mode(ProfilingMode::PerKernel)
        .metrics([READ])
        .max_ranges_per_cycle(1000)
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
    assert_eq!(gpu.tiny_count().unwrap(), kernels as i32);
    assert_eq!(report.kernels.len(), kernels);
    assert_eq!(report.meta.counter_cycles, 5, "cycled every 1000 ranges");
    assert_eq!(report.meta.dropped_counter_ranges, 0);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);
}

#[test]
fn iteration_replay_takes_the_passes_from_training_steps() {
    let n = 1 << 24;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    // Too few steps for the set: a clear error up front that states the passes.
    let err = Profiler::builder()
        .mode(ProfilingMode::PerKernel)
        .metrics(EIGHT_PASS)
        .iteration_replay("train_step", 3)
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("replay passes, but the program runs only 3 instance(s) of 'train_step'"), "{err}");

    for mode in [ProfilingMode::PerKernel, ProfilingMode::PerRange] {
        let prof = Profiler::builder()
            .mode(mode)
            .metrics(EIGHT_PASS)
            .iteration_replay("train_step", 100)
            .build()
            .expect("profiler");
        let passes = prof.passes();
        assert!(passes > 1);
        // One full round, then one step of a round the program never finishes.
        for step in 0..=passes {
            let _s = prof.range("train_step");
            gpu.vector_add(n).unwrap();
            // Per-kernel: step 3 runs a different grid: flagged, never merged.
            let odd = step == 3 && mode == ProfilingMode::PerKernel;
            gpu.vector_add(if odd { n / 4 } else { n / 2 }).unwrap();
            gpu.sync().unwrap();
        }
        let report = prof.finish().expect("report");
        println!("{mode:?}: {passes} passes\n{}\n{:?}", report.summary(), report.meta.warnings);
        let steps: Vec<_> = report.ranges.iter().filter(|r| r.path == "train_step").collect();
        assert_eq!(steps.len(), 2, "the first instance of each round is the report's");
        assert_eq!(report.kernels.len(), 4);
        let read = metric(&report, READ);
        let w = &report.meta.warnings;
        assert!(w.iter().any(|w| w.contains("ended after 1 of")), "{w:?}");
        if mode == ProfilingMode::PerKernel {
            assert!(w.iter().any(|w| w.contains("replay pass 3")), "{w:?}");
            assert_eq!(report.kernels[0].status, KernelStatus::Ok);
            assert_close(
                "first kernel, merged over steps",
                report.kernels[0].metrics[read].unwrap(),
                8.0 * n as f64,
                0.02,
            );
            assert_eq!(report.kernels[1].status, KernelStatus::ReplayMismatch);
            assert_eq!(report.kernels[2].status, KernelStatus::MissingCounters, "the unfinished round");
        } else {
            let got = steps[0].metrics[read].expect("the first step, measured over a round of steps");
            assert_close("train_step reads", got, 12.0 * n as f64, 0.02);
            assert!(steps[1].metrics[read].is_none(), "the unfinished round");
        }
    }
}
