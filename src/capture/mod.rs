//! Capture: everything that runs while the program runs.
//!
//! Stage 1 of the pipeline (`ways_in → capture → analysis → report`). The process-wide
//! `hub` owns the one CUPTI subscriber and the activity buffers and routes callbacks and
//! records to the per-context [`Profiler`](profiler::Profiler), which keeps the user's
//! ranges, records every launch, drives the range profiler's counter cycles and replay, and
//! at finish hands the records to [`crate::analysis`] and the result to [`crate::report`].
//! [`metrics`] checks metric names against the chip's catalog before capture starts.
//! [`pm_sampling`] runs CUPTI's PM sampler beside the capture, and [`pm_decode`] its decode
//! thread and evaluation pool.
//! [`last_launch`] is the hook that hands a launch's in-kernel timer buffer its correlation id.
//!
//! [`probe`] is the driver side of the PTX probe engine (`crate::probe`).
//! [`stream_capture`] follows the program's stream captures, during which gmprof makes no
//! allocation, copy or wait (one would invalidate the capture).
//!
//! May import: `checked`, `model`, `error`, `analysis`, `report`, `probe`. Never `ways_in`.

pub(crate) mod cubins;
pub(crate) mod hub;
pub mod last_launch;
pub mod metrics;
pub mod pc_sampling;
pub mod pm_decode;
pub mod pm_interval;
pub mod pm_sampling;
pub mod probe;
pub mod profiler;
pub mod sass_text;
pub mod stream_capture;
