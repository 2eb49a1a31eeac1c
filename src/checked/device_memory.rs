//! Device memory for the in-kernel timer buffers: allocate, zero, copy, free.
//!
//! The driver functions (`cuMemAlloc_v2`, `cuMemFree_v2`, `cuMemsetD8_v2`,
//! `cuMemcpyHtoD_v2`, `cuMemcpyDtoH_v2`) are in the generated bindings (`build.rs`'s
//! `DRIVER_FUNCTIONS`) and are called through [`Driver`], like every other driver call: a
//! missing symbol is [`crate::Error::MissingSymbol`], every result goes through `Driver::check`.

use super::library::Driver;
use crate::error::Result;
use crate::sys::cupti::CUdeviceptr;

/// A device address (`CUdeviceptr`).
pub type DevicePtr = CUdeviceptr;

/// Allocates `bytes` of device memory in the current context.
pub fn alloc(bytes: usize) -> Result<DevicePtr> {
    let driver = Driver::load()?;
    let mut ptr: DevicePtr = 0;
    call_driver!(driver, cuMemAlloc_v2, "allocating a device timer buffer (is a CUDA context current?)", |f| {
        // SAFETY: `ptr` is a valid out-pointer.
        unsafe { f(&mut ptr, bytes) }
    })?;
    Ok(ptr)
}

/// Frees memory from [`alloc`].
///
/// # Safety
/// `ptr` came from [`alloc`] and is not used after this call.
pub unsafe fn free(ptr: DevicePtr) -> Result<()> {
    let driver = Driver::load()?;
    call_driver!(driver, cuMemFree_v2, "freeing a device timer buffer", |f| {
        // SAFETY: the caller guarantees `ptr` is a live allocation of ours.
        unsafe { f(ptr) }
    })
}

/// Sets `bytes` bytes at `ptr` to zero.
///
/// # Safety
/// `ptr..ptr + bytes` is device memory the caller may write.
pub unsafe fn zero(ptr: DevicePtr, bytes: usize) -> Result<()> {
    let driver = Driver::load()?;
    call_driver!(driver, cuMemsetD8_v2, "zeroing a device timer buffer", |f| {
        // SAFETY: the caller guarantees the range is writable device memory.
        unsafe { f(ptr, 0, bytes) }
    })
}

/// Copies `words` to `ptr`.
///
/// # Safety
/// `ptr..ptr + 8 * words.len()` is device memory the caller may write.
pub unsafe fn write_words(ptr: DevicePtr, words: &[u64]) -> Result<()> {
    let driver = Driver::load()?;
    call_driver!(driver, cuMemcpyHtoD_v2, "writing a device timer buffer's header", |f| {
        // SAFETY: the source is `words`; the caller guarantees the destination.
        unsafe { f(ptr, words.as_ptr().cast(), std::mem::size_of_val(words)) }
    })
}

/// Copies `words` words from `ptr` (synchronous: after the work queued before it in the
/// legacy default stream; synchronize other streams first).
///
/// # Safety
/// `ptr..ptr + 8 * words` is readable device memory.
pub unsafe fn read_words(ptr: DevicePtr, words: usize) -> Result<Vec<u64>> {
    let driver = Driver::load()?;
    let mut out = vec![0u64; words];
    call_driver!(driver, cuMemcpyDtoH_v2, "reading a device timer buffer", |f| {
        // SAFETY: `out` holds `words` words; the caller guarantees the source.
        unsafe { f(out.as_mut_ptr().cast(), ptr, words * 8) }
    })?;
    Ok(out)
}
