//! In-kernel region timers on the timeline: their Perfetto tracks in `trace.json`.
//!
//! Layer 3 (the safe profiler), report output. The join of each [`TimedLaunch`] to its
//! kernel row ([`Report::attach_device_timers`]) and `regions.csv`
//! ([`REGIONS_CSV`](crate::report::tables::regions::REGIONS_CSV)) are
//! [`tables::regions`](crate::report::tables::regions)'.
//!
//! # Tracks
//!
//! Regions are complete events of category [`REGION_CATEGORY`] (instants: `"i"` events) in
//! the process of their GPU, on tracks beside the streams: one per SM (tid
//! [`SM_TID_BASE`] + 256·SM + k) or, for launches collected with
//! [`TrackLayout::Lane`], one per (block, lane) (tid [`LANE_TID_BASE`] + 8·(65536·block +
//! lane) + k). `k` numbers extra tracks for regions that overlap without nesting (blocks
//! sharing an SM), since a track can only draw nested slices. A region that would need more
//! than 256 tracks on one SM (8 on one lane) is left out of the trace and counted in
//! `otherData.device_timers.regions_left_out`, not drawn partly overlapping another.
//!
//! Device stamps are `%globaltimer` ns; [`DeviceClock`] puts them on the CUPTI clock of the
//! kernel slices. With measured kernel times the brackets of consecutive launches are
//! fitted to one offset per run ([`DeviceClock::fit_runs`]; runs and slack in
//! `otherData.device_timers`); when kernel positions are synthetic (counter modes), each
//! launch is placed inside its own kernel slice.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::events::{DeviceTimerTraceInfo, EventArgs, Phase, RegionArgs, TraceEvent, GPU_PID_BASE};
use super::placement::Slice;
use crate::device_timers::clock::{Bracket, DeviceClock};
use crate::device_timers::{TimedLaunch, TrackLayout};
use crate::report::model::Report;

/// Category of region events.
pub const REGION_CATEGORY: &str = "device_region";
/// First tid of the per-SM tracks (above the streams and [`PM_TID`](super::events::PM_TID),
/// which share the GPU's process).
pub const SM_TID_BASE: u64 = 1 << 33;
/// First tid of the per-lane tracks.
pub const LANE_TID_BASE: u64 = 1 << 40;

/// An event and its (start, end) on the CUPTI clock.
type Placed = (u64, u64, TraceEvent);

/// Assigns each interval (in start order, longer first) a sub-track on which it nests in or
/// follows every earlier interval.
fn sub_tracks(intervals: &[(u64, u64)]) -> Vec<u64> {
    let mut stacks: Vec<Vec<u64>> = Vec::new();
    intervals
        .iter()
        .map(|&(start, end)| {
            for (k, stack) in stacks.iter_mut().enumerate() {
                while stack.last().is_some_and(|&e| e <= start) {
                    stack.pop();
                }
                if stack.last().is_none_or(|&e| e >= end) {
                    stack.push(end);
                    return k as u64;
                }
            }
            stacks.push(vec![end]);
            (stacks.len() - 1) as u64
        })
        .collect()
}

/// A launch with a kernel slice, its slice and the clock that puts its stamps on the CUPTI
/// clock.
pub(crate) type PlacedLaunch<'a> = (&'a TimedLaunch, Slice, DeviceClock);

/// The launches of `report` whose correlation id has a kernel slice in `slices`, each with
/// the clock that places it: with `measured` slices, offsets fitted per run of consecutive
/// launches on each GPU ([`DeviceClock::fit_runs`]), else each launch inside its own slice.
/// Also returns how many runs were fitted. `trace.json`'s region tracks and
/// `probe_trace.json` ([`super::probe_trace`]) both place launches by it.
pub(crate) fn launch_clocks<'a>(
    report: &'a Report,
    slices: &HashMap<u32, Slice>,
    measured: bool,
) -> (Vec<PlacedLaunch<'a>>, u64) {
    let placed: Vec<(&TimedLaunch, Slice, Bracket)> = report
        .device_timers
        .iter()
        .filter_map(|l| {
            let slice = *slices.get(&l.correlation_id?)?;
            let bracket = Bracket {
                kernel_start_ns: slice.0,
                kernel_end_ns: slice.0 + slice.1,
                first_ns: l.first_ns?,
                last_ns: l.last_ns?,
            };
            Some((l, slice, bracket))
        })
        .collect();
    // Offsets per run of launches on each GPU (measured positions), else per launch.
    let mut clocks: Vec<DeviceClock> = placed.iter().map(|p| DeviceClock::single(&p.2)).collect();
    let mut runs = 0u64;
    if measured {
        let devices: BTreeSet<u32> = placed.iter().map(|p| p.1 .2).collect();
        for device in devices {
            let members: Vec<usize> = (0..placed.len()).filter(|&i| placed[i].1 .2 == device).collect();
            let fitted = DeviceClock::fit_runs(&members.iter().map(|&i| placed[i].2).collect::<Vec<_>>());
            // A run of n launches gives each of them a clock with `launches` n.
            runs += fitted.iter().map(|c| 1.0 / f64::from(c.launches.max(1))).sum::<f64>().round() as u64;
            for (&i, clock) in members.iter().zip(fitted) {
                clocks[i] = clock;
            }
        }
    }
    (placed.into_iter().zip(clocks).map(|((launch, slice, _), clock)| (launch, slice, clock)).collect(), runs)
}

/// The region events of `report` and what the trace says about them. `slices` maps a
/// correlation id to its kernel's slice; `measured` says whether slices are real times.
pub(crate) fn trace_events(
    report: &Report,
    slices: &HashMap<u32, Slice>,
    measured: bool,
    origin: u64,
) -> (Vec<TraceEvent>, Option<DeviceTimerTraceInfo>) {
    if report.device_timers.is_empty() {
        return (Vec::new(), None);
    }
    let (placed, runs) = launch_clocks(report, slices, measured);
    let clocks: Vec<DeviceClock> = placed.iter().map(|p| p.2).collect();
    let shared = (measured && runs == 1).then(|| clocks[0]);
    let micros = |ns: u64| ns.saturating_sub(origin) as f64 / 1000.0;

    // (device, layout base tid) → [(start, end, event)], sub-tracks assigned per base.
    let mut tracks: BTreeMap<(u32, u64), Vec<Placed>> = BTreeMap::new();
    let mut names: BTreeMap<(u32, u64), String> = BTreeMap::new();
    for (launch, slice, clock) in &placed {
        let device = slice.2;
        let base = |block: u32, lane: u32, sm: u16| match launch.tracks {
            TrackLayout::Sm => (SM_TID_BASE + 256 * u64::from(sm), format!("SM {sm} (device timers)")),
            TrackLayout::Lane => (
                LANE_TID_BASE + 8 * (65_536 * u64::from(block) + u64::from(lane)),
                format!("block {block} lane {lane} (device timers)"),
            ),
        };
        for s in &launch.spans.spans {
            let (tid, name) = base(s.block, s.lane_in_block, s.sm);
            names.entry((device, tid)).or_insert(name);
            let (start, end) = (clock.to_cupti_ns(s.start_ns), clock.to_cupti_ns(s.end_ns));
            let event = TraceEvent {
                name: launch.region_name(s.region),
                cat: Some(REGION_CATEGORY),
                ph: Phase::Complete,
                ts: Some(micros(start)),
                dur: Some(s.duration_ns() as f64 / 1000.0),
                pid: GPU_PID_BASE + u64::from(device),
                tid,
                args: EventArgs::Region(RegionArgs {
                    correlation_id: launch.correlation_id,
                    region_id: s.region,
                    block: s.block,
                    lane: s.lane_in_block,
                    sm: s.sm,
                    duration_ns: Some(s.duration_ns()),
                    payload: s.begin_payload,
                    end_payload: Some(s.end_payload),
                }),
            };
            tracks.entry((device, tid)).or_default().push((start, end, event));
        }
        for i in &launch.spans.instants {
            let (tid, name) = base(i.block, i.lane_in_block, i.sm);
            names.entry((device, tid)).or_insert(name);
            let at = clock.to_cupti_ns(i.ts_ns);
            let event = TraceEvent {
                name: launch.region_name(i.region),
                cat: Some(REGION_CATEGORY),
                ph: Phase::Instant,
                ts: Some(micros(at)),
                dur: None,
                pid: GPU_PID_BASE + u64::from(device),
                tid,
                args: EventArgs::Region(RegionArgs {
                    correlation_id: launch.correlation_id,
                    region_id: i.region,
                    block: i.block,
                    lane: i.lane_in_block,
                    sm: i.sm,
                    duration_ns: None,
                    payload: i.payload,
                    end_payload: None,
                }),
            };
            tracks.entry((device, tid)).or_default().push((at, at, event));
        }
    }
    let mut events = Vec::new();
    let mut named: BTreeSet<(u32, u64)> = BTreeSet::new();
    let mut left_out = 0u64;
    for ((device, base), mut list) in tracks {
        list.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let spans: Vec<(u64, u64)> = list.iter().map(|(s, e, _)| (*s, *e)).collect();
        let ks = sub_tracks(&spans);
        let limit = if base >= LANE_TID_BASE { 7 } else { 255 };
        for ((_, _, mut event), k) in list.into_iter().zip(ks) {
            if k > limit {
                // No track left for it: on the last one it would partly overlap.
                left_out += 1;
                continue;
            }
            event.tid = base + k;
            if named.insert((device, event.tid)) {
                let label = names.get(&(device, base)).cloned().unwrap_or_default();
                let label = if k == 0 { label } else { format!("{label} · {k}") };
                events.push(TraceEvent {
                    name: "thread_name".into(),
                    cat: None,
                    ph: Phase::Metadata,
                    ts: None,
                    dur: None,
                    pid: event.pid,
                    tid: event.tid,
                    args: EventArgs::Name { name: label },
                });
            }
            events.push(event);
        }
    }
    let info = DeviceTimerTraceInfo {
        launches: report.device_timers.len() as u64,
        placed: placed.len() as u64,
        unplaced: (report.device_timers.len() - placed.len()) as u64,
        clock: match (measured, shared.is_some()) {
            (false, _) => "each launch inside its own kernel slice",
            (true, true) => "one offset for all launches",
            (true, false) => "offsets fitted per run of launches",
        },
        runs,
        offset_ns: shared.map(|c| c.offset_ns),
        slack_ns: clocks.iter().map(|c| c.slack_ns).max(),
        regions_left_out: left_out,
    };
    (events, Some(info))
}
