//! On-demand capture: a program runs with gmprof injected and idle, and is profiled for a
//! few steps when asked, as often as asked, without a restart.
//!
//! Layer 3, a way in beside [`crate::ways_in::injection`]. `gmprof run --on-demand` starts the
//! program with gmprof injected but collecting nothing: CUPTI's subscriber hears context
//! creation and NVTX ranges (to count steps), and nothing else: no activity kinds, no
//! counters, not even the launch callbacks (the capture hub turns them off).
//! A capture is one [`crate::capture::profiler::Profiler`], started at a step boundary on the
//! program's thread and finished into `DIR/capture-K/<process>/` ([`captures`]), after which
//! the process is idle again. What asks for one:
//! - `gmprof capture TARGET` ([`client`]) over each process's Unix socket ([`server`],
//!   [`protocol`]): the same start step on every rank ([`steps`]);
//! - the capture signal, SIGUSR2 by default ([`trigger`]);
//! - a capture range: `cudaProfilerStart`/`Stop`, or an NVTX range (nsys's
//!   `--capture-range`);
//! - the library, the C ABI and Python ([`api`]).
//!
//! [`service`] holds a process's one capture at a time and decides when it starts and ends;
//! [`backend`] is its seam to CUPTI; [`injected`] is the glue the injected library calls.
//!
//! Where it sits: below [`crate::ways_in::injection`], which composes it (it calls
//! [`injected`]; nothing here imports `injection`), and below the C ABI
//! ([`crate::ways_in::capi`] calls [`api`]) and the launcher ([`crate::ways_in::launch`] takes
//! [`RunOptions`]). Of `ways_in` it imports only the shared modules at the bottom:
//! [`crate::ways_in::env_names`], [`crate::ways_in::settings`],
//! [`crate::ways_in::injection_config`], [`crate::ways_in::outputs`],
//! [`crate::ways_in::layout`], [`crate::ways_in::signals`], [`crate::ways_in::probe_run`] and
//! `global` (the process-wide session).
//!
//! Inside, imports point down: [`api`] goes through [`injected`], which composes
//! [`service`], [`server`], [`trigger`] and [`backend`]; [`client`] talks to [`server`];
//! [`service`] uses [`backend`], [`captures`] and [`steps`]; at the bottom, [`config`] (what
//! the environment says, shared by the files above) and [`run_options`] (`gmprof run`'s
//! flags), with [`protocol`] and [`steps`]. This file only declares the modules and
//! re-exports them: no file of the folder imports it.

pub mod api;
pub mod backend;
pub mod captures;
pub mod client;
pub mod config;
pub mod injected;
pub mod protocol;
pub mod run_options;
pub mod server;
pub mod service;
#[cfg(test)]
mod service_tests;
pub mod steps;
pub mod trigger;

pub use crate::ways_in::on_demand::config::{
    parse_range_end, parse_signal, CaptureRange, OnDemandConfig, DEFAULT_CAPTURE_SECONDS, DEFAULT_CAPTURE_STEPS,
};
pub use crate::ways_in::on_demand::run_options::RunOptions;

/// Environment variables of an on-demand injected gmprof (`gmprof run` sets them; defined in
/// [`crate::ways_in::env_names`]).
pub use crate::ways_in::env_names::on_demand as env;
