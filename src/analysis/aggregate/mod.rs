//! Aggregation: per-range rows from per-kernel rows, with the right rule per metric type.
//!
//! Layer 3 (the safe profiler). Takes the [`Correlation`] of a session (one [`KernelRow`]
//! per kernel) and the [`SessionTree`], and produces one [`RangeRow`] per range instance,
//! plus a root row (path [`ROOT_PATH`]) for kernels launched outside any range. Rows are
//! *inclusive*: a range's values cover its own kernels and those of every nested range, as a
//! profiler user reads "train_step took X"; `self_kernel_count` tells the two apart.
//!
//! How a metric combines over a range's kernels depends on what it is
//! ([`AggregationRule`], chosen by [`rule_for`]):
//!
//! - **Counters** ([`MetricKind::Counter`]) are summed. Kernels of a range run one after the
//!   other (the range profiler serializes them), so the range's count of bytes, cycles,
//!   instructions or nanoseconds is the sum of its kernels' counts. This holds for every
//!   rollup of a counter: `.sum` and `.avg` (the mean over units, a linear function of the
//!   per-unit counts) sum exactly; for `.max`/`.min` the sum of the per-kernel maxima
//!   (minima) is the accumulated count of each kernel's busiest (idlest) unit, an upper
//!   (lower) bound of the range-wide per-unit max (min) that CUPTI would report for the
//!   range as one block. Kernels that overlap on several streams would be double counted in
//!   time-like counters; the range profiler does not overlap them.
//! - **Rates gmprof can decompose** are recomputed from summed counters
//!   ([`AggregationRule::RatioOfSums`]): `X.per_second` when its base counter `X` was
//!   collected is `Σ X / Σ kernel time`, and the derived DRAM bandwidths are
//!   `Σ bytes / Σ kernel time` (bytes/ns = GB/s), with the kernel times of the kernel rows
//!   (`duration_ns`, see [`kernel_time_input`]).
//! - **Every other ratio or throughput** (percent of peak, per-instruction ratios) is
//!   duration-weighted ([`AggregationRule::DurationWeighted`]): `Σ(vᵢ·wᵢ) / Σ wᵢ` with
//!   `wᵢ` the window the kernel's counters were measured over, its counter range's
//!   `gpu__time_duration.sum` (`range_duration_ns`: the kernel itself in kernel_replay, the
//!   kernel plus the GPU's wait for its launch in per_kernel). That is the ratio's value
//!   over the ranges' measured time. A plain mean of ratios is never used: a 1 µs kernel at
//!   100% and a 3 µs kernel at 0% are 25% busy over the range, not 50%. For a rate
//!   `vᵢ = cᵢ/wᵢ` this equals `Σcᵢ/Σwᵢ` exactly. Without windows the value is left empty
//!   rather than guessed.
//! - In [`ProfilingMode::PerRange`] CUPTI measured each range as one block, so its values
//!   are used as measured ([`AggregationRule::MeasuredPerRange`]).
//!
//! A kernel without a value for a metric is left out of that metric's sums (numerator and
//! denominator alike); the range's `flagged_kernel_count` says when that happened.
//!
//! # Time and transfers
//!
//! `gpu_time_ns` is the *sum* of kernel durations, in every mode, with durations from the
//! mode's [`TimeSource`]: activity timestamps in trace, per_kernel and per_range,
//! `gpu__time_duration.sum` in kernel_replay. So a range's GPU time counts the time its
//! kernels ran, not the time the GPU waited for the CPU to launch them (in per_range,
//! CUPTI's measurement of the whole range, idle time included, stays in the
//! `gpu__time_duration.sum` metric column). Where activity timestamps are real, kernels
//! may overlap (several streams), so a range also gets `gpu_busy_ns`: the length of the
//! union of its kernels' `[start_ns, end_ns)` intervals (inclusive of nested ranges, across
//! streams and devices), the time at least one of its kernels was running. It is at most
//! `gpu_time_ns`, and smaller exactly when kernels overlapped. Kernel replay collapses
//! activity timestamps (start == end), so `gpu_busy_ns` is `None` there.
//!
//! Memcpy and memset rows ([`TransferRow`]) are attributed like kernels (the calling thread's
//! innermost range, the root row without a call) and summed, inclusive of nested ranges:
//! `transfer_count`, `transfer_bytes` (memcpy and memset together, also split into
//! `memcpy_bytes` and `memset_bytes`), `transfer_time_ns` (Σ durations) and
//! `transfer_gbps` = bytes / time (bytes per ns = GB/s, `None` when the time is 0). They do
//! not count as kernels. Untimed transfers (memsets under kernel replay, timing `api_call`)
//! count in `transfer_count`, the byte sums and `untimed_transfer_count`, but not in
//! `transfer_time_ns` and `transfer_gbps`, which are over timed transfers only:
//! `transfer_time_ns` is `None` when the range has transfers and none was timed, and
//! `transfer_gbps` divides the timed transfers' bytes by their time.
//!
//! # Files
//!
//! This `mod.rs` only declares the files and re-exports them (the crate names the items as
//! `analysis::aggregate::X`); no file imports it. Bottom up: `rules` (the rule of each
//! metric), `derived` (the DRAM bandwidth columns), `rows` ([`RangeRow`], [`Aggregation`]),
//! `sums` (the fold's running sums), and `fold` ([`aggregate`] itself).
//!
//! [`Correlation`]: crate::analysis::correlate::Correlation
//! [`KernelRow`]: crate::analysis::correlate::KernelRow
//! [`TimeSource`]: crate::analysis::correlate::TimeSource
//! [`TransferRow`]: crate::analysis::correlate::TransferRow
//! [`SessionTree`]: crate::model::session::SessionTree
//! [`ROOT_PATH`]: crate::model::session::ROOT_PATH
//! [`MetricKind::Counter`]: crate::model::MetricKind::Counter
//! [`ProfilingMode::PerRange`]: crate::model::ProfilingMode::PerRange

mod derived;
mod fold;
mod rows;
mod rules;
mod sums;
#[cfg(test)]
mod tests;

pub use self::derived::{DerivedMetric, DRAM_READ_GBPS, DRAM_SECTOR_BYTES, DRAM_TOTAL_GBPS, DRAM_WRITE_GBPS};
pub use self::fold::{aggregate, union_intervals, KernelMetricSums};
pub use self::rows::{Aggregation, RangeRow};
pub use self::rules::{
    kernel_time_input, metric_rules, rule_for, AggregationRule, MetricRule, KERNEL_DURATION_INPUT, PER_SECOND_SUFFIX,
};
