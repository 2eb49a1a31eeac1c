//! CUPTI callback subscription: gmprof hears each kernel launch as it happens, and, when
//! injected into a program, its NVTX ranges and the creation and destruction of contexts.

use std::borrow::Cow;
use std::cell::Cell;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::driver::Context;
use super::library::Cupti;
use super::memset::MemsetCall;
use crate::error::{Error, Result};
use crate::sys::cupti::{
    CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain, CUpti_CallbackId, CUpti_CallbackIdResource,
    CUpti_GraphData, CUpti_NvtxData, CUpti_ResourceData, CUpti_SubscriberHandle,
    CUpti_driver_api_trace_cbid_enum as DriverCbid, CUpti_nvtx_api_trace_cbid as NvtxCbid,
    CUpti_runtime_api_trace_cbid_enum as RuntimeCbid,
};
use crate::sys::nvtx;

#[cfg(any(test, feature = "bench-internals"))]
mod bench;
mod ids;
#[cfg(any(test, feature = "bench-internals"))]
pub(crate) use self::bench::{BenchCall, BenchTrampoline};
use self::ids::{transfer_cbids, LaunchKinds};
pub use self::ids::{DRIVER_GRAPH_LAUNCHES, DRIVER_KERNEL_LAUNCHES, RUNTIME_GRAPH_LAUNCHES, RUNTIME_KERNEL_LAUNCHES};

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

/// One API callback, decoded. It borrows CUPTI's callback data (`'a`, the callback's own
/// duration), from which [`ApiCallback::kernel_symbol`] reads.
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
    /// The API function's name. CUPTI's names are global constants, so it is kept without a
    /// copy (a launch record holds it as it is).
    pub function_name: &'static str,
    /// The context's unique id.
    pub context_uid: u32,
    /// Kernel launch, graph launch or transfer.
    pub launch: LaunchKind,
    /// On exit of a transfer call: what it returned (`CUresult` or `cudaError_t`, 0 on
    /// success). `None` on enter, for launches, and where CUPTI gave no return value.
    pub result: Option<i32>,
    /// CUPTI's `symbolName`: for a kernel launch the kernel's name, else null. Valid for the
    /// callback, read only on demand (a launch's name costs a `strlen`).
    symbol: *const c_char,
    /// CUPTI's `functionParams`: the call's parameter structure, valid for the callback.
    params: *const c_void,
    _data: PhantomData<&'a CStr>,
}

impl<'a> ApiCallback<'a> {
    /// The launched kernel's name as CUPTI gives it in a driver or runtime launch callback
    /// (mangled for C++ kernels); `None` for other calls and for graph launches.
    pub fn kernel_symbol(&self) -> Option<&'a CStr> {
        if self.symbol.is_null() {
            return None;
        }
        // SAFETY: a non-null `symbolName` is a NUL-terminated string valid for the callback,
        // which `'a` (the borrow of CUPTI's callback data) does not outlive.
        Some(unsafe { CStr::from_ptr(self.symbol) })
    }

    /// On enter of a memset gmprof can read (see [`super::memset`]): its size. `None` for
    /// other calls and on exit. Read on demand: only kernel replay, which has no memset
    /// activity records, needs it.
    pub fn memset(&self) -> Option<MemsetCall> {
        if self.launch != LaunchKind::Transfer || self.site != CallbackSite::Enter {
            return None;
        }
        // SAFETY: `params` is this callback's parameter structure (or NULL), valid for the
        // callback, which `'a` does not outlive.
        unsafe { super::memset::read(self.domain, self.cbid, self.params) }
    }
}

/// The handler a [`Subscriber`] calls. It runs inside the launching thread's CUDA call and
/// must be quick; it must not call back into the same CUDA API.
pub type ApiHandler = Arc<dyn Fn(&ApiCallback<'_>) + Send + Sync>;

/// A push or pop of an NVTX range in the default domain (`nvtxRangePushA/W/Ex`,
/// `nvtxRangePop`). Heard only when the program's NVTX calls reach CUPTI, which needs
/// `NVTX_INJECTION64_PATH` pointing at libcupti.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NvtxEvent<'a> {
    /// A range opened on the calling thread, with its message.
    Push(Cow<'a, str>),
    /// The calling thread's innermost range closed.
    Pop,
}

/// The handler for NVTX events; runs on the thread that called NVTX.
pub type NvtxHandler = Arc<dyn Fn(NvtxEvent<'_>) + Send + Sync>;

/// A context's life event, heard in the resource domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextEvent {
    /// The context was created (runs inside the creating CUDA call).
    Created(Context),
    /// The context is about to be destroyed; it is still usable during the callback.
    DestroyStarting(Context),
}

/// The handler for context events.
pub type ContextHandler = Arc<dyn Fn(ContextEvent) + Send + Sync>;

/// A CUDA graph node's life event, heard in the resource domain. CUPTI issues
/// `GRAPHNODE_CREATED` between the enter and exit callbacks of the API call that made the
/// node: a launch, memcpy or memset made while a stream is capturing creates one, as do
/// `cudaGraphAdd*Node`, `cudaGraphClone` and `cudaGraphInstantiate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphEvent {
    /// A node was created in graph `graph_id`.
    NodeCreated {
        /// CUPTI's id of the graph.
        graph_id: u32,
        /// CUPTI's unique id of the node (the `graphNodeId` of activity records).
        node_id: u64,
        /// The driver's `CUgraphNodeType` (0 kernel, 1 memcpy, 2 memset, ...).
        node_type: u32,
    },
    /// A node was cloned from another (graph clone and instantiation: the executable
    /// graph's nodes are clones of the graph's).
    NodeCloned {
        /// The clone's id.
        node_id: u64,
        /// The node it was cloned from.
        original_node_id: u64,
    },
}

/// The handler for graph node events; runs on the thread of the API call that made the node.
pub type GraphHandler = Arc<dyn Fn(GraphEvent) + Send + Sync>;

/// What a module-load handler gets: the loaded module's cubin, valid for the call only.
pub type ModuleHandler = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// The program's own profiler-API calls (`cudaProfilerStart`/`Stop`, which call the driver's
/// `cuProfilerStart`/`Stop`): nsys's `cudaProfilerApi` capture range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilerApiCall {
    /// `cuProfilerStart`, heard on entry.
    Start,
    /// `cuProfilerStop`, heard on entry.
    Stop,
}

/// The handler for [`ProfilerApiCall`]s; runs on the calling thread, inside the call.
pub type ProfilerApiHandler = Arc<dyn Fn(ProfilerApiCall) + Send + Sync>;

/// The driver callback ids of the profiler API.
const PROFILER_API_CBIDS: [DriverCbid; 2] =
    [DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuProfilerStop];

/// A driver API call as the probe engine hears it: the raw parameter struct of the call
/// (`cuLaunchKernel_params`, `cuModuleLoadData_params`, ... of CUDA's
/// `generated_cuda_meta.h`), which a hook may rewrite on [`CallbackSite::Enter`]: the driver
/// reads the call's arguments from that struct after the callbacks return.
#[derive(Debug)]
pub struct RawDriverCall {
    /// The driver callback id.
    pub cbid: u32,
    /// Enter or exit.
    pub site: CallbackSite,
    /// The call's correlation id.
    pub correlation_id: u32,
    /// The parameter struct.
    pub params: *mut c_void,
    /// On exit, the `CUresult` the call returned (`None` on enter).
    pub result: Option<i32>,
}

/// The probe engine's hook on driver calls; runs inside the program's CUDA call.
pub type DriverHook = Arc<dyn Fn(&RawDriverCall) + Send + Sync>;

struct DriverHooks {
    hook: DriverHook,
    /// Callback ids the hook hears, sorted.
    cbids: Vec<u32>,
    /// Those of them the launch handler does not (module loads).
    hook_only: Vec<u32>,
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

struct HandlerBox {
    cupti: Cupti,
    driver_hook: OnceLock<DriverHooks>,
    handler: ApiHandler,
    nvtx: OnceLock<NvtxHandler>,
    contexts: OnceLock<ContextHandler>,
    graphs: OnceLock<GraphHandler>,
    modules: OnceLock<ModuleHandler>,
    profiler_api: OnceLock<ProfilerApiHandler>,
    panics: AtomicU64,
    kinds: LaunchKinds,
}

impl HandlerBox {
    /// A box with `handler` for launches and the transfer callback ids of each domain; the
    /// other handlers are set later, once each.
    fn new(cupti: Cupti, handler: ApiHandler, driver_transfers: &[u32], runtime_transfers: &[u32]) -> HandlerBox {
        HandlerBox {
            cupti,
            driver_hook: OnceLock::new(),
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

/// The resource callbacks of graph nodes ([`GraphEvent`]).
const GRAPH_NODE_CBIDS: [CUpti_CallbackIdResource; 2] = [
    CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
    CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
];

/// The default-domain NVTX range callbacks gmprof listens to.
pub const NVTX_RANGE_CALLBACKS: &[NvtxCbid] = &[
    NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePushA,
    NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePushW,
    NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePushEx,
    NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePop,
];

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
    let timer = super::self_time::start();
    // SAFETY: `data` is the CUpti_CallbackData CUPTI passed for this API-domain callback.
    unsafe { api_callback(boxed, domain, cbid, data) };
    super::self_time::api_done(timer);
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
        if let Some(hooks) = boxed.driver_hook.get().filter(|h| h.cbids.binary_search(&cbid).is_ok()) {
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
            if hooks.hook_only.binary_search(&cbid).is_ok() {
                return;
            }
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

/// A CUPTI callback subscriber; unsubscribed on drop. Only one may exist per process
/// (CUPTI refuses a second with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
#[must_use = "dropping it unsubscribes"]
pub struct Subscriber {
    cupti: Cupti,
    handle: CUpti_SubscriberHandle,
    userdata: *mut HandlerBox,
    /// The launch and transfer callbacks [`Subscriber::subscribe_launches`] enabled, which
    /// [`Subscriber::set_launch_callbacks`] turns off and on again.
    launch_cbids: Vec<(CUpti_CallbackDomain, u32)>,
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
        let userdata = Box::into_raw(Box::new(HandlerBox::new(*cupti, handler, &driver_transfers, &runtime_transfers)));
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
        let driver = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API;
        let runtime = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API;
        let launch_cbids = DRIVER_KERNEL_LAUNCHES
            .iter()
            .chain(DRIVER_GRAPH_LAUNCHES)
            .map(|c| (driver, c.0))
            .chain(RUNTIME_KERNEL_LAUNCHES.iter().chain(RUNTIME_GRAPH_LAUNCHES).map(|c| (runtime, c.0)))
            .chain(driver_transfers.iter().map(|&c| (driver, c)))
            .chain(runtime_transfers.iter().map(|&c| (runtime, c)))
            .collect();
        let sub = Subscriber { cupti: *cupti, handle, userdata, launch_cbids };
        sub.set_launch_callbacks(true)?;
        Ok(sub)
    }

    /// Calls `handler` for every default-domain NVTX range push and pop. Set once per
    /// subscriber.
    pub fn watch_nvtx(&self, handler: NvtxHandler) -> Result<()> {
        let cbids: Vec<u32> = NVTX_RANGE_CALLBACKS.iter().map(|c| c.0).collect();
        self.watch(|b| &b.nvtx, handler, "NVTX callbacks", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_NVTX, &cbids)
    }

    /// Calls `handler` when a context is created and when one starts being destroyed. Set
    /// once per subscriber.
    pub fn watch_contexts(&self, handler: ContextHandler) -> Result<()> {
        let cbids = [
            CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_CREATED.0,
            CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING.0,
        ];
        self.watch(|b| &b.contexts, handler, "context events", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, &cbids)
    }

    /// Calls `handler` when a CUDA graph node is created or cloned. Set once per subscriber.
    pub fn watch_graphs(&self, handler: GraphHandler) -> Result<()> {
        let cbids = GRAPH_NODE_CBIDS.map(|c| c.0);
        self.watch(|b| &b.graphs, handler, "graph events", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, &cbids)
    }

    /// Calls `handler` with the cubin of every module loaded from now on. Set once per
    /// subscriber.
    pub fn watch_modules(&self, handler: ModuleHandler) -> Result<()> {
        let cbids = [CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_MODULE_LOADED.0];
        self.watch(|b| &b.modules, handler, "module loads", CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, &cbids)
    }

    /// Sets one of the subscriber's handlers (once) and enables its callbacks.
    fn watch<T>(
        &self,
        slot: impl Fn(&HandlerBox) -> &OnceLock<T>,
        handler: T,
        what: &str,
        domain: CUpti_CallbackDomain,
        cbids: &[u32],
    ) -> Result<()> {
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        let boxed = unsafe { &*self.userdata };
        slot(boxed).set(handler).map_err(|_| Error::InvalidState(format!("{what} are already watched")))?;
        for &cbid in cbids {
            self.enable(domain, cbid)?;
        }
        Ok(())
    }

    /// Calls `hook` on enter and exit of the driver calls `cbids` (kernel launches and
    /// module loads), before the launch handler. Set once per subscriber.
    pub fn watch_driver(&self, hook: DriverHook, cbids: &[DriverCbid]) -> Result<()> {
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        let boxed = unsafe { &*self.userdata };
        let mut ids: Vec<u32> = cbids.iter().map(|c| c.0).collect();
        ids.sort_unstable();
        ids.dedup();
        let launches: Vec<u32> = DRIVER_KERNEL_LAUNCHES.iter().chain(DRIVER_GRAPH_LAUNCHES).map(|c| c.0).collect();
        let hook_only: Vec<u32> = ids.iter().copied().filter(|c| !launches.contains(c)).collect();
        boxed
            .driver_hook
            .set(DriverHooks { hook, cbids: ids.clone(), hook_only })
            .map_err(|_| Error::InvalidState("driver calls are already hooked".into()))?;
        for cbid in ids {
            self.enable(CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API, cbid)?;
        }
        Ok(())
    }

    /// Turns the launch and transfer callbacks of [`Subscriber::subscribe_launches`] on or off,
    /// with the graph node callbacks of [`Subscriber::watch_graphs`] when they are watched. An
    /// on-demand gmprof keeps them off while it is idle: a program's CUDA calls then pay for no
    /// callback of gmprof's.
    pub fn set_launch_callbacks(&self, on: bool) -> Result<()> {
        for &(domain, cbid) in &self.launch_cbids {
            self.set_callback(on, domain, cbid)?;
        }
        // SAFETY: `userdata` lives until `close`, which needs `&mut self`.
        if unsafe { &*self.userdata }.graphs.get().is_some() {
            for cbid in GRAPH_NODE_CBIDS {
                self.set_callback(on, CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE, cbid.0)?;
            }
        }
        Ok(())
    }

    /// Calls `handler` on entry of `cuProfilerStart` and `cuProfilerStop` (which
    /// `cudaProfilerStart`/`Stop` call). Set once per subscriber.
    pub fn watch_profiler_api(&self, handler: ProfilerApiHandler) -> Result<()> {
        let cbids: Vec<u32> = PROFILER_API_CBIDS.iter().map(|c| c.0).collect();
        self.watch(
            |b| &b.profiler_api,
            handler,
            "profiler API calls",
            CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
            &cbids,
        )
    }

    fn enable(&self, domain: CUpti_CallbackDomain, cbid: u32) -> Result<()> {
        self.set_callback(true, domain, cbid)
    }

    fn set_callback(&self, on: bool, domain: CUpti_CallbackDomain, cbid: u32) -> Result<()> {
        let handle = self.handle;
        let what = if on { "enabling a callback" } else { "disabling a callback" };
        call_cupti!(self.cupti, cuptiEnableCallback, what, |f| {
            // SAFETY: `handle` is our live subscriber.
            unsafe { f(u32::from(on), handle, domain, cbid) }
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
