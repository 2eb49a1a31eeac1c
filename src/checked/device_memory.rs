//! Device memory for the in-kernel timer buffers: allocate, zero, copy, free.
//!
//! These four driver functions are not in the generated bindings (which hold only what
//! profiling needs); they are looked up with `libloading` in the libcuda that
//! [`Driver::load`] already loaded (`GMPROF_CUDA_DRIVER_LIB`, else `libcuda.so.1`), once
//! per process. Every result goes through `Driver::check`, as every other driver call.

use std::sync::OnceLock;

use super::library::{Driver, CUDA_DRIVER_LIB_ENV};
use crate::error::{Error, Result};
use crate::sys::cupti::CUresult;

/// A device address (`CUdeviceptr`).
pub type DevicePtr = u64;

type Alloc = unsafe extern "C" fn(*mut DevicePtr, usize) -> CUresult;
type Free = unsafe extern "C" fn(DevicePtr) -> CUresult;
type MemsetD8 = unsafe extern "C" fn(DevicePtr, u8, usize) -> CUresult;
type HtoD = unsafe extern "C" fn(DevicePtr, *const std::ffi::c_void, usize) -> CUresult;
type DtoH = unsafe extern "C" fn(*mut std::ffi::c_void, DevicePtr, usize) -> CUresult;

struct MemoryFns {
    alloc: Alloc,
    free: Free,
    memset: MemsetD8,
    htod: HtoD,
    dtoh: DtoH,
}

static FNS: OnceLock<std::result::Result<MemoryFns, String>> = OnceLock::new();

fn fns() -> Result<(Driver, &'static MemoryFns)> {
    let driver = Driver::load()?;
    let loaded = FNS.get_or_init(|| {
        let name = std::env::var(CUDA_DRIVER_LIB_ENV).unwrap_or_else(|_| "libcuda.so.1".into());
        // SAFETY: libcuda is already loaded by Driver::load (this returns the same handle);
        // the handle is leaked, so the function pointers stay valid for the process.
        let lib = unsafe { libloading::Library::new(&name) }.map_err(|e| format!("{name}: {e}"))?;
        let lib: &'static libloading::Library = Box::leak(Box::new(lib));
        // SAFETY: each symbol has the C signature of cuda.h's declaration typed above.
        unsafe {
            let get = |s: &[u8]| -> std::result::Result<*const (), String> {
                lib.get::<*const ()>(s).map(|f| *f).map_err(|e| format!("{}: {e}", String::from_utf8_lossy(s)))
            };
            Ok(MemoryFns {
                alloc: std::mem::transmute::<*const (), Alloc>(get(b"cuMemAlloc_v2\0")?),
                free: std::mem::transmute::<*const (), Free>(get(b"cuMemFree_v2\0")?),
                memset: std::mem::transmute::<*const (), MemsetD8>(get(b"cuMemsetD8_v2\0")?),
                htod: std::mem::transmute::<*const (), HtoD>(get(b"cuMemcpyHtoD_v2\0")?),
                dtoh: std::mem::transmute::<*const (), DtoH>(get(b"cuMemcpyDtoH_v2\0")?),
            })
        }
    });
    match loaded {
        Ok(f) => Ok((driver, f)),
        Err(why) => Err(Error::InvalidState(format!("device timers: the driver's memory functions: {why}"))),
    }
}

/// Allocates `bytes` of device memory in the current context.
pub fn alloc(bytes: usize) -> Result<DevicePtr> {
    let (driver, f) = fns()?;
    let mut ptr: DevicePtr = 0;
    // SAFETY: `ptr` is a valid out-pointer.
    let code = unsafe { (f.alloc)(&mut ptr, bytes) };
    driver.check(code, "cuMemAlloc_v2", "allocating a device timer buffer (is a CUDA context current?)")?;
    Ok(ptr)
}

/// Frees memory from [`alloc`].
///
/// # Safety
/// `ptr` came from [`alloc`] and is not used after this call.
pub unsafe fn free(ptr: DevicePtr) -> Result<()> {
    let (driver, f) = fns()?;
    // SAFETY: the caller guarantees `ptr` is a live allocation of ours.
    let code = unsafe { (f.free)(ptr) };
    driver.check(code, "cuMemFree_v2", "freeing a device timer buffer")
}

/// Sets `bytes` bytes at `ptr` to zero.
///
/// # Safety
/// `ptr..ptr + bytes` is device memory the caller may write.
pub unsafe fn zero(ptr: DevicePtr, bytes: usize) -> Result<()> {
    let (driver, f) = fns()?;
    // SAFETY: the caller guarantees the range is writable device memory.
    let code = unsafe { (f.memset)(ptr, 0, bytes) };
    driver.check(code, "cuMemsetD8_v2", "zeroing a device timer buffer")
}

/// Copies `words` to `ptr`.
///
/// # Safety
/// `ptr..ptr + 8 * words.len()` is device memory the caller may write.
pub unsafe fn write_words(ptr: DevicePtr, words: &[u64]) -> Result<()> {
    let (driver, f) = fns()?;
    // SAFETY: the source is `words`; the caller guarantees the destination.
    let code = unsafe { (f.htod)(ptr, words.as_ptr().cast(), std::mem::size_of_val(words)) };
    driver.check(code, "cuMemcpyHtoD_v2", "writing a device timer buffer's header")
}

/// Copies `words` words from `ptr` (synchronous: after the work queued before it in the
/// legacy default stream; synchronize other streams first).
///
/// # Safety
/// `ptr..ptr + 8 * words` is readable device memory.
pub unsafe fn read_words(ptr: DevicePtr, words: usize) -> Result<Vec<u64>> {
    let (driver, f) = fns()?;
    let mut out = vec![0u64; words];
    // SAFETY: `out` holds `words` words; the caller guarantees the source.
    let code = unsafe { (f.dtoh)(out.as_mut_ptr().cast(), ptr, words * 8) };
    driver.check(code, "cuMemcpyDtoH_v2", "reading a device timer buffer")?;
    Ok(out)
}
