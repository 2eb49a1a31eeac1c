//! Live metrics while the job runs (issue 45): what the streamed drains compute, exported
//! for Prometheus at `/metrics` as the run goes, so a training job's step time, GPU time per
//! range group, transfers, DRAM traffic and gmprof's own health can be watched on Grafana.
//!
//! - `values` ([`LiveMetrics`]): the exported metric families, one registry per process,
//!   with the process's labels (rank, local rank, world size, host); [`LiveFeed`] is one
//!   profiler's (one device's) handle on them.
//! - `sums` ([`DrainSums`]): what one drain adds, summed by the stream writer as it writes
//!   the rows (numbered paths folded as the summary folds them, at most
//!   [`MAX_RANGE_GROUPS`] range groups per device and the rest in [`OTHER_RANGE`]), handed to
//!   the feed once per drain.
//! - `server` ([`MetricsServer`]): the HTTP endpoint, on a thread of its own.
//!
//! The values move only at drains, on the stream thread (the program's launch path never
//! touches them); a scrape reads them on the server's thread.
//!
//! Imports `crate::analysis` (rows, [`fold_numbers`](crate::analysis::online::fold_numbers));
//! `report::stream`'s writer and pipeline import it. This `mod.rs` only declares and
//! re-exports; no file imports it.

pub mod otlp;
pub mod push;
pub mod server;
pub mod stalls;
pub mod store;
pub mod sums;
pub mod values;

pub use self::push::{OtlpPusher, OtlpSettings};
pub use self::server::{MetricsServer, METRICS_PATH};
pub use self::store::{Fam, SeriesKey, Store, Value};
pub use self::sums::{DrainSums, MAX_RANGE_GROUPS, MAX_STALL_REASONS, OTHER_RANGE, OTHER_REASON};
pub use self::values::{LiveFeed, LiveMetrics, ProcessLabels, CONTENT_TYPE};
