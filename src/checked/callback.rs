//! CUPTI callback subscription: gmprof hears each kernel launch as it happens.

use std::ffi::CStr;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::library::Cupti;
use crate::error::Result;
use crate::sys::cupti::{
    CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain, CUpti_CallbackId, CUpti_SubscriberHandle,
    CUpti_driver_api_trace_cbid_enum as DriverCbid, CUpti_runtime_api_trace_cbid_enum as RuntimeCbid,
};

/// Which side of an API call a callback fires on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackSite {
    /// Before the call runs.
    Enter,
    /// After it returned.
    Exit,
}

/// The API a callback came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiDomain {
    /// CUDA driver API.
    Driver,
    /// CUDA runtime API.
    Runtime,
}

/// What an API call gmprof listens to does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchKind {
    /// Launches one kernel.
    Kernel,
    /// Launches a CUDA graph: any number of kernels under one correlation id.
    Graph,
    /// A memcpy or memset.
    Transfer,
}

/// One API callback, decoded.
#[derive(Clone, Copy, Debug)]
pub struct ApiCallback<'a> {
    /// Driver or runtime.
    pub domain: ApiDomain,
    /// The callback id within the domain.
    pub cbid: u32,
    /// Enter or exit.
    pub site: CallbackSite,
    /// The call's correlation id (the one activity records carry).
    pub correlation_id: u32,
    /// The API function's name.
    pub function_name: &'a str,
    /// The context's unique id.
    pub context_uid: u32,
    /// Kernel launch, graph launch or transfer.
    pub launch: LaunchKind,
}

/// The handler a [`Subscriber`] calls. It runs inside the launching thread's CUDA call and
/// must be quick; it must not call back into the same CUDA API.
pub type ApiHandler = Arc<dyn Fn(&ApiCallback<'_>) + Send + Sync>;

struct HandlerBox {
    handler: ApiHandler,
    panics: AtomicU64,
    driver_transfers: Vec<u32>,
    runtime_transfers: Vec<u32>,
}

/// Driver launch callbacks gmprof subscribes to.
pub const DRIVER_KERNEL_LAUNCHES: &[DriverCbid] = &[
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
];
/// Driver graph launches.
pub const DRIVER_GRAPH_LAUNCHES: &[DriverCbid] =
    &[DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz];
/// Runtime launch callbacks gmprof subscribes to.
pub const RUNTIME_KERNEL_LAUNCHES: &[RuntimeCbid] = &[
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
];
/// Runtime graph launches.
pub const RUNTIME_GRAPH_LAUNCHES: &[RuntimeCbid] = &[
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
];

fn launch_kind(boxed: &HandlerBox, domain: ApiDomain, cbid: u32) -> LaunchKind {
    let transfer = match domain {
        ApiDomain::Driver => boxed.driver_transfers.binary_search(&cbid).is_ok(),
        ApiDomain::Runtime => boxed.runtime_transfers.binary_search(&cbid).is_ok(),
    };
    if transfer {
        return LaunchKind::Transfer;
    }
    let graph = match domain {
        ApiDomain::Driver => DRIVER_GRAPH_LAUNCHES.iter().any(|c| c.0 == cbid),
        ApiDomain::Runtime => RUNTIME_GRAPH_LAUNCHES.iter().any(|c| c.0 == cbid),
    };
    if graph {
        LaunchKind::Graph
    } else {
        LaunchKind::Kernel
    }
}

/// Callback ids of a domain whose API name contains `Memcpy` or `Memset`, sorted. Found by
/// name so that every variant (async, 2D, 3D, per-thread stream, peer) is covered.
fn transfer_cbids(cupti: &Cupti, domain: CUpti_CallbackDomain, size: u32) -> Vec<u32> {
    let Ok(get_name) = cupti.raw().cuptiGetCallbackName.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for cbid in 1..size {
        let mut name: *const std::os::raw::c_char = std::ptr::null();
        // SAFETY: `name` is a valid out-pointer; CUPTI stores a static string or fails.
        let rc = unsafe { get_name(domain, cbid, &mut name) };
        if rc != crate::sys::cupti::CUptiResult::CUPTI_SUCCESS || name.is_null() {
            continue;
        }
        // SAFETY: CUPTI's callback names are static NUL-terminated strings.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        if name.contains("Memcpy") || name.contains("Memset") {
            out.push(cbid);
        }
    }
    out
}

unsafe extern "C" fn trampoline(
    userdata: *mut c_void,
    domain: CUpti_CallbackDomain,
    cbid: CUpti_CallbackId,
    data: *const c_void,
) {
    if userdata.is_null() || data.is_null() {
        return;
    }
    // SAFETY: `userdata` is the `HandlerBox` leaked by `Subscriber::subscribe`, freed only
    // after cuptiUnsubscribe returned, so no callback can still be running on it.
    let boxed = unsafe { &*(userdata as *const HandlerBox) };
    let domain = match domain {
        CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API => ApiDomain::Driver,
        CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API => ApiDomain::Runtime,
        _ => return,
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData valid for this call.
        let cb = unsafe { &*(data as *const CUpti_CallbackData) };
        let function_name = if cb.functionName.is_null() {
            ""
        } else {
            // SAFETY: CUPTI's function names are static NUL-terminated strings.
            unsafe { CStr::from_ptr(cb.functionName) }.to_str().unwrap_or("")
        };
        let event = ApiCallback {
            domain,
            cbid,
            site: if cb.callbackSite == CUpti_ApiCallbackSite::CUPTI_API_ENTER {
                CallbackSite::Enter
            } else {
                CallbackSite::Exit
            },
            correlation_id: cb.correlationId,
            function_name,
            context_uid: cb.contextUid,
            launch: launch_kind(boxed, domain, cbid),
        };
        (boxed.handler)(&event);
    }));
    if result.is_err() {
        boxed.panics.fetch_add(1, Ordering::Relaxed);
    }
}

/// A CUPTI callback subscriber; unsubscribed on drop. Only one may exist per process
/// (CUPTI refuses a second with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
#[must_use = "dropping it unsubscribes"]
pub struct Subscriber {
    cupti: Cupti,
    handle: CUpti_SubscriberHandle,
    userdata: *mut HandlerBox,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Subscriber")
    }
}

// SAFETY: the handle is an opaque CUPTI token usable from any thread; the handler box is
// `Send + Sync` (its handler is).
unsafe impl Send for Subscriber {}
// SAFETY: as above; &Subscriber exposes no mutation.
unsafe impl Sync for Subscriber {}

impl Subscriber {
    /// Subscribes `handler` and enables the kernel and graph launch callbacks of the driver
    /// and runtime APIs, and, with `transfers`, their memcpy and memset callbacks.
    pub fn subscribe_launches(cupti: &Cupti, handler: ApiHandler, transfers: bool) -> Result<Subscriber> {
        let (driver_transfers, runtime_transfers) = if transfers {
            (
                transfer_cbids(
                    cupti,
                    CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
                    DriverCbid::CUPTI_DRIVER_TRACE_CBID_SIZE.0,
                ),
                transfer_cbids(
                    cupti,
                    CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
                    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_SIZE.0,
                ),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let userdata = Box::into_raw(Box::new(HandlerBox {
            handler,
            panics: AtomicU64::new(0),
            driver_transfers: driver_transfers.clone(),
            runtime_transfers: runtime_transfers.clone(),
        }));
        let mut handle: CUpti_SubscriberHandle = std::ptr::null_mut();
        let subscribed = call_cupti!(cupti, cuptiSubscribe, "subscribing to CUPTI callbacks", |f| {
            // SAFETY: the trampoline never unwinds; `userdata` stays valid until unsubscribe.
            unsafe { f(&mut handle, Some(trampoline), userdata as *mut c_void) }
        });
        if let Err(e) = subscribed {
            // SAFETY: CUPTI did not take the pointer; reclaim it once.
            drop(unsafe { Box::from_raw(userdata) });
            return Err(e);
        }
        let sub = Subscriber { cupti: *cupti, handle, userdata };
        let driver = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API;
        let runtime = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API;
        for cbid in DRIVER_KERNEL_LAUNCHES.iter().chain(DRIVER_GRAPH_LAUNCHES) {
            sub.enable(driver, cbid.0)?;
        }
        for cbid in RUNTIME_KERNEL_LAUNCHES.iter().chain(RUNTIME_GRAPH_LAUNCHES) {
            sub.enable(runtime, cbid.0)?;
        }
        for cbid in driver_transfers {
            sub.enable(driver, cbid)?;
        }
        for cbid in runtime_transfers {
            sub.enable(runtime, cbid)?;
        }
        Ok(sub)
    }

    fn enable(&self, domain: CUpti_CallbackDomain, cbid: u32) -> Result<()> {
        let handle = self.handle;
        call_cupti!(self.cupti, cuptiEnableCallback, "enabling a launch callback", |f| {
            // SAFETY: `handle` is our live subscriber.
            unsafe { f(1, handle, domain, cbid) }
        })
    }

    /// Panics caught inside the handler so far.
    pub fn caught_panics(&self) -> u64 {
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        unsafe { &*self.userdata }.panics.load(Ordering::Relaxed)
    }

    /// Unsubscribes, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if self.handle.is_null() {
            return Ok(());
        }
        let handle = std::mem::replace(&mut self.handle, std::ptr::null_mut());
        let r = call_cupti!(self.cupti, cuptiUnsubscribe, "unsubscribing from CUPTI callbacks", |f| {
            // SAFETY: `handle` is live and unsubscribed once.
            unsafe { f(handle) }
        });
        if r.is_ok() {
            // SAFETY: after cuptiUnsubscribe returns CUPTI no longer calls the trampoline
            // with this userdata, so the box can be freed.
            drop(unsafe { Box::from_raw(self.userdata) });
        }
        // On failure the box is leaked on purpose: a callback might still use it.
        r
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}
