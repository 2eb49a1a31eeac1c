//! The scripted libcuda: one device, the contexts and functions the made-up program creates,
//! and every driver function gmprof calls (each one counted, and failed where the script
//! says).
//!
//! Imports `script`; `callbacks`, `program` and `table` import it.

use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_uint, CStr};

use parking_lot::Mutex;

use super::script::{fault, interned};
use crate::sys::cupti::{
    cudaError_enum, CUcontext, CUdevice, CUdevice_attribute, CUfunction, CUfunction_attribute, CUkernel, CUmodule,
    CUresult,
};

/// A context of the made-up program (the handle points at one, leaked).
#[derive(Clone, Copy, Debug)]
pub(super) struct FakeContext {
    /// CUPTI's id of it.
    pub(super) id: u32,
    /// Its device's ordinal.
    pub(super) device: i32,
}

/// A function of a module the made-up program loaded (the handle points at one, leaked).
#[derive(Clone, Copy, Debug)]
pub(super) struct FakeFunction {
    /// Its mangled name.
    pub(super) name: &'static CStr,
    /// Its module, as a handle value.
    pub(super) module: usize,
}

/// The live contexts and the functions, by handle value.
#[derive(Default)]
struct Objects {
    contexts: HashSet<usize>,
    functions: HashSet<usize>,
    next_context_id: u32,
}

static OBJECTS: Mutex<Option<Objects>> = Mutex::new(None);

thread_local! {
    /// The calling thread's current context, as the driver keeps it.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// The device's name.
pub(super) const DEVICE_NAME: &CStr = c"Scripted GPU (no hardware)";

/// A new context of device 0, current on the calling thread.
pub(super) fn create_context() -> CUcontext {
    let mut guard = OBJECTS.lock();
    let objects = guard.get_or_insert_with(Objects::default);
    objects.next_context_id += 1;
    let ctx = Box::leak(Box::new(FakeContext { id: objects.next_context_id, device: 0 })) as *mut FakeContext;
    objects.contexts.insert(ctx as usize);
    CURRENT.with(|c| c.set(ctx as usize));
    ctx as CUcontext
}

/// Ends `ctx` (its handle stays allocated: a stale handle reads as no context).
pub(super) fn destroy_context(ctx: CUcontext) {
    if let Some(objects) = OBJECTS.lock().as_mut() {
        objects.contexts.remove(&(ctx as usize));
    }
    CURRENT.with(|c| {
        if c.get() == ctx as usize {
            c.set(0);
        }
    });
}

/// The context behind `ctx`, if it is live.
pub(super) fn context(ctx: CUcontext) -> Option<FakeContext> {
    let live = OBJECTS.lock().as_ref().is_some_and(|o| o.contexts.contains(&(ctx as usize)));
    // SAFETY: a live handle points at a leaked FakeContext.
    live.then(|| unsafe { *(ctx as *const FakeContext) })
}

/// The calling thread's current context (null when none).
pub(super) fn current() -> CUcontext {
    CURRENT.with(Cell::get) as CUcontext
}

/// A function named `name` of module `module`.
pub(super) fn create_function(name: &str, module: usize) -> CUfunction {
    let f = Box::leak(Box::new(FakeFunction { name: interned(name), module })) as *mut FakeFunction;
    OBJECTS.lock().get_or_insert_with(Objects::default).functions.insert(f as usize);
    f as CUfunction
}

/// The function behind `f`, if the program created it.
pub(super) fn function(f: CUfunction) -> Option<FakeFunction> {
    let known = OBJECTS.lock().as_ref().is_some_and(|o| o.functions.contains(&(f as usize)));
    // SAFETY: a known handle points at a leaked FakeFunction.
    known.then(|| unsafe { *(f as *const FakeFunction) })
}

const SUCCESS: CUresult = CUresult::CUDA_SUCCESS;

/// The made-up program's stream capture in progress (in the global mode, CUDA's default):
/// the stream, and whether a call of gmprof's invalidated it.
static CAPTURE: Mutex<Option<(usize, bool)>> = Mutex::new(None);

/// The made-up program began capturing `stream`.
pub(super) fn begin_capture(stream: usize) {
    *CAPTURE.lock() = Some((stream, false));
}

/// The made-up program ends its capture: what `cuStreamEndCapture` returns (the capture
/// invalidated when a call of gmprof's was made during it, as the real driver says).
pub(super) fn end_capture() -> CUresult {
    match CAPTURE.lock().take() {
        Some((_, true)) => CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
        Some((_, false)) => SUCCESS,
        None => CUresult::CUDA_ERROR_ILLEGAL_STATE,
    }
}

/// A call that a capture in progress forbids (a synchronize, an allocation, a copy): as the
/// real driver does, it fails and invalidates the capture.
fn forbidden_in_capture() -> Option<CUresult> {
    let mut capture = CAPTURE.lock();
    let (_, invalidated) = capture.as_mut()?;
    *invalidated = true;
    Some(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
}

/// Counts the call; returns the scripted failure when there is one.
macro_rules! scripted {
    ($name:literal) => {
        if let Some(code) = fault($name) {
            return cudaError_enum(code);
        }
    };
}

/// Writes `value` through an out-pointer gmprof passed, or says the pointer was NULL.
///
/// # Safety
/// `out` is NULL or valid for one write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> CUresult {
    if out.is_null() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's guarantee.
    unsafe { out.write(value) };
    SUCCESS
}

/// The name of a driver result (`cuGetErrorName`).
pub(super) fn error_name(code: CUresult) -> &'static CStr {
    match code.0 {
        0 => c"CUDA_SUCCESS",
        1 => c"CUDA_ERROR_INVALID_VALUE",
        201 => c"CUDA_ERROR_INVALID_CONTEXT",
        400 => c"CUDA_ERROR_INVALID_HANDLE",
        700 => c"CUDA_ERROR_ILLEGAL_ADDRESS",
        801 => c"CUDA_ERROR_NOT_SUPPORTED",
        900 => c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        901 => c"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        999 => c"CUDA_ERROR_UNKNOWN",
        n => interned(&format!("CUDA_ERROR_{n}")),
    }
}

pub(super) unsafe extern "C" fn cu_get_error_string(code: CUresult, text: *mut *const c_char) -> CUresult {
    let what = interned(&format!("{} (scripted libcuda)", error_name(code).to_string_lossy()));
    // SAFETY: `text` is gmprof's out-pointer.
    unsafe { put(text, what.as_ptr()) }
}

pub(super) unsafe extern "C" fn cu_get_error_name(code: CUresult, text: *mut *const c_char) -> CUresult {
    // SAFETY: `text` is gmprof's out-pointer.
    unsafe { put(text, error_name(code).as_ptr()) }
}

pub(super) unsafe extern "C" fn cu_init(_flags: c_uint) -> CUresult {
    scripted!("cuInit");
    SUCCESS
}

pub(super) unsafe extern "C" fn cu_driver_get_version(version: *mut c_int) -> CUresult {
    scripted!("cuDriverGetVersion");
    // SAFETY: `version` is gmprof's out-pointer.
    unsafe { put(version, 13000) }
}

pub(super) unsafe extern "C" fn cu_device_get(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    scripted!("cuDeviceGet");
    if ordinal != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    // SAFETY: `device` is gmprof's out-pointer.
    unsafe { put(device, 0) }
}

pub(super) unsafe extern "C" fn cu_device_get_count(count: *mut c_int) -> CUresult {
    scripted!("cuDeviceGetCount");
    // SAFETY: `count` is gmprof's out-pointer.
    unsafe { put(count, 1) }
}

pub(super) unsafe extern "C" fn cu_device_get_name(name: *mut c_char, len: c_int, _dev: CUdevice) -> CUresult {
    scripted!("cuDeviceGetName");
    let bytes = DEVICE_NAME.to_bytes_with_nul();
    if name.is_null() || (len as usize) < bytes.len() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: `name` has room for `len` bytes, at least the name's.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, name, bytes.len()) };
    SUCCESS
}

pub(super) unsafe extern "C" fn cu_device_get_attribute(
    value: *mut c_int,
    attribute: CUdevice_attribute,
    _dev: CUdevice,
) -> CUresult {
    scripted!("cuDeviceGetAttribute");
    use CUdevice_attribute as A;
    let v = match attribute {
        A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR => 9,
        A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR => 0,
        A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT => 132,
        A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE => 1_980_000,
        A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE => 2_619_000,
        A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH => 5120,
        _ => return CUresult::CUDA_ERROR_INVALID_VALUE,
    };
    // SAFETY: `value` is gmprof's out-pointer.
    unsafe { put(value, v) }
}

pub(super) unsafe extern "C" fn cu_device_primary_ctx_retain(ctx: *mut CUcontext, _dev: CUdevice) -> CUresult {
    scripted!("cuDevicePrimaryCtxRetain");
    // The made-up program creates its context itself; gmprof only retains what exists.
    let existing = current();
    if existing.is_null() {
        return CUresult::CUDA_ERROR_NOT_SUPPORTED;
    }
    // SAFETY: `ctx` is gmprof's out-pointer.
    unsafe { put(ctx, existing) }
}

pub(super) unsafe extern "C" fn cu_device_primary_ctx_release(_dev: CUdevice) -> CUresult {
    scripted!("cuDevicePrimaryCtxRelease_v2");
    SUCCESS
}

pub(super) unsafe extern "C" fn cu_ctx_set_current(ctx: CUcontext) -> CUresult {
    scripted!("cuCtxSetCurrent");
    if !ctx.is_null() && context(ctx).is_none() {
        return CUresult::CUDA_ERROR_INVALID_CONTEXT;
    }
    CURRENT.with(|c| c.set(ctx as usize));
    SUCCESS
}

pub(super) unsafe extern "C" fn cu_ctx_get_current(ctx: *mut CUcontext) -> CUresult {
    scripted!("cuCtxGetCurrent");
    // SAFETY: `ctx` is gmprof's out-pointer.
    unsafe { put(ctx, current()) }
}

pub(super) unsafe extern "C" fn cu_ctx_get_device(device: *mut CUdevice) -> CUresult {
    scripted!("cuCtxGetDevice");
    match context(current()) {
        // SAFETY: `device` is gmprof's out-pointer.
        Some(c) => unsafe { put(device, c.device) },
        None => CUresult::CUDA_ERROR_INVALID_CONTEXT,
    }
}

pub(super) unsafe extern "C" fn cu_ctx_synchronize() -> CUresult {
    scripted!("cuCtxSynchronize");
    if let Some(refused) = forbidden_in_capture() {
        return refused;
    }
    if context(current()).is_none() {
        return CUresult::CUDA_ERROR_INVALID_CONTEXT;
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn cu_func_get_attribute(
    value: *mut c_int,
    attribute: CUfunction_attribute,
    f: CUfunction,
) -> CUresult {
    scripted!("cuFuncGetAttribute");
    if function(f).is_none() {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    let v = match attribute.0 {
        0 => 1024,
        4 => 32,
        8 => 49152,
        9 => -1,
        _ => 0,
    };
    // SAFETY: `value` is gmprof's out-pointer.
    unsafe { put(value, v) }
}

pub(super) unsafe extern "C" fn cu_func_set_attribute(f: CUfunction, _a: CUfunction_attribute, _v: c_int) -> CUresult {
    scripted!("cuFuncSetAttribute");
    if function(f).is_none() {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn cu_func_get_module(module: *mut CUmodule, f: CUfunction) -> CUresult {
    scripted!("cuFuncGetModule");
    match function(f) {
        // SAFETY: `module` is gmprof's out-pointer.
        Some(func) => unsafe { put(module, func.module as CUmodule) },
        None => CUresult::CUDA_ERROR_INVALID_HANDLE,
    }
}

pub(super) unsafe extern "C" fn cu_func_get_name(name: *mut *const c_char, f: CUfunction) -> CUresult {
    scripted!("cuFuncGetName");
    match function(f) {
        // SAFETY: `name` is gmprof's out-pointer.
        Some(func) => unsafe { put(name, func.name.as_ptr()) },
        None => CUresult::CUDA_ERROR_INVALID_HANDLE,
    }
}

pub(super) unsafe extern "C" fn cu_kernel_get_name(_name: *mut *const c_char, _k: CUkernel) -> CUresult {
    scripted!("cuKernelGetName");
    // The made-up program launches functions, never the runtime's kernels.
    CUresult::CUDA_ERROR_INVALID_HANDLE
}
