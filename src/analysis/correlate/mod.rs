//! The correlator: joins launch records, kernel activity records and decoded counter ranges
//! into one [`KernelRow`] per kernel.
//!
//! Layer 3 (the safe profiler). Capture feeds three independent streams, in any order:
//! [`LaunchRecord`]s from the launch callback (which range, which counter cycle and ordinal),
//! [`KernelActivity`] records from CUPTI's activity buffers (name, geometry, stream), and
//! [`CounterRange`]s decoded from each cycle's counter image. [`Correlator::finish`] joins
//! them:
//!
//! - activity ↔ launch by correlation id (a hash map);
//! - counters ↔ launch by position in [`ProfilingMode::KernelReplay`] (counter range `i` of
//!   cycle `c` is launch ordinal `i` of cycle `c`, and its name must be `"i"`), by name in
//!   [`ProfilingMode::PerKernel`] (the name is the launch's correlation id), and by range in
//!   [`ProfilingMode::PerRange`] (the name is [`range_counter_name`]).
//!
//! Positional joins are where a silent bug would hide: one dropped counter range shifts every
//! later kernel's counters onto its neighbour. So every count and name is checked, and a
//! disagreement never shifts rows: the affected rows get a [`KernelStatus`] other than `ok`
//! and the correlation carries a warning saying what happened (also logged with
//! `tracing::warn!`). Nothing is dropped: activity records without a launch become rows of
//! their own, counter ranges without a launch are counted as orphans.
//!
//! Memory transfers (memcpy, memset) travel a fourth and fifth stream: [`TransferCall`]s from
//! the API callback (which thread and range) and [`TransferActivity`] records (kind, bytes,
//! GPU timestamps). They are joined by correlation id into [`TransferRow`]s, in time order
//! ([`Correlation::transfers`]). A record without a call is never dropped: when a graph launch
//! holds its correlation id (a memcpy or memset node of a CUDA graph) it goes to the graph
//! launch's range with status `graph_transfer`, otherwise to the root row with status
//! `unlaunched`.
//!
//! Direction inside the folder: this `mod.rs` only declares the files and re-exports them;
//! no file imports it. `rows` (the output types), `names`, `store` and `warnings` are the
//! bottom; `correlator` holds the collector's state on them; `build` (the row builder),
//! `call_stamps` (when calls were made and returned), `checkpoint`, `drain`
//! ([`Correlator::drain_complete`]) and `join` ([`Correlator::finish`]) build on `correlator`.
//!
//! May import `model` only (no other file of `analysis`, which imports it; the graph tests
//! also run [`aggregate`](crate::analysis::aggregate) on what they correlate).
//!
//! [`LaunchRecord`]: crate::model::LaunchRecord
//! [`KernelActivity`]: crate::model::KernelActivity
//! [`CounterRange`]: crate::model::CounterRange
//! [`TransferCall`]: crate::model::TransferCall
//! [`TransferActivity`]: crate::model::TransferActivity
//! [`ProfilingMode::KernelReplay`]: crate::model::ProfilingMode::KernelReplay
//! [`ProfilingMode::PerKernel`]: crate::model::ProfilingMode::PerKernel
//! [`ProfilingMode::PerRange`]: crate::model::ProfilingMode::PerRange

mod build;
mod call_stamps;
mod checkpoint;
mod correlator;
mod drain;
#[cfg(test)]
mod graph_tests;
mod join;
mod names;
mod rows;
mod store;
#[cfg(test)]
mod tests;
mod transfer_calls;
mod warnings;

pub use self::checkpoint::CheckpointPending;
pub use self::correlator::Correlator;
pub use self::drain::PendingByRange;
pub use self::names::{
    demangle_kernel_name, is_profiler_internal_kernel, parse_range_counter_name, range_counter_name,
};
pub use self::rows::*;
pub use self::store::CallStamps;
