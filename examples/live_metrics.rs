//! A CPU-only training loop with its live metrics served for Prometheus (issue 45): the
//! recorded-data seam of the capture path (`LaunchHarness`, feature `bench-internals`: CUPTI's
//! callbacks and activity records made up, everything after them as in a real run) streams
//! a run of `Train step N` > `forward`, `backward`, `optimizer` ranges, kernels and a batch
//! copy per step, drained every few steps as the injected library drains, with the live
//! metrics exported at `http://127.0.0.1:PORT/metrics`. At the end it writes the run's
//! outputs (report.json, steps/, ...) into `--out`, touches `OUT/done`, and serves the final
//! values for `--linger-secs` more, so a scraper gets them.
//!
//! `scripts/check/live_metrics_prometheus.sh` runs it under a real Prometheus and compares
//! what Prometheus scraped with report.json.
//!
//! ```text
//! cargo run --features bench-internals --example live_metrics -- --port 19400 --out /tmp/live
//! curl -s http://127.0.0.1:19400/metrics | grep gmprof_steps_total
//! ```

use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gmprof::capture::profiler::harness::{LaunchHarness, TransferApi, DEVICE_ID};
use gmprof::checked::callback::ApiDomain;
use gmprof::model::{TransferActivity, TransferKind};
use gmprof::profiler::StreamConfig;
use gmprof::report::live::LiveMetrics;
use gmprof::report::stream::StreamSettings;
use gmprof::sys::cupti::CUpti_driver_api_trace_cbid_enum as DriverCbid;
use gmprof::ways_in::live_metrics::{process_labels, start, MetricsExport};

#[derive(Parser, Debug)]
#[command(about = "A CPU-only training loop with gmprof's live metrics served for Prometheus")]
struct Args {
    /// The port of the endpoint (a process with LOCAL_RANK serves on PORT + LOCAL_RANK).
    #[arg(long)]
    port: u16,
    /// The address it listens on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Where the run's outputs go.
    #[arg(long)]
    out: PathBuf,
    /// Training steps.
    #[arg(long, default_value_t = 120)]
    steps: u64,
    /// Real time each step takes, ms (so a scraper sees the run go on).
    #[arg(long, default_value_t = 50)]
    step_ms: u64,
    /// Steps between two drains.
    #[arg(long, default_value_t = 10)]
    drain_every: u64,
    /// Seconds the endpoint still serves after the outputs are written.
    #[arg(long, default_value_t = 0)]
    linger_secs: u64,
}

const MS: u64 = 1_000_000;
/// Bytes of each step's batch copy.
const BATCH_BYTES: u64 = 3 * 1024 * 1024;
/// The phases of a step and their kernels: (range, kernel symbol, kernel name, kernels).
const PHASES: [(&str, &std::ffi::CStr, &str, u64); 3] = [
    ("forward", c"_Z7forwardPf", "forward(float*)", 4),
    ("backward", c"_Z8backwardPf", "backward(float*)", 6),
    ("optimizer", c"_Z5adamwPf", "adamw(float*)", 1),
];

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let _ = std::fs::remove_file(args.out.join("done"));
    let lookup = |k: &str| std::env::var(k).ok();
    let labels = process_labels(&lookup, gmprof::ways_in::layout::host_name());
    let export = MetricsExport { port: args.port, bind: args.bind.clone() };
    let metrics = std::sync::Arc::new(LiveMetrics::new(&labels));
    let server = start(&export, &labels, &metrics)?;
    println!("live metrics at {}", server.url());

    let mut h = LaunchHarness::trace()?;
    let settings = StreamSettings { live: Some(metrics.feed(Some(DEVICE_ID))), ..StreamSettings::default() };
    h.profiler().stream_into(StreamConfig { dir: args.out.clone(), row_limit: 200_000, settings })?;

    // Each step's activity records arrive one step late, as CUPTI's buffers deliver them.
    let mut late = Vec::new();
    let mut late_copies = Vec::new();
    let (mut wall, mut gpu) = (10 * MS, 10 * MS);
    for step in 0..args.steps {
        let started = std::time::Instant::now();
        h.set_clock(wall);
        h.push_range(&format!("Train step {step}"))?;
        let mut records = Vec::new();
        let mut copy_params = [0u8; 64];
        let api = TransferApi {
            domain: ApiDomain::Driver,
            cbid: DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2.0,
            name: c"cuMemcpyHtoDAsync_v2",
            params: copy_params.as_mut_ptr().cast(),
        };
        let (copy, _) = h.transfer(api, None, 0);
        let copy_record = |start| TransferActivity {
            correlation_id: copy,
            kind: TransferKind::MemcpyHtoD,
            bytes: BATCH_BYTES,
            start_ns: start,
            end_ns: start + 250_000,
            stream_id: 7,
            context_id: 1,
            device_id: DEVICE_ID,
            graph_id: 0,
            graph_node_id: 0,
        };
        let copies = vec![copy_record(gpu)];
        gpu += 300_000;
        for (phase, symbol, name, kernels) in PHASES {
            // The phase's range opens when its first kernel may start and closes after its
            // last ends (the CPU waits for the GPU, as a synchronizing loop does).
            h.set_clock(gpu);
            h.push_range(phase)?;
            for k in 0..kernels {
                let id = h.launch_kernel(true, symbol);
                // Durations vary by kernel and step; every 25th step is slow.
                let slow = if step % 25 == 24 { 2 } else { 1 };
                let duration = slow * (400_000 + (step * 7_919 + k * 104_729) % 300_000);
                records.push(h.kernel_record(id, name, gpu, gpu + duration));
                gpu += duration + 2_000;
            }
            h.set_clock(gpu);
            h.pop_range()?;
        }
        wall = wall.max(gpu) + 1_000_000 + step % 7 * 50_000;
        h.set_clock(wall);
        h.pop_range()?;
        h.deliver(std::mem::replace(&mut late, records));
        h.transfer_activity(std::mem::replace(&mut late_copies, copies));
        if step % args.drain_every == args.drain_every - 1 {
            h.stream_step();
        }
        std::thread::sleep(Duration::from_millis(args.step_ms).saturating_sub(started.elapsed()));
    }
    h.deliver(late);
    h.transfer_activity(late_copies);
    let report = h.report();
    report.write_all(&args.out)?;
    let streamed = report.streamed.as_ref().ok_or("the run did not stream")?;
    println!("wrote {}: {} steps, {} kernels", args.out.display(), streamed.steps, streamed.kernels);
    std::fs::write(args.out.join("done"), format!("{}\n", streamed.steps))?;
    std::thread::sleep(Duration::from_secs(args.linger_secs));
    server.stop();
    Ok(())
}
