//! CUPTI's PM sampling decode floor (issue 29): what CUPTI's own calls cost per sample, with
//! none of gmprof's pipeline (no decode thread, pool, folding or outputs), on this GPU.
//!
//! One process samples device 0 at `--interval` for `--seconds` while a workload keeps the
//! GPU busy (`--load`: `mlp`, the MLP training step and a vector add of the validation
//! workloads; `vector_add`; or `idle`). The calling thread is the decode loop, as plain as
//! CUPTI's sample: every `--decode-ms` it calls `cuptiPmSamplingDecodeData` into one counter
//! data image, reads each sample's times (`cuptiPmSamplingCounterDataGetSampleInfo`),
//! evaluates each sample with `cuptiProfilerHostEvaluateToGpuValues` (unless
//! `--no-evaluate`), and re-initializes the image. The image holds two decode periods and is
//! re-initialized after every decode, as CUPTI's sample does, not as gmprof does (a 160 ms
//! image handed over half full, `src/capture/pm_decode.rs`): a decode that fills it loses the
//! records that do not fit, so `image full` counts show as fewer samples than expected, while
//! the costs per sample stay CUPTI's. It prints one line per run; on an H100 (2026-11-26,
//! `validation/2026-11-26-pm-attribution-h100.log`):
//!
//! ```text
//! pm_decode_floor metrics=dram interval=20us load=mlp (6644 steps): 249234 samples in 5.03 s (251483 expected), decode 3.6 us, times 0.2 us, evaluate 4.1 us, reinit 0.8 us per sample; decode loop busy 43 % of the wall time; overflows 0, image full 9
//! ```
//!
//! A decode slower than the interval (decode per sample above the interval, or a loop busy
//! 100 % with samples missing) is CUPTI's bound, not gmprof's. Build and run on the GPU
//! machine (libcupti and libnvrtc on the library path, as `scripts/gpu/env.sh` sets):
//!
//! ```text
//! cargo run --release --example pm_decode_floor -- --metrics default --interval 20us --load mlp
//! cargo run --release --example pm_decode_floor -- --metrics dram --interval 10us --load mlp
//! ```

#[path = "workloads/mod.rs"]
mod workloads;

use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use gmprof::capture::pm_sampling::{parse_interval, resolve_metrics, DEFAULT_PM_METRICS};
use gmprof::checked::host::ProfilerHost;
use gmprof::checked::pm_sampling::{counter_availability, DecodeStop, PmSampler, Trigger};
use gmprof::checked::target::{chip_name, ProfilerApi};
use gmprof::checked::Cupti;
use gmprof::model::pm::PmInterval;
use workloads::{mixed_mlp_config, mixed_step, Gpu, Mlp};

#[derive(Parser, Debug)]
struct Args {
    /// `default` (gmprof's five), `dram` (the two DRAM throughput metrics) or a list.
    #[arg(long, default_value = "default")]
    metrics: String,
    /// Sampling interval (ns, `20us`, `1ms`).
    #[arg(long, default_value = "20us")]
    interval: String,
    /// How long to sample.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// What keeps the GPU busy: mlp, vector_add or idle.
    #[arg(long, default_value = "mlp")]
    load: String,
    /// Time between decodes, ms.
    #[arg(long, default_value_t = 20)]
    decode_ms: u64,
    /// Device buffer the samples go to, MiB.
    #[arg(long, default_value_t = 256)]
    hardware_buffer_mb: usize,
    /// Leave out the host's evaluation.
    #[arg(long)]
    no_evaluate: bool,
}

fn metric_names(spec: &str) -> Vec<String> {
    match spec {
        "default" => DEFAULT_PM_METRICS.iter().map(|m| (*m).to_owned()).collect(),
        "dram" => vec!["dram__bytes_read.sum.per_second".into(), "dram__bytes_write.sum.per_second".into()],
        list => list.split(',').map(|m| m.trim().to_owned()).filter(|m| !m.is_empty()).collect(),
    }
}

/// Keeps the GPU busy on a thread of its own until `stop`.
fn load(kind: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Result<u64, String>> {
    std::thread::spawn(move || {
        if kind == "idle" {
            return Ok(0);
        }
        let run = || -> Result<u64, Box<dyn Error>> {
            let mut gpu = Gpu::new(0)?;
            let mut mlp = if kind == "mlp" { Some(Mlp::new(&gpu, mixed_mlp_config())?) } else { None };
            let mut steps = 0u64;
            while !stop.load(Ordering::Acquire) {
                match mlp.as_mut() {
                    Some(mlp) => mixed_step(&mut gpu, mlp)?,
                    None => gpu.vector_add(1 << 26)?,
                }
                gpu.sync()?;
                steps += 1;
            }
            Ok(steps)
        };
        run().map_err(|e| e.to_string())
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let interval_ns = match parse_interval(&args.interval)? {
        PmInterval::TimeNs(ns) => ns,
        PmInterval::Cycles(_) => return Err("give the interval in time (20us), not cycles".into()),
    };
    workloads::check_libraries()?;
    // The context the load runs on is the device's primary context: open it before CUPTI.
    let _gpu = Gpu::new(0)?;
    let cupti = Cupti::load()?;
    let api = ProfilerApi::initialize(&cupti)?;
    let chip = chip_name(&cupti, 0)?;
    let availability = counter_availability(&cupti, 0)?;
    let mut host = ProfilerHost::new_pm_sampling(&cupti, &chip, Some(&availability))?;
    let metrics = resolve_metrics(&cupti, &host, &metric_names(&args.metrics))?;
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    host.add_metrics(&names)?;
    let config = host.config_image()?;

    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(args.load.clone(), Arc::clone(&stop));
    // Let the load reach its steady state before sampling.
    std::thread::sleep(Duration::from_millis(500));

    let mut sampler = PmSampler::enable(&cupti, 0)?;
    sampler.set_config(config, args.hardware_buffer_mb << 20, Trigger::TimeNs(interval_ns))?;
    let period = Duration::from_millis(args.decode_ms.max(1));
    let image_samples = ((2 * period.as_nanos() as u64).div_ceil(interval_ns)).clamp(256, 1 << 20) as u32;
    let mut image = sampler.create_counter_data(&names, image_samples)?;
    let (mut decode, mut times, mut evaluate, mut reinit) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut samples, mut overflows, mut image_full) = (0usize, 0u64, 0u64);
    sampler.start()?;
    let started = Instant::now();
    let until = Duration::from_secs_f64(args.seconds);
    let mut last = false;
    while !last {
        let now = started.elapsed();
        if now >= until {
            sampler.stop()?;
            last = true;
        } else {
            std::thread::sleep(period.min(until - now));
        }
        // Decode until CUPTI has no more records (a full image is evaluated and reused).
        loop {
            let t0 = Instant::now();
            let decoded = sampler.decode(&mut image)?;
            decode += t0.elapsed();
            overflows += u64::from(decoded.overflow);
            let completed = image.info(&cupti)?.completed;
            let t0 = Instant::now();
            for index in 0..completed {
                sampler.sample_times(&image, index)?;
            }
            times += t0.elapsed();
            if !args.no_evaluate {
                let t0 = Instant::now();
                for index in 0..completed {
                    host.evaluate(image.bytes(), index, &names)?;
                }
                evaluate += t0.elapsed();
            }
            samples += completed;
            let t0 = Instant::now();
            sampler.initialize_counter_data(&mut image)?;
            reinit += t0.elapsed();
            if decoded.stop == DecodeStop::CounterDataFull {
                image_full += 1;
                continue;
            }
            break;
        }
    }
    let wall = started.elapsed();
    stop.store(true, Ordering::Release);
    let steps = loader.join().map_err(|_| "the load thread panicked")??;
    sampler.shutdown()?;
    api.shutdown()?;
    let per = |d: Duration| d.as_secs_f64() * 1e6 / samples.max(1) as f64;
    let busy = (decode + times + evaluate + reinit).as_secs_f64() / wall.as_secs_f64();
    println!(
        "pm_decode_floor metrics={} interval={} load={} ({steps} steps): {samples} samples in {:.2} s ({} expected), \
         decode {:.1} us, times {:.1} us, evaluate {}, reinit {:.1} us per sample; decode loop busy {:.0} % of the wall \
         time; overflows {overflows}, image full {image_full}",
        args.metrics,
        args.interval,
        args.load,
        wall.as_secs_f64(),
        (wall.as_nanos() as u64) / interval_ns,
        per(decode),
        per(times),
        if args.no_evaluate { "not run".to_owned() } else { format!("{:.1} us", per(evaluate)) },
        per(reinit),
        busy * 100.0
    );
    Ok(())
}
