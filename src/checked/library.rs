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
static DRIVER: OnceLock<&'static DriverLibrary> = OnceLock::new();
/// Serializes first loads, so two threads never both load and leak a library.
static LOAD_LOCK: Mutex<()> = Mutex::new(());

/// The candidates for libcupti, in search order.
///
/// `GMPROF_CUPTI_LIB` alone when set; else each of `CUDA_HOME`, `CUDA_PATH` and
/// `/usr/local/cuda` under `extras/CUPTI/lib64`, `targets/x86_64-linux/lib` (or
/// `sbsa-linux`) and `lib64`; then the loader's default names.
pub fn cupti_candidates() -> Vec<String> {
    if let Some(path) = std::env::var_os(CUPTI_LIB_ENV) {
        return vec![PathBuf::from(path).display().to_string()];
    }
    let mut roots: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|v| std::env::var_os(v).map(PathBuf::from)).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    let target = if cfg!(target_arch = "aarch64") { "sbsa-linux" } else { "x86_64-linux" };
    let mut out = Vec::new();
    for root in roots {
        for dir in ["extras/CUPTI/lib64".to_owned(), format!("targets/{target}/lib"), "lib64".to_owned()] {
            for name in ["libcupti.so", "libcupti.so.13", "libcupti.so.12"] {
                let p = root.join(&dir).join(name).display().to_string();
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out.extend(["libcupti.so", "libcupti.so.13", "libcupti.so.12"].map(String::from));
    out
}

/// The candidates for libcuda, in search order.
pub fn driver_candidates() -> Vec<String> {
    if let Some(path) = std::env::var_os(CUDA_DRIVER_LIB_ENV) {
        return vec![PathBuf::from(path).display().to_string()];
    }
    vec!["libcuda.so.1".into(), "libcuda.so".into(), "/usr/lib/wsl/lib/libcuda.so.1".into()]
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
        let _ = CUPTI.set(raw);
        tracing::debug!("gmprof: loaded {path}");
        Ok(Cupti { raw })
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
}
