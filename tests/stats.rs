//! Statistics per label ([`gmprof::stats`]): hand-computed values over synthetic trace-mode
//! sessions (no GPU needed).

use gmprof::correlate::Correlator;
use gmprof::model::{KernelActivity, LaunchApi, LaunchRecord, MetricSet, ProfilingMode, RangeId};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::{SessionTree, ROOT_PATH};
use gmprof::stats::{nearest_rank, LabelStats, StatsQuantity, StatsTable, STATS_COLUMNS};

/// Builds a trace-mode session: kernels are launched one after the other on one stream, each
/// `duration` ns long, in the innermost open range of thread 1.
struct Session {
    tree: SessionTree,
    correlator: Correlator,
    clock: u64,
    next_id: u32,
}

impl Session {
    fn new() -> Self {
        Self { tree: SessionTree::new(), correlator: Correlator::new(), clock: 0, next_id: 1 }
    }

    fn push(&mut self, name: &str) -> RangeId {
        self.clock += 1;
        self.tree.push(name, 1, self.clock)
    }

    fn pop(&mut self) {
        self.clock += 1;
        self.tree.pop(1, self.clock).expect("balanced");
    }

    /// A kernel; with `name` `None` its activity record is lost (no name, no duration).
    fn kernel(&mut self, name: Option<&str>, duration: u64) {
        let correlation_id = self.next_id;
        self.next_id += 1;
        self.correlator.add_launch(LaunchRecord {
            correlation_id,
            thread: 1,
            range: self.tree.current(1),
            cycle: 0,
            ordinal: correlation_id,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
        let start = self.clock;
        self.clock += duration;
        if let Some(name) = name {
            self.correlator.add_activity(KernelActivity {
                correlation_id,
                name: name.into(),
                grid: [1, 1, 1],
                block: [1, 1, 1],
                registers_per_thread: 1,
                static_shared_memory: 0,
                dynamic_shared_memory: 0,
                stream_id: 1,
                context_id: 1,
                device_id: 0,
                graph_id: 0,
                graph_node_id: 0,
                start_ns: start,
                end_ns: start + duration,
            });
        }
    }

    fn report(self) -> Report {
        Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &self.tree, self.correlator)
    }
}

fn find<'a>(stats: &'a [LabelStats], path: &str, kernel: Option<&str>) -> &'a LabelStats {
    stats
        .iter()
        .find(|s| s.range_path == path && s.kernel_name.as_deref() == kernel)
        .unwrap_or_else(|| panic!("no group {path} / {kernel:?}"))
}

fn assert_close(actual: Option<f64>, expected: f64) {
    let a = actual.unwrap_or_else(|| panic!("expected {expected}, got None"));
    assert!((a - expected).abs() <= 1e-9 * expected.abs().max(1.0), "{a} != {expected}");
}

#[test]
fn durations_one_to_a_hundred() {
    let mut s = Session::new();
    s.push("step");
    // Shuffled order: 1..=100 stepping by 37 (coprime with 100) visits every value once.
    for i in 0..100u64 {
        s.kernel(Some("k"), (i * 37) % 100 + 1);
    }
    s.pop();
    let report = s.report();
    let kernels = report.kernel_stats();
    assert_eq!(kernels.len(), 1);
    let k = &kernels[0];
    assert_eq!((k.table, k.quantity), (StatsTable::Kernel, StatsQuantity::DurationNs));
    assert_eq!((k.range_path.as_str(), k.kernel_name.as_deref()), ("step", Some("k")));
    assert_eq!((k.count, k.missing, k.total_ns), (100, 0, Some(5050)));
    assert_close(k.mean_ns, 50.5);
    assert_eq!((k.min_ns, k.p50_ns, k.p99_ns, k.max_ns), (Some(1), Some(50), Some(99), Some(100)));
    assert_close(k.share_pct, 100.0);

    let ranges = report.range_stats();
    assert_eq!(ranges.len(), 1);
    assert_eq!((ranges[0].count, ranges[0].total_ns, ranges[0].p99_ns), (1, Some(5050), Some(5050)));
    assert_close(ranges[0].share_pct, 100.0);
}

/// Three steps of forward (gemm, softmax) and backward (gemm), and one kernel outside.
fn training() -> Report {
    let mut s = Session::new();
    for step in 0..3u64 {
        s.push("step");
        s.push("forward");
        s.kernel(Some("gemm"), 100 + 10 * step);
        s.kernel(Some("softmax"), 20);
        s.pop();
        s.push("backward");
        s.kernel(Some("gemm"), 200 * (step + 1));
        s.pop();
        s.pop();
    }
    s.kernel(Some("copy"), 60);
    s.report()
}

#[test]
fn ranges_group_instances_by_path() {
    let report = training();
    let ranges = report.range_stats();
    let paths: Vec<&str> = ranges.iter().map(|s| s.range_path.as_str()).collect();
    // Totals: step 330+60+1200 = 1590, backward 1200, forward 390, root 60.
    assert_eq!(paths, ["step", "step/backward", "step/forward", ROOT_PATH]);
    let step = find(&ranges, "step", None);
    assert_eq!((step.count, step.total_ns), (3, Some(1590)));
    // Instances: 120+200, 130+400, 140+600.
    assert_eq!((step.min_ns, step.p50_ns, step.p99_ns, step.max_ns), (Some(320), Some(530), Some(740), Some(740)));
    assert_close(step.mean_ns, 530.0);
    // Grand total: top-level rows (step ×3, root) = all kernel time, 1650.
    assert_close(step.share_pct, 100.0 * 1590.0 / 1650.0);
    let backward = find(&ranges, "step/backward", None);
    assert_eq!((backward.min_ns, backward.p50_ns, backward.max_ns), (Some(200), Some(400), Some(600)));
    assert_close(backward.share_pct, 100.0 * 1200.0 / 1650.0);
    // Top-level shares add up to 100%.
    let top: f64 = [step, find(&ranges, ROOT_PATH, None)].iter().filter_map(|s| s.share_pct).sum();
    assert!((top - 100.0).abs() < 1e-9, "{top}");

    // Wall time: the root row has none and is left out.
    let wall = report.range_wall_stats();
    assert!(wall.iter().all(|s| s.quantity == StatsQuantity::WallTimeNs && s.range_path != ROOT_PATH));
    let step_wall = find(&wall, "step", None);
    assert_eq!(step_wall.count, 3);
    let top_wall: f64 = wall.iter().filter(|s| s.range_path == "step").filter_map(|s| s.share_pct).sum();
    assert!((top_wall - 100.0).abs() < 1e-9, "{top_wall}");
}

#[test]
fn kernels_group_by_range_path_and_name() {
    let report = training();
    let kernels = report.kernel_stats();
    let labels: Vec<(&str, &str)> =
        kernels.iter().map(|s| (s.range_path.as_str(), s.kernel_name.as_deref().unwrap_or("?"))).collect();
    assert_eq!(
        labels,
        [("step/backward", "gemm"), ("step/forward", "gemm"), ("<root>", "copy"), ("step/forward", "softmax")]
    );
    let gemm_fwd = find(&kernels, "step/forward", Some("gemm"));
    assert_eq!((gemm_fwd.count, gemm_fwd.total_ns, gemm_fwd.p50_ns), (3, Some(330), Some(110)));
    let softmax = find(&kernels, "step/forward", Some("softmax"));
    assert_eq!((softmax.min_ns, softmax.max_ns, softmax.total_ns), (Some(20), Some(20), Some(60)));
    // Kernel shares add up to 100%.
    let share: f64 = kernels.iter().filter_map(|s| s.share_pct).sum();
    assert!((share - 100.0).abs() < 1e-9, "{share}");
}

#[test]
fn ties_sort_by_path_then_name_whatever_the_input_order() {
    let orders: [&[(&str, &str)]; 2] =
        [&[("b", "y"), ("a", "y"), ("b", "x"), ("a", "x")], &[("a", "x"), ("b", "x"), ("a", "y"), ("b", "y")]];
    let mut results = Vec::new();
    for order in orders {
        let mut s = Session::new();
        for (range, kernel) in order {
            s.push(range);
            s.kernel(Some(kernel), 10);
            s.pop();
        }
        let report = s.report();
        let kernels: Vec<(String, Option<String>)> =
            report.kernel_stats().into_iter().map(|k| (k.range_path, k.kernel_name)).collect();
        let ranges: Vec<String> = report.range_stats().into_iter().map(|r| r.range_path).collect();
        assert_eq!(ranges, ["a", "b"]);
        results.push(kernels);
    }
    let expected: Vec<(String, Option<String>)> = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
        .iter()
        .map(|(r, k)| (r.to_string(), Some(k.to_string())))
        .collect();
    assert_eq!(results[0], expected);
    assert_eq!(results[1], expected);
}

#[test]
fn kernels_without_activity_are_counted_missing() {
    let mut s = Session::new();
    s.push("lossy");
    s.kernel(Some("k"), 30);
    s.kernel(None, 0);
    s.kernel(None, 0);
    s.pop();
    let report = s.report();
    let kernels = report.kernel_stats();
    assert_eq!(kernels.len(), 2);
    let lost = find(&kernels, "lossy", None);
    assert_eq!((lost.count, lost.missing, lost.total_ns), (0, 2, None));
    assert_eq!((lost.mean_ns, lost.min_ns, lost.p50_ns, lost.p99_ns, lost.max_ns), (None, None, None, None, None));
    assert_eq!(lost.share_pct, Some(0.0));
    assert_eq!(kernels[1].kernel_name, None, "the empty group sorts last");
    assert!(report.stats().to_string().contains("<unknown>"));
}

#[test]
fn empty_reports_have_no_groups() {
    let report = Session::new().report();
    assert!(report.range_stats().is_empty());
    assert!(report.range_wall_stats().is_empty());
    assert!(report.kernel_stats().is_empty());
    let text = report.stats().to_string();
    assert!(text.contains("ranges by GPU time") && text.contains("kernels by GPU time"), "{text}");

    let mut out = Vec::new();
    report.write_stats_csv_to(&mut out).expect("csv");
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(out.as_slice());
    let headers: Vec<String> = reader.headers().expect("headers").iter().map(str::to_owned).collect();
    assert_eq!(headers, STATS_COLUMNS);
    assert_eq!(reader.records().count(), 0);

    // A range with no kernels: a group with total 0 and no share (grand total 0).
    let mut s = Session::new();
    s.push("idle");
    s.pop();
    let stats = s.report().range_stats();
    assert_eq!(stats.len(), 1);
    assert_eq!((stats[0].count, stats[0].total_ns, stats[0].p50_ns, stats[0].share_pct), (1, Some(0), Some(0), None));
}

#[test]
fn stats_csv_reads_back() {
    let report = training();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("stats.csv");
    report.write_stats_csv(&path).expect("write");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.lines().any(|l| l.starts_with("# statistics: percentiles by nearest rank")));
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(text.as_bytes());
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    let tables: Vec<(&str, &str)> = records.iter().map(|r| (&r[0], &r[1])).collect();
    let ranges = report.range_stats().len();
    let walls = report.range_wall_stats().len();
    let kernels = report.kernel_stats().len();
    assert_eq!(tables.len(), ranges + walls + kernels);
    assert!(tables[..ranges].iter().all(|t| *t == ("range", "gpu_time_ns")));
    assert!(tables[ranges..ranges + walls].iter().all(|t| *t == ("range", "wall_time_ns")));
    assert!(tables[ranges + walls..].iter().all(|t| *t == ("kernel", "duration_ns")));
    let first = &records[0];
    assert_eq!((&first[2], &first[3], &first[4], &first[6]), ("step", "", "3", "1590"));
    assert_eq!((&first[9], &first[10]), ("530", "740"));
    assert!(report.write_stats_csv(dir.path().join("no/such/dir.csv")).is_err());
}

#[test]
fn percentile_rank_is_documented_nearest_rank() {
    let ten: Vec<u64> = (1..=10).map(|v| v * 10).collect();
    // Rank ⌈p·n/100⌉: p50 → 5, p99 → ⌈9.9⌉ = 10, p10 → 1, p11 → ⌈1.1⌉ = 2.
    assert_eq!(nearest_rank(&ten, 50), Some(50));
    assert_eq!(nearest_rank(&ten, 99), Some(100));
    assert_eq!(nearest_rank(&ten, 10), Some(10));
    assert_eq!(nearest_rank(&ten, 11), Some(20));
}
