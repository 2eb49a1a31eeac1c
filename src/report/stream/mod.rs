//! Streamed outputs (issue 42): rows written to part files as they complete, aggregates and
//! the steps table kept online, so a run of any length is profiled at flat memory.
//!
//! `writer` ([`StreamWriter`]) is the sink; `pipeline` ([`StreamPipeline`]) feeds it the rows
//! its drains
//! correlate ([`Correlator::drain_complete`](crate::analysis::correlate::Correlator::drain_complete))
//! and the range instances the tracker completes
//! ([`RangeInstances`](crate::analysis::online::RangeInstances)) from a running session's
//! correlator and range tree; `flight` ([`write_window`]) writes the flight recorder's
//! windows; `memory` gives the allocator's free pages back after a drain; `pm` ([`PmStream`],
//! [`PmWait`]) streams PM sampling's samples and per-kernel values.
//!
//! This `mod.rs` only declares and re-exports; no file imports it.

pub mod flight;
pub mod memory;
pub mod pipeline;
pub mod pm;
pub mod summary;
pub mod writer;

pub use self::flight::{write_window, WindowJob, WHY_JSON, WINDOW_FILES};
pub use self::memory::release_free_memory;
pub use self::pipeline::{DrainInput, Drained, PipelineCore, PipelineHandle, StreamEnd, StreamPipeline};
pub use self::pm::{PmFeed, PmKernelRows, PmStream, PmStreamCounts, PmWait};
pub use self::summary::{DrainTimes, StreamedSummary, StreamedTable};
pub use self::writer::{
    StreamMeta, StreamSettings, StreamWriter, StreamWritten, DEFAULT_RELEASE_EVERY, STREAMED_TABLES,
};
