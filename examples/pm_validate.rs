//! Validates PM sampling folded into ranges against the range profiler's counters.
//!
//! One process, one workload repeated by every session: per iteration a memory-bound range
//! `add` (vector_add over `--elements` floats, twice: 8·n bytes read and 4·n written per
//! launch) and a `train_step` range of the MLP with nested `forward`, `backward` and
//! `update` ranges. Sessions:
//!
//! 1. `per_range` with `dram__bytes_read.sum,dram__bytes_write.sum`: the reference bytes of
//!    every top-level range (per_range measures only the outermost level);
//! 2. `trace` + PM sampling at each `--intervals` value: DRAM bytes integrated from the
//!    samples over each range's GPU interval, compared with (1) instance by instance for
//!    ranges of at least 1 ms, and the mean DRAM throughput against (1)'s bytes over the
//!    same interval; nested ranges must get values;
//! 3. `per_range` + PM sampling in one session: does CUPTI let both run?
//!
//! Prints one `pm_validate ...` line per check and `PASS`/`FAIL` at the end; writes each
//! session's outputs under `--out`.
//!
//! ```text
//! cargo run --release --example pm_validate -- --intervals 5us,20us,100us --out out/pm
//! ```

#[path = "workloads/mod.rs"]
mod workloads;

use std::collections::HashMap;
use std::error::Error;
use std::path::PathBuf;

use clap::Parser;
use gmprof::analysis::pm_fold::PmScope;
use gmprof::capture::pm_sampling::{parse_interval, PmSamplingConfig};
use gmprof::{ProfilingMode, Report};
use workloads::{Gpu, Mlp, MlpConfig};

#[derive(Parser, Debug)]
struct Args {
    /// PM sampling intervals to sweep.
    #[arg(long, value_delimiter = ',', default_value = "5us,20us,100us")]
    intervals: Vec<String>,
    /// Iterations per session.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// vector_add elements (f32).
    #[arg(long, default_value_t = 1 << 27)]
    elements: usize,
    /// Output directory.
    #[arg(long, default_value = "out/pm_validate")]
    out: PathBuf,
    /// Largest relative error accepted.
    #[arg(long, default_value_t = 0.05)]
    tolerance: f64,
}

const READ: &str = "dram__bytes_read.sum";
const WRITE: &str = "dram__bytes_write.sum";
const PM_READ: &str = "dram__bytes_read.sum.per_second";
const PM_WRITE: &str = "dram__bytes_write.sum.per_second";
const MIN_RANGE_NS: u64 = 1_000_000;

fn workload(
    prof: &gmprof::Profiler,
    gpu: &mut Gpu,
    mlp: &mut Mlp,
    n: usize,
    iterations: usize,
) -> Result<(), Box<dyn Error>> {
    for _ in 0..iterations {
        prof.replay(|_| -> Result<(), Box<dyn Error>> {
            {
                let _r = prof.range("add");
                gpu.vector_add(n)?;
                gpu.vector_add(n)?;
            }
            {
                let _s = prof.range("train_step");
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
                    mlp.update(workloads::DEFAULT_LR)?;
                }
            }
            Ok(())
        })??;
    }
    gpu.sync()?;
    Ok(())
}

/// (path, instance) → (read, write) bytes of top-level ranges from per_range counters.
fn reference(report: &Report) -> HashMap<(String, u32), (f64, f64)> {
    let names = report.metric_names();
    let (r, w) = (names.iter().position(|n| *n == READ), names.iter().position(|n| *n == WRITE));
    report
        .ranges
        .iter()
        .filter(|row| row.depth == 0 && row.range_id.is_some())
        .filter_map(|row| {
            let get = |i: Option<usize>| i.and_then(|i| row.metrics.get(i).copied().flatten());
            Some(((row.path.clone(), row.instance), (get(r)?, get(w)?)))
        })
        .collect()
}

fn main() {
    // GMPROF_LOG=gmprof=info shows where the PM decode thread's time went.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("GMPROF_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    }
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let mut gpu = Gpu::new(0)?;
    let mut mlp = Mlp::new(&gpu, MlpConfig::default())?;
    gpu.prepare_vector_add(args.elements)?;
    gpu.vector_add(args.elements)?;
    mlp.step(workloads::DEFAULT_LR)?;
    gpu.sync()?;
    println!("pm_validate: {} elements={} iterations={}", gpu.name()?, args.elements, args.iterations);
    let mut failures = 0;

    // 1. Reference: per_range counters of the top-level ranges.
    let prof = gmprof::Profiler::builder().mode(ProfilingMode::PerRange).metrics([READ, WRITE]).build()?;
    workload(&prof, &mut gpu, &mut mlp, args.elements, args.iterations)?;
    let per_range = prof.finish()?;
    per_range.write_all(args.out.join("per_range"))?;
    let reference = reference(&per_range);
    let analytic_add = 2.0 * 12.0 * args.elements as f64;
    for ((path, instance), (r, w)) in reference.iter().filter(|((p, i), _)| p == "add" && *i == 0) {
        println!(
            "pm_validate reference path={path} instance={instance} read={r:.4e} write={w:.4e} analytic_total={analytic_add:.4e}"
        );
    }

    // 2. trace + PM sampling, interval by interval.
    for interval in &args.intervals {
        let cfg = PmSamplingConfig { interval: parse_interval(interval)?, ..Default::default() };
        let prof = gmprof::Profiler::builder().mode(ProfilingMode::Trace).pm_sampling(Some(cfg)).build()?;
        workload(&prof, &mut gpu, &mut mlp, args.elements, args.iterations)?;
        let report = prof.finish()?;
        report.write_all(args.out.join(format!("trace_pm_{interval}")))?;
        let pm = report.pm.as_ref().ok_or("no pm section")?;
        let (first_sample, first_kernel) =
            (pm.samples.first().map(|s| s.start_ns), report.kernels.iter().filter_map(|k| k.start_ns).min());
        println!(
            "pm_validate interval={interval} samples={} overflows={} missing={} empty={} alignment={}:{}ns \
             residual={:?} first_sample_ns={first_sample:?} first_kernel_ns={first_kernel:?}",
            pm.sample_count,
            pm.hw_buffer_overflows,
            pm.missing_samples,
            pm.empty_samples,
            pm.alignment.method,
            pm.alignment.offset_ns,
            pm.alignment.residual
        );
        let idx = |name: &str| pm.metrics.iter().position(|m| m.name == name);
        let (ri, wi) = (idx(PM_READ).ok_or("no read metric")?, idx(PM_WRITE).ok_or("no write metric")?);
        let mut worst_bytes: f64 = 0.0;
        let mut worst_rate: f64 = 0.0;
        let mut compared = 0;
        for row in pm.rows.iter().filter(|r| r.scope == PmScope::Range) {
            let duration = row.end_ns - row.start_ns;
            let (Some(r), Some(w)) = (row.values[ri], row.values[wi]) else {
                println!("pm_validate FAIL interval={interval} path={} has no PM value", row.path);
                failures += 1;
                continue;
            };
            let bytes = r.total.unwrap_or(f64::NAN) + w.total.unwrap_or(f64::NAN);
            let Some(&(ref_r, ref_w)) = reference.get(&(row.path.clone(), row.instance.unwrap_or(0))) else {
                // Nested ranges: per_range has no value; PM sampling must have one.
                if row.instance == Some(0) {
                    println!(
                        "pm_validate nested interval={interval} path={} duration_us={:.1} pm_bytes={bytes:.4e} samples={} few={}",
                        row.path,
                        duration as f64 / 1e3,
                        r.samples,
                        r.few_samples
                    );
                }
                continue;
            };
            if duration < MIN_RANGE_NS {
                continue;
            }
            let reference_bytes = ref_r + ref_w;
            let err = (bytes - reference_bytes) / reference_bytes;
            // Mean throughput against reference bytes over the same interval.
            let mean_rate = r.mean + w.mean;
            let reference_rate = reference_bytes / (duration as f64 * 1e-9);
            let rate_err = (mean_rate - reference_rate) / reference_rate;
            worst_bytes = worst_bytes.max(err.abs());
            worst_rate = worst_rate.max(rate_err.abs());
            compared += 1;
            if row.instance == Some(0) || err.abs() > args.tolerance {
                println!(
                    "pm_validate range interval={interval} path={} instance={} duration_us={:.1} pm_bytes={bytes:.4e} \
                     per_range_bytes={reference_bytes:.4e} err={:+.2}% mean_gbps={:.1} ref_gbps={:.1} rate_err={:+.2}% \
                     samples={} coverage={:.3}",
                    row.path,
                    row.instance.unwrap_or(0),
                    duration as f64 / 1e3,
                    err * 100.0,
                    mean_rate / 1e9,
                    reference_rate / 1e9,
                    rate_err * 100.0,
                    r.samples,
                    r.coverage
                );
            }
        }
        let ok = compared > 0 && worst_bytes <= args.tolerance && worst_rate <= args.tolerance;
        if !ok {
            failures += 1;
        }
        println!(
            "pm_validate summary interval={interval} ranges_compared={compared} worst_bytes_err={:.2}% \
             worst_rate_err={:.2}% {}",
            worst_bytes * 100.0,
            worst_rate * 100.0,
            if ok { "ok" } else { "FAIL" }
        );
    }

    // 3. per_range + PM sampling in one session.
    let cfg = PmSamplingConfig::default();
    match gmprof::Profiler::builder()
        .mode(ProfilingMode::PerRange)
        .metrics([READ, WRITE])
        .pm_sampling(Some(cfg))
        .build()
    {
        Ok(prof) => {
            workload(&prof, &mut gpu, &mut mlp, args.elements, args.iterations)?;
            let report = prof.finish()?;
            report.write_all(args.out.join("per_range_pm"))?;
            let pm = report.pm.as_ref().ok_or("no pm section")?;
            println!(
                "pm_validate beside_per_range=ok samples={} rows={} warnings={}",
                pm.sample_count,
                pm.rows.len(),
                report.meta.warnings.len()
            );
        }
        Err(e) => println!("pm_validate beside_per_range=refused error={e}"),
    }
    println!("pm_validate {}", if failures == 0 { "PASS" } else { "FAIL" });
    Ok(())
}
