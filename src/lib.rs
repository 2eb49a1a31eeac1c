//! gmprof: per-range GPU hardware metrics for CUDA programs, driven by NVIDIA CUPTI.
//!
//! A program wraps regions (a training step, its forward, backward and optimizer) in
//! ranges; gmprof collects the kernels each range launched and their hardware counters and
//! reports per-range and per-kernel metrics as CSV, JSON, a summary table, a timeline and an
//! HTML report.
//!
//! # Layers
//! 1. [`sys`]: bindgen-generated FFI for the CUDA driver and CUPTI, loaded at run time.
//! 2. [`checked`]: a thin layer that maps every CUPTI/CUDA result to an [`Error`] and owns
//!    each CUPTI object in an RAII type with an explicit fallible close.
//! 3. The safe profiler, a pipeline of folders:
//!    [`ways_in`] → [`capture`] → [`analysis`] → [`report`], on a foundation of [`model`]
//!    (the plain records that cross from capture to analysis, and the range tree: the seam
//!    the CPU tests use) and [`error`]. Each folder's module doc says what it may import.
//!
//! The paths of earlier releases (`gmprof::correlate`, `gmprof::profiler`, ...) are kept as
//! re-exports of the modules' new homes.

pub mod analysis;
pub mod capture;
pub mod checked;
pub mod device_timers;
pub mod error;
pub mod model;
pub mod probe;
pub mod report;
pub mod sys;
pub mod ways_in;

pub use analysis::{aggregate, correlate};
pub use capture::{metrics, profiler};
pub use model::session;
pub use report::{stats, timeline, trace_check};
pub use ways_in::{capi, injection, launch};

pub use error::{Error, Result};
pub use model::ProfilingMode;
pub use profiler::{Profiler, ProfilerBuilder, RangeGuard, RangeScope};
pub use report::Report;
pub use ways_in::global::{finish, init, is_initialized, pop_range, push_range};
