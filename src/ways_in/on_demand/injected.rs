//! The hooks the injected library calls: an on-demand start instead of a profiler.
//!
//! Layer 3, called from [`crate::ways_in::injection`], each a line or a few there:
//! [`configure`] when it reads its configuration, [`after_pin`] once the hub's subscriber is
//! pinned, [`attach`] at the first CUDA context (instead of starting a profiler),
//! [`on_context_destroyed`] when a context starts being destroyed, [`on_nvtx`] for every NVTX
//! push and pop, and [`on_run_end`] / [`checkpoint`] on its end and checkpoint paths.
//! Nothing here runs unless `GMPROF_ON_DEMAND=1` or `GMPROF_CAPTURE_RANGE` is set.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::capture::profiler::Teardown;
use crate::checked::callback::NvtxEvent;
use crate::checked::driver::Context;
use crate::error::{Error, Result};
use crate::model::RunEnd;
use crate::ways_in::injection_config::InjectionConfig;
use crate::ways_in::layout::{self, ProcessIdentity, Target};
use crate::ways_in::on_demand::backend::{ProfilerBackend, ProfilerDefaults};
use crate::ways_in::on_demand::config::{CaptureRange, OnDemandConfig};
use crate::ways_in::on_demand::server::{self, ControlSocket};
use crate::ways_in::on_demand::service::{ProcessInfo, Service};

static SERVICE: OnceLock<Arc<Service>> = OnceLock::new();
/// The context captures profile.
static CONTEXT: OnceLock<Context> = OnceLock::new();
/// The control socket and its registry link, removed at the end of the run.
static LEFT_BEHIND: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The process's service, when it started idle.
pub fn service() -> Option<&'static Arc<Service>> {
    SERVICE.get()
}

/// Whether this process started idle (on demand or with a capture range).
pub fn active() -> bool {
    SERVICE.get().is_some()
}

/// Reads the on-demand configuration from the environment; true when the process starts
/// idle. Probes need a run that profiles from its start, and are refused beside it.
pub fn configure() -> Result<bool> {
    let lookup = |k: &str| std::env::var(k).ok();
    let Some(config) = OnDemandConfig::from_lookup(&lookup)? else { return Ok(false) };
    if lookup(crate::ways_in::probe_run::PROBE_ENV).is_some_and(|p| !p.trim().is_empty()) {
        return Err(Error::InvalidConfig(
            "probes (GMPROF_PROBE) profile from the program's start: they do not run beside on-demand capture".into(),
        ));
    }
    let _ = SERVICE.set(Service::new(config));
    Ok(true)
}

/// Once the hub is pinned: the launch callbacks go off (an idle process pays for none), the
/// profiler API is heard for a `cudaProfilerApi` capture range, and the capture signal is
/// installed. A signal that cannot be installed is said, not fatal.
pub fn after_pin() -> Result<()> {
    let Some(service) = SERVICE.get() else { return Ok(()) };
    crate::capture::hub::set_launch_callbacks(false)?;
    let config = service.config();
    if config.capture_range == Some(CaptureRange::CudaProfilerApi) {
        crate::capture::hub::watch_profiler_api(Arc::new(|call| {
            if let Some(service) = SERVICE.get() {
                service.on_profiler_api(call);
            }
        }))?;
    }
    if let (true, Some(signal)) = (config.on_demand, config.signal) {
        let name = crate::ways_in::signals::name(signal);
        let installed = crate::ways_in::on_demand::trigger::install(signal, "--capture-signal", move || {
            if let Some(service) = SERVICE.get() {
                service.on_signal(&name);
            }
        });
        if let Err(e) = installed {
            eprintln!("gmprof: on demand: {e}; captures come from gmprof capture only");
        }
    }
    Ok(())
}

/// At the program's first CUDA context: claims the process's directory, attaches the service
/// to the context and, on demand, serves the control socket. Returns the directory (the
/// injected library writes `injection.json` there at the end).
pub fn attach(
    context: Context,
    target: &Target,
    identity: &ProcessIdentity,
    config: &InjectionConfig,
) -> Result<PathBuf> {
    let service = SERVICE.get().ok_or_else(|| Error::InvalidState("on-demand capture is not configured".into()))?;
    let process_dir = target.claim()?;
    let defaults = ProfilerDefaults {
        range_scope: config.range_scope,
        synchronize_on_pop: config.synchronize_on_pop,
        ranges_per_cycle: config.ranges_per_cycle,
        time_api_calls: config.time_api_calls,
    };
    let backend = ProfilerBackend::new(
        context,
        defaults,
        Arc::new(|| {
            if let Some(service) = SERVICE.get() {
                service.on_next_call();
            }
        }),
    )?;
    // Absolute: `gmprof capture` makes `capture-K` in it from another directory.
    let run_dir = layout::template_root(&config.output_dir);
    let run_dir = std::path::absolute(&run_dir).map_err(|e| Error::io(&run_dir, e))?;
    let _ = CONTEXT.set(context);
    service.attach(
        ProcessInfo {
            pid: identity.pid,
            host: identity.host.clone(),
            rank: identity.rank.as_ref().map(|r| r.value),
            process: identity.dir_name(),
            run_dir: run_dir.clone(),
        },
        Arc::new(backend),
    );
    // Live metrics while idle: the step count and step time the service hears.
    if let Some(live) = crate::ways_in::live_metrics::metrics(config.metrics_export.as_ref()) {
        if service.config().step_range.is_none() {
            eprintln!(
                "gmprof: live metrics while idle are the steps heard, and this run names no step range \
                 (--step-range NAME or --torch-steps): they export gmprof's health only"
            );
        }
        service.export_steps(live);
    }
    if service.config().on_demand {
        serve(service, &process_dir, identity.pid, &run_dir)?;
    }
    Ok(process_dir)
}

fn serve(service: &Arc<Service>, process_dir: &Path, pid: u32, run_dir: &Path) -> Result<()> {
    let socket = ControlSocket::bind(process_dir)?;
    let path = socket.path().to_owned();
    socket.serve(service.clone())?;
    let links = server::register(pid, &path);
    LEFT_BEHIND.lock().extend(std::iter::once(path).chain(links));
    let signal = service.config().signal.map(|s| format!(" or {}", kill_command(s, pid))).unwrap_or_default();
    eprintln!("gmprof: on demand, idle: capture with gmprof capture {} --steps N{signal}", run_dir.display());
    Ok(())
}

/// An NVTX push or pop; true when the on-demand service took it (the injected profiler then
/// does nothing with it).
pub fn on_nvtx(event: &NvtxEvent<'_>) -> bool {
    let Some(service) = SERVICE.get() else { return false };
    match event {
        NvtxEvent::Push(name) => service.on_push(name),
        NvtxEvent::Pop => service.on_pop(),
    }
    true
}

/// The end of the run: a capture under way is written (see
/// [`Service::end_of_run`]), and the control socket and its registry link go.
pub fn on_run_end(run_end: &RunEnd, teardown: Teardown) {
    let Some(service) = SERVICE.get() else { return };
    service.end_of_run(run_end, teardown);
    for path in LEFT_BEHIND.lock().drain(..) {
        let _ = std::fs::remove_file(&path);
    }
}

/// The profiled context starts being destroyed: a capture under way is written now (with
/// the context still usable), and none starts afterwards.
pub fn on_context_destroyed(context: Context) {
    if CONTEXT.get() == Some(&context) {
        on_run_end(&RunEnd::Finished { by: "context destroyed".into() }, Teardown::Release);
    }
}

/// The periodic checkpoint: `Some(true)` (keep ticking) when on demand, after writing a
/// checkpoint of a capture under way; `None` when not on demand.
pub fn checkpoint(reason: &str) -> Option<bool> {
    let service = SERVICE.get()?;
    service.checkpoint(reason);
    Some(true)
}

/// The shell command that sends `signal` to `pid`: `kill -USR2 4242`, or by number for a
/// signal without a name here (`kill -40 4242`).
fn kill_command(signal: i32, pid: u32) -> String {
    let name = crate::ways_in::signals::name(signal);
    match name.strip_prefix("SIG") {
        Some(short) => format!("kill -{short} {pid}"),
        None => format!("kill -{signal} {pid}"),
    }
}

#[cfg(test)]
mod kill_tests {
    #[test]
    fn the_printed_command_is_one_a_shell_runs() {
        assert_eq!(super::kill_command(libc::SIGUSR2, 4242), "kill -USR2 4242");
        assert_eq!(super::kill_command(40, 7), "kill -40 7");
    }
}
