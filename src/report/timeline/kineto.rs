//! `trace.json` in the form PyTorch's profiler (Kineto) writes, for Holistic Trace Analysis
//! (HTA) and any other tool that reads Kineto traces: `gmprof run --trace-format kineto`,
//! `GMPROF_TRACE_FORMAT=kineto`.
//!
//! Layer 3 (the safe profiler), report output. [`TraceFormat`] says which form `trace.json`
//! takes, [`TraceOptions`] carries it with what only the profiled process knows (its pid,
//! its rank); [`KinetoTrace`] is the document, built by
//! [`Report::to_kineto_trace`](crate::report::Report::to_kineto_trace) (`kineto_events`) and
//! written through serde with [`KinetoFormatter`].
//!
//! # What HTA reads, and how the trace gives it
//!
//! HTA 0.5.0 (its trace parser, its rank lookup and its table of event args):
//!
//! - finds a file's rank with the regular expression `"rank":\s+(\d+)`: a space after the
//!   colon, which compact JSON has not. [`KinetoFormatter`] writes `": "` and `", "` and one
//!   event a line; `distributedInfo` (rank, world size, local rank) comes before the events;
//! - keeps only events with a `dur` and a `cat`; an event whose `args.stream` is set (not
//!   -1) is a GPU event, one with `args.correlation` too a GPU kernel, linked to the CPU
//!   event with the same `correlation`;
//! - classifies kernels by name: `^nccl.*Kernel` is communication, `^Memcpy`/`^Memset`
//!   memory, everything else computation. NCCL's kernels are named so by NCCL
//!   (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`), CUPTI reports them so and gmprof keeps
//!   the name; memcpys and memsets are named as Kineto names them (`Memcpy HtoD`, `Memset`);
//! - rounds nanosecond timestamps to whole microseconds (start up, end down) unless
//!   `HTA_DISABLE_NS_ROUNDING=1`: sub-microsecond kernels then lose most of their time;
//! - takes its iterations from `user_annotation`s named `ProfilerStep#N`. With two or more,
//!   `TraceAnalysis` (by default, `include_last_profiler_step=False`) keeps only the CPU events
//!   that start before the last step does, and only the GPU events whose `correlation` one of
//!   those CPU events has: the last step's work, and GPU work without a call event (a memcpy
//!   whose call gmprof did not stamp), are left out of every analysis;
//! - counts launches by the call's name: its CUDA kernel launch statistics join
//!   `cudaLaunchKernel`, `cudaLaunchKernelExC`, `cudaMemcpyAsync` and `cudaMemsetAsync` to
//!   their GPU events (`cpu_duration` is the call's `dur`, `launch_delay` the GPU event's
//!   start less the call's end), and its queue length counts `cuLaunchKernel` too.
//!
//! # The events
//!
//! | cat | track (pid, tid) | what |
//! | --- | --- | --- |
//! | `user_annotation` | process, thread | a range instance, push to pop; `args`: `External id`, and gmprof's range args |
//! | `user_annotation` `ProfilerStep#N` | process, thread | a step: an instance of the step range, as PyTorch's profiler marks each `prof.step()` interval ([`kineto_steps`](super::kineto_steps) says which range and which `N`); `args`: `External id`, `step_range_id` |
//! | `cuda_runtime`, `cuda_driver` | process, thread | a kernel launch call, from the instant gmprof stamped it; a memcpy or memset call gmprof stamped; named by its CUDA function as Kineto names it (`cudaLaunchKernel`, `cuLaunchKernelEx`, `cudaGraphLaunch`, `cudaMemcpyAsync`), `dur` to its stamped return (see below); `args`: `External id`, `correlation` |
//! | `kernel` | device, stream | a kernel: `args` `device`, `stream`, `correlation`, `grid`, `block`, `registers per thread`, `shared memory`, `External id` |
//! | `gpu_memcpy`, `gpu_memset` | device, stream | a memcpy (`Memcpy HtoD`, ...) or memset: `device`, `stream`, `correlation`, `bytes`, `memory bandwidth (GB/s)` |
//! | `gpu_user_annotation` | device, stream | a range's span on a stream: first to last of its GPU events there |
//! | `ac2g` (`ph` `s`/`f`) | call, GPU event | the flow from a launch or memcpy call to its kernels or copy (Perfetto's arrows) |
//!
//! Kineto's pids: the GPU's process is its ordinal, the CPU's the OS process id. Values
//! gmprof does not measure or keep (CUPTI's callback id `cbid`, `queued`, occupancy, device
//! memory) are left out, never written as 0, with one exception: a call whose return gmprof
//! did not stamp has `dur` 0, because HTA drops events without a duration and so would lose
//! the link from the kernel to its launch (HTA's idle-time analysis reads the launch's `ts`).
//! gmprof stamps a launch call when it is made in every session, and its return (and a memcpy
//! or memset call's entry and return) only when the profiler times API calls
//! (`ProfilerBuilder::time_api_calls`, which `--trace-format kineto` turns on): a report made
//! without it has launch events of `dur` 0 and no memcpy or memset call events. Where no
//! launch name was recorded (a report written before gmprof kept it) the launch is named
//! `kernel launch` (`graph launch`). `otherData.note` says so, and `otherData.steps` which
//! range became the steps and how they are numbered.
//!
//! Times are µs from the report's earliest event (as in gmprof's own trace), and
//! `baseTimeNanoseconds` is that instant as Unix time when the report has a clock pair:
//! Kineto's `ts` is relative to its `baseTimeNanoseconds` too.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use super::events::{RangeArgs, TraceInfo};
use crate::analysis::correlate::{KernelStatus, TransferStatus};
use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::tables::csv::write_file;

/// The environment variable `gmprof run --trace-format` sets for the profiled processes.
pub const TRACE_FORMAT_ENV: &str = "GMPROF_TRACE_FORMAT";

/// Kineto's `schemaVersion`.
pub const SCHEMA_VERSION: u32 = 1;

/// The form of `trace.json`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceFormat {
    /// gmprof's own Chrome trace (the default): what `gmprof check-trace`, the HTML report
    /// and the goldens describe ([`trace`](super::trace)).
    #[default]
    Chrome,
    /// The Kineto form (this module).
    Kineto,
}

impl TraceFormat {
    /// `chrome` or `kineto`.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Chrome => "chrome",
            TraceFormat::Kineto => "kineto",
        }
    }

    /// Parses `chrome` or `kineto` (case-insensitive, blanks around ignored).
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "chrome" => Ok(TraceFormat::Chrome),
            "kineto" => Ok(TraceFormat::Kineto),
            _ => Err(Error::InvalidConfig(format!(
                "unknown trace format '{text}': use chrome (gmprof's Chrome trace, the default) or kineto (the form \
                 PyTorch's profiler writes, which Holistic Trace Analysis reads)"
            ))),
        }
    }

    /// The format `GMPROF_TRACE_FORMAT` asks for through `lookup` (an environment); the
    /// default when it is unset or blank.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        match lookup(TRACE_FORMAT_ENV).filter(|v| !v.trim().is_empty()) {
            None => Ok(Self::default()),
            Some(v) => Self::parse(&v).map_err(|e| match e {
                Error::InvalidConfig(m) => Error::InvalidConfig(format!("{TRACE_FORMAT_ENV}: {m}")),
                other => other,
            }),
        }
    }
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TraceFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Whether the trace format `lookup` (an environment) asks for is the Kineto form, whose
/// `cuda_runtime` events want each call's duration: the profiler then times API calls
/// (`ProfilerBuilder::time_api_calls`). A value that is not a format is not.
pub fn times_api_calls(lookup: &dyn Fn(&str) -> Option<String>) -> bool {
    TraceFormat::from_lookup(lookup).is_ok_and(|f| f == TraceFormat::Kineto)
}

/// A process's place in a distributed job: Kineto's `distributedInfo`. Written only when a
/// rank is known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DistributedInfo {
    /// The global rank (`RANK`, `OMPI_COMM_WORLD_RANK`, ...).
    pub rank: u32,
    /// The number of ranks (`WORLD_SIZE`, ...), when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// The rank on its host (`LOCAL_RANK`, ...), when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// The environment variable the rank came from (gmprof's; Kineto has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_variable: Option<String>,
}

/// How `trace.json` is written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// Its form.
    pub format: TraceFormat,
    /// The profiled process's id: the Kineto trace's CPU process (gmprof's
    /// [`CPU_PID`](super::events::CPU_PID) when unknown).
    pub pid: Option<u32>,
    /// Its rank, when it has one.
    pub distributed: Option<DistributedInfo>,
    /// The step range, a name or glob, whose instances are the `ProfilerStep#N` events
    /// ([`kineto_steps`](super::kineto_steps)); `None`: the repeated range of least depth and
    /// most GPU time.
    pub step_range: Option<String>,
    /// The number of the first step, when the steps are numbered from one (an on-demand
    /// capture's first step); `None`: from 0.
    pub first_step: Option<u64>,
}

impl TraceOptions {
    /// A Kineto trace of process `pid`.
    pub fn kineto(pid: Option<u32>, distributed: Option<DistributedInfo>) -> Self {
        Self { format: TraceFormat::Kineto, pid, distributed, step_range: None, first_step: None }
    }

    /// These options with the step range `range` and the first step `first` (see
    /// [`TraceOptions::step_range`], [`TraceOptions::first_step`]).
    pub fn with_steps(self, range: Option<String>, first: Option<u64>) -> Self {
        Self { step_range: range, first_step: first, ..self }
    }
}

/// The environment variables that name the step range of a Kineto trace, in the order they
/// are read: `gmprof run --step-range`'s, `--torch-steps`'s, then a rotation's.
pub const STEP_RANGE_ENVS: [&str; 3] = ["GMPROF_STEP_RANGE", "GMPROF_TORCH_STEPS", "GMPROF_ROTATE_STEP"];

/// The step range `lookup` (an environment) names ([`STEP_RANGE_ENVS`]), if any.
pub fn step_range_from(lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    STEP_RANGE_ENVS.iter().find_map(|k| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()))
}

/// One entry of `deviceProperties`: what gmprof knows of a GPU, in Kineto's field names.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceProperties {
    /// The device ordinal (the GPU's pid in the trace).
    pub id: u32,
    /// Its name, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Compute capability, major.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_major: Option<u32>,
    /// Compute capability, minor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_minor: Option<u32>,
    /// Streaming multiprocessors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_sms: Option<u32>,
}

/// The phases a Kineto trace has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum KinetoPhase {
    /// `"M"`: a process or thread name.
    #[serde(rename = "M")]
    Metadata,
    /// `"X"`: a complete event.
    #[serde(rename = "X")]
    Complete,
    /// `"s"`: a flow's start.
    #[serde(rename = "s")]
    FlowStart,
    /// `"f"`: a flow's end.
    #[serde(rename = "f")]
    FlowEnd,
}

/// One event of a Kineto trace, its fields in Kineto's order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KinetoEvent {
    /// The phase.
    pub ph: KinetoPhase,
    /// `kernel`, `gpu_memcpy`, `cuda_runtime`, `user_annotation`, ...; none for metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cat: Option<&'static str>,
    /// Kernel, range or memcpy name; `process_name` / `thread_name` for metadata; `ac2g`.
    pub name: String,
    /// Device ordinal (GPU) or process id (CPU).
    pub pid: u64,
    /// Stream (or its overlap lane) or thread id.
    pub tid: u64,
    /// Start, µs from the trace's origin; none for metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    /// Duration, µs; complete events only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    /// A flow's id: the launch's correlation id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// A flow end's binding point (`"e"`: the enclosing slice).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bp: Option<&'static str>,
    /// Details; none for flows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<KinetoArgs>,
}

/// The args of a Kineto event, by kind (serialized without a tag).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum KinetoArgs {
    /// Of a metadata event.
    Name {
        /// The process or thread name.
        name: String,
    },
    /// Of a `user_annotation`.
    Annotation(AnnotationArgs),
    /// Of a `ProfilerStep#N` `user_annotation`.
    Step(StepArgs),
    /// Of a `cuda_runtime` or `cuda_driver` call.
    Runtime(RuntimeArgs),
    /// Of a `kernel`.
    Kernel(Box<KinetoKernelArgs>),
    /// Of a `gpu_memcpy` or `gpu_memset`.
    Memory(Box<KinetoMemoryArgs>),
    /// Of a `gpu_user_annotation`.
    GpuAnnotation {
        /// The range instance's `External id`.
        #[serde(rename = "External id")]
        external_id: u64,
    },
}

/// Args of a `user_annotation`: its `External id`, then gmprof's range args.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnnotationArgs {
    /// Kineto's link from GPU events to the CPU event they belong to.
    #[serde(rename = "External id")]
    pub external_id: u64,
    /// gmprof's args of the range (as in its Chrome trace).
    #[serde(flatten)]
    pub range: RangeArgs,
}

/// Args of a `ProfilerStep#N` event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepArgs {
    /// Its own `External id` (no GPU event names it).
    #[serde(rename = "External id")]
    pub external_id: u64,
    /// gmprof's: `"slot.generation"` of the step range instance (its `user_annotation`'s
    /// `range_id`).
    pub step_range_id: String,
}

/// Args of a `cuda_runtime` or `cuda_driver` call event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuntimeArgs {
    /// The launching range's `External id`; absent outside any range.
    #[serde(rename = "External id", skip_serializing_if = "Option::is_none")]
    pub external_id: Option<u64>,
    /// CUPTI's correlation id, shared with the kernels it launched.
    pub correlation: u32,
}

/// Args of a `kernel` event: Kineto's names first, then gmprof's own.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KinetoKernelArgs {
    /// The launching range's `External id`; absent outside any range.
    #[serde(rename = "External id", skip_serializing_if = "Option::is_none")]
    pub external_id: Option<u64>,
    /// Device ordinal.
    pub device: u32,
    /// CUDA stream id.
    pub stream: u32,
    /// CUPTI correlation id.
    pub correlation: u32,
    /// Registers per thread.
    #[serde(rename = "registers per thread", skip_serializing_if = "Option::is_none")]
    pub registers_per_thread: Option<u16>,
    /// Static plus dynamic shared memory per block, bytes.
    #[serde(rename = "shared memory", skip_serializing_if = "Option::is_none")]
    pub shared_memory: Option<i64>,
    /// Grid dimensions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid: Option<[i32; 3]>,
    /// Block dimensions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<[i32; 3]>,
    /// CUPTI's graph id, for a kernel a CUDA graph launch ran.
    #[serde(rename = "graph id", skip_serializing_if = "Option::is_none")]
    pub graph_id: Option<u32>,
    /// CUPTI's graph node id, for a kernel a CUDA graph launch ran.
    #[serde(rename = "graph node id", skip_serializing_if = "Option::is_none")]
    pub graph_node_id: Option<u64>,
    /// gmprof's: path of the launching range, or `<root>`.
    pub range_path: String,
    /// gmprof's: `"slot.generation"` of the launching range; absent outside any range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_id: Option<String>,
    /// gmprof's: when the launch call was recorded, µs on the clock of `ts` (as in its
    /// Chrome trace; `gmprof check-trace` checks it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_ts: Option<f64>,
    /// gmprof's: what the join established.
    pub status: KernelStatus,
    /// gmprof's: the kernel's metrics by name (only those with a value).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

/// Args of a `gpu_memcpy` or `gpu_memset` event: Kineto's names first, then gmprof's own.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KinetoMemoryArgs {
    /// The calling range's `External id`; absent outside any range.
    #[serde(rename = "External id", skip_serializing_if = "Option::is_none")]
    pub external_id: Option<u64>,
    /// Device ordinal.
    pub device: u32,
    /// CUDA stream id.
    pub stream: u32,
    /// CUPTI correlation id.
    pub correlation: u32,
    /// Bytes copied or set.
    pub bytes: u64,
    /// Bytes / duration, GB/s; absent for a zero duration.
    #[serde(rename = "memory bandwidth (GB/s)", skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbps: Option<f64>,
    /// gmprof's: path of the calling range, or `<root>`.
    pub range_path: String,
    /// gmprof's: `"slot.generation"` of the calling range; absent outside any range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_id: Option<String>,
    /// gmprof's: the calling thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<u64>,
    /// gmprof's: the CUDA function of the call, e.g. `cuMemcpyHtoDAsync_v2`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_name: Option<String>,
    /// gmprof's: what the join established.
    pub status: TransferStatus,
}

/// A whole Kineto trace, its top-level fields in Kineto's order: `distributedInfo` before
/// the events (HTA finds the rank in a file's first lines), gmprof's `otherData` after them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KinetoTrace {
    /// Kineto's [`SCHEMA_VERSION`].
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    /// The process's rank, when it has one.
    #[serde(rename = "distributedInfo", skip_serializing_if = "Option::is_none")]
    pub distributed_info: Option<DistributedInfo>,
    /// The GPUs of the trace.
    #[serde(rename = "deviceProperties")]
    pub device_properties: Vec<DeviceProperties>,
    /// `"ns"`, as gmprof's own trace.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: &'static str,
    /// `ts` 0 as ns since the Unix epoch, when the report has a clock pair.
    #[serde(rename = "baseTimeNanoseconds", skip_serializing_if = "Option::is_none")]
    pub base_time_ns: Option<u64>,
    /// The events: metadata first, then by (pid, tid, ts).
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<KinetoEvent>,
    /// What gmprof's own trace says of itself, and the steps.
    #[serde(rename = "otherData")]
    pub other_data: KinetoOtherData,
}

/// A Kineto trace's `otherData`: gmprof's own trace's, and what became `ProfilerStep#N`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KinetoOtherData {
    /// What gmprof's own trace says of itself.
    #[serde(flatten)]
    pub info: TraceInfo,
    /// The steps; absent when no range is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<super::kineto_steps::StepsInfo>,
}

/// serde_json's compact output with a space after each `:` and `,`, and each element of the
/// top-level arrays (the events, the devices) on a line of its own: HTA's rank search needs
/// the space, and a reader of a large trace the lines.
#[derive(Debug, Default)]
pub struct KinetoFormatter {
    depth: usize,
}

impl serde_json::ser::Formatter for KinetoFormatter {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.depth == 1 {
            w.write_all(b"\n]")
        } else {
            w.write_all(b"]")
        }
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        match (first, self.depth == 2) {
            (true, true) => w.write_all(b"\n"),
            (false, true) => w.write_all(b",\n"),
            (true, false) => Ok(()),
            (false, false) => w.write_all(b", "),
        }
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.depth == 0 {
            w.write_all(b"\n}")
        } else {
            w.write_all(b"}")
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        match (first, self.depth == 1) {
            (true, true) => w.write_all(b"\n"),
            (false, true) => w.write_all(b",\n"),
            (true, false) => Ok(()),
            (false, false) => w.write_all(b", "),
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// `value` as JSON text written by [`KinetoFormatter`].
pub fn to_kineto_json<T: Serialize>(value: &T) -> Result<String> {
    let mut out = Vec::new();
    write_kineto_json(&mut out, value)?;
    String::from_utf8(out).map_err(|e| Error::Serialize { what: "Kineto trace", message: e.to_string() })
}

fn write_kineto_json<W: Write, T: Serialize>(out: W, value: &T) -> Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, KinetoFormatter::default());
    value.serialize(&mut ser).map_err(|e| Error::Serialize { what: "Kineto trace", message: e.to_string() })
}

impl Report {
    /// Writes the report as a Kineto trace to `out`.
    pub fn write_kineto_trace_to<W: Write>(&self, out: W, options: &TraceOptions) -> Result<()> {
        write_kineto_json(out, &self.to_kineto_trace(options))
    }

    /// Writes the report as a Kineto trace to a file, e.g. `trace.json`.
    pub fn write_kineto_trace(&self, path: impl AsRef<Path>, options: &TraceOptions) -> Result<()> {
        write_file(path.as_ref(), |out| {
            self.write_kineto_trace_to(&mut *out, options)?;
            out.write_all(b"\n").map_err(|e| Error::io(path.as_ref(), e))
        })
    }

    /// Writes `trace.json` in the form `options` asks for.
    pub fn write_trace(&self, path: impl AsRef<Path>, options: &TraceOptions) -> Result<()> {
        match options.format {
            TraceFormat::Chrome => self.write_chrome_trace(path),
            TraceFormat::Kineto => self.write_kineto_trace(path, options),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_say_what_each_does() {
        assert_eq!(TraceFormat::parse(" Kineto ").unwrap(), TraceFormat::Kineto);
        assert_eq!("chrome".parse::<TraceFormat>().unwrap(), TraceFormat::Chrome);
        let e = TraceFormat::parse("perfetto").unwrap_err().to_string();
        assert!(e.contains("'perfetto'") && e.contains("use chrome") && e.contains("kineto"), "{e}");
        assert_eq!(TraceFormat::from_lookup(|_| None).unwrap(), TraceFormat::Chrome);
        assert_eq!(TraceFormat::from_lookup(|_| Some("  ".into())).unwrap(), TraceFormat::Chrome);
        assert_eq!(TraceFormat::from_lookup(|_| Some("kineto".into())).unwrap(), TraceFormat::Kineto);
        let e = TraceFormat::from_lookup(|_| Some("xml".into())).unwrap_err().to_string();
        assert!(e.contains("GMPROF_TRACE_FORMAT: unknown trace format 'xml'"), "{e}");
        assert_eq!(TraceFormat::Kineto.to_string(), "kineto");
    }

    #[test]
    fn the_formatter_spaces_keys_and_puts_each_event_on_a_line() {
        let value = serde_json::json!({
            "distributedInfo": {"rank": 3, "world_size": 4},
            "traceEvents": [{"name": "a", "args": {"grid": [1, 2, 3]}}, {"name": "b"}],
            "empty": [],
        });
        let text = to_kineto_json(&value).unwrap();
        assert_eq!(
            text,
            "{\n\"distributedInfo\": {\"rank\": 3, \"world_size\": 4},\n\"empty\": [\n],\n\"traceEvents\": [\n\
             {\"args\": {\"grid\": [1, 2, 3]}, \"name\": \"a\"},\n{\"name\": \"b\"}\n]\n}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
