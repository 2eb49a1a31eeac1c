//! Injection: gmprof inside an unmodified CUDA program.
//!
//! Layer 3. `gmprof run` names libgmprof.so in `CUDA_INJECTION64_PATH` and in
//! `NVTX_INJECTION64_PATH`, so the library is loaded by the program's first NVTX call or by
//! CUDA's initialization, whichever comes first, and starts there
//! ([`crate::ways_in::inject_entry`]; NVTX calls are handed on to libcupti, which raises
//! CUPTI's NVTX callbacks). gmprof then:
//! - pins the capture hub's CUPTI subscriber and listens to context creation and to NVTX
//!   range pushes and pops, from the program's first NVTX call on;
//! - starts a [`Profiler`] on every context the program creates (every GPU it uses, and
//!   contexts created late), inside the creation callback, before the program can launch
//!   anything on it; ranges the creating thread has open (around model setup, or before
//!   CUDA was initialized) are adopted ([`crate::ways_in::contexts`]);
//! - turns default-domain NVTX ranges (`nvtxRangePushA/W/Ex`, `nvtxRangePop`, and so
//!   `torch.cuda.nvtx.range_push/pop`) into gmprof ranges, optionally only those under a
//!   named range ([`InjectionConfig::nvtx_include`]);
//! - finishes a context's profiler when that context starts being destroyed, and writes the
//!   process's outputs (every context's report, combined by [`crate::report::devices`])
//!   when the last one is, or at the latest when the process exits (an `atexit` handler),
//!   closing ranges the program left open; and writes `injection.json`, which says what
//!   happened even when nothing was profiled (no CUDA context, a start failure) and what
//!   started gmprof.
//!
//! Configuration comes from the environment ([`InjectionConfig::from_env`]). A context
//! whose profiler cannot start (a busy or unsupported device) is counted and named, with
//! why, on the summary's first line and in `injection.json`; the others are measured.
//! NVTX domain ranges (`nvtxDomainRangePushEx`) and start/end ranges are not followed. With
//! `NVTX_INJECTION64_PATH` naming libcupti instead (set by hand), gmprof starts with CUDA
//! and does not hear NVTX ranges pushed before that; their pops are counted as unbalanced,
//! and the warning says so.

use std::cell::RefCell;
use std::ffi::c_int;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::capture::profiler::Profiler;
use crate::capture::profiler::{StreamConfig, Teardown};
use crate::checked::callback::{ContextEvent, NvtxEvent};
use crate::checked::driver::Context;
use crate::checked::Cupti;
use crate::error::{Error, Result};
use crate::model::RunEnd;
use crate::report::stream::StreamSettings;
use crate::ways_in::contexts::ContextProfilers;
pub use crate::ways_in::injection_config::{env, InjectionConfig};
pub use crate::ways_in::injection_status::{InjectionStatus, STATUS_FILE};
use crate::ways_in::layout::{self, ProcessIdentity, Target};
pub use crate::ways_in::nvtx_stack::{NvtxRangeStack, PopAction};
use crate::ways_in::outputs::{self, Outputs};
use crate::ways_in::settings::StreamOptions;
pub use crate::ways_in::settings::{DEFAULT_CHECKPOINT_SECS, DEFAULT_SIGNAL_TIMEOUT_SECS};
use crate::ways_in::signals::{self, Request};

/// The injected profiler's process-wide state.
struct Injected {
    config: InjectionConfig,
    /// The process that loaded gmprof (`pid`: a forked child inherits this state and its exit
    /// and signal handlers, and must not write over its parent's outputs).
    identity: ProcessIdentity,
    /// Where this process writes, claimed when the first context is profiled.
    target: Target,
    /// Whether `gmprof run` started the program: it prints the end-of-run account (the
    /// summary, one line per process) once the program ends, so this process does not.
    under_launcher: bool,
    /// What started gmprof (set once the hub is pinned).
    started_by: Mutex<Option<Start>>,
    /// One profiler per CUDA context.
    profilers: ContextProfilers,
    contexts_created: AtomicU64,
    nvtx_pushes: AtomicU64,
    nvtx_followed: AtomicU64,
    nvtx_unbalanced: AtomicU64,
    /// The contexts the finished report names as not profiled, for injection.json.
    unprofiled: Mutex<Vec<crate::model::UnprofiledContext>>,
    error: Mutex<Option<String>>,
    profiled: AtomicBool,
    done: AtomicBool,
    outputs: OnceLock<Outputs>,
    exit_hooks: std::sync::Once,
    finishing: Mutex<()>,
}

static INJECTED: OnceLock<Injected> = OnceLock::new();

thread_local! {
    static NVTX_STACK: RefCell<NvtxRangeStack> = RefCell::new(NvtxRangeStack::default());
}

fn note_error(state: &Injected, message: String) {
    eprintln!("gmprof: {message}");
    state.error.lock().get_or_insert(message);
}

fn on_context(state: &'static Injected, event: ContextEvent) {
    match event {
        ContextEvent::Created(ctx) => {
            tracing::debug!(?ctx, "gmprof: context created");
            state.contexts_created.fetch_add(1, Ordering::AcqRel);
            if state.done.load(Ordering::Acquire) {
                return;
            }
            if crate::ways_in::on_demand::injected::active() {
                // Idle until a capture: no profiler now (crate::ways_in::on_demand). Captures
                // profile the process's first context.
                if state.outputs.get().is_some() {
                    return;
                }
                match crate::ways_in::on_demand::injected::attach(ctx, &state.target, &state.identity, &state.config) {
                    Ok(dir) => {
                        let _ = state.outputs.set(Outputs::new(dir));
                        install_exit_hooks(state);
                    }
                    Err(e) => note_error(state, format!("could not start on-demand capture: {e}")),
                }
                return;
            }
            if !state.profilers.has_room() {
                let why = format!(
                    "gmprof profiles at most {} contexts per process",
                    crate::ways_in::contexts::MAX_PROFILED_CONTEXTS
                );
                return state.profilers.refuse(None, why);
            }
            if state.outputs.get().is_none() {
                match state.target.claim() {
                    Ok(dir) => {
                        let _ = state.outputs.set(Outputs::new(dir));
                    }
                    Err(e) => return note_error(state, format!("could not create the output directory: {e}")),
                }
            }
            match build_profiler(&state.config, ctx) {
                Ok(profiler) => {
                    let device = profiler.device_id();
                    let slot = state.profilers.add(ctx, profiler.clone());
                    if let (Some(options), Some(outputs)) = (&state.config.stream, state.outputs.get()) {
                        let live = crate::ways_in::live_metrics::feed(state.config.metrics_export.as_ref(), device);
                        start_streaming(&profiler, slot, options, outputs, live);
                    }
                    tracing::debug!(slot, ?device, "gmprof: profiler started on a context");
                    if slot == 1 && profiler.mode() == crate::model::ProfilingMode::KernelReplay {
                        // Kernel replay makes each launch wait for its kernel; a collective's
                        // kernel waits for its peer on the other GPU, which the same thread
                        // launches next (nn.DataParallel's NCCL broadcast hung so on two H100s).
                        eprintln!(
                            "gmprof: kernel_replay on several GPUs of one process: a collective over them (NCCL, \
                             nn.DataParallel) hangs under kernel replay; use --mode per_kernel for such programs"
                        );
                    }
                    // Ranges this thread has open are adopted, so a range around model setup
                    // (or the step that first touched this GPU) holds its first kernels.
                    let adopted = NVTX_STACK.with(|s| s.borrow_mut().adopt_open(slot, &state.config.nvtx_include));
                    for name in adopted {
                        if profiler.push_range(&name).is_ok() && slot == 0 {
                            state.nvtx_followed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    state.profiled.store(true, Ordering::Release);
                    install_exit_hooks(state);
                }
                Err(e) => {
                    let device = crate::checked::Cupti::load()
                        .ok()
                        .and_then(|c| crate::checked::target::device_ordinal(&c, ctx).ok());
                    let which = device.map_or_else(|| "a CUDA context".to_owned(), |d| format!("device {d}"));
                    eprintln!("gmprof: could not start profiling {which}: {e}; its kernels are counted, not measured");
                    if !state.profilers.any() {
                        state.error.lock().get_or_insert(format!("could not start profiling {which}: {e}"));
                    }
                    state.profilers.refuse(device, e.to_string());
                    // The status (with this error) is written at exit, so `gmprof run` says
                    // why there is no report instead of "no process created a CUDA context".
                    install_exit_hooks(state);
                }
            }
        }
        ContextEvent::DestroyStarting(ctx) => {
            crate::ways_in::on_demand::injected::on_context_destroyed(ctx);
            if !state.profilers.profiles(ctx) || state.done.load(Ordering::Acquire) {
                return;
            }
            let run_end = RunEnd::Finished { by: "context destroyed".into() };
            match state.profilers.finish_context(ctx, run_end.clone()) {
                Ok(0) => finish(state, run_end, Teardown::Release),
                Ok(_) => tracing::debug!("gmprof: a context's profiler finished; the others go on"),
                Err(e) => note_error(state, format!("could not finish profiling a destroyed context: {e}")),
            }
        }
    }
}

/// A profiler for `ctx` as the environment asks.
fn build_profiler(config: &InjectionConfig, ctx: Context) -> Result<Profiler> {
    let mut builder = Profiler::builder().context(ctx).range_scope(config.range_scope);
    if let Some(mode) = config.mode {
        builder = builder.mode(mode);
    }
    if let Some(metrics) = &config.metrics {
        builder = builder.metrics(metrics.iter().cloned());
    }
    if let Some(n) = config.ranges_per_cycle {
        builder = builder.max_ranges_per_cycle(n);
    }
    if let Some((pattern, instances)) = &config.iteration_replay {
        builder = builder.iteration_replay(pattern.clone(), *instances);
    }
    builder = builder
        .rotate(config.rotate)
        .rotation_cycles(config.rotation_cycles)
        .rotation_step(config.rotation_step.clone());
    builder = builder.pm_sampling(config.pm_sampling.clone());
    builder = builder.pc_sampling(config.pc_sampling.clone());
    builder = builder.time_api_calls(config.time_api_calls);
    // A sampler whose CUPTI calls fail is left out (the report says why): the program is
    // still measured.
    builder = builder.optional_samplers(true);
    // Range boundaries arrive inside CUPTI's NVTX callbacks, where flushing the activity
    // buffers crashed CUPTI 13.0 (seen on an H200); the report does not depend on when
    // records arrive, so injected sessions never flush there.
    builder = builder.synchronize_on_pop(config.synchronize_on_pop).flush_on_range_boundaries(false);
    builder.build()
}

fn on_nvtx(state: &Injected, event: NvtxEvent<'_>) {
    if crate::ways_in::on_demand::injected::on_nvtx(&event) {
        return;
    }
    match event {
        NvtxEvent::Push(name) => {
            let (mask, live) = state.profilers.live();
            tracing::trace!(%name, live = live.len(), "gmprof: NVTX push");
            crate::ways_in::probe_run::on_push(&name);
            state.nvtx_pushes.fetch_add(1, Ordering::Relaxed);
            NVTX_STACK.with(|s| {
                let mut stack = s.borrow_mut();
                let send = stack.push(&name, mask, &state.config.nvtx_include);
                let mut failed = 0;
                for (slot, profiler) in live.iter().filter(|(slot, _)| send & (1 << slot) != 0) {
                    if let Err(e) = profiler.push_range(&name) {
                        tracing::debug!("gmprof: NVTX push on profiler {slot}: {e}");
                        failed |= 1 << slot;
                    }
                }
                stack.forward_failed(failed);
                if send & !failed != 0 {
                    state.nvtx_followed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        NvtxEvent::Pop => {
            crate::ways_in::probe_run::on_pop();
            let action = NVTX_STACK.with(|s| s.borrow_mut().pop());
            match action {
                PopAction::Forward(mask) => {
                    for profiler in state.profilers.in_mask(mask) {
                        if let Err(e) = profiler.pop_range() {
                            tracing::warn!("gmprof: NVTX pop: {e}");
                        }
                    }
                }
                PopAction::Ignore => {}
                PopAction::Unbalanced => {
                    state.nvtx_unbalanced.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Finishes the profiler (once), writes the outputs and the status file. The outputs are
/// written before CUPTI is torn down; `teardown` says whether it is at all.
fn finish(state: &Injected, run_end: RunEnd, teardown: Teardown) {
    // A second caller (the exit handler while a signal's finish runs) waits for the first,
    // so the process does not exit in the middle of writing.
    let _finishing = state.finishing.lock();
    if std::process::id() != state.identity.pid || state.done.swap(true, Ordering::AcqRel) {
        return;
    }
    tracing::debug!(?run_end, "gmprof: finishing");
    crate::ways_in::on_demand::injected::on_run_end(&run_end, teardown);
    let mut outputs_written = false;
    let mut probes_joined = false;
    let contexts = state.contexts_created.load(Ordering::Acquire);
    let ended = run_end.describe();
    // How the run ended as the report records it: with the steps of finishing that failed.
    let mut recorded_end = run_end.clone();
    if !state.profilers.any() {
        // An on-demand run (its captures write their own outputs): the OTLP push's last.
        crate::ways_in::live_metrics::at_run_end(None);
    }
    if state.profilers.any() {
        let (written, errors) = state.profilers.finish_all(run_end, teardown, |report| {
            if let Some(end) = &report.meta.run_end {
                recorded_end = end.clone();
            }
            state.unprofiled.lock().clone_from(&report.meta.unprofiled_contexts);
            let unbalanced = state.nvtx_unbalanced.load(Ordering::Relaxed);
            if unbalanced > 0 {
                report.meta.warnings.push(unbalanced_warning(unbalanced, *state.started_by.lock()));
            }
            probes_joined = crate::ways_in::probe_run::attach(report);
            // The last drain is published: the OTLP push's last one, and its failures said.
            crate::ways_in::live_metrics::at_run_end(Some(report));
            // The CUDA error that failed the context and the kernels in flight, and the
            // CUPTI and driver calls that failed, said once: here, or by `gmprof run` in the
            // summary it prints.
            if !state.under_launcher {
                let lines =
                    [crate::report::summary::ending_line(report), crate::report::summary::failed_calls_line(report)];
                for line in lines.into_iter().flatten() {
                    eprintln!("gmprof: {line}");
                }
            }
            let Some(outputs) = state.outputs.get() else { return };
            match outputs.write_final(report) {
                Ok(()) => {
                    outputs_written = true;
                    let devices = match report.meta.devices.len() {
                        0 | 1 => String::new(),
                        n => format!(", {n} GPUs"),
                    };
                    let note = state.config.stream.as_ref().and_then(|o| {
                        o.unstreamed_note(report.meta.mode, report.meta.kernel_count, report.streamed.is_some())
                    });
                    if let Some(note) = note {
                        eprintln!("gmprof: {note}");
                    }
                    match &report.streamed {
                        Some(streamed) => eprintln!(
                            "gmprof: wrote {} ({} ranges, {} kernels{devices} streamed to part files past the row \
                             limit of {}; whole-file row tables not written; {ended})",
                            outputs.dir().display(),
                            streamed.ranges,
                            streamed.kernels,
                            streamed.row_limit
                        ),
                        None => eprintln!(
                            "gmprof: wrote {} ({} ranges, {} kernels{devices}; {ended})",
                            outputs.dir().display(),
                            report.ranges.len(),
                            report.kernels.len()
                        ),
                    }
                }
                Err(e) => note_error(state, format!("could not write the outputs: {e}")),
            }
        });
        for e in &errors {
            note_error(state, format!("could not finish profiling: {e}"));
        }
        if !written {
            // The last checkpoint, if any, is what is left; the status says so.
            if state.outputs.get().is_some_and(|o| o.checkpoints() > 0) {
                note_error(state, "the outputs are the last checkpoint".into());
            }
        }
    } else if contexts == 0 {
        eprintln!("gmprof: the program created no CUDA context; nothing was profiled");
    } else {
        // No profiler started: what the hub heard of each context (its kernel launches) is
        // what is known of them, with why they were not profiled.
        let refused = state.profilers.refused();
        let mut heard = crate::capture::hub::unprofiled_contexts(0);
        for c in &mut heard {
            let why = refused.iter().find(|r| r.device_id == c.device_id).or(refused.first());
            c.why = c.why.take().or_else(|| why.map(|r| r.why.clone()));
        }
        *state.unprofiled.lock() = heard;
    }
    if let Some(outputs) = state.outputs.get() {
        match crate::ways_in::probe_run::write_outputs(outputs.dir(), probes_joined && outputs_written) {
            Ok(Some((probed, not))) => {
                eprintln!("gmprof: probes: {probed} kernel variant(s) probed, {not} not (probe_kernels.csv)")
            }
            Ok(None) => {}
            Err(e) => note_error(state, format!("could not write the probe outputs: {e}")),
        }
    }
    write_status(state, Some(recorded_end), outputs_written);
}

/// Writes injection.json into the process's directory. A process that profiled nothing and
/// met no error (a launcher, a data-loader worker) writes nothing.
fn write_status(state: &Injected, run_end: Option<RunEnd>, outputs_written: bool) {
    let checkpoints = state.outputs.get().map_or(0, Outputs::checkpoints);
    let error = state.error.lock().clone();
    let dir = match state.outputs.get() {
        Some(outputs) => outputs.dir().to_owned(),
        // Claimed once: a second write goes to the same directory.
        None if error.is_some() => match state.target.claim() {
            Ok(dir) => state.outputs.get_or_init(|| Outputs::new(dir)).dir().to_owned(),
            Err(e) => return eprintln!("gmprof: could not write {STATUS_FILE}: {e}"),
        },
        None => return,
    };
    // Every error in the status was printed by `note_error` when it happened.
    let error_printed_to = error.as_ref().and_then(|_| crate::ways_in::injection_status::stderr_identity());
    let status = InjectionStatus {
        error_printed_to,
        pid: std::process::id(),
        command: std::env::args().collect(),
        mode: state.config.mode.map(|m| m.as_str().to_owned()),
        contexts_created: state.contexts_created.load(Ordering::Acquire),
        unprofiled_contexts: state.unprofiled.lock().clone(),
        profiled: state.profiled.load(Ordering::Acquire),
        contexts_profiled: state.profilers.count() as u64,
        error,
        finished_by: run_end.as_ref().map(RunEnd::describe),
        outputs_written: outputs_written || checkpoints > 0,
        nvtx_pushes: state.nvtx_pushes.load(Ordering::Relaxed),
        nvtx_ranges_followed: state.nvtx_followed.load(Ordering::Relaxed),
        nvtx_unbalanced_pops: state.nvtx_unbalanced.load(Ordering::Relaxed),
        started_by: state.started_by.lock().map(|s| s.describe().to_owned()),
        run_end,
        checkpoints_written: checkpoints,
        host: Some(state.identity.host.clone()),
        rank: state.identity.rank.as_ref().map(|r| r.value),
        rank_variable: state.identity.rank.as_ref().map(|r| r.variable.to_owned()),
    };
    if let Err(e) = status.write(&dir) {
        eprintln!("gmprof: could not write {STATUS_FILE}: {e}");
    }
}

/// Writes a checkpoint of the running profiler (nothing once it has finished).
fn checkpoint(state: &Injected, reason: &str) -> bool {
    if state.done.load(Ordering::Acquire) || std::process::id() != state.identity.pid {
        return false;
    }
    if let Some(go_on) = crate::ways_in::on_demand::injected::checkpoint(reason) {
        return go_on;
    }
    let (_, live) = state.profilers.live();
    if live.iter().any(|(_, p)| p.is_streaming()) {
        // Past the row limit the rows are in the part files, not in the session: a
        // checkpoint closes the open segments, so what is streamed is in complete files.
        for (_, profiler) in &live {
            if let Err(e) = profiler.close_stream_segments() {
                tracing::warn!("gmprof: closing the streamed segments at a checkpoint failed: {e}");
            }
        }
        return !state.done.load(Ordering::Acquire);
    }
    let Some(outputs) = state.outputs.get() else { return false };
    let written = state.profilers.checkpoint(reason).and_then(|report| match report {
        Some(report) => Ok(outputs.write_checkpoint_report(&report)?.then(|| report.meta.run_end.clone()).flatten()),
        None => Ok(None),
    });
    match written {
        Ok(Some(run_end)) => write_status(state, Some(run_end), false),
        Ok(None) => {}
        Err(e) => tracing::warn!("gmprof: checkpoint failed: {e}"),
    }
    !state.done.load(Ordering::Acquire)
}

/// Streams `profiler`'s rows (slot `slot`) into `dir` (the first context's) or a
/// `context-N` directory in it, past the row limit of `options` (from the start when `live`
/// metrics are exported).
fn start_streaming(
    profiler: &Profiler,
    slot: u32,
    options: &StreamOptions,
    outputs: &Outputs,
    live: Option<crate::report::live::LiveFeed>,
) {
    let dir = outputs.dir();
    let dir = if slot == 0 { dir.to_owned() } else { dir.join(format!("context-{slot}")) };
    let live_asked = live.is_some();
    let settings = StreamSettings {
        flight: options.flight.clone(),
        release_memory: options.release_memory,
        release_every: options.release_every,
        live,
        window_trace: outputs.trace_options().clone(),
        pm_kernel_rows: options.pm_kernel_rows,
        ..StreamSettings::default()
    };
    let config = StreamConfig { dir, row_limit: options.row_limit, settings };
    if !options.asked && profiler.mode() != crate::model::ProfilingMode::Trace {
        // On by default in trace mode only; the other modes stream when asked (the finish
        // notes it when the run passes the row limit).
        return;
    }
    if let Err(e) = profiler.stream_into(config) {
        let asked = if options.flight.is_some() {
            format!("the flight recorder ({} or {}) is asked for", env::SLOW_STEP, env::GROUP_JUMP)
        } else if live_asked {
            format!(
                "live metrics ({} or {}) are asked for (they export no values of this run)",
                env::METRICS_PORT,
                env::OTLP_ENDPOINT
            )
        } else {
            format!("{} is set", env::STREAM)
        };
        let windows = if options.flight.is_some() { ", and no flight-recorder window" } else { "" };
        eprintln!("gmprof: {asked} but {e}; the whole-file outputs are written{windows}");
    }
}

/// One streaming drain of every live profiler (the `gmprof-stream` thread's tick).
fn stream_tick(state: &Injected) -> bool {
    if state.done.load(Ordering::Acquire) || std::process::id() != state.identity.pid {
        return false;
    }
    let (_, live) = state.profilers.live();
    for (_, profiler) in live {
        // A panic in a drain ends the streaming thread, not the program; the finish still
        // ends the stream.
        match catch_unwind(std::panic::AssertUnwindSafe(|| profiler.stream_tick())) {
            Ok(Ok(progress)) => tracing::trace!(?progress, "gmprof: streamed drain"),
            // Finishing, or a flush that failed: the next tick or the finish drains.
            Ok(Err(e)) => tracing::debug!("gmprof: a streamed drain was skipped: {e}"),
            Err(_) => {
                tracing::warn!("gmprof: an internal error stopped the streamed drains; the finish writes the rest");
                return false;
            }
        }
    }
    !state.done.load(Ordering::Acquire)
}

/// Once a profiler runs: the exit handler, the checkpoint thread and the signal handlers.
///
/// The exit handler is registered here, not when the library is loaded: atexit handlers run
/// in reverse order of registration, and CUDA and CUPTI register theirs while CUDA starts
/// and the profiler attaches. Registered earlier, gmprof's ran after CUPTI's own teardown and
/// crashed in its final activity flush (CUDA 13.0, kernel replay, a C program).
fn install_exit_hooks(state: &'static Injected) {
    state.exit_hooks.call_once(|| {
        // SAFETY: `at_exit` is a plain function that never unwinds (catch_unwind inside).
        if unsafe { atexit(at_exit) } != 0 {
            tracing::warn!(
                "gmprof: atexit registration failed; outputs are written only when the context is destroyed"
            );
        }
        if let Some(every) = state.config.checkpoint_every {
            outputs::spawn_checkpoints(every, move || checkpoint(state, "periodic"));
        }
        if let Some(options) = &state.config.stream {
            outputs::spawn_paced("gmprof-stream", options.every, move || stream_tick(state));
            if let Some(signal) = options.flight_signal {
                let name = signals::name(signal);
                let why = format!("{name} received");
                let installed = crate::ways_in::on_demand::trigger::install(signal, env::FLIGHT_SIGNAL, move || {
                    for (_, profiler) in state.profilers.live().1 {
                        if !profiler.request_flight_window(&why) {
                            tracing::info!("gmprof: {why}, but the run has not streamed yet: no window");
                        }
                    }
                });
                if let Err(e) = installed {
                    eprintln!("gmprof: {e}; the flight recorder's windows come from its rules only");
                }
            }
        }
        if state.config.handle_signals {
            let installed = signals::install(state.config.signal_timeout, move |request| match request {
                Request::Final(signal) => {
                    finish(state, RunEnd::Signal { signal, name: signals::name(signal) }, Teardown::Skip)
                }
                Request::Checkpoint(signal) => {
                    let why = format!("{} received; the program's own handler ran", signals::name(signal));
                    // The program may end soon: the flight recorder's ring is worth a window.
                    for (_, profiler) in state.profilers.live().1 {
                        profiler.request_flight_window(&why);
                    }
                    checkpoint(state, &why);
                }
            });
            if let Err(e) = installed {
                tracing::warn!("gmprof: {e}; outputs are written at exit only");
            }
        }
    });
}

/// The process is ending through `_exit` ([`crate::ways_in::immediate_exit`]): finish and
/// write as the exit handler does, when this process profiles.
pub(crate) fn before_immediate_exit() {
    let Some(state) = INJECTED.get() else { return };
    if std::process::id() != state.identity.pid || state.done.load(Ordering::Acquire) || !state.profilers.any() {
        return;
    }
    finish_on_a_fresh_thread("process _exit");
}

extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if INJECTED.get().is_some() {
            finish_on_a_fresh_thread("process exit");
        }
    });
}

/// Finishes (ended `by`) on a thread of its own and waits for it. glibc destroys the exiting
/// thread's thread-locals before it runs atexit handlers, and finishing touches thread-locals
/// (gmprof's, tracing's, parking_lot's): done on that thread it panicked and then crashed
/// (seen with a statically linked cudart). A fresh thread has fresh thread-locals, whatever
/// the calling thread holds.
fn finish_on_a_fresh_thread(by: &'static str) {
    let worker = std::thread::Builder::new().name("gmprof-exit".into()).spawn(move || {
        if let Some(state) = INJECTED.get() {
            finish(state, RunEnd::Finished { by: by.into() }, Teardown::Skip);
        }
    });
    match worker {
        Ok(handle) => {
            let _ = handle.join();
        }
        Err(_) => eprintln!("gmprof: could not start a thread to write the outputs at {by}"),
    }
}

extern "C" {
    fn atexit(callback: extern "C" fn()) -> c_int;
}

/// What started the injected gmprof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// The program's first NVTX call: `NVTX_INJECTION64_PATH` names libgmprof.so, which NVTX
    /// loads then, often before the program initializes CUDA.
    Nvtx,
    /// CUDA's initialization: the driver loads libgmprof.so (`CUDA_INJECTION64_PATH`).
    Cuda,
}

impl Start {
    /// In words, as `injection.json` records it.
    pub fn describe(self) -> &'static str {
        match self {
            Start::Nvtx => "first NVTX call",
            Start::Cuda => "CUDA initialization",
        }
    }
}

/// Why a start failed, and whether a later start may try again (nothing was left set up that
/// a second attempt would trip over).
#[derive(Debug)]
pub(crate) struct StartFailure {
    pub(crate) error: Error,
    pub(crate) retry: bool,
}

/// The warning for pops with no push on their thread. When gmprof started with CUDA, NVTX
/// ranges pushed before that were not heard, so the warning says how to hear them.
pub(crate) fn unbalanced_warning(pops: u64, started_by: Option<Start>) -> String {
    match started_by {
        Some(Start::Nvtx) => format!("{pops} NVTX pop(s) had no matching push"),
        _ => format!(
            "{pops} NVTX pop(s) had no matching push (gmprof started with CUDA and did not hear NVTX \
             ranges pushed before it; with NVTX_INJECTION64_PATH naming libgmprof.so, as `gmprof run` \
             sets it, it hears them from the first)"
        ),
    }
}

/// Starts the injected profiler: reads the configuration, loads CUPTI and pins the capture
/// hub's subscriber (context creation, NVTX ranges). Runs once, from [`Start::Nvtx`] or
/// [`Start::Cuda`]; `crate::ways_in::inject_entry` serializes the calls.
pub(crate) fn initialize(start: Start) -> std::result::Result<(), StartFailure> {
    let retry = |error| StartFailure { error, retry: true };
    // The host program has no tracing subscriber of gmprof's; GMPROF_LOG=debug gives one.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("GMPROF_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    }
    let config = InjectionConfig::from_env().map_err(retry)?;
    crate::ways_in::on_demand::injected::configure().map_err(retry)?;
    tracing::debug!(?config, ?start, "gmprof: injected");
    let lookup = |k: &str| std::env::var(k).ok();
    let identity = ProcessIdentity::current(&lookup);
    let launcher = lookup(layout::LAUNCHER_PID_ENV).and_then(|v| v.trim().parse::<u32>().ok());
    let target = Target::resolve(&config.output_dir, &identity, launcher, &lookup).map_err(retry)?;
    let cupti = Cupti::load().map_err(retry)?;
    // Set before the hub is pinned, so no event finds it missing; a second attempt after a
    // failed pin keeps the first (the same environment gives the same state).
    let state = INJECTED.get_or_init(|| Injected {
        config,
        identity,
        target,
        under_launcher: launcher.is_some(),
        started_by: Mutex::new(None),
        profilers: ContextProfilers::default(),
        contexts_created: AtomicU64::new(0),
        nvtx_pushes: AtomicU64::new(0),
        nvtx_followed: AtomicU64::new(0),
        nvtx_unbalanced: AtomicU64::new(0),
        unprofiled: Mutex::new(Vec::new()),
        error: Mutex::new(None),
        profiled: AtomicBool::new(false),
        done: AtomicBool::new(false),
        outputs: OnceLock::new(),
        exit_hooks: std::sync::Once::new(),
        finishing: Mutex::new(()),
    });
    // A failed pin leaves no registration behind (see hub::pin), so it may be tried again.
    crate::capture::hub::pin(
        &cupti,
        Arc::new(|event| {
            if let Some(state) = INJECTED.get() {
                on_nvtx(state, event);
            }
        }),
        Arc::new(|event| {
            if let Some(state) = INJECTED.get() {
                on_context(state, event);
            }
        }),
    )
    .map_err(retry)?;
    *state.started_by.lock() = Some(start);
    let final_failure = |error| StartFailure { error, retry: false };
    crate::ways_in::on_demand::injected::after_pin().map_err(final_failure)?;
    if crate::ways_in::probe_run::install_from_env().map_err(final_failure)? {
        eprintln!("gmprof: probing kernels loaded as PTX ({})", std::env::var("GMPROF_PROBE").unwrap_or_default());
    }
    if start == Start::Cuda && std::env::var_os("NVTX_INJECTION64_PATH").is_none() {
        eprintln!(
            "gmprof: NVTX_INJECTION64_PATH is not set, so NVTX ranges will not reach gmprof; \
             use `gmprof run` or set it to libgmprof.so"
        );
    }
    Ok(())
}

/// Reports a start that failed for good: prints why and writes `injection.json` saying so.
pub(crate) fn report_failure(error: &Error) {
    eprintln!("gmprof: injection failed: {error}");
    if let Ok(config) = InjectionConfig::from_env() {
        let status = InjectionStatus {
            pid: std::process::id(),
            command: std::env::args().collect(),
            error: Some(format!("injection failed: {error}")),
            error_printed_to: crate::ways_in::injection_status::stderr_identity(),
            ..Default::default()
        };
        let lookup = |k: &str| std::env::var(k).ok();
        if let Ok(dir) = layout::claim_for_process(&config.output_dir, &lookup) {
            let _ = status.write(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unbalanced_warning_says_why_when_gmprof_started_with_cuda() {
        assert_eq!(unbalanced_warning(2, Some(Start::Nvtx)), "2 NVTX pop(s) had no matching push");
        for started in [Some(Start::Cuda), None] {
            let w = unbalanced_warning(1, started);
            assert!(w.starts_with("1 NVTX pop(s) had no matching push (gmprof started with CUDA"), "{w}");
            assert!(w.contains("NVTX_INJECTION64_PATH naming libgmprof.so"), "{w}");
        }
        assert_eq!(Start::Nvtx.describe(), "first NVTX call");
        assert_eq!(Start::Cuda.describe(), "CUDA initialization");
    }

    #[test]
    fn status_round_trips_through_json() {
        let dir = tempfile::tempdir().unwrap();
        let status = InjectionStatus {
            pid: 7,
            command: vec!["python3".into(), "train.py".into()],
            contexts_created: 0,
            error: None,
            started_by: Some(Start::Nvtx.describe().into()),
            ..Default::default()
        };
        status.write(dir.path()).unwrap();
        assert_eq!(InjectionStatus::read(dir.path()).unwrap(), status);
        // A status written before `started_by` existed still reads.
        let old = r#"{"pid": 3, "command": [], "mode": null, "contexts_created": 1, "profiled": true,
            "error": null, "finished_by": null, "outputs_written": true, "nvtx_pushes": 2,
            "nvtx_ranges_followed": 2, "nvtx_unbalanced_pops": 0}"#;
        std::fs::write(dir.path().join(STATUS_FILE), old).unwrap();
        assert_eq!(InjectionStatus::read(dir.path()).unwrap().started_by, None);
    }
}
