//! GPU tests of the kernel-replay mode. They need an NVIDIA GPU, CUDA 13 and CUPTI, and run
//! only with `--features gpu` (see README: "GPU tests"). Run them one at a time
//! (`--test-threads=1`): CUPTI allows one profiler per process at a time.
#![cfg(feature = "gpu")]

#[path = "../examples/workloads/mod.rs"]
mod workloads;

use gmprof::report::Report;
use gmprof::{Profiler, ProfilingMode};
use workloads::Gpu;

const READ: &str = "dram__bytes_read.sum";
const WRITE: &str = "dram__bytes_write.sum";

fn metric(report: &Report, name: &str) -> usize {
    report.metric_names().iter().position(|m| *m == name).unwrap_or_else(|| panic!("{name} not in report"))
}

fn range<'a>(report: &'a Report, path: &str) -> Vec<&'a gmprof::aggregate::RangeRow> {
    report.ranges.iter().filter(|r| r.path == path).collect()
}

fn assert_close(what: &str, got: f64, want: f64, tolerance: f64) {
    let rel = (got - want).abs() / want;
    assert!(
        rel <= tolerance,
        "{what}: got {got}, want {want} (off by {:.2}%, allowed {:.0}%)",
        rel * 100.0,
        tolerance * 100.0
    );
}

#[test]
fn vector_add_reads_eight_bytes_per_element() {
    let n = 1 << 24;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    let prof = Profiler::builder().mode(ProfilingMode::KernelReplay).metrics([READ, WRITE]).build().expect("profiler");
    let launches = 3;
    {
        let _r = prof.range("vector_add");
        for _ in 0..launches {
            gpu.vector_add(n).unwrap();
        }
        gpu.sync().unwrap();
    }
    let report = prof.finish().expect("report");
    println!("{}", report.summary());
    gpu.verify_vector_add(n).unwrap();
    assert_eq!(report.meta.dropped_counter_ranges, 0);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);
    let rows = range(&report, "vector_add");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].kernel_count, launches as u64, "the range holds exactly the kernels launched");
    let read = metric(&report, READ);
    let per_kernel: Vec<f64> = report
        .kernels
        .iter()
        .filter(|k| k.range_path == "vector_add")
        .map(|k| k.metrics[read].expect("read bytes"))
        .collect();
    assert_eq!(per_kernel.len(), launches);
    for bytes in &per_kernel {
        assert_close("per-kernel DRAM read bytes", *bytes, 8.0 * n as f64, 0.02);
    }
    assert_close("range DRAM read bytes", rows[0].metrics[read].unwrap(), 8.0 * n as f64 * launches as f64, 0.02);
    let gbps = rows[0].dram_read_gbps.expect("derived bandwidth");
    assert!(gbps > 100.0 && gbps < 6000.0, "plausible HBM read bandwidth, got {gbps} GB/s");
    for k in report.kernels.iter().filter(|k| k.range_path == "vector_add") {
        assert!(k.duration_ns.unwrap() > 0, "kernel time comes from gpu__time_duration");
        assert!(k.kernel_name.as_deref().unwrap_or("").contains("vector_add"), "{:?}", k.kernel_name);
    }
}

#[test]
fn nested_parent_equals_children_plus_own_kernels() {
    let n = 1 << 22;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    let prof = Profiler::builder().metrics([READ, WRITE]).build().expect("profiler");
    for _step in 0..2 {
        let _s = prof.range("train_step");
        gpu.vector_add(n).unwrap(); // the parent's own kernel
        {
            let _f = prof.range("forward");
            gpu.vector_add(n).unwrap();
            gpu.vector_add(n).unwrap();
        }
        {
            let _b = prof.range("backward");
            gpu.tiny_kernel().unwrap();
            gpu.vector_add(n).unwrap();
        }
        gpu.sync().unwrap();
    }
    gpu.vector_add(n).unwrap(); // outside any range: the root row keeps it
    gpu.sync().unwrap();
    let report = prof.finish().expect("report");
    println!("{}", report.summary());
    let read = metric(&report, READ);
    let steps = range(&report, "train_step");
    assert_eq!(steps.len(), 2);
    for step in steps {
        let children: Vec<_> = report.ranges.iter().filter(|r| r.depth == 1 && r.instance == step.instance).collect();
        assert_eq!(children.len(), 2, "forward and backward of step {}", step.instance);
        assert_eq!(step.kernel_count, 5);
        assert_eq!(step.self_kernel_count, 1);
        let own: f64 =
            report.kernels.iter().filter(|k| k.range_id == step.range_id).map(|k| k.metrics[read].unwrap()).sum();
        let sum_children: f64 = children.iter().map(|c| c.metrics[read].unwrap()).sum();
        let parent = step.metrics[read].unwrap();
        assert!(
            (parent - (own + sum_children)).abs() <= 1e-6 * parent,
            "parent {parent} != own {own} + children {sum_children}"
        );
        let t_children: u64 = children.iter().map(|c| c.gpu_time_ns.unwrap()).sum();
        assert!(step.gpu_time_ns.unwrap() > t_children);
    }
    let outside: Vec<_> = report.kernels.iter().filter(|k| k.range_id.is_none()).collect();
    assert_eq!(outside.len(), 1, "the kernel outside ranges is kept");
    assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);
}

#[test]
fn counter_image_cycles_without_dropping_ranges() {
    // Small cycles exercise stop/decode/evaluate/re-initialize/start many times.
    let kernels: usize = std::env::var("GMPROF_GPU_TEST_KERNELS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.reset_tiny_count().unwrap();
    let prof = Profiler::builder()
        .metrics([READ])
        .max_ranges_per_cycle(1000)
        .flush_on_range_boundaries(false)
        .build()
        .expect("profiler");
    let t0 = std::time::Instant::now();
    {
        let _r = prof.range("many");
        for _ in 0..kernels {
            gpu.tiny_kernel().unwrap();
        }
        gpu.sync().unwrap();
    }
    let elapsed = t0.elapsed();
    let report = prof.finish().expect("report");
    println!(
        "{kernels} kernels in {:.1} s ({:.3} ms/kernel), {} counter cycles",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e3 / kernels as f64,
        report.meta.counter_cycles
    );
    assert_eq!(gpu.tiny_count().unwrap() as usize, kernels, "every kernel ran");
    assert_eq!(report.meta.dropped_counter_ranges, 0);
    assert_eq!(report.meta.dropped_activity_records, 0);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);
    assert_eq!(range(&report, "many")[0].kernel_count, kernels as u64);
    assert_eq!(report.kernels.len(), kernels);
    assert!(report.meta.counter_cycles as usize >= kernels / 1000);
}

#[test]
fn finished_profiler_refuses_more_work_and_a_second_one_starts() {
    let _gpu = Gpu::new(0).expect("GPU");
    let prof = Profiler::builder().build().expect("first");
    let other = prof.clone();
    prof.finish().expect("report");
    assert!(other.push_range("late").is_err(), "ranges after finish are refused");
    let again = Profiler::builder().build().expect("a new session after finish");
    let report = again.finish().expect("second report");
    assert_eq!(report.kernels.len(), 0);
}

fn check_timeline(report: &Report) {
    let mut json = Vec::new();
    report.write_chrome_trace_to(&mut json).expect("timeline");
    let text = String::from_utf8(json).expect("utf-8");
    let checked = gmprof::trace_check::check_trace_json(&text, &gmprof::trace_check::CheckOptions::default());
    assert!(checked.violations.is_empty(), "timeline violations: {:#?}", checked.violations);
    assert!(checked.events > report.kernels.len(), "ranges, kernels and metadata are all exported");
}

#[test]
fn trace_mode_times_kernels_and_copies() {
    let n = 1 << 22;
    let mut gpu = Gpu::new(0).expect("GPU");
    gpu.prepare_vector_add(n).unwrap();
    gpu.sync().unwrap();
    let host = vec![1.0f32; n];
    let prof = Profiler::builder().mode(ProfilingMode::Trace).build().expect("profiler");
    {
        let _step = prof.range("step");
        {
            let _up = prof.range("upload");
            let _dev = gpu.stream.clone_htod(&host).unwrap();
            gpu.sync().unwrap();
        }
        {
            let _c = prof.range("compute");
            for _ in 0..4 {
                gpu.vector_add(n).unwrap();
            }
            gpu.sync().unwrap();
        }
    }
    let report = prof.finish().expect("report");
    println!("{}", report.summary());
    assert_eq!(report.meta.mode, ProfilingMode::Trace);
    assert_eq!(report.meta.dropped_activity_records, 0);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "warnings: {:?}", report.meta.warnings);

    // Kernels carry real start and end times in trace mode, inside their range.
    let compute = range(&report, "step/compute")[0];
    assert_eq!(compute.kernel_count, 4);
    for k in report.kernels.iter().filter(|k| k.range_path == "step/compute") {
        let (start, end) = (k.start_ns.unwrap(), k.end_ns.unwrap());
        assert!(end > start, "real kernel times");
        assert_eq!(k.duration_ns, Some(end - start));
        assert!(start >= compute.start_ns.unwrap() && end <= compute.end_ns.unwrap(), "synchronized inside its range");
    }
    let busy = compute.gpu_busy_ns.expect("busy time in trace mode");
    assert!(busy > 0 && busy <= compute.gpu_time_ns.unwrap(), "busy {busy} vs sum {:?}", compute.gpu_time_ns);

    // The upload's bytes are what the program copied.
    let uploads: Vec<_> = report.transfers.iter().filter(|t| t.range_path == "step/upload").collect();
    let copied: u64 =
        uploads.iter().filter(|t| t.kind == gmprof::model::TransferKind::MemcpyHtoD).map(|t| t.bytes).sum();
    assert_eq!(copied, (n * 4) as u64, "transfers: {uploads:?}");
    let upload = range(&report, "step/upload")[0];
    assert!(upload.transfer_bytes >= (n * 4) as u64);

    let clock = report.meta.clock.expect("clock pairs");
    assert!(clock.finish.cupti_ns > clock.start.cupti_ns && clock.finish.unix_ns > clock.start.unix_ns);
    println!("clock drift over the session: {} ns", clock.drift_ns());
    check_timeline(&report);
}

#[test]
fn sequential_trace_sessions_are_independent() {
    let mut gpu = Gpu::new(0).expect("GPU");
    let mut reports = Vec::new();
    for (session, launches) in [(0, 3usize), (1, 5usize)] {
        let prof = Profiler::builder().mode(ProfilingMode::Trace).build().expect("profiler");
        {
            let _r = prof.range(&format!("session{session}"));
            for _ in 0..launches {
                gpu.tiny_kernel().unwrap();
            }
            gpu.sync().unwrap();
        }
        reports.push(prof.finish().expect("report"));
    }
    assert_eq!(reports[0].kernels.len(), 3);
    assert_eq!(reports[1].kernels.len(), 5);
    assert!(reports[1].kernels.iter().all(|k| k.range_path == "session1"), "no data leaks between sessions");
    assert!(range(&reports[1], "session0").is_empty());
}

#[test]
fn threads_attribute_kernels_to_their_own_ranges() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 50;
    let _gpu = Gpu::new(0).expect("GPU");
    for mode in [ProfilingMode::Trace, ProfilingMode::KernelReplay] {
        let prof = Profiler::builder().mode(mode).metrics([READ]).build().expect("profiler");
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let prof = prof.clone();
                s.spawn(move || {
                    let mut gpu = Gpu::new(0).expect("GPU per thread");
                    for round in 0..2 {
                        let _r = prof.range(&format!("thread{t}"));
                        let _inner = prof.range(&format!("round{round}"));
                        for _ in 0..PER_THREAD / 2 {
                            gpu.tiny_kernel().unwrap();
                        }
                        gpu.sync().unwrap();
                    }
                });
            }
        });
        let report = prof.finish().expect("report");
        assert_eq!(report.meta.flagged_kernel_rows, 0, "{mode:?} warnings: {:?}", report.meta.warnings);
        for t in 0..THREADS {
            let rows = range(&report, &format!("thread{t}"));
            assert_eq!(rows.len(), 2, "{mode:?}: two instances of thread{t}");
            let owner = rows[0].thread;
            assert_eq!(rows.iter().map(|r| r.kernel_count).sum::<u64>(), PER_THREAD as u64, "{mode:?} thread{t}");
            for k in report.kernels.iter().filter(|k| k.range_path.starts_with(&format!("thread{t}/"))) {
                assert_eq!(k.thread, owner, "{mode:?}: kernel attributed to another thread's range");
            }
        }
        assert_eq!(report.kernels.len(), THREADS * PER_THREAD);
    }
}

/// Needs a machine with two GPUs; on one GPU it says so and checks nothing else.
#[test]
fn one_profiler_per_gpu_in_one_process() {
    let count = cudarc::driver::CudaContext::device_count().expect("device count");
    if count < 2 {
        eprintln!("one_profiler_per_gpu_in_one_process: needs 2 GPUs, found {count}; not run");
        return;
    }
    let mut gpus = [Gpu::new(0).expect("GPU 0"), Gpu::new(1).expect("GPU 1")];
    let profilers = [
        Profiler::builder().mode(ProfilingMode::Trace).device(0).build().expect("profiler on GPU 0"),
        Profiler::builder().mode(ProfilingMode::Trace).device(1).build().expect("profiler on GPU 1"),
    ];
    // Interleave the two devices' work inside both profilers' ranges.
    let _r0 = profilers[0].range("on_gpu0");
    let _r1 = profilers[1].range("on_gpu1");
    for i in 0..8 {
        gpus[i % 2].tiny_kernel().unwrap();
    }
    gpus[0].sync().unwrap();
    gpus[1].sync().unwrap();
    drop((_r0, _r1));
    let [p0, p1] = profilers;
    for (device, report) in [(0u32, p0.finish().expect("report 0")), (1u32, p1.finish().expect("report 1"))] {
        assert_eq!(report.kernels.len(), 4, "GPU {device}: only its own kernels");
        assert!(report.kernels.iter().all(|k| k.device_id == Some(device)), "GPU {device}");
        assert_eq!(report.meta.flagged_kernel_rows, 0, "GPU {device}: {:?}", report.meta.warnings);
        assert_eq!(range(&report, &format!("on_gpu{device}"))[0].kernel_count, 4);
    }
}
