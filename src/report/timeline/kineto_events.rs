//! The events of the Kineto form of `trace.json` ([`kineto`](super::kineto) says what each
//! is and why): [`Report::to_kineto_trace`].
//!
//! Layer 3 (the safe profiler), report output. The placement (which rows have a place on
//! the timeline, the origin, synthetic kernel positions in counter modes) and the overlap
//! lanes of a stream are those of gmprof's own trace ([`placement`](super::placement),
//! [`lanes`](super::lanes)), so both forms put every event at the same time. The steps
//! (`ProfilerStep#N`) are [`kineto_steps`](super::kineto_steps)'s.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::events::{id_text, CPU_PID};
use super::kineto::{
    AnnotationArgs, DeviceProperties, KinetoArgs, KinetoEvent, KinetoKernelArgs, KinetoMemoryArgs, KinetoOtherData,
    KinetoPhase, KinetoTrace, RuntimeArgs, StepArgs, TraceOptions, SCHEMA_VERSION,
};
use super::kineto_steps::choose_steps;
use super::lanes::{assign_lanes, lane_name, lane_tid, EXTRA_LANES_PER_STREAM};
use super::placement::Placement;
use super::trace::{micros, signed_micros};
use crate::analysis::correlate::Granularity;
use crate::model::{RangeId, TransferKind};
use crate::report::model::Report;

/// The CPU process's pid when the OS pid is unknown or equals a GPU's ordinal (a program
/// that runs as pid 1 in a container): above every OS pid (Linux's are below 2^22).
pub const CPU_PID_APART: u64 = u32::MAX as u64 + 1;

/// What `otherData.note` of a Kineto trace says of its `cuda_runtime` and `cuda_driver`
/// events.
pub const RUNTIME_NOTE: &str = "cuda_runtime and cuda_driver events are the kernel launch calls (from when gmprof \
     stamped each, args.launch_ts of its kernels) and the memcpy and memset calls gmprof stamped, named by their \
     CUDA function; dur is the call's duration where gmprof stamped its return (gmprof run --trace-format kineto \
     times API calls), else 0 because HTA drops events without one";

/// What `otherData.note` says when no range became a `ProfilerStep#N` event.
pub const NO_STEPS_NOTE: &str = "no ProfilerStep#N events: no range is an instance of the step range \
     (GMPROF_STEP_RANGE, --torch-steps), or, none named, no range repeats; HTA sees one iteration";

/// What `otherData.note` says of steps when kernel positions are synthetic (counter modes).
pub const SYNTHETIC_STEPS_NOTE: &str = "no ProfilerStep#N events: kernel positions are synthetic and launches have \
     no events, and with steps HTA would leave out every kernel (it keeps only GPU events whose launch it has)";

/// Kineto's name of a CUDA call as CUPTI names it, and its category: the runtime's calls
/// (`cuda...`) are `cuda_runtime`, the driver's `cuda_driver`. A `_vNNNN` version suffix
/// (CUPTI's callback ids carry one, `cudaLaunchKernel_v7000`) is dropped, as Kineto drops it:
/// HTA counts launches by the plain names (`cudaLaunchKernel`, `cudaLaunchKernelExC`,
/// `cudaMemcpyAsync`, `cudaMemsetAsync`). A driver function's own `_v2` stays.
pub fn call_name(api: &str) -> (&str, &'static str) {
    let cat = if api.starts_with("cuda") { "cuda_runtime" } else { "cuda_driver" };
    let name = match api.rfind("_v") {
        Some(at) if api.len() - at >= 6 && api[at + 2..].bytes().all(|b| b.is_ascii_digit()) => &api[..at],
        _ => api,
    };
    (name, cat)
}

/// Kineto's name of a memcpy or memset (`Memcpy HtoD`; Kineto adds the memory kinds, which
/// gmprof does not keep) and its category.
pub fn memory_name(kind: TransferKind) -> (&'static str, &'static str) {
    match kind {
        TransferKind::MemcpyHtoD => ("Memcpy HtoD", "gpu_memcpy"),
        TransferKind::MemcpyDtoH => ("Memcpy DtoH", "gpu_memcpy"),
        TransferKind::MemcpyDtoD => ("Memcpy DtoD", "gpu_memcpy"),
        TransferKind::MemcpyPtoP => ("Memcpy PtoP", "gpu_memcpy"),
        TransferKind::MemcpyOther => ("Memcpy Other", "gpu_memcpy"),
        TransferKind::Memset => ("Memset", "gpu_memset"),
    }
}

fn complete(
    cat: &'static str,
    name: String,
    (pid, tid): (u64, u64),
    ts: f64,
    dur: f64,
    args: KinetoArgs,
) -> KinetoEvent {
    KinetoEvent {
        ph: KinetoPhase::Complete,
        cat: Some(cat),
        name,
        pid,
        tid,
        ts: Some(ts),
        dur: Some(dur),
        id: None,
        bp: None,
        args: Some(args),
    }
}

fn metadata(name: &str, pid: u64, tid: u64, value: String) -> KinetoEvent {
    KinetoEvent {
        ph: KinetoPhase::Metadata,
        cat: None,
        name: name.to_owned(),
        pid,
        tid,
        ts: None,
        dur: None,
        id: None,
        bp: None,
        args: Some(KinetoArgs::Name { name: value }),
    }
}

/// A call's duration, µs: to its stamped return, else 0 (HTA drops events without one).
fn call_duration(start_ns: u64, end_ns: Option<u64>) -> f64 {
    end_ns.filter(|end| *end >= start_ns).map_or(0.0, |end| (end - start_ns) as f64 / 1000.0)
}

fn flow(ph: KinetoPhase, id: u32, (pid, tid): (u64, u64), ts: f64) -> KinetoEvent {
    KinetoEvent {
        ph,
        cat: Some("ac2g"),
        name: "ac2g".into(),
        pid,
        tid,
        ts: Some(ts),
        dur: None,
        id: Some(u64::from(id)),
        bp: (ph == KinetoPhase::FlowEnd).then_some("e"),
        args: None,
    }
}

/// A GPU slice on its stream: (event index, device, stream, start ns, end ns, External id).
type GpuSlice = (usize, u32, u32, u64, u64, Option<u64>);

/// The sort rank of an event on its track at one instant: spans that enclose the others
/// first, flows last.
fn order(e: &KinetoEvent) -> u8 {
    match (e.ph, e.cat) {
        (KinetoPhase::Complete, Some("user_annotation")) if e.name.starts_with("ProfilerStep#") => 0,
        (KinetoPhase::Complete, Some("user_annotation" | "gpu_user_annotation")) => 1,
        (KinetoPhase::Complete, _) => 2,
        _ => 3,
    }
}

impl Report {
    /// The report as a Kineto trace (see [`kineto`](super::kineto)).
    pub fn to_kineto_trace(&self, options: &TraceOptions) -> KinetoTrace {
        let Placement { measured, skipped, transfers, ranges, positions, origin } = self.placement();
        let launches: Vec<Option<u64>> = self
            .kernels
            .iter()
            .zip(&positions)
            .map(|(k, p)| k.launch_ns.filter(|_| measured && p.is_some() && k.thread.is_some()))
            .collect();
        // A launch or memcpy call may come before every range and kernel: ts stays at or above 0.
        let calls = transfers.iter().filter(|t| measured && t.args.thread.is_some()).filter_map(|t| t.call_ns);
        let origin = launches.iter().flatten().copied().chain(calls).fold(origin, u64::min);

        let mut devices: BTreeSet<u32> = BTreeSet::new();
        devices
            .extend(self.kernels.iter().zip(&positions).filter(|(_, p)| p.is_some()).filter_map(|(k, _)| k.device_id));
        devices.extend(transfers.iter().map(|t| t.device_id));
        let cpu_pid = match options.pid {
            Some(pid) if !devices.contains(&pid) => u64::from(pid),
            None if !devices.contains(&(CPU_PID as u32)) => CPU_PID,
            _ => CPU_PID_APART,
        };

        let mut events = Vec::new();
        let mut threads: BTreeSet<u64> = BTreeSet::new();
        // Each timed range's External id (1, 2, ... in report order) and name.
        let mut external: HashMap<RangeId, u64> = HashMap::new();
        let mut names: HashMap<u64, &str> = HashMap::new();
        for (row, start, end) in &ranges {
            let Some(id) = row.range_id else { continue };
            let ext = external.len() as u64 + 1;
            external.insert(id, ext);
            names.insert(ext, &row.name);
            let thread = row.thread.unwrap_or(0);
            threads.insert(thread);
            let args = AnnotationArgs { external_id: ext, range: super::trace::range_args(self, row, id) };
            let (ts, dur) = (micros(*start, origin), (end - start) as f64 / 1000.0);
            events.push(complete(
                "user_annotation",
                row.name.clone(),
                (cpu_pid, thread),
                ts,
                dur,
                KinetoArgs::Annotation(args),
            ));
        }
        let placed: HashMap<RangeId, (u64, u64)> =
            ranges.iter().filter_map(|(row, start, end)| Some((row.range_id?, (*start, *end)))).collect();
        // Without launch events HTA keeps no GPU event once a trace has steps.
        let steps =
            choose_steps(&self.ranges, &placed, options.step_range.as_deref(), options.first_step).filter(|_| measured);
        for (i, step) in steps.iter().flat_map(|c| &c.steps).enumerate() {
            let args = StepArgs { external_id: (external.len() + 1 + i) as u64, step_range_id: id_text(step.range_id) };
            let (ts, dur) = (micros(step.start_ns, origin), (step.end_ns - step.start_ns) as f64 / 1000.0);
            let track = (cpu_pid, step.thread);
            let name = format!("ProfilerStep#{}", step.number);
            events.push(complete("user_annotation", name, track, ts, dur, KinetoArgs::Step(args)));
        }
        let ext_of = |id: Option<RangeId>| id.and_then(|id| external.get(&id).copied());
        // Transfers name their range as text ("slot.generation").
        let external_by_text: HashMap<String, u64> = external.iter().map(|(id, ext)| (id_text(*id), *ext)).collect();

        let metric_names = self.metric_names();
        let mut gpu: Vec<GpuSlice> = Vec::new();
        let mut launched: HashSet<u32> = HashSet::new();
        // (flow start's correlation id, kernel event index) for the flow ends, once lanes are known.
        let mut flow_ends: Vec<(u32, usize)> = Vec::new();
        for ((k, position), launch) in self.kernels.iter().zip(&positions).zip(&launches) {
            let (Some((start, dur)), Some(device), Some(stream)) = (*position, k.device_id, k.stream_id) else {
                continue;
            };
            if !k.granularity.is_kernel_execution() {
                continue;
            }
            let ext = ext_of(k.range_id);
            let name =
                k.kernel_name.clone().or_else(|| k.mangled_name.clone()).unwrap_or_else(|| "<unknown kernel>".into());
            let args = KinetoKernelArgs {
                external_id: ext,
                device,
                stream,
                correlation: k.correlation_id,
                registers_per_thread: k.registers_per_thread,
                shared_memory: k.shared_memory_bytes,
                grid: k.grid,
                block: k.block,
                graph_id: k.graph_id,
                graph_node_id: k.graph_node_id,
                range_path: k.range_path.clone(),
                range_id: k.range_id.map(id_text),
                launch_ts: launch.map(|ns| signed_micros(ns, origin)),
                status: k.status,
                metrics: metric_names
                    .iter()
                    .zip(&k.metrics)
                    .filter_map(|(n, v)| v.filter(|v| v.is_finite()).map(|v| ((*n).to_owned(), v)))
                    .collect(),
            };
            let (pid, tid) = (u64::from(device), u64::from(stream));
            gpu.push((events.len(), device, stream, start, start.saturating_add(dur), ext));
            let ts = micros(start, origin);
            events.push(complete(
                "kernel",
                name,
                (pid, tid),
                ts,
                dur as f64 / 1000.0,
                KinetoArgs::Kernel(Box::new(args)),
            ));
            let (Some(launch), Some(thread)) = (launch, k.thread) else { continue };
            flow_ends.push((k.correlation_id, events.len() - 1));
            if launched.insert(k.correlation_id) {
                let (name, cat) = match k.api_name.as_deref() {
                    Some(api) => call_name(api),
                    None if k.granularity == Granularity::GraphNode => ("graph launch", "cuda_runtime"),
                    None => ("kernel launch", "cuda_runtime"),
                };
                let ts = micros(*launch, origin);
                let dur = call_duration(*launch, k.launch_end_ns);
                let args = RuntimeArgs { external_id: ext, correlation: k.correlation_id };
                threads.insert(thread);
                let runtime = KinetoArgs::Runtime(args);
                events.push(complete(cat, name.into(), (cpu_pid, thread), ts, dur, runtime));
                events.push(flow(KinetoPhase::FlowStart, k.correlation_id, (cpu_pid, thread), ts));
            }
        }

        for t in &transfers {
            let (name, cat) = memory_name(t.kind);
            let ext = t.args.range_id.as_ref().and_then(|id| external_by_text.get(id).copied());
            let args = KinetoMemoryArgs {
                external_id: ext,
                device: t.device_id,
                stream: t.stream_id,
                correlation: t.args.correlation_id,
                bytes: t.args.bytes,
                bandwidth_gbps: t.args.gbps.filter(|g| g.is_finite()),
                range_path: t.args.range_path.clone(),
                range_id: t.args.range_id.clone(),
                thread: t.args.thread,
                api_name: t.args.api_name.clone(),
                status: t.args.status,
            };
            let track = (u64::from(t.device_id), u64::from(t.stream_id));
            gpu.push((events.len(), t.device_id, t.stream_id, t.start_ns, t.end_ns, ext));
            let (ts, dur) = (micros(t.start_ns, origin), (t.end_ns - t.start_ns) as f64 / 1000.0);
            events.push(complete(cat, name.into(), track, ts, dur, KinetoArgs::Memory(Box::new(args))));
            // The call, where gmprof stamped it: its event and the flow to the copy.
            let (Some(call), Some(thread), Some(api), true) = (t.call_ns, t.args.thread, &t.args.api_name, measured)
            else {
                continue;
            };
            let (name, cat) = call_name(api);
            let (call_ts, call_dur) = (micros(call, origin), call_duration(call, t.call_end_ns));
            let runtime = KinetoArgs::Runtime(RuntimeArgs { external_id: ext, correlation: t.args.correlation_id });
            threads.insert(thread);
            events.push(complete(cat, name.into(), (cpu_pid, thread), call_ts, call_dur, runtime));
            events.push(flow(KinetoPhase::FlowStart, t.args.correlation_id, (cpu_pid, thread), call_ts));
            flow_ends.push((t.args.correlation_id, events.len() - 3));
        }

        let (lane_names, overlap_lane_events, stream_spans) = spread(&mut events, &gpu);
        events.extend(lane_names);
        for (id, index) in flow_ends {
            let (pid, tid, ts) = (events[index].pid, events[index].tid, events[index].ts.unwrap_or(0.0));
            events.push(flow(KinetoPhase::FlowEnd, id, (pid, tid), ts));
        }
        let annotations_left_out = gpu_annotations(&stream_spans, &names, origin, &mut events);

        let process = match &options.distributed {
            Some(d) => format!("rank {} (process {})", d.rank, options.pid.map_or("unknown".into(), |p| p.to_string())),
            None => options.pid.map_or("CPU".into(), |p| format!("process {p}")),
        };
        if !threads.is_empty() {
            events.push(metadata("process_name", cpu_pid, 0, process));
        }
        for thread in threads {
            events.push(metadata("thread_name", cpu_pid, thread, format!("thread {thread}")));
        }
        let properties = self.device_properties(&devices);
        for p in &properties {
            let label = p.name.as_ref().map_or(format!("GPU {}", p.id), |n| format!("GPU {}: {n}", p.id));
            events.push(metadata("process_name", u64::from(p.id), 0, label));
        }
        let streams: BTreeSet<(u32, u32)> = gpu.iter().map(|g| (g.1, g.2)).collect();
        for (device, stream) in streams {
            events.push(metadata("thread_name", u64::from(device), u64::from(stream), lane_name(stream, 0)));
        }

        // Metadata first, then by track and time; on a track, enclosing events first.
        events.sort_by(|a, b| {
            (a.ph != KinetoPhase::Metadata)
                .cmp(&(b.ph != KinetoPhase::Metadata))
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
                .then(a.ts.unwrap_or(0.0).total_cmp(&b.ts.unwrap_or(0.0)))
                .then(b.dur.unwrap_or(0.0).total_cmp(&a.dur.unwrap_or(0.0)))
                .then(order(a).cmp(&order(b)))
        });

        let mut other_data = self.trace_info(measured, origin, skipped, overlap_lane_events, None);
        let mut note = RUNTIME_NOTE.to_owned();
        if steps.is_none() {
            note.push_str("; ");
            note.push_str(if measured { NO_STEPS_NOTE } else { SYNTHETIC_STEPS_NOTE });
        }
        if annotations_left_out > 0 {
            note.push_str(&format!(
                "; {annotations_left_out} gpu_user_annotation span(s) left out: they partly overlapped another \
                 range's span on their stream"
            ));
        }
        other_data.note = Some(match other_data.note.take() {
            Some(first) => format!("{first}; {note}"),
            None => note,
        });
        KinetoTrace {
            schema_version: SCHEMA_VERSION,
            distributed_info: options.distributed.clone(),
            device_properties: properties,
            display_time_unit: "ns",
            base_time_ns: self.meta.clock.map(|clock| clock.to_unix_ns(origin)),
            trace_events: events,
            other_data: KinetoOtherData { info: other_data, steps: steps.map(|c| c.info) },
        }
    }

    /// Kineto's `deviceProperties` of `devices`: a name where the report has one, the
    /// compute capability and SM count where the report measured them for its only GPU.
    fn device_properties(&self, devices: &BTreeSet<u32>) -> Vec<DeviceProperties> {
        let peaks = self.meta.device_peaks.as_ref().filter(|_| devices.len() == 1);
        devices
            .iter()
            .map(|&id| DeviceProperties {
                id,
                name: self
                    .meta
                    .devices
                    .iter()
                    .find(|d| d.device_id == id)
                    .and_then(|d| d.device_name.clone())
                    .or_else(|| self.meta.device_name.clone()),
                compute_major: peaks.and_then(|p| p.compute_capability).map(|c| c[0]),
                compute_minor: peaks.and_then(|p| p.compute_capability).map(|c| c[1]),
                num_sms: peaks.and_then(|p| p.sm_count),
            })
            .collect()
    }
}

/// A stream's slices that stayed on its own track (lane 0), for its `gpu_user_annotation`
/// spans: (device, stream) → [(start ns, end ns, External id)].
type StreamSpans = BTreeMap<(u32, u32), Vec<(u64, u64, u64)>>;

/// Moves the GPU slices that overlap an earlier one of their stream to extra lanes, as
/// gmprof's own trace does ([`lanes`](super::lanes)); returns the lanes' `thread_name`
/// events, how many slices moved, and the slices left on each stream's own track.
fn spread(events: &mut [KinetoEvent], gpu: &[GpuSlice]) -> (Vec<KinetoEvent>, u64, StreamSpans) {
    let mut by_stream: BTreeMap<(u32, u32), Vec<&GpuSlice>> = BTreeMap::new();
    for slice in gpu {
        by_stream.entry((slice.1, slice.2)).or_default().push(slice);
    }
    let (mut names, mut moved, mut kept) = (Vec::new(), 0, StreamSpans::new());
    for ((device, stream), members) in by_stream {
        let intervals: Vec<(u64, u64)> = members.iter().map(|s| (s.3, s.4)).collect();
        let lanes = assign_lanes(&intervals);
        for (slice, &lane) in members.iter().zip(&lanes) {
            if lane > 0 {
                events[slice.0].tid = lane_tid(stream, lane);
                moved += 1;
            } else if let Some(ext) = slice.5 {
                kept.entry((device, stream)).or_default().push((slice.3, slice.4, ext));
            }
        }
        let used = lanes.iter().copied().max().unwrap_or(0).min(EXTRA_LANES_PER_STREAM);
        for lane in 1..=used {
            names.push(metadata("thread_name", u64::from(device), lane_tid(stream, lane), lane_name(stream, lane)));
        }
    }
    (names, moved, kept)
}

/// Adds a `gpu_user_annotation` per range and stream, from the first to the last of the
/// range's slices on the stream's own track, as Kineto spans a range's GPU work. A span that
/// partly overlaps an earlier one of its stream (kernels of two ranges interleaved on one
/// stream) is left out: one track draws only nested slices. Returns how many were.
fn gpu_annotations(spans: &StreamSpans, names: &HashMap<u64, &str>, origin: u64, events: &mut Vec<KinetoEvent>) -> u64 {
    let mut left_out = 0;
    for (&(device, stream), slices) in spans {
        let mut per_range: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for &(start, end, ext) in slices {
            let span = per_range.entry(ext).or_insert((start, end));
            *span = (span.0.min(start), span.1.max(end));
        }
        let mut order: Vec<(u64, u64, u64)> = per_range.into_iter().map(|(ext, (s, e))| (s, e, ext)).collect();
        order.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut open: Vec<u64> = Vec::new();
        for (start, end, ext) in order {
            while open.last().is_some_and(|&until| until <= start) {
                open.pop();
            }
            if open.last().is_some_and(|&until| end > until) {
                left_out += 1;
                continue;
            }
            open.push(end);
            let name = names.get(&ext).map_or_else(|| format!("range {ext}"), |n| (*n).to_owned());
            let track = (u64::from(device), u64::from(stream));
            let args = KinetoArgs::GpuAnnotation { external_id: ext };
            let (ts, dur) = (micros(start, origin), (end - start) as f64 / 1000.0);
            events.push(complete("gpu_user_annotation", name, track, ts, dur, args));
        }
    }
    left_out
}
