//! The summary table: range rows folded into groups and sorted by share, sized for a screen.
//!
//! Layer 3 (the safe profiler), report output for people: what `gmprof` prints at the end of
//! a run. Range rows are grouped ([`group`](super::group)): by default by range path with
//! numbers folded, so `Train step 0` … `Train step 49` are one row `Train step #`. Each row
//! has the count, total, mean, p50 and p99 (nearest rank, see [`crate::report::tables::stats`]) of
//! its instances' GPU time and its share; rows are sorted by share and only the top
//! [`DEFAULT_TOP`] are shown unless asked otherwise ([`SummaryOptions`]). A footer says how
//! many range rows were folded and how many groups were hidden; per-instance rows stay in
//! ranges.csv and report.json. The header always states the mode, the device and chip and
//! the dropped and flagged counts, plus the clock drift and the memcpy/memset totals when
//! the report has them.
//!
//! A value that was not measured is "—", never 0: a group none of whose instances has a
//! GPU time (a nested range in per_range mode, beyond the measured nesting levels) has no
//! total, mean or share.
//!
//! With `skip_first` K > 0, the first K instances of each repeated range (and what is nested
//! in them, see [`warmup_rows`]) are left out of the steady-state columns and shown apart in
//! a warm-up column (their count and mean).
//!
//! Shares are of the sum over top-level rows (depth 0 and the `<root>` row) of the same
//! state (steady or all): range rows are inclusive, so a parent's share contains its
//! children's and the column does not add up to 100%.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::group::{group_rows, warmup_rows, GroupBy};
use crate::model::TransferKind;
use crate::report::model::Report;
use crate::report::tables::stats::nearest_rank;

/// Groups shown by default: with the header and footer, one screen.
pub const DEFAULT_TOP: usize = 20;

/// Longest label shown; longer ones keep their end (the innermost names).
pub const MAX_LABEL_CHARS: usize = 56;

pub use super::endings::{ending_line, failed_calls_line};
pub(crate) use super::format::cell;
pub use super::format::{format_duration_ns, BLANK};

/// How [`Report::summary_with`] groups and trims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryOptions {
    /// What rows are grouped by.
    pub group_by: GroupBy,
    /// Show only this many groups, largest share first; `None` shows all.
    pub top: Option<usize>,
    /// Instances of each repeated range shown apart as warm-up.
    pub skip_first: u32,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions { group_by: GroupBy::Path, top: Some(DEFAULT_TOP), skip_first: 0 }
    }
}

/// One group of range rows; statistics over its steady-state instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// The group's label: a folded path or name (`Train step #/forward`), or the exact one
    /// when nothing was folded.
    pub label: String,
    /// Range rows folded into this group (steady and warm-up).
    pub rows: u64,
    /// Different exact paths (or names) folded together; 1 when none were.
    pub distinct: u64,
    /// Steady-state instances with a GPU time.
    pub count: u64,
    /// Steady-state instances without a GPU time (not measured), left out of the statistics.
    pub missing: u64,
    /// Σ GPU time over steady-state instances, ns.
    pub total_ns: Option<u64>,
    /// Mean GPU time, ns.
    pub mean_ns: Option<f64>,
    /// Median GPU time by nearest rank, ns.
    pub p50_ns: Option<u64>,
    /// 99th percentile by nearest rank, ns.
    pub p99_ns: Option<u64>,
    /// `total_ns` as a percentage of the steady-state top-level total.
    pub share_pct: Option<f64>,
    /// Σ kernels over steady-state instances (inclusive).
    pub kernels: u64,
    /// Σ flagged kernels over steady-state instances.
    pub flagged_kernels: u64,
    /// Σ DRAM bytes / Σ GPU time over steady-state instances with both, GB/s.
    pub dram_gbps: Option<f64>,
    /// Warm-up instances (see [`SummaryOptions::skip_first`]).
    pub warmup_count: u64,
    /// Their mean GPU time, ns.
    pub warmup_mean_ns: Option<f64>,
    /// When the process profiled several GPUs: Σ GPU time over steady-state instances on
    /// each device (device ordinal, ns), from [`Report::range_devices`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_device: Vec<(u32, u64)>,
}

/// The summary of a report; its `Display` is the text table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// gmprof version.
    pub gmprof_version: String,
    /// Mode name.
    pub mode: String,
    /// Device and chip, as one text.
    pub device: String,
    /// Kernel rows.
    pub kernel_count: u64,
    /// Σ kernel time, ns; `None` when no kernel time was measured.
    pub total_gpu_time_ns: Option<u64>,
    /// Counter ranges CUPTI dropped.
    pub dropped_counter_ranges: u64,
    /// Activity records CUPTI dropped.
    pub dropped_activity_records: u64,
    /// Kernel rows not `ok`.
    pub flagged_kernel_rows: u64,
    /// Counter ranges without a launch.
    pub orphan_counter_ranges: u64,
    /// Number of warnings in the report.
    pub warning_count: usize,
    /// Wall clock minus CUPTI clock over the session, ns, when clock pairs were taken.
    #[serde(default)]
    pub clock_drift_ns: Option<i64>,
    /// Other CUDA contexts of the process that were not profiled (the first line names them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprofiled_contexts: Vec<crate::model::UnprofiledContext>,
    /// The `GPUs:` line, when the process profiled several GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices_line: Option<String>,
    /// Memcpy and memset rows.
    #[serde(default)]
    pub transfer_count: u64,
    /// Σ bytes copied by memcpy.
    #[serde(default)]
    pub memcpy_bytes: u64,
    /// Σ bytes set by memset.
    #[serde(default)]
    pub memset_bytes: u64,
    /// Σ durations of the timed transfers, ns.
    #[serde(default)]
    pub transfer_time_ns: u64,
    /// Σ bytes of the timed transfers: the bandwidth's numerator.
    #[serde(default)]
    pub timed_transfer_bytes: u64,
    /// Memcpy rows without times (timing `api_call`), in `transfer_count`.
    #[serde(default)]
    pub untimed_memcpys: u64,
    /// Memset rows without times (memsets under kernel replay), in `transfer_count`.
    #[serde(default)]
    pub untimed_memsets: u64,
    /// CUDA graph launches.
    #[serde(default)]
    pub graph_launches: u64,
    /// Kernels those graph launches ran (rows of granularity `graph_node`).
    #[serde(default)]
    pub graph_node_kernels: u64,
    /// Launches, memcpys and memsets made while their stream was capturing (graph building).
    #[serde(default)]
    pub captured_calls: u64,
    /// The PM sampling line (samples, interval, losses), when the session sampled.
    #[serde(default)]
    pub pm_line: Option<String>,
    /// The PC sampling lines (samples, losses, top stall reasons of the top ranges).
    #[serde(default)]
    pub pc_lines: Vec<String>,
    /// The probe line (launches per source, host cost), when the session probed.
    #[serde(default)]
    pub probe_line: Option<String>,
    /// The profiler-pause line (mid-run counter cycles), when there were any.
    #[serde(default)]
    pub pause_line: Option<String>,
    /// per_kernel in rotation: its lines ([`super::rotation::rotation_lines`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rotation_lines: Vec<String>,
    /// gmprof's own callback time, when measured (`GMPROF_SELF_TIME=1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_time_line: Option<String>,
    /// How the run ended, when finishing met errors (the CUDA error that failed the
    /// context, the steps that failed, the launches that never completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ending_line: Option<String>,
    /// The CUPTI and driver calls that failed while profiling ([`failed_calls_line`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_calls_line: Option<String>,
    /// What rows were grouped by.
    pub group_by: GroupBy,
    /// Warm-up instances per repeated range.
    pub skip_first: u32,
    /// Range rows of the report.
    pub range_rows: u64,
    /// Of them, warm-up rows.
    pub warmup_rows: u64,
    /// Groups before `top` was applied.
    pub group_count: u64,
    /// Exact paths (or names) that folded into a group with another one: Σ (distinct − 1).
    pub folded: u64,
    /// The shown groups, by share (steady-state total GPU time), largest first.
    pub rows: Vec<SummaryRow>,
    /// Whether the report's rows were streamed to part files (its range table is then
    /// printed from the aggregates, by `text::streamed`).
    pub streamed: bool,
}

impl Summary {
    /// The default summary: grouped by folded path, top [`DEFAULT_TOP`], no warm-up.
    pub fn of(report: &Report) -> Self {
        Self::with(report, &SummaryOptions::default())
    }

    /// The summary of `report` with `options`.
    pub fn with(report: &Report, options: &SummaryOptions) -> Self {
        let meta = &report.meta;
        let warmup = warmup_rows(&report.ranges, options.skip_first);
        let grand: u64 = report
            .ranges
            .iter()
            .zip(&warmup)
            .filter(|(r, w)| r.depth == 0 && !**w)
            .filter_map(|(r, _)| r.gpu_time_ns)
            .fold(0u64, u64::saturating_add);
        let groups = group_rows(&report.ranges, options.group_by);
        let mut device_rows: std::collections::HashMap<_, Vec<&crate::report::model::RangeDeviceRow>> =
            std::collections::HashMap::new();
        for d in &report.range_devices {
            device_rows.entry(d.row.range_id).or_default().push(d);
        }
        let group_count = groups.len() as u64;
        let mut rows: Vec<SummaryRow> = groups
            .into_iter()
            .map(|g| {
                let mut steady: Vec<u64> = Vec::new();
                let mut row = SummaryRow {
                    label: g.label,
                    rows: g.members.len() as u64,
                    distinct: g.distinct as u64,
                    count: 0,
                    missing: 0,
                    total_ns: None,
                    mean_ns: None,
                    p50_ns: None,
                    p99_ns: None,
                    share_pct: None,
                    kernels: 0,
                    flagged_kernels: 0,
                    dram_gbps: None,
                    warmup_count: 0,
                    warmup_mean_ns: None,
                    by_device: Vec::new(),
                };
                let (mut warm_total, mut warm_timed) = (0u64, 0u64);
                let (mut dram_bytes, mut dram_time) = (0.0f64, 0u64);
                let mut dram_known = false;
                for &i in &g.members {
                    let r = &report.ranges[i];
                    if warmup[i] {
                        row.warmup_count += 1;
                        if let Some(t) = r.gpu_time_ns {
                            warm_total = warm_total.saturating_add(t);
                            warm_timed += 1;
                        }
                        continue;
                    }
                    row.kernels += r.kernel_count;
                    row.flagged_kernels += r.flagged_kernel_count;
                    for d in device_rows.get(&r.range_id).into_iter().flatten() {
                        if let Some(t) = d.row.gpu_time_ns {
                            match row.by_device.iter_mut().find(|(id, _)| *id == d.device_id) {
                                Some((_, total)) => *total = total.saturating_add(t),
                                None => row.by_device.push((d.device_id, t)),
                            }
                        }
                    }
                    let Some(t) = r.gpu_time_ns else {
                        row.missing += 1;
                        continue;
                    };
                    steady.push(t);
                    let bytes = match (r.dram_read_bytes, r.dram_write_bytes) {
                        (Some(a), Some(b)) => Some(a + b),
                        _ => r.dram_total_gbps.map(|g| g * t as f64),
                    };
                    if let Some(b) = bytes.filter(|_| r.dram_total_gbps.is_some()) {
                        dram_bytes += b;
                        dram_time = dram_time.saturating_add(t);
                        dram_known = true;
                    }
                }
                steady.sort_unstable();
                row.count = steady.len() as u64;
                if !steady.is_empty() {
                    let total = steady.iter().fold(0u64, |a, b| a.saturating_add(*b));
                    row.total_ns = Some(total);
                    row.mean_ns = Some(total as f64 / steady.len() as f64);
                    row.p50_ns = nearest_rank(&steady, 50);
                    row.p99_ns = nearest_rank(&steady, 99);
                    row.share_pct = (grand > 0).then(|| 100.0 * total as f64 / grand as f64);
                }
                row.dram_gbps = (dram_known && dram_time > 0).then(|| dram_bytes / dram_time as f64);
                row.warmup_mean_ns = (warm_timed > 0).then(|| warm_total as f64 / warm_timed as f64);
                row.by_device.sort_unstable();
                row
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total_ns
                .is_some()
                .cmp(&a.total_ns.is_some())
                .then(b.total_ns.cmp(&a.total_ns))
                .then_with(|| a.label.cmp(&b.label))
        });
        let folded = rows.iter().map(|r| r.distinct.saturating_sub(1)).sum();
        if let Some(top) = options.top {
            rows.truncate(top);
        }

        let device = format!(
            "{} (chip {})",
            meta.device_name.as_deref().unwrap_or("unknown device"),
            meta.chip.as_deref().unwrap_or("unknown")
        );
        Summary {
            gmprof_version: meta.gmprof_version.clone(),
            mode: meta.mode.as_str().to_owned(),
            device,
            kernel_count: meta.kernel_count,
            total_gpu_time_ns: meta.total_gpu_time_ns,
            dropped_counter_ranges: meta.dropped_counter_ranges,
            dropped_activity_records: meta.dropped_activity_records,
            flagged_kernel_rows: meta.flagged_kernel_rows,
            orphan_counter_ranges: meta.orphan_counter_ranges,
            warning_count: meta.warnings.len(),
            clock_drift_ns: meta.clock_drift_ns,
            unprofiled_contexts: meta.unprofiled_contexts.clone(),
            devices_line: devices_line(&meta.devices),
            transfer_count: report.transfers.len() as u64,
            graph_launches: meta.counts.graph_launches,
            graph_node_kernels: meta.counts.graph_node_rows,
            captured_calls: meta.counts.captured_launches + meta.counts.captured_transfers,
            pm_line: report.pm.as_ref().map(|pm| {
                let left_out = report.streamed.as_ref().map(|s| {
                    let share =
                        meta.total_gpu_time_ns.filter(|&t| t > 0).map(|t| s.pm_kernels_left_out_ns as f64 / t as f64);
                    (s.pm_kernels_left_out, share)
                });
                super::pm_line::pm_line(pm, left_out)
            }),
            pc_lines: report.pc.as_ref().map(crate::report::pc_summary::pc_lines).unwrap_or_default(),
            probe_line: super::probe_line::probe_line(&report.probes),
            pause_line: pause_line(&report.meta.profiler_pauses),
            rotation_lines: super::rotation::rotation_lines(report),
            self_time_line: report.meta.self_time.map(self_time_line),
            ending_line: ending_line(report),
            failed_calls_line: failed_calls_line(report),
            memcpy_bytes: report
                .transfers
                .iter()
                .filter(|t| t.kind != TransferKind::Memset)
                .fold(0u64, |sum, t| sum.saturating_add(t.bytes)),
            memset_bytes: report
                .transfers
                .iter()
                .filter(|t| t.kind == TransferKind::Memset)
                .fold(0u64, |sum, t| sum.saturating_add(t.bytes)),
            transfer_time_ns: report
                .transfers
                .iter()
                .filter_map(|t| t.duration_ns)
                .fold(0u64, |sum, d| sum.saturating_add(d)),
            timed_transfer_bytes: report
                .transfers
                .iter()
                .filter(|t| t.is_timed())
                .fold(0u64, |sum, t| sum.saturating_add(t.bytes)),
            untimed_memcpys: report.transfers.iter().filter(|t| !t.is_timed() && t.kind != TransferKind::Memset).count()
                as u64,
            untimed_memsets: report.transfers.iter().filter(|t| !t.is_timed() && t.kind == TransferKind::Memset).count()
                as u64,
            group_by: options.group_by,
            skip_first: options.skip_first,
            range_rows: report.ranges.len() as u64,
            warmup_rows: warmup.iter().filter(|w| **w).count() as u64,
            group_count,
            folded,
            rows,
            streamed: report.streamed.is_some(),
        }
    }
}

impl Summary {
    /// `transfers: N | memcpy B | memset B | time | bandwidth`. Time and bandwidth are over
    /// the timed transfers; when some were not timed (memsets under kernel replay), the line
    /// says how many and that the time is over the others:
    /// `memset 2048 B (2 not timed) | 12 ns over 3 timed transfer(s) | 725.33 GB/s`.
    fn transfer_line(&self) -> String {
        let untimed = self.untimed_memcpys + self.untimed_memsets;
        let not_timed = |n: u64| if n > 0 { format!(" ({n} not timed)") } else { String::new() };
        let timed = self.transfer_count.saturating_sub(untimed);
        let time = self.transfer_time_ns;
        let gbps = if time > 0 {
            format!("{:.2} GB/s", self.timed_transfer_bytes as f64 / time as f64)
        } else {
            format!("{BLANK} GB/s")
        };
        let time = match (untimed, timed) {
            (0, _) => format_duration_ns(time as f64),
            (_, 0) => format!("{BLANK} (none timed)"),
            (_, n) => format!("{} over {n} timed transfer(s)", format_duration_ns(time as f64)),
        };
        format!(
            "transfers: {} | memcpy {} B{} | memset {} B{} | {time} | {gbps}",
            self.transfer_count,
            self.memcpy_bytes,
            not_timed(self.untimed_memcpys),
            self.memset_bytes,
            not_timed(self.untimed_memsets),
        )
    }
}

/// A label cut to [`MAX_LABEL_CHARS`], keeping its end.
fn short_label(label: &str) -> String {
    let text = cell(label);
    let n = text.chars().count();
    if n <= MAX_LABEL_CHARS {
        return text;
    }
    let tail: String = text.chars().skip(n - (MAX_LABEL_CHARS - 1)).collect();
    format!("…{tail}")
}

/// `PM sampling: N samples every I | overflows 0 | missing 0 | left out 0 | per range and
/// kernel in pm.csv`.
/// "profiler pauses: 19 counter cycle(s) held the launching thread 402.1 ms in total (longest
/// 25.7 ms) ...": the time CUPTI's stop and start took in the program's wall time.
fn pause_line(pauses: &[crate::model::ProfilerPause]) -> Option<String> {
    if pauses.is_empty() {
        return None;
    }
    let durations = pauses.iter().map(|p| p.end_ns.saturating_sub(p.start_ns));
    let total: u64 = durations.clone().sum();
    let longest = durations.max().unwrap_or(0);
    Some(format!(
        "profiler pauses: {} mid-run counter cycle(s) held the launching thread {} in total (longest {}); that wall \
         time is gmprof's, not the program's (trace.json track \"gmprof: counter cycles\")",
        pauses.len(),
        format_duration_ns(total as f64),
        format_duration_ns(longest as f64)
    ))
}

fn self_time_line(t: crate::model::SelfTime) -> String {
    let each = |ns: u64, n: u64| if n == 0 { 0.0 } else { ns as f64 / n as f64 };
    format!(
        "gmprof's own time: {} API callback(s) took {} inside the program's CUDA calls ({:.0} ns each); \
         {} activity buffer(s) took {} on CUPTI's thread (GMPROF_SELF_TIME)",
        t.api_callbacks,
        format_duration_ns(t.api_callback_ns as f64),
        each(t.api_callback_ns, t.api_callbacks),
        t.activity_buffers,
        format_duration_ns(t.activity_buffer_ns as f64)
    )
}

/// `GPUs: 2 profiled | device 0 (NVIDIA H100 80GB HBM3): 70 kernels, 1.21 ms | device 1
/// (...): 120 kernels, 2.34 ms`; `None` for a process that profiled one GPU.
pub fn devices_line(devices: &[crate::report::model::DeviceShare]) -> Option<String> {
    if devices.len() < 2 {
        return None;
    }
    let repeated = |id: u32| devices.iter().filter(|d| d.device_id == id).count() > 1;
    let each: Vec<String> = devices
        .iter()
        .map(|d| {
            let mut name = d.device_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            if let (true, Some(ctx)) = (repeated(d.device_id), d.context_id) {
                // Two contexts on one GPU: told apart by their context.
                name = format!(" context {ctx}{name}");
            }
            let flagged =
                if d.flagged_kernel_rows > 0 { format!(", {} flagged", d.flagged_kernel_rows) } else { String::new() };
            format!(
                "device {}{name}: {} kernels, {}{flagged}",
                d.device_id,
                d.kernel_count,
                d.gpu_time_ns.map_or_else(|| BLANK.to_owned(), |t| format_duration_ns(t as f64))
            )
        })
        .collect();
    Some(format!("GPUs: {} profiled | {}", devices.len(), each.join(" | ")))
}

/// `NOT PROFILED: 1 other CUDA context (device 1: 312 kernel launches, 300 kernels not in
/// this report)`; `None` when every context was profiled.
pub fn unprofiled_text(contexts: &[crate::model::UnprofiledContext]) -> Option<String> {
    if contexts.is_empty() {
        return None;
    }
    let each: Vec<String> = contexts
        .iter()
        .map(|c| {
            let device = c.device_id.map_or_else(|| format!("context {}", c.context_id), |d| format!("device {d}"));
            let why = c.why.as_deref().map(|w| format!(", because {w}")).unwrap_or_default();
            format!("{device}: {} kernel launches, {} kernels{why}", c.launches, c.kernels)
        })
        .collect();
    Some(format!(
        "NOT PROFILED: {} other CUDA context{} ({}; not in this report)",
        contexts.len(),
        if contexts.len() == 1 { "" } else { "s" },
        each.join("; ")
    ))
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gmprof {} | mode {} | {} | {} kernels, {} GPU time",
            self.gmprof_version,
            self.mode,
            cell(&self.device),
            self.kernel_count,
            self.total_gpu_time_ns.map_or_else(|| BLANK.to_owned(), |t| format_duration_ns(t as f64))
        )?;
        if let Some(drift) = self.clock_drift_ns {
            write!(f, " | clock drift {drift:+} ns")?;
        }
        if let Some(line) = unprofiled_text(&self.unprofiled_contexts) {
            write!(f, " | {line}")?;
        }
        writeln!(f)?;
        if let Some(line) = &self.devices_line {
            writeln!(f, "{line}")?;
        }
        writeln!(
            f,
            "dropped counter ranges: {} | dropped activity records: {} | flagged kernel rows: {} | orphan counter ranges: {} | warnings: {}",
            self.dropped_counter_ranges,
            self.dropped_activity_records,
            self.flagged_kernel_rows,
            self.orphan_counter_ranges,
            self.warning_count
        )?;
        if self.transfer_count > 0 {
            writeln!(f, "{}", self.transfer_line())?;
        }
        if self.graph_launches > 0 || self.captured_calls > 0 {
            writeln!(
                f,
                "CUDA graphs: {} launch(es) ran {} kernel(s) | {} call(s) captured into graphs (graph building, not run)",
                self.graph_launches, self.graph_node_kernels, self.captured_calls
            )?;
        }
        for line in [&self.ending_line, &self.failed_calls_line].into_iter().flatten() {
            writeln!(f, "{line}")?;
        }
        if let Some(line) = &self.pm_line {
            writeln!(f, "{line}")?;
        }
        for line in &self.pc_lines {
            writeln!(f, "{line}")?;
        }
        if let Some(line) = &self.probe_line {
            writeln!(f, "{line}")?;
        }
        if let Some(line) = &self.pause_line {
            writeln!(f, "{line}")?;
        }
        if let Some(line) = &self.self_time_line {
            writeln!(f, "{line}")?;
        }
        for line in &self.rotation_lines {
            writeln!(f, "{line}")?;
        }

        if self.streamed && self.range_rows == 0 {
            // The rows are in the part files; the streamed section's tables (from the
            // aggregates) follow.
            return Ok(());
        }
        let warm = self.skip_first > 0;
        let flagged = self.rows.iter().any(|r| r.flagged_kernels > 0);
        let mut header = vec!["range", "count", "total", "mean", "p50", "p99", "share"];
        if warm {
            header.push("warm-up (mean)");
        }
        header.push("kernels");
        if flagged {
            header.push("flagged");
        }
        header.push("DRAM GB/s");
        let by_device = self.rows.iter().any(|r| !r.by_device.is_empty());
        if by_device {
            header.push("GPU time by device");
        }
        let blank = || BLANK.to_owned();
        let duration = |v: Option<u64>| v.map_or_else(blank, |v| format_duration_ns(v as f64));
        let table: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut line = vec![
                    short_label(&r.label),
                    r.count.to_string(),
                    duration(r.total_ns),
                    r.mean_ns.map_or_else(blank, format_duration_ns),
                    duration(r.p50_ns),
                    duration(r.p99_ns),
                    r.share_pct.map_or_else(blank, |p| format!("{p:.1}%")),
                ];
                if warm {
                    line.push(if r.warmup_count == 0 {
                        blank()
                    } else {
                        format!("{}× {}", r.warmup_count, r.warmup_mean_ns.map_or_else(blank, format_duration_ns))
                    });
                }
                line.push(r.kernels.to_string());
                if flagged {
                    line.push(r.flagged_kernels.to_string());
                }
                line.push(r.dram_gbps.map_or_else(blank, |g| format!("{g:.1}")));
                if by_device {
                    let each: Vec<String> =
                        r.by_device.iter().map(|(d, t)| format!("{d}: {}", format_duration_ns(*t as f64))).collect();
                    line.push(if each.is_empty() { blank() } else { each.join(", ") });
                }
                line
            })
            .collect();
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for line in &table {
            for (w, text) in widths.iter_mut().zip(line) {
                *w = (*w).max(text.chars().count());
            }
        }
        let write_line = |f: &mut fmt::Formatter<'_>, cells: &[&str]| -> fmt::Result {
            for (i, (text, width)) in cells.iter().zip(&widths).enumerate() {
                let pad = width.saturating_sub(text.chars().count());
                if i == 0 {
                    write!(f, "{text}{}", " ".repeat(pad))?;
                } else {
                    write!(f, "  {}{text}", " ".repeat(pad))?;
                }
            }
            writeln!(f)
        };
        write_line(f, &header)?;
        for line in &table {
            let cells: Vec<&str> = line.iter().map(String::as_str).collect();
            write_line(f, &cells)?;
        }

        let hidden = self.group_count.saturating_sub(self.rows.len() as u64);
        write!(f, "{} range rows in {} groups by {}", self.range_rows, self.group_count, self.group_by.as_str())?;
        if self.folded > 0 {
            write!(f, " ({} {}s folded into others: numbers read #)", self.folded, self.group_by.as_str())?;
        }
        if hidden > 0 {
            write!(f, "; top {} shown, {hidden} hidden (--top 0 shows all)", self.rows.len())?;
        }
        writeln!(f, "; per-instance rows in ranges.csv and report.json")?;
        if warm {
            writeln!(
                f,
                "warm-up: the first {} instance(s) of each repeated range and what they hold ({} rows) are apart; \
                 count, total, mean, p50, p99 and share are steady state",
                self.skip_first, self.warmup_rows
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration_ns(850.0), "850 ns");
        assert_eq!(format_duration_ns(12_345.0), "12.35 us");
        assert_eq!(format_duration_ns(4_560_000.0), "4.560 ms");
        assert_eq!(format_duration_ns(1.234e9), "1.234 s");
        assert_eq!(cell("a\nb"), "a\\nb");
    }

    #[test]
    fn the_gpus_line_tells_two_contexts_of_one_gpu_apart() {
        let share = |device_id, context_id, kernel_count| crate::report::model::DeviceShare {
            device_id,
            context_id: Some(context_id),
            device_name: Some("NVIDIA H100 80GB HBM3".into()),
            kernel_count,
            gpu_time_ns: Some(1_500_000),
            flagged_kernel_rows: 0,
            dropped_activity_records: 0,
        };
        assert_eq!(devices_line(&[share(0, 1, 80)]), None, "one context: no line");
        let two_gpus = devices_line(&[share(0, 1, 80), share(1, 2, 40)]).unwrap();
        assert_eq!(
            two_gpus,
            "GPUs: 2 profiled | device 0 (NVIDIA H100 80GB HBM3): 80 kernels, 1.500 ms | \
             device 1 (NVIDIA H100 80GB HBM3): 40 kernels, 1.500 ms"
        );
        let one_gpu = devices_line(&[share(0, 1, 80), share(0, 2, 80)]).unwrap();
        assert!(
            one_gpu.contains("device 0 context 1 (NVIDIA") && one_gpu.contains("device 0 context 2 ("),
            "{one_gpu}"
        );
    }

    #[test]
    fn a_context_not_profiled_is_on_the_first_line_and_in_report_json() {
        use crate::model::UnprofiledContext;
        let mut report = Report::from_json(include_str!("../../../tests/golden/report.json")).unwrap();
        assert!(!report.summary().to_string().lines().next().unwrap().contains("NOT PROFILED"));
        // As recorded on an H100 (scripts/gpu/contexts-validate.sh): a second context of
        // device 0 ran 80 kernels, one of device 1 was only heard launching.
        report.meta.unprofiled_contexts = vec![
            UnprofiledContext { context_id: 2, device_id: Some(0), launches: 80, kernels: 80, why: None },
            UnprofiledContext { context_id: 3, device_id: None, launches: 5, kernels: 0, why: None },
        ];
        let text = report.summary().to_string();
        let first = text.lines().next().unwrap();
        assert!(
            first.ends_with(
                " | NOT PROFILED: 2 other CUDA contexts (device 0: 80 kernel launches, 80 kernels; \
                 context 3: 5 kernel launches, 0 kernels; not in this report)"
            ),
            "{first}"
        );
        let back = Report::from_json(&report.to_json_string().unwrap()).unwrap();
        assert_eq!(back.meta.unprofiled_contexts, report.meta.unprofiled_contexts);
        assert_eq!(unprofiled_text(&[]), None);
    }
}
