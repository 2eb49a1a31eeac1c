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
//! - [`clock`]: `%globaltimer` on the CUPTI clock, from the launches' own brackets;
//! - [`model`]: [`TimedLaunch`], one launch's decoded timers as the report keeps them;
//! - [`pending`]: the process-wide list of launches waiting for the next report.
//!
//! It is foundation: it names only [`crate::model`] and [`crate::error`]. The report
//! (`regions.csv`, `report.json`'s `device_timers`, the Perfetto tracks) uses it; the host
//! API that allocates a buffer and ties it to a launch lives in `ways_in::device_timers`.
//!
//! Launches collected in a process wait in a process-wide list ([`submit`], [`take_all`])
//! until the outputs are written, where they join their kernel rows by correlation id.
//!
//! Direction inside the folder: this `mod.rs` only declares the files and re-exports them;
//! no file imports it. `format` is the bottom, `spans` builds on it, `model` on both,
//! `stats` and `pending` on `model`; `clock` stands alone.

pub mod clock;
pub mod format;
pub mod model;
pub mod pending;
pub mod spans;
pub mod stats;

pub use self::format::{decode, Decoded, Header, Kind, LaneMode, Record};
pub use self::model::{BlockRun, TimedLaunch, TrackLayout, BLOCK_REGION};
pub use self::pending::{collected, submit, take_all};
pub use self::spans::{LaneCheck, Span, Spans};
pub use self::stats::{region_stats, RegionStats, Scope};

#[cfg(test)]
mod tests;
