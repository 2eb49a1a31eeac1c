//! Plain data handed from capture to analysis.
//!
//! Capture (CUPTI callbacks, activity buffers, decoded counter images; see
//! [`crate::capture::profiler`]) produces these records; analysis ([`crate::model::session`],
//! [`crate::analysis::correlate`], [`crate::analysis::aggregate`], [`crate::report`]) consumes them and never
//! touches CUPTI. This is the seam CPU tests drive with recorded or synthetic data.
//!
//! The keys every record and the session tree share ([`RangeId`], [`ThreadId`]) live in
//! `ids`, which `session` imports; no file of this folder imports this `mod.rs`.

mod ending;
#[cfg(test)]
pub(crate) use ending::illegal_instruction;
mod ids;
pub mod pc;
pub mod pm;
pub mod sass;
pub mod session;
mod step_time;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

pub use self::ending::{CudaError, FailedStep, FinishStep, RunEnd};
pub use self::ids::{RangeId, ThreadId};
pub use self::step_time::StepTime;

/// How counters were collected, which also fixes where kernel time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfilingMode {
    /// CUPTI auto range + kernel replay: one counter range per kernel, replayed per pass.
    KernelReplay,
    /// CUPTI user range per kernel launch + user replay.
    PerKernel,
    /// CUPTI user range per gmprof range + user replay.
    PerRange,
    /// Activity records only, no counters.
    Trace,
}

impl ProfilingMode {
    /// The name used on the command line, in outputs and in `GMPROF_MODE`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProfilingMode::KernelReplay => "kernel_replay",
            ProfilingMode::PerKernel => "per_kernel",
            ProfilingMode::PerRange => "per_range",
            ProfilingMode::Trace => "trace",
        }
    }
}

/// Which API launched a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchApi {
    /// A CUDA runtime launch (`cudaLaunchKernel`, `<<<>>>`, ...).
    Runtime,
    /// A CUDA driver launch (`cuLaunchKernel`, `cuLaunchKernelEx`, ...).
    Driver,
    /// A CUDA graph launch: one correlation id for many kernels.
    Graph,
}

/// One kernel launch, recorded by the launch callback when it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// CUPTI correlation id, shared with the kernel's activity record.
    pub correlation_id: u32,
    /// The launching thread.
    pub thread: ThreadId,
    /// The innermost open range of that thread at launch, `None` outside any range.
    pub range: Option<RangeId>,
    /// Counter-image cycle the launch was profiled in (the image is re-initialized each cycle).
    pub cycle: u32,
    /// Launch ordinal within the cycle; counter range `i` of a cycle belongs to ordinal `i`.
    pub ordinal: u32,
    /// Which API launched it.
    pub api: LaunchApi,
    /// CUDA function name of the launch call, e.g. `cuLaunchKernel` (CUPTI's own constant
    /// while capturing: no copy per launch).
    pub api_name: Cow<'static, str>,
    /// The CUDA context's id.
    pub context_id: u32,
    /// When the launch callback recorded the call, ns on the CUPTI clock
    /// (`cuptiGetTimestamp`, the clock of the activity records and of range push and pop):
    /// inside the call, so inside the range it is attributed to, and before its kernels
    /// start. `None` where it was not taken.
    #[serde(default)]
    pub launch_ns: Option<u64>,
    /// per_kernel with rotation ([`crate::profiler::ProfilerBuilder::rotate`]): this launch's
    /// position in its step was not in the step's slot, so no counter range was opened for it
    /// (its position is measured in another step). Its metrics are blank by design.
    #[serde(default)]
    pub unmeasured: bool,
}

/// The fields of a CUPTI kernel activity record that gmprof keeps. `Default` is an empty
/// record (for tests and tools that build records by hand).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelActivity {
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Kernel name as CUPTI reports it (mangled for C++ kernels).
    pub name: String,
    /// Grid dimensions.
    pub grid: [i32; 3],
    /// Block dimensions.
    pub block: [i32; 3],
    /// Registers per thread.
    pub registers_per_thread: u16,
    /// Static shared memory per block, bytes.
    pub static_shared_memory: i32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared_memory: i32,
    /// CUDA stream id.
    pub stream_id: u32,
    /// CUDA context id.
    pub context_id: u32,
    /// Device ordinal.
    pub device_id: u32,
    /// Graph id when launched from a CUDA graph, else 0.
    pub graph_id: u32,
    /// The graph node that ran this kernel (CUPTI's unique node id), else 0.
    #[serde(default)]
    pub graph_node_id: u64,
    /// Start timestamp, ns (CUPTI clock). Equals `end_ns` while the range profiler is enabled.
    pub start_ns: u64,
    /// End timestamp, ns (CUPTI clock).
    pub end_ns: u64,
}

/// A CUDA graph node that an API call created while its stream was capturing: the call
/// built a graph instead of running work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedNode {
    /// CUPTI's id of the graph being built.
    pub graph_id: u32,
    /// CUPTI's unique id of the new node.
    pub node_id: u64,
    /// The driver's `CUgraphNodeType` (0 kernel, 1 memcpy, 2 memset, ...).
    pub node_type: u32,
}

/// One decoded counter range: the metric values CUPTI measured for one range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CounterRange {
    /// Counter-image cycle this range was decoded from.
    pub cycle: u32,
    /// Index of the range within its cycle's counter image.
    pub index: u32,
    /// CUPTI's range name: "0", "1", ... in auto range; gmprof's join key in user range.
    pub name: String,
    /// One value per metric of the [`MetricSet`], in its order. NaN where CUPTI gave none.
    pub values: Vec<f64>,
}

/// A metric's type, as CUPTI's metric properties report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// A raw count (bytes, sectors, cycles, ns): additive over kernels.
    Counter,
    /// A ratio of two counters (percentages, per-instruction ratios).
    Ratio,
    /// A throughput, usually in % of peak.
    Throughput,
}

/// One requested metric with CUPTI's description of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricSpec {
    /// Full metric name, e.g. `dram__bytes_read.sum`.
    pub name: String,
    /// Type from CUPTI's metric properties.
    pub kind: MetricKind,
    /// Unit, e.g. `byte`, `nsecond`, `%`.
    pub unit: String,
    /// CUPTI's description.
    pub description: String,
}

/// The metrics of a profiling session, in the order of [`CounterRange::values`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricSet {
    /// The metrics.
    pub metrics: Vec<MetricSpec>,
}

impl MetricSet {
    /// Index of a metric by full name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.metrics.iter().position(|m| m.name == name)
    }
}

/// The name of the metric kernel time is taken from in counter modes.
pub const GPU_TIME_METRIC: &str = "gpu__time_duration.sum";

/// What a memory transfer record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferKind {
    /// Host to device copy.
    MemcpyHtoD,
    /// Device to host copy.
    MemcpyDtoH,
    /// Device to device copy.
    MemcpyDtoD,
    /// Peer (device to other device) copy.
    MemcpyPtoP,
    /// Any other copy direction (host to host, arrays).
    MemcpyOther,
    /// A memset.
    Memset,
}

impl TransferKind {
    /// From CUPTI's `CUpti_ActivityMemcpyKind` value.
    pub fn from_cupti_copy_kind(kind: u8) -> Self {
        match kind {
            1 => TransferKind::MemcpyHtoD,
            2 => TransferKind::MemcpyDtoH,
            8 => TransferKind::MemcpyDtoD,
            10 => TransferKind::MemcpyPtoP,
            _ => TransferKind::MemcpyOther,
        }
    }

    /// The name used in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferKind::MemcpyHtoD => "memcpy_htod",
            TransferKind::MemcpyDtoH => "memcpy_dtoh",
            TransferKind::MemcpyDtoD => "memcpy_dtod",
            TransferKind::MemcpyPtoP => "memcpy_ptop",
            TransferKind::MemcpyOther => "memcpy_other",
            TransferKind::Memset => "memset",
        }
    }
}

/// A memcpy or memset API call, recorded by its callback when it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferCall {
    /// CUPTI correlation id, shared with the transfer's activity record.
    pub correlation_id: u32,
    /// The calling thread.
    pub thread: ThreadId,
    /// The innermost open range of that thread at the call.
    pub range: Option<RangeId>,
    /// CUDA function name, e.g. `cuMemcpyHtoDAsync_v2`.
    pub api_name: Cow<'static, str>,
    /// Set when no activity record will time this call: what its parameters say, which
    /// makes its row (without times) unless an activity record with its correlation id
    /// arrives after all, which then makes the row instead.
    #[serde(default)]
    pub untimed: Option<UntimedTransfer>,
    /// What the call's parameters asked for (1D copies and memsets; `None` for the 2D, 3D,
    /// array and symbol copies), and whether it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<TransferParams>,
}

/// What a memcpy or memset call asked for, read from its parameters, and whether it failed:
/// enough to tell apart a call that no activity record times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferParams {
    /// Copy direction (as activity records name it), or memset.
    pub kind: TransferKind,
    /// The runtime's `cudaMemcpyKind` as the program passed it (0 host to host, 1 host to
    /// device, 2 device to host, 3 device to device, 4 inferred from the pointers); `None`
    /// for driver calls and memsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_kind: Option<i32>,
    /// Bytes asked for (a batch's: the sum of its copies').
    pub bytes: u64,
    /// Copies asked for: 1, or a `cudaMemcpyBatchAsync`'s count.
    pub copies: u64,
    /// The stream handle the program passed (0: the legacy default stream); `None` for the
    /// synchronous calls and where it was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// The error the call returned (`CUresult` or `cudaError_t`) when it failed; `None` when
    /// it succeeded or its exit was not heard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<i32>,
}

/// A transfer described by its API call's parameters alone: a memset under kernel replay,
/// where gmprof keeps CUPTI's memset activity off (with it, CUPTI 13.0 crashes in its
/// activity flush). Its size, range and thread are known; when it ran is not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntimedTransfer {
    /// Copy direction, or memset.
    pub kind: TransferKind,
    /// Bytes the call sets or copies, from its parameters.
    pub bytes: u64,
    /// Device ordinal of the session's context, when capture knows it.
    pub device_id: Option<u32>,
}

/// A memcpy or memset activity record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferActivity {
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Direction, or memset.
    pub kind: TransferKind,
    /// Bytes copied or set.
    pub bytes: u64,
    /// Start, ns (CUPTI clock).
    pub start_ns: u64,
    /// End, ns (CUPTI clock).
    pub end_ns: u64,
    /// CUDA stream id.
    pub stream_id: u32,
    /// CUDA context id.
    pub context_id: u32,
    /// Device ordinal.
    pub device_id: u32,
    /// Graph id when a CUDA graph's memcpy or memset node ran it, else 0.
    #[serde(default)]
    pub graph_id: u32,
    /// That graph node's id (CUPTI's unique node id), else 0.
    #[serde(default)]
    pub graph_node_id: u64,
}

/// A pair of readings of the CUPTI clock and the system wall clock, taken back to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockPair {
    /// `cuptiGetTimestamp`, ns.
    pub cupti_ns: u64,
    /// System wall clock, ns since the Unix epoch.
    pub unix_ns: u64,
}

/// Clock pairs at start and finish: they convert CUPTI timestamps to wall time and measure
/// how far the two clocks drifted apart during the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSync {
    /// Taken when profiling started.
    pub start: ClockPair,
    /// Taken when profiling finished.
    pub finish: ClockPair,
}

impl ClockSync {
    /// Wall-clock ns since the Unix epoch for a CUPTI timestamp, interpolating linearly
    /// between the two pairs (extrapolating outside them).
    pub fn to_unix_ns(&self, cupti_ns: u64) -> u64 {
        // Integer arithmetic: Unix-epoch nanoseconds need 61 bits, more than an f64 holds.
        let span_cupti = self.finish.cupti_ns as i128 - self.start.cupti_ns as i128;
        let span_unix = self.finish.unix_ns as i128 - self.start.unix_ns as i128;
        let delta = cupti_ns as i128 - self.start.cupti_ns as i128;
        let offset = if span_cupti > 0 { delta * span_unix / span_cupti } else { delta };
        (self.start.unix_ns as i128 + offset).clamp(0, u64::MAX as i128) as u64
    }

    /// How much the wall clock gained on the CUPTI clock over the session, ns (negative when
    /// it lost).
    pub fn drift_ns(&self) -> i64 {
        let cupti = self.finish.cupti_ns as i64 - self.start.cupti_ns as i64;
        let unix = self.finish.unix_ns as i64 - self.start.unix_ns as i64;
        unix - cupti
    }
}

/// A time the profiler held a launching thread to cycle its counter image mid-run: CUPTI's
/// range profiler stopped, decoded and started again (about 11 ms plus a few µs per range
/// on an H100/H200, see BENCHMARKS.md). Times are on the CUPTI clock, like the rows'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfilerPause {
    /// The counter cycle that ended, 0-based.
    pub cycle: u32,
    /// Counter ranges the cycle held.
    pub ranges: u32,
    /// When the launching thread started the stop, ns.
    pub start_ns: u64,
    /// When the profiler ran again, ns.
    pub end_ns: u64,
    /// The launching thread (OS thread id).
    pub thread: u64,
}

/// gmprof's own time inside CUPTI's callbacks over a session, measured only when
/// `GMPROF_SELF_TIME=1`: the API callbacks (launch and transfer bookkeeping, inside the
/// program's CUDA calls) and the activity buffer callbacks (decoding, on CUPTI's thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfTime {
    /// API callbacks gmprof handled (a launch is an enter and an exit, per API level).
    pub api_callbacks: u64,
    /// Their total time, ns.
    pub api_callback_ns: u64,
    /// Activity buffers decoded.
    pub activity_buffers: u64,
    /// Their total time, ns.
    pub activity_buffer_ns: u64,
}

impl SelfTime {
    /// The counts from `earlier` to `self`.
    pub fn since(self, earlier: SelfTime) -> SelfTime {
        SelfTime {
            api_callbacks: self.api_callbacks.saturating_sub(earlier.api_callbacks),
            api_callback_ns: self.api_callback_ns.saturating_sub(earlier.api_callback_ns),
            activity_buffers: self.activity_buffers.saturating_sub(earlier.activity_buffers),
            activity_buffer_ns: self.activity_buffer_ns.saturating_sub(earlier.activity_buffer_ns),
        }
    }
}

/// What the device can do at most, from its attributes: the roofs that measured bandwidth
/// and FLOP rates are drawn against.
///
/// Both peaks are the usual theoretical ones, computed from driver attributes, never
/// measured: `dram_peak_gbps` = 2 (double data rate) × memory clock × bus width / 8, and
/// `fp32_peak_gflops` = 2 (an FMA is two FLOPs) × SMs × FP32 lanes per SM × SM clock, with
/// the lanes per SM of the compute capability ([`fp32_lanes_per_sm`]). The clocks are the
/// driver's maximum clocks, so a kernel at a lower clock stays under the roof.
/// `warp_issue_peak_ginst` is the instruction roof: 4 schedulers per SM, each issuing one
/// warp instruction per clock (compute capability 7.0 and newer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DevicePeaks {
    /// Compute capability, e.g. `[9, 0]`.
    pub compute_capability: Option<[u32; 2]>,
    /// Streaming multiprocessors.
    pub sm_count: Option<u32>,
    /// Maximum SM clock, kHz.
    pub sm_clock_khz: Option<u32>,
    /// Maximum memory clock, kHz.
    pub memory_clock_khz: Option<u32>,
    /// Global memory bus width, bits.
    pub memory_bus_width_bits: Option<u32>,
    /// Theoretical DRAM bandwidth, GB/s.
    pub dram_peak_gbps: Option<f64>,
    /// Theoretical FP32 (CUDA core, FMA) rate, GFLOP/s.
    pub fp32_peak_gflops: Option<f64>,
    /// Warp instructions the SMs can issue per second, in billions.
    #[serde(default)]
    pub warp_issue_peak_ginst: Option<f64>,
}

/// FP32 lanes (FMA units) per SM of a compute capability, from NVIDIA's CUDA C++
/// Programming Guide table of arithmetic throughputs; `None` for one gmprof does not know.
pub fn fp32_lanes_per_sm(major: u32, minor: u32) -> Option<u32> {
    match (major, minor) {
        (7, _) | (8, 0) => Some(64),
        (8, _) | (9, 0) | (10, _) | (11, _) | (12, _) => Some(128),
        _ => None,
    }
}

impl DevicePeaks {
    /// The peaks of a device with these attributes (clocks in kHz, bus width in bits).
    pub fn from_attributes(
        major: Option<u32>,
        minor: Option<u32>,
        sm_count: Option<u32>,
        sm_clock_khz: Option<u32>,
        memory_clock_khz: Option<u32>,
        memory_bus_width_bits: Option<u32>,
    ) -> Self {
        let compute_capability = major.zip(minor).map(|(a, b)| [a, b]);
        // kHz × 1e3 = Hz; × bytes per transfer × 2 transfers per clock; / 1e9 = GB/s.
        let dram_peak_gbps = memory_clock_khz
            .zip(memory_bus_width_bits)
            .map(|(clock, bits)| 2.0 * f64::from(clock) * 1e3 * (f64::from(bits) / 8.0) / 1e9);
        let fp32_peak_gflops = compute_capability
            .and_then(|[a, b]| fp32_lanes_per_sm(a, b))
            .zip(sm_count.zip(sm_clock_khz))
            .map(|(lanes, (sms, clock))| 2.0 * f64::from(sms) * f64::from(lanes) * f64::from(clock) * 1e3 / 1e9);
        let warp_issue_peak_ginst = compute_capability
            .filter(|[major, _]| *major >= 7)
            .and(sm_count.zip(sm_clock_khz))
            .map(|(sms, clock)| 4.0 * f64::from(sms) * f64::from(clock) * 1e3 / 1e9);
        DevicePeaks {
            compute_capability,
            sm_count,
            sm_clock_khz,
            memory_clock_khz,
            memory_bus_width_bits,
            dram_peak_gbps,
            fp32_peak_gflops,
            warp_issue_peak_ginst,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_sync_interpolates_and_reports_drift() {
        let sync = ClockSync {
            start: ClockPair { cupti_ns: 1_000, unix_ns: 1_700_000_000_000_000_000 },
            finish: ClockPair { cupti_ns: 1_000_001_000, unix_ns: 1_700_000_001_000_000_500 },
        };
        assert_eq!(sync.drift_ns(), 500);
        assert_eq!(sync.to_unix_ns(1_000), 1_700_000_000_000_000_000);
        assert_eq!(sync.to_unix_ns(500_001_000), 1_700_000_000_500_000_250);
        assert_eq!(sync.to_unix_ns(1_000_001_000), 1_700_000_001_000_000_500);
    }

    #[test]
    fn peaks_of_an_h100_sxm() {
        // H100 SXM5: CC 9.0, 132 SMs, 1980 MHz, HBM3 at 2619 MHz on a 5120-bit bus.
        let p = DevicePeaks::from_attributes(Some(9), Some(0), Some(132), Some(1_980_000), Some(2_619_000), Some(5120));
        let dram = p.dram_peak_gbps.expect("dram peak");
        assert!((dram - 3352.32).abs() < 0.01, "{dram}");
        let fp32 = p.fp32_peak_gflops.expect("fp32 peak");
        assert!((fp32 - 66_908.16).abs() < 0.01, "{fp32}");
        let issue = p.warp_issue_peak_ginst.expect("issue peak");
        assert!((issue - 1045.44).abs() < 0.01, "{issue}");
        let unknown = DevicePeaks::from_attributes(Some(6), Some(1), Some(20), Some(1_000_000), None, Some(256));
        assert_eq!(
            (unknown.dram_peak_gbps, unknown.fp32_peak_gflops, unknown.warp_issue_peak_ginst),
            (None, None, None)
        );
    }

    #[test]
    fn copy_kinds_map_from_cupti() {
        assert_eq!(TransferKind::from_cupti_copy_kind(1), TransferKind::MemcpyHtoD);
        assert_eq!(TransferKind::from_cupti_copy_kind(2).as_str(), "memcpy_dtoh");
        assert_eq!(TransferKind::from_cupti_copy_kind(99), TransferKind::MemcpyOther);
    }
}

/// A CUDA context of the process that no profiler measured: its kernel launches were heard
/// and its kernels ran, but none of them is in the report's rows. Reported in the summary's
/// first line and in `injection.json`, never only as a warning.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnprofiledContext {
    /// CUPTI's context id.
    pub context_id: u32,
    /// The device of its kernels, when an activity record of it arrived.
    pub device_id: Option<u32>,
    /// Kernel launch calls heard on it (outermost calls: a runtime launch and the driver
    /// call inside it are one).
    pub launches: u64,
    /// Kernel activity records of it that arrived and were left out.
    pub kernels: u64,
    /// Why gmprof did not profile it (its profiler could not start), when it tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}
