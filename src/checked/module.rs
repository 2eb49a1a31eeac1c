//! The driver calls the probe engine needs: function names and modules, loading PTX through
//! the driver's JIT, and map buffers. They are looked up by name in the libcuda that is
//! already loaded (the generated table holds only what profiling needs), and every result
//! goes through the driver's result check.

use std::ffi::{c_char, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;

use super::library::Driver;
use crate::error::{Error, Result};
use crate::sys::cupti::{CUresult, CUstream};

/// A `CUfunction`.
pub type RawFunction = *mut c_void;
/// A `CUmodule`.
pub type RawModule = *mut c_void;
/// A `CUlibrary`.
pub type RawLibrary = *mut c_void;

type GetName = unsafe extern "C" fn(*mut *const c_char, RawFunction) -> CUresult;
type GetModule = unsafe extern "C" fn(*mut RawModule, RawFunction) -> CUresult;
type LibModule = unsafe extern "C" fn(*mut RawModule, RawLibrary) -> CUresult;
type LoadDataEx =
    unsafe extern "C" fn(*mut RawModule, *const c_void, c_uint, *mut c_uint, *mut *mut c_void) -> CUresult;
type GetFunction = unsafe extern "C" fn(*mut RawFunction, RawModule, *const c_char) -> CUresult;
type MemAlloc = unsafe extern "C" fn(*mut u64, usize) -> CUresult;
type MemFree = unsafe extern "C" fn(u64) -> CUresult;
type MemsetAsync = unsafe extern "C" fn(u64, u8, usize, CUstream) -> CUresult;
type CopyDtoH = unsafe extern "C" fn(*mut c_void, u64, usize) -> CUresult;
type StreamSync = unsafe extern "C" fn(CUstream) -> CUresult;
type GetGlobal = unsafe extern "C" fn(*mut u64, *mut usize, RawModule, *const c_char) -> CUresult;
type CopyHtoDAsync = unsafe extern "C" fn(u64, *const c_void, usize, CUstream) -> CUresult;
type FuncAttr = unsafe extern "C" fn(*mut i32, i32, RawFunction) -> CUresult;
type FuncSetAttr = unsafe extern "C" fn(RawFunction, i32, i32) -> CUresult;

/// The probe engine's driver functions.
pub struct ModuleApi {
    driver: Driver,
    func_get_name: GetName,
    kernel_get_name: Option<GetName>,
    func_get_attribute: Option<FuncAttr>,
    func_set_attribute: Option<FuncSetAttr>,
    func_get_module: GetModule,
    library_get_module: Option<LibModule>,
    module_load_data_ex: LoadDataEx,
    module_get_function: GetFunction,
    mem_alloc: MemAlloc,
    module_get_global: GetGlobal,
    copy_htod_async: CopyHtoDAsync,
    mem_free: MemFree,
    memset_async: MemsetAsync,
    copy_dtoh: CopyDtoH,
    stream_sync: StreamSync,
}

impl std::fmt::Debug for ModuleApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModuleApi")
    }
}

static API: OnceLock<std::result::Result<ModuleApi, String>> = OnceLock::new();

const CU_JIT_ERROR_LOG_BUFFER: c_uint = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_uint = 6;

fn lookup<T: Copy>(lib: &'static libloading::Library, name: &str) -> std::result::Result<T, String> {
    // SAFETY: `T` is the function-pointer type of the symbol's declaration in cuda.h.
    unsafe { lib.get::<T>(name.as_bytes()) }.map(|s| *s).map_err(|e| format!("libcuda has no {name}: {e}"))
}

impl ModuleApi {
    /// Loads the functions once per process.
    pub fn get() -> Result<&'static ModuleApi> {
        API.get_or_init(|| {
            let driver = Driver::load().map_err(|e| e.to_string())?;
            let candidates = super::library::driver_candidates();
            let lib = candidates
                .iter()
                // SAFETY: libcuda is already loaded by the program; this only takes a handle.
                .find_map(|c| unsafe { libloading::Library::new(c) }.ok())
                .ok_or("libcuda could not be opened")?;
            let lib: &'static libloading::Library = Box::leak(Box::new(lib));
            Ok(ModuleApi {
                driver,
                func_get_name: lookup(lib, "cuFuncGetName")?,
                kernel_get_name: lookup(lib, "cuKernelGetName").ok(),
                func_get_attribute: lookup(lib, "cuFuncGetAttribute").ok(),
                func_set_attribute: lookup(lib, "cuFuncSetAttribute").ok(),
                func_get_module: lookup(lib, "cuFuncGetModule")?,
                library_get_module: lookup(lib, "cuLibraryGetModule").ok(),
                module_load_data_ex: lookup(lib, "cuModuleLoadDataEx")?,
                module_get_function: lookup(lib, "cuModuleGetFunction")?,
                mem_alloc: lookup(lib, "cuMemAlloc_v2")?,
                module_get_global: lookup(lib, "cuModuleGetGlobal_v2")?,
                copy_htod_async: lookup(lib, "cuMemcpyHtoDAsync_v2")?,
                mem_free: lookup(lib, "cuMemFree_v2")?,
                memset_async: lookup(lib, "cuMemsetD8Async")?,
                copy_dtoh: lookup(lib, "cuMemcpyDtoH_v2")?,
                stream_sync: lookup(lib, "cuStreamSynchronize")?,
            })
        })
        .as_ref()
        .map_err(|e| Error::InvalidState(format!("probe driver functions: {e}")))
    }

    /// A function's attribute (`CUfunction_attribute`), `None` when the driver refuses.
    pub(crate) fn function_attribute(&self, f: RawFunction, attribute: i32) -> Option<i32> {
        let get = self.func_get_attribute?;
        let mut v = 0;
        // SAFETY: valid out-pointer and function handle.
        (unsafe { get(&mut v, attribute, f) } == CUresult::CUDA_SUCCESS).then_some(v)
    }

    /// Sets a function's attribute (`CUfunction_attribute`, e.g.
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub(crate) fn set_function_attribute(&self, f: RawFunction, attribute: i32, value: i32) -> Result<()> {
        let set =
            self.func_set_attribute.ok_or_else(|| Error::InvalidState("libcuda has no cuFuncSetAttribute".into()))?;
        // SAFETY: a function handle the driver gave gmprof, a plain attribute and value.
        let code = unsafe { set(f, attribute, value) };
        self.driver.check(code, "cuFuncSetAttribute", "setting a probed function's attribute")
    }

    /// A function's mangled name; a runtime kernel's handle (a `CUkernel`) is named through
    /// `cuKernelGetName`.
    pub(crate) fn function_name(&self, f: RawFunction) -> Result<String> {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: `name` is a valid out-pointer; `f` is the handle the program launched.
        let code = unsafe { (self.func_get_name)(&mut name, f) };
        if code != CUresult::CUDA_SUCCESS {
            if let Some(kernel_name) = self.kernel_get_name {
                // SAFETY: as above; the driver checks whether `f` is a CUkernel.
                if unsafe { kernel_name(&mut name, f) } != CUresult::CUDA_SUCCESS {
                    name = std::ptr::null();
                }
            }
        }
        if name.is_null() {
            self.driver.check(code, "cuFuncGetName", "naming a kernel")?;
        }
        if name.is_null() {
            return Err(Error::InvalidState("cuFuncGetName returned no name".into()));
        }
        // SAFETY: the driver returns a NUL-terminated string owned by the function.
        Ok(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
    }

    /// The module a function belongs to.
    pub(crate) fn function_module(&self, f: RawFunction) -> Result<RawModule> {
        let mut m: RawModule = std::ptr::null_mut();
        // SAFETY: valid out-pointer and function handle.
        let code = unsafe { (self.func_get_module)(&mut m, f) };
        self.driver.check(code, "cuFuncGetModule", "finding a kernel's module")?;
        Ok(m)
    }

    /// The module of a library in the current context.
    pub(crate) fn library_module(&self, lib: RawLibrary) -> Result<RawModule> {
        let f =
            self.library_get_module.ok_or_else(|| Error::InvalidState("libcuda has no cuLibraryGetModule".into()))?;
        let mut m: RawModule = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `lib` is the library the program loaded.
        self.driver.check(unsafe { f(&mut m, lib) }, "cuLibraryGetModule", "finding a library's module")?;
        Ok(m)
    }

    /// Loads PTX text through the driver's JIT; a JIT error carries its log.
    pub fn load_ptx(&self, ptx: &str) -> Result<RawModule> {
        let text = CString::new(ptx).map_err(|_| Error::InvalidState("PTX with a NUL byte".into()))?;
        let mut log = vec![0u8; 8192];
        let mut options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        let mut m: RawModule = std::ptr::null_mut();
        // SAFETY: `text` is NUL-terminated PTX; the options name a buffer that outlives the call.
        let code = unsafe {
            (self.module_load_data_ex)(
                &mut m,
                text.as_ptr() as *const c_void,
                2,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        self.driver.check(code, "cuModuleLoadDataEx", "loading probed PTX").map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Error::InvalidState(format!("{e}; JIT log: {}", String::from_utf8_lossy(&log[..end]).trim()))
        })?;
        Ok(m)
    }

    /// A module's function by name.
    pub(crate) fn function(&self, m: RawModule, name: &str) -> Result<RawFunction> {
        let c = CString::new(name).map_err(|_| Error::InvalidState("a kernel name with a NUL byte".into()))?;
        let mut f: RawFunction = std::ptr::null_mut();
        // SAFETY: valid out-pointer, live module, NUL-terminated name.
        let code = unsafe { (self.module_get_function)(&mut f, m, c.as_ptr()) };
        self.driver.check(code, "cuModuleGetFunction", "finding the probed kernel")?;
        Ok(f)
    }

    /// The device address of a module's global variable.
    pub(crate) fn global(&self, m: RawModule, name: &str) -> Result<u64> {
        let c = CString::new(name).map_err(|_| Error::InvalidState("a variable name with a NUL byte".into()))?;
        let (mut p, mut size) = (0u64, 0usize);
        // SAFETY: valid out-pointers, live module, NUL-terminated name.
        let code = unsafe { (self.module_get_global)(&mut p, &mut size, m, c.as_ptr()) };
        self.driver.check(code, "cuModuleGetGlobal", "finding a probe map variable")?;
        Ok(p)
    }

    /// Writes `value` to the device address `p` on `stream` (the value is staged before
    /// this returns).
    pub(crate) fn write_u64(&self, p: u64, value: u64, stream: CUstream) -> Result<()> {
        // SAFETY: `p` is an 8-byte device variable; pageable source memory is staged by the
        // driver before the call returns.
        let code = unsafe { (self.copy_htod_async)(p, &value as *const u64 as *const c_void, 8, stream) };
        self.driver.check(code, "cuMemcpyHtoDAsync", "setting a probe map variable")
    }

    /// Device memory of `bytes` bytes, zeroed on `stream` (ordered before what the stream
    /// runs next).
    pub(crate) fn alloc_zeroed(&self, bytes: usize, stream: CUstream) -> Result<u64> {
        let mut p = 0u64;
        // SAFETY: valid out-pointer.
        self.driver.check(unsafe { (self.mem_alloc)(&mut p, bytes.max(1)) }, "cuMemAlloc", "a probe map buffer")?;
        // SAFETY: `p` holds `bytes` bytes; `stream` is the launch's stream.
        let code = unsafe { (self.memset_async)(p, 0, bytes, stream) };
        if let Err(e) = self.driver.check(code, "cuMemsetD8Async", "zeroing a probe map buffer") {
            self.free(p);
            return Err(e);
        }
        Ok(p)
    }

    /// Frees device memory from `alloc_zeroed`; a failure is logged.
    pub fn free(&self, p: u64) {
        // SAFETY: `p` came from cuMemAlloc and is freed once.
        if let Err(e) = self.driver.check(unsafe { (self.mem_free)(p) }, "cuMemFree", "a probe map buffer") {
            tracing::warn!("gmprof: {e}");
        }
    }

    /// Waits for `stream`.
    pub(crate) fn synchronize(&self, stream: CUstream) -> Result<()> {
        // SAFETY: `stream` is the launch's stream (null: the default stream).
        self.driver.check(unsafe { (self.stream_sync)(stream) }, "cuStreamSynchronize", "waiting for a probed kernel")
    }

    /// Copies `bytes` bytes of device memory at `p` to the host.
    pub fn read(&self, p: u64, bytes: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; bytes];
        // SAFETY: `out` has `bytes` bytes; `p` is a device buffer of at least that size.
        let code = unsafe { (self.copy_dtoh)(out.as_mut_ptr() as *mut c_void, p, bytes) };
        self.driver.check(code, "cuMemcpyDtoH", "reading a probe map buffer")?;
        Ok(out)
    }
}
