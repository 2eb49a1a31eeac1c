//! The host's model of one launch's timers: [`TimedLaunch`] (a decoded buffer, its spans
//! and the lane check), [`BlockRun`] and [`BLOCK_REGION`] for block-level probes, and the
//! timeline's [`TrackLayout`].
//!
//! Builds on `format` (the buffer) and `spans` (the pairing); `stats` reads
//! [`TimedLaunch`]s, `pending` keeps them, and `mod.rs` re-exports them (the crate names
//! them as `crate::device_timers::TimedLaunch`).

use serde::{Deserialize, Serialize};

use crate::error::Result;

use super::format::{self, decode, Decoded, Header, LaneMode};
use super::spans::{self, LaneCheck, Span, Spans};

/// One launch's decoded timers, as the report keeps them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimedLaunch {
    /// CUPTI correlation id of the launch (joins the kernel row and its range); `None` when
    /// the buffer was collected without a profiled launch.
    pub correlation_id: Option<u32>,
    /// A label for launches without a kernel row (the kernel's name, when the caller knows it).
    pub label: Option<String>,
    /// The kernel row's demangled name, filled in when the report joins the launch.
    #[serde(default)]
    pub kernel_name: Option<String>,
    /// The path of the launching range, filled in when the report joins the launch.
    #[serde(default)]
    pub range_path: Option<String>,
    /// How the timeline lays out this launch's regions.
    #[serde(default)]
    pub tracks: TrackLayout,
    /// Region names by id; an id without a name shows as `region_<id>`.
    pub region_names: Vec<String>,
    /// The buffer's header (overflow included).
    pub header: Header,
    /// Torn records left out.
    pub torn: u64,
    /// Records outside any lane's written run, left out.
    pub stray: u64,
    /// Earliest record, `%globaltimer` ns.
    pub first_ns: Option<u64>,
    /// Latest record, `%globaltimer` ns.
    pub last_ns: Option<u64>,
    /// Spans, instants and the lane check.
    pub spans: Spans,
}

impl TimedLaunch {
    /// Decodes a buffer (little-endian words, header first).
    pub fn from_words(words: &[u64], region_names: &[String], correlation_id: Option<u32>) -> Result<TimedLaunch> {
        let decoded = decode(words)?;
        Ok(Self::from_decoded(&decoded, region_names, correlation_id))
    }

    /// Decodes a buffer given as bytes (a copy of the device buffer, a file).
    pub fn from_bytes(bytes: &[u8], region_names: &[String], correlation_id: Option<u32>) -> Result<TimedLaunch> {
        Self::from_words(&format::words_from_bytes(bytes), region_names, correlation_id)
    }

    /// From an already decoded buffer.
    pub fn from_decoded(decoded: &Decoded, region_names: &[String], correlation_id: Option<u32>) -> TimedLaunch {
        TimedLaunch {
            correlation_id,
            label: None,
            kernel_name: None,
            range_path: None,
            tracks: TrackLayout::default(),
            region_names: region_names.to_vec(),
            header: decoded.header.clone(),
            torn: decoded.torn,
            stray: decoded.stray,
            first_ns: decoded.records.iter().map(|r| r.ts_ns).min(),
            last_ns: decoded.records.iter().map(|r| r.ts_ns).max(),
            spans: spans::pair(decoded),
        }
    }

    /// A launch whose only regions are its blocks, from a block-level probe (`gmprof run
    /// --probe block_sched`): one lane per block, region [`BLOCK_REGION`] named `region`
    /// from each block's first entry to its last exit. `runs` holds every block of the grid
    /// (`blocks`), those that never ran with `entries` 0; the lane check counts them.
    pub fn from_blocks(
        correlation_id: Option<u32>,
        label: &str,
        region: &str,
        blocks: u32,
        runs: &[BlockRun],
    ) -> TimedLaunch {
        let ran: Vec<&BlockRun> = runs.iter().filter(|r| r.entries > 0).collect();
        let mut sms: Vec<u16> = ran.iter().map(|r| r.sm).collect();
        sms.sort_unstable();
        sms.dedup();
        let started = ran.len() as u32;
        let spans = ran
            .iter()
            .map(|r| Span {
                region: BLOCK_REGION,
                lane: r.block,
                block: r.block,
                lane_in_block: 0,
                sm: r.sm,
                start_ns: r.start_ns,
                end_ns: r.end_ns,
                begin_payload: 0,
                end_payload: 0,
                depth: 0,
            })
            .collect();
        TimedLaunch {
            correlation_id,
            label: Some(label.to_string()),
            kernel_name: None,
            range_path: None,
            tracks: TrackLayout::Sm,
            region_names: vec![String::new(), String::new(), region.to_string()],
            header: Header {
                version: format::VERSION,
                capacity: blocks.saturating_mul(2),
                overflow: 0,
                blocks: Some(blocks),
                lanes_per_block: Some(1),
                lane_mode: Some(LaneMode::Block),
                sample_blocks: Some(1),
                sample_lanes: Some(1),
                per_lane: Some(2),
                lanes: Some(blocks),
            },
            torn: 0,
            stray: 0,
            first_ns: ran.iter().map(|r| r.start_ns).min(),
            last_ns: ran.iter().map(|r| r.end_ns).max(),
            spans: Spans {
                spans,
                lanes: LaneCheck {
                    expected: blocks,
                    started,
                    finished: started,
                    repeated: runs.iter().filter(|r| r.entries > 1).count() as u32,
                    misplaced: 0,
                    moved_sm: 0,
                },
                sms,
                ..Spans::default()
            },
        }
    }

    /// The name of region `id`.
    pub fn region_name(&self, id: u16) -> String {
        self.region_names
            .get(usize::from(id))
            .filter(|n| !n.is_empty())
            .cloned()
            .unwrap_or_else(|| format!("region_{id}"))
    }

    /// Records the device could not write (full lanes).
    pub fn overflow(&self) -> u64 {
        self.header.overflow
    }
}

/// The region id of a block in [`TimedLaunch::from_blocks`] (0 and 1 are the lane markers).
pub const BLOCK_REGION: u16 = 2;

/// One block as a block-level probe saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRun {
    /// Linear block index.
    pub block: u32,
    /// SM it ran on.
    pub sm: u16,
    /// First entry, `%globaltimer` ns.
    pub start_ns: u64,
    /// Last exit, `%globaltimer` ns.
    pub end_ns: u64,
    /// Times it entered (0: never ran).
    pub entries: u32,
}

/// The timeline tracks of a launch's regions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrackLayout {
    /// One track per SM (more where regions of concurrent blocks overlap).
    #[default]
    Sm,
    /// One track per (block, lane).
    Lane,
}

impl TrackLayout {
    /// `"sm"` or `"lane"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrackLayout::Sm => "sm",
            TrackLayout::Lane => "lane",
        }
    }

    /// Parses `"sm"` or `"lane"`.
    pub fn parse(text: &str) -> Option<TrackLayout> {
        match text {
            "sm" => Some(TrackLayout::Sm),
            "lane" => Some(TrackLayout::Lane),
            _ => None,
        }
    }
}
