//! One Perfetto trace of several processes: each process's timeline side by side.
//!
//! Layer 3, beside [`crate::report::runs::merge`]. [`merged_trace`] builds each process's
//! [`ChromeTrace`] ([`Report::to_chrome_trace`]) and puts them in one file:
//!
//! - **Processes as trace processes.** Process `i` (in [`ProcessReport::read_all`] order)
//!   keeps its tracks with pids moved to `(i + 1) * PID_STRIDE + pid`: its CPU ranges at
//!   `(i + 1) * 1000 + 1`, its GPU `d` at `(i + 1) * 1000 + 100 + d`; every process and
//!   thread name starts with the process's label (`node7-1: GPU 0: NVIDIA H200`).
//! - **Clocks aligned through the clock pairs.** Each process's trace starts at its own
//!   origin; where every process has a CPU/GPU clock pair, each is shifted by its origin's
//!   Unix time minus the earliest one's, so the processes line up on the wall clock. The
//!   drift of one process's clocks over its session (`clock_drift_ns`) is not applied: a
//!   constant shift keeps every track's nesting. A kernel's `args.launch_ts` moves with it.
//!   When a process has no clock pair, nothing is shifted and `otherData.aligned` is false.
//! - **Range ids stay unique.** `range_id`, `parent_id` and a kernel's `range_id` get the
//!   process's index as a prefix (`1/3.0`), so `gmprof check-trace` matches children and
//!   kernels to ranges of their own process.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::runs::merge::{MergeOptions, Merged, ProcessReport};
use crate::report::tables::csv::write_file;
use crate::report::timeline::events::{ChromeTrace, EventArgs, Phase, TraceEvent, TraceInfo};

/// The file the merged trace is written to in the output root.
pub const MERGED_TRACE: &str = "merged-trace.json";

/// Process `i`'s pids start at `(i + 1) * PID_STRIDE`.
pub const PID_STRIDE: u64 = 1000;

/// One process in the merged trace's `otherData`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MergedProcessInfo {
    /// The process's label (its directory).
    pub label: String,
    /// Its pids start here.
    pub pid_base: u64,
    /// How far its events were moved, µs.
    pub shift_us: f64,
    /// Its own trace's `otherData`.
    pub trace: TraceInfo,
}

/// The merged trace's `otherData`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MergedTraceInfo {
    /// Whether the processes were aligned on the wall clock.
    pub aligned: bool,
    /// `ts` 0, ns since the Unix epoch, when aligned.
    pub origin_unix_ns: Option<u64>,
    /// The processes, in pid order.
    pub processes: Vec<MergedProcessInfo>,
    /// Which processes of the run these are and why, when not all ([`trace_ranks`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<String>,
}

/// The merged trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MergedTrace {
    /// Every process's events: all metadata first, then by (pid, tid, ts).
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<TraceEvent>,
    /// Always `"ns"`.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: &'static str,
    /// The processes and how they were aligned.
    #[serde(rename = "otherData")]
    pub other_data: MergedTraceInfo,
}

/// Builds the merged trace of `processes`.
pub fn merged_trace(processes: &[ProcessReport]) -> MergedTrace {
    let traces: Vec<(ChromeTrace, &ProcessReport)> =
        processes.iter().map(|p| (Report::to_chrome_trace(&p.report), p)).collect();
    let origins: Option<Vec<u64>> = traces.iter().map(|(t, _)| t.other_data.origin_unix_ns).collect();
    let origin_unix_ns = origins.as_ref().and_then(|o| o.iter().min().copied());
    let mut metadata = Vec::new();
    let mut events = Vec::new();
    let mut infos = Vec::new();
    for (i, (trace, process)) in traces.into_iter().enumerate() {
        let pid_base = (i as u64 + 1) * PID_STRIDE;
        let shift_us = match (&origins, origin_unix_ns) {
            (Some(o), Some(first)) => (o[i] - first) as f64 / 1e3,
            _ => 0.0,
        };
        for mut e in trace.trace_events {
            e.pid += pid_base;
            e.ts = e.ts.map(|ts| ts + shift_us);
            match &mut e.args {
                EventArgs::Name { name } => *name = format!("{}: {name}", process.label),
                EventArgs::Range(r) => {
                    r.range_id = format!("{i}/{}", r.range_id);
                    r.parent_id = r.parent_id.take().map(|p| format!("{i}/{p}"));
                }
                EventArgs::Kernel(k) => {
                    k.range_id = k.range_id.take().map(|r| format!("{i}/{r}"));
                    k.launch_ts = k.launch_ts.map(|ts| ts + shift_us);
                }
                EventArgs::Transfer(_) | EventArgs::Counter { .. } | EventArgs::Region(_) | EventArgs::Pause { .. } => {
                }
            }
            if e.ph == Phase::Metadata {
                metadata.push(e);
            } else {
                events.push(e);
            }
        }
        infos.push(MergedProcessInfo { label: process.label.clone(), pid_base, shift_us, trace: trace.other_data });
    }
    metadata.extend(events);
    MergedTrace {
        trace_events: metadata,
        display_time_unit: "ns",
        other_data: MergedTraceInfo {
            aligned: origin_unix_ns.is_some(),
            origin_unix_ns,
            processes: infos,
            selection: None,
        },
    }
}

impl MergedTrace {
    /// Serializes the trace to `out`.
    pub fn write_to<W: Write>(&self, out: W) -> Result<()> {
        serde_json::to_writer(out, self)
            .map_err(|e| Error::Serialize { what: "merged Chrome trace", message: e.to_string() })
    }

    /// Writes the trace to `path` (replaced whole).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_to(out))
    }
}

/// The index of the run's traces: each process's own `trace.json`, and which processes the
/// merged trace holds.
pub const TRACE_INDEX: &str = "trace-index.json";

/// The merged trace holds at most this many processes: each adds its whole timeline, and a
/// Chrome trace is loaded whole into the browser's memory (Perfetto's JSON import stops
/// being usable at a few million events, one rank of a long run on its own).
pub const MERGED_TRACE_MAX_PROCESSES: usize = 8;

/// One process in [`TraceIndexFile`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankTrace {
    /// The process's label (its directory under the root).
    pub label: String,
    /// Its own trace, relative to the root; `None` when it wrote none.
    pub trace: Option<String>,
    /// Its GPU.
    pub device: Option<String>,
    /// Its kernel rows.
    pub kernels: u64,
    /// Steps it measured (of the straggler table).
    pub steps_measured: usize,
    /// Steps where it was the slowest.
    pub steps_slowest: usize,
    /// Σ of its step times, ns (`None`: no step measured).
    pub step_time_ns: Option<u64>,
    /// Whether `merged-trace.json` holds it.
    pub in_merged_trace: bool,
}

/// `trace-index.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceIndexFile {
    /// `merged-trace.json` when written, else `None`.
    pub merged_trace: Option<String>,
    /// Which processes the merged trace holds and why.
    pub selection: String,
    /// Every process, in merge order.
    pub ranks: Vec<RankTrace>,
}

/// The processes (indices into `merged.processes`) whose timelines go into the merged trace,
/// and why: those of `--trace-ranks`; every process when there are at most
/// [`MERGED_TRACE_MAX_PROCESSES`]; else the process slowest in the most steps and the one of
/// median total step time (the first process when there is no straggler table).
pub fn trace_ranks(merged: &Merged, options: &MergeOptions) -> Result<(Vec<usize>, String)> {
    let n = merged.processes.len();
    if let Some(labels) = &options.trace_ranks {
        if labels.len() > MERGED_TRACE_MAX_PROCESSES {
            return Err(Error::InvalidConfig(format!(
                "--trace-ranks names {} processes: a merged trace holds at most {MERGED_TRACE_MAX_PROCESSES} \
                 (open the others' own trace.json, listed in {TRACE_INDEX})",
                labels.len()
            )));
        }
        let mut chosen = Vec::new();
        for label in labels {
            let i = merged.processes.iter().position(|p| p == label).ok_or_else(|| {
                let some: Vec<&str> = merged.processes.iter().take(4).map(String::as_str).collect();
                Error::InvalidConfig(format!(
                    "--trace-ranks: no process '{label}' (the processes are labelled by their directory: {}{})",
                    some.join(", "),
                    if n > some.len() { ", ..." } else { "" }
                ))
            })?;
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        return Ok((chosen, "the processes of --trace-ranks".to_owned()));
    }
    if n <= MERGED_TRACE_MAX_PROCESSES {
        return Ok(((0..n).collect(), format!("every process ({n})")));
    }
    let Some(steps) = &merged.steps else {
        return Ok((
            vec![0],
            format!("{n} processes and no straggler table: the first; --trace-ranks LABEL,... chooses others"),
        ));
    };
    let counts = steps.slowest_counts();
    let slowest = (0..n).max_by(|&a, &b| counts[a].cmp(&counts[b]).then(b.cmp(&a))).unwrap_or(0);
    let totals = step_totals(steps);
    let mut measured: Vec<(u64, usize)> = totals.iter().enumerate().filter_map(|(i, t)| t.map(|t| (t, i))).collect();
    measured.sort_unstable();
    let median = measured.get(measured.len().saturating_sub(1) / 2).map_or(0, |m| m.1);
    let mut chosen = vec![slowest];
    if median != slowest {
        chosen.push(median);
    }
    Ok((
        chosen,
        format!(
            "2 of {n} processes: {} (slowest in {} of {} steps) and {} (median total step time); \
             --trace-ranks LABEL,... chooses others",
            merged.processes[slowest],
            counts[slowest],
            steps.rows.len(),
            merged.processes[median]
        ),
    ))
}

fn step_totals(steps: &crate::report::runs::stragglers::StepTable) -> Vec<Option<u64>> {
    let mut totals = vec![None; steps.ranks.len()];
    for row in &steps.rows {
        for (t, v) in totals.iter_mut().zip(&row.times) {
            if let Some(v) = v {
                *t = Some(t.unwrap_or(0u64).saturating_add(*v));
            }
        }
    }
    totals
}

/// Writes `trace-index.json` and, from the `report.json` of the processes [`trace_ranks`]
/// chooses (read one at a time, at most [`MERGED_TRACE_MAX_PROCESSES`]), `merged-trace.json`.
/// `dirs` are the processes' directories in `merged.processes` order. Returns the files
/// written and what the merged trace holds.
pub fn write_traces(
    root: &Path,
    dirs: &[std::path::PathBuf],
    merged: &Merged,
    options: &MergeOptions,
) -> Result<(Vec<std::path::PathBuf>, String)> {
    let (chosen, why) = trace_ranks(merged, options)?;
    let mut processes = Vec::new();
    let mut without = Vec::new();
    for &i in &chosen {
        if dirs[i].join("report.json").is_file() {
            processes.push(ProcessReport::read(root, &dirs[i])?);
        } else {
            without.push(merged.processes[i].clone());
        }
    }
    let mut files = Vec::new();
    let mut note = why.clone();
    if !without.is_empty() {
        note += &format!("; without report.json, left out: {}", without.join(", "));
    }
    let written = !processes.is_empty();
    if written {
        let mut trace = merged_trace(&processes);
        trace.other_data.selection = Some(note.clone());
        drop(processes);
        files.push(root.join(MERGED_TRACE));
        trace.write(&files[0])?;
    }
    let counts = merged.steps.as_ref().map(|s| s.slowest_counts());
    let totals = merged.steps.as_ref().map(step_totals);
    let ranks = merged
        .processes
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let trace = dirs[i].join("trace.json");
            RankTrace {
                label: label.clone(),
                trace: trace.is_file().then(|| trace.strip_prefix(root).unwrap_or(&trace).display().to_string()),
                device: merged.devices[i].clone(),
                kernels: merged.kernels[i],
                steps_measured: merged
                    .steps
                    .as_ref()
                    .map_or(0, |s| s.rows.iter().filter(|r| r.times[i].is_some()).count()),
                steps_slowest: counts.as_ref().map_or(0, |c| c[i]),
                step_time_ns: totals.as_ref().and_then(|t| t[i]),
                in_merged_trace: written && chosen.contains(&i) && !without.contains(label),
            }
        })
        .collect();
    let index = TraceIndexFile {
        merged_trace: written.then(|| MERGED_TRACE.to_owned()),
        selection: if written { note.clone() } else { unwritten(&why) },
        ranks,
    };
    let path = root.join(TRACE_INDEX);
    write_file(&path, |out| {
        serde_json::to_writer_pretty(&mut *out, &index)
            .map_err(|e| Error::Serialize { what: "trace index", message: e.to_string() })?;
        out.write_all(b"\n").map_err(|e| Error::io(&path, e))
    })?;
    files.push(path);
    Ok((files, if written { note } else { unwritten(&why) }))
}

/// Why there is no merged trace: the processes chosen by `why` have no report.json.
fn unwritten(why: &str) -> String {
    format!(
        "no merged trace: the processes chosen have no report.json (their directories hold Parquet \
         tables only); chosen: {why}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClockPair, ClockSync};
    use crate::report::timeline::trace_check::{check_trace_json, CheckOptions};

    fn process(label: &str, unix_start: Option<u64>) -> ProcessReport {
        let mut report = Report::from_json(include_str!("../../../tests/golden/report.json")).unwrap();
        let first = report.ranges.iter().filter_map(|r| r.start_ns).min().unwrap();
        report.meta.clock = unix_start.map(|u| ClockSync {
            start: ClockPair { cupti_ns: first, unix_ns: u },
            finish: ClockPair { cupti_ns: first + 1_000_000, unix_ns: u + 1_000_000 },
        });
        ProcessReport { label: label.into(), dir: label.into(), report }
    }

    #[test]
    fn ranks_become_processes_aligned_on_the_wall_clock() {
        let procs = [process("node7-0", Some(5_000_000_000)), process("node7-1", Some(5_000_250_000))];
        let single = Report::to_chrome_trace(&procs[0].report);
        let merged = merged_trace(&procs);
        assert!(merged.other_data.aligned);
        assert_eq!(merged.trace_events.len(), 2 * single.trace_events.len());
        assert_eq!(merged.other_data.processes[1].shift_us, 250.0);
        let names: Vec<&str> = merged
            .trace_events
            .iter()
            .filter(|e| e.name == "process_name")
            .filter_map(|e| match &e.args {
                EventArgs::Name { name } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert!(names.contains(&"node7-0: CPU ranges") && names.contains(&"node7-1: CPU ranges"), "{names:?}");
        let first_ts = |pid: u64| merged.trace_events.iter().filter(|e| e.pid == pid).filter_map(|e| e.ts).next();
        assert_eq!(first_ts(2001).unwrap() - first_ts(1001).unwrap(), 250.0, "the second rank starts 250 us later");
        let mut text = Vec::new();
        merged.write_to(&mut text).unwrap();
        let check = check_trace_json(std::str::from_utf8(&text).unwrap(), &CheckOptions::default());
        assert!(check.is_ok(), "{:?}", check.violations);
        assert_eq!(check.events, merged.trace_events.len());
    }

    #[test]
    fn launch_times_move_with_their_process() {
        // Measured kernel positions (the golden's collapsed timestamps, read as activity
        // times) carry launch_ts, which must move with the second rank's events.
        let mut procs = [process("node7-0", Some(5_000_000_000)), process("node7-1", Some(5_000_250_000))];
        for p in &mut procs {
            p.report.meta.time_source = crate::analysis::correlate::TimeSource::Activity;
        }
        let merged = merged_trace(&procs);
        let launches: Vec<(u64, f64, f64)> = merged
            .trace_events
            .iter()
            .filter_map(|e| match &e.args {
                EventArgs::Kernel(k) => Some((e.pid, e.ts?, k.launch_ts?)),
                _ => None,
            })
            .collect();
        let first = |pid: u64| launches.iter().find(|l| l.0 == pid).copied().expect("a launch");
        let (a, b) = (first(1100), first(2100));
        assert!(a.2 < a.1, "launched before it ran: {a:?}");
        assert_eq!((b.1 - a.1, b.2 - a.2), (250.0, 250.0));
        let mut text = Vec::new();
        merged.write_to(&mut text).unwrap();
        let check = check_trace_json(std::str::from_utf8(&text).unwrap(), &CheckOptions::default());
        assert!(check.is_ok(), "{:?}", check.violations);
    }

    #[test]
    fn without_clock_pairs_nothing_is_shifted() {
        let merged = merged_trace(&[process("a", None), process("b", Some(1))]);
        assert!(!merged.other_data.aligned && merged.other_data.origin_unix_ns.is_none());
        assert!(merged.other_data.processes.iter().all(|p| p.shift_us == 0.0));
        let ids: Vec<&str> = merged
            .trace_events
            .iter()
            .filter_map(|e| match &e.args {
                EventArgs::Range(r) => Some(r.range_id.as_str()),
                _ => None,
            })
            .collect();
        assert!(ids.iter().any(|i| i.starts_with("0/")) && ids.iter().any(|i| i.starts_with("1/")), "{ids:?}");
    }
}
