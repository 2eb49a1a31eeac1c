//! Ways in: how a program reaches the profiler.
//!
//! The top of the pipeline (`ways_in → capture → analysis → report`): the process-wide
//! functions ([`crate::push_range`] and friends, in `global`), the C ABI of libgmprof.so
//! ([`capi`], declared in `include/gmprof.h`), CUDA injection for unmodified programs
//! ([`injection`], NVTX ranges become gmprof ranges, started through [`inject_entry`]),
//! on-demand capture of a program that runs idle until asked ([`on_demand`]) and
//! `gmprof run`'s [`launch`]er.
//!
//! May import every stage below it. Nothing imports `ways_in` except the `gmprof` binary.
//!
//! Inside `ways_in`, imports point down, and no two files import each other through any
//! chain:
//! - at the top, the entry points: [`inject_entry`] and [`immediate_exit`] (into
//!   [`injection`]), [`launch`] (`gmprof run`) and [`capi`] (the C ABI);
//! - [`injection`] composes the injected library: [`contexts`], [`nvtx_stack`],
//!   [`injection_config`], [`injection_status`], [`outputs`], [`probe_run`] and
//!   [`on_demand`]'s injected side;
//! - [`on_demand`] sits below [`injection`] (and below [`capi`] and [`launch`]) and imports
//!   none of them;
//! - at the bottom, what several of them share, importing nothing above it:
//!   [`env_names`] (the `GMPROF_*` variable names), [`settings`] (yes/no variables, the
//!   checkpoint and signal settings), [`injection_config`], [`injection_status`]
//!   (`injection.json`, written by [`injection`] and read by [`processes`] and [`launch`]),
//!   [`outputs`], [`layout`], [`signals`], [`probe_run`], [`processes`], [`device_timers`],
//!   [`live_metrics`] (the live metrics' settings and the process's exporter) and `global`.

pub mod capi;
pub mod contexts;
pub mod device_timers;
pub mod env_names;
#[cfg(test)]
mod fault_injection;
pub(crate) mod global;
pub mod immediate_exit;
pub mod inject_entry;
pub mod injection;
pub mod injection_config;
pub mod injection_status;
pub mod launch;
pub mod layout;
pub mod live_metrics;
pub mod nvtx_stack;
pub mod on_demand;
pub mod outputs;
pub mod probe_run;
pub mod processes;
pub mod settings;
pub mod signals;
