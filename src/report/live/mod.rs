//! Live metrics while the job runs (issue 45): what the streamed drains compute, exported
//! as the run goes, so a training job's step time, GPU time per range group, transfers, DRAM
//! traffic, stall reasons and gmprof's own health can be watched on Grafana: served for
//! Prometheus at `/metrics`, pushed to an OpenTelemetry collector over OTLP/HTTP, or both.
//!
//! - `store` ([`Store`]): the values themselves, every family's series, behind one lock;
//!   both exports read it, so they say the same values.
//! - `values` ([`LiveMetrics`]): one process's store and registry, with the process's labels
//!   (rank, local rank, world size, host); [`LiveFeed`] is one profiler's (one device's)
//!   handle on them.
//! - `sums` ([`DrainSums`]): what one drain adds, summed by the stream writer as it writes
//!   the rows (numbered paths folded as the summary folds them, at most
//!   [`MAX_RANGE_GROUPS`] range groups per device and the rest in [`OTHER_RANGE`]), handed to
//!   the feed once per drain; `stalls` shares PC sampling's samples among the range groups.
//! - `server` ([`MetricsServer`]): the Prometheus endpoint, on a thread of its own.
//! - `otlp` (the store as an OTLP request) and `push` ([`OtlpPusher`]): the OTLP push, on a
//!   thread of its own.
//!
//! The values move only at drains, on the stream thread (the program's launch path never
//! touches them); a scrape or a push reads them on its own thread.
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
