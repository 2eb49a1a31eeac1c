//! Profile a small but real training loop with gmprof.
//!
//! A two-layer MLP (cuBLAS GEMMs plus NVRTC-compiled kernels, see `workloads/mod.rs`)
//! is trained with SGD on a synthetic batch. Every step is wrapped in a `train_step` range
//! containing `forward`, `backward` and `update` ranges, and gmprof reports the chosen
//! hardware metrics for each range and each kernel:
//!
//! * `OUT/ranges.csv`: one row per range;
//! * `OUT/kernels.csv`: one row per kernel launch;
//! * `OUT/report.json`: everything, machine-readable;
//! * a summary table and the wall time on stdout.
//!
//! The loss is printed as training goes; it should fall from about ln(classes) and be the
//! same with and without profiling.
//!
//! Needs an NVIDIA GPU, the CUDA 13 driver, and libnvrtc/libcublas/libcupti on the library
//! path (e.g. `LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64`).
//!
//! ```text
//! cargo run --release --example train_loop
//! cargo run --release --example train_loop -- --mode per_range --steps 10 --out out/per_range
//! cargo run --release --example train_loop -- --metrics sm__throughput.avg.pct_of_peak_sustained_elapsed
//! cargo run --release --example train_loop -- --no-profile     # baseline wall time
//! ```

#[path = "workloads/mod.rs"]
mod workloads;

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use workloads::{Gpu, Mlp, MlpConfig};

#[derive(Parser, Debug)]
#[command(about = "Profile an MLP training loop with gmprof")]
struct Args {
    /// Profiling mode: kernel_replay, per_kernel, per_range or trace.
    #[arg(long, default_value = "kernel_replay")]
    mode: String,

    /// Comma-separated metric names.
    #[arg(long, default_value = "dram__bytes_read.sum,dram__bytes_write.sum")]
    metrics: String,

    /// Training steps to profile.
    #[arg(long, default_value_t = 5)]
    steps: usize,

    /// Unprofiled steps before profiling starts, so one-time work (cuBLAS heuristics and
    /// workspace, lazy kernel loading) stays out of the report.
    #[arg(long, default_value_t = 1)]
    warmup: usize,

    /// Directory for ranges.csv, kernels.csv and report.json.
    #[arg(long, default_value = "out")]
    out: PathBuf,

    /// Run without gmprof and only report the wall time.
    #[arg(long)]
    no_profile: bool,

    /// With a multi-pass metric set in per_kernel or per_range: take the replay passes from
    /// successive training steps (iteration replay on `train_step`) instead of re-running
    /// each step (closure replay).
    #[arg(long)]
    iteration_replay: bool,

    /// Synchronize the GPU before each range closes, so ranges cover their kernels' GPU time
    /// (gmprof's `synchronize_on_pop`). Without it, ranges measure CPU enqueue time.
    #[arg(long)]
    sync_ranges: bool,

    /// Run the same steps unprofiled first, in this process, and print the overhead ratio.
    #[arg(long)]
    compare: bool,

    /// Synchronize after every step and print the p50, p99 and max step time (the periodic
    /// stall check).
    #[arg(long)]
    step_times: bool,

    /// Upper bound on counter ranges per cycle (gmprof's `max_ranges_per_cycle`; 2000 by
    /// default). Smaller values cycle the counter image more often.
    #[arg(long)]
    max_ranges_per_cycle: Option<usize>,

    /// Evaluate full counter images on the launching thread (gmprof's
    /// `background_evaluation(false)`), as gmprof did before it had a background evaluator.
    #[arg(long)]
    sync_evaluate: bool,

    /// Extra tiny kernels per step (in the `update` range), to give a step as many launches
    /// as a transformer's (about 400): `--extra-kernels 384`.
    #[arg(long, default_value_t = 0)]
    extra_kernels: usize,

    /// Print the loss every N steps (0: never).
    #[arg(long, default_value_t = 1)]
    log_every: usize,

    /// SGD learning rate.
    #[arg(long, default_value_t = workloads::DEFAULT_LR)]
    lr: f32,

    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,

    /// Also sample PM counters (`default` or PM-sampling metric names) and fold them into
    /// every range and kernel (writes pm.csv); an add-on to `--mode trace`.
    #[arg(long)]
    pm_sampling: Option<String>,

    /// Write trace.json in the Kineto form, and time each launch, memcpy and memset call as
    /// `gmprof run --trace-format kineto` does (`ProfilerBuilder::time_api_calls`): with
    /// `--compare`, what timing the calls costs.
    #[arg(long)]
    kineto: bool,

    /// PM sampling interval (e.g. 20us, 20000, 30000cycles).
    #[arg(long, default_value = "100us")]
    pm_interval: String,

    /// Batch size.
    #[arg(long, default_value_t = MlpConfig::default().batch)]
    batch: usize,

    /// Input features.
    #[arg(long, default_value_t = MlpConfig::default().input)]
    input: usize,

    /// Hidden units.
    #[arg(long, default_value_t = MlpConfig::default().hidden)]
    hidden: usize,

    /// Output classes.
    #[arg(long, default_value_t = MlpConfig::default().classes)]
    classes: usize,
}

fn main() {
    // Errors (no GPU, missing library, CUPTI refusing) are expected on badly set-up
    // machines: print them plainly instead of panicking with a backtrace.
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Prints the step-time line of `--step-times`.
fn print_step_times(mode: &str, times: &[f64]) {
    let q = |p| workloads::quantile(times, p).unwrap_or(f64::NAN);
    let (p50, p99) = (q(0.5), q(0.99));
    println!(
        "train_loop step_times mode={mode} steps={} p50_ms={p50:.3} p99_ms={p99:.3} max_ms={:.3} p99_over_p50={:.3}",
        times.len(),
        q(1.0),
        p99 / p50
    );
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    // GMPROF_LOG=gmprof=info shows where each counter cycle's time went.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("GMPROF_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    }
    let metrics: Vec<String> =
        args.metrics.split(',').map(str::trim).filter(|m| !m.is_empty()).map(String::from).collect();

    // gmprof: parse the mode before touching the GPU, so a typo fails fast.
    let mode = if args.no_profile { None } else { Some(args.mode.parse::<gmprof::ProfilingMode>()?) };

    // The cudarc context must exist before the profiler: both use the primary context.
    let mut gpu = Gpu::new(args.device)?;
    let cfg = MlpConfig {
        batch: args.batch,
        input: args.input,
        hidden: args.hidden,
        classes: args.classes,
        ..MlpConfig::default()
    };
    let mut mlp = Mlp::new(&gpu, cfg)?;
    println!(
        "train_loop: {} | MLP B={} D={} H={} C={} | lr={} steps={} warmup={}",
        gpu.name()?,
        cfg.batch,
        cfg.input,
        cfg.hidden,
        cfg.classes,
        args.lr,
        args.steps,
        args.warmup
    );

    for _ in 0..args.warmup {
        mlp.step(args.lr)?;
    }
    gpu.sync()?;

    let log = |step: usize, mlp: &Mlp| -> Result<(), Box<dyn Error>> {
        if args.log_every > 0 && (step % args.log_every == 0 || step + 1 == args.steps) {
            println!("step {step:>4}  loss {:.5}", mlp.loss()?);
        }
        Ok(())
    };

    let unprofiled = |mlp: &mut Mlp, gpu: &mut Gpu| -> Result<std::time::Duration, Box<dyn Error>> {
        let start = Instant::now();
        let mut times = Vec::new();
        for step in 0..args.steps {
            let t0 = Instant::now();
            mlp.forward()?;
            mlp.backward()?;
            mlp.update(args.lr)?;
            for _ in 0..args.extra_kernels {
                gpu.tiny_kernel()?;
            }
            // Reading the loss synchronises; that is part of the loop in both variants.
            log(step, mlp)?;
            if args.step_times {
                gpu.sync()?;
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        gpu.sync()?;
        if args.step_times {
            print_step_times("none", &times);
        }
        Ok(start.elapsed())
    };
    if args.no_profile {
        let wall = unprofiled(&mut mlp, &mut gpu)?;
        println!(
            "wall time: {:.3} ms for {} steps ({:.3} ms/step), unprofiled",
            wall.as_secs_f64() * 1e3,
            args.steps,
            wall.as_secs_f64() * 1e3 / args.steps.max(1) as f64
        );
        return Ok(());
    }
    let baseline = if args.compare { Some(unprofiled(&mut mlp, &mut gpu)?) } else { None };

    // ===================================== gmprof ======================================
    let mode = mode.expect("parsed above unless --no-profile");
    let mut builder = gmprof::Profiler::builder()
        .mode(mode)
        .metrics(metrics)
        .synchronize_on_pop(args.sync_ranges)
        .background_evaluation(!args.sync_evaluate)
        .time_api_calls(args.kineto);
    if let Some(n) = args.max_ranges_per_cycle {
        builder = builder.max_ranges_per_cycle(n);
    }
    if args.iteration_replay {
        builder = builder.iteration_replay("train_step", args.steps);
    }
    if let Some(metrics) = &args.pm_sampling {
        builder = builder.pm_sampling(Some(gmprof::capture::pm_sampling::PmSamplingConfig {
            metrics: gmprof::capture::pm_sampling::parse_metrics(metrics),
            interval: gmprof::capture::pm_sampling::parse_interval(&args.pm_interval)?,
            ..Default::default()
        }));
    }
    let prof = builder.build()?;
    println!("metric set: {} pass(es), mode {}", prof.passes(), prof.mode().as_str());

    let start = Instant::now();
    let mut times = Vec::new();
    for step in 0..args.steps {
        let t0 = Instant::now();
        // With a metric set that needs P passes under user replay (per_kernel, per_range),
        // the step runs P times and CUPTI merges the passes; otherwise it runs once.
        let step_body = |_pass: usize, mlp: &mut Mlp, gpu: &mut Gpu| -> Result<(), Box<dyn std::error::Error>> {
            let _step = prof.range("train_step");
            {
                let _r = prof.range("forward");
                mlp.forward()?;
            }
            {
                let _r = prof.range("backward");
                mlp.backward()?;
            }
            {
                let _r = prof.range("update");
                mlp.update(args.lr)?;
                for _ in 0..args.extra_kernels {
                    gpu.tiny_kernel()?;
                }
            }
            Ok(())
        };
        if args.iteration_replay {
            step_body(0, &mut mlp, &mut gpu)?;
        } else {
            prof.replay(|pass| step_body(pass, &mut mlp, &mut gpu))??;
        }
        // Outside train_step, so the loss read-back copy is not attributed to the step.
        log(step, &mlp)?;
        if args.step_times {
            gpu.sync()?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    gpu.sync()?;
    let loop_time = start.elapsed();
    if args.step_times {
        print_step_times(&args.mode, &times);
    }
    let report = prof.finish()?;
    let total = start.elapsed();

    std::fs::create_dir_all(&args.out)?;
    report.write_csv(args.out.join("ranges.csv"))?;
    report.write_kernels_csv(args.out.join("kernels.csv"))?;
    report.write_json(args.out.join("report.json"))?;
    report.write_transfers_csv(args.out.join("transfers.csv"))?;
    report.write_stats_csv(args.out.join("stats.csv"))?;
    if args.kineto {
        let options = gmprof::report::TraceOptions::kineto(Some(std::process::id()), None);
        report.write_kineto_trace(args.out.join("trace.json"), &options)?;
    } else {
        report.write_chrome_trace(args.out.join("trace.json"))?;
    }
    if report.pm.is_some() {
        report.write_pm_csv(args.out.join("pm.csv"))?;
    }
    println!("{}", report.summary());
    println!("{}", report.stats());
    // ===================================================================================

    println!(
        "wall time: {:.3} ms for {} steps ({:.3} ms/step) + {:.3} ms finish = {:.3} ms, mode {}",
        loop_time.as_secs_f64() * 1e3,
        args.steps,
        loop_time.as_secs_f64() * 1e3 / args.steps.max(1) as f64,
        (total - loop_time).as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3,
        args.mode
    );
    println!("wrote {}/{{ranges.csv,kernels.csv,transfers.csv,stats.csv,report.json,trace.json}}", args.out.display());
    if let Some(base) = baseline {
        println!(
            "train_loop overhead mode={} unprofiled_ms={:.3} profiled_ms={:.3} ratio={:.3}",
            args.mode,
            base.as_secs_f64() * 1e3,
            loop_time.as_secs_f64() * 1e3,
            loop_time.as_secs_f64() / base.as_secs_f64()
        );
    }
    Ok(())
}
