//! Records into spans: a begin and the end of the same region on the same lane.
//!
//! Within a lane, an end closes the innermost open begin of its region (regions may nest,
//! and a region may recur). A begin left open at the lane's last record and an end with no
//! open begin are counted in [`Spans::unclosed_begins`] and [`Spans::unmatched_ends`], never
//! dropped silently. Lane markers give the per-lane check of [`LaneCheck`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::format::{Decoded, Kind, Record, LANE_FINISH, LANE_START};

/// One timed region instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Region id.
    pub region: u16,
    /// Recording lane index.
    pub lane: u32,
    /// Block (linear).
    pub block: u32,
    /// Lane in the block.
    pub lane_in_block: u32,
    /// SM at the begin.
    pub sm: u16,
    /// Begin, `%globaltimer` ns.
    pub start_ns: u64,
    /// End, `%globaltimer` ns.
    pub end_ns: u64,
    /// Payload of the begin record.
    pub begin_payload: u32,
    /// Payload of the end record.
    pub end_payload: u32,
    /// Open regions around this one on its lane.
    pub depth: u32,
}

impl Span {
    /// End − start, ns (0 when the timer did not advance).
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// A point event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instant {
    /// Region id.
    pub region: u16,
    /// Recording lane index.
    pub lane: u32,
    /// Block (linear).
    pub block: u32,
    /// Lane in the block.
    pub lane_in_block: u32,
    /// SM.
    pub sm: u16,
    /// `%globaltimer` ns.
    pub ts_ns: u64,
    /// Payload.
    pub payload: u32,
}

/// Whether every recording lane ran exactly once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneCheck {
    /// Recording lanes the header announces.
    pub expected: u32,
    /// Lanes with a start marker.
    pub started: u32,
    /// Lanes with a finish marker.
    pub finished: u32,
    /// Lanes with more than one start marker (two leaders, or a relaunch into the buffer).
    pub repeated: u32,
    /// Lanes whose start marker names another block than the lane's slot (wrong sampling or
    /// layout arguments).
    pub misplaced: u32,
    /// Lanes whose records name more than one SM.
    pub moved_sm: u32,
}

impl LaneCheck {
    /// Every announced lane started exactly once, where its slot says.
    pub fn each_once(&self) -> bool {
        self.started == self.expected && self.repeated == 0 && self.misplaced == 0
    }
}

/// Spans, instants and the counts of what did not pair.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spans {
    /// Spans in (lane, start) order.
    pub spans: Vec<Span>,
    /// Instants in (lane, time) order.
    pub instants: Vec<Instant>,
    /// Begins never closed.
    pub unclosed_begins: u64,
    /// Ends without an open begin of their region.
    pub unmatched_ends: u64,
    /// The per-lane check.
    pub lanes: LaneCheck,
    /// Distinct SMs seen.
    pub sms: Vec<u16>,
}

/// Pairs the records of a decoded buffer.
pub fn pair(decoded: &Decoded) -> Spans {
    let mut out = Spans {
        lanes: LaneCheck { expected: decoded.header.lanes.unwrap_or(0), ..LaneCheck::default() },
        ..Spans::default()
    };
    let mut by_lane: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for r in &decoded.records {
        by_lane.entry(r.lane).or_default().push(r);
    }
    let mut sms = std::collections::BTreeSet::new();
    for records in by_lane.values() {
        let mut open: Vec<&Record> = Vec::new();
        let (mut starts, mut finished, mut misplaced) = (0u32, false, false);
        let mut lane_sms = std::collections::BTreeSet::new();
        for r in records {
            lane_sms.insert(r.sm);
            match r.kind {
                Kind::Lane if r.region == LANE_START => {
                    starts += 1;
                    misplaced |= r.payload != r.block;
                }
                Kind::Lane if r.region == LANE_FINISH => finished = true,
                Kind::Lane => {}
                Kind::Begin => open.push(r),
                Kind::End => match open.iter().rposition(|b| b.region == r.region) {
                    Some(at) => {
                        let b = open.remove(at);
                        out.spans.push(Span {
                            region: r.region,
                            lane: r.lane,
                            block: r.block,
                            lane_in_block: r.lane_in_block,
                            sm: b.sm,
                            start_ns: b.ts_ns,
                            end_ns: r.ts_ns,
                            begin_payload: b.payload,
                            end_payload: r.payload,
                            depth: at as u32,
                        });
                    }
                    None => out.unmatched_ends += 1,
                },
                Kind::Instant => out.instants.push(Instant {
                    region: r.region,
                    lane: r.lane,
                    block: r.block,
                    lane_in_block: r.lane_in_block,
                    sm: r.sm,
                    ts_ns: r.ts_ns,
                    payload: r.payload,
                }),
            }
        }
        out.unclosed_begins += open.len() as u64;
        out.lanes.started += u32::from(starts > 0);
        out.lanes.repeated += u32::from(starts > 1);
        out.lanes.finished += u32::from(finished);
        out.lanes.misplaced += u32::from(misplaced);
        out.lanes.moved_sm += u32::from(lane_sms.len() > 1);
        sms.extend(lane_sms);
    }
    out.spans.sort_by_key(|s| (s.lane, s.start_ns, std::cmp::Reverse(s.end_ns)));
    out.sms = sms.into_iter().collect();
    out
}
