//! The probe engine's driver hook: [`install`] puts it on the pinned subscriber, and the
//! hook hears module loads and launches, swaps in probed functions, reads the maps back and
//! decodes them; [`outputs`] hands over what was probed, and [`internal_transfers`] the
//! engine's own transfers.
//!
//! Composes the folder's files: imports `config`, `launch`, `state`, `images`, `probed` and
//! `sass`; `capture/probe/mod.rs` re-exports its public items, and no file of the folder
//! imports it.

use std::collections::HashMap;
use std::time::Instant;

use super::config::{ProbeConfig, SassUse};
use super::graph_hooks;
use super::images::{loaded, read_image, Loaded, Source};
use super::launch::{launch_record, Launch};
use super::params::{note_internal, substitute, LaunchExParams, LaunchParams, LoadParams};
use super::probed::{launchable, match_shared_memory, prepare, NOT_SELECTED};
use super::sass::{self, OtherCounts, SassState, PTX_SOURCE, SASS_SOURCE};
use super::state::{Pending, State, STATE};
use crate::capture::stream_capture;
use crate::checked::callback::{quietly, CallbackSite, RawDriverCall};
use crate::checked::module::{ModuleApi, RawFunction};
use crate::device_timers::{BlockRun, TimedLaunch};
use crate::error::Result;
use crate::model::TransferKind;
use crate::probe::decode::{self, LaunchInfo};
use crate::probe::select;
use crate::probe::{demangle, MapVia, ProbeSpec};
use crate::report::probe_kernels::ProbeKernel;
use crate::report::probe_trace::BLOCK_SCHED_REGION;
use crate::report::probes::{ProbeTotal, ProbedLaunch as LaunchRecord};
use crate::sys::cupti::CUpti_driver_api_trace_cbid_enum as Cbid;

/// The driver callbacks the probe engine hooks.
pub const HOOKED: &[Cbid] = &[
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuModuleLoad,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
];

/// Why a launch heard while a stream captured is not probed.
pub const CAPTURED: &str = "launched while a CUDA stream was capturing: a graph node, run later by its graph \
unprobed (gmprof makes no allocation, copy or wait during a capture, which would invalidate it)";

/// Installs the probe engine on the pinned subscriber. With [`SassUse::Always`], an
/// unavailable SASS metrics API is an error; with [`SassUse::Auto`] it leaves kernels without
/// PTX unprobed, saying why.
pub fn install(config: ProbeConfig) -> Result<()> {
    ModuleApi::get()?;
    let mut state =
        State { graphs: super::graphs::GraphProbes::with_limit(config.graph_pool_bytes), ..State::default() };
    let sass_fields = config.probes.iter().any(|p| crate::probe::sass::sass_fields(&p.name).is_some());
    if config.sass == SassUse::Always {
        if let Some(p) = config.probes.iter().find(|p| crate::probe::sass::sass_fields(&p.name).is_none()) {
            return Err(crate::error::Error::InvalidConfig(format!(
                "probe {} needs PTX, and --probe-sass always turns the PTX probes off (SASS metrics give exec_count \
                 and gmem_bytes); use --probe-sass auto",
                p.name
            )));
        }
    }
    if let (Some(why), SassUse::Always) = (&config.sass_blocked, config.sass) {
        return Err(crate::error::Error::InvalidConfig(format!("--probe-sass always: {why}")));
    }
    if let (Some(why), true) = (&config.sass_blocked, config.sass != SassUse::Never && sass_fields) {
        state.sass_off = Some(why.clone());
    } else if config.sass != SassUse::Never && sass_fields {
        match SassState::new(config.sass_launches, config.sass_dump.clone()) {
            Ok(mut s) => {
                // Cubins for the hottest instructions' source lines; without them the lines
                // are blank.
                if let Err(e) = crate::capture::cubins::watch() {
                    s.failures.push(format!("source lines unavailable: {e}"));
                }
                state.sass = Some(s)
            }
            Err(e) if config.sass == SassUse::Always => return Err(e),
            Err(e) => state.sass_off = Some(format!("CUPTI's SASS metrics are unavailable: {e}")),
        }
    }
    *STATE.lock() = Some((config, state));
    crate::capture::hub::watch_driver(std::sync::Arc::new(on_driver_call), &hooked())
}

/// What the hook hears: [`HOOKED`], the stream captures' begin and end calls
/// (`capture::stream_capture::CBIDS`), during which the engine allocates, copies and waits
/// for nothing, and the graph instantiations (`graph_hooks::INSTANTIATES`).
fn hooked() -> Vec<Cbid> {
    HOOKED.iter().chain(stream_capture::CBIDS).chain(graph_hooks::INSTANTIATES).copied().collect()
}

/// An NVTX range opened (`Some(name)`) or closed (`None`, with the name it had): keeps
/// count of the open ranges `--probe-range` selects.
pub fn on_range(name: &str, opened: bool) {
    if let Some((config, state)) = STATE.lock().as_mut() {
        if config.range.as_ref().is_some_and(|p| p.matches(name)) {
            state.range_depth += if opened { 1 } else { -1 };
        }
    }
}

fn on_driver_call(call: &RawDriverCall) {
    // The hub's watcher, which hears the call first, has noted the capture's begin or end.
    if stream_capture::is_capture_call(call.cbid) {
        let mut guard = STATE.lock();
        let Some((_, state)) = guard.as_mut() else { return };
        if call.site == CallbackSite::Enter && stream_capture::begins(call.cbid) {
            // Not yet capturing: the SASS path's last flush may still wait for the GPU, and
            // the graph map pool may grow.
            let capturing = stream_capture::any();
            if let Some(sass) = state.sass.as_mut() {
                sass.before_capture(capturing);
            }
            if let Ok(api) = ModuleApi::get() {
                graph_hooks::before_capture(api, state);
            }
        } else if call.site == CallbackSite::Exit && stream_capture::ends(call.cbid) {
            graph_hooks::capture_ended(state, call);
        }
        return;
    }
    if graph_hooks::INSTANTIATES.iter().any(|c| c.0 == call.cbid) {
        if call.site == CallbackSite::Exit {
            if let Some((_, state)) = STATE.lock().as_mut() {
                graph_hooks::instantiated(state, call);
            }
        }
        return;
    }
    let id = call.cbid;
    let is = |c: Cbid| c.0 == id;
    let launch =
        is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) || is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz);
    let launch_ex =
        is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx) || is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz);
    let mut guard = STATE.lock();
    let Some((config, state)) = guard.as_mut() else { return };
    if is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) || is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) {
        // A graph's kernels are not launches gmprof hears: the SASS path flushes after the
        // graph launch (`sass_graphs`), or their counts are flushed apart later.
        if call.site == CallbackSite::Exit {
            graph_hooks::graph_launched(state, call);
        } else if let (Some((exec, _)), Some(sass)) = (graph_hooks::launched_exec(call), state.sass.as_mut()) {
            sass.graph_launch_enter(exec);
        }
        return;
    }
    let Ok(api) = ModuleApi::get() else { return };
    match (call.site, launch || launch_ex) {
        (CallbackSite::Exit, false) if call.result == Some(0) => {
            let from_file = is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuModuleLoad)
                || is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile);
            let library = is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData)
                || is(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile);
            // SAFETY: every hooked load's parameters start with the out-handle and the image.
            let p = unsafe { &*(call.params as *const LoadParams) };
            if p.handle.is_null() || p.image.is_null() {
                return;
            }
            // SAFETY: on a successful exit the out-handle holds the new module or library.
            let handle = unsafe { *p.handle };
            let module = if library { quietly(|| api.library_module(handle)).ok() } else { Some(handle) };
            let loaded = if from_file {
                // SAFETY: the file loads pass a NUL-terminated path where the others pass
                // the image.
                let path = unsafe { std::ffi::CStr::from_ptr(p.image as *const std::ffi::c_char) };
                let file = Some(path.to_string_lossy().into_owned());
                match std::fs::read(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path.to_bytes())) {
                    Ok(bytes) => Loaded { file, ..loaded(&bytes) },
                    Err(e) => Loaded {
                        source: Source::NoPtx(format!("the module file could not be read back: {e}"), None),
                        id: None,
                        file,
                    },
                }
            } else {
                // SAFETY: the image the program passed is valid for the duration of the call.
                unsafe { read_image(p.image) }
            };
            if let Some(m) = module {
                state.modules.insert(m as usize, loaded);
            }
        }
        (CallbackSite::Enter, true) => {
            if config.range.is_some() && state.range_depth <= 0 {
                return;
            }
            let (f, args, dims, stream, shared, how) = if launch {
                // SAFETY: cuLaunchKernel's parameter struct.
                let p = unsafe { &*(call.params as *const LaunchParams) };
                let how = format!("cuLaunchKernel, shared {} B, extra {}", p.shared, !p.extra.is_null());
                (p.f, p.kernel_params, (p.grid, p.block), p.stream, p.shared, how)
            } else {
                // SAFETY: cuLaunchKernelEx's parameter struct; its config is valid for the call.
                let p = unsafe { &*(call.params as *const LaunchExParams) };
                if p.config.is_null() {
                    return;
                }
                // SAFETY: checked non-null above.
                let c = unsafe { &*p.config };
                let attrs: Vec<u32> = (0..c.num_attrs as usize)
                    // SAFETY: `attrs` has `num_attrs` CUlaunchAttribute entries (72 bytes
                    // each: the id, padding, then a 64-byte value union).
                    .map(|i| unsafe { *((c.attrs as *const u8).add(i * 72) as *const u32) })
                    .collect();
                let how = format!("cuLaunchKernelEx, shared {} B, attributes {attrs:?}", c.shared);
                (p.f, p.kernel_params, (c.grid, c.block), c.stream, c.shared, how)
            };
            if stream_capture::any() {
                // No allocation, copy, wait or SASS flush now: the launch is a graph node,
                // probed only with maps from the pool.
                let probed =
                    graph_hooks::probe_captured(api, config, state, call, launch, f, args, dims, stream, shared);
                if let Err(why) = probed {
                    // Else a node the SASS path counts at its graph's launches.
                    if let Err(sass_why) = graph_hooks::sass_captured(api, config, state, call, f, dims, stream) {
                        captured_launch(api, state, f, format!("{why}; {sass_why}"));
                    }
                }
                return;
            }
            for ptr in std::mem::take(&mut state.deferred_frees) {
                quietly(|| api.free(ptr));
            }
            let ptx = config.sass != SassUse::Always;
            let probed_fn = prepare(api, config, state, f, args.is_null(), dims.1, ptx);
            let blocks = dims.0.iter().map(|&d| d as u64).product::<u64>();
            let threads = dims.1.iter().map(|&d| d as u64).product::<u64>();
            let row = state.kernels.get(f as usize);
            let kernel = row.map(|k| k.kernel.clone()).unwrap_or_default();
            let variant = row.map(|k| k.variant);
            let info = LaunchInfo { correlation_id: call.correlation_id, kernel, blocks, threads };
            let heard = Launch { info, variant };
            let Some(probed_fn) = probed_fn else {
                count_with_sass(state, f as usize, heard);
                return;
            };
            let info = &heard.info;
            if let Err(why) =
                launchable(&probed_fn, dims.1).and_then(|()| match_shared_memory(api, f, &probed_fn, shared))
            {
                // The driver would refuse the probed launch: the original runs instead.
                state.launches.push(LaunchRecord { status: format!("not probed: {why}"), ..launch_record(&heard) });
                return;
            }
            let mut maps = Vec::new();
            for spec in &config.probes {
                let bytes = decode::map_bytes(spec, info);
                match quietly(|| api.alloc_zeroed(bytes, stream)) {
                    Ok(ptr) => {
                        note_internal(TransferKind::Memset, bytes);
                        maps.push((ptr, bytes))
                    }
                    Err(e) => {
                        maps.iter().for_each(|(p, _)| quietly(|| api.free(*p)));
                        let status = format!("not probed: {e}");
                        state.launches.push(LaunchRecord { status, ..launch_record(&heard) });
                        return;
                    }
                }
            }
            let ptrs: Box<[u64]> = maps.iter().map(|m| m.0).collect();
            for (var, ptr) in probed_fn.globals.iter().zip(ptrs.iter()) {
                note_internal(TransferKind::MemcpyHtoD, 8);
                if let Err(e) = quietly(|| api.write_u64(*var, *ptr, stream)) {
                    maps.iter().for_each(|(p, _)| quietly(|| api.free(*p)));
                    let status = format!("not probed: {e}");
                    state.launches.push(LaunchRecord { status, ..launch_record(&heard) });
                    return;
                }
            }
            let via_params = config.maps == MapVia::Param;
            // SAFETY: the enter of a hooked launch of this kind (module doc); `args` is the
            // program's array, with `params` entries; `ptrs` lives in `Pending` until the exit.
            let new_args = unsafe { substitute(call, launch, &probed_fn, args, &ptrs, via_params) };
            let attr = |a| api.function_attribute(probed_fn.func, a).map_or("?".to_string(), |v| v.to_string());
            let how = format!(
                "{how}, block {}, maps via {:?}, {} + {} parameters; probed function: {} registers, max {} threads \
                 per block, {}",
                select::dims(dims.1),
                config.maps,
                probed_fn.params,
                config.probes.len(),
                attr(4),
                attr(0),
                probed_fn.limits
            );
            state.pending.insert(
                call.correlation_id,
                Pending { how, _args: new_args, _ptrs: ptrs, maps, stream, launch: heard },
            );
        }
        (CallbackSite::Exit, true) => {
            graph_hooks::captured_exit(state, call.correlation_id, call.result);
            if let Some(p) = state.pending.remove(&call.correlation_id) {
                finish_launch(api, config, state, p, call.result);
            }
            let counted =
                state.sass.as_mut().and_then(|s| s.after_launch(call.correlation_id, call.result, &config.probes));
            if let Some((function, record)) = counted {
                if record.status == "probed" {
                    if let Some(row) = state.kernels.get_mut(function) {
                        mark_sass_counted(row, &config.probes);
                    }
                }
                state.launches.push(record);
            }
        }
        _ => {}
    }
}

/// A launch heard while a stream captured and not probed inside its graph (`why`): counted
/// per function, said on its kernel's row of probe_kernels.csv ([`CAPTURED`]). It is no launch
/// of probe_launches.csv: it ran nothing now (its graph runs it later, unprobed). Only
/// host-side queries (the function's name) are made.
fn captured_launch(api: &ModuleApi, state: &mut State, f: RawFunction, why: String) {
    let key = f as usize;
    let known = state.kernels.get(key).map(|row| row.mangled.clone());
    let entry = state.captured.entry(key).or_insert_with(|| {
        (0, known.unwrap_or_else(|| quietly(|| api.function_name(f)).unwrap_or_default()), String::new())
    });
    entry.0 += 1;
    entry.2 = why;
}

/// A selected launch the PTX path does not take: counted through SASS metrics when that
/// path is on (the row says why not otherwise).
fn count_with_sass(state: &mut State, function: usize, launch: Launch) {
    let Some(row) = state.kernels.get_mut(function) else { return };
    if row.detail == NOT_SELECTED || row.source.as_deref() == Some(PTX_SOURCE) {
        return;
    }
    let Some(sass) = state.sass.as_mut() else {
        if let Some(why) = &state.sass_off {
            if !row.detail.contains(why.as_str()) {
                row.detail.push_str(&format!("; {why}"));
            }
        }
        return;
    };
    match sass.collect_here() {
        Ok(()) => {
            if !sass.take_quota(function) {
                let status = format!(
                    "not counted: over the SASS metrics quota ({} launch(es) per kernel, --probe-sass-launches)",
                    sass.quota.unwrap_or(0)
                );
                state.launches.push(LaunchRecord { status, ..launch_record(&launch) });
                return;
            }
            if let Err(why) = sass.before_counted_launch() {
                // Its flush would mix in the counts still waiting: not counted.
                let status = format!("not counted: {why}");
                state.launches.push(LaunchRecord { status, ..launch_record(&launch) });
                return;
            }
            let mangled = row.mangled.clone();
            sass.pending.insert(launch.info.correlation_id, (function, mangled, launch));
        }
        Err(why) => {
            // The report says it too (a collection that could not be enabled is a failed
            // call; the next launch tries again).
            sass.note_failure(format!("launch not counted: {why}"));
            if !row.detail.contains(why.as_str()) {
                row.detail.push_str(&format!("; {why}"));
            }
        }
    }
}

/// A kernel row whose launch the SASS path counted: `probed` through `sass-metrics`, its
/// detail keeping why the PTX path did not take it.
fn mark_sass_counted(row: &mut ProbeKernel, probes: &[ProbeSpec]) {
    if row.source.as_deref() == Some(SASS_SOURCE) {
        return;
    }
    let mut detail = format!(
        "counted by CUPTI's SASS metrics (the original SASS, patched by CUPTI); not PTX-probed: {}",
        row.detail
    );
    let need_ptx: Vec<&str> =
        probes.iter().filter(|p| crate::probe::sass::sass_fields(&p.name).is_none()).map(|p| p.name.as_str()).collect();
    if !need_ptx.is_empty() {
        detail.push_str(&format!("; {} need(s) PTX: not measured for this kernel", need_ptx.join(", ")));
    }
    row.detail = detail;
    row.status = "probed".into();
    row.source = Some(SASS_SOURCE.into());
}

fn finish_launch(api: &ModuleApi, config: &ProbeConfig, state: &mut State, p: Pending, result: Option<i32>) {
    let started = Instant::now();
    let mut record = launch_record(&p.launch);
    if stream_capture::any() {
        // A capture began (on another thread) while the probed launch ran: waiting for it or
        // freeing its maps now could invalidate that capture. The maps are freed later.
        state.deferred_frees.extend(p.maps.iter().map(|m| m.0));
        record.status = "failed: a CUDA stream capture began while the probed launch ran; its counts were not read \
                         (gmprof waits for nothing during a capture)"
            .into();
        state.launches.push(record);
        return;
    }
    let synced = if result == Some(0) { quietly(|| api.synchronize(p.stream)) } else { Ok(()) };
    let mut buffers = Vec::new();
    for &(ptr, bytes) in &p.maps {
        if result == Some(0) && synced.is_ok() {
            note_internal(TransferKind::MemcpyDtoH, bytes);
            buffers.push(quietly(|| api.read(ptr, bytes)));
        }
        quietly(|| api.free(ptr));
    }
    record.readback_us = started.elapsed().as_secs_f64() * 1e6;
    record.status = match (result, &synced) {
        (Some(0), Ok(())) => "probed".into(),
        (_, Err(e)) => format!("failed: {e}"),
        (r, _) => format!("failed: the probed launch returned CUresult {} ({})", r.unwrap_or(-1), p.how),
    };
    let mut any_written = false;
    for (spec, buf) in config.probes.iter().zip(buffers) {
        let map = match buf {
            Ok(m) => m,
            Err(e) => {
                record.status = format!("failed: {e}");
                continue;
            }
        };
        any_written |= map.iter().any(|&b| b != 0);
        let records = spec.layout.records(p.launch.info.blocks, p.launch.info.threads);
        for f in &spec.fields {
            if let Some(total) = decode::field_total(spec, &map, &f.name) {
                record.totals.push(ProbeTotal { probe: spec.name.clone(), field: f.name.clone(), total, records });
            }
        }
        if spec.name == "block_sched" {
            let spans = decode::block_spans(&map);
            record.blocks_once = Some(spans.iter().filter(|s| s.entries == 1).count() as u64);
            record.blocks_missing = Some(spans.iter().filter(|s| s.entries == 0).count() as u64);
            record.blocks_repeated = Some(spans.iter().filter(|s| s.entries > 1).count() as u64);
            let ran = spans.iter().filter(|s| s.entries > 0);
            record.first_block_start_ns = ran.clone().map(|s| s.start_ns).min();
            record.last_block_end_ns = ran.map(|s| s.end_ns).max();
            if state.timeline_spans + spans.len() <= MAX_TIMELINE_SPANS {
                state.timeline_spans += spans.len();
                crate::device_timers::submit(timeline_launch(&p.launch.info, &spans));
            } else {
                state.timeline_left_off += 1;
            }
        }
        let seen = state.recorded_per_kernel.get(&p.launch.info.kernel).copied().unwrap_or(0);
        if seen < config.record_launches {
            if let Ok(rows) = decode::rows(spec, &p.launch.info, &map) {
                state.records.extend(rows);
            }
        }
    }
    *state.recorded_per_kernel.entry(p.launch.info.kernel.clone()).or_default() += 1;
    if record.status == "probed" && !any_written {
        record.status = "failed: no probe wrote its map (the probed function did not run)".into();
    }
    if record.status == "probed" {
        record.source = Some(PTX_SOURCE.into());
    }
    state.launches.push(record);
}

/// Blocks of block_sched handed to the timeline, at most (about 100 MB of spans).
pub const MAX_TIMELINE_SPANS: usize = 1_000_000;

/// A block_sched launch as a device-timer launch ([`TimedLaunch::from_blocks`]): the report
/// joins it to its kernel row and draws it inside the kernel's slice.
fn timeline_launch(launch: &LaunchInfo, spans: &[decode::BlockSpan]) -> TimedLaunch {
    let runs: Vec<BlockRun> = spans
        .iter()
        .map(|s| BlockRun {
            block: s.block as u32,
            sm: s.smid as u16,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            entries: s.entries,
        })
        .collect();
    let blocks = u32::try_from(launch.blocks).unwrap_or(u32::MAX);
    TimedLaunch::from_blocks(Some(launch.correlation_id), &launch.kernel, BLOCK_SCHED_REGION, blocks, &runs)
}

/// What the SASS metrics path counted beyond the launches, for the output files.
#[derive(Debug, Default)]
pub struct SassOutputs {
    /// sass_hot.csv.
    pub hot: Vec<crate::report::sass_hot::SassHotRow>,
    /// Functions counted outside the attributed launches, by mangled name.
    pub others: Vec<(String, OtherCounts)>,
    /// Flushes (one per launch while collecting, and one per context at the end).
    pub flushes: u64,
    /// Host time of the flushes, including the wait for each launch, µs.
    pub flush_us: f64,
    /// Records CUPTI dropped at the end.
    pub dropped: u64,
    /// Values of metrics gmprof did not configure.
    pub unknown_values: u64,
    /// What failed.
    pub failures: Vec<String>,
    /// Launches not counted for the quota (`--probe-sass-launches`).
    pub over_quota: u64,
    /// CUDA graph launches made while the path ran.
    pub graph_launches: u64,
    /// Launches made during stream captures that became graph nodes counted by SASS metrics
    /// at their graph's launches.
    pub graph_nodes: u64,
    /// Launches of graphs with such nodes that were not flushed alone, by why (their counts
    /// are kept apart, not attributed).
    pub graph_launches_not_flushed: Vec<(String, u64)>,
    /// Loaded modules whose cubins were not kept for source lines (over 1 GiB in all).
    pub cubins_not_kept: u64,
}

/// Instructions per kernel in sass_hot.csv.
pub const SASS_HOT_TOP: usize = 20;

/// What the probes produced, for the output files.
#[derive(Debug, Default)]
pub struct ProbeOutputs {
    /// probe_launches.csv.
    pub launches: Vec<LaunchRecord>,
    /// block_sched launches left off the timeline (more than [`MAX_TIMELINE_SPANS`] blocks).
    pub timeline_left_off: u64,
    /// probe_records.csv.
    pub records: Vec<decode::ProbeRow>,
    /// probe_kernels.csv: one row per variant, by kernel
    /// ([`KernelTable::rows`](crate::report::probe_kernels::KernelTable::rows)).
    pub kernels: Vec<ProbeKernel>,
    /// The SASS metrics path's outputs, when it was on.
    pub sass: Option<SassOutputs>,
    /// Why the SASS metrics path is off although the probes wanted it.
    pub sass_off: Option<String>,
    /// Launches left alone because a stream was capturing (graph nodes, not probed).
    pub captured_launches: u64,
    /// Launches during captures built into their graph as the probed function.
    pub graph_nodes: u64,
    /// Device memory the graph map pool took, bytes.
    pub graph_pool_bytes: u64,
    /// What went wrong that the report says (driver calls that failed).
    pub notes: Vec<String>,
}

/// Ends SASS metric collection: a last flush, collections disabled, configurations unset
/// (idempotent; called before the outputs are taken).
pub fn finish_sass() {
    if let Some((_, s)) = STATE.lock().as_mut() {
        if let Some(sass) = s.sass.as_mut() {
            sass.finish();
        }
    }
}

/// A copy of what was probed so far (`None` when probing is off).
pub fn outputs() -> Option<ProbeOutputs> {
    let guard = STATE.lock();
    let (config, s) = guard.as_ref()?;
    let sass = s.sass.as_ref().map(|x| {
        use crate::probe::sass::Counter;
        let top = x.hot.top(SASS_HOT_TOP);
        let wanted: Vec<(String, u32, u32)> =
            top.iter().map(|h| (h.function.clone(), h.cubin_crc, h.pc_offset)).collect();
        let lines = x.source_lines(&wanted);
        let hot = top
            .into_iter()
            .map(|h| {
                let n = h.counts.get(Counter::Instructions);
                let t = h.counts.get(Counter::ThreadInstructions);
                let at = lines.get(&(h.function.clone(), h.cubin_crc, h.pc_offset));
                crate::report::sass_hot::SassHotRow {
                    kernel: demangle(&h.function),
                    cubin_crc: h.cubin_crc,
                    launches: h.launches,
                    rank: h.rank,
                    pc_offset: format!("{:#x}", h.pc_offset),
                    instructions: n,
                    share: h.share,
                    thread_instructions: t,
                    threads_per_instruction: (n > 0).then(|| t as f64 / n as f64),
                    global_loads: h.counts.get(Counter::GlobalLoads),
                    global_stores: h.counts.get(Counter::GlobalStores),
                    global_sector_bytes: h.counts.get(Counter::GlobalSectors) * crate::probe::sass::SECTOR_BYTES,
                    file: at.map(|a| a.0.clone()),
                    line: at.map(|a| a.1),
                    mangled: h.function,
                }
            })
            .collect();
        SassOutputs {
            hot,
            others: x.others.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            flushes: x.flushes,
            flush_us: x.flush_us,
            dropped: x.dropped,
            unknown_values: x.unknown_values,
            failures: x.all_failures(),
            over_quota: x.over_quota,
            graph_launches: x.graph_launches,
            graph_nodes: x.graphs.nodes.len() as u64,
            graph_launches_not_flushed: x.graphs.unflushed.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            cubins_not_kept: sass::CUBINS.lock().skipped,
        }
    });
    let mut kernels = s.kernels.rows();
    // Launches left alone inside stream captures: said on their kernel's row, or on a row of
    // their own for a kernel launched only there.
    let mut captured: Vec<&(u64, String, String)> = s.captured.values().collect();
    captured.sort_by(|a, b| a.1.cmp(&b.1));
    for (n, mangled, why) in captured {
        let note = format!("{n} launch(es) not probed: {CAPTURED}; the last one because {why}");
        match kernels.iter_mut().find(|k| &k.mangled == mangled) {
            Some(row) => row.detail = if row.detail.is_empty() { note } else { format!("{}; {note}", row.detail) },
            None => kernels.push(ProbeKernel {
                kernel: demangle(mangled),
                mangled: mangled.clone(),
                status: "not probed".into(),
                detail: note,
                ..ProbeKernel::default()
            }),
        }
    }
    if let Some(x) = &sass {
        // Kernels CUPTI counted that gmprof never heard launched: listed, never dropped.
        for (mangled, o) in x.others.iter().filter(|(_, o)| o.why == sass::NOT_HEARD) {
            kernels.push(ProbeKernel {
                kernel: demangle(mangled),
                mangled: mangled.clone(),
                status: "not heard launched".into(),
                detail: format!(
                    "CUPTI's SASS metrics counted {} warp instructions of it in {} flush(es) that no launch gmprof \
                     heard accounts for: {}",
                    o.instructions, o.flushes, o.why
                ),
                source: Some(SASS_SOURCE.into()),
                ..ProbeKernel::default()
            });
        }
    }
    // Kernels probed inside graphs: how many nodes, said on their rows.
    let mut in_graphs: HashMap<(String, Option<u32>), u64> = HashMap::new();
    for node in &s.graphs.nodes {
        *in_graphs.entry((node.launch.info.kernel.clone(), node.launch.variant)).or_default() += 1;
    }
    for row in kernels.iter_mut() {
        if let Some(n) = in_graphs.get(&(row.kernel.clone(), Some(row.variant))) {
            let note = format!("{n} graph node(s) probed inside CUDA graphs (probe_launches.csv)");
            row.detail = if row.detail.is_empty() { note } else { format!("{}; {note}", row.detail) };
        }
    }
    // Kernels counted by SASS metrics inside graphs: how many nodes, said on their rows (a
    // kernel launched only inside graphs gets a row of its own).
    if let Some(x) = s.sass.as_ref() {
        for ((kernel, variant), (n, mangled)) in x.graphs.nodes_by_kernel() {
            let note = format!("{n} graph node(s) counted by SASS metrics inside CUDA graphs (probe_launches.csv)");
            match kernels.iter_mut().find(|k| k.kernel == kernel && variant.is_none_or(|v| v == k.variant)) {
                Some(row) => row.detail = if row.detail.is_empty() { note } else { format!("{}; {note}", row.detail) },
                None => kernels.push(ProbeKernel {
                    kernel,
                    mangled,
                    status: "counted in CUDA graphs".into(),
                    detail: note,
                    source: Some(SASS_SOURCE.into()),
                    ..ProbeKernel::default()
                }),
            }
        }
    }
    let mut launches = s.launches.clone();
    launches.extend(s.graph_records.iter().flatten().cloned());
    if let Some(x) = s.sass.as_ref() {
        let ptx_nodes: std::collections::HashSet<(usize, &str)> =
            s.graphs.nodes.iter().filter_map(|n| n.graph.map(|g| (g, n.launch.info.kernel.as_str()))).collect();
        launches.extend(x.graphs.records(
            |counts| sass::totals(counts, &config.probes),
            |graph, kernel| ptx_nodes.contains(&(graph, kernel)),
        ));
    }
    Some(ProbeOutputs {
        launches,
        graph_nodes: s.graphs.nodes.len() as u64,
        graph_pool_bytes: s.graphs.allocated() as u64,
        timeline_left_off: s.timeline_left_off,
        records: s.records.clone(),
        kernels,
        sass,
        sass_off: s.sass_off.clone(),
        captured_launches: s.captured.values().map(|c| c.0).sum(),
        notes: s.notes.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_hears_every_capture_begin_and_end() {
        let hooked = hooked();
        for cbid in stream_capture::CBIDS {
            assert!(hooked.contains(cbid), "{cbid:?} is not hooked: a capture begun there would go unheard");
        }
    }
}
