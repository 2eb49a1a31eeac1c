//! In-kernel region timers: the host side of `include/gmprof_device.cuh`.
//!
//! A kernel built with the device header stamps `%globaltimer` and `%smid` into a buffer
//! at region begins, ends and instants, one lane per block, warp or named group. This
//! folder turns such a buffer into what the report shows:
//!
//! - [`format`](mod@format): the buffer layout (version [`format::VERSION`]) and [`format::decode`]
//!   (torn records and overflow counted, never dropped silently);
//! - [`spans`]: begin/end pairs per lane, instants, and the check that every lane ran once;
//! - [`stats`]: count, total, mean, min, max, p50 and p99 per region, per SM and per lane;
//! - [`clock`]: `%globaltimer` on the CUPTI clock, from the launches' own brackets.
//!
//! It is foundation: it names only [`crate::model`] and [`crate::error`]. The report
//! (`regions.csv`, `report.json`'s `device_timers`, the Perfetto tracks) uses it; the host
//! API that allocates a buffer and ties it to a launch lives in `ways_in::device_timers`.
//!
//! Launches collected in a process wait in a process-wide list ([`submit`], [`take_all`])
//! until the outputs are written, where they join their kernel rows by correlation id.

pub mod clock;
pub mod format;
pub mod spans;
pub mod stats;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::Result;

pub use self::format::{decode, Decoded, Header, Kind, LaneMode, Record};
pub use self::spans::{LaneCheck, Span, Spans};
pub use self::stats::{region_stats, RegionStats, Scope};

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

static COLLECTED: Mutex<Vec<TimedLaunch>> = Mutex::new(Vec::new());

/// Hands a collected launch to the process's next report.
pub fn submit(launch: TimedLaunch) {
    COLLECTED.lock().push(launch);
}

/// A copy of every launch submitted and not yet taken (for checkpoints).
pub fn collected() -> Vec<TimedLaunch> {
    COLLECTED.lock().clone()
}

/// Every launch submitted since the last call, in submission order.
pub fn take_all() -> Vec<TimedLaunch> {
    std::mem::take(&mut *COLLECTED.lock())
}

#[cfg(test)]
mod tests;
