//! The driver calls the probe engine needs: function names and modules, loading PTX through
//! the driver's JIT, and map buffers. They are functions of the generated libcuda table
//! ([`crate::sys::driver`], loaded at run time with the rest of gmprof's driver calls), and
//! every result goes through the driver's result check.

use std::ffi::{c_char, c_void, CStr, CString};

use super::library::Driver;
use crate::error::{Error, Result};
use crate::sys::cupti::{CUfunction, CUfunction_attribute, CUjit_option, CUkernel, CUlibrary, CUmodule, CUstream};

/// A `CUfunction` (or a runtime kernel's `CUkernel`), as the launch parameters hold it.
pub type RawFunction = *mut c_void;
/// A `CUmodule`.
pub type RawModule = *mut c_void;
/// A `CUlibrary`.
pub type RawLibrary = *mut c_void;

/// The probe engine's driver functions: the process's libcuda.
pub struct ModuleApi {
    driver: Driver,
}

impl std::fmt::Debug for ModuleApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModuleApi")
    }
}

static API: std::sync::OnceLock<ModuleApi> = std::sync::OnceLock::new();

impl ModuleApi {
    /// The driver, loaded once per process (the program has already loaded it).
    pub fn get() -> Result<&'static ModuleApi> {
        if let Some(api) = API.get() {
            return Ok(api);
        }
        let driver = Driver::load()?;
        Ok(API.get_or_init(|| ModuleApi { driver }))
    }

    /// A function's attribute (`CUfunction_attribute`), `None` when the driver refuses.
    pub(crate) fn function_attribute(&self, f: RawFunction, attribute: i32) -> Option<i32> {
        let mut v = 0;
        call_driver!(self.driver, cuFuncGetAttribute, "reading a kernel's attribute", |get| {
            // SAFETY: valid out-pointer and function handle.
            unsafe { get(&mut v, CUfunction_attribute(attribute as u32), f as CUfunction) }
        })
        .ok()
        .map(|()| v)
    }

    /// Sets a function's attribute (`CUfunction_attribute`, e.g.
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub(crate) fn set_function_attribute(&self, f: RawFunction, attribute: i32, value: i32) -> Result<()> {
        call_driver!(self.driver, cuFuncSetAttribute, "setting a probed function's attribute", |set| {
            // SAFETY: a function handle the driver gave gmprof, a plain attribute and value.
            unsafe { set(f as CUfunction, CUfunction_attribute(attribute as u32), value) }
        })
    }

    /// A function's mangled name; a runtime kernel's handle (a `CUkernel`) is named through
    /// `cuKernelGetName`.
    pub(crate) fn function_name(&self, f: RawFunction) -> Result<String> {
        let mut name: *const c_char = std::ptr::null();
        let by_function = call_driver!(self.driver, cuFuncGetName, "naming a kernel", |get| {
            // SAFETY: `name` is a valid out-pointer; `f` is the handle the program launched.
            unsafe { get(&mut name, f as CUfunction) }
        });
        if let Err(e) = by_function {
            let by_kernel = call_driver!(self.driver, cuKernelGetName, "naming a kernel", |get| {
                // SAFETY: as above; the driver checks whether `f` is a CUkernel.
                unsafe { get(&mut name, f as CUkernel) }
            });
            if by_kernel.is_err() {
                return Err(e);
            }
        }
        if name.is_null() {
            return Err(Error::InvalidState("cuFuncGetName returned no name".into()));
        }
        // SAFETY: the driver returns a NUL-terminated string owned by the function.
        Ok(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
    }

    /// The module a function belongs to.
    pub(crate) fn function_module(&self, f: RawFunction) -> Result<RawModule> {
        let mut m: CUmodule = std::ptr::null_mut();
        call_driver!(self.driver, cuFuncGetModule, "finding a kernel's module", |get| {
            // SAFETY: valid out-pointer and function handle.
            unsafe { get(&mut m, f as CUfunction) }
        })?;
        Ok(m as RawModule)
    }

    /// The module of a library in the current context.
    pub(crate) fn library_module(&self, lib: RawLibrary) -> Result<RawModule> {
        let mut m: CUmodule = std::ptr::null_mut();
        call_driver!(self.driver, cuLibraryGetModule, "finding a library's module", |get| {
            // SAFETY: valid out-pointer; `lib` is the library the program loaded.
            unsafe { get(&mut m, lib as CUlibrary) }
        })?;
        Ok(m as RawModule)
    }

    /// Loads PTX text through the driver's JIT; a JIT error carries its log.
    pub fn load_ptx(&self, ptx: &str) -> Result<RawModule> {
        let text = CString::new(ptx).map_err(|_| Error::InvalidState("PTX with a NUL byte".into()))?;
        let mut log = vec![0u8; 8192];
        let mut options = [CUjit_option::CU_JIT_ERROR_LOG_BUFFER, CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        let mut m: CUmodule = std::ptr::null_mut();
        call_driver!(self.driver, cuModuleLoadDataEx, "loading probed PTX", |load| {
            // SAFETY: `text` is NUL-terminated PTX; the options name a buffer that outlives
            // the call.
            unsafe { load(&mut m, text.as_ptr() as *const c_void, 2, options.as_mut_ptr(), values.as_mut_ptr()) }
        })
        .map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Error::InvalidState(format!("{e}; JIT log: {}", String::from_utf8_lossy(&log[..end]).trim()))
        })?;
        Ok(m as RawModule)
    }

    /// A module's function by name.
    pub(crate) fn function(&self, m: RawModule, name: &str) -> Result<RawFunction> {
        let c = CString::new(name).map_err(|_| Error::InvalidState("a kernel name with a NUL byte".into()))?;
        let mut f: CUfunction = std::ptr::null_mut();
        call_driver!(self.driver, cuModuleGetFunction, "finding the probed kernel", |get| {
            // SAFETY: valid out-pointer, live module, NUL-terminated name.
            unsafe { get(&mut f, m as CUmodule, c.as_ptr()) }
        })?;
        Ok(f as RawFunction)
    }

    /// The device address of a module's global variable.
    pub(crate) fn global(&self, m: RawModule, name: &str) -> Result<u64> {
        let c = CString::new(name).map_err(|_| Error::InvalidState("a variable name with a NUL byte".into()))?;
        let (mut p, mut size) = (0, 0usize);
        call_driver!(self.driver, cuModuleGetGlobal_v2, "finding a probe map variable", |get| {
            // SAFETY: valid out-pointers, live module, NUL-terminated name.
            unsafe { get(&mut p, &mut size, m as CUmodule, c.as_ptr()) }
        })?;
        Ok(p)
    }

    /// Writes `value` to the device address `p` on `stream` (the value is staged before
    /// this returns).
    pub(crate) fn write_u64(&self, p: u64, value: u64, stream: CUstream) -> Result<()> {
        call_driver!(self.driver, cuMemcpyHtoDAsync_v2, "setting a probe map variable", |copy| {
            // SAFETY: `p` is an 8-byte device variable; pageable source memory is staged by
            // the driver before the call returns.
            unsafe { copy(p, &value as *const u64 as *const c_void, 8, stream) }
        })
    }

    /// Device memory of `bytes` bytes, zeroed on `stream` (ordered before what the stream
    /// runs next).
    pub(crate) fn alloc_zeroed(&self, bytes: usize, stream: CUstream) -> Result<u64> {
        let mut p = 0;
        call_driver!(self.driver, cuMemAlloc_v2, "a probe map buffer", |alloc| {
            // SAFETY: valid out-pointer.
            unsafe { alloc(&mut p, bytes.max(1)) }
        })?;
        let zeroed = call_driver!(self.driver, cuMemsetD8Async, "zeroing a probe map buffer", |memset| {
            // SAFETY: `p` holds `bytes` bytes; `stream` is the launch's stream.
            unsafe { memset(p, 0, bytes, stream) }
        });
        if let Err(e) = zeroed {
            self.free(p);
            return Err(e);
        }
        Ok(p)
    }

    /// Frees device memory from `alloc_zeroed`; a failure is logged.
    pub fn free(&self, p: u64) {
        let freed = call_driver!(self.driver, cuMemFree_v2, "a probe map buffer", |free| {
            // SAFETY: `p` came from cuMemAlloc and is freed once.
            unsafe { free(p) }
        });
        if let Err(e) = freed {
            tracing::warn!("gmprof: {e}");
        }
    }

    /// Waits for `stream`.
    pub(crate) fn synchronize(&self, stream: CUstream) -> Result<()> {
        call_driver!(self.driver, cuStreamSynchronize, "waiting for a probed kernel", |sync| {
            // SAFETY: `stream` is the launch's stream (null: the default stream).
            unsafe { sync(stream) }
        })
    }

    /// The calling thread's current context, as a key (0: none).
    pub(crate) fn current_context(&self) -> usize {
        crate::checked::driver::current_context(&self.driver).ok().flatten().map_or(0, |c| c.as_raw() as usize)
    }

    /// Waits for all the work (every stream's) of context `ctx` (a key from
    /// [`ModuleApi::current_context`]), made current for the wait; the calling thread's
    /// current context is restored after.
    pub(crate) fn synchronize_context(&self, ctx: usize) -> Result<()> {
        use crate::checked::driver::{current_context, set_current, synchronize, Context};
        let before = current_context(&self.driver)?;
        let target = Context(ctx as crate::sys::cupti::CUcontext);
        if before != Some(target) {
            set_current(&self.driver, target)?;
        }
        let synced = synchronize(&self.driver);
        if let Some(b) = before.filter(|b| *b != target) {
            set_current(&self.driver, b)?;
        }
        synced
    }

    /// Copies `bytes` bytes of device memory at `p` to the host.
    pub fn read(&self, p: u64, bytes: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; bytes];
        call_driver!(self.driver, cuMemcpyDtoH_v2, "reading a probe map buffer", |copy| {
            // SAFETY: `out` has `bytes` bytes; `p` is a device buffer of at least that size.
            unsafe { copy(out.as_mut_ptr() as *mut c_void, p, bytes) }
        })?;
        Ok(out)
    }
}
