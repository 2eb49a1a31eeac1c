//! Run-time loading of libcupti and libcuda.
//!
//! Neither library is linked at build time: a program built with gmprof starts on a machine
//! without CUDA, and only the calls that need the GPU fail, with an error that lists every
//! candidate tried and how to fix it. Loaded libraries are kept for the life of the process
//! (CUPTI must never be unloaded while it may still call back into us).

use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::error::{cuda_hint, cupti_hint, Error, LoadAttempt, Result};
use crate::sys::cupti::{CUptiResult, CUresult, CuptiLibrary};
use crate::sys::driver::DriverLibrary;
use crate::sys::nvtx;

/// Environment variable naming the libcupti to load; when set, nothing else is tried.
pub const CUPTI_LIB_ENV: &str = "GMPROF_CUPTI_LIB";
/// Environment variable naming the libcuda to load; when set, nothing else is tried.
pub const CUDA_DRIVER_LIB_ENV: &str = "GMPROF_CUDA_DRIVER_LIB";

/// The loaded CUPTI library. Cheap to copy; valid for the rest of the process.
#[derive(Clone, Copy)]
pub struct Cupti {
    raw: &'static CuptiLibrary,
}

/// The loaded CUDA driver library. Cheap to copy; valid for the rest of the process.
#[derive(Clone, Copy)]
pub struct Driver {
    raw: &'static DriverLibrary,
}

impl std::fmt::Debug for Cupti {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cupti")
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Driver")
    }
}

static CUPTI: OnceLock<&'static CuptiLibrary> = OnceLock::new();
/// The name or path libcupti was loaded by.
static CUPTI_PATH: OnceLock<String> = OnceLock::new();
static DRIVER: OnceLock<&'static DriverLibrary> = OnceLock::new();
/// Serializes first loads, so two threads never both load and leak a library.
static LOAD_LOCK: Mutex<()> = Mutex::new(());

/// Environment variable listing extra directories (separated by `:`) that hold libcupti and
/// its siblings, e.g. the lib directories of NVIDIA's pip wheels. The Python module sets it
/// to those of its own environment before it loads libgmprof.
pub const CUDA_LIB_DIRS_ENV: &str = "GMPROF_CUDA_LIB_DIRS";

/// Where NVIDIA's pip wheels put their libraries, relative to a `site-packages` directory:
/// `nvidia-cuda-cupti-cu13` and the other CUDA 13 wheels share `nvidia/cu13/lib`; the CUDA 12
/// wheels have one directory each (`nvidia/cuda_cupti/lib`, `nvidia/cuda_runtime/lib`).
pub const PIP_LIB_SUBDIRS: [&str; 3] = ["nvidia/cu13/lib", "nvidia/cuda_cupti/lib", "nvidia/cuda_runtime/lib"];

/// The existing lib directories of NVIDIA's pip wheels: each directory of `dirs_var` (the
/// value of `GMPROF_CUDA_LIB_DIRS`), then [`PIP_LIB_SUBDIRS`] of each
/// `lib/python3*/site-packages` beside the directory of `exe` (a virtual environment's or
/// `~/.local`'s `bin/`, where pip installs the `gmprof` binary).
pub fn pip_lib_dirs_from(dirs_var: Option<&std::ffi::OsStr>, exe: Option<&std::path::Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |dir: PathBuf| {
        if dir.is_dir() && !out.contains(&dir) {
            out.push(dir);
        }
    };
    if let Some(var) = dirs_var {
        std::env::split_paths(var).filter(|d| !d.as_os_str().is_empty()).for_each(&mut push);
    }
    if let Some(prefix) = exe.and_then(std::path::Path::parent).and_then(std::path::Path::parent) {
        let pattern = prefix.join("lib/python3*/site-packages");
        let mut sites: Vec<PathBuf> =
            glob::glob(&pattern.to_string_lossy()).map(|paths| paths.flatten().collect()).unwrap_or_default();
        sites.sort();
        for site in sites {
            for sub in PIP_LIB_SUBDIRS {
                push(site.join(sub));
            }
        }
    }
    out
}

/// [`pip_lib_dirs_from`] of this process: `$GMPROF_CUDA_LIB_DIRS` and the running executable.
pub fn pip_lib_dirs() -> Vec<PathBuf> {
    let exe = std::env::current_exe().ok();
    pip_lib_dirs_from(std::env::var_os(CUDA_LIB_DIRS_ENV).as_deref(), exe.as_deref())
}

/// The candidates for libcupti, in search order.
///
/// `GMPROF_CUPTI_LIB` alone when set; else each of `CUDA_HOME` and `CUDA_PATH` under
/// `extras/CUPTI/lib64`, `targets/x86_64-linux/lib` (or `sbsa-linux`) and `lib64`; then the
/// pip wheels' lib directories ([`pip_lib_dirs`]); then `/usr/local/cuda` as the first;
/// then the loader's default names.
pub fn cupti_candidates() -> Vec<String> {
    if let Some(path) = std::env::var_os(CUPTI_LIB_ENV) {
        return vec![PathBuf::from(path).display().to_string()];
    }
    let roots: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|v| std::env::var_os(v).map(PathBuf::from)).collect();
    cupti_candidates_with(&roots, &pip_lib_dirs())
}

/// The candidates for libcupti under the toolkit `roots`, then in `pip_dirs`, then under
/// `/usr/local/cuda`, then the loader's default names.
pub fn cupti_candidates_with(roots: &[PathBuf], pip_dirs: &[PathBuf]) -> Vec<String> {
    const NAMES: [&str; 3] = ["libcupti.so", "libcupti.so.13", "libcupti.so.12"];
    let target = if cfg!(target_arch = "aarch64") { "sbsa-linux" } else { "x86_64-linux" };
    let toolkit_dirs = |root: &PathBuf| -> Vec<PathBuf> {
        ["extras/CUPTI/lib64".to_owned(), format!("targets/{target}/lib"), "lib64".to_owned()]
            .iter()
            .map(|d| root.join(d))
            .collect()
    };
    let mut dirs: Vec<PathBuf> = roots.iter().flat_map(toolkit_dirs).collect();
    dirs.extend(pip_dirs.iter().cloned());
    dirs.extend(toolkit_dirs(&PathBuf::from("/usr/local/cuda")));
    let mut out = Vec::new();
    for dir in dirs {
        for name in NAMES {
            let p = dir.join(name).display().to_string();
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out.extend(NAMES.map(String::from));
    out
}

/// The candidates for libcuda, in search order: `GMPROF_CUDA_DRIVER_LIB` alone when set;
/// else the loader's names (the driver's own install), then `libcuda.so.1` in the pip
/// wheels' lib directories ([`pip_lib_dirs`]; a container may put a compat driver there).
pub fn driver_candidates() -> Vec<String> {
    if let Some(path) = std::env::var_os(CUDA_DRIVER_LIB_ENV) {
        return vec![PathBuf::from(path).display().to_string()];
    }
    driver_candidates_with(&pip_lib_dirs())
}

/// The driver's candidates with `pip_dirs` as the extra directories (see [`driver_candidates`]).
pub fn driver_candidates_with(pip_dirs: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = vec!["libcuda.so.1".into(), "libcuda.so".into(), "/usr/lib/wsl/lib/libcuda.so.1".into()];
    out.extend(pip_dirs.iter().map(|d| d.join("libcuda.so.1").display().to_string()));
    out
}

/// A symbol slot of a generated library table, or [`Error::MissingSymbol`] naming it.
fn resolve<T: Copy>(
    library: &'static str,
    slot: &std::result::Result<T, libloading::Error>,
    name: &'static str,
    context: &str,
) -> Result<T> {
    slot.as_ref().copied().map_err(|e| Error::MissingSymbol {
        library,
        symbol: name,
        context: context.to_owned(),
        reason: e.to_string(),
    })
}

/// Tries each candidate in turn with `open`, recording why each one failed.
fn load_first<T>(
    candidates: &[String],
    open: impl Fn(&str) -> std::result::Result<T, libloading::Error>,
) -> std::result::Result<T, Vec<LoadAttempt>> {
    let mut attempts = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        // A path that is not there needs no dlopen to say so, and its message is clearer.
        if candidate.contains('/') && !std::path::Path::new(candidate).exists() {
            attempts.push(LoadAttempt { candidate: candidate.clone(), reason: "no such file".into() });
            continue;
        }
        match open(candidate) {
            Ok(lib) => return Ok(lib),
            Err(e) => attempts.push(LoadAttempt { candidate: candidate.clone(), reason: e.to_string() }),
        }
    }
    Err(attempts)
}

/// CUPTI's profiler opens libnvperf_host.so and libnvperf_target.so by bare name. When
/// libcupti came from a directory the loader does not search (GMPROF_CUPTI_LIB, a pip
/// wheel), load its siblings first by full path: the dynamic loader then finds them by
/// soname. Failures are ignored; CUPTI reports its own error if it still cannot find them.
fn preload_nvperf_siblings(cupti_path: &str) {
    let Some(dir) = std::path::Path::new(cupti_path).parent().filter(|d| !d.as_os_str().is_empty()) else {
        return;
    };
    for name in ["libnvperf_host.so", "libnvperf_target.so"] {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        // SAFETY: NVIDIA's nvperf libraries have no initializers with preconditions; they are
        // kept loaded for the life of the process (forgotten below).
        match unsafe { libloading::Library::new(&path) } {
            Ok(lib) => std::mem::forget(lib),
            Err(e) => tracing::debug!("gmprof: could not preload {}: {e}", path.display()),
        }
    }
}

impl Cupti {
    /// Loads libcupti on first use; later calls return the same library.
    pub fn load() -> Result<Cupti> {
        if let Some(raw) = CUPTI.get() {
            return Ok(Cupti { raw });
        }
        let _guard = LOAD_LOCK.lock();
        if let Some(raw) = CUPTI.get() {
            return Ok(Cupti { raw });
        }
        let candidates = cupti_candidates();
        let lib = load_first(&candidates, |c| {
            // SAFETY: loading libcupti runs its ELF initializers, which only set up CUPTI's
            // own state; gmprof never unloads it (the box is leaked below).
            unsafe { CuptiLibrary::new(c) }.map(|lib| (lib, c.to_owned()))
        })
        .map_err(|attempts| Error::LibraryNotFound {
            library: "libcupti",
            attempts,
            hint: "install the CUDA toolkit (12.6 or newer; CUPTI ships in extras/CUPTI/lib64 or \
                   targets/<arch>/lib), set CUDA_HOME to it, or point GMPROF_CUPTI_LIB at libcupti.so",
        })?;
        let (lib, path) = lib;
        preload_nvperf_siblings(&path);
        let raw: &'static CuptiLibrary = Box::leak(Box::new(lib));
        let _ = CUPTI_PATH.set(path.clone());
        let _ = CUPTI.set(raw);
        tracing::debug!("gmprof: loaded {path}");
        Ok(Cupti { raw })
    }

    /// A libcupti stand-in whose every function is missing (each call fails with
    /// `Error::MissingSymbol`), for host-side benchmarks of code that holds a [`Cupti`] on
    /// paths that never call it. Not the process's libcupti.
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn stand_in() -> Result<Cupti> {
        // SAFETY: a handle to the running program; looking up CUPTI's names in it finds
        // nothing and runs no code.
        let lib = unsafe { CuptiLibrary::from_library(libloading::os::unix::Library::this()) }
            .map_err(|e| Error::InvalidState(format!("a libcupti stand-in: {e}")))?;
        Ok(Cupti { raw: Box::leak(Box::new(lib)) })
    }

    /// Puts `cupti` and `driver` where [`Cupti::load`] and [`Driver::load`] find their
    /// libraries, for the rest of the process: the scripted libraries of the fault-injection
    /// tests ([`crate::checked::scripted`]), installed in a child process before anything
    /// loads CUPTI. Fails once either library is loaded.
    #[cfg(test)]
    pub(crate) fn install_scripted(cupti: CuptiLibrary, driver: DriverLibrary, name: &str) -> Result<()> {
        let _guard = LOAD_LOCK.lock();
        if CUPTI.get().is_some() || DRIVER.get().is_some() {
            return Err(Error::InvalidState("libcupti or libcuda is loaded already: install first".into()));
        }
        let _ = CUPTI_PATH.set(name.to_owned());
        let _ = CUPTI.set(Box::leak(Box::new(cupti)));
        let _ = DRIVER.set(Box::leak(Box::new(driver)));
        Ok(())
    }

    /// The name or path this libcupti was loaded by.
    pub fn path(&self) -> &'static str {
        CUPTI_PATH.get().map_or("libcupti", String::as_str)
    }

    /// CUPTI's NVTX injection entry point, `InitializeInjectionNvtx2`, in this libcupti: the
    /// function NVTX calls when `NVTX_INJECTION64_PATH` names libcupti, which installs
    /// CUPTI's NVTX handlers (they raise the `CUPTI_CB_DOMAIN_NVTX` callbacks).
    pub fn nvtx_injection_entry(&self) -> Result<nvtx::NvtxInitializeInjectionFunc> {
        let path = self.path();
        // SAFETY: the same name or path as the loaded libcupti: dlopen finds the library
        // already loaded and only raises its reference count; no initializer runs again.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| Error::MissingSymbol {
            library: "libcupti",
            symbol: "InitializeInjectionNvtx2",
            context: "reopening libcupti for its NVTX entry point".into(),
            reason: e.to_string(),
        })?;
        // SAFETY: CUPTI exports InitializeInjectionNvtx2 with NVTX's injection signature
        // (`int (*)(NvtxGetExportTableFunc_t)`), which the type declares.
        let entry = unsafe { lib.get::<nvtx::NvtxInitializeInjectionFunc>(b"InitializeInjectionNvtx2\0") }
            .map(|symbol| *symbol)
            .map_err(|e| Error::MissingSymbol {
                library: "libcupti",
                symbol: "InitializeInjectionNvtx2",
                context: "forwarding NVTX's injection to CUPTI".into(),
                reason: e.to_string(),
            });
        // libcupti is never unloaded: the extra reference keeps the pointer valid.
        std::mem::forget(lib);
        entry
    }

    /// The generated function table.
    pub fn raw(&self) -> &'static CuptiLibrary {
        self.raw
    }

    /// The function pointer for `name`, or [`Error::MissingSymbol`].
    pub(crate) fn symbol<T: Copy>(
        &self,
        slot: &std::result::Result<T, libloading::Error>,
        name: &'static str,
        context: &str,
    ) -> Result<T> {
        resolve("libcupti", slot, name, context)
    }

    /// `Ok` for `CUPTI_SUCCESS`, else [`Error::Cupti`] with CUPTI's own description.
    pub(crate) fn check(&self, code: CUptiResult, api: &'static str, context: &str) -> Result<()> {
        if code == CUptiResult::CUPTI_SUCCESS {
            return Ok(());
        }
        Err(self.error(code, api, context))
    }

    /// Builds the error for a failed CUPTI call.
    pub(crate) fn error(&self, code: CUptiResult, api: &'static str, context: &str) -> Error {
        let code_name = cupti_result_name(code);
        let hint = cupti_hint(&code_name);
        Error::Cupti {
            api,
            code: code.0,
            description: self.result_string(code),
            code_name,
            context: context.to_owned(),
            hint,
        }
    }

    /// CUPTI's description of a result code (`cuptiGetResultString`).
    pub fn result_string(&self, code: CUptiResult) -> String {
        let Ok(f) = self.raw.cuptiGetResultString.as_ref() else {
            return "no description (cuptiGetResultString missing)".into();
        };
        let mut text: *const std::os::raw::c_char = std::ptr::null();
        // SAFETY: `text` is a valid out-pointer; CUPTI stores a pointer to a static string.
        let rc = unsafe { f(code, &mut text) };
        if rc != CUptiResult::CUPTI_SUCCESS || text.is_null() {
            return "no description".into();
        }
        // SAFETY: CUPTI returned a non-null, NUL-terminated static string.
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }
}

/// The enum name of a CUPTI result code, e.g. `CUPTI_ERROR_HARDWARE_BUSY`.
pub fn cupti_result_name(code: CUptiResult) -> String {
    // Every code of CUDA 13.0's cupti_result.h; newer codes fall through to the number.
    let name = match code {
        CUptiResult::CUPTI_SUCCESS => "CUPTI_SUCCESS",
        CUptiResult::CUPTI_ERROR_INVALID_PARAMETER => "CUPTI_ERROR_INVALID_PARAMETER",
        CUptiResult::CUPTI_ERROR_INVALID_DEVICE => "CUPTI_ERROR_INVALID_DEVICE",
        CUptiResult::CUPTI_ERROR_INVALID_CONTEXT => "CUPTI_ERROR_INVALID_CONTEXT",
        CUptiResult::CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID => "CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID",
        CUptiResult::CUPTI_ERROR_INVALID_EVENT_ID => "CUPTI_ERROR_INVALID_EVENT_ID",
        CUptiResult::CUPTI_ERROR_INVALID_EVENT_NAME => "CUPTI_ERROR_INVALID_EVENT_NAME",
        CUptiResult::CUPTI_ERROR_INVALID_OPERATION => "CUPTI_ERROR_INVALID_OPERATION",
        CUptiResult::CUPTI_ERROR_OUT_OF_MEMORY => "CUPTI_ERROR_OUT_OF_MEMORY",
        CUptiResult::CUPTI_ERROR_HARDWARE => "CUPTI_ERROR_HARDWARE",
        CUptiResult::CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT => "CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT",
        CUptiResult::CUPTI_ERROR_API_NOT_IMPLEMENTED => "CUPTI_ERROR_API_NOT_IMPLEMENTED",
        CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED => "CUPTI_ERROR_MAX_LIMIT_REACHED",
        CUptiResult::CUPTI_ERROR_NOT_READY => "CUPTI_ERROR_NOT_READY",
        CUptiResult::CUPTI_ERROR_NOT_COMPATIBLE => "CUPTI_ERROR_NOT_COMPATIBLE",
        CUptiResult::CUPTI_ERROR_NOT_INITIALIZED => "CUPTI_ERROR_NOT_INITIALIZED",
        CUptiResult::CUPTI_ERROR_INVALID_METRIC_ID => "CUPTI_ERROR_INVALID_METRIC_ID",
        CUptiResult::CUPTI_ERROR_INVALID_METRIC_NAME => "CUPTI_ERROR_INVALID_METRIC_NAME",
        CUptiResult::CUPTI_ERROR_QUEUE_EMPTY => "CUPTI_ERROR_QUEUE_EMPTY",
        CUptiResult::CUPTI_ERROR_INVALID_HANDLE => "CUPTI_ERROR_INVALID_HANDLE",
        CUptiResult::CUPTI_ERROR_INVALID_STREAM => "CUPTI_ERROR_INVALID_STREAM",
        CUptiResult::CUPTI_ERROR_INVALID_KIND => "CUPTI_ERROR_INVALID_KIND",
        CUptiResult::CUPTI_ERROR_INVALID_EVENT_VALUE => "CUPTI_ERROR_INVALID_EVENT_VALUE",
        CUptiResult::CUPTI_ERROR_DISABLED => "CUPTI_ERROR_DISABLED",
        CUptiResult::CUPTI_ERROR_INVALID_MODULE => "CUPTI_ERROR_INVALID_MODULE",
        CUptiResult::CUPTI_ERROR_INVALID_METRIC_VALUE => "CUPTI_ERROR_INVALID_METRIC_VALUE",
        CUptiResult::CUPTI_ERROR_HARDWARE_BUSY => "CUPTI_ERROR_HARDWARE_BUSY",
        CUptiResult::CUPTI_ERROR_NOT_SUPPORTED => "CUPTI_ERROR_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED => "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE => {
            "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE"
        }
        CUptiResult::CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS => {
            "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS"
        }
        CUptiResult::CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED => "CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED => "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE => "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE",
        CUptiResult::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
        CUptiResult::CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED => "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED",
        CUptiResult::CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE => "CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE",
        CUptiResult::CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED => "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES => {
            "CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES"
        }
        CUptiResult::CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED => {
            "CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED"
        }
        CUptiResult::CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED => "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED => "CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED => "CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED => "CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_INVALID_CHIP_NAME => "CUPTI_ERROR_INVALID_CHIP_NAME",
        CUptiResult::CUPTI_ERROR_UNKNOWN => "CUPTI_ERROR_UNKNOWN",
        _ => return format!("CUPTI_ERROR_{}", code.0),
    };
    name.to_owned()
}

impl Driver {
    /// A libcuda stand-in whose every function is missing, as [`Cupti::stand_in`].
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn stand_in() -> Result<Driver> {
        // SAFETY: as in Cupti::stand_in.
        let lib = unsafe { DriverLibrary::from_library(libloading::os::unix::Library::this()) }
            .map_err(|e| Error::InvalidState(format!("a libcuda stand-in: {e}")))?;
        Ok(Driver { raw: Box::leak(Box::new(lib)) })
    }

    /// Loads libcuda on first use; later calls return the same library.
    pub fn load() -> Result<Driver> {
        if let Some(raw) = DRIVER.get() {
            return Ok(Driver { raw });
        }
        let _guard = LOAD_LOCK.lock();
        if let Some(raw) = DRIVER.get() {
            return Ok(Driver { raw });
        }
        let candidates = driver_candidates();
        let lib = load_first(&candidates, |c| {
            // SAFETY: loading libcuda runs the driver's initializers; it is never unloaded.
            unsafe { DriverLibrary::new(c) }
        })
        .map_err(|attempts| Error::LibraryNotFound {
            library: "libcuda",
            attempts,
            hint: "no NVIDIA driver found: install the NVIDIA driver (check with `nvidia-smi`), \
                   or point GMPROF_CUDA_DRIVER_LIB at libcuda.so.1",
        })?;
        let raw: &'static DriverLibrary = Box::leak(Box::new(lib));
        let _ = DRIVER.set(raw);
        Ok(Driver { raw })
    }

    /// The generated function table.
    pub fn raw(&self) -> &'static DriverLibrary {
        self.raw
    }

    /// The function pointer for `name`, or [`Error::MissingSymbol`].
    pub(crate) fn symbol<T: Copy>(
        &self,
        slot: &std::result::Result<T, libloading::Error>,
        name: &'static str,
        context: &str,
    ) -> Result<T> {
        resolve("libcuda", slot, name, context)
    }

    /// `Ok` for `CUDA_SUCCESS`, else [`Error::Cuda`] with the driver's description.
    pub(crate) fn check(&self, code: CUresult, api: &'static str, context: &str) -> Result<()> {
        if code == CUresult::CUDA_SUCCESS {
            return Ok(());
        }
        let (code_name, description) = self.describe(code);
        let hint = cuda_hint(&code_name);
        Err(Error::Cuda { api, code: code.0, code_name, description, context: context.to_owned(), hint })
    }

    /// The enum name and description of a driver result code.
    pub fn describe(&self, code: CUresult) -> (String, String) {
        let read = |slot: &std::result::Result<
            unsafe extern "C" fn(CUresult, *mut *const std::os::raw::c_char) -> CUresult,
            libloading::Error,
        >| {
            let f = slot.as_ref().ok()?;
            let mut text: *const std::os::raw::c_char = std::ptr::null();
            // SAFETY: `text` is a valid out-pointer; the driver stores a static string or
            // returns an error for unknown codes.
            let rc = unsafe { f(code, &mut text) };
            if rc != CUresult::CUDA_SUCCESS || text.is_null() {
                return None;
            }
            // SAFETY: non-null, NUL-terminated static string from the driver.
            Some(unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
        };
        (
            read(&self.raw.cuGetErrorName).unwrap_or_else(|| format!("CUDA_ERROR_{}", code.0)),
            read(&self.raw.cuGetErrorString).unwrap_or_else(|| "no description".into()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_first_reports_every_attempt() {
        let candidates = vec!["/definitely/not/here/libcupti.so".to_owned(), "libgmprof-no-such-lib.so".to_owned()];
        let err = load_first(&candidates, |c| {
            // SAFETY: loading a library that does not exist runs no code.
            unsafe { libloading::Library::new(c) }
        })
        .map(|_| ())
        .expect_err("nothing to load");
        assert_eq!(err.len(), 2);
        assert_eq!(err[0].reason, "no such file");
        assert!(err[1].candidate == "libgmprof-no-such-lib.so" && !err[1].reason.is_empty());
    }

    #[test]
    fn result_names_cover_the_actionable_codes() {
        assert_eq!(cupti_result_name(CUptiResult::CUPTI_ERROR_HARDWARE_BUSY), "CUPTI_ERROR_HARDWARE_BUSY");
        assert_eq!(cupti_result_name(CUptiResult(999_999)), "CUPTI_ERROR_999999");
        assert!(cupti_hint(&cupti_result_name(CUptiResult::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)).is_some());
    }

    #[test]
    fn pip_wheel_lib_dirs_are_searched_after_cuda_home_and_before_usr_local() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("venv/lib/python3.12/site-packages");
        let cu13 = site.join("nvidia/cu13/lib");
        let cu12 = site.join("nvidia/cuda_cupti/lib");
        std::fs::create_dir_all(&cu13).unwrap();
        std::fs::create_dir_all(&cu12).unwrap();
        std::fs::write(cu13.join("libcupti.so.13"), b"").unwrap();
        std::fs::create_dir_all(tmp.path().join("venv/bin")).unwrap();
        let extra = tmp.path().join("extra");
        std::fs::create_dir_all(&extra).unwrap();
        let missing = tmp.path().join("missing");
        let var = std::env::join_paths([&extra, &missing]).unwrap();

        let exe = tmp.path().join("venv/bin/gmprof");
        let dirs = pip_lib_dirs_from(Some(&var), Some(&exe));
        // The variable's directories first (missing ones dropped), then the venv's, in order.
        assert_eq!(dirs, vec![extra.clone(), cu13.clone(), cu12.clone()]);
        assert!(pip_lib_dirs_from(None, Some(&tmp.path().join("elsewhere/bin/gmprof"))).is_empty());

        let home = PathBuf::from("/opt/cuda-home");
        let c = cupti_candidates_with(std::slice::from_ref(&home), &dirs);
        let at = |p: String| c.iter().position(|x| *x == p).unwrap_or_else(|| panic!("{p} not in {c:?}"));
        let home_at = at(home.join("extras/CUPTI/lib64/libcupti.so").display().to_string());
        let pip_at = at(cu13.join("libcupti.so.13").display().to_string());
        let usr_at = at("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so".to_owned());
        assert!(home_at < pip_at && pip_at < usr_at, "{c:?}");
        assert_eq!(c.last().map(String::as_str), Some("libcupti.so.12"));

        let d = driver_candidates_with(&dirs);
        assert_eq!(d[0], "libcuda.so.1");
        assert_eq!(d.last().unwrap(), &cu12.join("libcuda.so.1").display().to_string());
    }
}
