//! What the HTML report plots: a [`Report`] reduced to the few tables the page draws.
//!
//! Everything is computed here, in Rust, and embedded as JSON; the page's script only draws.
//! Values that were not measured stay `null` (the page shows "—" and leaves them out of
//! plots).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Serialize;

use crate::analysis::aggregate::DRAM_SECTOR_BYTES;
use crate::analysis::pm_fold::PmReport;
use crate::error::Result;
use crate::model::pm::{PmInterval, PmSample};
use crate::model::ProfilingMode;
use crate::report::model::Report;
use crate::report::text::summary::{Summary, SummaryOptions, SummaryRow};
use crate::report::timeline::events::{EventArgs, Phase, GPU_PID_BASE};

/// Most timeline slices embedded; beyond that the earliest are kept and the rest counted.
pub const MAX_TIMELINE_ITEMS: usize = 60_000;

/// Most rows of the kernel and range tables.
pub const MAX_TABLE_ROWS: usize = 2_000;

/// FLOP counters gmprof knows, with FLOPs per counted thread instruction (an FMA is two).
/// The `sm__` rollups of the same counters are accepted too.
pub const FLOP_COUNTERS: [(&str, &str, f64); 9] = [
    ("fp64", "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", 1.0),
    ("fp64", "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum", 1.0),
    ("fp64", "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", 2.0),
    ("fp32", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 1.0),
    ("fp32", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 1.0),
    ("fp32", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 2.0),
    ("fp16", "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", 1.0),
    ("fp16", "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", 1.0),
    ("fp16", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", 2.0),
];

/// Instruction counters for an instruction roofline when no FLOP counter was collected
/// (warp-level instructions executed).
pub const INSTRUCTION_COUNTERS: [&str; 2] = ["smsp__inst_executed.sum", "sm__inst_executed.sum"];

/// The report's header facts.
#[derive(Clone, Debug, Serialize)]
pub struct MetaView {
    pub version: String,
    pub mode: String,
    pub device: String,
    pub chip: String,
    pub time_source: String,
    pub kernel_count: u64,
    pub total_gpu_time_ns: Option<u64>,
    pub dropped_counter_ranges: u64,
    pub dropped_activity_records: u64,
    pub flagged_kernel_rows: u64,
    pub warnings: Vec<String>,
    pub dram_peak_gbps: Option<f64>,
    pub fp32_peak_gflops: Option<f64>,
    pub group_by: String,
    pub skip_first: u32,
    pub metrics: Vec<String>,
    /// Why kernel positions on the timeline are not measured, when they are not.
    pub placement_note: Option<String>,
}

/// All calls of one kernel name.
#[derive(Clone, Debug, Serialize)]
pub struct KernelGroup {
    pub name: String,
    pub calls: u64,
    pub flagged: u64,
    /// Σ duration over calls with one, ns.
    pub total_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    /// Of the session's kernel time.
    pub share_pct: Option<f64>,
    /// Σ DRAM bytes / Σ time over calls with both, GB/s.
    pub dram_gbps: Option<f64>,
    /// Σ FLOPs (or warp instructions, see [`Roofline::kind`]) over calls with a value.
    pub work: Option<f64>,
    /// `work` / Σ DRAM bytes over calls with both.
    pub intensity: Option<f64>,
    /// `work` / Σ time over calls with both, per second / 1e9.
    pub rate_g: Option<f64>,
}

/// The timeline overview: one slice per range, kernel and transfer, on lanes.
#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    /// Lane labels, top to bottom.
    pub lanes: Vec<String>,
    /// Slice names, referenced by index.
    pub names: Vec<String>,
    /// `[lane, start µs, duration µs, name index, kind]`; kind 0 range, 1 kernel, 2 transfer.
    pub items: Vec<(u32, f64, f64, u32, u8)>,
    /// Slices left out past [`MAX_TIMELINE_ITEMS`].
    pub left_out: u64,
}

/// The roofline's points and roofs.
#[derive(Clone, Debug, Serialize)]
pub struct Roofline {
    /// `flop` (FLOP counters) or `instruction` (warp instructions).
    pub kind: &'static str,
    /// The counters the work comes from.
    pub counters: Vec<String>,
    /// FLOP precisions seen (`fp32`, ...), for the label.
    pub precisions: Vec<&'static str>,
    pub dram_peak_gbps: Option<f64>,
    /// The compute roof, in billions per second: the FP32 peak for FP32-only FLOP counters,
    /// the warp-instruction issue peak for instruction counters.
    pub compute_peak_g: Option<f64>,
}

/// PM sampling's plot: each sampled metric over time, on the timeline's clock.
#[derive(Clone, Debug, Serialize)]
pub struct PmView {
    /// Metric names, in series order.
    pub metrics: Vec<String>,
    /// Their units (`byte/second` series are drawn in GB/s, the others as given).
    pub units: Vec<String>,
    /// Point times, µs from the timeline's origin (the middle of each bucket of samples).
    pub t: Vec<f64>,
    /// Per metric, the time-weighted mean of each bucket's samples (`None`: none had a value).
    pub values: Vec<Vec<Option<f64>>>,
    /// Samples averaged into one point (1 when every sample is its own point).
    pub samples_per_point: usize,
    /// The interval, the alignment and what was lost, in words.
    pub note: String,
}

/// Points at most in the PM plot; more samples are averaged in buckets.
pub const MAX_PM_POINTS: usize = 4_000;

fn pm_view(pm: &PmReport, origin: u64) -> Option<PmView> {
    let samples: Vec<&PmSample> = pm.samples.iter().filter(|s| s.start_ns >= origin).collect();
    if samples.is_empty() {
        return None;
    }
    let per_point = samples.len().div_ceil(MAX_PM_POINTS);
    let mut t = Vec::new();
    let mut values: Vec<Vec<Option<f64>>> = vec![Vec::new(); pm.metrics.len()];
    for bucket in samples.chunks(per_point) {
        let (a, b) = (bucket[0].start_ns, bucket[bucket.len() - 1].end_ns);
        t.push((a as f64 + b as f64) / 2.0 / 1000.0 - origin as f64 / 1000.0);
        for (m, series) in values.iter_mut().enumerate() {
            let (mut sum, mut weight) = (0.0, 0.0);
            for s in bucket {
                if let Some(v) = s.values.get(m).copied().flatten() {
                    let w = s.end_ns.saturating_sub(s.start_ns) as f64;
                    sum += v * w;
                    weight += w;
                }
            }
            series.push((weight > 0.0).then(|| sum / weight));
        }
    }
    let interval = match pm.interval {
        Some(PmInterval::TimeNs(ns)) => format!("every {:.1} µs", ns as f64 / 1e3),
        Some(PmInterval::Cycles(c)) => format!("every {c} SYSCLK cycles"),
        None => "at an unknown interval".into(),
    };
    let mut note = format!(
        "{} PM samples {interval}, aligned to the activity clock by {} (offset {} ns)",
        pm.sample_count, pm.alignment.method, pm.alignment.offset_ns
    );
    if per_point > 1 {
        note.push_str(&format!("; {per_point} samples per point"));
    }
    if pm.hw_buffer_overflows > 0 || pm.missing_samples > 0 {
        note.push_str(&format!(
            "; {} hardware-buffer overflow(s), {} sample(s) missing",
            pm.hw_buffer_overflows, pm.missing_samples
        ));
    }
    note.push_str(". Per-range and per-kernel values are in pm.csv.");
    Some(PmView {
        metrics: pm.metrics.iter().map(|m| m.name.clone()).collect(),
        units: pm.metrics.iter().map(|m| m.unit.clone()).collect(),
        t,
        values,
        samples_per_point: per_point,
        note,
    })
}

/// Everything the page draws.
#[derive(Clone, Debug, Serialize)]
pub struct HtmlData {
    pub meta: MetaView,
    pub summary_text: String,
    /// Range groups by share (all of them, up to [`MAX_TABLE_ROWS`]).
    pub groups: Vec<SummaryRow>,
    /// Groups of the summary that were hidden by the row cap.
    pub groups_left_out: u64,
    /// Kernel names by total time.
    pub kernels: Vec<KernelGroup>,
    pub kernels_left_out: u64,
    pub timeline: Timeline,
    pub roofline: Option<Roofline>,
    /// PM sampling over time, when the session sampled.
    pub pm: Option<PmView>,
    /// PC sampling's stall reasons per range group and hot spots, when the session sampled.
    pub pc: Option<super::pc::PcView>,
    /// Step time over the run and the whole run's aggregates, when the rows were streamed.
    pub streamed: Option<super::steps::StreamedView>,
    /// per_kernel in rotation: one typical step's range groups and the kernel names.
    pub rotation: Option<super::rotation::RotationView>,
}

/// DRAM bytes read plus written of one kernel's metric values, from the same counters as the
/// report's derived DRAM columns: `dram__bytes_*`, or `dram__sectors_*` × 32, or the total.
struct DramBytes {
    read: Option<(usize, f64)>,
    write: Option<(usize, f64)>,
    total: Option<(usize, f64)>,
}

impl DramBytes {
    fn find(names: &[&str]) -> Self {
        let source = |bytes: &str, sectors: &str| {
            let at = |n: &str| names.iter().position(|m| *m == n);
            at(bytes).map(|i| (i, 1.0)).or_else(|| at(sectors).map(|i| (i, DRAM_SECTOR_BYTES)))
        };
        DramBytes {
            read: source("dram__bytes_read.sum", "dram__sectors_read.sum"),
            write: source("dram__bytes_write.sum", "dram__sectors_write.sum"),
            total: source("dram__bytes.sum", "dram__sectors.sum"),
        }
    }

    fn of(&self, values: &[Option<f64>]) -> Option<f64> {
        let get =
            |s: Option<(usize, f64)>| s.and_then(|(i, scale)| values.get(i).copied().flatten().map(|v| v * scale));
        match (self.read, self.write) {
            (Some(_), Some(_)) => Some(get(self.read)? + get(self.write)?),
            _ => get(self.total),
        }
    }
}

/// Where a kernel's work (FLOPs or instructions) comes from: metric index and weight.
struct WorkInputs {
    kind: &'static str,
    terms: Vec<(usize, f64)>,
    counters: Vec<String>,
    precisions: Vec<&'static str>,
}

/// The work counters of the roofline: FLOP counters where any kernel has a value (SASS
/// metrics that were not measured are blank), else warp-instruction counters.
fn work_inputs(names: &[&str], report: &Report) -> Option<WorkInputs> {
    let flop = flop_inputs(names).filter(|w| report.kernels.iter().any(|k| work_of(w, &k.metrics).is_some()));
    flop.or_else(|| {
        let index = INSTRUCTION_COUNTERS.iter().find_map(|n| names.iter().position(|m| m == n))?;
        Some(WorkInputs {
            kind: "instruction",
            terms: vec![(index, 1.0)],
            counters: vec![names[index].to_owned()],
            precisions: Vec::new(),
        })
    })
}

fn flop_inputs(names: &[&str]) -> Option<WorkInputs> {
    let find = |name: &str| {
        names.iter().position(|n| *n == name).or_else(|| {
            name.strip_prefix("smsp__").and_then(|rest| names.iter().position(|n| *n == format!("sm__{rest}")))
        })
    };
    let mut inputs = WorkInputs { kind: "flop", terms: Vec::new(), counters: Vec::new(), precisions: Vec::new() };
    for (precision, name, weight) in FLOP_COUNTERS {
        if let Some(index) = find(name) {
            inputs.terms.push((index, weight));
            inputs.counters.push(names[index].to_owned());
            if !inputs.precisions.contains(&precision) {
                inputs.precisions.push(precision);
            }
        }
    }
    (!inputs.terms.is_empty()).then_some(inputs)
}

fn work_of(inputs: &WorkInputs, values: &[Option<f64>]) -> Option<f64> {
    let mut total = None;
    for (index, weight) in &inputs.terms {
        if let Some(v) = values.get(*index).copied().flatten() {
            *total.get_or_insert(0.0) += v * weight;
        }
    }
    total
}

#[derive(Default)]
struct KernelSums {
    calls: u64,
    flagged: u64,
    time: u64,
    timed: u64,
    dram_bytes: f64,
    dram_time: u64,
    dram_known: bool,
    work: f64,
    work_known: bool,
    work_bytes: f64,
    work_byte_work: f64,
    work_time: u64,
    work_time_work: f64,
}

fn kernel_groups(report: &Report, dram: &DramBytes, work: Option<&WorkInputs>) -> Vec<KernelGroup> {
    let mut order: Vec<&str> = Vec::new();
    let mut sums: HashMap<&str, KernelSums> = HashMap::new();
    let mut grand = 0u64;
    // Whole-graph counter rows are not kernel executions: their kernels have rows.
    for k in report.kernels.iter().filter(|k| k.granularity.is_kernel_execution()) {
        let name = k.kernel_name.as_deref().or(k.mangled_name.as_deref()).unwrap_or("<unknown kernel>");
        let s = sums.entry(name).or_insert_with(|| {
            order.push(name);
            KernelSums::default()
        });
        s.calls += 1;
        s.flagged += u64::from(k.status.is_flagged());
        let bytes = dram.of(&k.metrics);
        let w = work.and_then(|w| work_of(w, &k.metrics));
        if let Some(t) = k.duration_ns {
            grand = grand.saturating_add(t);
            s.time = s.time.saturating_add(t);
            s.timed += 1;
            if let Some(b) = bytes {
                s.dram_bytes += b;
                s.dram_time = s.dram_time.saturating_add(t);
                s.dram_known = true;
            }
            if let Some(w) = w {
                s.work_time = s.work_time.saturating_add(t);
                s.work_time_work += w;
            }
        }
        if let Some(w) = w {
            s.work += w;
            s.work_known = true;
            if let Some(b) = bytes {
                s.work_bytes += b;
                s.work_byte_work += w;
            }
        }
    }
    let mut groups: Vec<KernelGroup> = order
        .into_iter()
        .filter_map(|name| {
            let s = sums.get(name)?;
            let total = (s.timed > 0).then_some(s.time);
            Some(KernelGroup {
                name: name.to_owned(),
                calls: s.calls,
                flagged: s.flagged,
                total_ns: total,
                mean_ns: total.map(|t| t as f64 / s.timed as f64),
                share_pct: total.filter(|_| grand > 0).map(|t| 100.0 * t as f64 / grand as f64),
                dram_gbps: (s.dram_known && s.dram_time > 0).then(|| s.dram_bytes / s.dram_time as f64),
                work: s.work_known.then_some(s.work),
                intensity: (s.work_bytes > 0.0).then(|| s.work_byte_work / s.work_bytes),
                // work per ns = G-work per s.
                rate_g: (s.work_time > 0).then(|| s.work_time_work / s.work_time as f64),
            })
        })
        .collect();
    groups.sort_by(|a, b| {
        b.total_ns
            .is_some()
            .cmp(&a.total_ns.is_some())
            .then(b.total_ns.cmp(&a.total_ns))
            .then_with(|| a.name.cmp(&b.name))
    });
    groups
}

/// A timeline lane: (GPU side, pid, tid, depth); ranges sort before GPU streams.
type LaneKey = (u8, u64, u64, u32);

fn timeline(report: &Report) -> (Timeline, u64) {
    let trace = report.to_chrome_trace();
    let origin = trace.other_data.origin_cupti_ns;
    let mut lanes: BTreeMap<LaneKey, ()> = BTreeMap::new();
    let mut raw: Vec<(LaneKey, f64, f64, &str, u8)> = Vec::new();
    for e in &trace.trace_events {
        // In-kernel regions stay in trace.json (Perfetto): too many for the page's timeline.
        if e.ph != Phase::Complete || e.cat == Some(crate::report::timeline::device_timers::REGION_CATEGORY) {
            continue;
        }
        let (Some(ts), Some(dur)) = (e.ts, e.dur) else { continue };
        let (key, kind) = match (&e.args, e.cat) {
            (EventArgs::Range(r), _) => ((0u8, e.pid, e.tid, r.depth), 0u8),
            (_, Some("kernel")) => ((1u8, e.pid, e.tid, 0), 1u8),
            _ => ((1u8, e.pid, e.tid, 0), 2u8),
        };
        lanes.insert(key, ());
        raw.push((key, ts, dur, e.name.as_str(), kind));
    }
    raw.sort_by(|a, b| a.1.total_cmp(&b.1));
    let left_out = raw.len().saturating_sub(MAX_TIMELINE_ITEMS) as u64;
    raw.truncate(MAX_TIMELINE_ITEMS);
    let lane_keys: Vec<LaneKey> = lanes.into_keys().collect();
    let lane_index: HashMap<LaneKey, u32> = lane_keys.iter().enumerate().map(|(i, k)| (*k, i as u32)).collect();
    let labels = lane_keys
        .iter()
        .map(|(gpu, pid, tid, depth)| {
            if *gpu == 0 {
                format!("thread {tid} · depth {depth}")
            } else {
                format!("GPU {} · stream {tid}", pid.saturating_sub(GPU_PID_BASE))
            }
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    let mut name_index: HashMap<&str, u32> = HashMap::new();
    let items = raw
        .into_iter()
        .map(|(key, ts, dur, name, kind)| {
            let n = *name_index.entry(name).or_insert_with(|| {
                names.push(name.to_owned());
                (names.len() - 1) as u32
            });
            (lane_index.get(&key).copied().unwrap_or(0), ts, dur, n, kind)
        })
        .collect();
    (Timeline { lanes: labels, names, items, left_out }, origin)
}

impl HtmlData {
    /// [`HtmlData::of`] of the report read from `dir`: a streamed run's steps come from every
    /// step of its `steps/` parts ([`super::steps::StreamedView::of_parts`]), not only the
    /// steps `report.json` holds (when `dir` has none, from those).
    pub fn of_in(report: &Report, dir: &Path, options: &SummaryOptions) -> Result<Self> {
        let mut data = HtmlData::of(report, options);
        if let Some(s) = &report.streamed {
            let view = super::steps::StreamedView::of_parts(s, dir)?;
            if view.steps_shown > 0 || s.steps_table.is_empty() {
                data.streamed = Some(view);
            }
        }
        Ok(data)
    }

    /// The page's data for `report`, its groups made with `options` (all groups, not only
    /// the top ones: the page has room and sorts them).
    pub fn of(report: &Report, options: &SummaryOptions) -> Self {
        let meta = &report.meta;
        let names: Vec<&str> = meta.metrics.iter().map(|r| r.metric.name.as_str()).collect();
        let work = work_inputs(&names, report);
        let peaks = meta.device_peaks;
        let mut kernels = kernel_groups(report, &DramBytes::find(&names), work.as_ref());
        let kernels_left_out = kernels.len().saturating_sub(MAX_TABLE_ROWS) as u64;
        kernels.truncate(MAX_TABLE_ROWS);

        let summary = Summary::with(report, options);
        let mut all = Summary::with(report, &SummaryOptions { top: None, ..*options });
        let groups_left_out = all.rows.len().saturating_sub(MAX_TABLE_ROWS) as u64;
        all.rows.truncate(MAX_TABLE_ROWS);

        let roofline = work.map(|w| Roofline {
            kind: w.kind,
            compute_peak_g: if w.kind == "flop" {
                peaks.and_then(|p| p.fp32_peak_gflops).filter(|_| w.precisions == ["fp32"])
            } else {
                peaks.and_then(|p| p.warp_issue_peak_ginst)
            },
            dram_peak_gbps: peaks.and_then(|p| p.dram_peak_gbps),
            counters: w.counters,
            precisions: w.precisions,
        });
        let (timeline, origin) = timeline(report);
        let pm = report.pm.as_ref().and_then(|pm| pm_view(pm, origin));
        HtmlData {
            meta: MetaView {
                version: meta.gmprof_version.clone(),
                mode: meta.mode.as_str().to_owned(),
                device: meta.device_name.clone().unwrap_or_else(|| "unknown device".into()),
                chip: meta.chip.clone().unwrap_or_else(|| "unknown".into()),
                time_source: meta.time_source.as_str().to_owned(),
                kernel_count: meta.kernel_count,
                total_gpu_time_ns: meta.total_gpu_time_ns,
                dropped_counter_ranges: meta.dropped_counter_ranges,
                dropped_activity_records: meta.dropped_activity_records,
                flagged_kernel_rows: meta.flagged_kernel_rows,
                warnings: meta.warnings.clone(),
                dram_peak_gbps: peaks.and_then(|p| p.dram_peak_gbps),
                fp32_peak_gflops: peaks.and_then(|p| p.fp32_peak_gflops),
                group_by: options.group_by.as_str().to_owned(),
                skip_first: options.skip_first,
                metrics: names.iter().map(|n| (*n).to_owned()).collect(),
                placement_note: (meta.mode != ProfilingMode::Trace).then(|| {
                    "kernel positions are synthetic (back to back from their range's push): counter modes \
                     measure durations, not start times"
                        .to_owned()
                }),
            },
            summary_text: summary.to_string(),
            groups: all.rows,
            groups_left_out,
            kernels,
            kernels_left_out,
            timeline,
            roofline,
            pm,
            pc: report.pc.as_ref().map(super::pc::pc_view),
            streamed: report.streamed.as_ref().map(super::steps::StreamedView::of),
            rotation: report.rotation.as_ref().map(|r| super::rotation::RotationView::of(r, &report.metric_names())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::correlate::Correlator;
    use crate::model::session::SessionTree;
    use crate::model::{
        CounterRange, DevicePeaks, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet, MetricSpec,
        GPU_TIME_METRIC,
    };
    use crate::report::model::CaptureInfo;

    /// Two kernels with time, DRAM bytes, a SASS FFMA count that reads 0 and warp instructions.
    fn report() -> Report {
        let names = [
            GPU_TIME_METRIC,
            "dram__bytes_read.sum",
            "dram__bytes_write.sum",
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
            "smsp__inst_executed.sum",
        ];
        let set = MetricSet {
            metrics: names
                .iter()
                .map(|n| MetricSpec {
                    name: (*n).into(),
                    kind: MetricKind::Counter,
                    unit: String::new(),
                    description: String::new(),
                })
                .collect(),
        };
        let mut tree = SessionTree::new();
        let mut correlator = Correlator::new();
        let step = tree.push("step", 1, 0);
        let kernels = [("gemm", [1000.0, 3000.0, 1000.0, 0.0, 8000.0]), ("copy", [500.0, 4000.0, 4000.0, 0.0, 500.0])];
        let mut counters = Vec::new();
        for (i, (name, values)) in kernels.iter().enumerate() {
            let id = i as u32 + 1;
            correlator.add_launch(LaunchRecord {
                correlation_id: id,
                thread: 1,
                range: Some(step),
                cycle: 0,
                ordinal: i as u32,
                api: LaunchApi::Runtime,
                api_name: "cudaLaunchKernel".into(),
                context_id: 1,
                launch_ns: None,
                unmeasured: false,
            });
            correlator.add_activity(KernelActivity {
                correlation_id: id,
                name: (*name).into(),
                grid: [1, 1, 1],
                block: [32, 1, 1],
                registers_per_thread: 8,
                static_shared_memory: 0,
                dynamic_shared_memory: 0,
                stream_id: 7,
                context_id: 1,
                device_id: 0,
                graph_id: 0,
                graph_node_id: 0,
                start_ns: 10,
                end_ns: 10,
            });
            counters.push(CounterRange { cycle: 0, index: i as u32, name: i.to_string(), values: values.to_vec() });
        }
        correlator.add_counter_ranges(0, counters);
        tree.pop(1, 100).expect("pop");
        let mut info = CaptureInfo::new(ProfilingMode::KernelReplay);
        info.device_peaks =
            Some(DevicePeaks::from_attributes(Some(9), Some(0), Some(132), Some(1_980_000), None, None));
        Report::analyze(info, &set, &tree, correlator)
    }

    #[test]
    fn unmeasured_flop_counters_give_way_to_the_instruction_roofline() {
        let data = HtmlData::of(&report(), &SummaryOptions::default());
        let roof = data.roofline.expect("roofline");
        assert_eq!(
            (roof.kind, roof.counters.as_slice()),
            ("instruction", ["smsp__inst_executed.sum".to_owned()].as_slice())
        );
        let issue = roof.compute_peak_g.expect("issue roof");
        assert!((issue - 1045.44).abs() < 1e-9, "{issue}");
        assert_eq!(roof.dram_peak_gbps, None, "no memory attributes, no DRAM roof");
        let gemm = data.kernels.iter().find(|k| k.name == "gemm").expect("gemm");
        // 8000 warp instructions over 4000 bytes in 1000 ns.
        assert_eq!((gemm.work, gemm.intensity, gemm.rate_g), (Some(8000.0), Some(2.0), Some(8.0)));
        assert_eq!(gemm.dram_gbps, Some(4.0));
        assert_eq!(data.kernels[0].name, "gemm", "by total time");
        let share = data.kernels[1].share_pct.expect("share");
        assert!((share - 100.0 / 3.0).abs() < 1e-9);
    }
}
