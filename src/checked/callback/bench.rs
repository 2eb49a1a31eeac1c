//! A trampoline CUPTI never saw, for the launch-path benchmark (feature `bench-internals`)
//! and the CPU tests of the capture path: made-up callback data goes through the code CUPTI's
//! calls go through.

use std::ffi::CStr;
use std::os::raw::c_void;

use super::dispatch::{trampoline, HandlerBox};
use super::events::ApiHandler;
use super::kinds::{ApiDomain, CallbackSite};
use crate::checked::library::Cupti;
use crate::sys::cupti::{CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain};

/// The callback trampoline of a subscriber CUPTI never saw, for the launch-path benchmark
/// (feature `bench-internals`) and CPU tests of the capture path: callback data made up by
/// the caller goes through the code CUPTI's calls go through, from [`trampoline`] to the
/// handler.
pub(crate) struct BenchTrampoline(Box<HandlerBox>);

/// One made-up API callback for [`BenchTrampoline::call_with`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct BenchCall {
    pub(crate) domain: ApiDomain,
    pub(crate) cbid: u32,
    pub(crate) site: CallbackSite,
    pub(crate) correlation_id: u32,
    pub(crate) context_uid: u32,
    pub(crate) function_name: &'static CStr,
    /// The call's parameter structure (`functionParams`), or NULL.
    pub(crate) params: *mut c_void,
    /// On exit, the call's return value.
    pub(crate) result: Option<i32>,
    /// For a kernel launch, the kernel's name (`symbolName`).
    pub(crate) symbol_name: Option<&'static CStr>,
}

impl BenchTrampoline {
    /// A trampoline calling `handler` for launches, and for the transfers among these
    /// driver and runtime callback ids (CUPTI's names tell a subscriber which they are).
    pub(crate) fn with_transfers(
        cupti: Cupti,
        handler: ApiHandler,
        driver_transfers: Vec<u32>,
        runtime_transfers: Vec<u32>,
    ) -> BenchTrampoline {
        BenchTrampoline(Box::new(HandlerBox::new(cupti, handler, &driver_transfers, &runtime_transfers)))
    }

    /// One API callback, as CUPTI would make it.
    pub(crate) fn call_with(&self, call: &BenchCall) {
        let result = call.result.unwrap_or(0);
        let data = CUpti_CallbackData {
            symbolName: call.symbol_name.map_or(std::ptr::null(), CStr::as_ptr),
            callbackSite: match call.site {
                CallbackSite::Enter => CUpti_ApiCallbackSite::CUPTI_API_ENTER,
                CallbackSite::Exit => CUpti_ApiCallbackSite::CUPTI_API_EXIT,
            },
            functionName: call.function_name.as_ptr(),
            functionParams: call.params,
            functionReturnValue: match call.result {
                Some(_) => &result as *const i32 as *mut c_void,
                None => std::ptr::null_mut(),
            },
            contextUid: call.context_uid,
            correlationId: call.correlation_id,
            ..Default::default()
        };
        let domain = match call.domain {
            ApiDomain::Driver => CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
            ApiDomain::Runtime => CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
        };
        let userdata = &*self.0 as *const HandlerBox as *mut c_void;
        // SAFETY: `userdata` is a live HandlerBox and `data` a CUpti_CallbackData of an API
        // domain, both valid for the call, as CUPTI passes them; `functionParams` is the
        // caller's structure of the layout `cbid` passes (or NULL), and
        // `functionReturnValue` points at `result`, which outlives the call.
        unsafe { trampoline(userdata, domain, call.cbid, &data as *const CUpti_CallbackData as *const c_void) };
    }
}
