//! Counting kernels through CUPTI's SASS metrics: the probe engine's path for kernels
//! without PTX (cuBLAS, cuDNN, aten, NCCL, fused attention), or for every kernel with
//! `--probe-sass always`.
//!
//! Layer 3, part of [`super`]. How it runs beside the PTX path:
//!
//! - On the first launch of a selected kernel that the PTX path does not take, the launch's
//!   device gets gmprof's metric set ([`crate::probe::sass::METRICS`]) and its context a
//!   collection with lazy patching ([`crate::checked::sass_metrics`]): CUPTI patches each
//!   function at its first launch after that, so kernels never launched cost nothing.
//! - On every launch's exit while a collection is on, gmprof waits for the context and
//!   flushes, so each flush holds one launch: a selected SASS launch gets its counts
//!   ([`crate::probe::sass::attribute`]) as a probe launch with source `sass-metrics`; the
//!   counts of functions gmprof did not hear launched (a CUDA graph's kernels) and of
//!   PTX-probed or unselected launches are kept apart, by function, never mixed in.
//! - Inside CUDA graphs (`sass_graphs`): a kernel captured into a graph and not PTX-probed
//!   there is counted at the graph's launches, by a flush right after each one (waited for,
//!   with no capture in progress). At a capture's begin (no other capture in progress) the
//!   context's collection is turned on and what waits in CUPTI is flushed apart; during a
//!   capture no CUPTI or waiting call is made. This is opt-in (`GMPROF_PROBE_SASS_GRAPHS=1`):
//!   it counts exactly in a CUDA program of its own and under `torch.cuda.graph`, but under
//!   Inductor's CUDA graph trees (`mode="reduce-overhead"`) the wait after a graph launch
//!   never returned (H200, CUPTI 13.0.1: `cuCtxSynchronize` inside the `cuGraphLaunch`
//!   callback of PyTorch's autograd thread). By default the path stops at the program's
//!   first capture, after a last flush.
//! - At the end a last flush takes what is left, the collections are disabled (CUPTI's
//!   dropped records counted) and the configurations unset.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::launch::{launch_record, Launch};
use super::sass_graphs::{SassGraphs, CAPTURING, FLUSH_FAILED, MIXED, OVER_QUOTA};
use crate::capture::stream_capture;
use crate::checked::callback::quietly;
use crate::checked::driver::{current_context, current_device, synchronize};
use crate::checked::library::{Cupti, Driver};
use crate::checked::sass_metrics::{self, SassCollection, SassConfig};
use crate::checked::target::{chip_name, ProfilerApi};
use crate::error::Result;
use crate::probe::sass::{attribute, HotSpots, KernelCounts, MetricIds, METRICS};
use crate::probe::ProbeSpec;
use crate::report::probes::{ProbeTotal, ProbedLaunch as LaunchRecord};

/// A function's counts outside the launches gmprof attributed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtherCounts {
    /// Flushes it appeared in.
    pub flushes: u64,
    /// Warp instructions counted.
    pub instructions: u64,
    /// Why they are not a launch's: `not heard launched` (a CUDA graph's kernel, another
    /// launch path), `PTX-probed or not selected`, or counted before a flush that failed.
    pub why: &'static str,
}

pub(super) const NOT_HEARD: &str = "not heard launched (a CUDA graph's kernel, or a launch API gmprof does not hook)";
pub(super) const NOT_COUNTED: &str =
    "launched while not counted (over --probe-sass-launches, outside --probe-range, PTX-probed or not selected)";
pub(super) const AFTER_FAILED_FLUSH: &str =
    "counted before a SASS metrics flush that failed (its counts came with a later flush, not attributed)";

/// The SASS path's state.
pub(super) struct SassState {
    cupti: Cupti,
    driver: Driver,
    /// CUPTI's profiler API, initialized at the first SASS launch (not at injection, inside
    /// `cuInit`).
    profiler: Option<ProfilerApi>,
    /// Per device: its configuration and metric ids, or why it could not be configured.
    devices: HashMap<i32, std::result::Result<(SassConfig, MetricIds), String>>,
    /// Per context handle: its collection and its device's metric ids.
    collections: HashMap<usize, (SassCollection, MetricIds)>,
    /// Selected launches waiting for their exit: correlation id → (kernel handle, mangled).
    pub(super) pending: HashMap<u32, (usize, String, Launch)>,
    /// Whether a launch ran since the last flush without one (over the launch quota,
    /// outside the range, PTX-probed or not selected): its counts wait in CUPTI, so the next
    /// counted launch flushes them apart first.
    dirty: bool,
    /// Whether the last flush failed: what it would have taken waits in CUPTI, and the next
    /// flush keeps it apart, as counts no launch is known for.
    flush_failed: bool,
    /// Launches counted per function handle, for the quota.
    pub(super) counted: HashMap<usize, u64>,
    /// Launches counted per kernel function at most (`None`: all).
    pub(super) quota: Option<u64>,
    /// Launches skipped for the quota.
    pub(super) over_quota: u64,
    /// CUDA graph launches heard (their kernels are counted apart).
    pub(super) graph_launches: u64,
    /// Where the first flush of each kernel is recorded as JSON lines (for CPU tests).
    dump: Option<std::path::PathBuf>,
    dumped: std::collections::HashSet<String>,
    /// Kept cubins by CUPTI's CRC, computed at the end ([`SassState::source_lines`]), and
    /// what to say of cubins whose CRC could not be computed.
    crc_index: std::sync::OnceLock<(HashMap<u32, usize>, Option<String>)>,
    pub(super) hot: HotSpots,
    pub(super) others: BTreeMap<String, OtherCounts>,
    pub(super) unknown_values: u64,
    pub(super) flushes: u64,
    pub(super) flush_us: f64,
    pub(super) dropped: u64,
    pub(super) failures: Vec<String>,
    /// Why the path stopped counting (the program's first stream capture), if it did.
    pub(super) stopped: Option<String>,
    /// Whether kernels inside CUDA graphs are counted (else the path stops at the first
    /// capture): `GMPROF_PROBE_SASS_GRAPHS=1`, off by default (see the module doc).
    pub(super) in_graphs: bool,
    /// Kernels captured into graphs, and their counts per graph launch.
    pub(super) graphs: SassGraphs,
    /// Whether nothing waited in CUPTI when the graph launch in progress was made.
    graph_clean: bool,
}

/// Why the SASS path stops at the program's first stream capture (the default; see the module
/// doc).
pub(super) const STOPPED_FOR_CAPTURE: &str = "turned off at the program's first CUDA stream capture: under Inductor's \
CUDA graph trees the wait after a graph launch never returned (H200, CUPTI 13.0.1); GMPROF_PROBE_SASS_GRAPHS=1 counts \
graph kernels at each graph launch (exact under torch.cuda.graph); launches after it are PTX-probed where the PTX path \
takes them, else not counted";

impl SassState {
    pub(super) fn new(quota: Option<u64>, dump: Option<std::path::PathBuf>) -> Result<SassState> {
        let cupti = Cupti::load()?;
        let driver = Driver::load()?;
        for (name, present) in [
            ("cuptiSassMetricsEnable", cupti.raw().cuptiSassMetricsEnable.is_ok()),
            ("cuptiSassMetricsFlushData", cupti.raw().cuptiSassMetricsFlushData.is_ok()),
        ] {
            if !present {
                return Err(crate::error::Error::InvalidConfig(format!(
                    "{} has no {name}: CUPTI's SASS metrics need CUDA 12.4 or newer",
                    cupti.path()
                )));
            }
        }
        // CUPTI's SASS metrics count nothing beside concurrent kernel records.
        crate::checked::activity::serialize_kernel_records();
        Ok(SassState {
            cupti,
            driver,
            profiler: None,
            devices: HashMap::new(),
            collections: HashMap::new(),
            pending: HashMap::new(),
            dirty: false,
            flush_failed: false,
            counted: HashMap::new(),
            quota,
            over_quota: 0,
            graph_launches: 0,
            dump,
            dumped: Default::default(),
            crc_index: std::sync::OnceLock::new(),
            hot: HotSpots::default(),
            others: BTreeMap::new(),
            unknown_values: 0,
            flushes: 0,
            flush_us: 0.0,
            dropped: 0,
            failures: Vec::new(),
            stopped: None,
            in_graphs: std::env::var("GMPROF_PROBE_SASS_GRAPHS").is_ok_and(|v| v.trim() == "1"),
            graphs: SassGraphs::default(),
            graph_clean: false,
        })
    }

    pub(super) fn note_failure(&mut self, what: String) {
        if self.failures.len() < 8 && !self.failures.contains(&what) {
            self.failures.push(what);
        }
    }

    /// Before the program's first stream capture: a last flush, then every collection
    /// disabled and every configuration unset, so no graph is built or launched with CUPTI's
    /// SASS patching on ([`STOPPED_FOR_CAPTURE`]). When another capture is already in progress
    /// nothing is waited for (that could invalidate it): the path only stops counting.
    pub(super) fn stop_before_capture(&mut self, capture_in_progress: bool) {
        if self.stopped.is_some() {
            return;
        }
        self.stopped = Some(STOPPED_FOR_CAPTURE.into());
        self.note_failure(STOPPED_FOR_CAPTURE.into());
        if capture_in_progress {
            return;
        }
        if !self.collections.is_empty() {
            if let Err(e) = quietly(|| synchronize(&self.driver)) {
                self.note_failure(format!("waiting before the last SASS metrics flush failed: {e}"));
            }
        }
        self.finish();
        self.pending.clear();
        self.dirty = false;
    }

    /// At the enter of a call that begins a capture (`capture_in_progress`: another one is in
    /// progress). Counting inside graphs: with no other capture in progress, the calling
    /// thread's context collects from now on (so the graph's kernels are patched) and what
    /// waits in CUPTI is flushed apart; otherwise nothing is done. Not counting inside graphs:
    /// the path stops ([`SassState::stop_before_capture`]).
    pub(super) fn before_capture(&mut self, capture_in_progress: bool) {
        if !self.in_graphs {
            return self.stop_before_capture(capture_in_progress);
        }
        if capture_in_progress || self.stopped.is_some() {
            return;
        }
        match self.collect_here() {
            Ok(()) => {
                // A failure is noted and kept in `flush_failed`: the counts stay apart.
                let _ = self.before_counted_launch();
            }
            Err(why) => self.note_failure(format!("SASS metrics inside CUDA graphs: {why}")),
        }
    }

    /// Whether a launch captured now in context `ctx` (a key) can be a graph node counted at
    /// its graph's launches: the path counts inside graphs and the context collects already
    /// (no CUPTI call may be made during the capture). `Err` says why not.
    pub(super) fn counts_captured(&self, ctx: usize) -> std::result::Result<(), String> {
        if let Some(why) = &self.stopped {
            return Err(format!("SASS metrics: {why}"));
        }
        if !self.in_graphs {
            return Err("SASS metrics inside CUDA graphs are off (GMPROF_PROBE_SASS_GRAPHS=1 turns them on)".into());
        }
        if !self.collections.contains_key(&ctx) {
            return Err("SASS metrics were not collecting in its context when the capture began".into());
        }
        Ok(())
    }

    /// At the enter of a launch of executable graph `exec`: when its graph has nodes the path
    /// counts and no capture is in progress, what waits in CUPTI is flushed apart, so the
    /// flush after the launch holds that launch's counts only.
    pub(super) fn graph_launch_enter(&mut self, exec: usize) {
        self.graph_clean = false;
        if !self.in_graphs || self.stopped.is_some() || stream_capture::any() || self.graphs.graph_of(exec).is_none() {
            return;
        }
        self.graph_clean = self.before_counted_launch().is_ok();
    }

    /// At the exit of a launch of executable graph `exec` (`ok`: it succeeded): its counts
    /// are flushed alone when its graph has nodes the path counts, no capture is in progress
    /// and the quota allows; otherwise they wait in CUPTI and are flushed apart later.
    pub(super) fn graph_launch_exit(&mut self, exec: usize, stream: crate::sys::cupti::CUstream, ok: bool) {
        let clean = std::mem::take(&mut self.graph_clean);
        if !ok {
            return;
        }
        self.graph_launches += 1;
        self.dirty = true;
        if !self.in_graphs || self.stopped.is_some() {
            return;
        }
        let Some(graph) = self.graphs.graph_of(exec) else { return };
        if stream_capture::any() {
            return self.graphs.not_flushed(CAPTURING);
        }
        if self.quota.is_some_and(|q| self.graphs.flushed(graph) >= q) {
            return self.graphs.not_flushed(OVER_QUOTA);
        }
        if !clean {
            return self.graphs.not_flushed(MIXED);
        }
        let ctx = match quietly(|| current_context(&self.driver)) {
            Ok(Some(ctx)) => ctx,
            Ok(None) => return self.graphs.not_flushed(FLUSH_FAILED),
            Err(e) => {
                self.note_failure(format!("a CUDA graph launch's context could not be read: {e}"));
                return self.graphs.not_flushed(FLUSH_FAILED);
            }
        };
        let Some((collection, ids)) = self.collections.get(&(ctx.as_raw() as usize)) else { return };
        let ids = *ids;
        let started = Instant::now();
        // The graph's stream only: its kernels are done when it is (kernel records are
        // serialized while this path runs).
        let flushed = crate::checked::module::ModuleApi::get()
            .and_then(|api| quietly(|| api.synchronize(stream)))
            .and_then(|()| quietly(|| collection.flush()));
        self.flushes += 1;
        self.flush_us += started.elapsed().as_secs_f64() * 1e6;
        match flushed {
            Ok(records) => {
                self.dirty = false;
                let a = attribute(&records, &ids, "");
                self.unknown_values += a.unknown_values;
                for k in a.others.iter().filter(|k| self.graphs.is_node_of(graph, &k.function)) {
                    self.hot.add(k);
                }
                let others = self.graphs.add_flush(graph, a.others);
                self.keep_others(others, NOT_COUNTED);
            }
            Err(e) => {
                self.flush_failed = true;
                self.note_failure(format!("SASS metrics flush after a CUDA graph launch failed: {e}"));
                self.graphs.not_flushed(FLUSH_FAILED);
            }
        }
    }

    /// Makes sure the calling thread's context collects; `Err` says why it cannot.
    pub(super) fn collect_here(&mut self) -> std::result::Result<(), String> {
        if let Some(why) = &self.stopped {
            return Err(why.clone());
        }
        let ctx = quietly(|| current_context(&self.driver)).map_err(|e| e.to_string())?;
        let ctx = ctx.ok_or_else(|| "no current CUDA context".to_string())?;
        if self.collections.contains_key(&(ctx.as_raw() as usize)) {
            return Ok(());
        }
        let device = quietly(|| current_device(&self.driver)).map_err(|e| e.to_string())?;
        let cupti = self.cupti;
        if self.profiler.is_none() {
            let api = quietly(|| ProfilerApi::initialize(&cupti)).map_err(|e| e.to_string())?;
            self.profiler = Some(api);
        }
        let configured = self.devices.entry(device).or_insert_with(|| {
            let chip = chip_name(&cupti, device as usize).map_err(|e| e.to_string())?;
            let mut ids = [0u64; METRICS.len()];
            for (i, name) in METRICS.iter().enumerate() {
                ids[i] = sass_metrics::metric(&cupti, &chip, name).map_err(|e| e.to_string())?.id;
            }
            let config = SassConfig::set(&cupti, device as u32, &ids).map_err(|e| e.to_string())?;
            Ok((config, MetricIds(ids)))
        });
        let ids = match configured {
            Ok((_, ids)) => *ids,
            Err(e) => return Err(format!("SASS metrics could not be configured on device {device}: {e}")),
        };
        let collection = SassCollection::enable(&cupti, ctx).map_err(|e| e.to_string())?;
        self.collections.insert(ctx.as_raw() as usize, (collection, ids));
        Ok(())
    }

    /// Whether a launch of `function` is still within the quota (counting it if so).
    pub(super) fn take_quota(&mut self, function: usize) -> bool {
        let n = self.counted.entry(function).or_insert(0);
        if self.quota.is_some_and(|q| *n >= q) {
            self.over_quota += 1;
            return false;
        }
        *n += 1;
        true
    }

    /// Before a counted launch: if launches ran since the last flush, waits for them and
    /// flushes their counts apart, so the launch's flush holds only its own. An error when
    /// that cannot be done: the launch is not counted (its flush would hold their counts too).
    pub(super) fn before_counted_launch(&mut self) -> std::result::Result<(), String> {
        if !std::mem::replace(&mut self.dirty, false) {
            return Ok(());
        }
        let ctx = match quietly(|| current_context(&self.driver)) {
            Ok(Some(ctx)) => ctx,
            Ok(None) => return Ok(()),
            Err(e) => {
                self.dirty = true;
                let why = format!("the counts waiting in CUPTI could not be flushed apart: {e}");
                self.note_failure(why.clone());
                return Err(why);
            }
        };
        let key = ctx.as_raw() as usize;
        let Some((collection, ids)) = self.collections.get(&key) else { return Ok(()) };
        let ids = *ids;
        let started = Instant::now();
        let flushed = quietly(|| synchronize(&self.driver)).and_then(|()| quietly(|| collection.flush()));
        self.flushes += 1;
        self.flush_us += started.elapsed().as_secs_f64() * 1e6;
        let why = if std::mem::take(&mut self.flush_failed) { AFTER_FAILED_FLUSH } else { NOT_COUNTED };
        match flushed {
            Ok(records) => {
                let a = attribute(&records, &ids, "");
                self.unknown_values += a.unknown_values;
                self.keep_others(a.others, why);
                Ok(())
            }
            Err(e) => {
                (self.dirty, self.flush_failed) = (true, true);
                let why = format!("SASS metrics flush failed: {e}");
                self.note_failure(why.clone());
                Err(why)
            }
        }
    }

    /// After a launch's exit: waits for the context, flushes, and attributes the flush to
    /// the launch when it was a selected SASS launch. Returns that launch's record.
    pub(super) fn after_launch(
        &mut self,
        correlation_id: u32,
        result: Option<i32>,
        probes: &[ProbeSpec],
    ) -> Option<(usize, LaunchRecord)> {
        let pending = self.pending.remove(&correlation_id);
        let ctx = match quietly(|| current_context(&self.driver)) {
            Ok(ctx) => ctx?,
            Err(e) => {
                // Its counts (if it ran patched) wait in CUPTI: flushed apart before the next.
                self.dirty = true;
                let why = format!("the launch's context could not be read: {e}");
                self.note_failure(why.clone());
                let (function, _, launch) = pending?;
                return Some((function, LaunchRecord { status: format!("failed: {why}"), ..sass_record(&launch) }));
            }
        };
        let key = ctx.as_raw() as usize;
        self.collections.get(&key)?;
        let Some((function, mangled, launch)) = pending else {
            // Not counted: its counts wait for the next flush (no wait for it now).
            self.dirty = true;
            return None;
        };
        let started = Instant::now();
        // A flush that fails is tried once more: the counts wait in CUPTI, and a second flush
        // that works attributes them as the first would have.
        let mut recovered = None;
        let flushed = quietly(|| synchronize(&self.driver)).and_then(|()| {
            let (collection, _) = &self.collections[&key];
            quietly(|| collection.flush()).or_else(|first| match quietly(|| collection.flush()) {
                Ok(records) => {
                    recovered = Some(first.to_string());
                    Ok(records)
                }
                Err(_) => Err(first),
            })
        });
        if let Some(first) = recovered {
            self.note_failure(format!("SASS metrics flush: {first}; it worked when tried again, so nothing was lost"));
        }
        let us = started.elapsed().as_secs_f64() * 1e6;
        self.flushes += 1;
        self.flush_us += us;
        let ids = self.collections[&key].1;
        let records = match flushed {
            Ok(r) => r,
            Err(e) => {
                // The counts stay in CUPTI: the next counted launch flushes them apart first.
                (self.dirty, self.flush_failed) = (true, true);
                let why = format!("SASS metrics flush failed: {e}");
                self.note_failure(why.clone());
                let record = LaunchRecord { status: format!("failed: {why}"), readback_us: us, ..sass_record(&launch) };
                return Some((function, record));
            }
        };
        self.record_flush(&mangled, &records);
        let a = attribute(&records, &ids, &mangled);
        self.unknown_values += a.unknown_values;
        self.keep_others(a.others, NOT_HEARD);
        let mut record = LaunchRecord { readback_us: us, ..sass_record(&launch) };
        match (result, a.launch) {
            (Some(0), Some(counts)) => {
                record.status = "probed".into();
                record.totals = totals(&counts, probes);
                self.hot.add(&counts);
            }
            (Some(0), None) => {
                record.status = "failed: CUPTI counted nothing for the launch (its function was not patched)".into()
            }
            (r, _) => record.status = format!("failed: the launch returned CUresult {}", r.unwrap_or(-1)),
        }
        Some((function, record))
    }

    /// Appends a kernel's first flush to the dump file (`GMPROF_PROBE_SASS_DUMP`), once per
    /// kernel: `{"kernel": MANGLED, "records": [...]}` per line.
    fn record_flush(&mut self, mangled: &str, records: &[crate::model::sass::SassRecord]) {
        let Some(path) = &self.dump else { return };
        if !self.dumped.insert(mangled.to_string()) {
            return;
        }
        let line = serde_json::json!({ "kernel": mangled, "metrics": METRICS, "records": records });
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            self.note_failure(format!("{}: {e}", path.display()));
        }
    }

    fn keep_others(&mut self, others: Vec<KernelCounts>, why: &'static str) {
        for k in others {
            let n = k.total(crate::probe::sass::Counter::Instructions);
            let o = self.others.entry(k.function).or_insert(OtherCounts { why, ..Default::default() });
            o.flushes += 1;
            o.instructions += n;
        }
    }

    /// The end: a last flush of each context (its counts kept apart), collections disabled
    /// (dropped records counted) and configurations unset.
    pub(super) fn finish(&mut self) {
        let collections: Vec<(usize, (SassCollection, MetricIds))> = self.collections.drain().collect();
        for (_, (collection, ids)) in collections {
            let why = if std::mem::take(&mut self.flush_failed) { AFTER_FAILED_FLUSH } else { NOT_HEARD };
            match quietly(|| collection.flush()) {
                Ok(records) => {
                    let a = attribute(&records, &ids, "");
                    self.unknown_values += a.unknown_values;
                    self.keep_others(a.others, why);
                }
                Err(e) => self.note_failure(format!("the last SASS metrics flush failed: {e}")),
            }
            match quietly(|| collection.shutdown()) {
                Ok(dropped) => self.dropped += dropped,
                Err(e) => self.note_failure(format!("disabling SASS metrics failed: {e}")),
            }
        }
        let devices: Vec<_> = self.devices.drain().collect();
        for (_, configured) in devices {
            if let Ok((config, _)) = configured {
                if let Err(e) = quietly(|| config.shutdown()) {
                    self.note_failure(format!("unsetting SASS metrics failed: {e}"));
                }
            }
        }
    }
}

impl SassState {
    /// What went wrong, for the report: the failures noted, and cubins whose CRC could not be
    /// computed (known once [`SassState::source_lines`] ran).
    pub(super) fn all_failures(&self) -> Vec<String> {
        let note = self.crc_index.get().and_then(|(_, n)| n.clone()).map(|n| format!("source lines: {n}"));
        self.failures.iter().cloned().chain(note).collect()
    }
}

// The cubins of the modules loaded while the SASS path is on, for the source lines of the
// hottest instructions: kept by the shared store.
pub(super) use crate::capture::cubins::CUBINS;

impl SassState {
    /// The file and line of each `(function, cubin CRC, instruction offset)`, where a kept
    /// cubin of that CRC has line information for it.
    pub(super) fn source_lines(&self, wanted: &[(String, u32, u32)]) -> HashMap<(String, u32, u32), (String, u32)> {
        let store = CUBINS.lock();
        // The CRCs once (the outputs are taken twice at the end: for the report and for the
        // probe files), after the last module was loaded.
        let (by_crc, _) = self.crc_index.get_or_init(|| {
            let (by_crc, note) = crate::capture::cubins::crc_index(&self.cupti, &store);
            (by_crc.into_iter().map(|(crc, i)| (crc as u32, i)).collect(), note)
        });
        let mut out = HashMap::new();
        for (function, crc, pc) in wanted {
            let Some(&i) = by_crc.get(crc) else { continue };
            if let Ok(Some(at)) = sass_metrics::source_line(&self.cupti, &store.cubins[i], function, *pc) {
                out.insert((function.clone(), *crc, *pc), at);
            }
        }
        out
    }
}

/// The probe fields SASS metrics give for `probes` (the built-ins that have them).
pub(super) fn totals(counts: &KernelCounts, probes: &[ProbeSpec]) -> Vec<ProbeTotal> {
    let records = counts.pcs.len() as u64;
    counts
        .totals(probes.iter().map(|p| p.name.as_str()))
        .into_iter()
        .map(|(probe, field, total)| ProbeTotal { probe, field, total, records })
        .collect()
}

fn sass_record(launch: &Launch) -> LaunchRecord {
    LaunchRecord { source: Some(SASS_SOURCE.into()), ..launch_record(launch) }
}

pub use super::launch::{PTX_SOURCE, SASS_SOURCE};
