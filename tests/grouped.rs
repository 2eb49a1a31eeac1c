//! Reports at real scale: the grouped summary, honest blanks, warm-up and the HTML report,
//! on a recorded training run with thousands of numbered ranges (no GPU needed).
//!
//! The run is rebuilt from capture records (launch, activity and counter records, the range
//! tree) shaped like a transformer's training loop: 50 steps `Train step N`, each with a
//! `forward` of 24 blocks `Layer M` holding `Attention M` and `MLP M`, a `backward` and an
//! `optimizer`, plus a data loader thread with `Data batch N`: 3 850 ranges and 6 100 kernels.
//! Step 0 is slow, as warm-up steps are. Golden files in `tests/golden/` pin the outputs;
//! rewrite them with `GMPROF_BLESS=1 cargo test --test grouped`.

use gmprof::correlate::{range_counter_name, Correlator};
use gmprof::model::{
    CounterRange, DevicePeaks, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, ProfilingMode,
    GPU_TIME_METRIC,
};
use gmprof::report::{CaptureInfo, GroupBy, Report, SummaryOptions};
use gmprof::session::SessionTree;

#[path = "common/golden.rs"]
mod golden;
#[path = "common/metrics.rs"]
mod metrics;
use golden::check_golden;
use metrics::spec;

const STEPS: u32 = 50;
const LAYERS: u32 = 24;
const MAIN: u64 = 1;
const LOADER: u64 = 2;

fn metrics(mode: ProfilingMode) -> MetricSet {
    if mode == ProfilingMode::Trace {
        return MetricSet::default();
    }
    MetricSet {
        metrics: vec![
            spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"),
            spec("dram__bytes_read.sum", MetricKind::Counter, "byte"),
            spec("dram__bytes_write.sum", MetricKind::Counter, "byte"),
        ],
    }
}

/// Kernel `k` of a kind in step `step`: its duration (ns), the same formula every time.
/// Step 0 runs 3× slower; the rest vary by up to 4% in a fixed pattern.
fn duration(base: u64, step: u32, k: u32) -> u64 {
    let warm = if step == 0 { 3 } else { 1 };
    base * warm * (100 + u64::from((step * 7 + k * 3) % 5)) / 100
}

struct Recorder {
    mode: ProfilingMode,
    tree: SessionTree,
    correlator: Correlator,
    clock: u64,
    next: u32,
    /// Counter ranges of the one cycle: per kernel (counter modes but per_range) or per
    /// top-level range (per_range).
    counters: Vec<CounterRange>,
    /// Per_range: the open top-level range's sums (time, read, write).
    top_sums: [f64; 3],
}

impl Recorder {
    fn new(mode: ProfilingMode) -> Self {
        Self {
            mode,
            tree: SessionTree::new(),
            correlator: Correlator::new(),
            clock: 1_000_000,
            next: 1,
            counters: Vec::new(),
            top_sums: [0.0; 3],
        }
    }

    fn push(&mut self, name: &str, thread: u64) {
        self.clock += 100;
        self.tree.push(name, thread, self.clock);
    }

    fn pop(&mut self, thread: u64) {
        self.clock += 100;
        let id = self.tree.pop(thread, self.clock).expect("balanced");
        let top = self.tree.get(id).is_some_and(|n| n.depth == 0);
        if self.mode == ProfilingMode::PerRange && top {
            let index = self.counters.len() as u32;
            let values = std::mem::take(&mut self.top_sums).to_vec();
            self.counters.push(CounterRange { cycle: 0, index, name: range_counter_name(id), values });
        }
    }

    fn kernel(&mut self, thread: u64, name: &str, time: u64, bytes: u64) {
        let correlation_id = self.next;
        self.next += 1;
        let ordinal = correlation_id - 1;
        self.correlator.add_launch(LaunchRecord {
            correlation_id,
            thread,
            range: self.tree.current(thread),
            cycle: 0,
            ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
        let start = self.clock + 10;
        self.clock = start + time;
        let collapsed = self.mode == ProfilingMode::KernelReplay;
        self.correlator.add_activity(KernelActivity {
            correlation_id,
            name: name.into(),
            grid: [132, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 64,
            static_shared_memory: 0,
            dynamic_shared_memory: 0,
            stream_id: 7,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
            // Kernel replay collapses activity timestamps (start == end); user replay does not.
            start_ns: if collapsed { self.clock } else { start },
            end_ns: self.clock,
        });
        let values = vec![time as f64, (bytes * 3 / 4) as f64, (bytes / 4) as f64];
        match self.mode {
            ProfilingMode::Trace => {}
            ProfilingMode::PerRange => {
                for (sum, v) in self.top_sums.iter_mut().zip(&values) {
                    *sum += v;
                }
            }
            _ => self.counters.push(CounterRange { cycle: 0, index: ordinal, name: ordinal.to_string(), values }),
        }
    }

    fn report(mut self) -> Report {
        let counters = std::mem::take(&mut self.counters);
        if self.mode != ProfilingMode::Trace {
            self.correlator.add_counter_ranges(0, counters);
        }
        let mut info = CaptureInfo::new(self.mode);
        info.device_name = Some("NVIDIA H200".into());
        info.chip = Some("GH100".into());
        info.device_peaks = Some(DevicePeaks::from_attributes(
            Some(9),
            Some(0),
            Some(132),
            Some(1_980_000),
            Some(3_201_000),
            Some(6016),
        ));
        let mut report = Report::analyze(info, &metrics(self.mode), &self.tree, self.correlator);
        report.meta.gmprof_version = "GOLDEN".into();
        report
    }
}

/// The training run described in the module docs, recorded in `mode`.
fn training_run(mode: ProfilingMode) -> Report {
    let mut r = Recorder::new(mode);
    for step in 0..STEPS {
        r.push(&format!("Data batch {step}"), LOADER);
        r.kernel(LOADER, "decode_tokens", duration(2_000, step, 0), 1 << 20);
        r.pop(LOADER);
        r.push(&format!("Train step {step}"), MAIN);
        r.push("forward", MAIN);
        for layer in 0..LAYERS {
            r.push(&format!("Layer {layer}"), MAIN);
            r.push(&format!("Attention {layer}"), MAIN);
            r.kernel(MAIN, "qkv_gemm", duration(8_000, step, layer), 12 << 20);
            r.kernel(MAIN, "flash_attention", duration(6_000, step, layer), 8 << 20);
            r.pop(MAIN);
            r.push(&format!("MLP {layer}"), MAIN);
            r.kernel(MAIN, "mlp_up_gemm", duration(10_000, step, layer), 16 << 20);
            r.kernel(MAIN, "gelu_down_gemm", duration(9_000, step, layer), 16 << 20);
            r.pop(MAIN);
            r.pop(MAIN);
        }
        r.pop(MAIN);
        r.push("backward", MAIN);
        for layer in 0..LAYERS {
            r.kernel(MAIN, "backward_gemm", duration(60_000, step, layer), 96 << 20);
        }
        r.pop(MAIN);
        r.push("optimizer", MAIN);
        r.kernel(MAIN, "adamw_step", duration(50_000, step, 0), 400 << 20);
        r.pop(MAIN);
        r.pop(MAIN);
    }
    r.report()
}

fn options(group_by: GroupBy, top: Option<usize>, skip_first: u32) -> SummaryOptions {
    SummaryOptions { group_by, top, skip_first }
}

/// Σ of `duration(base, step, k)` over the kernels of one step's `Attention #` ranges.
fn attention_time(step: u32) -> u64 {
    (0..LAYERS).map(|l| duration(8_000, step, l) + duration(6_000, step, l)).sum()
}

#[test]
fn the_recorded_run_is_at_scale() {
    let report = training_run(ProfilingMode::KernelReplay);
    assert_eq!(report.ranges.len() as u32, STEPS * (1 + 1 + LAYERS * 3 + 2 + 1));
    assert_eq!(report.kernels.len() as u32, STEPS * (1 + LAYERS * 5 + 1));
    assert!(report.ranges.len() > 3_000);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{:?}", report.meta.warnings);
}

#[test]
fn numbered_ranges_fold_into_one_screen() {
    let report = training_run(ProfilingMode::KernelReplay);
    let summary = report.summary();
    // Train step #, Data batch #, forward, backward, optimizer, Layer #, Attention #, MLP #.
    assert_eq!(summary.group_count, 8);
    assert_eq!(summary.range_rows, 3850);
    let text = summary.to_string();
    assert!(text.lines().count() <= 25, "fits one screen:\n{text}");
    let attention =
        summary.rows.iter().find(|r| r.label == "Train step #/forward/Layer #/Attention #").expect("attention row");
    assert_eq!(attention.count, u64::from(STEPS * LAYERS));
    assert_eq!(attention.distinct, u64::from(STEPS * LAYERS), "every exact path is distinct");
    let total: u64 = (0..STEPS).map(attention_time).sum();
    assert_eq!(attention.total_ns, Some(total));
    check_golden("grouped_summary.txt", &text);

    let by_name = report.summary_with(&options(GroupBy::Name, Some(6), 0));
    assert_eq!(by_name.rows.len(), 6);
    assert_eq!(by_name.group_count, 8);
    check_golden("grouped_by_name.txt", &by_name.to_string());

    let by_instance = report.summary_with(&options(GroupBy::Instance, Some(5), 0));
    assert_eq!(by_instance.group_count, 3850, "one group per instance");
    assert_eq!(by_instance.rows[0].label, "Train step 0", "the warm-up step is the largest instance");
    check_golden("grouped_by_instance.txt", &by_instance.to_string());
}

#[test]
fn skip_first_keeps_warm_up_out_of_steady_state() {
    let report = training_run(ProfilingMode::KernelReplay);
    let summary = report.summary_with(&options(GroupBy::Path, None, 1));
    // Step 0 and its 74 nested ranges, and data batch 0.
    assert_eq!(summary.warmup_rows, 1 + 1 + u64::from(LAYERS) * 3 + 2 + 1);
    let attention =
        summary.rows.iter().find(|r| r.label == "Train step #/forward/Layer #/Attention #").expect("attention row");
    assert_eq!(attention.count, u64::from((STEPS - 1) * LAYERS));
    assert_eq!(attention.warmup_count, u64::from(LAYERS));
    let steady: u64 = (1..STEPS).map(attention_time).sum();
    assert_eq!(attention.total_ns, Some(steady));
    let warm_mean = attention_time(0) as f64 / f64::from(LAYERS);
    assert!((attention.warmup_mean_ns.expect("warm-up mean") - warm_mean).abs() < 1e-6);
    assert!(attention.warmup_mean_ns > attention.mean_ns.map(|m| m * 2.5), "warm-up is ~3× slower");
    // The steady p99 no longer sees step 0: at most 4% above the fastest instance.
    let p99 = attention.p99_ns.expect("p99") as f64;
    let fastest = (1..STEPS)
        .flat_map(|s| (0..LAYERS).map(move |l| duration(8_000, s, l) + duration(6_000, s, l)))
        .min()
        .expect("instances") as f64;
    assert!(p99 <= fastest * 1.05, "p99 {p99} vs fastest {fastest}");
    let step = summary.rows.iter().find(|r| r.label == "Train step #").expect("step row");
    assert_eq!((step.count, step.warmup_count), (49, 1));
    check_golden("skip_first_summary.txt", &summary.to_string());
}

#[test]
fn nested_ranges_beyond_the_measured_level_are_blank_in_per_range() {
    let report = training_run(ProfilingMode::PerRange);
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{:?}", report.meta.warnings);
    // Counters were measured for the top-level ranges only: the nested ones' are blank. Time
    // comes from the kernels' activity timestamps at every level.
    for row in &report.ranges {
        assert_eq!(row.gpu_time_ns.is_some(), row.kernel_count > 0, "{}", row.path);
        if row.depth > 0 {
            assert!(row.metrics.iter().all(Option::is_none) && row.dram_total_gbps.is_none(), "{}", row.path);
        }
    }
    let expected_total: u64 = report.ranges.iter().filter(|r| r.depth == 0).filter_map(|r| r.gpu_time_ns).sum();
    assert_eq!(report.meta.total_gpu_time_ns, Some(expected_total), "per_range total is the measured ranges'");
    let summary = report.summary();
    let forward = summary.rows.iter().find(|r| r.label == "Train step #/forward").expect("forward row");
    // Timed from the kernels' activity at every level; no counters below the top level.
    assert_eq!((forward.count, forward.missing), (50, 0));
    assert!(forward.total_ns.is_some() && forward.share_pct.is_some());
    assert_eq!(forward.dram_gbps, None, "no counters were measured for nested ranges");
    let text = summary.to_string();
    assert!(!text.contains(" 0 ns"), "no unmeasured value reads 0:\n{text}");
    check_golden("blanks_per_range_summary.txt", &text);

    // CSV: blank cells; JSON: null.
    let mut csv = Vec::new();
    report.write_csv_to(&mut csv).expect("csv");
    let csv = String::from_utf8(csv).expect("utf8");
    let head: Vec<&str> = csv.lines().filter(|l| !l.starts_with('#')).take(8).collect();
    check_golden("blanks_per_range_ranges_head.csv", &(head.join("\n") + "\n"));
    let json: serde_json::Value = serde_json::from_str(&report.to_json_string().expect("json")).expect("parse");
    let ranges = json["ranges"].as_array().expect("ranges");
    let nested = ranges.iter().find(|r| r["path"] == "Train step 0/forward/Layer 0/Attention 0").expect("nested");
    assert!(nested["gpu_time_ns"].is_u64() && nested["dram_read_gbps"].is_null());
    assert!(nested["metrics"].as_array().expect("metrics").iter().all(serde_json::Value::is_null));
    let rows = [ranges.iter().find(|r| r["path"] == "Train step 0").expect("top").clone(), nested.clone()];
    check_golden("blanks_per_range_rows.json", &(serde_json::to_string_pretty(&rows).expect("json") + "\n"));
}

#[test]
fn trace_mode_names_the_chip_and_leaves_counters_blank() {
    let report = training_run(ProfilingMode::Trace);
    assert!(report.ranges.iter().all(|r| r.dram_read_bytes.is_none() && r.dram_total_gbps.is_none()));
    let text = report.summary_with(&options(GroupBy::Path, Some(6), 1)).to_string();
    assert!(text.contains("NVIDIA H200 (chip GH100)"), "{text}");
    check_golden("blanks_trace_summary.txt", &text);
    let mut csv = Vec::new();
    report.write_csv_to(&mut csv).expect("csv");
    let csv = String::from_utf8(csv).expect("utf8");
    let head: Vec<&str> = csv.lines().filter(|l| !l.starts_with('#')).take(4).collect();
    check_golden("blanks_trace_ranges_head.csv", &(head.join("\n") + "\n"));
}

#[test]
fn html_report_embeds_the_data_and_the_library() {
    let report = training_run(ProfilingMode::KernelReplay);
    let html = report.to_html(&options(GroupBy::Path, None, 1)).expect("html");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Licensed to the Apache Software Foundation"), "ECharts is embedded");
    assert!(!html.contains("<script src"), "nothing is loaded from elsewhere");
    let start = html.find("id=\"gmprof-data\">").expect("data") + "id=\"gmprof-data\">".len();
    let end = start + html[start..].find("</script>").expect("end of data");
    let data: serde_json::Value = serde_json::from_str(&html[start..end]).expect("data is JSON");
    assert_eq!(data["groups"][0]["label"], "Train step #");
    assert_eq!(data["kernels"][0]["name"], "backward_gemm");
    let time: u64 = (0..STEPS).flat_map(|s| (0..LAYERS).map(move |l| duration(60_000, s, l))).sum();
    let bytes = f64::from(STEPS * LAYERS) * f64::from(96u32 << 20);
    let gbps = data["kernels"][0]["dram_gbps"].as_f64().expect("kernel bandwidth");
    assert!((gbps - bytes / time as f64).abs() < 1e-9 * gbps, "{gbps}");
    assert_eq!(data["meta"]["skip_first"], 1);
    let peak = data["meta"]["dram_peak_gbps"].as_f64().expect("peak");
    assert!((peak - 4814.304).abs() < 1e-6, "{peak}");
    assert_eq!(data["timeline"]["items"].as_array().expect("items").len(), 3850 + 6100);
    assert!(data["roofline"].is_null(), "no FLOP or instruction counters");
}

#[test]
fn sass_metrics_that_read_zero_everywhere_are_not_measured() {
    let sass = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum";
    let set = MetricSet {
        metrics: vec![spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"), spec(sass, MetricKind::Counter, "inst")],
    };
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let id = tree.push("step", 1, 0);
    for i in 0..3u32 {
        correlator.add_launch(LaunchRecord {
            correlation_id: i + 1,
            thread: 1,
            range: Some(id),
            cycle: 0,
            ordinal: i,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
    }
    tree.pop(1, 100).expect("pop");
    let ranges =
        (0..3).map(|i| CounterRange { cycle: 0, index: i, name: i.to_string(), values: vec![10.0, 0.0] }).collect();
    correlator.add_counter_ranges(0, ranges);
    let report = Report::analyze(CaptureInfo::new(ProfilingMode::KernelReplay), &set, &tree, correlator);
    assert!(report.kernels.iter().all(|k| k.metrics[1].is_none() && k.metrics[0] == Some(10.0)));
    assert!(report.ranges.iter().all(|r| r.metrics[1].is_none()));
    assert!(report.meta.warnings.iter().any(|w| w.contains(sass) && w.contains("not measured")));
}
