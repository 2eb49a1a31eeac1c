//! The probe engine's process-wide state: [`STATE`] holds the configuration and the
//! [`State`] (modules loaded, the probed function of each function handle, kernels, launches
//! in flight ([`Pending`]), records, the SASS path).
//!
//! Imports `config`, `launch`, `images`, `graphs` and `sass` (the types it holds); `params`,
//! `probed`, `graph_hooks` and `engine` import it.

use std::collections::HashMap;
use std::ffi::c_void;

use parking_lot::Mutex;

use super::config::ProbeConfig;
use super::graphs::GraphProbes;
use super::images::{HostObjects, Loaded};
use super::launch::Launch;
use super::sass::SassState;
use crate::checked::module::RawFunction;
use crate::probe::decode;
use crate::probe::ThreadLimits;
use crate::report::probe_kernels::KernelTable;
use crate::report::probes::ProbedLaunch as LaunchRecord;
use crate::sys::cupti::CUstream;

pub(super) struct Pending {
    /// How the launch was made, for a failure's message.
    pub(super) how: String,
    pub(super) _args: Vec<*mut c_void>,
    pub(super) _ptrs: Box<[u64]>,
    pub(super) maps: Vec<(u64, usize)>,
    pub(super) stream: CUstream,
    pub(super) launch: Launch,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) modules: HashMap<usize, Loaded>,
    /// The probed function of each function handle heard launched (`None`: not probed).
    pub(super) probed: HashMap<usize, Option<Probed>>,
    /// Every function handle heard launched, for probe_kernels.csv.
    pub(super) kernels: KernelTable,
    pub(super) pending: HashMap<u32, Pending>,
    pub(super) launches: Vec<LaunchRecord>,
    /// block_sched spans handed to the device timers (the timeline), and the launches
    /// left off for the cap.
    pub(super) timeline_spans: usize,
    pub(super) timeline_left_off: u64,
    pub(super) records: Vec<decode::ProbeRow>,
    pub(super) recorded_per_kernel: HashMap<String, usize>,
    pub(super) range_depth: i64,
    /// Runtime-registered kernels' PTX, from the program's files.
    pub(super) host: HostObjects,
    /// The SASS metrics path, when it is on.
    pub(super) sass: Option<SassState>,
    /// Why the SASS metrics path is off, when it was wanted.
    pub(super) sass_off: Option<String>,
    /// Launches heard while a stream captured (`capture::stream_capture`) and not probed
    /// inside their graph, by function handle: how many, the mangled name, and why the last
    /// one was not (they build graph nodes, which run later unprobed).
    pub(super) captured: HashMap<usize, (u64, String, String)>,
    /// Probes inside CUDA graphs: the map pool, the probed nodes, graphs and their launches.
    pub(super) graphs: GraphProbes,
    /// The argument arrays of probed captured launches, until their exit.
    pub(super) graph_args: HashMap<u32, (Vec<*mut c_void>, Box<[u64]>)>,
    /// The probed nodes' probe_launches.csv rows, once read at the end of the run.
    pub(super) graph_records: Option<Vec<LaunchRecord>>,
    /// Map buffers of launches whose read-back a capture interrupted: freed at the first
    /// launch outside captures (a free during a capture could invalidate it).
    pub(super) deferred_frees: Vec<u64>,
    /// What went wrong that the report says (each once, the first few).
    pub(super) notes: Vec<String>,
}

impl State {
    /// Keeps `what` for the report, once, up to 8 notes.
    pub(super) fn note(&mut self, what: String) {
        if self.notes.len() < 8 && !self.notes.contains(&what) {
            self.notes.push(what);
        }
    }
}

// SAFETY: the raw pointers in State are driver handles and argument arrays owned by State,
// used only under its lock.
unsafe impl Send for State {}

pub(super) static STATE: Mutex<Option<(ProbeConfig, State)>> = Mutex::new(None);

#[derive(Clone)]
pub(super) struct Probed {
    pub(super) func: RawFunction,
    pub(super) params: usize,
    /// With [`MapVia::Global`], each probe's map variable.
    pub(super) globals: Vec<u64>,
    /// The probed kernel's `.reqntid`/`.maxntid`.
    pub(super) limits: ThreadLimits,
    /// The probed function's `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK` (its registers may
    /// allow fewer threads than the original's).
    pub(super) max_threads: Option<i32>,
}
