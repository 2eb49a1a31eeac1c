//! The C ABI of `libgmprof.so`, declared in `include/gmprof.h`.
//!
//! Layer 3's face to C, C++/CUDA (llm.c style) and Python (through ctypes). One
//! process-wide profiler, driven by `gmprof_init`, `gmprof_push_range`, `gmprof_pop_range`
//! and `gmprof_finish`. Every function:
//! - returns a [`Status`] and never unwinds across the boundary (its body runs under
//!   `catch_unwind`; a caught panic becomes [`Status::Internal`]);
//! - validates its arguments (NULL, invalid UTF-8) instead of trusting them;
//! - on failure stores a message for [`gmprof_last_error`] on the calling thread.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use parking_lot::Mutex;

use crate::capture::profiler::Profiler;
use crate::capture::profiler::Teardown;
use crate::error::Error;
use crate::model::{ProfilingMode, RunEnd};
use crate::ways_in::outputs::{spawn_checkpoints, Outputs};
use crate::ways_in::settings::EndSettings;
use crate::ways_in::signals::{self, Request};

/// Status codes; the values are the C enum `gmprof_status`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// NULL or non-UTF-8 string, unknown mode.
    InvalidArgument = 1,
    /// No `gmprof_init`, or called after `gmprof_finish`.
    NotInitialized = 2,
    /// `gmprof_init` twice without `gmprof_finish`.
    AlreadyInitialized = 3,
    /// Pop with no open range on this thread.
    Unbalanced = 4,
    /// libcupti or libcuda could not be loaded.
    LibraryNotFound = 5,
    /// A CUPTI call failed.
    Cupti = 6,
    /// A CUDA driver call failed.
    Cuda = 7,
    /// A metric name the GPU does not know.
    UnknownMetric = 8,
    /// Writing the outputs failed.
    Io = 9,
    /// A bug in gmprof.
    Internal = 10,
}

impl Status {
    /// The C enumerator's name, e.g. `GMPROF_ERROR_UNBALANCED`.
    pub fn c_name(self) -> &'static str {
        match self {
            Status::Ok => "GMPROF_OK",
            Status::InvalidArgument => "GMPROF_ERROR_INVALID_ARGUMENT",
            Status::NotInitialized => "GMPROF_ERROR_NOT_INITIALIZED",
            Status::AlreadyInitialized => "GMPROF_ERROR_ALREADY_INITIALIZED",
            Status::Unbalanced => "GMPROF_ERROR_UNBALANCED",
            Status::LibraryNotFound => "GMPROF_ERROR_LIBRARY_NOT_FOUND",
            Status::Cupti => "GMPROF_ERROR_CUPTI",
            Status::Cuda => "GMPROF_ERROR_CUDA",
            Status::UnknownMetric => "GMPROF_ERROR_UNKNOWN_METRIC",
            Status::Io => "GMPROF_ERROR_IO",
            Status::Internal => "GMPROF_ERROR_INTERNAL",
        }
    }

    /// Every status, in value order.
    pub const ALL: [Status; 11] = [
        Status::Ok,
        Status::InvalidArgument,
        Status::NotInitialized,
        Status::AlreadyInitialized,
        Status::Unbalanced,
        Status::LibraryNotFound,
        Status::Cupti,
        Status::Cuda,
        Status::UnknownMetric,
        Status::Io,
        Status::Internal,
    ];

    fn of(error: &Error) -> Status {
        match error {
            Error::LibraryNotFound { .. } | Error::MissingSymbol { .. } => Status::LibraryNotFound,
            Error::Cupti { .. } => Status::Cupti,
            Error::Cuda { .. } => Status::Cuda,
            Error::UnknownMetrics { .. } => Status::UnknownMetric,
            Error::PopWithoutPush { .. } | Error::PopFromOtherThread { .. } => Status::Unbalanced,
            Error::InvalidConfig(_) => Status::InvalidArgument,
            Error::InvalidState(_) => Status::NotInitialized,
            Error::Io { .. } | Error::Serialize { .. } => Status::Io,
            _ => Status::Internal,
        }
    }
}

/// `gmprof_options`, as C lays it out.
#[repr(C)]
#[derive(Debug)]
pub struct Options {
    /// Mode name or NULL.
    pub mode: *const c_char,
    /// Comma-separated metrics or NULL.
    pub metrics: *const c_char,
    /// Output directory or NULL.
    pub output_dir: *const c_char,
    /// Device ordinal, -1 for the current context or device 0.
    pub device: c_int,
    /// Nonzero to synchronize before each pop.
    pub synchronize_on_pop: c_int,
}

mod capture;
mod stream;

/// The C functions the header declares, checked against `include/gmprof.h` by the tests.
pub const EXPORTED_FUNCTIONS: [&str; 18] = [
    "gmprof_init",
    "gmprof_capture_start",
    "gmprof_capture_stop",
    "gmprof_push_range",
    "gmprof_pop_range",
    "gmprof_finish",
    "gmprof_last_error",
    "gmprof_version",
    "gmprof_output_dir",
    "gmprof_dt_alloc",
    "gmprof_dt_device_ptr",
    "gmprof_dt_collect",
    "gmprof_dt_free",
    "gmprof_dt_write_header",
    "gmprof_dt_read_device",
    "gmprof_dt_decode",
    "gmprof_dt_last_correlation_id",
    "gmprof_string_free",
];

/// The directory the last `gmprof_init` claimed (see [`crate::ways_in::layout`]).
static OUTPUT_DIR: Mutex<Option<CString>> = Mutex::new(None);

struct Session {
    profiler: Profiler,
    outputs: std::sync::Arc<Outputs>,
    /// The streamed outputs' settings (`None`: `GMPROF_STREAM=0`, or a capture).
    stream: Option<crate::ways_in::settings::StreamOptions>,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // Interior NULs cannot cross into C; replace them rather than lose the message.
    let text = CString::new(message.replace('\0', "\u{FFFD}")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// Runs `body`, converting errors and panics into a status and a last-error message.
fn guarded(location: &'static str, body: impl FnOnce() -> Result<(), (Status, String)>) -> Status {
    set_last_error("");
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => Status::Ok,
        Ok(Err((status, message))) => {
            set_last_error(&message);
            status
        }
        Err(payload) => {
            set_last_error(&Error::from_panic(location, payload.as_ref()).to_string());
            Status::Internal
        }
    }
}

fn fail(e: Error) -> (Status, String) {
    (Status::of(&e), e.to_string())
}

/// Reads an optional C string.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string valid for the call.
unsafe fn opt_str(ptr: *const c_char, what: &str) -> Result<Option<String>, (Status, String)> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map(|s| Some(s.to_owned())).map_err(|_| (Status::InvalidArgument, format!("{what} is not valid UTF-8")))
}

fn env_or(value: Option<String>, var: &str) -> Option<String> {
    value.or_else(|| std::env::var(var).ok()).filter(|v| !v.trim().is_empty())
}

/// Starts the process-wide profiler.
///
/// # Safety
/// `options` is NULL or points to a valid `gmprof_options` whose strings are NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn gmprof_init(options: *const Options) -> Status {
    // SAFETY: the caller's guarantee, passed on.
    guarded("gmprof_init", || unsafe { start_session(options, false) })
}

/// The mode, metrics and output directory of `options`, each falling back to its variable.
///
/// # Safety
/// As [`gmprof_init`].
unsafe fn option_strings(options: *const Options) -> Result<[Option<String>; 3], (Status, String)> {
    // SAFETY: the caller passes NULL or a valid options struct.
    let opts = unsafe { options.as_ref() };
    // SAFETY: the strings in a valid options struct are NULL or NUL-terminated.
    let mode = env_or(unsafe { opts.map_or(Ok(None), |o| opt_str(o.mode, "options.mode")) }?, "GMPROF_MODE");
    // SAFETY: as above.
    let metrics =
        env_or(unsafe { opts.map_or(Ok(None), |o| opt_str(o.metrics, "options.metrics")) }?, "GMPROF_METRICS");
    // SAFETY: as above.
    let out = env_or(unsafe { opts.map_or(Ok(None), |o| opt_str(o.output_dir, "options.output_dir")) }?, "GMPROF_OUT");
    Ok([mode, metrics, out])
}

/// Starts the session of `gmprof_init`, or with `capture` that of `gmprof_capture_start`
/// outside an injected run (written to `OUT/capture-K/<process>/`).
///
/// # Safety
/// As [`gmprof_init`].
unsafe fn start_session(options: *const Options, capture: bool) -> Result<(), (Status, String)> {
    // SAFETY: the caller's guarantee, passed on.
    let [mode, metrics, out] = unsafe { option_strings(options) }?;
    // SAFETY: the caller passes NULL or a valid options struct.
    let opts = unsafe { options.as_ref() };
    let mut session = SESSION.lock();
    if session.is_some() {
        return Err((
            Status::AlreadyInitialized,
            "gmprof_init was already called; call gmprof_finish first".to_owned(),
        ));
    }
    let mut builder = Profiler::builder();
    if let Some(mode) = mode {
        builder = builder.mode(mode.parse::<ProfilingMode>().map_err(fail)?);
    }
    if let Some(metrics) = metrics {
        builder = builder.metrics(metrics.split(',').map(str::trim).filter(|m| !m.is_empty()).map(String::from));
    }
    if let Some(scope) = env_or(None, "GMPROF_RANGE_SCOPE") {
        builder = builder.range_scope(scope.parse::<crate::capture::profiler::RangeScope>().map_err(fail)?);
    }
    if let Some(o) = opts {
        if o.device >= 0 {
            builder = builder.device(o.device as usize);
        }
        builder = builder.synchronize_on_pop(o.synchronize_on_pop != 0);
    }
    // PM sampling is asked for through the environment, which keeps gmprof_options'
    // layout (and programs built against the older header) unchanged.
    builder = builder.pm_sampling(crate::capture::pm_sampling::PmSamplingConfig::from_env().map_err(fail)?);
    builder = builder.pc_sampling(crate::capture::pc_sampling::PcSamplingConfig::from_env().map_err(fail)?);
    // So is per_kernel in rotation (GMPROF_ROTATE, GMPROF_ROTATE_STEP, GMPROF_ROTATE_CYCLES),
    // read as the injected library reads it.
    let config = crate::ways_in::injection_config::InjectionConfig::from_env().map_err(fail)?;
    builder = builder
        .rotate(config.rotate)
        .rotation_cycles(config.rotation_cycles)
        .rotation_step(config.rotation_step.clone())
        .time_api_calls(config.time_api_calls);
    let profiler = builder.build().map_err(fail)?;
    // The table formats, like PM sampling, come through the environment (GMPROF_FORMAT);
    // checked before a directory is claimed.
    let formats = crate::report::OutputFormats::from_env().map_err(fail)?;
    // So is the form of trace.json (GMPROF_TRACE_FORMAT): a value that is not one fails here.
    crate::report::TraceFormat::from_lookup(|k| std::env::var(k).ok()).map_err(fail)?;
    let stream_options = if capture { None } else { stream::options().map_err(fail)? };
    // Each process gets its own directory (ranks, workers, a second run): never an overwrite.
    let out = PathBuf::from(out.unwrap_or_else(|| "gmprof-out".into()));
    let dir = if capture {
        crate::ways_in::on_demand::api::claim_own(&out).map_err(fail)?.1
    } else {
        crate::ways_in::layout::claim_for_process(&out, &|k: &str| std::env::var(k).ok()).map_err(fail)?
    };
    *OUTPUT_DIR.lock() = CString::new(dir.as_os_str().as_encoded_bytes()).ok();
    let outputs = std::sync::Arc::new(Outputs::with_formats(dir, formats));
    install_exit_hooks();
    let settings = EndSettings::from_lookup(|k| std::env::var(k).ok()).map_err(fail)?;
    if let Some(every) = settings.checkpoint_every {
        let (weak_outputs, weak_profiler) = (std::sync::Arc::downgrade(&outputs), profiler.clone());
        spawn_checkpoints(every, move || {
            let Some(outputs) = weak_outputs.upgrade() else { return false };
            if let Err(e) = outputs.write_checkpoint(&weak_profiler, "periodic") {
                tracing::debug!("gmprof: checkpoint: {e}");
            }
            true
        });
    }
    SESSION_PID.store(std::process::id(), std::sync::atomic::Ordering::Release);
    if let Some(options) = &stream_options {
        stream::start(&profiler, &outputs, options);
    }
    *session = Some(Session { profiler, outputs, stream: stream_options });
    Ok(())
}

/// Set when a signal ended the session: the program runs on for a moment before the signal
/// is sent again, and its range calls must not fail then (Python would raise and exit before
/// the outputs are written).
static ENDED_BY_SIGNAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Held while a session finishes: an exit path waits for a finish another thread started.
static FINISHING: Mutex<()> = Mutex::new(());

/// The running profiler; `None` when a signal ended the session (range calls are no-ops).
fn current_profiler() -> Result<Option<Profiler>, (Status, String)> {
    if let Some(profiler) = SESSION.lock().as_ref().map(|s| s.profiler.clone()) {
        return Ok(Some(profiler));
    }
    if ENDED_BY_SIGNAL.load(std::sync::atomic::Ordering::Acquire) {
        return Ok(None);
    }
    Err((Status::NotInitialized, "gmprof is not initialized: call gmprof_init first (or it has finished)".to_owned()))
}

/// Under `gmprof run --on-demand` with no session of its own, the program's gmprof ranges
/// are ranges of the injected service, as its NVTX ranges are (counted as steps, held by a
/// capture under way).
fn on_demand_ranges() -> Option<&'static std::sync::Arc<crate::ways_in::on_demand::service::Service>> {
    if SESSION.lock().is_some() {
        return None;
    }
    crate::ways_in::on_demand::injected::service()
}

/// Opens a range on the calling thread.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gmprof_push_range(name: *const c_char) -> Status {
    guarded("gmprof_push_range", || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let name = unsafe { opt_str(name, "the range name") }?
            .ok_or_else(|| (Status::InvalidArgument, "the range name is NULL".to_owned()))?;
        if let Some(service) = on_demand_ranges() {
            service.on_push(&name);
            return Ok(());
        }
        match current_profiler()? {
            Some(profiler) => profiler.push_range(&name).map_err(fail),
            None => Ok(()),
        }
    })
}

/// Closes the calling thread's innermost range.
#[no_mangle]
pub extern "C" fn gmprof_pop_range() -> Status {
    guarded("gmprof_pop_range", || {
        if let Some(service) = on_demand_ranges() {
            service.on_pop();
            return Ok(());
        }
        match current_profiler()? {
            Some(profiler) => profiler.pop_range().map_err(fail),
            None => Ok(()),
        }
    })
}

/// Stops profiling and writes the outputs.
#[no_mangle]
pub extern "C" fn gmprof_finish() -> Status {
    guarded("gmprof_finish", || {
        let _finishing = FINISHING.lock();
        let session = SESSION
            .lock()
            .take()
            .ok_or_else(|| (Status::NotInitialized, "gmprof is not initialized: call gmprof_init first".to_owned()))?;
        finish_session(session, RunEnd::Finished { by: "gmprof_finish".into() }, Teardown::Release)
    })
}

/// The process that called `gmprof_init`.
static SESSION_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Finishes `session`, writing its outputs before CUPTI is torn down.
fn finish_session(session: Session, run_end: RunEnd, teardown: Teardown) -> Result<(), (Status, String)> {
    let mut written = Ok(());
    session
        .profiler
        .finish_with(run_end, teardown, |report| {
            // The CUDA error that failed the context and the kernels in flight, and the
            // CUPTI and driver calls that failed.
            let lines =
                [crate::report::summary::ending_line(report), crate::report::summary::failed_calls_line(report)];
            let note = session
                .stream
                .as_ref()
                .and_then(|o| o.unstreamed_note(report.meta.mode, report.meta.kernel_count, report.streamed.is_some()));
            for line in lines.into_iter().flatten().chain(note) {
                eprintln!("gmprof: {line}");
            }
            // The last drain is published: the OTLP push's last one, and its failures said.
            crate::ways_in::live_metrics::at_run_end(Some(report));
            written = session.outputs.write_final(report);
        })
        .map_err(fail)?;
    written.map_err(fail)
}

/// Finishes the open session, if any, at an end of the process the program did not plan.
fn finish_open_session(run_end: RunEnd) {
    // A finish under way on another thread (a signal's) completes before this returns, so
    // the process does not exit in the middle of writing.
    let _finishing = FINISHING.lock();
    if matches!(run_end, RunEnd::Signal { .. }) {
        ENDED_BY_SIGNAL.store(true, std::sync::atomic::Ordering::Release);
    }
    // A forked child inherits the session and the exit hooks; the parent writes.
    if SESSION_PID.load(std::sync::atomic::Ordering::Acquire) != std::process::id() {
        return;
    }
    let Some(session) = SESSION.lock().take() else { return };
    let dir = session.outputs.dir().display().to_string();
    match finish_session(session, run_end.clone(), Teardown::Skip) {
        Ok(()) => eprintln!("gmprof: wrote {dir} ({})", run_end.describe()),
        Err((_, e)) => eprintln!("gmprof: could not write {dir} at the end of the process: {e}"),
    }
}

/// Once per process, after the first session started (so after CUDA and CUPTI registered
/// their own exit handlers; see `injection`): an exit handler and the signal handlers that
/// write an open session's outputs when the program ends without `gmprof_finish`.
fn install_exit_hooks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `at_exit` is a plain function that never unwinds (catch_unwind inside).
        if unsafe { atexit(at_exit) } != 0 {
            tracing::warn!("gmprof: atexit registration failed");
        }
        let settings = match EndSettings::from_lookup(|k| std::env::var(k).ok()) {
            Ok(settings) => settings,
            Err(e) => {
                eprintln!("gmprof: {e}; signals are left alone");
                return;
            }
        };
        // The injected library handles signals itself when it is the one that runs.
        if settings.handle_signals && std::env::var_os("CUDA_INJECTION64_PATH").is_none() {
            let installed = signals::install(settings.signal_timeout, |request| match request {
                Request::Final(signal) => finish_open_session(RunEnd::Signal { signal, name: signals::name(signal) }),
                Request::Checkpoint(signal) => {
                    let session = SESSION.lock().as_ref().map(|s| (s.profiler.clone(), s.outputs.clone()));
                    if let Some((profiler, outputs)) = session {
                        let reason = format!("{} received; the program's own handler ran", signals::name(signal));
                        if let Err(e) = outputs.write_checkpoint(&profiler, &reason) {
                            tracing::debug!("gmprof: checkpoint: {e}");
                        }
                    }
                }
            });
            if let Err(e) = installed {
                tracing::warn!("gmprof: {e}");
            }
        }
    });
}

extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        // A fresh thread: the exiting thread's thread-locals are already destroyed.
        if let Ok(worker) = std::thread::Builder::new()
            .name("gmprof-exit".into())
            .spawn(|| finish_open_session(RunEnd::Finished { by: "process exit without gmprof_finish".into() }))
        {
            let _ = worker.join();
        }
    });
}

extern "C" {
    fn atexit(callback: extern "C" fn()) -> c_int;
}

/// The calling thread's last failure message, "" if none.
#[no_mangle]
pub extern "C" fn gmprof_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The directory this process writes its outputs into (the configured output directory or
/// its per-process subdirectory), "" before the first `gmprof_init`. Valid until the next
/// `gmprof_init`.
#[no_mangle]
pub extern "C" fn gmprof_output_dir() -> *const c_char {
    OUTPUT_DIR.lock().as_ref().map_or(c"".as_ptr(), |d| d.as_ptr())
}

/// The library version.
#[no_mangle]
pub extern "C" fn gmprof_version() -> *const c_char {
    static VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };
    VERSION.as_ptr()
}

// ---- In-kernel region timers (include/gmprof_device.cuh) ----

/// Reads `count` region names (NULL entries and a NULL array allowed).
///
/// # Safety
/// `names` is NULL or points to `count` pointers, each NULL or a NUL-terminated string.
unsafe fn region_names(names: *const *const c_char, count: c_int) -> Result<Vec<String>, (Status, String)> {
    if names.is_null() || count <= 0 {
        return Ok(Vec::new());
    }
    (0..count as usize)
        .map(|i| {
            // SAFETY: the caller guarantees `count` readable pointers.
            let p = unsafe { *names.add(i) };
            // SAFETY: each is NULL or NUL-terminated (caller's guarantee).
            Ok(unsafe { opt_str(p, "a region name") }?.unwrap_or_default())
        })
        .collect()
}

fn track_layout(text: Option<String>) -> Result<crate::device_timers::TrackLayout, (Status, String)> {
    match text.as_deref() {
        None => Ok(crate::device_timers::TrackLayout::Sm),
        Some(t) => crate::device_timers::TrackLayout::parse(t)
            .ok_or_else(|| (Status::InvalidArgument, format!("tracks is {t:?}; use \"sm\" or \"lane\""))),
    }
}

/// Allocates a device timer buffer of `capacity` records in the current CUDA context.
///
/// # Safety
/// `out` is a valid pointer to write the handle to.
#[no_mangle]
pub unsafe extern "C" fn gmprof_dt_alloc(
    capacity: u32,
    out: *mut *mut crate::ways_in::device_timers::DeviceTimerBuffer,
) -> Status {
    guarded("gmprof_dt_alloc", || {
        if out.is_null() {
            return Err((Status::InvalidArgument, "out is NULL".into()));
        }
        let buffer = crate::ways_in::device_timers::DeviceTimerBuffer::new(capacity).map_err(fail)?;
        // SAFETY: `out` is non-null and writable (caller's guarantee).
        unsafe { *out = Box::into_raw(Box::new(buffer)) };
        Ok(())
    })
}

/// The device pointer to pass to the kernel.
///
/// # Safety
/// `buffer` is NULL or from `gmprof_dt_alloc` and not freed; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn gmprof_dt_device_ptr(
    buffer: *const crate::ways_in::device_timers::DeviceTimerBuffer,
    out: *mut *mut u64,
) -> Status {
    guarded("gmprof_dt_device_ptr", || {
        if buffer.is_null() || out.is_null() {
            return Err((Status::InvalidArgument, "buffer or out is NULL".into()));
        }
        // SAFETY: both non-null and valid (caller's guarantee).
        unsafe { *out = (*buffer).device_ptr() as *mut u64 };
        Ok(())
    })
}

/// Synchronizes, decodes the buffer for the calling thread's last profiled launch, hands it
/// to the outputs and clears the buffer for the next launch.
///
/// # Safety
/// `buffer` is from `gmprof_dt_alloc`; `names` as in `region_names`; `tracks` NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gmprof_dt_collect(
    buffer: *mut crate::ways_in::device_timers::DeviceTimerBuffer,
    names: *const *const c_char,
    count: c_int,
    tracks: *const c_char,
) -> Status {
    guarded("gmprof_dt_collect", || {
        if buffer.is_null() {
            return Err((Status::InvalidArgument, "buffer is NULL".into()));
        }
        // SAFETY: caller's guarantees on names and tracks.
        let (names, tracks) = unsafe { (region_names(names, count)?, track_layout(opt_str(tracks, "tracks")?)?) };
        // SAFETY: a live buffer from gmprof_dt_alloc.
        let buffer = unsafe { &*buffer };
        buffer.collect_and_submit(&names, tracks).map_err(fail)?;
        buffer.reset().map_err(fail)
    })
}

/// Frees a buffer from `gmprof_dt_alloc` (NULL is allowed).
///
/// # Safety
/// `buffer` is NULL or from `gmprof_dt_alloc` and not freed before.
#[no_mangle]
pub unsafe extern "C" fn gmprof_dt_free(buffer: *mut crate::ways_in::device_timers::DeviceTimerBuffer) -> Status {
    guarded("gmprof_dt_free", || {
        if !buffer.is_null() {
            // SAFETY: from Box::into_raw in gmprof_dt_alloc, freed once.
            drop(unsafe { Box::from_raw(buffer) });
        }
        Ok(())
    })
}

/// Zeroes `len` bytes at `bytes` and writes a header for `(len - 64) / 16` records: the host
/// image of a buffer the caller allocates itself (copy it to the device before the launch).
///
/// # Safety
/// `bytes` is writable for `len` bytes and 8-byte aligned.
#[no_mangle]
pub unsafe extern "C" fn gmprof_dt_write_header(bytes: *mut std::ffi::c_void, len: u64) -> Status {
    guarded("gmprof_dt_write_header", || {
        let words = len as usize / 8;
        if bytes.is_null() || words < crate::device_timers::format::HEADER_WORDS + 2 || (bytes as usize) % 8 != 0 {
            return Err((
                Status::InvalidArgument,
                format!("need an 8-byte-aligned buffer of at least 80 bytes, got {len}"),
            ));
        }
        // SAFETY: writable, aligned, `words` words long (caller's guarantee, checked above).
        let out = unsafe { std::slice::from_raw_parts_mut(bytes.cast::<u64>(), words) };
        out.fill(0);
        let capacity = ((words - crate::device_timers::format::HEADER_WORDS) / 2).min(u32::MAX as usize) as u32;
        out[..2].copy_from_slice(&crate::device_timers::format::host_header(capacity));
        Ok(())
    })
}

/// Synchronizes the current context and copies `len` bytes from the device address
/// `device_ptr` into `host_out`.
///
/// # Safety
/// `device_ptr` is readable device memory of `len` bytes; `host_out` writable for `len`.
#[no_mangle]
pub unsafe extern "C" fn gmprof_dt_read_device(device_ptr: u64, host_out: *mut std::ffi::c_void, len: u64) -> Status {
    guarded("gmprof_dt_read_device", || {
        if host_out.is_null() || device_ptr == 0 {
            return Err((Status::InvalidArgument, "device_ptr or host_out is NULL".into()));
        }
        // SAFETY: caller's guarantee on the device range.
        let words =
            unsafe { crate::ways_in::device_timers::read_device_buffer(device_ptr, len as usize) }.map_err(fail)?;
        // SAFETY: `host_out` holds `len` >= 8 * words.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(words.as_ptr().cast::<u8>(), host_out.cast::<u8>(), words.len() * 8) };
        Ok(())
    })
}

/// Decodes a host copy of a buffer into JSON (a `TimedLaunch`: header, counts, spans,
/// instants, lane check), written to `*json_out` (free it with `gmprof_string_free`).
/// `correlation_id` >= 0 names the launch; -1 takes the calling thread's last profiled
/// launch; -2 none. With `submit` nonzero the launch also goes to the outputs.
///
/// # Safety
/// `bytes` readable for `len` bytes; `names` as in `region_names`; `tracks` NULL or a
/// NUL-terminated string; `json_out` NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gmprof_dt_decode(
    bytes: *const std::ffi::c_void,
    len: u64,
    names: *const *const c_char,
    count: c_int,
    correlation_id: i64,
    tracks: *const c_char,
    submit: c_int,
    json_out: *mut *mut c_char,
) -> Status {
    guarded("gmprof_dt_decode", || {
        if bytes.is_null() {
            return Err((Status::InvalidArgument, "bytes is NULL".into()));
        }
        // SAFETY: readable for `len` bytes (caller's guarantee).
        let data = unsafe { std::slice::from_raw_parts(bytes.cast::<u8>(), len as usize) };
        // SAFETY: caller's guarantees on names and tracks.
        let (names, tracks) = unsafe { (region_names(names, count)?, track_layout(opt_str(tracks, "tracks")?)?) };
        let id = match correlation_id {
            -1 => crate::capture::last_launch::last_kernel_correlation_id(),
            id if id >= 0 => {
                Some(u32::try_from(id).map_err(|_| (Status::InvalidArgument, format!("correlation id {id}")))?)
            }
            _ => None,
        };
        let mut launch = crate::device_timers::TimedLaunch::from_bytes(data, &names, id).map_err(fail)?;
        launch.tracks = tracks;
        if !json_out.is_null() {
            let json = serde_json::to_string(&launch).map_err(|e| (Status::Internal, e.to_string()))?;
            let json = CString::new(json).map_err(|e| (Status::Internal, e.to_string()))?;
            // SAFETY: writable (caller's guarantee).
            unsafe { *json_out = json.into_raw() };
        }
        if submit != 0 {
            crate::device_timers::submit(launch);
        }
        Ok(())
    })
}

/// The correlation id of the calling thread's last profiled kernel launch, -1 if none.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn gmprof_dt_last_correlation_id(out: *mut i64) -> Status {
    guarded("gmprof_dt_last_correlation_id", || {
        if out.is_null() {
            return Err((Status::InvalidArgument, "out is NULL".into()));
        }
        let id = crate::capture::last_launch::last_kernel_correlation_id().map_or(-1, i64::from);
        // SAFETY: writable (caller's guarantee).
        unsafe { *out = id };
        Ok(())
    })
}

/// Frees a string gmprof returned (NULL is allowed).
///
/// # Safety
/// `s` is NULL or a string from gmprof not freed before.
#[no_mangle]
pub unsafe extern "C" fn gmprof_string_free(s: *mut c_char) -> Status {
    guarded("gmprof_string_free", || {
        if !s.is_null() {
            // SAFETY: from CString::into_raw in gmprof, freed once.
            drop(unsafe { CString::from_raw(s) });
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: gmprof_last_error returns a NUL-terminated string valid until the next call.
        unsafe { CStr::from_ptr(gmprof_last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn misuse_returns_codes_and_messages() {
        assert_eq!(gmprof_pop_range(), Status::NotInitialized);
        assert!(last_error().contains("call gmprof_init first"), "{}", last_error());
        // SAFETY: a valid NUL-terminated literal.
        assert_eq!(unsafe { gmprof_push_range(c"step".as_ptr()) }, Status::NotInitialized);
        // SAFETY: NULL is allowed and rejected.
        assert_eq!(unsafe { gmprof_push_range(std::ptr::null()) }, Status::InvalidArgument);
        assert_eq!(last_error(), "the range name is NULL");
        let bad = [0xffu8, 0xfe, 0];
        // SAFETY: NUL-terminated, but not UTF-8.
        assert_eq!(unsafe { gmprof_push_range(bad.as_ptr().cast()) }, Status::InvalidArgument);
        assert!(last_error().contains("not valid UTF-8"));
        assert_eq!(gmprof_finish(), Status::NotInitialized);
        // A success clears the message.
        assert!(!gmprof_version().is_null());
    }

    #[test]
    fn status_names_follow_the_header() {
        let header = include_str!("../../include/gmprof.h");
        for status in Status::ALL {
            let line = format!("{} = {},", status.c_name(), status as i32);
            let last = format!("{} = {}", status.c_name(), status as i32);
            assert!(header.contains(&line) || header.contains(&last), "header lacks {line}");
        }
        for f in EXPORTED_FUNCTIONS {
            assert!(header.contains(&format!(" {f}(")) || header.contains(&format!("*{f}(")), "header lacks {f}");
        }
        let declared = header.matches("gmprof_status gmprof_").count() + header.matches("const char *gmprof_").count();
        assert_eq!(declared, EXPORTED_FUNCTIONS.len(), "the header declares functions the library does not export");
    }
}
