//! Extra lanes for GPU intervals of one stream that overlap without nesting.
//!
//! Layer 3 (the safe profiler), report output, used by [`trace`](super::trace). A Chrome
//! trace viewer draws only nested slices on one track, but the GPU does run intervals of one
//! stream that partly overlap: on Hopper a kernel launched with programmatic dependent launch
//! starts before the kernel before it on its stream has ended (cuBLASLt's split-K reduce
//! after its GEMM; two Triton kernels of a torch.compile'd nanoGPT overlapped by 96 ns on an
//! H100). CUPTI's timestamps are what they are, and the timeline never changes one. It puts
//! such an interval on an extra lane of its stream instead: a track of its own in the GPU's
//! process, named `stream 7 · overlapped` (the second extra lane `stream 7 · overlapped 2`,
//! and so on), with tid [`lane_tid`].
//!
//! [`assign_lanes`] takes a stream's intervals (kernels, memcpys and memsets together, since
//! they share the stream's track) in start order and gives each the lowest lane that is free
//! at its start: lane 0 (the stream's own track) whenever it is free, so only what overlaps
//! moves, and lanes are reused, so a long run of overlaps needs as many lanes as the most
//! intervals that run at once. An interval that starts exactly when another ends does not
//! overlap it. An interval contained in another goes to an extra lane too: on a stream's
//! track a slice inside another would read as its child.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::events::{EventArgs, Phase, TraceEvent};

/// The first tid of the extra lanes: above every other track of a GPU's process (streams
/// below 2^32, PM sampling and the device-timer tracks below 2^52), and below 2^53, so a
/// JavaScript number holds every lane's tid exactly.
pub const OVERLAP_TID_BASE: u64 = 1 << 52;

/// Extra lanes a stream can have (the GPU runs at most 128 kernels at once).
pub const EXTRA_LANES_PER_STREAM: u32 = 1 << 16;

/// The tid of extra lane `lane` (1, 2, ...) of stream `stream`; lane 0 is the stream's own
/// track, tid = stream id. Lanes past [`EXTRA_LANES_PER_STREAM`] share its last lane.
pub fn lane_tid(stream: u32, lane: u32) -> u64 {
    if lane == 0 {
        return u64::from(stream);
    }
    let extra = u64::from(lane.min(EXTRA_LANES_PER_STREAM) - 1);
    OVERLAP_TID_BASE + u64::from(stream) * u64::from(EXTRA_LANES_PER_STREAM) + extra
}

/// The track name of lane `lane` of stream `stream`.
pub fn lane_name(stream: u32, lane: u32) -> String {
    lane_label(&format!("stream {stream}"), lane)
}

/// The name of lane `lane` of the track named `track`: the track's own name for lane 0,
/// then `track · overlapped`, `track · overlapped 2`, ... (probe_trace.json's SM tracks
/// take their lanes by this name too).
pub fn lane_label(track: &str, lane: u32) -> String {
    match lane {
        0 => track.to_owned(),
        1 => format!("{track} · overlapped"),
        k => format!("{track} · overlapped {k}"),
    }
}

/// The lane of each interval `(start, end)` (ns, `end >= start`): the lowest lane free at its
/// start, taking the intervals by start (ties in the given order). Lane 0 is the stream's
/// own track.
pub fn assign_lanes(intervals: &[(u64, u64)]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..intervals.len()).collect();
    order.sort_by_key(|&i| intervals[i].0);
    let mut lanes = vec![0; intervals.len()];
    let mut free: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut busy: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut opened = 0u32;
    for i in order {
        let (start, end) = intervals[i];
        while let Some(&Reverse((until, lane))) = busy.peek() {
            if until > start {
                break;
            }
            busy.pop();
            free.push(Reverse(lane));
        }
        let lane = match free.pop() {
            Some(Reverse(lane)) => lane,
            None => {
                opened += 1;
                opened - 1
            }
        };
        busy.push(Reverse((end.max(start), lane)));
        lanes[i] = lane;
    }
    lanes
}

/// A GPU slice of the trace: its index in the events, its start and end (ns).
pub(crate) type GpuSpan = (usize, u64, u64);

/// Puts the GPU slices of `events` on lanes: `spans` holds (index in `events`, start ns, end
/// ns) of every kernel, memcpy and memset event, whose tid is its stream. Events on lanes
/// past 0 get the lane's tid; returns the `thread_name` metadata of those lanes and how many
/// events moved.
pub(crate) fn spread(events: &mut [TraceEvent], spans: &[GpuSpan]) -> (Vec<TraceEvent>, u64) {
    let mut tracks: BTreeMap<(u64, u64), Vec<GpuSpan>> = BTreeMap::new();
    for &(index, start, end) in spans {
        let e = &events[index];
        tracks.entry((e.pid, e.tid)).or_default().push((index, start, end));
    }
    let mut metadata = Vec::new();
    let mut moved = 0;
    for ((pid, stream), members) in tracks {
        let Ok(stream) = u32::try_from(stream) else { continue };
        let intervals: Vec<(u64, u64)> = members.iter().map(|&(_, start, end)| (start, end)).collect();
        let lanes = assign_lanes(&intervals);
        for (&(index, _, _), &lane) in members.iter().zip(&lanes) {
            if lane > 0 {
                events[index].tid = lane_tid(stream, lane);
                moved += 1;
            }
        }
        let used = lanes.iter().copied().max().unwrap_or(0).min(EXTRA_LANES_PER_STREAM);
        for lane in 1..=used {
            metadata.push(TraceEvent {
                name: "thread_name".into(),
                cat: None,
                ph: Phase::Metadata,
                ts: None,
                dur: None,
                pid,
                tid: lane_tid(stream, lane),
                args: EventArgs::Name { name: lane_name(stream, lane) },
            });
        }
    }
    (metadata, moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_overlaps_leaves_the_stream_track() {
        // Back to back (end == next start), a gap, then one that starts early.
        let lanes = assign_lanes(&[(0, 10), (10, 20), (30, 40), (35, 50), (50, 60)]);
        assert_eq!(lanes, [0, 0, 0, 1, 0]);
    }

    #[test]
    fn contained_intervals_and_ties_take_lanes_in_order() {
        assert_eq!(assign_lanes(&[(0, 100), (10, 20), (30, 40)]), [0, 1, 1]);
        assert_eq!(assign_lanes(&[(5, 9), (5, 7), (5, 5)]), [0, 1, 2]);
        // Zero-length intervals at one instant do not overlap each other.
        assert_eq!(assign_lanes(&[(5, 5), (5, 5)]), [0, 0]);
    }

    #[test]
    fn lanes_are_reused_up_to_the_concurrency() {
        // A staircase: each interval overlaps only the one before it. Two lanes, however long.
        let stairs: Vec<(u64, u64)> = (0..1000u64).map(|i| (i * 10, i * 10 + 15)).collect();
        let lanes = assign_lanes(&stairs);
        assert_eq!(lanes.iter().copied().max(), Some(1));
        assert!(lanes.iter().enumerate().all(|(i, &l)| l == (i % 2) as u32));
        // Given out of order: sorted by start first.
        assert_eq!(assign_lanes(&[(20, 30), (0, 25), (26, 27)]), [1, 0, 0]);
    }

    #[test]
    fn the_tracks_of_a_gpu_process_never_share_a_tid() {
        use crate::report::timeline::device_timers::{LANE_TID_BASE, SM_TID_BASE};
        use crate::report::timeline::events::PM_TID;
        // [first, last] tid of each kind of track on a GPU's process.
        let streams = (0, u64::from(u32::MAX));
        let pm = (PM_TID, PM_TID);
        let sms = (SM_TID_BASE, SM_TID_BASE + 256 * u64::from(u16::MAX) + 255);
        let lanes = (LANE_TID_BASE, LANE_TID_BASE + 8 * (65_536 * u64::from(u32::MAX) + 65_535) + 7);
        let overlaps = (lane_tid(0, 1), lane_tid(u32::MAX, EXTRA_LANES_PER_STREAM));
        let mut all = [streams, pm, sms, lanes, overlaps];
        all.sort_unstable();
        for pair in all.windows(2) {
            assert!(pair[0].1 < pair[1].0, "{:?} and {:?} share tids", pair[0], pair[1]);
        }
        assert!(overlaps.1 < 1 << 53, "a JavaScript number holds every tid");
    }

    #[test]
    fn lane_tids_and_names_stay_apart() {
        assert_eq!(lane_tid(7, 0), 7);
        assert_eq!(lane_tid(7, 1), OVERLAP_TID_BASE + 7 * 65_536);
        assert_eq!(lane_tid(7, 2), lane_tid(7, 1) + 1);
        assert!(lane_tid(8, 1) > lane_tid(7, EXTRA_LANES_PER_STREAM));
        assert_eq!(lane_tid(7, EXTRA_LANES_PER_STREAM + 5), lane_tid(7, EXTRA_LANES_PER_STREAM));
        assert!(lane_tid(u32::MAX, EXTRA_LANES_PER_STREAM) < 1 << 53);
        assert_eq!(lane_name(7, 0), "stream 7");
        assert_eq!(lane_name(7, 1), "stream 7 · overlapped");
        assert_eq!(lane_name(7, 3), "stream 7 · overlapped 3");
        assert_eq!(lane_label("SM 003", 0), "SM 003");
        assert_eq!(lane_label("SM 003", 2), "SM 003 · overlapped 2");
    }
}
