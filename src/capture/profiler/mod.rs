//! The profiler: drives CUPTI capture and hands the records to analysis.
//!
//! Layer 3. A [`Profiler`] attaches to the current CUDA context (or a device's primary
//! context) and joins the process-wide capture hub (the private `hub` module), which routes the driver
//! and runtime launch and transfer callbacks and the activity records of that context to it.
//! It keeps a [`SessionTree`] of the user's ranges. Each launch is recorded as it happens
//! (correlation id, thread, innermost open range, counter cycle and ordinal); activity
//! buffers are flushed at range boundaries; in counter modes the range profiler's images are
//! decoded and evaluated cycle by cycle. [`Profiler::finish`] correlates and aggregates into
//! a [`Report`](crate::report::Report).
//!
//! # Modes
//! - [`ProfilingMode::KernelReplay`]: CUPTI auto range + kernel replay; kernel time from
//!   `gpu__time_duration.sum` (activity records have start == end while it runs).
//! - [`ProfilingMode::PerKernel`], [`ProfilingMode::PerRange`]: CUPTI user ranges + user
//!   replay; kernel time from the activity records, whose timestamps are real there.
//! - [`ProfilingMode::Trace`]: activity and callbacks only, no counters; kernels, memcpys and
//!   memsets carry their real start and end. Range push and pop times come from
//!   `cuptiGetTimestamp`, the clock of the activity records, so the whole trace lives in one
//!   clock domain; (CUPTI, wall clock) pairs taken at start and finish convert it to wall
//!   time and measure the drift between the two.
//!
//! One profiler per CUDA context may run at a time (one per GPU); profilers may follow one
//! another in a process, and never see each other's records.
//!
//! # Kernel replay and the launch gate
//! In [`ProfilingMode::KernelReplay`] CUPTI numbers counter ranges "0", "1", ... in the order
//! kernels reach it. gmprof numbers launches in its launch callback; to make the two orders
//! the same when several threads launch, the callback holds a gate from the launch's entry
//! to its exit. Kernel replay serializes kernels anyway, so the gate costs nothing extra.
//!
//! # No kernel limit, and a bounded pause per counter cycle
//! The counter data image holds `ranges_per_cycle` ranges (sized from a memory budget). When
//! a cycle is full, the next launch first stops the profiler and decodes the image, as
//! NVIDIA's profiling_injection sample does; then it hands the decoded image to a background
//! evaluator thread, arms a spare image and starts again (double buffering, see the private
//! `evaluator` module). Host memory then grows with the results, not with the number of
//! kernels, and the launching thread does not wait for the evaluation of 2000 ranges. It
//! does wait for CUPTI's stop and start (about 11 ms plus 3 µs per range on an H100): each
//! such pause is recorded as a [`ProfilerPause`](crate::model::ProfilerPause) and shown in
//! the report. CUPTI also holds about 1 MB of host memory per range of the cycle, which is
//! what bounds the cycle's size.
//!
//! # Files
//!
//! This `mod.rs` only declares the folder's files and re-exports their public items; no file
//! imports it. The shared bottom is `state` ([`Profiler`], the `Shared` session, its records
//! and the counter and replay state), on `scope` ([`RangeScope`]), `recent` and `evaluator`.
//! On `state`: `builder` (configuration), `start` (a session's start), `ranges` (the range
//! API), `launch` (the launch path), `counters` (counter cycles), `replay` (user replay),
//! `finish` (the end of a capture), and `harness` (a session with no GPU behind it).
//!
//! [`SessionTree`]: crate::model::session::SessionTree
//! [`ProfilingMode::KernelReplay`]: crate::model::ProfilingMode::KernelReplay
//! [`ProfilingMode::PerKernel`]: crate::model::ProfilingMode::PerKernel
//! [`ProfilingMode::PerRange`]: crate::model::ProfilingMode::PerRange
//! [`ProfilingMode::Trace`]: crate::model::ProfilingMode::Trace

mod builder;
mod counters;
#[cfg(test)]
mod devices_tests;
mod evaluator;
mod finish;
#[cfg(test)]
mod finish_tests;
#[cfg(test)]
mod flight_tests;
#[cfg(any(test, feature = "bench-internals"))]
#[doc(hidden)]
pub mod harness;
#[cfg(test)]
mod harness_tests;
#[cfg(test)]
mod kineto_tests;
mod launch;
#[cfg(test)]
mod launch_tests;
#[cfg(test)]
mod live_tests;
mod ranges;
mod recent;
mod replay;
pub mod rotation;
#[cfg(test)]
mod rotation_tests;
mod scope;
mod start;
mod state;
#[cfg(test)]
mod step_trace_tests;
mod stream;
#[cfg(test)]
mod stream_modes_tests;
#[cfg(test)]
mod stream_pm_tests;
#[cfg(test)]
mod stream_readers_tests;
#[cfg(test)]
mod stream_tests;

pub use self::builder::*;
pub use self::finish::Teardown;
pub use self::launch::current_thread_id;
pub use self::scope::RangeScope;
pub use self::state::{Profiler, RangeGuard, StreamConfig};
pub use self::stream::StreamProgress;
