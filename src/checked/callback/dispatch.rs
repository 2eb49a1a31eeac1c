//! The callback trampoline: the one `extern "C"` function CUPTI calls, which decodes each
//! callback (API calls, NVTX, resources) and hands it to the subscriber's handlers, every
//! handler under `catch_unwind`. Also the handlers' box ([`HandlerBox`]) and [`quietly`].
//!
//! Imports `kinds`, `events` and `ids`; `subscriber` (and `bench`) import it, and
//! `callback/mod.rs` re-exports [`quietly`].

use std::borrow::Cow;
use std::cell::Cell;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use super::events::{
    ApiCallback, ApiHandler, ContextEvent, ContextHandler, DriverHook, GraphEvent, GraphHandler, ModuleHandler,
    NvtxEvent, NvtxHandler, ProfilerApiCall, ProfilerApiHandler, RawDriverCall,
};
use super::ids::{LaunchKinds, PROFILER_API_CBIDS};
use super::kinds::{ApiDomain, CallbackSite, LaunchKind};
use crate::checked::driver::Context;
use crate::checked::library::Cupti;
use crate::sys::cupti::{
    CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain, CUpti_CallbackId, CUpti_CallbackIdResource,
    CUpti_GraphData, CUpti_NvtxData, CUpti_ResourceData, CUpti_nvtx_api_trace_cbid as NvtxCbid,
};
use crate::sys::nvtx;

/// The most driver watchers a subscriber takes ([`HandlerBox::driver_hooks`]).
pub(super) const MAX_DRIVER_WATCHERS: usize = 4;

/// One watcher of driver calls: its hook and the calls it hears.
pub(super) struct DriverHooks {
    pub(super) hook: DriverHook,
    /// Callback ids the hook hears, sorted.
    pub(super) cbids: Vec<u32>,
    /// Those of them the launch handler does not (module loads).
    pub(super) hook_only: Vec<u32>,
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's callbacks silenced: gmprof's own driver calls (loading probed
/// PTX, map buffers) reach neither the hook nor the launch handler.
pub fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let before = QUIET.with(|q| q.replace(true));
    let out = f();
    QUIET.with(|q| q.set(before));
    out
}

pub(super) struct HandlerBox {
    pub(super) cupti: Cupti,
    /// The driver calls' watchers, in the order they were set: each hears its own calls,
    /// before the launch handler (the capture hub's stream-capture watcher, set when it
    /// subscribes, comes first; the probe engine's after it).
    pub(super) driver_hooks: [OnceLock<DriverHooks>; MAX_DRIVER_WATCHERS],
    pub(super) handler: ApiHandler,
    pub(super) nvtx: OnceLock<NvtxHandler>,
    pub(super) contexts: OnceLock<ContextHandler>,
    pub(super) graphs: OnceLock<GraphHandler>,
    pub(super) modules: OnceLock<ModuleHandler>,
    pub(super) profiler_api: OnceLock<ProfilerApiHandler>,
    pub(super) panics: AtomicU64,
    pub(super) kinds: LaunchKinds,
}

impl HandlerBox {
    /// A box with `handler` for launches and the transfer callback ids of each domain; the
    /// other handlers are set later, once each.
    pub(super) fn new(
        cupti: Cupti,
        handler: ApiHandler,
        driver_transfers: &[u32],
        runtime_transfers: &[u32],
    ) -> HandlerBox {
        HandlerBox {
            cupti,
            driver_hooks: std::array::from_fn(|_| OnceLock::new()),
            handler,
            nvtx: OnceLock::new(),
            contexts: OnceLock::new(),
            graphs: OnceLock::new(),
            modules: OnceLock::new(),
            profiler_api: OnceLock::new(),
            panics: AtomicU64::new(0),
            kinds: LaunchKinds::new(driver_transfers, runtime_transfers),
        }
    }
}

/// Reads a NUL-terminated UTF-32 string (Linux `wchar_t`), at most 4096 characters.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated `wchar_t` string.
unsafe fn wide_string(ptr: *const i32) -> String {
    let mut out = String::new();
    if ptr.is_null() {
        return out;
    }
    for i in 0..4096 {
        // SAFETY: the string is NUL-terminated, and reading stops at the NUL.
        let c = unsafe { *ptr.add(i) };
        if c == 0 {
            break;
        }
        out.push(char::from_u32(c as u32).unwrap_or(char::REPLACEMENT_CHARACTER));
    }
    out
}

/// Reads a NUL-terminated C string lossily; NULL reads as "".
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string.
unsafe fn c_string<'a>(ptr: *const std::os::raw::c_char) -> Cow<'a, str> {
    if ptr.is_null() {
        return Cow::Borrowed("");
    }
    // SAFETY: the caller guarantees a NUL-terminated string that outlives the callback.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy()
}

/// Decodes an NVTX callback into a push or pop; `None` for calls gmprof ignores.
///
/// # Safety
/// `data` is the `CUpti_NvtxData` CUPTI passed for callback `cbid`.
unsafe fn nvtx_event<'a>(cbid: u32, data: &'a CUpti_NvtxData) -> Option<NvtxEvent<'a>> {
    let params = data.functionParams;
    if cbid == NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePop.0 {
        return Some(NvtxEvent::Pop);
    }
    if params.is_null() {
        return None;
    }
    let name = if cbid == NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePushA.0 {
        // SAFETY: for nvtxRangePushA the parameters are nvtxRangePushA_params.
        let p = unsafe { &*(params as *const nvtx::nvtxRangePushA_params) };
        // SAFETY: NVTX passes the caller's NUL-terminated message.
        unsafe { c_string(p.message) }
    } else if cbid == NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePushW.0 {
        // SAFETY: for nvtxRangePushW the parameters are nvtxRangePushW_params.
        let p = unsafe { &*(params as *const nvtx::nvtxRangePushW_params) };
        // SAFETY: NVTX passes the caller's NUL-terminated wide message.
        Cow::Owned(unsafe { wide_string(p.message) })
    } else if cbid == NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePushEx.0 {
        // SAFETY: for nvtxRangePushEx the parameters are nvtxRangePushEx_params.
        let p = unsafe { &*(params as *const nvtx::nvtxRangePushEx_params) };
        if p.event_attrib.is_null() {
            return Some(NvtxEvent::Push(Cow::Borrowed("<unnamed>")));
        }
        // SAFETY: a non-NULL attribute pointer points to the caller's attributes.
        let attr = unsafe { &*p.event_attrib };
        match attr.message_type {
            // SAFETY: the message union holds a NUL-terminated ASCII string.
            nvtx::NVTX_MESSAGE_TYPE_ASCII => unsafe { c_string(attr.message as *const std::os::raw::c_char) },
            // SAFETY: the message union holds a NUL-terminated wide string.
            nvtx::NVTX_MESSAGE_TYPE_UNICODE => Cow::Owned(unsafe { wide_string(attr.message as *const i32) }),
            nvtx::NVTX_MESSAGE_TYPE_REGISTERED => Cow::Borrowed("<registered string>"),
            _ => Cow::Borrowed("<unnamed>"),
        }
    } else {
        return None;
    };
    Some(NvtxEvent::Push(name))
}

/// CUPTI's id of a graph node, or `None` when CUPTI cannot give one.
fn node_id(cupti: &Cupti, node: crate::sys::cupti::CUgraphNode) -> Option<u64> {
    let get = cupti.raw().cuptiGetGraphNodeId.as_ref().ok()?;
    if node.is_null() {
        return None;
    }
    let mut id = 0u64;
    // SAFETY: `node` is the live node CUPTI passed to this callback; `id` is a valid out-pointer.
    (unsafe { get(node, &mut id) } == crate::sys::cupti::CUptiResult::CUPTI_SUCCESS).then_some(id)
}

/// Decodes a graph node callback.
fn graph_event(cupti: &Cupti, cbid: u32, data: &CUpti_GraphData) -> Option<GraphEvent> {
    let node = node_id(cupti, data.node)?;
    if cbid == CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED.0 {
        return Some(GraphEvent::NodeCloned { node_id: node, original_node_id: node_id(cupti, data.originalNode)? });
    }
    let mut graph_id = 0u32;
    if let (Ok(get), false) = (cupti.raw().cuptiGetGraphId.as_ref(), data.graph.is_null()) {
        // SAFETY: `data.graph` is the live graph CUPTI passed; `graph_id` is a valid out-pointer.
        if unsafe { get(data.graph, &mut graph_id) } != crate::sys::cupti::CUptiResult::CUPTI_SUCCESS {
            graph_id = 0;
        }
    }
    Some(GraphEvent::NodeCreated { graph_id, node_id: node, node_type: data.nodeType.0 })
}

pub(super) unsafe extern "C" fn trampoline(
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
        CUpti_CallbackDomain::CUPTI_CB_DOMAIN_NVTX => {
            let Some(handler) = boxed.nvtx.get() else { return };
            let result = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: for the NVTX domain CUPTI passes a CUpti_NvtxData for this call.
                let nvtx_data = unsafe { &*(data as *const CUpti_NvtxData) };
                // SAFETY: `nvtx_data` is the NVTX data of callback `cbid`.
                if let Some(event) = unsafe { nvtx_event(cbid, nvtx_data) } {
                    handler(event);
                }
            }));
            if result.is_err() {
                boxed.panics.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE => {
            let result = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: for the resource domain CUPTI passes a CUpti_ResourceData.
                let resource = unsafe { &*(data as *const CUpti_ResourceData) };
                if cbid == CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_MODULE_LOADED.0 {
                    let Some(handler) = boxed.modules.get() else { return };
                    if resource.resourceDescriptor.is_null() {
                        return;
                    }
                    // SAFETY: for module callbacks the descriptor is a CUpti_ModuleResourceData.
                    let module = unsafe {
                        &*(resource.resourceDescriptor as *const crate::sys::cupti::CUpti_ModuleResourceData)
                    };
                    if module.pCubin.is_null() || module.cubinSize == 0 {
                        return;
                    }
                    // SAFETY: CUPTI hands the module's cubin, `cubinSize` bytes, for the call.
                    let cubin = unsafe { std::slice::from_raw_parts(module.pCubin as *const u8, module.cubinSize) };
                    handler(cubin);
                    return;
                }
                if cbid == CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED.0
                    || cbid == CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED.0
                {
                    let Some(handler) = boxed.graphs.get() else { return };
                    if resource.resourceDescriptor.is_null() {
                        return;
                    }
                    // SAFETY: for graph node callbacks the descriptor is a CUpti_GraphData.
                    let graph = unsafe { &*(resource.resourceDescriptor as *const CUpti_GraphData) };
                    if let Some(event) = graph_event(&boxed.cupti, cbid, graph) {
                        handler(event);
                    }
                    return;
                }
                let Some(handler) = boxed.contexts.get() else { return };
                let context = Context(resource.context);
                if cbid == CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_CREATED.0 {
                    handler(ContextEvent::Created(context));
                } else if cbid == CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING.0 {
                    handler(ContextEvent::DestroyStarting(context));
                }
            }));
            if result.is_err() {
                boxed.panics.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        _ => return,
    };
    if QUIET.with(|q| q.get()) {
        return;
    }
    let timer = crate::checked::self_time::start();
    // SAFETY: `data` is the CUpti_CallbackData CUPTI passed for this API-domain callback.
    unsafe { api_callback(boxed, domain, cbid, data) };
    crate::checked::self_time::api_done(timer);
}

/// The names of the API functions this thread's callbacks came from lately, by CUPTI's
/// pointer: a launch loop's callbacks name the same few functions, whose text is then not
/// measured and checked again at every callback.
const NAME_SLOTS: usize = 4;
thread_local! {
    static NAMES: Cell<[(*const c_char, &'static str); NAME_SLOTS]> =
        const { Cell::new([(std::ptr::null(), ""); NAME_SLOTS]) };
    static NEXT_NAME_SLOT: Cell<usize> = const { Cell::new(0) };
}

/// A callback's API function name.
///
/// # Safety
/// `ptr` must be NULL or a NUL-terminated string that lives as long as the process: CUPTI
/// documents `functionName` as a global constant, so equal pointers are the same text.
unsafe fn function_name(ptr: *const c_char) -> &'static str {
    if ptr.is_null() {
        return "";
    }
    let mut names = NAMES.with(Cell::get);
    if let Some((_, name)) = names.iter().find(|(p, _)| *p == ptr) {
        return name;
    }
    // SAFETY: the caller's guarantee: a NUL-terminated string valid for the process.
    let name = unsafe { CStr::from_ptr::<'static>(ptr) }.to_str().unwrap_or("");
    let slot = NEXT_NAME_SLOT.with(|n| {
        let slot = n.get();
        n.set((slot + 1) % NAME_SLOTS);
        slot
    });
    names[slot] = (ptr, name);
    NAMES.with(|c| c.set(names));
    name
}

/// The body of [`trampoline`] for the driver and runtime API domains.
///
/// # Safety
/// `data` must point at the `CUpti_CallbackData` of this callback, valid for the call.
unsafe fn api_callback(boxed: &HandlerBox, domain: ApiDomain, cbid: CUpti_CallbackId, data: *const c_void) {
    if domain == ApiDomain::Driver && PROFILER_API_CBIDS.iter().any(|c| c.0 == cbid) {
        // Never a launch: heard only for its own handler.
        // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData valid for this call.
        let cb = unsafe { &*(data as *const CUpti_CallbackData) };
        if let (Some(handler), CUpti_ApiCallbackSite::CUPTI_API_ENTER) = (boxed.profiler_api.get(), cb.callbackSite) {
            let call = if cbid == PROFILER_API_CBIDS[0].0 { ProfilerApiCall::Start } else { ProfilerApiCall::Stop };
            if catch_unwind(AssertUnwindSafe(|| handler(call))).is_err() {
                boxed.panics.fetch_add(1, Ordering::Relaxed);
            }
        }
        return;
    }
    if domain == ApiDomain::Driver {
        let mut hook_only = false;
        for hooks in boxed.driver_hooks.iter().filter_map(OnceLock::get) {
            if hooks.cbids.binary_search(&cbid).is_err() {
                continue;
            }
            let result = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData valid for this call.
                let cb = unsafe { &*(data as *const CUpti_CallbackData) };
                let enter = cb.callbackSite == CUpti_ApiCallbackSite::CUPTI_API_ENTER;
                let result = (!enter && !cb.functionReturnValue.is_null())
                    // SAFETY: on exit a driver call's return value is its CUresult.
                    .then(|| unsafe { *(cb.functionReturnValue as *const i32) });
                (hooks.hook)(&RawDriverCall {
                    cbid,
                    site: if enter { CallbackSite::Enter } else { CallbackSite::Exit },
                    correlation_id: cb.correlationId,
                    params: cb.functionParams as *mut c_void,
                    result,
                });
            }));
            if result.is_err() {
                boxed.panics.fetch_add(1, Ordering::Relaxed);
            }
            hook_only |= hooks.hook_only.binary_search(&cbid).is_ok();
        }
        if hook_only {
            return;
        }
    }
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData valid for this call.
        let cb = unsafe { &*(data as *const CUpti_CallbackData) };
        // SAFETY: CUPTI's `functionName` (NULL or a global constant string).
        let function_name = unsafe { function_name(cb.functionName) };
        let enter = cb.callbackSite == CUpti_ApiCallbackSite::CUPTI_API_ENTER;
        let launch = boxed.kinds.of(domain, cbid);
        let transfer = launch == LaunchKind::Transfer;
        let event = ApiCallback {
            domain,
            cbid,
            site: if enter { CallbackSite::Enter } else { CallbackSite::Exit },
            correlation_id: cb.correlationId,
            function_name,
            context_uid: cb.contextUid,
            launch,
            params: cb.functionParams,
            result: (transfer && !enter && !cb.functionReturnValue.is_null())
                // SAFETY: on exit a driver call's return value is its CUresult, a runtime
                // call's its cudaError_t: both C enums, an int.
                .then(|| unsafe { *(cb.functionReturnValue as *const i32) }),
            symbol: cb.symbolName,
            _data: PhantomData,
        };
        (boxed.handler)(&event);
    }));
    if result.is_err() {
        boxed.panics.fetch_add(1, Ordering::Relaxed);
    }
}
