//! The driver calls behind probes inside CUDA graphs (see `graphs` for what is probed and
//! why): the map pool grown before a capture begins ([`before_capture`]), a launch during a
//! capture built into its graph as the probed function ([`probe_captured`]), the capture's
//! graph ([`capture_ended`]), its executable graphs and their launches ([`instantiated`],
//! [`graph_launched`]), and the maps read once at the end of the run ([`finish_graphs`]).
//!
//! During a capture nothing here allocates, copies or waits: the maps come from the pool, and
//! the launch's parameters are rewritten as for any probed launch (the driver copies them into
//! the graph node). The SASS path's graph calls go through here too: its captured nodes
//! ([`sass_captured`]), the graphs they end in and the flush after each graph launch
//! (`sass.rs`). Imports `config`, `graphs`, `launch`, `params`, `probed` and `state`;
//! `engine` imports it.

use std::collections::HashMap;
use std::ffi::c_void;

use super::config::ProbeConfig;
use super::graphs::GraphNode;
use super::launch::Launch;
use super::params::{note_internal, substitute, EndCaptureParams, GraphLaunchParams, InstantiateParams};
use super::probed::{launchable, match_shared_memory, NOT_SELECTED};
use super::state::{State, STATE};
use crate::capture::stream_capture;
use crate::checked::callback::{quietly, RawDriverCall};
use crate::checked::module::{ModuleApi, RawFunction};
use crate::model::TransferKind;
use crate::probe::decode::{self, LaunchInfo};
use crate::probe::MapVia;
use crate::report::probes::ProbeTotal;
use crate::sys::cupti::{CUpti_driver_api_trace_cbid_enum as Cbid, CUstream};

/// The graph instantiations the engine hears (each call's parameters start with the
/// out-handle of the executable graph, then the graph).
pub const INSTANTIATES: &[Cbid] = &[
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz,
];

/// At the enter of a call that begins a capture, while no other capture is in progress: the
/// pool gets a zeroed chunk if it is short of room (allocated, zeroed on the legacy stream and
/// waited for, all before the capture begins). A failure is kept and said at the end.
pub(super) fn before_capture(api: &ModuleApi, state: &mut State) {
    if stream_capture::any() {
        return;
    }
    let ctx = api.current_context();
    let Some(bytes) = state.graphs.chunk_wanted(ctx) else { return };
    let null: CUstream = std::ptr::null_mut();
    match quietly(|| api.alloc_zeroed(bytes, null)).and_then(|p| match quietly(|| api.synchronize(null)) {
        Ok(()) => Ok(p),
        Err(e) => {
            quietly(|| api.free(p));
            Err(e)
        }
    }) {
        Ok(p) => {
            note_internal(TransferKind::Memset, bytes);
            state.graphs.add_chunk(ctx, p, bytes);
        }
        Err(e) => state.graphs.pool_error = Some(e.to_string()),
    }
}

/// A launch during a capture: built into the graph as the probed function when that is safe
/// (module doc of `graphs`); `Err(why)` leaves it as it is.
#[allow(clippy::too_many_arguments)]
pub(super) fn probe_captured(
    api: &ModuleApi,
    config: &ProbeConfig,
    state: &mut State,
    call: &RawDriverCall,
    plain: bool,
    f: RawFunction,
    args: *mut *mut c_void,
    dims: ([u32; 3], [u32; 3]),
    stream: CUstream,
    shared: u32,
) -> Result<(), String> {
    if state.graphs.limit == 0 {
        return Err("the graph map pool is off (--probe-graph-pool 0)".into());
    }
    if config.maps != MapVia::Param {
        return Err("maps in global variables need a copy before each launch (use --probe-maps param)".into());
    }
    let key = f as usize;
    let probed = match state.probed.get(&key) {
        Some(Some(p)) => p.clone(),
        Some(None) => return Err("its kernel is not probed".into()),
        None => {
            return Err("its kernel was first launched during the capture (gmprof loads a probed kernel only \
                            outside captures)"
                .into())
        }
    };
    let row = state.kernels.get(key).ok_or("its kernel has no row")?;
    if row.detail == NOT_SELECTED {
        return Err(NOT_SELECTED.into());
    }
    if args.is_null() {
        return Err("its arguments were passed through `extra`".into());
    }
    launchable(&probed, dims.1).and_then(|()| match_shared_memory(api, f, &probed, shared))?;
    let capture = stream_capture::origin_of(stream as usize)
        .ok_or("several captures are in progress and its stream began none of them")?;
    let blocks = dims.0.iter().map(|&d| d as u64).product::<u64>();
    let threads = dims.1.iter().map(|&d| d as u64).product::<u64>();
    let info = LaunchInfo { correlation_id: call.correlation_id, kernel: row.kernel.clone(), blocks, threads };
    let variant = Some(row.variant);
    let sizes: Vec<usize> = config.probes.iter().map(|spec| decode::map_bytes(spec, &info)).collect();
    let Some(maps) = state.graphs.take(api.current_context(), &sizes) else {
        let why = match &state.graphs.pool_error {
            Some(e) => format!("the graph map pool could not grow: {e}"),
            None => format!("the graph map pool is full ({} MiB; raise --probe-graph-pool)", state.graphs.limit >> 20),
        };
        return Err(why);
    };
    let ptrs: Box<[u64]> = maps.iter().map(|m| m.0).collect();
    // SAFETY: the enter of a hooked launch of this kind (the engine's module doc); `args` is
    // the program's array, with `params` entries; `ptrs` is kept in `graph_args` until the
    // call's exit.
    let new_args = unsafe { substitute(call, plain, &probed, args, &ptrs, true) };
    state.graph_args.insert(call.correlation_id, (new_args, ptrs));
    state.graphs.nodes.push(GraphNode { launch: Launch { info, variant }, maps, capture, graph: None });
    Ok(())
}

/// A captured launch the PTX path did not build into its graph: a node counted by SASS
/// metrics at its graph's launches (`sass_graphs`), when that path counts inside graphs and
/// already collects in the context. Only host-side queries are made (no CUPTI call, no wait).
/// `Err(why)` leaves it unprobed.
pub(super) fn sass_captured(
    api: &ModuleApi,
    config: &ProbeConfig,
    state: &mut State,
    call: &RawDriverCall,
    f: RawFunction,
    dims: ([u32; 3], [u32; 3]),
    stream: CUstream,
) -> Result<(), String> {
    let Some(sass) = state.sass.as_ref() else {
        return Err(state.sass_off.clone().unwrap_or_else(|| "SASS metrics are off (--probe-sass never)".into()));
    };
    sass.counts_captured(api.current_context())?;
    let key = f as usize;
    let (mangled, variant) = match state.kernels.get(key) {
        Some(row) if row.detail == NOT_SELECTED => return Err(NOT_SELECTED.into()),
        Some(row) => (row.mangled.clone(), Some(row.variant)),
        None => (quietly(|| api.function_name(f)).map_err(|e| format!("its name could not be read: {e}"))?, None),
    };
    let kernel = crate::probe::demangle(&mangled);
    if variant.is_none() && !config.kernels.as_ref().is_none_or(|p| p.matches(&mangled) || p.matches(&kernel)) {
        return Err(NOT_SELECTED.into());
    }
    let capture = stream_capture::origin_of(stream as usize)
        .ok_or("several captures are in progress and its stream began none of them")?;
    let blocks = dims.0.iter().map(|&d| d as u64).product::<u64>();
    let threads = dims.1.iter().map(|&d| d as u64).product::<u64>();
    let info = LaunchInfo { correlation_id: call.correlation_id, kernel, blocks, threads };
    if let Some(sass) = state.sass.as_mut() {
        sass.graphs.captured(capture, mangled, Launch { info, variant });
    }
    Ok(())
}

/// The exit of a probed captured launch: its arguments are no longer needed; a launch that
/// failed built no node.
pub(super) fn captured_exit(state: &mut State, correlation_id: u32, result: Option<i32>) {
    if state.graph_args.remove(&correlation_id).is_some() && result != Some(0) {
        state.graphs.nodes.retain(|n| n.launch.info.correlation_id != correlation_id);
    }
    if result != Some(0) {
        if let Some(sass) = state.sass.as_mut() {
            sass.graphs.nodes.retain(|n| n.launch.info.correlation_id != correlation_id);
        }
    }
}

/// The exit of a capture's end call: its nodes belong to the graph it returned.
pub(super) fn capture_ended(state: &mut State, call: &RawDriverCall) {
    if call.params.is_null() {
        return;
    }
    // SAFETY: cuStreamEndCapture's parameters, valid for the callback.
    let p = unsafe { &*(call.params as *const EndCaptureParams) };
    let graph = (call.result == Some(0) && !p.graph.is_null())
        // SAFETY: on success the out-pointer holds the new graph.
        .then(|| unsafe { *p.graph } as usize)
        .filter(|&g| g != 0);
    state.graphs.capture_ended(p.stream as usize, graph);
    if let Some(sass) = state.sass.as_mut() {
        sass.graphs.capture_ended(p.stream as usize, graph);
    }
}

/// The exit of a graph instantiation.
pub(super) fn instantiated(state: &mut State, call: &RawDriverCall) {
    if call.result != Some(0) || call.params.is_null() {
        return;
    }
    // SAFETY: every hooked instantiation's parameters start with these two fields.
    let p = unsafe { &*(call.params as *const InstantiateParams) };
    if p.exec.is_null() {
        return;
    }
    // SAFETY: on success the out-pointer holds the executable graph.
    let exec = unsafe { *p.exec } as usize;
    state.graphs.instantiated(exec, p.graph as usize);
    if let Some(sass) = state.sass.as_mut() {
        sass.graphs.instantiated(exec, p.graph as usize);
    }
}

/// The executable graph a graph launch call launches, and its stream.
pub(super) fn launched_exec(call: &RawDriverCall) -> Option<(usize, CUstream)> {
    if call.params.is_null() {
        return None;
    }
    // SAFETY: cuGraphLaunch's parameters (both variants), valid for the callback.
    let p = unsafe { &*(call.params as *const GraphLaunchParams) };
    Some((p.exec as usize, p.stream))
}

/// The exit of a graph launch: the PTX path's launch count, and the SASS path's flush.
pub(super) fn graph_launched(state: &mut State, call: &RawDriverCall) {
    let Some((exec, stream)) = launched_exec(call) else { return };
    if let Some(sass) = state.sass.as_mut() {
        sass.graph_launch_exit(exec, stream, call.result == Some(0));
    }
    if call.result == Some(0) {
        state.graphs.launched(exec);
    }
}

/// Reads the maps of every kernel probed inside a graph, once, at the end of the run (after
/// a context synchronize; not while a capture is in progress), into their
/// probe_launches.csv rows. Idempotent.
pub fn finish_graphs() {
    let mut guard = STATE.lock();
    let Some((config, state)) = guard.as_mut() else { return };
    if state.graph_records.is_some() || state.graphs.nodes.is_empty() {
        return;
    }
    let read: Result<HashMap<u64, Vec<u8>>, String> = if stream_capture::any() {
        Err("a stream capture was in progress at the end of the run; the counts were not read".into())
    } else {
        ModuleApi::get()
            .map_err(|e| e.to_string())
            .and_then(|api| {
                for ctx in state.graphs.contexts() {
                    quietly(|| api.synchronize_context(ctx)).map_err(|e| e.to_string())?;
                }
                Ok(api)
            })
            .and_then(|api| {
                let mut maps = HashMap::new();
                for &(ptr, bytes) in state.graphs.nodes.iter().flat_map(|n| n.maps.iter()) {
                    note_internal(TransferKind::MemcpyDtoH, bytes);
                    maps.insert(ptr, quietly(|| api.read(ptr, bytes)).map_err(|e| e.to_string())?);
                }
                Ok(maps)
            })
    };
    let records = (0..state.graphs.nodes.len())
        .map(|i| {
            let node = &state.graphs.nodes[i];
            let totals = read.as_ref().map_err(Clone::clone).map(|maps| {
                let mut totals = Vec::new();
                for (spec, (ptr, _)) in config.probes.iter().zip(&node.maps) {
                    let Some(map) = maps.get(ptr) else { continue };
                    let records = spec.layout.records(node.launch.info.blocks, node.launch.info.threads);
                    for f in &spec.fields {
                        if let Some(total) = decode::field_total(spec, map, &f.name) {
                            totals.push(ProbeTotal { probe: spec.name.clone(), field: f.name.clone(), total, records });
                        }
                    }
                }
                totals
            });
            state.graphs.record(i, totals)
        })
        .collect();
    state.graph_records = Some(records);
}
