//! The injected library's two entry points, and the start they share.
//!
//! Layer 3, beside [`crate::ways_in::injection`]. `gmprof run` names libgmprof.so in both
//! `CUDA_INJECTION64_PATH` and `NVTX_INJECTION64_PATH`, so the library is loaded by whichever
//! comes first:
//! - [`InitializeInjectionNvtx2`]: NVTX loads its injection library on the program's first
//!   NVTX call, which often comes before CUDA is initialized (`nvtxRangePushA("setup")` at
//!   the top of `main`). If the CUDA driver will load this same library too, gmprof starts
//!   here: it pins its CUPTI subscriber (CUPTI takes subscriptions before `cuInit`). It
//!   then hands the call on to libcupti's own `InitializeInjectionNvtx2` (the
//!   libcupti gmprof loaded), which installs CUPTI's NVTX handlers exactly as when
//!   `NVTX_INJECTION64_PATH` names libcupti. NVTX calls this once per NVTX instance (the
//!   program's, and each library's that compiled the NVTX v3 headers in): gmprof starts at
//!   the first, and every call is handed on.
//! - [`InitializeInjection`]: the CUDA driver calls it while it initializes; gmprof starts
//!   here if NVTX did not start it already.
//!
//! Either way [`crate::ways_in::injection`]'s start runs once. A start at the first NVTX call
//! that fails before anything was set up (CUPTI could not be loaded or subscribed) is tried
//! again when CUDA initializes, which then reports any failure as it always has.
//!
//! A process that does not inject libgmprof.so into CUDA (one that calls `gmprof_init`
//! through the C ABI or Python, with `NVTX_INJECTION64_PATH` pointing here) only has its NVTX
//! calls handed on to CUPTI, as if `NVTX_INJECTION64_PATH` named libcupti.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;

use parking_lot::ReentrantMutex;

use crate::checked::Cupti;
use crate::error::Error;
use crate::sys::nvtx::NvtxGetExportTableFunc;
use crate::ways_in::injection::{self, Start, StartFailure};

/// Where the one start of the injected profiler stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StartState {
    /// Not started.
    Fresh,
    /// A start at the first NVTX call failed before anything was set up; CUDA's start tries
    /// again (later NVTX instances do not).
    Deferred,
    /// Starting on the thread that holds the lock (seen only by a re-entrant call).
    Running,
    /// Started.
    Ready,
    /// Failed for good (reported).
    Failed,
}

/// Re-entrant: a start runs CUPTI, which may initialize CUDA and so call
/// [`InitializeInjection`] on the same thread; that call finds `Running` and returns.
static START: ReentrantMutex<Cell<StartState>> = ReentrantMutex::new(Cell::new(StartState::Fresh));

/// How long CUDA's start waits for a start running on another thread (NVTX's) before it lets
/// CUDA go on: if that start waited on CUDA's initialization in turn, neither would finish.
const CUDA_START_WAIT: Duration = Duration::from_secs(10);

/// Runs `initialize` once under `lock`; returns whether gmprof is (being) started.
fn start_with(
    lock: &ReentrantMutex<Cell<StartState>>,
    how: Start,
    initialize: impl FnOnce(Start) -> Result<(), StartFailure>,
    report: impl FnOnce(&Error),
) -> bool {
    let guard = match how {
        Start::Nvtx => lock.lock(),
        Start::Cuda => match lock.try_lock_for(CUDA_START_WAIT) {
            Some(guard) => guard,
            None => {
                eprintln!("gmprof: still starting on another thread; CUDA goes on without waiting");
                return true;
            }
        },
    };
    match guard.get() {
        StartState::Ready | StartState::Running => return true,
        StartState::Failed => return false,
        StartState::Deferred if how == Start::Nvtx => return false,
        StartState::Fresh | StartState::Deferred => {}
    }
    guard.set(StartState::Running);
    let outcome = catch_unwind(AssertUnwindSafe(|| initialize(how)));
    let state = match outcome {
        Ok(Ok(())) => StartState::Ready,
        Ok(Err(failure)) if failure.retry && how == Start::Nvtx => {
            // A configuration error is reported when CUDA initializes, with the usual status.
            if !matches!(failure.error, Error::InvalidConfig(_)) {
                eprintln!(
                    "gmprof: could not start at the program's first NVTX call ({}); trying again when CUDA \
                     initializes",
                    failure.error
                );
            }
            StartState::Deferred
        }
        Ok(Err(failure)) => {
            report(&failure.error);
            StartState::Failed
        }
        Err(_) => {
            eprintln!("gmprof: injection failed: internal error");
            StartState::Failed
        }
    };
    guard.set(state);
    state == StartState::Ready
}

fn start(how: Start) -> bool {
    start_with(&START, how, injection::initialize, injection::report_failure)
}

/// The file this code was loaded from (libgmprof.so; the executable when linked in).
fn this_library() -> Option<PathBuf> {
    // SAFETY: Dl_info is plain data (pointers and integers); all zeros is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let address = InitializeInjectionNvtx2 as *const c_void;
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is the NUL-terminated name of the object holding `address`, valid
    // while that object stays loaded, and it is running this code.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(OsStr::from_bytes(name.to_bytes())))
}

/// Keeps this library loaded for the rest of the process. NVTX unloads an injection library
/// whose entry point returns 0 (and loads it afresh for the next NVTX instance), but gmprof's
/// CUPTI callbacks, thread-locals and exit handler live in it.
fn stay_loaded(this: &Path) {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let Ok(name) = std::ffi::CString::new(this.as_os_str().as_bytes()) else { return };
        // SAFETY: with RTLD_NOLOAD dlopen only finds the object already loaded (the one running
        // this code) and loads nothing; RTLD_NODELETE marks it never to be unloaded. The
        // handle is kept open on purpose.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
        if handle.is_null() {
            tracing::debug!("gmprof: could not keep {} loaded", this.display());
        }
    });
}

/// Whether two paths name the same file (device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Whether the CUDA driver will load this library (`CUDA_INJECTION64_PATH` names it), so
/// starting at the first NVTX call is starting the injected profiler early.
fn cuda_injects(cuda_injection: Option<&OsStr>, this: Option<&Path>) -> bool {
    match (cuda_injection, this) {
        (Some(cuda), Some(this)) => same_file(Path::new(cuda), this),
        _ => false,
    }
}

/// Hands NVTX's call on to libcupti's `InitializeInjectionNvtx2`; 0 if there is none.
fn forward_to_cupti(get_export_table: Option<NvtxGetExportTableFunc>) -> c_int {
    match Cupti::load().and_then(|cupti| cupti.nvtx_injection_entry()) {
        // SAFETY: CUPTI's entry point with NVTX's own argument, as NVTX would call it when
        // NVTX_INJECTION64_PATH names libcupti; it reads the export table and returns.
        Ok(entry) => unsafe { entry(get_export_table) },
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| eprintln!("gmprof: NVTX calls cannot reach CUPTI: {e}"));
            0
        }
    }
}

/// NVTX's injection entry point: NVTX calls it on an NVTX instance's first call when
/// `NVTX_INJECTION64_PATH` names libgmprof.so. Starts the injected profiler if the CUDA
/// driver will load this library too, then hands the call on to libcupti's. Returns CUPTI's
/// answer (nonzero: NVTX calls reach CUPTI; 0: NVTX turns them into no-ops); never unwinds.
#[no_mangle]
pub extern "C" fn InitializeInjectionNvtx2(get_export_table: Option<NvtxGetExportTableFunc>) -> c_int {
    catch_unwind(|| {
        let this = this_library();
        if let Some(this) = &this {
            stay_loaded(this);
        }
        let cuda = std::env::var_os("CUDA_INJECTION64_PATH");
        if cuda_injects(cuda.as_deref(), this.as_deref()) {
            start(Start::Nvtx);
        }
        forward_to_cupti(get_export_table)
    })
    .unwrap_or(0)
}

/// The entry point the CUDA driver calls when `CUDA_INJECTION64_PATH` names libgmprof.so.
/// Returns 1 when gmprof is started (here or earlier, at the first NVTX call) and 0 on
/// failure (after printing why); never unwinds.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    catch_unwind(|| c_int::from(start(Start::Cuda))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn fresh() -> ReentrantMutex<Cell<StartState>> {
        ReentrantMutex::new(Cell::new(StartState::Fresh))
    }

    fn failure(retry: bool, error: Error) -> StartFailure {
        StartFailure { error, retry }
    }

    #[test]
    fn a_start_at_the_first_nvtx_call_is_the_only_start() {
        let lock = fresh();
        let calls = RefCell::new(Vec::new());
        let init = |how| {
            calls.borrow_mut().push(how);
            Ok(())
        };
        assert!(start_with(&lock, Start::Nvtx, init, |_| panic!("nothing to report")));
        assert!(start_with(&lock, Start::Nvtx, |_| panic!("started twice"), |_| {}), "a second NVTX instance");
        assert!(start_with(&lock, Start::Cuda, |_| panic!("started twice"), |_| {}), "CUDA finds it started");
        assert_eq!(*calls.borrow(), [Start::Nvtx]);
        assert_eq!(lock.lock().get(), StartState::Ready);
    }

    #[test]
    fn a_start_inside_the_start_returns_at_once() {
        let lock = fresh();
        let inner = RefCell::new(None);
        let started = start_with(
            &lock,
            Start::Nvtx,
            |_| {
                // CUPTI initializing CUDA inside the start: the driver calls InitializeInjection.
                *inner.borrow_mut() = Some(start_with(&lock, Start::Cuda, |_| panic!("re-entered"), |_| {}));
                Ok(())
            },
            |_| {},
        );
        assert!(started);
        assert_eq!(*inner.borrow(), Some(true));
    }

    #[test]
    fn a_failed_early_start_is_tried_again_when_cuda_initializes() {
        let lock = fresh();
        let cupti_failed = |_| Err(failure(true, Error::InvalidState("cuptiSubscribe failed".into())));
        assert!(!start_with(&lock, Start::Nvtx, cupti_failed, |_| panic!("reported early")));
        assert_eq!(lock.lock().get(), StartState::Deferred);
        assert!(!start_with(&lock, Start::Nvtx, |_| panic!("another NVTX instance tried again"), |_| {}));
        let mut second = None;
        assert!(start_with(
            &lock,
            Start::Cuda,
            |how| {
                second = Some(how);
                Ok(())
            },
            |_| {}
        ));
        assert_eq!(second, Some(Start::Cuda));
    }

    #[test]
    fn a_failure_for_good_is_reported_once() {
        let lock = fresh();
        let reported = RefCell::new(Vec::new());
        let probes_failed = |_| Err(failure(false, Error::InvalidConfig("GMPROF_PROBE=?".into())));
        assert!(!start_with(&lock, Start::Nvtx, probes_failed, |e| reported.borrow_mut().push(e.to_string())));
        assert!(!start_with(&lock, Start::Cuda, |_| panic!("tried again"), |_| panic!("reported twice")));
        assert_eq!(reported.borrow().len(), 1);
        assert!(reported.borrow()[0].contains("GMPROF_PROBE=?"), "{:?}", reported.borrow());

        // CUDA's own start reports a retryable failure: there is no later start.
        let lock = fresh();
        let reported = RefCell::new(0);
        let cupti_failed = |_| Err(failure(true, Error::InvalidState("no libcupti".into())));
        assert!(!start_with(&lock, Start::Cuda, cupti_failed, |_| *reported.borrow_mut() += 1));
        assert_eq!(*reported.borrow(), 1);
        assert_eq!(lock.lock().get(), StartState::Failed);
    }

    #[test]
    fn a_panicking_start_fails_without_unwinding() {
        let lock = fresh();
        assert!(!start_with(&lock, Start::Nvtx, |_| panic!("inside the start"), |_| {}));
        assert_eq!(lock.lock().get(), StartState::Failed);
    }

    #[test]
    fn cuda_must_inject_this_very_file() {
        let this = this_library().expect("dladdr names the object holding this code");
        let exe = std::env::current_exe().unwrap();
        assert!(same_file(&this, &exe), "{} is not the test executable {}", this.display(), exe.display());
        assert!(cuda_injects(Some(exe.as_os_str()), Some(&this)));

        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("libgmprof.so");
        std::fs::copy(&exe, &other).unwrap();
        assert!(!cuda_injects(Some(other.as_os_str()), Some(&this)), "a copy is another library");
        let link = dir.path().join("link.so");
        std::os::unix::fs::symlink(&exe, &link).unwrap();
        assert!(cuda_injects(Some(link.as_os_str()), Some(&this)), "a link to it is the same library");
        assert!(!cuda_injects(None, Some(&this)), "CUDA injects nothing");
        assert!(!cuda_injects(Some(OsStr::new("/no/such/libgmprof.so")), Some(&this)));
        assert!(!cuda_injects(Some(exe.as_os_str()), None));
    }
}
