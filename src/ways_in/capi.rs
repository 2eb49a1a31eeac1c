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
use crate::ways_in::outputs::{spawn_checkpoints, EndSettings, Outputs};
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

/// The C functions the header declares, checked against `include/gmprof.h` by the tests.
pub const EXPORTED_FUNCTIONS: [&str; 7] = [
    "gmprof_init",
    "gmprof_push_range",
    "gmprof_pop_range",
    "gmprof_finish",
    "gmprof_last_error",
    "gmprof_version",
    "gmprof_output_dir",
];

/// The directory the last `gmprof_init` claimed (see [`crate::ways_in::layout`]).
static OUTPUT_DIR: Mutex<Option<CString>> = Mutex::new(None);

struct Session {
    profiler: Profiler,
    outputs: std::sync::Arc<Outputs>,
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
    guarded("gmprof_init", || {
        // SAFETY: the caller passes NULL or a valid options struct.
        let opts = unsafe { options.as_ref() };
        // SAFETY: the strings in a valid options struct are NULL or NUL-terminated.
        let mode = env_or(unsafe { opts.map_or(Ok(None), |o| opt_str(o.mode, "options.mode")) }?, "GMPROF_MODE");
        // SAFETY: as above.
        let metrics =
            env_or(unsafe { opts.map_or(Ok(None), |o| opt_str(o.metrics, "options.metrics")) }?, "GMPROF_METRICS");
        // SAFETY: as above.
        let out =
            env_or(unsafe { opts.map_or(Ok(None), |o| opt_str(o.output_dir, "options.output_dir")) }?, "GMPROF_OUT");
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
        let profiler = builder.build().map_err(fail)?;
        // Each process gets its own directory (ranks, workers, a second run): never an overwrite.
        let out = PathBuf::from(out.unwrap_or_else(|| "gmprof-out".into()));
        let dir = crate::ways_in::layout::claim_for_process(&out, &|k: &str| std::env::var(k).ok()).map_err(fail)?;
        *OUTPUT_DIR.lock() = CString::new(dir.as_os_str().as_encoded_bytes()).ok();
        let outputs = std::sync::Arc::new(Outputs::new(dir));
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
        *session = Some(Session { profiler, outputs });
        Ok(())
    })
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
        match current_profiler()? {
            Some(profiler) => profiler.push_range(&name).map_err(fail),
            None => Ok(()),
        }
    })
}

/// Closes the calling thread's innermost range.
#[no_mangle]
pub extern "C" fn gmprof_pop_range() -> Status {
    guarded("gmprof_pop_range", || match current_profiler()? {
        Some(profiler) => profiler.pop_range().map_err(fail),
        None => Ok(()),
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
        .finish_with(run_end, teardown, |report| written = session.outputs.write_final(report))
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
