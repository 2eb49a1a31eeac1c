//! gmprof: per-range GPU hardware metrics for CUDA programs, driven by NVIDIA CUPTI.
//!
//! A program wraps regions (a training step, its forward, backward and optimizer) in
//! ranges; gmprof collects the kernels each range launched and their hardware counters and
//! reports per-range and per-kernel metrics as CSV, JSON and a summary table.
//!
//! # Layers
//! 1. [`sys`]: bindgen-generated FFI for the CUDA driver and CUPTI, loaded at run time.
//! 2. [`checked`]: a thin layer that maps every CUPTI/CUDA result to an [`Error`] and owns
//!    each CUPTI object in an RAII type with an explicit fallible close.
//! 3. The safe profiler: [`session`] (range tree), [`correlate`] (launch ↔ activity ↔ counter
//!    joins), [`aggregate`] (per-metric-type rules), [`report`] (exporters) and the
//!    [`Profiler`] that drives capture.
//!
//! [`model`] holds the plain records that cross from capture to analysis: the seam CPU
//! tests use.

pub mod aggregate;
pub mod capi;
pub mod checked;
pub mod correlate;
pub mod error;
mod global;
mod hub;
pub mod injection;
pub mod launch;
pub mod metrics;
pub mod model;
pub mod profiler;
pub mod report;
pub mod session;
pub mod stats;
pub mod sys;
pub mod timeline;
pub mod trace_check;

pub use error::{Error, Result};
pub use global::{finish, init, is_initialized, pop_range, push_range};
pub use model::ProfilingMode;
pub use profiler::{Profiler, ProfilerBuilder, RangeGuard, RangeScope};
pub use report::Report;
