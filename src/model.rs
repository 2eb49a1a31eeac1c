//! Plain data handed from capture to analysis.
//!
//! Capture (CUPTI callbacks, activity buffers, decoded counter images; see
//! [`crate::profiler`]) produces these records; analysis ([`crate::session`],
//! [`crate::correlate`], [`crate::aggregate`], [`crate::report`]) consumes them and never
//! touches CUPTI. This is the seam CPU tests drive with recorded or synthetic data.

use serde::{Deserialize, Serialize};

/// The OS thread id (Linux `gettid`) of the thread that pushed a range or launched a kernel.
pub type ThreadId = u64;

/// A range instance's key: a slab slot plus the generation of that slot, so a reused slot is
/// never mistaken for the range that held it before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RangeId {
    /// Slot in the session tree's slab.
    pub slot: u32,
    /// Generation of the slot when this range was created.
    pub generation: u32,
}

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
    /// CUDA function name of the launch call, e.g. `cuLaunchKernel`.
    pub api_name: String,
    /// The CUDA context's id.
    pub context_id: u32,
}

/// The fields of a CUPTI kernel activity record that gmprof keeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Start timestamp, ns (CUPTI clock). Equals `end_ns` while the range profiler is enabled.
    pub start_ns: u64,
    /// End timestamp, ns (CUPTI clock).
    pub end_ns: u64,
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
