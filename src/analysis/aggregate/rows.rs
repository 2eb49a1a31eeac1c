//! The aggregation's output: one [`RangeRow`] per range instance (and the root row), and the
//! session's [`Aggregation`].
//!
//! Imports `rules` and `derived` (the metadata an [`Aggregation`] carries); `fold` builds
//! these rows, and `aggregate/mod.rs` re-exports them.

use serde::{Deserialize, Serialize};

use super::derived::DerivedMetric;
use super::rules::MetricRule;
use crate::model::{RangeId, ThreadId};

/// One range instance's aggregated values (or the root row's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeRow {
    /// The range, `None` for the root row.
    pub range_id: Option<RangeId>,
    /// Path from the outermost range, or [`ROOT_PATH`](crate::model::session::ROOT_PATH).
    pub path: String,
    /// The range's own name.
    pub name: String,
    /// 0 for top-level ranges and the root row.
    pub depth: u32,
    /// How many earlier instances of this path the session had.
    pub instance: u32,
    /// The thread that pushed it; `None` for the root row.
    pub thread: Option<ThreadId>,
    /// Kernels of this range and its nested ranges.
    pub kernel_count: u64,
    /// Kernels launched while this range itself was innermost.
    pub self_kernel_count: u64,
    /// Of `kernel_count`, rows whose status is not `ok`.
    pub flagged_kernel_count: u64,
    /// Σ kernel durations, ns; `None` when kernels had no known duration.
    pub gpu_time_ns: Option<u64>,
    /// Pop − push, ns, when both are known.
    pub wall_time_ns: Option<u64>,
    /// Push timestamp, ns on the CUPTI clock (the clock of activity records).
    #[serde(default)]
    pub start_ns: Option<u64>,
    /// Pop timestamp, ns on the CUPTI clock; `None` while open.
    #[serde(default)]
    pub end_ns: Option<u64>,
    /// The enclosing range, `None` for top-level ranges and the root row.
    #[serde(default)]
    pub parent_id: Option<RangeId>,
    /// Length of the union of the kernels' `[start_ns, end_ns)` intervals, ns (inclusive of
    /// nested ranges): time at least one kernel ran. In the modes whose time source is
    /// activity (trace, per_kernel, per_range); `None` in kernel_replay and when no kernel of
    /// the range has timestamps.
    #[serde(default)]
    pub gpu_busy_ns: Option<u64>,
    /// Memcpy and memset operations of this range and its nested ranges.
    #[serde(default)]
    pub transfer_count: u64,
    /// Σ bytes of those transfers (memcpy and memset).
    #[serde(default)]
    pub transfer_bytes: u64,
    /// Σ bytes copied by memcpy.
    #[serde(default)]
    pub memcpy_bytes: u64,
    /// Σ bytes set by memset.
    #[serde(default)]
    pub memset_bytes: u64,
    /// Transfers among `transfer_count` that were not timed (timing `api_call`).
    #[serde(default)]
    pub untimed_transfer_count: u64,
    /// Σ durations of the timed transfers, ns; `None` when the range has transfers and
    /// none of them was timed.
    #[serde(default)]
    pub transfer_time_ns: Option<u64>,
    /// Bytes of the timed transfers / `transfer_time_ns`, GB/s; `None` when that time is
    /// 0 or not measured.
    #[serde(default)]
    pub transfer_gbps: Option<f64>,
    /// One value per metric of the session's [`MetricSet`](crate::model::MetricSet), by its rule.
    pub metrics: Vec<Option<f64>>,
    /// Σ DRAM bytes read.
    pub dram_read_bytes: Option<f64>,
    /// Σ DRAM bytes written.
    pub dram_write_bytes: Option<f64>,
    /// Σ read bytes / Σ GPU time, GB/s.
    pub dram_read_gbps: Option<f64>,
    /// Σ written bytes / Σ GPU time, GB/s.
    pub dram_write_gbps: Option<f64>,
    /// Σ (read + written) bytes / Σ GPU time, GB/s.
    pub dram_total_gbps: Option<f64>,
}

/// The per-range result of a session.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregation {
    /// The rule of each metric, in metric-set order.
    pub rules: Vec<MetricRule>,
    /// The derived columns and their inputs.
    pub derived: Vec<DerivedMetric>,
    /// The root row first (only when kernels ran outside every range), then one row per range
    /// instance in push order.
    pub ranges: Vec<RangeRow>,
    /// Σ duration of every kernel with one, ns; in [`ProfilingMode::PerRange`] Σ of the
    /// measured top-level ranges. `None` when kernels ran and none had a time.
    ///
    /// [`ProfilingMode::PerRange`]: crate::model::ProfilingMode::PerRange
    pub total_gpu_time_ns: Option<u64>,
    /// Explanations of values left empty.
    pub warnings: Vec<String>,
}
