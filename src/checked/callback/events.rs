//! What a subscriber hears, decoded: one API callback ([`ApiCallback`]), NVTX, context, graph
//! node and profiler-API events, a raw driver call for the probe engine ([`RawDriverCall`]),
//! and the handler types a [`Subscriber`](super::Subscriber) calls with them.
//!
//! Imports `kinds`, `checked::memset` and `checked::memcpy` (an [`ApiCallback`] reads a
//! transfer's parameters on demand); `dispatch` builds these values, `subscriber` stores the handlers, and
//! `callback/mod.rs` re-exports them.

use std::borrow::Cow;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::sync::Arc;

use super::kinds::{ApiDomain, CallbackSite, LaunchKind};
use crate::checked::driver::Context;
use crate::checked::memset::MemsetCall;
use crate::model::{TransferKind, TransferParams};

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
    pub(super) symbol: *const c_char,
    /// CUPTI's `functionParams`: the call's parameter structure, valid for the callback.
    pub(super) params: *const c_void,
    pub(super) _data: PhantomData<&'a CStr>,
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

    /// On enter of a memset gmprof can read (see [`checked::memset`](crate::checked::memset)):
    /// its size. `None` for other calls and on exit. Read on demand: only kernel replay, which
    /// has no memset activity records, needs it.
    pub fn memset(&self) -> Option<MemsetCall> {
        if self.launch != LaunchKind::Transfer || self.site != CallbackSite::Enter {
            return None;
        }
        // SAFETY: `params` is this callback's parameter structure (or NULL), valid for the
        // callback, which `'a` does not outlive.
        unsafe { crate::checked::memset::read(self.domain, self.cbid, self.params) }
    }

    /// On the enter callback of a memcpy or memset: what its parameters ask for (kind, bytes,
    /// stream; `error` unset). `None` for other callbacks and for the copies
    /// [`crate::checked::memcpy`] does not read (2D, 3D, arrays, symbols).
    pub fn transfer_params(&self) -> Option<TransferParams> {
        if self.launch != LaunchKind::Transfer || self.site != CallbackSite::Enter {
            return None;
        }
        if let Some(m) = self.memset() {
            return Some(TransferParams {
                kind: TransferKind::Memset,
                cuda_kind: None,
                bytes: m.bytes,
                copies: 1,
                stream: None,
                error: None,
            });
        }
        // SAFETY: as in `memset`: this callback's own parameter structure (or NULL).
        let c = unsafe { crate::checked::memcpy::read(self.domain, self.cbid, self.params) }?;
        Some(TransferParams {
            kind: c.kind,
            cuda_kind: c.cuda_kind,
            bytes: c.bytes,
            copies: c.copies,
            stream: c.stream,
            error: None,
        })
    }
}

/// The handler a [`Subscriber`](super::Subscriber) calls. It runs inside the launching thread's CUDA call and
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
