//! The callback ids gmprof listens to in the driver and runtime API domains, and what each
//! one launches: kernel launches, graph launches, and memcpys and memsets (found by name);
//! also the profiler-API, graph-node and NVTX range callback ids.
//!
//! Imports only `kinds`; `dispatch` and `subscriber` import it, `callback/mod.rs` re-exports
//! its public ids.

use std::ffi::CStr;

use super::kinds::{ApiDomain, LaunchKind};
use crate::checked::library::Cupti;
use crate::sys::cupti::{
    CUpti_CallbackDomain, CUpti_CallbackIdResource, CUpti_driver_api_trace_cbid_enum as DriverCbid,
    CUpti_nvtx_api_trace_cbid as NvtxCbid, CUpti_runtime_api_trace_cbid_enum as RuntimeCbid,
};

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

/// The driver callback ids of the profiler API.
pub(super) const PROFILER_API_CBIDS: [DriverCbid; 2] =
    [DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuProfilerStop];

/// The resource callbacks of graph nodes ([`GraphEvent`](super::GraphEvent)).
pub(super) const GRAPH_NODE_CBIDS: [CUpti_CallbackIdResource; 2] = [
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

/// What each callback id of the two API domains launches, indexed by id: one load per
/// callback (a binary search over the few hundred transfer ids took half the trampoline's
/// time in the launch-path benchmark). Ids past the end are kernel launches.
pub(super) struct LaunchKinds {
    driver: Vec<LaunchKind>,
    runtime: Vec<LaunchKind>,
}

impl LaunchKinds {
    pub(super) fn new(driver_transfers: &[u32], runtime_transfers: &[u32]) -> LaunchKinds {
        fn table(transfers: &[u32], graphs: impl Iterator<Item = u32>) -> Vec<LaunchKind> {
            let graphs: Vec<u32> = graphs.collect();
            let len = transfers.iter().chain(&graphs).map(|&c| c as usize + 1).max().unwrap_or(0);
            let mut kinds = vec![LaunchKind::Kernel; len];
            for &c in &graphs {
                kinds[c as usize] = LaunchKind::Graph;
            }
            for &c in transfers {
                kinds[c as usize] = LaunchKind::Transfer;
            }
            kinds
        }
        LaunchKinds {
            driver: table(driver_transfers, DRIVER_GRAPH_LAUNCHES.iter().map(|c| c.0)),
            runtime: table(runtime_transfers, RUNTIME_GRAPH_LAUNCHES.iter().map(|c| c.0)),
        }
    }

    pub(super) fn of(&self, domain: ApiDomain, cbid: u32) -> LaunchKind {
        let kinds = match domain {
            ApiDomain::Driver => &self.driver,
            ApiDomain::Runtime => &self.runtime,
        };
        kinds.get(cbid as usize).copied().unwrap_or(LaunchKind::Kernel)
    }
}

/// Callback ids of a domain whose API name contains `Memcpy` or `Memset`, sorted. Found by
/// name so that every variant (async, 2D, 3D, per-thread stream, peer) is covered.
pub(super) fn transfer_cbids(cupti: &Cupti, domain: CUpti_CallbackDomain, size: u32) -> Vec<u32> {
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
