//! Where the timeline puts ranges, kernels and transfers on the CUPTI clock, and from which
//! origin: [`Report::placement`], shared by `trace.json` ([`super::trace`], whose module
//! docs say how counter modes place kernels) and `probe_trace.json`
//! ([`super::probe_trace`]), so both files put a launch at the same time from the same `ts` 0.
//!
//! Layer 3 (the safe profiler), report output.

use std::collections::{BTreeMap, HashMap};

use super::events::{id_text, SkippedRows, TransferArgs};
use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::TimeSource;
use crate::model::RangeId;
use crate::report::model::Report;

/// The timeline's layout of a report, before any event is made.
pub(super) struct Placement<'a> {
    /// Whether kernel positions are measured (activity timestamps) or synthetic.
    pub(super) measured: bool,
    /// Rows without an event, so far (ranges, kernels, transfers).
    pub(super) skipped: SkippedRows,
    /// The transfers with times.
    pub(super) transfers: Vec<Transfer>,
    /// Ranges with both timestamps, as (row, start, end).
    pub(super) ranges: Vec<(&'a RangeRow, u64, u64)>,
    /// Each kernel row's (start, duration), absolute CUPTI ns; `None` without a place.
    pub(super) positions: Vec<Option<(u64, u64)>>,
    /// `ts` 0 of the trace, CUPTI ns: the earliest range, kernel, transfer or pause.
    pub(super) origin: u64,
}

impl Report {
    /// The timeline's placement of this report's rows (module docs).
    pub(super) fn placement(&self) -> Placement<'_> {
        let measured = self.meta.time_source == TimeSource::Activity;
        let mut skipped = SkippedRows::default();
        let mut kept_transfers = Vec::new();
        for row in &self.transfers {
            match transfer_event(row) {
                Some(t) if t.end_ns >= t.start_ns => kept_transfers.push(t),
                Some(_) => skipped.transfers_without_times += 1,
                None => skipped.untimed_transfers += 1,
            }
        }

        // Ranges with both timestamps, as (row, start, end).
        let mut ranges = Vec::new();
        for row in self.ranges.iter().filter(|r| r.range_id.is_some()) {
            match (row.start_ns, row.end_ns) {
                (Some(start), Some(end)) if end >= start => ranges.push((row, start, end)),
                (Some(_), None) => skipped.open_ranges += 1,
                _ => skipped.ranges_without_times += 1,
            }
        }
        let range_starts: HashMap<RangeId, u64> =
            self.ranges.iter().filter_map(|r| Some((r.range_id?, r.start_ns?))).collect();

        // Kernel positions (start, duration), absolute ns.
        let positions: Vec<Option<(u64, u64)>> = if measured {
            self.kernels
                .iter()
                .map(|k| {
                    k.device_id?;
                    k.stream_id?;
                    let (start, end) = (k.start_ns?, k.end_ns?);
                    Some((start, end.checked_sub(start)?))
                })
                .collect()
        } else {
            synthetic_positions(self, &range_starts, &kept_transfers)
        };
        skipped.kernels_without_times = positions.iter().filter(|p| p.is_none()).count() as u64;

        let origin = ranges
            .iter()
            .map(|(_, start, _)| *start)
            .chain(positions.iter().flatten().map(|(start, _)| *start))
            .chain(kept_transfers.iter().map(|t| t.start_ns))
            .chain(self.meta.profiler_pauses.iter().map(|p| p.start_ns))
            .min()
            .unwrap_or(0);
        Placement { measured, skipped, transfers: kept_transfers, ranges, positions, origin }
    }
}

/// Each placed kernel's slice (start, duration, device) by correlation id, from
/// [`Placement::positions`].
pub(super) fn slices(report: &Report, positions: &[Option<(u64, u64)>]) -> HashMap<u32, Slice> {
    report
        .kernels
        .iter()
        .zip(positions)
        .filter_map(|(k, p)| p.and_then(|(start, dur)| Some((k.correlation_id, (start, dur, k.device_id?)))))
        .collect()
}

/// Places the kernels of a counter mode (see the module docs); `None` for kernels without
/// a device and stream. Positions are absolute CUPTI ns.
fn synthetic_positions(
    report: &Report,
    range_starts: &HashMap<RangeId, u64>,
    transfers: &[Transfer],
) -> Vec<Option<(u64, u64)>> {
    // Measured transfers per device in start order: synthetic kernels go around them.
    let mut busy: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for t in transfers {
        busy.entry(t.device_id).or_default().push((t.start_ns, t.end_ns));
    }
    for list in busy.values_mut() {
        list.sort_unstable();
    }
    let mut cursor: HashMap<u32, (u64, usize)> = HashMap::new();
    report
        .kernels
        .iter()
        .map(|k| {
            let (device, _stream) = (k.device_id?, k.stream_id?);
            let anchor = k.range_id.and_then(|id| range_starts.get(&id).copied()).or(k.start_ns)?;
            let dur = k.duration_ns.unwrap_or(0);
            let (free_at, next) = cursor.entry(device).or_insert((0, 0));
            let mut start = anchor.max(*free_at);
            if let Some(list) = busy.get(&device) {
                while let Some(&(t_start, t_end)) = list.get(*next) {
                    if t_end <= start {
                        *next += 1;
                    } else if t_start < start.saturating_add(dur.max(1)) {
                        // Overlaps (or a zero-length kernel sits inside) a measured transfer.
                        start = t_end;
                        *next += 1;
                    } else {
                        break;
                    }
                }
            }
            *free_at = start.saturating_add(dur);
            Some((start, dur))
        })
        .collect()
}

/// A kernel's slice: (start, duration) on the CUPTI clock and its device.
pub(crate) type Slice = (u64, u64, u32);

/// One memcpy or memset, as the timeline needs it.
#[derive(Clone, Debug)]
pub(super) struct Transfer {
    pub(super) name: &'static str,
    pub(super) kind: crate::model::TransferKind,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) stream_id: u32,
    pub(super) device_id: u32,
    /// When the call was made and returned, where capture stamped them (the Kineto form's
    /// call events).
    pub(super) call_ns: Option<u64>,
    pub(super) call_end_ns: Option<u64>,
    pub(super) args: TransferArgs,
}

/// A transfer row as the timeline needs it; `None` for a row without times, stream or
/// device (an untimed transfer: it has no place on a track).
pub(super) fn transfer_event(t: &crate::analysis::correlate::TransferRow) -> Option<Transfer> {
    Some(Transfer {
        name: t.kind.as_str(),
        kind: t.kind,
        start_ns: t.start_ns?,
        end_ns: t.end_ns?,
        stream_id: t.stream_id?,
        device_id: t.device_id?,
        call_ns: t.call_ns,
        call_end_ns: t.call_end_ns,
        args: TransferArgs {
            correlation_id: t.correlation_id,
            bytes: t.bytes,
            gbps: t.gbps(),
            range_path: t.range_path.clone(),
            range_id: t.range_id.map(id_text),
            thread: t.thread,
            api_name: t.api_name.clone(),
            status: t.status,
        },
    })
}
