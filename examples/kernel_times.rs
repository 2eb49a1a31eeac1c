//! Kernel-time workloads: what per-kernel and per-range GPU time gmprof reports, per mode,
//! for comparison with trace mode and with ncu.
//!
//! * `--workload mixed`: per step, vector adds of 2 to 10 µs, an MLP training step (cuBLAS
//!   GEMMs and element-wise kernels) and a memory-bound vector add of over 100 µs.
//! * `--workload cpu_bound`: per step, small vector adds each after some host work, so the
//!   GPU idles between kernels (a loop starved by its data loader).
//!
//! Each step runs inside a `step` range. One unprofiled step runs first (cuBLAS set-up,
//! lazy module loading), also with `--no-profile`, so `ncu` sees the same launches: pair
//! the last kernels of ncu's list with gmprof's kernels.csv. The last stdout line is
//! machine-readable:
//!
//! ```text
//! kernel_times workload=cpu_bound mode=per_kernel kernels=200 step_gpu_time_ns=... step_counter_window_ns=... flagged=0 wall_ms=...
//! ```
//!
//! `step_gpu_time_ns` is Σ `gpu_time_ns` of the `step` ranges (Σ kernel durations);
//! `step_counter_window_ns` is Σ their `gpu__time_duration.sum` column: the per-kernel CUPTI
//! ranges' windows in per_kernel (what gmprof used to report as kernel time), CUPTI's
//! measurement of each whole range in per_range.
//!
//! ```text
//! cargo run --release --example kernel_times -- --workload mixed --mode per_kernel --out out/mixed
//! ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum target/release/examples/kernel_times --workload mixed --no-profile
//! ```

#[path = "workloads/mod.rs"]
mod workloads;

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, ValueEnum};

use workloads::{Gpu, Mlp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Workload {
    Mixed,
    #[value(name = "cpu_bound")]
    CpuBound,
}

#[derive(Parser, Debug)]
#[command(about = "Kernel and range GPU time per gmprof mode, on a mixed or a CPU-bound workload")]
struct Args {
    /// Which workload.
    #[arg(long, value_enum, default_value = "mixed")]
    workload: Workload,

    /// Profiling mode: kernel_replay, per_kernel, per_range or trace.
    #[arg(long, default_value = "per_kernel")]
    mode: String,

    /// Comma-separated metric names (the counter modes).
    #[arg(long, default_value = "dram__bytes_read.sum,dram__bytes_write.sum")]
    metrics: String,

    /// Run without gmprof (for ncu).
    #[arg(long)]
    no_profile: bool,

    /// Profiled steps.
    #[arg(long, default_value_t = 8)]
    steps: usize,

    /// cpu_bound: kernels per step.
    #[arg(long, default_value_t = 20)]
    kernels_per_step: usize,

    /// cpu_bound: host work before each launch, µs.
    #[arg(long, default_value_t = 50)]
    host_us: u64,

    /// If given, write every report file here.
    #[arg(long)]
    out: Option<PathBuf>,

    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("GMPROF_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    }
    let metrics: Vec<String> =
        args.metrics.split(',').map(str::trim).filter(|m| !m.is_empty()).map(String::from).collect();
    let mode = if args.no_profile { None } else { Some(args.mode.parse::<gmprof::ProfilingMode>()?) };

    let mut gpu = Gpu::new(args.device)?;
    let mut mlp = match args.workload {
        Workload::Mixed => {
            gpu.prepare_vector_add(workloads::MIXED_LARGE)?;
            Some(Mlp::new(&gpu, workloads::mixed_mlp_config())?)
        }
        Workload::CpuBound => {
            gpu.prepare_vector_add(1 << 16)?;
            None
        }
    };
    let mut step = |gpu: &mut Gpu| -> Result<(), Box<dyn Error>> {
        match mlp.as_mut() {
            Some(mlp) => workloads::mixed_step(gpu, mlp)?,
            None => workloads::cpu_bound_step(gpu, args.kernels_per_step, args.host_us)?,
        }
        Ok(())
    };
    // Warm-up, outside profiling; ncu sees it too.
    step(&mut gpu)?;
    gpu.sync()?;

    let workload = args.workload.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned());
    let Some(mode) = mode else {
        let start = Instant::now();
        for _ in 0..args.steps {
            step(&mut gpu)?;
            gpu.sync()?;
        }
        println!(
            "kernel_times workload={workload} mode=none steps={} wall_ms={:.3}",
            args.steps,
            start.elapsed().as_secs_f64() * 1e3
        );
        return Ok(());
    };

    let prof = gmprof::Profiler::builder().mode(mode).metrics(metrics).build()?;
    let start = Instant::now();
    for _ in 0..args.steps {
        prof.replay(|_pass| -> Result<(), Box<dyn Error>> {
            {
                let _s = prof.range("step");
                step(&mut gpu)?;
            }
            gpu.sync()?;
            Ok(())
        })??;
    }
    let wall = start.elapsed();
    let report = prof.finish()?;
    if let Some(out) = &args.out {
        report.write_all(out)?;
    }
    println!("{}", report.summary());

    let window = report.metric_names().iter().position(|m| *m == gmprof::model::GPU_TIME_METRIC);
    let steps: Vec<_> = report.ranges.iter().filter(|r| r.path == "step").collect();
    let gpu_time: u64 = steps.iter().filter_map(|r| r.gpu_time_ns).sum();
    let counter_window: Option<f64> =
        window.map(|i| steps.iter().filter_map(|r| r.metrics.get(i).copied().flatten()).sum());
    println!(
        "kernel_times workload={workload} mode={} time_source={} kernels={} step_gpu_time_ns={gpu_time} \
         step_counter_window_ns={} flagged={} wall_ms={:.3}",
        mode.as_str(),
        report.meta.time_source,
        report.kernels.len(),
        counter_window.map_or_else(|| "-".to_owned(), |w| format!("{w:.0}")),
        report.meta.flagged_kernel_rows,
        wall.as_secs_f64() * 1e3
    );
    Ok(())
}
