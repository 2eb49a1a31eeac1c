//! Analysis-layer tests: session tree, correlator, aggregation and report outputs, driven by
//! synthetic capture records shaped like a real training loop (no GPU needed).
//!
//! Golden files in `tests/golden/` pin the CSV, JSON and summary formats; rewrite them with
//! `GMPROF_BLESS=1 cargo test --test analysis`.

use gmprof::aggregate::RangeRow;
use gmprof::correlate::{Correlator, KernelStatus, TimeSource};
use gmprof::model::{
    ClockPair, ClockSync, CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, ProfilingMode,
    RangeId, ThreadId, TransferActivity, TransferCall, TransferKind, UntimedTransfer, GPU_TIME_METRIC,
};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::{SessionTree, ROOT_PATH};
use gmprof::Error;

#[path = "common/analysis.rs"]
mod analysis_helpers;
#[path = "common/golden.rs"]
mod golden;
#[path = "common/kernels.rs"]
mod kernels;
#[path = "common/metrics.rs"]
mod metrics;
use analysis_helpers::{activity, assert_close, range};
use golden::check_golden;
use metrics::spec;

const READ: &str = "dram__bytes_read.sum";
const WRITE: &str = "dram__bytes_write.sum";
const SM_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";

/// time, read bytes, write bytes, SM throughput %.
fn training_metrics() -> MetricSet {
    MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"),
            spec(READ, MetricKind::Counter, "byte"),
            spec(WRITE, MetricKind::Counter, "byte"),
            spec(SM_PCT, MetricKind::Throughput, "%"),
        ],
    }
}

/// A fake capture: hands out correlation ids, cycles and ordinals like the profiler does,
/// and keeps each cycle's counter ranges until the cycle ends.
struct Capture {
    tree: SessionTree,
    correlator: Correlator,
    mode: ProfilingMode,
    cycle_size: u32,
    next_correlation: u32,
    cycle: u32,
    ordinal: u32,
    clock: u64,
    pending: Vec<CounterRange>,
    /// When set, the next launch's activity record is "dropped by CUPTI".
    drop_next_activity: bool,
    dropped_activities: u64,
}

impl Capture {
    fn new(mode: ProfilingMode, cycle_size: u32) -> Self {
        Self {
            tree: SessionTree::new(),
            correlator: Correlator::new(),
            mode,
            cycle_size,
            next_correlation: 1,
            cycle: 0,
            ordinal: 0,
            clock: 1_000,
            pending: Vec::new(),
            drop_next_activity: false,
            dropped_activities: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 10;
        self.clock
    }

    fn push(&mut self, name: &str, thread: ThreadId) -> RangeId {
        let t = self.tick();
        self.tree.push(name, thread, t)
    }

    fn pop(&mut self, thread: ThreadId) -> RangeId {
        let t = self.tick();
        self.tree.pop(thread, t).expect("balanced pop")
    }

    /// Launches one kernel on `thread`; `values` are the counters CUPTI will report for it.
    fn launch(&mut self, thread: ThreadId, kernel: &str, values: Vec<f64>) -> u32 {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let range = self.tree.current(thread);
        self.correlator.add_launch(LaunchRecord {
            correlation_id,
            thread,
            range,
            cycle: self.cycle,
            ordinal: self.ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: Some(self.clock),
            unmeasured: false,
        });
        let end = self.tick();
        if std::mem::take(&mut self.drop_next_activity) {
            self.dropped_activities += 1;
        } else {
            self.correlator.add_activity(KernelActivity {
                correlation_id,
                name: kernel.into(),
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
                // Kernel replay collapses activity timestamps; the other modes have real ones
                // (each kernel runs 5 ns here, whatever its counters say).
                start_ns: if self.mode == ProfilingMode::KernelReplay { end } else { end - 5 },
                end_ns: end,
            });
        }
        if self.mode != ProfilingMode::Trace {
            let name = match self.mode {
                ProfilingMode::PerKernel => correlation_id.to_string(),
                _ => self.ordinal.to_string(),
            };
            self.pending.push(CounterRange { cycle: self.cycle, index: self.ordinal, name, values });
        }
        self.ordinal += 1;
        if self.ordinal == self.cycle_size {
            self.end_cycle();
        }
        correlation_id
    }

    /// One memcpy or memset of `bytes`, 4 ns long; issued by `thread` (a recorded call), or
    /// with no call recorded when `thread` is `None`. Under kernel replay, which records no
    /// memset activity, a memset is its call alone, with its size from its parameters.
    fn transfer(&mut self, thread: Option<ThreadId>, kind: TransferKind, bytes: u64) -> u32 {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let untimed = (self.mode == ProfilingMode::KernelReplay && kind == TransferKind::Memset)
            .then_some(UntimedTransfer { kind, bytes, device_id: Some(0) });
        if let Some(thread) = thread {
            let api_name = if kind == TransferKind::Memset { "cuMemsetD8Async" } else { "cuMemcpyAsync" };
            self.correlator.add_transfer_call(TransferCall {
                correlation_id,
                thread,
                range: self.tree.current(thread),
                api_name: api_name.into(),
                untimed,
                params: None,
            });
        }
        let end = self.tick();
        if untimed.is_some() {
            return correlation_id;
        }
        self.correlator.add_transfer_activity(TransferActivity {
            correlation_id,
            kind,
            bytes,
            start_ns: end - 4,
            end_ns: end,
            stream_id: 9,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
        });
        correlation_id
    }

    fn end_cycle(&mut self) {
        if self.ordinal == 0 {
            return;
        }
        let ranges = std::mem::take(&mut self.pending);
        if self.mode != ProfilingMode::Trace {
            self.correlator.add_counter_ranges(self.cycle, ranges);
        }
        self.cycle += 1;
        self.ordinal = 0;
    }

    fn report(mut self) -> (Report, SessionTree) {
        self.end_cycle();
        let mut info = CaptureInfo::new(self.mode);
        info.device_name = Some("NVIDIA H100 80GB HBM3".into());
        info.chip = Some("GH100".into());
        info.dropped_activity_records = self.dropped_activities;
        info.started_unix_ns = Some(1_700_000_000_000_000_000);
        info.finished_unix_ns = Some(1_700_000_001_000_000_000);
        let finish = self.tick();
        info.warnings = self.tree.close_all_open(finish);
        info.clock = Some(ClockSync {
            start: ClockPair { cupti_ns: 1_000, unix_ns: 1_700_000_000_000_000_000 },
            finish: ClockPair { cupti_ns: 1_000 + 1_000_000_000, unix_ns: 1_700_000_001_000_000_250 },
        });
        let metrics = training_metrics();
        let report = Report::analyze(info, &metrics, &self.tree, self.correlator);
        (report, self.tree)
    }
}

fn values(time: f64, read: f64, write: f64, pct: f64) -> Vec<f64> {
    vec![time, read, write, pct]
}

/// Two training steps on thread 100 (forward, backward with a nested allreduce, optimizer),
/// a data loader on thread 200 interleaving its own kernels, and kernels outside ranges.
fn training_capture(mode: ProfilingMode) -> Capture {
    let mut c = Capture::new(mode, 4);
    c.launch(100, "init_weights", values(500.0, 0.0, 4096.0, 10.0));
    for step in 0..2u32 {
        let s = f64::from(step);
        c.push("train_step", 100);
        c.push("data_loader", 200);
        c.push("forward", 100);
        c.launch(100, "_Z4gemmILi128EEvPKfS1_Pfi", values(2000.0, 8000.0, 2000.0, 80.0));
        c.launch(200, "decode_jpeg", values(300.0 + s, 600.0, 300.0, 20.0));
        c.transfer(Some(200), TransferKind::MemcpyHtoD, 4096);
        c.launch(100, "_Z7softmaxPfi", values(1000.0, 1000.0, 1000.0, 40.0));
        c.pop(100);
        c.pop(200);
        c.push("backward", 100);
        c.launch(100, "_Z4gemmILi128EEvPKfS1_Pfi", values(4000.0, 16000.0, 4000.0, 90.0));
        c.push("allreduce", 100);
        c.launch(100, "ncclKernel_AllReduce", values(1500.0, 3000.0, 3000.0, 5.0));
        c.pop(100);
        c.pop(100);
        c.push("optimizer", 100);
        c.launch(100, "adam_step", values(700.0, 2800.0, 1400.0, 30.0 + s));
        c.transfer(Some(100), TransferKind::Memset, 1024);
        c.pop(100);
        c.pop(100);
    }
    c.launch(100, "copy_out", values(100.0, 100.0, 0.0, 2.0));
    // A copy issued from a thread gmprof did not capture.
    c.transfer(None, TransferKind::MemcpyDtoH, 512);
    c
}

fn metric(report: &Report, row: &RangeRow, name: &str) -> Option<f64> {
    let index = report.metric_names().iter().position(|m| *m == name)?;
    row.metrics.get(index).copied().flatten()
}

#[test]
fn nested_ranges_are_inclusive_and_counted_per_instance() {
    let (report, _) = training_capture(ProfilingMode::KernelReplay).report();
    assert_eq!(report.meta.kernel_count, 2 + 2 * 6);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{:?}", report.meta.warnings);

    for step in 0..2 {
        let s = f64::from(step);
        let train = range(&report, "train_step", step);
        // forward 2 + backward 2 (incl. allreduce) + optimizer 1; the loader's kernel is on
        // another thread and belongs to data_loader.
        assert_eq!(train.kernel_count, 5);
        assert_eq!(train.self_kernel_count, 0);
        assert_eq!(train.gpu_time_ns, Some(2000 + 1000 + 4000 + 1500 + 700));
        assert_close(metric(&report, train, READ), 8000.0 + 1000.0 + 16000.0 + 3000.0 + 2800.0);

        let backward = range(&report, "train_step/backward", step);
        assert_eq!((backward.kernel_count, backward.self_kernel_count), (2, 1));
        assert_eq!(backward.depth, 1);
        assert_eq!(backward.gpu_time_ns, Some(5500));
        let allreduce = range(&report, "train_step/backward/allreduce", step);
        assert_eq!((allreduce.depth, allreduce.kernel_count), (2, 1));

        let optimizer = range(&report, "train_step/optimizer", step);
        assert_close(metric(&report, optimizer, SM_PCT), 30.0 + s);
        assert_eq!(optimizer.instance, step);
        assert!(optimizer.wall_time_ns.is_some());
    }
}

#[test]
fn kernels_belong_to_their_own_threads_innermost_range() {
    let (report, tree) = training_capture(ProfilingMode::KernelReplay).report();
    for k in report.kernels.iter().filter(|k| k.thread == Some(200)) {
        assert_eq!(k.range_path, "data_loader");
        assert_eq!(k.kernel_name.as_deref(), Some("decode_jpeg"));
    }
    let forward_kernels: Vec<&str> = report
        .kernels
        .iter()
        .filter(|k| k.range_path == "train_step/forward")
        .filter_map(|k| k.kernel_name.as_deref())
        .collect();
    assert_eq!(
        forward_kernels,
        ["void gemm<128>(float const*, float const*, float*, int)", "softmax(float*, int)"].repeat(2)
    );
    let loader = range(&report, "data_loader", 1);
    assert_eq!(loader.thread, Some(200));
    assert_eq!(loader.gpu_time_ns, Some(301));
    let node = loader.range_id.and_then(|id| tree.get(id)).expect("node");
    assert_eq!(node.parent, None, "data_loader is top level on its thread");
}

#[test]
fn kernels_outside_ranges_go_to_the_root_row() {
    let (report, _) = training_capture(ProfilingMode::KernelReplay).report();
    let root = &report.ranges[0];
    assert_eq!(root.path, ROOT_PATH);
    assert_eq!(root.range_id, None);
    assert_eq!((root.kernel_count, root.self_kernel_count), (2, 2));
    assert_eq!(root.gpu_time_ns, Some(600));
    let total: u64 = report.kernels.iter().filter_map(|k| k.duration_ns).sum();
    assert_eq!(report.meta.total_gpu_time_ns, Some(total));
    // Top-level rows together hold every kernel exactly once.
    let top: u64 = report.ranges.iter().filter(|r| r.depth == 0).map(|r| r.kernel_count).sum();
    assert_eq!(top, report.meta.kernel_count);
}

/// A cycle of 5 launches; `keep` picks which counter ranges (index, name) CUPTI delivered.
fn mismatched_cycle(ranges: &[(u32, &str)]) -> Report {
    let mut tree = SessionTree::new();
    let r = tree.push("step", 1, 0);
    let mut correlator = Correlator::new();
    for ordinal in 0..5u32 {
        let correlation_id = 100 + ordinal;
        correlator.add_launch(LaunchRecord {
            correlation_id,
            thread: 1,
            range: Some(r),
            cycle: 0,
            ordinal,
            api: LaunchApi::Driver,
            api_name: "cuLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
        correlator.add_activity(activity(correlation_id, &format!("k{ordinal}")));
    }
    // A complete, healthy second cycle.
    correlator.add_launch(LaunchRecord {
        correlation_id: 200,
        thread: 1,
        range: Some(r),
        cycle: 1,
        ordinal: 0,
        api: LaunchApi::Driver,
        api_name: "cuLaunchKernel".into(),
        context_id: 1,
        launch_ns: None,
        unmeasured: false,
    });
    correlator.add_activity(activity(200, "k_next"));
    correlator.add_counter_ranges(1, vec![counter(1, 0, "0", 99.0)]);
    // Counter values encode the ordinal they were measured for: 10 × (ordinal + 1).
    let delivered = ranges
        .iter()
        .map(|&(index, name)| {
            let measured_for: f64 = name.parse().expect("test names are ordinals");
            counter(0, index, name, 10.0 * (measured_for + 1.0))
        })
        .collect();
    correlator.add_counter_ranges(0, delivered);
    tree.pop(1, 10).expect("pop");
    Report::analyze(CaptureInfo::new(ProfilingMode::KernelReplay), &training_metrics(), &tree, correlator)
}

fn counter(cycle: u32, index: u32, name: &str, time: f64) -> CounterRange {
    CounterRange { cycle, index, name: name.into(), values: vec![time, time * 2.0, time, 50.0] }
}

#[test]
fn a_missing_counter_range_flags_the_cycle_and_never_shifts_rows() {
    // CUPTI lost the range of ordinal 2; the rest kept their names but moved up an index.
    let report = mismatched_cycle(&[(0, "0"), (1, "1"), (2, "3"), (3, "4")]);
    let times: Vec<Option<u64>> = report.kernels.iter().map(|k| k.duration_ns).collect();
    assert_eq!(times, vec![Some(10), Some(20), None, None, None, Some(99)]);
    let statuses: Vec<KernelStatus> = report.kernels.iter().map(|k| k.status).collect();
    assert_eq!(statuses[..5], [KernelStatus::CountMismatch; 5]);
    assert_eq!(statuses[5], KernelStatus::Ok, "other cycles are unaffected");
    assert_eq!(report.meta.flagged_kernel_rows, 5);
    assert_eq!(report.meta.orphan_counter_ranges, 2);
    assert!(
        report.meta.warnings.iter().any(|w| w.contains("cycle 0: 4 counter range(s) for 5 kernel(s) of 5 launch(es)")),
        "{:?}",
        report.meta.warnings
    );
    let step = &report.ranges[0];
    assert_eq!(step.flagged_kernel_count, 5);
    assert_eq!(step.gpu_time_ns, Some(10 + 20 + 99));

    // The last range lost instead: names still line up, values are kept but flagged.
    let report = mismatched_cycle(&[(0, "0"), (1, "1"), (2, "2"), (3, "3")]);
    let times: Vec<Option<u64>> = report.kernels.iter().map(|k| k.duration_ns).collect();
    assert_eq!(times, vec![Some(10), Some(20), Some(30), Some(40), None, Some(99)]);
    assert!(report.kernels[..5].iter().all(|k| k.status == KernelStatus::CountMismatch));

    // Counts agree but a name does not: only that row is flagged.
    let report = mismatched_cycle(&[(0, "0"), (1, "1"), (2, "2"), (3, "4"), (4, "3")]);
    let statuses: Vec<KernelStatus> = report.kernels.iter().map(|k| k.status).collect();
    assert_eq!(
        statuses,
        [
            KernelStatus::Ok,
            KernelStatus::Ok,
            KernelStatus::Ok,
            KernelStatus::NameMismatch,
            KernelStatus::NameMismatch,
            KernelStatus::Ok
        ]
    );
    assert_eq!(report.kernels[3].metrics, vec![None; 4]);
}

#[test]
fn dropped_activity_records_keep_their_counters() {
    let mut tree = SessionTree::new();
    let r = tree.push("lossy", 1, 0);
    let mut rebuilt = Correlator::new();
    let (kept, lost) = (7, 8);
    for (ordinal, correlation_id) in [kept, lost].into_iter().enumerate() {
        rebuilt.add_launch(LaunchRecord {
            correlation_id,
            thread: 1,
            range: Some(r),
            cycle: 0,
            ordinal: ordinal as u32,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
    }
    // CUPTI delivered the activity record of `kept` only.
    rebuilt.add_activity(activity(kept, "kept"));
    rebuilt.add_counter_ranges(
        0,
        vec![
            CounterRange { cycle: 0, index: 0, name: "0".into(), values: values(100.0, 1.0, 1.0, 1.0) },
            CounterRange { cycle: 0, index: 1, name: "1".into(), values: values(200.0, 2.0, 2.0, 2.0) },
        ],
    );
    tree.pop(1, 5).expect("pop");
    let mut info = CaptureInfo::new(ProfilingMode::KernelReplay);
    info.dropped_activity_records = 1;
    let report = Report::analyze(info, &training_metrics(), &tree, rebuilt);
    let lost_row = report.kernels.iter().find(|k| k.correlation_id == lost).expect("row kept");
    assert_eq!(lost_row.status, KernelStatus::MissingActivity);
    assert_eq!(lost_row.kernel_name, None);
    assert_eq!(lost_row.duration_ns, Some(200), "counters survive a lost activity record");
    assert_eq!(lost_row.range_path, "lossy");
    let lossy = range(&report, "lossy", 0);
    assert_eq!((lossy.kernel_count, lossy.flagged_kernel_count), (2, 1));
    assert_eq!(lossy.gpu_time_ns, Some(300));
    assert_eq!(report.meta.dropped_activity_records, 1);
    assert!(report.meta.warnings.iter().any(|w| w.contains("missing_activity")));
    let summary = report.summary().to_string();
    assert!(summary.contains("dropped activity records: 1"), "{summary}");
    assert!(summary.contains("flagged kernel rows: 1"), "{summary}");
}

#[test]
fn per_kernel_and_trace_modes() {
    let (report, _) = training_capture(ProfilingMode::PerKernel).report();
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{:?}", report.meta.warnings);
    // Five kernels of 5 ns each: the range's GPU time is its kernels' activity time.
    assert_eq!(range(&report, "train_step", 1).gpu_time_ns, Some(25));

    let (report, _) = training_capture(ProfilingMode::Trace).report();
    assert_eq!(report.meta.time_source, TimeSource::Activity);
    assert!(report.kernels.iter().all(|k| k.duration_ns == Some(5) && k.status == KernelStatus::Ok));
    assert!(report.kernels.iter().all(|k| k.range_duration_ns.is_none()), "no counter ranges in trace");
    assert_eq!(range(&report, "train_step", 0).gpu_time_ns, Some(25));
}

/// The time source of each mode, as the report states it and as the rows use it.
#[test]
fn each_mode_states_and_uses_its_time_source() {
    for (mode, source, text) in [
        (ProfilingMode::KernelReplay, TimeSource::GpuTimeDuration, "gpu__time_duration"),
        (ProfilingMode::PerKernel, TimeSource::Activity, "activity"),
        (ProfilingMode::PerRange, TimeSource::Activity, "activity"),
        (ProfilingMode::Trace, TimeSource::Activity, "activity"),
    ] {
        assert_eq!(TimeSource::for_mode(mode), source);
        let (report, _) = training_capture(mode).report();
        assert_eq!(report.meta.time_source, source, "{mode:?}");
        assert!(report.kernels.iter().all(|k| k.time_source == source));
        let mut csv = Vec::new();
        report.write_kernels_csv_to(&mut csv).expect("csv");
        let csv = String::from_utf8(csv).expect("utf8");
        assert!(csv.contains(&format!("# time_source: {text}\n")), "{mode:?}");
    }
}

/// per_kernel: the kernel's time is its activity time, not its CUPTI range's, which also
/// counts the GPU's wait for the launch; the range's time is kept as `range_duration_ns`,
/// and range rows sum kernel times (what a CPU-bound loop needs).
#[test]
fn per_kernel_time_comes_from_activity_and_keeps_the_range_duration() {
    let (report, _) = training_capture(ProfilingMode::PerKernel).report();
    let gemm = report
        .kernels
        .iter()
        .find(|k| k.kernel_name.as_deref().is_some_and(|n| n.starts_with("void gemm<128>")))
        .expect("gemm");
    assert_eq!(gemm.duration_ns, Some(5), "activity end - start");
    assert_eq!(gemm.range_duration_ns, Some(2000), "the CUPTI range's gpu__time_duration.sum");
    assert_eq!(gemm.time_source, TimeSource::Activity);

    let step = range(&report, "train_step", 0);
    // The step's five kernels (data_loader's kernel is another thread's range).
    assert_eq!(step.gpu_time_ns, Some(25), "Σ kernel activity time, not Σ range windows");
    assert_close(metric(&report, step, GPU_TIME_METRIC), 9200.0);
    assert_eq!(step.gpu_busy_ns, Some(25), "real timestamps: busy time is known");
    // DRAM bandwidth over kernel time.
    let own_read = 8000.0 + 1000.0 + 16000.0 + 3000.0 + 2800.0;
    assert_close(step.dram_read_bytes, own_read);
    assert_close(step.dram_read_gbps, own_read / 25.0);
    // SM % is weighted by each kernel's counter window, as in kernel_replay.
    let (replay, _) = training_capture(ProfilingMode::KernelReplay).report();
    let replay_step = range(&replay, "train_step", 0);
    assert_close(metric(&report, step, SM_PCT), metric(&replay, replay_step, SM_PCT).expect("kernel_replay SM %"));
    assert_eq!(replay_step.gpu_time_ns, Some(9200));
    assert!(replay.kernels.iter().all(|k| k.range_duration_ns == k.duration_ns && k.duration_ns.is_some()));

    // The metadata names the time each rate divides by.
    let gbps = report.meta.derived_metrics.iter().find(|d| d.name == "dram_read_gbps").expect("derived");
    assert_eq!(gbps.inputs, vec![READ.to_owned(), "duration_ns".to_owned()]);
    let gbps = replay.meta.derived_metrics.iter().find(|d| d.name == "dram_read_gbps").expect("derived");
    assert_eq!(gbps.inputs, vec![READ.to_owned(), GPU_TIME_METRIC.to_owned()]);

    let mut csv = Vec::new();
    report.write_kernels_csv_to(&mut csv).expect("csv");
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(csv.as_slice());
    let headers = reader.headers().expect("headers").clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("{name}"));
    let (duration, window) = (column("duration_ns"), column("range_duration_ns"));
    let first = reader.records().next().expect("row").expect("record");
    assert_eq!((&first[duration], &first[window]), ("5", "500"));
}

fn launch_record(correlation_id: u32, range: Option<RangeId>, ordinal: u32) -> LaunchRecord {
    LaunchRecord {
        correlation_id,
        thread: 1,
        range,
        cycle: 0,
        ordinal,
        api: LaunchApi::Runtime,
        api_name: "cudaLaunchKernel".into(),
        context_id: 1,
        launch_ns: None,
        unmeasured: false,
    }
}

fn timed_activity(correlation_id: u32, start_ns: u64, end_ns: u64) -> KernelActivity {
    KernelActivity { start_ns, end_ns, ..activity(correlation_id, "k") }
}

/// A CPU-bound per_range loop: CUPTI's range measures 1 ms, most of it the GPU waiting for
/// launches; the range's GPU time is its two kernels' 30 µs.
#[test]
fn per_range_gpu_time_is_kernel_time_and_the_measured_window_stays_a_metric() {
    let metrics = MetricSet {
        metrics: vec![spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"), spec(READ, MetricKind::Counter, "byte")],
    };
    let mut tree = SessionTree::new();
    let step = tree.push("step", 1, 0);
    tree.pop(1, 2_000_000).expect("pop");
    let mut correlator = Correlator::new();
    correlator.add_launch(launch_record(1, Some(step), 0));
    correlator.add_launch(launch_record(2, Some(step), 1));
    correlator.add_activity(timed_activity(1, 100_000, 110_000));
    correlator.add_activity(timed_activity(2, 900_000, 920_000));
    correlator.add_counter_ranges(
        0,
        vec![CounterRange {
            cycle: 0,
            index: 0,
            name: gmprof::correlate::range_counter_name(step),
            values: vec![1_000_000.0, 3_000_000.0],
        }],
    );
    let report = Report::analyze(CaptureInfo::new(ProfilingMode::PerRange), &metrics, &tree, correlator);
    assert!(report.meta.warnings.is_empty(), "{:?}", report.meta.warnings);
    assert_eq!(report.kernels.iter().map(|k| k.duration_ns).collect::<Vec<_>>(), [Some(10_000), Some(20_000)]);
    assert!(report.kernels.iter().all(|k| k.range_duration_ns.is_none()));
    let row = range(&report, "step", 0);
    assert_eq!(row.gpu_time_ns, Some(30_000));
    assert_eq!(row.gpu_busy_ns, Some(30_000));
    assert_close(metric(&report, row, GPU_TIME_METRIC), 1_000_000.0);
    assert_close(row.dram_read_bytes, 3_000_000.0);
    assert_close(row.dram_read_gbps, 100.0);
}

/// Activity timestamps with end ≤ start where they are the time source: the duration is
/// empty and counted in a warning, never 0 and never taken from the range.
#[test]
fn collapsed_activity_timestamps_leave_the_duration_empty() {
    let metrics = MetricSet { metrics: vec![spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond")] };
    let mut tree = SessionTree::new();
    let r = tree.push("r", 1, 0);
    let mut correlator = Correlator::new();
    correlator.add_launch(launch_record(7, Some(r), 0));
    correlator.add_activity(timed_activity(7, 500, 500));
    correlator.add_counter_ranges(0, vec![CounterRange { cycle: 0, index: 0, name: "7".into(), values: vec![4000.0] }]);
    let report = Report::analyze(CaptureInfo::new(ProfilingMode::PerKernel), &metrics, &tree, correlator);
    let k = &report.kernels[0];
    assert_eq!((k.duration_ns, k.range_duration_ns, k.status), (None, Some(4000), KernelStatus::Ok));
    assert_eq!(range(&report, "r", 0).gpu_time_ns, None);
    assert!(report.meta.warnings.iter().any(|w| w.contains("end <= start")), "{:?}", report.meta.warnings);
}

#[test]
fn unbalanced_pushes_and_pops_lose_no_data() {
    let mut tree = SessionTree::new();
    let a = tree.push("a", 1, 0);
    assert!(matches!(tree.pop(2, 1), Err(Error::PopWithoutPush { thread: 2 })));
    assert!(matches!(tree.pop_id(a, 3, 1), Err(Error::PopFromOtherThread { pushed_on: 1, popped_on: 3, .. })));
    assert_eq!(tree.current(1), Some(a));
    let b = tree.push("b", 1, 2);
    let warnings = tree.close_all_open(9);
    assert_eq!(warnings.len(), 2);
    assert_eq!(tree.get(b).and_then(|n| n.wall_ns()), Some(7));

    let stale = a;
    tree.reset();
    let fresh = tree.push("a", 1, 10);
    assert_eq!(fresh.slot, stale.slot);
    assert!(tree.get(stale).is_none(), "a reused slot rejects the old id");
    assert!(tree.get(fresh).is_some());
}

/// The small realistic report the golden files pin.
fn golden_report() -> Report {
    let mut c = training_capture(ProfilingMode::KernelReplay);
    // One range left open at finish, a name that needs quoting, a lost activity record.
    c.push("eval, \"final\"", 100);
    c.launch(100, "_Z8evaluatePKfPfi", values(250.0, 500.0, 0.0, 15.0));
    c.drop_next_activity = true;
    c.launch(100, "lost_kernel", values(50.0, 64.0, 64.0, 1.0));
    let (mut report, _) = c.report();
    report.meta.gmprof_version = "GOLDEN".into();
    report
}

#[test]
fn golden_outputs() {
    let report = golden_report();
    let mut ranges = Vec::new();
    report.write_csv_to(&mut ranges).expect("ranges csv");
    let mut kernels = Vec::new();
    report.write_kernels_csv_to(&mut kernels).expect("kernels csv");
    check_golden("ranges.csv", &String::from_utf8(ranges).expect("utf8"));
    check_golden("kernels.csv", &String::from_utf8(kernels).expect("utf8"));
    check_golden("report.json", &(report.to_json_string().expect("json") + "\n"));
    check_golden("summary.txt", &report.summary().to_string());
    let mut transfers = Vec::new();
    report.write_transfers_csv_to(&mut transfers).expect("transfers csv");
    check_golden("transfers.csv", &String::from_utf8(transfers).expect("utf8"));
    let mut stats = Vec::new();
    report.write_stats_csv_to(&mut stats).expect("stats csv");
    check_golden("stats.csv", &String::from_utf8(stats).expect("utf8"));
    check_golden("stats.txt", &report.stats().to_string());
}

#[test]
fn json_round_trips() {
    let report = golden_report();
    let text = report.to_json_string().expect("json");
    let back = Report::from_json(&text).expect("parse");
    assert_eq!(back, report);
    assert!(matches!(Report::from_json("{\"meta\": 1}"), Err(Error::InvalidConfig(_))));

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("report.json");
    report.write_json(&path).expect("write");
    assert_eq!(Report::read_json(&path).expect("read"), report);
    report.write_csv(dir.path().join("ranges.csv")).expect("csv");
    report.write_kernels_csv(dir.path().join("kernels.csv")).expect("csv");
    report.write_transfers_csv(dir.path().join("transfers.csv")).expect("csv");
    report.write_stats_csv(dir.path().join("stats.csv")).expect("csv");
    assert!(matches!(report.write_csv(dir.path().join("no/such/dir.csv")), Err(Error::Io { .. })));
}

#[test]
fn csv_round_trips_nasty_names() {
    let names = [
        "plain",
        "with, comma",
        "with \"quotes\"",
        "multi\nline\r\nname",
        "#starts with hash",
        "mid # hash",
        "ünïcødé ✓ 日本語",
        "",
        " padded ",
    ];
    let mut c = Capture::new(ProfilingMode::KernelReplay, 3);
    for name in names {
        c.push(name, 1);
        c.launch(1, name, values(10.0, 1.0, 1.0, 1.0));
        c.pop(1);
    }
    // A range left open, whose warning (with the nasty name) goes into the metadata lines.
    c.push("open\nat, \"finish\"", 1);
    let (report, _) = c.report();

    let mut out = Vec::new();
    report.write_csv_to(&mut out).expect("csv");
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(out.as_slice());
    let headers = reader.headers().expect("headers").clone();
    let path_col = headers.iter().position(|h| h == "path").expect("path column");
    assert!(headers.iter().any(|h| h == SM_PCT), "metric columns named by metric");
    let paths: Vec<String> = reader.records().map(|r| r.expect("record")[path_col].to_owned()).collect();
    let mut expected: Vec<&str> = names.to_vec();
    expected.push("open\nat, \"finish\"");
    assert_eq!(paths, expected);

    let mut out = Vec::new();
    report.write_kernels_csv_to(&mut out).expect("csv");
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(out.as_slice());
    let headers = reader.headers().expect("headers").clone();
    let name_col = headers.iter().position(|h| h == "kernel_name").expect("kernel_name");
    let status_col = headers.iter().position(|h| h == "status").expect("status");
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    let kernel_names: Vec<&str> = records.iter().map(|r| &r[name_col]).collect();
    assert_eq!(kernel_names, names);
    assert!(records.iter().all(|r| &r[status_col] == "ok"));
    // Every metadata line is one comment line: the text before the header has no bare line.
    let text = String::from_utf8(out).expect("utf8");
    let header_at = text.find("\"correlation_id\"").expect("header");
    assert!(text[..header_at].lines().all(|l| l.starts_with("# ")));
}

#[test]
fn busy_time_is_left_empty_in_counter_modes() {
    let (report, _) = training_capture(ProfilingMode::KernelReplay).report();
    assert!(report.ranges.iter().all(|r| r.gpu_busy_ns.is_none()));
    let (report, _) = training_capture(ProfilingMode::Trace).report();
    // Trace-mode kernels of the synthetic capture run one after the other: busy == sum.
    assert!(report.ranges.iter().all(|r| r.gpu_busy_ns.is_some() && r.gpu_busy_ns == r.gpu_time_ns));
}

#[test]
fn reports_without_the_new_fields_still_read() {
    let report = golden_report();
    let mut value: serde_json::Value = serde_json::from_str(&report.to_json_string().expect("json")).expect("value");
    let object = value.as_object_mut().expect("object");
    object.remove("transfers");
    let meta = object.get_mut("meta").and_then(|m| m.as_object_mut()).expect("meta");
    meta.remove("clock");
    meta.remove("clock_drift_ns");
    for range in object.get_mut("ranges").and_then(|r| r.as_array_mut()).expect("ranges") {
        let range = range.as_object_mut().expect("range");
        for field in ["gpu_busy_ns", "transfer_count", "transfer_bytes", "transfer_gbps", "memcpy_bytes"] {
            range.remove(field);
        }
    }
    let back = Report::from_json(&value.to_string()).expect("older report");
    assert!(back.transfers.is_empty());
    assert_eq!(back.meta.clock_drift_ns, None);
    assert_eq!(back.ranges[0].transfer_count, 0);
}
