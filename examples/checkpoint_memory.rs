//! Host memory and time of a 1 000 000-kernel session through the checkpoint path, on the
//! CPU (no GPU): what a long kernel_replay run holds, what a checkpoint adds on top while it
//! copies, correlates and writes, and what the final report costs.
//!
//! ```text
//! cargo run --release --example checkpoint_memory -- [KERNELS]
//! ```
//!
//! Prints the process's resident set (VmRSS) and its peak so far (VmHWM) after each phase:
//! the records as capture holds them (launch, activity and 3 counter values per kernel,
//! 1000 ranges, 500 counter cycles of 2000), one checkpoint written while a cycle is still
//! running, and the final report written.

use std::time::Instant;

use gmprof::correlate::Correlator;
use gmprof::model::{
    CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, MetricSpec, ProfilingMode, RunEnd,
    GPU_TIME_METRIC,
};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;

const CYCLE: u32 = 2000;

fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn mark(phase: &str, started: Instant) {
    println!(
        "{phase:<44} rss {:>7.1} MiB  peak {:>7.1} MiB  {:>8.1} ms",
        status_kib("VmRSS:") as f64 / 1024.0,
        status_kib("VmHWM:") as f64 / 1024.0,
        started.elapsed().as_secs_f64() * 1e3
    );
}

fn metrics() -> MetricSet {
    let spec = |name: &str, unit: &str| MetricSpec {
        name: name.into(),
        kind: MetricKind::Counter,
        unit: unit.into(),
        description: String::new(),
    };
    MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, "nsecond"),
            spec("dram__bytes_read.sum", "byte"),
            spec("dram__bytes_write.sum", "byte"),
        ],
    }
}

fn main() {
    let kernels: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let names = ["_Z4gemmILi128EEvPKfS1_Pfi", "_Z7softmaxPfi", "_Z9layernormPKfPfS1_i", "ampere_sgemm_128x64_nn"];
    let t = Instant::now();
    mark("start", t);
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let per_range = (kernels / 1000).max(1);
    let mut current = None;
    let mut ranges = Vec::with_capacity(CYCLE as usize);
    for i in 0..kernels {
        if i % per_range == 0 {
            if current.is_some() {
                let _ = tree.pop(1, u64::from(i));
            }
            current = Some(tree.push("Train step", 1, u64::from(i)));
        }
        let (cycle, ordinal) = (i / CYCLE, i % CYCLE);
        correlator.add_launch(LaunchRecord {
            correlation_id: i + 1,
            thread: 1,
            range: current,
            cycle,
            ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
        correlator.add_activity(KernelActivity {
            correlation_id: i + 1,
            name: names[(i % 4) as usize].into(),
            grid: [80, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 40,
            static_shared_memory: 0,
            dynamic_shared_memory: 4096,
            stream_id: 7,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
            start_ns: u64::from(i),
            end_ns: u64::from(i),
        });
        ranges.push(CounterRange {
            cycle,
            index: ordinal,
            name: ordinal.to_string(),
            values: vec![f64::from(1000 + i % 97), f64::from(i % 4096) * 1024.0, 512.0],
        });
        // The last cycle is still running: its counters are not decoded yet.
        if ordinal == CYCLE - 1 && i + 1 < kernels {
            correlator.add_counter_ranges(cycle, std::mem::take(&mut ranges));
        }
    }
    mark(&format!("{kernels} kernels captured"), t);

    let dir = tempfile::tempdir().expect("a temporary directory");
    let t = Instant::now();
    let running = (kernels - 1) / CYCLE;
    let (copy, pending) = correlator.checkpoint(ProfilingMode::KernelReplay, Some(running));
    let mut checkpoint_tree = tree.clone();
    let _ = checkpoint_tree.close_all_open(u64::from(kernels));
    let mut info = CaptureInfo::new(ProfilingMode::KernelReplay);
    info.run_end = Some(RunEnd::Checkpoint { reason: "periodic".into(), pending_kernels: pending.kernels });
    let report = Report::analyze(info, &metrics(), &checkpoint_tree, copy);
    report.write_all(dir.path()).expect("checkpoint written");
    let rows = report.kernels.len();
    drop(report);
    mark(&format!("checkpoint written ({rows} kernels, {} pending)", pending.kernels), t);

    let t = Instant::now();
    correlator.add_counter_ranges(running, ranges);
    let _ = tree.close_all_open(u64::from(kernels));
    let mut info = CaptureInfo::new(ProfilingMode::KernelReplay);
    info.run_end = Some(RunEnd::Finished { by: "finish".into() });
    let report = Report::analyze(info, &metrics(), &tree, correlator);
    report.write_all(dir.path()).expect("final outputs written");
    mark(
        &format!(
            "final report written ({} kernels, {} flagged)",
            report.kernels.len(),
            report.meta.flagged_kernel_rows
        ),
        t,
    );
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len()))
        .collect();
    files.sort();
    let total: u64 = files.iter().map(|(_, n)| n).sum();
    let sizes: Vec<String> = files.iter().map(|(f, n)| format!("{f} {:.1}", *n as f64 / (1 << 20) as f64)).collect();
    println!("outputs on disk: {:.1} MiB ({} MiB)", total as f64 / (1 << 20) as f64, sizes.join(", "));
}
