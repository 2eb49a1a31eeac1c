//! `probe_trace.json`: the probe engine's own block timeline (`gmprof run --probe
//! block_sched`), a Chrome trace that Perfetto opens.
//!
//! Layer 3 (the safe profiler), report output. Every block block_sched saw run is a complete
//! (`"X"`) event named `<kernel> block <n>` (args: `correlation_id`, `block`) in process
//! [`PROBE_PID`], on the track of its SM (`SM 003`). Several blocks are resident on one SM
//! at once, and a viewer draws only nested slices on one track, so a block that starts
//! before an earlier block of its SM has ended goes, its times unchanged, to an extra lane
//! of the SM, `SM 003 · overlapped` (`· overlapped 2`, ...; the lanes of
//! [`lanes`](super::lanes), as trace.json's streams). `otherData.overlap_lane_events` counts
//! the slices moved.
//!
//! All launches are on one clock, from one origin:
//!
//! - **With a report** ([`Report::to_probe_trace`], written with the other outputs): the
//!   CUPTI clock of `trace.json`, `ts` 0 at its origin (`otherData.origin_ns` =
//!   `trace.json`'s `origin_cupti_ns`). Each launch's kernel is a slice on the track of its
//!   stream (`stream 7`; args: the launch's clock offset CUPTI − `%globaltimer`, its slack
//!   and the launches of its fitted run), and its blocks' `%globaltimer` stamps are placed
//!   by the device timers' clock fit, the very placement of `trace.json`'s region tracks
//!   ([`launch_clocks`](super::device_timers)): offsets fitted per run of consecutive
//!   launches, so every block lies inside its kernel's slice whenever an offset can put it
//!   there (probe_launches.csv's `blocks_inside_kernel`). A launch without a kernel slice
//!   (no kernel row, no times) has no place on that clock: it is left out and counted in
//!   `otherData.launches_not_placed`.
//! - **Without one** ([`globaltimer_probe_trace`]: profiling could not finish): the blocks on
//!   `%globaltimer` itself, one clock for every launch, `ts` 0 at the earliest block
//!   (`otherData.clock` `"globaltimer"`), and no kernel slices.
//!
//! Events are sorted by (pid, tid, ts), an enclosing slice first, so `gmprof check-trace`
//! ([`trace_check`](super::trace_check)) accepts the file.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::lanes::{assign_lanes, lane_label, lane_name};
use crate::device_timers::{Span, TimedLaunch, TrackLayout, BLOCK_REGION};
use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::tables::csv::write_file;

/// The file name.
pub const PROBE_TRACE_JSON: &str = "probe_trace.json";
/// The region name of block_sched's blocks as device-timer launches (`trace.json`,
/// `regions.csv`).
pub const BLOCK_SCHED_REGION: &str = "block (probe block_sched)";
/// The process of the file's tracks (of GPU `d`, `... (GPU d)` when blocks of several GPUs
/// are in the file).
pub const PROBE_PID: &str = "gmprof probes: blocks per SM";

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeTrace {
    /// The slices, sorted by (pid, tid, ts), an enclosing slice first.
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<ProbeEvent>,
    /// Always `"ns"`.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: &'static str,
    /// How the slices were placed.
    #[serde(rename = "otherData")]
    pub other_data: ProbeTraceInfo,
}

/// One slice: a block or a kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeEvent {
    /// `<kernel> block <n>`, or the kernel's name.
    pub name: String,
    /// Always `"X"`.
    pub ph: &'static str,
    /// [`PROBE_PID`].
    pub pid: String,
    /// `SM 003` or `stream 7`, or one of their extra lanes (`SM 003 · overlapped`).
    pub tid: String,
    /// Start, µs from `otherData.origin_ns`.
    pub ts: f64,
    /// Duration, µs.
    pub dur: f64,
    /// Which launch and block.
    pub args: ProbeArgs,
}

/// The args of a slice (serialized without a tag).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ProbeArgs {
    /// Of a block.
    Block {
        /// The launch's correlation id (kernels.csv, probe_launches.csv).
        correlation_id: Option<u32>,
        /// Linear block index.
        block: u32,
    },
    /// Of a kernel.
    Kernel {
        /// Its correlation id.
        correlation_id: Option<u32>,
        /// Its stream.
        stream: Option<u32>,
        /// CUPTI − `%globaltimer` of its blocks, ns.
        clock_offset_ns: i64,
        /// The offset's uncertainty, ns.
        clock_slack_ns: u64,
        /// Launches of the run that share the offset; 0 when no offset puts the blocks
        /// inside the kernel (then its first block is at the kernel's start).
        clock_run_launches: u32,
    },
}

/// The file's `otherData`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeTraceInfo {
    /// `"cupti"` (trace.json's clock) or `"globaltimer"`.
    pub clock: &'static str,
    /// How the blocks were placed, in words.
    pub placement: &'static str,
    /// `ts` 0, ns on [`clock`](Self::clock).
    pub origin_ns: u64,
    /// block_sched launches the file was made from.
    pub launches: u64,
    /// Of those, launches left out: no kernel slice to place them on the CUPTI clock.
    pub launches_not_placed: u64,
    /// Block slices in the file.
    pub blocks: u64,
    /// Slices on an extra lane of their track (`SM 003 · overlapped`).
    pub overlap_lane_events: u64,
}

/// `placement` of a report's blocks with measured kernel times.
pub const PLACED_BY_FIT: &str = "the device timers' clock fit, as trace.json: offsets CUPTI - globaltimer fitted \
                                 per run of launches to the kernels' activity times";
/// `placement` of a report's blocks in counter modes.
pub const PLACED_IN_SLICE: &str =
    "as trace.json: each launch inside its own kernel slice (kernel positions synthetic in this mode)";
/// `placement` without a report.
pub const PLACED_ON_GLOBALTIMER: &str =
    "globaltimer stamps as recorded: no report placed them on the CUPTI clock (profiling did not finish)";

/// Whether `launch` is a block_sched launch ([`TimedLaunch::from_blocks`] with
/// [`BLOCK_SCHED_REGION`]).
pub fn is_block_sched(launch: &TimedLaunch) -> bool {
    launch.tracks == TrackLayout::Sm
        && launch.region_names.get(usize::from(BLOCK_REGION)).is_some_and(|n| n == BLOCK_SCHED_REGION)
}

/// A slice before its lane: its process, track, name, start and end (ns on the file's clock).
struct Slot {
    pid: String,
    track: String,
    name: String,
    start: u64,
    end: u64,
    args: ProbeArgs,
}

fn block_slot(pid: &str, launch: &TimedLaunch, span: &Span, start: u64, end: u64) -> Slot {
    let kernel = launch.label.as_deref().or(launch.kernel_name.as_deref()).unwrap_or("<unknown kernel>");
    Slot {
        pid: pid.to_owned(),
        track: format!("SM {:03}", span.sm),
        name: format!("{kernel} block {}", span.block),
        start,
        end: end.max(start),
        args: ProbeArgs::Block { correlation_id: launch.correlation_id, block: span.block },
    }
}

/// Gives every slot the lowest free lane of its track ([`assign_lanes`]) and makes the file.
fn assemble(slots: Vec<Slot>, mut info: ProbeTraceInfo) -> ProbeTrace {
    let mut tracks: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, s) in slots.iter().enumerate() {
        tracks.entry((&s.pid, &s.track)).or_default().push(i);
    }
    let mut lanes = vec![0u32; slots.len()];
    for members in tracks.values() {
        let intervals: Vec<(u64, u64)> = members.iter().map(|&i| (slots[i].start, slots[i].end)).collect();
        for (&i, lane) in members.iter().zip(assign_lanes(&intervals)) {
            lanes[i] = lane;
        }
    }
    info.overlap_lane_events = lanes.iter().filter(|&&l| l > 0).count() as u64;
    info.blocks = slots.iter().filter(|s| matches!(s.args, ProbeArgs::Block { .. })).count() as u64;
    let origin = i128::from(info.origin_ns);
    let mut events: Vec<ProbeEvent> = slots
        .into_iter()
        .zip(lanes)
        .map(|(s, lane)| ProbeEvent {
            tid: lane_label(&s.track, lane),
            ts: (i128::from(s.start) - origin) as f64 / 1000.0,
            dur: (s.end - s.start) as f64 / 1000.0,
            name: s.name,
            ph: "X",
            pid: s.pid,
            args: s.args,
        })
        .collect();
    events.sort_by(|a, b| {
        a.pid.cmp(&b.pid).then(a.tid.cmp(&b.tid)).then(a.ts.total_cmp(&b.ts)).then(b.dur.total_cmp(&a.dur))
    });
    ProbeTrace { trace_events: events, display_time_unit: "ns", other_data: info }
}

/// The file without a report: block_sched's launches among `launches` on `%globaltimer`,
/// `ts` 0 at the earliest block (module docs).
pub fn globaltimer_probe_trace(launches: &[TimedLaunch]) -> ProbeTrace {
    let ours: Vec<&TimedLaunch> = launches.iter().filter(|l| is_block_sched(l)).collect();
    let origin = ours.iter().flat_map(|l| &l.spans.spans).map(|s| s.start_ns).min().unwrap_or(0);
    let slots = ours
        .iter()
        .flat_map(|l| l.spans.spans.iter().map(move |s| block_slot(PROBE_PID, l, s, s.start_ns, s.end_ns)))
        .collect();
    let info = ProbeTraceInfo {
        clock: "globaltimer",
        placement: PLACED_ON_GLOBALTIMER,
        origin_ns: origin,
        launches: ours.len() as u64,
        launches_not_placed: 0,
        blocks: 0,
        overlap_lane_events: 0,
    };
    assemble(slots, info)
}

impl ProbeTrace {
    /// Writes the file (compact JSON) to `out`.
    pub fn write_to<W: Write>(&self, out: W) -> Result<()> {
        serde_json::to_writer(out, self).map_err(|e| Error::Serialize { what: "probe trace", message: e.to_string() })
    }

    /// Writes the file, e.g. `probe_trace.json`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| {
            self.write_to(&mut *out)?;
            out.write_all(b"\n").map_err(|e| Error::io(path.as_ref(), e))
        })
    }
}

impl Report {
    /// The report's block_sched launches as `probe_trace.json` on `trace.json`'s clock, each
    /// with its kernel's slice (module docs).
    pub fn to_probe_trace(&self) -> ProbeTrace {
        let layout = self.placement();
        let slices = super::placement::slices(self, &layout.positions);
        let (placed, _) = super::device_timers::launch_clocks(self, &slices, layout.measured);
        let placed: Vec<_> = placed.into_iter().filter(|(l, _, _)| is_block_sched(l)).collect();
        let launches = self.device_timers.iter().filter(|l| is_block_sched(l)).count() as u64;
        let rows: HashMap<u32, usize> = self.kernels.iter().enumerate().map(|(i, k)| (k.correlation_id, i)).collect();
        let devices: BTreeSet<u32> = placed.iter().map(|p| p.1 .2).collect();
        let mut slots = Vec::new();
        for (launch, (start, dur, device), clock) in &placed {
            let pid = if devices.len() > 1 { format!("{PROBE_PID} (GPU {device})") } else { PROBE_PID.to_owned() };
            let row = launch.correlation_id.and_then(|id| rows.get(&id)).map(|&i| &self.kernels[i]);
            let stream = row.and_then(|k| k.stream_id);
            let name = row
                .and_then(|k| k.kernel_name.clone().or_else(|| k.mangled_name.clone()))
                .or_else(|| launch.label.clone())
                .unwrap_or_else(|| "<unknown kernel>".into());
            slots.push(Slot {
                pid: pid.clone(),
                track: stream.map_or_else(|| "kernels".to_owned(), |s| lane_name(s, 0)),
                name,
                start: *start,
                end: start.saturating_add(*dur),
                args: ProbeArgs::Kernel {
                    correlation_id: launch.correlation_id,
                    stream,
                    clock_offset_ns: clock.offset_ns,
                    clock_slack_ns: clock.slack_ns,
                    clock_run_launches: clock.launches,
                },
            });
            for s in &launch.spans.spans {
                slots.push(block_slot(&pid, launch, s, clock.to_cupti_ns(s.start_ns), clock.to_cupti_ns(s.end_ns)));
            }
        }
        let info = ProbeTraceInfo {
            clock: "cupti",
            placement: if layout.measured { PLACED_BY_FIT } else { PLACED_IN_SLICE },
            origin_ns: layout.origin,
            launches,
            launches_not_placed: launches - placed.len() as u64,
            blocks: 0,
            overlap_lane_events: 0,
        };
        assemble(slots, info)
    }

    /// Writes [`Report::to_probe_trace`] to a file, e.g. `probe_trace.json`.
    pub fn write_probe_trace(&self, path: impl AsRef<Path>) -> Result<()> {
        self.to_probe_trace().write(path)
    }
}
