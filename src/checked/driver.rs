//! The CUDA driver calls gmprof needs: initialization, devices and contexts.

use std::ffi::CStr;

use super::library::Driver;
use crate::error::Result;
use crate::model::DevicePeaks;
use crate::sys::cupti::{CUcontext, CUdevice, CUdevice_attribute};

/// A CUDA context handle. gmprof never creates contexts of its own beyond retaining a
/// device's primary context, which the application's runtime shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context(pub(crate) CUcontext);

// SAFETY: a CUcontext is a driver handle usable from any thread (the driver API takes it
// explicitly); gmprof never dereferences it.
unsafe impl Send for Context {}
// SAFETY: as above; sharing the handle value is harmless.
unsafe impl Sync for Context {}

impl Context {
    /// The raw handle.
    pub fn as_raw(&self) -> CUcontext {
        self.0
    }
}

/// Initializes the driver (idempotent) and returns it.
pub fn init() -> Result<Driver> {
    let driver = Driver::load()?;
    call_driver!(driver, cuInit, "initializing the CUDA driver", |f| {
        // SAFETY: cuInit takes flags only; 0 is the only valid value.
        unsafe { f(0) }
    })?;
    Ok(driver)
}

/// The driver's CUDA version, e.g. 13000.
pub fn driver_version(driver: &Driver) -> Result<i32> {
    let mut v = 0;
    call_driver!(driver, cuDriverGetVersion, "reading the driver version", |f| {
        // SAFETY: `v` is a valid out-pointer.
        unsafe { f(&mut v) }
    })?;
    Ok(v)
}

/// The driver's release as people name it: the kernel module's version from
/// `/proc/driver/nvidia/version` on Linux (`580.95.05`), else the CUDA version the driver
/// supports (`CUDA 13.0`); `None` when neither can be read.
pub fn driver_release(driver: &Driver) -> Option<String> {
    let module = std::fs::read_to_string("/proc/driver/nvidia/version").ok().and_then(|text| module_version(&text));
    module.or_else(|| driver_version(driver).ok().map(|v| format!("CUDA {}.{}", v / 1000, (v % 1000) / 10)))
}

/// The version in `/proc/driver/nvidia/version`'s first line
/// (`NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue ...`): the first word
/// made of digits and dots that holds a dot.
fn module_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    line.split_whitespace()
        .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_owned)
}

/// Number of visible CUDA devices.
pub fn device_count(driver: &Driver) -> Result<i32> {
    let mut n = 0;
    call_driver!(driver, cuDeviceGetCount, "counting CUDA devices", |f| {
        // SAFETY: `n` is a valid out-pointer.
        unsafe { f(&mut n) }
    })?;
    Ok(n)
}

/// The device handle for an ordinal.
pub fn device(driver: &Driver, ordinal: i32) -> Result<CUdevice> {
    let mut dev: CUdevice = 0;
    call_driver!(driver, cuDeviceGet, "looking up the CUDA device", |f| {
        // SAFETY: `dev` is a valid out-pointer; the ordinal is checked by the driver.
        unsafe { f(&mut dev, ordinal) }
    })?;
    Ok(dev)
}

/// The marketing name of a device, e.g. "NVIDIA H200".
pub fn device_name(driver: &Driver, dev: CUdevice) -> Result<String> {
    let mut buf = [0 as std::os::raw::c_char; 256];
    call_driver!(driver, cuDeviceGetName, "reading the device name", |f| {
        // SAFETY: `buf` is writable for its full length, which is what we pass.
        unsafe { f(buf.as_mut_ptr(), buf.len() as i32, dev) }
    })?;
    // SAFETY: the driver NUL-terminates within the buffer length; the last byte stays 0 as
    // a backstop because we zeroed the buffer and the driver writes at most len bytes.
    buf[buf.len() - 1] = 0;
    // SAFETY: `buf` is NUL-terminated (set just above).
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

/// One device attribute (`cuDeviceGetAttribute`).
pub fn attribute(driver: &Driver, dev: CUdevice, attribute: CUdevice_attribute) -> Result<i32> {
    let mut value = 0;
    call_driver!(driver, cuDeviceGetAttribute, "reading a device attribute", |f| {
        // SAFETY: `value` is a valid out-pointer; the driver checks the attribute and device.
        unsafe { f(&mut value, attribute, dev) }
    })?;
    Ok(value)
}

/// The attributes [`DevicePeaks`] is computed from; an attribute the driver does not give
/// stays `None`, and so do the peaks that need it.
pub fn device_peaks(driver: &Driver, dev: CUdevice) -> DevicePeaks {
    let value = |a: CUdevice_attribute| attribute(driver, dev, a).ok().and_then(|v| u32::try_from(v).ok());
    // Sizes and clocks of 0 mean unknown; a minor version of 0 is a version.
    let get = |a: CUdevice_attribute| value(a).filter(|v| *v > 0);
    DevicePeaks::from_attributes(
        get(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
        value(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        get(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        get(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        get(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        get(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
    )
}

/// The context current on the calling thread, if any.
pub fn current_context(driver: &Driver) -> Result<Option<Context>> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    call_driver!(driver, cuCtxGetCurrent, "reading the current CUDA context", |f| {
        // SAFETY: `ctx` is a valid out-pointer.
        unsafe { f(&mut ctx) }
    })?;
    Ok((!ctx.is_null()).then_some(Context(ctx)))
}

/// Makes `ctx` current on the calling thread.
pub fn set_current(driver: &Driver, ctx: Context) -> Result<()> {
    call_driver!(driver, cuCtxSetCurrent, "making the CUDA context current", |f| {
        // SAFETY: `ctx` is a live context handle obtained from the driver.
        unsafe { f(ctx.0) }
    })
}

/// The device ordinal of the current context.
pub fn current_device(driver: &Driver) -> Result<CUdevice> {
    let mut dev: CUdevice = 0;
    call_driver!(driver, cuCtxGetDevice, "reading the current context's device", |f| {
        // SAFETY: `dev` is a valid out-pointer.
        unsafe { f(&mut dev) }
    })?;
    Ok(dev)
}

/// Waits for all work in the current context.
pub fn synchronize(driver: &Driver) -> Result<()> {
    call_driver!(driver, cuCtxSynchronize, "synchronizing the CUDA context", |f| {
        // SAFETY: no arguments; acts on the calling thread's current context.
        unsafe { f() }
    })
}

/// A retained primary context of a device, released on drop.
///
/// The primary context is the one the CUDA runtime (and cudarc, PyTorch) use, so retaining
/// it attaches gmprof to the application's context instead of creating another.
#[must_use = "dropping it releases the primary context"]
#[derive(Debug)]
pub struct PrimaryContext {
    driver: Driver,
    device: CUdevice,
    ctx: Context,
    released: bool,
}

impl PrimaryContext {
    /// Retains the primary context of `device`.
    pub fn retain(driver: &Driver, device: CUdevice) -> Result<PrimaryContext> {
        let mut ctx: CUcontext = std::ptr::null_mut();
        call_driver!(driver, cuDevicePrimaryCtxRetain, "retaining the device's primary context", |f| {
            // SAFETY: `ctx` is a valid out-pointer; `device` came from cuDeviceGet.
            unsafe { f(&mut ctx, device) }
        })?;
        Ok(PrimaryContext { driver: *driver, device, ctx: Context(ctx), released: false })
    }

    /// The context.
    pub fn context(&self) -> Context {
        self.ctx
    }

    /// Releases the context, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let device = self.device;
        call_driver!(self.driver, cuDevicePrimaryCtxRelease_v2, "releasing the primary context", |f| {
            // SAFETY: balanced with the retain in `PrimaryContext::retain`, once.
            unsafe { f(device) }
        })
    }
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            tracing::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::module_version;

    #[test]
    fn the_module_version_is_read_from_procs_first_line() {
        let text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 10:44:12 UTC 2025\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(module_version(text).as_deref(), Some("580.95.05"));
        assert_eq!(
            module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023"),
            Some("535.54.03".into())
        );
        assert_eq!(module_version("garbage"), None);
        assert_eq!(module_version(""), None);
    }
}
