//! The CUPTI profiler's target side: its process-wide initialization, the device's chip
//! name and its counter availability image.

use std::ffi::CStr;

use super::driver::Context;
use super::library::Cupti;
use crate::error::Result;
use crate::sys::cupti::{
    CUpti_Device_GetChipName_Params, CUpti_Profiler_DeInitialize_Params, CUpti_Profiler_GetCounterAvailability_Params,
    CUpti_Profiler_Initialize_Params,
};

/// CUPTI's profiler API, initialized; de-initialized on drop.
///
/// Needed before any range profiler call. CUPTI reference-counts the initialization, so
/// several holders are fine.
#[must_use = "dropping it de-initializes the CUPTI profiler"]
#[derive(Debug)]
pub struct ProfilerApi {
    cupti: Cupti,
    closed: bool,
}

impl ProfilerApi {
    /// `cuptiProfilerInitialize`.
    pub fn initialize(cupti: &Cupti) -> Result<ProfilerApi> {
        let mut p = cupti_params!(CUpti_Profiler_Initialize_Params, pPriv);
        call_cupti!(cupti, cuptiProfilerInitialize, "initializing the CUPTI profiler", |f| {
            // SAFETY: `p` is a sized, zeroed params struct with no pointers set.
            unsafe { f(&mut p) }
        })?;
        Ok(ProfilerApi { cupti: *cupti, closed: false })
    }

    /// `cuptiProfilerDeInitialize`, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let mut p = cupti_params!(CUpti_Profiler_DeInitialize_Params, pPriv);
        call_cupti!(self.cupti, cuptiProfilerDeInitialize, "de-initializing the CUPTI profiler", |f| {
            // SAFETY: as for initialize; balanced with it once.
            unsafe { f(&mut p) }
        })
    }
}

impl Drop for ProfilerApi {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}

/// The chip name of a device (e.g. `GH100`), which selects the metric tables.
pub fn chip_name(cupti: &Cupti, device_index: usize) -> Result<String> {
    let mut p = cupti_params!(CUpti_Device_GetChipName_Params, pChipName);
    p.deviceIndex = device_index;
    call_cupti!(cupti, cuptiDeviceGetChipName, "reading the device's chip name", |f| {
        // SAFETY: `p` is sized; CUPTI fills `pChipName` with a pointer to its own string.
        unsafe { f(&mut p) }
    })?;
    if p.pChipName.is_null() {
        return Ok(String::new());
    }
    // SAFETY: CUPTI returned a non-null, NUL-terminated string that lives in CUPTI.
    Ok(unsafe { CStr::from_ptr(p.pChipName) }.to_string_lossy().into_owned())
}

/// [`chip_name`] with the profiler API initialized around the query, for callers that do
/// not hold a [`ProfilerApi`] (trace mode, the command line). A chip name read is returned
/// even when the de-initialization after it fails (logged: it costs nothing read).
pub fn query_chip_name(cupti: &Cupti, device_index: usize) -> Result<String> {
    let api = ProfilerApi::initialize(cupti)?;
    let chip = chip_name(cupti, device_index)?;
    if let Err(e) = api.shutdown() {
        tracing::warn!("gmprof: {e}");
    }
    Ok(chip)
}

/// The counter availability image of `ctx`'s device: which counters can be collected now
/// (it reflects, for example, counters held by another profiler).
pub fn counter_availability(cupti: &Cupti, ctx: Context) -> Result<Vec<u8>> {
    let mut p = cupti_params!(CUpti_Profiler_GetCounterAvailability_Params, pCounterAvailabilityImage);
    p.ctx = ctx.as_raw();
    call_cupti!(cupti, cuptiProfilerGetCounterAvailability, "sizing the counter availability image", |f| {
        // SAFETY: a null image pointer asks CUPTI for the size only.
        unsafe { f(&mut p) }
    })?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    call_cupti!(cupti, cuptiProfilerGetCounterAvailability, "reading the counter availability image", |f| {
        // SAFETY: `image` is writable for the size CUPTI asked for and outlives the call.
        unsafe { f(&mut p) }
    })?;
    Ok(image)
}

/// The ordinal of the device a context belongs to (`cuptiGetDeviceId`); works whether or
/// not the context is current, so it can be asked inside a context-creation callback.
pub fn device_ordinal(cupti: &Cupti, ctx: Context) -> Result<u32> {
    let mut ordinal = 0u32;
    call_cupti!(cupti, cuptiGetDeviceId, "asking which device a context belongs to", |f| {
        // SAFETY: `ctx` is a live context and `ordinal` a valid out-pointer.
        unsafe { f(ctx.as_raw(), &mut ordinal) }
    })?;
    Ok(ordinal)
}
