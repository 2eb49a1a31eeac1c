//! Synthetic benchmark workload: N back-to-back vector adds inside one gmprof range.
//!
//! Measures what profiling costs: run it once with `--no-profile` and once per mode and
//! compare `wall_ms`, the time from the first launch until the device has finished the
//! last one (the range pop included, `finish()` excluded; its time is reported separately
//! as `finish_ms`). Buffers are allocated and the kernel is loaded before timing starts.
//!
//! The last line of stdout is machine-readable:
//!
//! ```text
//! synthetic kernels=2000 mode=kernel_replay wall_ms=123.4 finish_ms=5.6 range_per_kernel=false size=1048576
//! ```
//!
//! `mode=none` marks an unprofiled run.
//!
//! ```text
//! cargo run --release --example synthetic -- --no-profile
//! cargo run --release --example synthetic -- --mode kernel_replay
//! cargo run --release --example synthetic -- --mode per_range --range-per-kernel --out out/synthetic
//! ```

#[path = "workloads/mod.rs"]
mod workloads;

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use workloads::Gpu;

#[derive(Parser, Debug)]
#[command(about = "Time N vector-add launches with and without gmprof")]
struct Args {
    /// Number of kernel launches.
    #[arg(long, default_value_t = 2000)]
    kernels: usize,

    /// Elements (f32) per vector add.
    #[arg(long, default_value_t = 1 << 20)]
    size: usize,

    /// Profiling mode: kernel_replay, per_kernel, per_range or trace.
    #[arg(long, default_value = "kernel_replay")]
    mode: String,

    /// Comma-separated metric names.
    #[arg(long, default_value = "dram__bytes_read.sum,dram__bytes_write.sum")]
    metrics: String,

    /// Run without gmprof.
    #[arg(long)]
    no_profile: bool,

    /// Also wrap every launch in its own range (`k0`, `k1`, ...) inside `synthetic`.
    #[arg(long)]
    range_per_kernel: bool,

    /// Do not flush activity buffers at range boundaries (measures what the flushes cost).
    #[arg(long, conflicts_with = "flush")]
    no_flush: bool,

    /// Flush activity buffers at every range boundary (the default in kernel_replay only).
    #[arg(long)]
    flush: bool,

    /// Time the same launches unprofiled first, in this process, and print the overhead.
    #[arg(long)]
    compare: bool,

    /// If given, write ranges.csv, kernels.csv and report.json here.
    #[arg(long)]
    out: Option<PathBuf>,

    /// Print the report summary.
    #[arg(long)]
    summary: bool,

    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,

    /// Before timing, run one replay of a single launch in a `warmup` range, so that
    /// one-time costs (CUPTI's first range-profiler start, about 1.5 s) stay out of wall_ms.
    #[arg(long)]
    warmup: bool,
}

fn main() {
    // Errors (no GPU, missing library, CUPTI refusing) are expected on badly set-up
    // machines: print them plainly instead of panicking with a backtrace.
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let metrics: Vec<String> =
        args.metrics.split(',').map(str::trim).filter(|m| !m.is_empty()).map(String::from).collect();

    // gmprof: parse the mode before touching the GPU, so a typo fails fast.
    let mode = if args.no_profile { None } else { Some(args.mode.parse::<gmprof::ProfilingMode>()?) };

    // The cudarc context must exist before the profiler: both use the primary context.
    let mut gpu = Gpu::new(args.device)?;
    gpu.prepare_vector_add(args.size)?;
    // One launch outside the timed region loads the (lazily loaded) kernel.
    gpu.vector_add(args.size)?;
    gpu.sync()?;

    let report_line = |mode: &str, wall_ms: f64, finish_ms: f64| {
        println!(
            "synthetic kernels={} mode={mode} wall_ms={wall_ms:.3} finish_ms={finish_ms:.3} \
             range_per_kernel={} size={}",
            args.kernels, args.range_per_kernel, args.size
        );
    };

    if args.no_profile {
        let start = Instant::now();
        for _ in 0..args.kernels {
            gpu.vector_add(args.size)?;
        }
        gpu.sync()?;
        let wall = start.elapsed();
        gpu.verify_vector_add(args.size)?;
        report_line("none", wall.as_secs_f64() * 1e3, 0.0);
        return Ok(());
    }

    // Formatted up front so string building is not timed.
    let kernel_ranges: Vec<String> =
        if args.range_per_kernel { (0..args.kernels).map(|i| format!("k{i}")).collect() } else { Vec::new() };

    // ===================================== gmprof ======================================
    let mode = mode.expect("parsed above unless --no-profile");
    let baseline = if args.compare {
        let start = Instant::now();
        for _ in 0..args.kernels {
            gpu.vector_add(args.size)?;
        }
        gpu.sync()?;
        Some(start.elapsed())
    } else {
        None
    };
    let mut builder = gmprof::Profiler::builder().mode(mode).metrics(metrics);
    if args.flush || args.no_flush {
        builder = builder.flush_on_range_boundaries(args.flush);
    }
    let prof = builder.build()?;

    println!("synthetic passes={}", prof.passes());
    if args.warmup {
        prof.replay(|_pass| -> Result<(), Box<dyn std::error::Error>> {
            let _w = prof.range("warmup");
            gpu.vector_add(args.size)?;
            gpu.sync()?;
            Ok(())
        })??;
    }
    let start = Instant::now();
    // One pass, or P passes of the same launches under user replay (per_kernel, per_range).
    prof.replay(|_pass| -> Result<(), Box<dyn std::error::Error>> {
        {
            let _all = prof.range("synthetic");
            for i in 0..args.kernels {
                let _k = kernel_ranges.get(i).map(|name| prof.range(name.as_str()));
                gpu.vector_add(args.size)?;
            }
        }
        gpu.sync()?;
        Ok(())
    })??;
    let wall = start.elapsed();

    let finish_start = Instant::now();
    let report = prof.finish()?;
    let finish = finish_start.elapsed();

    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        report.write_csv(out.join("ranges.csv"))?;
        report.write_kernels_csv(out.join("kernels.csv"))?;
        report.write_json(out.join("report.json"))?;
        println!("wrote {}/{{ranges.csv,kernels.csv,report.json}}", out.display());
    }
    if args.summary {
        println!("{}", report.summary());
    }
    if let Some(t) = report.meta.self_time {
        // GMPROF_SELF_TIME=1: gmprof's own share of the launch overhead.
        println!(
            "synthetic self_time api_callbacks={} api_callback_ns={} ns_per_launch={:.1} activity_buffers={} \
             activity_buffer_ns={}",
            t.api_callbacks,
            t.api_callback_ns,
            t.api_callback_ns as f64 / args.kernels.max(1) as f64,
            t.activity_buffers,
            t.activity_buffer_ns
        );
    }
    // ===================================================================================

    gpu.verify_vector_add(args.size)?;
    report_line(&args.mode, wall.as_secs_f64() * 1e3, finish.as_secs_f64() * 1e3);
    if let Some(base) = baseline {
        println!(
            "synthetic overhead mode={} unprofiled_ms={:.3} profiled_ms={:.3} ratio={:.3}",
            args.mode,
            base.as_secs_f64() * 1e3,
            wall.as_secs_f64() * 1e3,
            wall.as_secs_f64() / base.as_secs_f64()
        );
    }
    Ok(())
}
