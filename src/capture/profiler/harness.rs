//! A session with no GPU behind it, for the launch-path benchmark (`benches/launch_path.rs`,
//! feature `bench-internals`) and CPU tests of the capture path; not part of the API.
//!
//! Layer 3. CUPTI's callback trampoline, the hub's routing and the session's launch callbacks
//! run exactly as they do inside a program's CUDA calls, on callback data made up here: a
//! driver launch is an enter and an exit of `cuLaunchKernel`, a runtime launch wraps those in
//! `cudaLaunchKernel`'s; a memcpy or memset is its API call's enter and exit with the
//! parameter structure CUDA passes. CUPTI and the driver are stand-ins whose functions are
//! all missing; the launch path never calls them. Without counters, so a kernel_replay
//! harness is for transfers only. Each launch's stamp reads `CLOCK_MONOTONIC_RAW` in place
//! of `cuptiGetTimestamp` ([`LaunchClock::monotonic_stand_in`]), so the stamp is part of the
//! cost measured; CUPTI's own timestamp may cost more or less.
//! [`LaunchHarness::finish`] runs the session's finish
//! through calls scripted by [`Faults`] in place of the synchronize, the CUPTI clock and the
//! activity flush, as a context failed by the program's own CUDA error answers them.

use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::finish::{FinishCalls, Teardown};
use super::state::{Capture, Profiler, ReplayState, SessionState, Shared};
use crate::capture::hub::{BenchRoute, CaptureSession, HubMembership};
use crate::checked::activity::{ActivityRecord, LaunchClock};
use crate::checked::callback::{ApiDomain, BenchCall, BenchTrampoline, CallbackSite};
use crate::checked::driver::Context;
use crate::checked::{Cupti, Driver};
use crate::error::{Error, Result};
use crate::model::{
    ClockPair, CounterRange, DevicePeaks, MetricKind, MetricSet, MetricSpec, ProfilingMode, RunEnd, ThreadId,
    TransferActivity, GPU_TIME_METRIC,
};
use crate::report::Report;
use crate::sys::cupti::{
    CUpti_driver_api_trace_cbid_enum as DriverCbid, CUpti_runtime_api_trace_cbid_enum as RuntimeCbid,
};

/// Context ids harnesses route under (no real context has them), one per harness, so that
/// harnesses on several threads (tests) do not hear each other.
static NEXT_CONTEXT_ID: AtomicU32 = AtomicU32::new(u32::MAX - 7);
/// The device ordinal a harness session reports for untimed transfers.
pub const DEVICE_ID: u32 = 0;
/// `CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel`.
const CU_LAUNCH_KERNEL: u32 = 307;
/// `CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000`.
const CUDA_LAUNCH_KERNEL: u32 = 211;
/// `CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000`.
const CUDA_GRAPH_LAUNCH: u32 = 311;
/// `CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch`.
const CU_GRAPH_LAUNCH: u32 = 514;
/// The kernel [`LaunchHarness::launch`] names: a typical mangled CUDA C++ name.
const BENCH_KERNEL: &CStr = c"_Z21gemm_bias_relu_kernelPKfS0_S0_Pfiii";

/// Memcpy callbacks the harness's trampoline knows as transfers (memsets: all of them).
const MEMCPYS: [DriverCbid; 2] =
    [DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2];
/// Runtime memcpy callbacks the trampoline knows as transfers.
const RUNTIME_MEMCPYS: [RuntimeCbid; 2] = [
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
];

/// One memcpy or memset API call as a program makes it: the function and its parameters.
#[derive(Clone, Copy, Debug)]
pub struct TransferApi {
    /// Driver or runtime.
    pub domain: ApiDomain,
    /// The callback id.
    pub cbid: u32,
    /// CUPTI's name of the function.
    pub name: &'static CStr,
    /// The parameter structure CUDA passes for it (`cuMemsetD8_v2_params`, ...), or NULL.
    pub params: *mut c_void,
}

/// The errors [`LaunchHarness::finish`]'s calls return; `None` succeeds.
#[derive(Debug, Default)]
pub struct Faults {
    /// What `cuCtxSynchronize` returns.
    pub synchronize: Option<Error>,
    /// What `cuptiGetTimestamp` returns.
    pub timestamp: Option<Error>,
    /// What `cuptiActivityFlushAll` returns; a flush that failed fails again when tried
    /// again, as on a failed context.
    pub activity_flush: Option<Error>,
    /// Records the flush delivers before it returns (those CUPTI still held).
    pub flushed_records: Vec<ActivityRecord>,
}

/// [`Faults`] as the finish's calls.
struct ScriptedCalls {
    faults: RefCell<Faults>,
    session: Arc<Shared>,
    clock: u64,
    /// The flush failed: every later one fails too.
    flush_failed: std::cell::Cell<bool>,
}

impl FinishCalls for ScriptedCalls {
    fn make_current(&self, _context: Context) -> Result<()> {
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        self.faults.borrow_mut().synchronize.take().map_or(Ok(()), Err)
    }

    fn timestamp(&self) -> Result<u64> {
        self.faults.borrow_mut().timestamp.take().map_or(Ok(self.clock), Err)
    }

    fn flush_activity(&self, _membership: Option<&HubMembership>) -> Result<()> {
        let records = std::mem::take(&mut self.faults.borrow_mut().flushed_records);
        if !records.is_empty() {
            self.session.on_records(records);
        }
        if self.flush_failed.get() {
            return Err(Error::InvalidState("the activity flush failed again".into()));
        }
        let failed = self.faults.borrow_mut().activity_flush.take();
        self.flush_failed.set(failed.is_some());
        failed.map_or(Ok(()), Err)
    }
}

/// A session fed with made-up launch and transfer callbacks.
#[must_use = "the session is routed only while the harness lives"]
pub struct LaunchHarness {
    shared: Arc<Shared>,
    context_id: u32,
    trampoline: BenchTrampoline,
    /// The hub's route to the session, removed when the harness is dropped.
    _route: BenchRoute,
    next_correlation: u32,
    clock: u64,
    /// Scripted counter cycles handed to the evaluator and not evaluated yet, oldest first.
    in_evaluation: std::collections::VecDeque<(u32, Vec<CounterRange>)>,
    /// Scripted counter cycles evaluated, for the next drain (or the finish).
    evaluated: Vec<(u32, Vec<CounterRange>)>,
    /// How long each call takes on the scripted clock (0: the clock stands still).
    call_ns: u64,
}

impl std::fmt::Debug for LaunchHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchHarness").field("next_correlation", &self.next_correlation).finish_non_exhaustive()
    }
}

impl LaunchHarness {
    /// A trace-mode session, routed by the hub.
    pub fn trace() -> Result<LaunchHarness> {
        Self::new(ProfilingMode::Trace)
    }

    /// A session of `mode` (without counters), routed by the hub.
    pub fn new(mode: ProfilingMode) -> Result<LaunchHarness> {
        Self::started_at(mode, 0)
    }

    /// A session of `mode` whose start, on CUPTI's clock, is `cupti_ns`: an on-demand
    /// capture starts long after the process's first kernel.
    pub fn started_at(mode: ProfilingMode, cupti_ns: u64) -> Result<LaunchHarness> {
        Self::with_clock(mode, cupti_ns, LaunchClock::monotonic_stand_in())
    }

    /// A trace session whose launches are stamped by the GPU time line the test scripts
    /// ([`LaunchClock::set_scripted`] on the launching thread), as CUPTI stamps them on the
    /// clock of the kernels' records: a kernel starts after its launch's stamp.
    pub fn trace_on_scripted_clock() -> Result<LaunchHarness> {
        Self::with_clock(ProfilingMode::Trace, 0, LaunchClock::scripted())
    }

    /// [`LaunchHarness::trace_on_scripted_clock`] with API calls timed, as
    /// [`ProfilerBuilder::time_api_calls`](super::ProfilerBuilder::time_api_calls) asks: each
    /// launch, memcpy and memset call returns `call_ns` after it was made, on the scripted
    /// clock.
    pub fn trace_timing_calls(call_ns: u64) -> Result<LaunchHarness> {
        let mut h = Self::with_options(ProfilingMode::Trace, 0, LaunchClock::scripted(), true)?;
        h.call_ns = call_ns;
        Ok(h)
    }

    /// [`LaunchHarness::trace`] with API calls timed, as a Kineto `trace.json` asks: what
    /// the launch path costs then (each stamp reads `CLOCK_MONOTONIC_RAW`).
    pub fn trace_timed() -> Result<LaunchHarness> {
        Self::with_options(ProfilingMode::Trace, 0, LaunchClock::monotonic_stand_in(), true)
    }

    fn with_clock(mode: ProfilingMode, cupti_ns: u64, launch_clock: LaunchClock) -> Result<LaunchHarness> {
        Self::with_options(mode, cupti_ns, launch_clock, false)
    }

    fn with_options(
        mode: ProfilingMode,
        cupti_ns: u64,
        launch_clock: LaunchClock,
        time_api_calls: bool,
    ) -> Result<LaunchHarness> {
        let context_id = NEXT_CONTEXT_ID.fetch_sub(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            launch_clock,
            cupti: Cupti::stand_in()?,
            driver: Driver::stand_in()?,
            clock_start: ClockPair { cupti_ns, unix_ns: 0 },
            memsets_unread: std::sync::atomic::AtomicU64::new(0),
            skipped_waits: Default::default(),
            rotation_stall_ns: std::sync::atomic::AtomicU64::new(0),
            device_id: Some(DEVICE_ID),
            context_id,
            mode,
            metric_set: harness_metrics(mode),
            metric_names: harness_metrics(mode).metrics.into_iter().map(|m| m.name).collect(),
            passes: 0,
            flush_on_range_boundaries: false,
            synchronize_on_pop: false,
            range_scope: super::scope::RangeScope::Process,
            device_name: "stand-in".into(),
            chip: String::new(),
            device_peaks: DevicePeaks::default(),
            driver_version: None,
            started_unix_ns: 0,
            capture: Mutex::new(Some(Capture {
                membership: None,
                counters: None,
                _primary: None,
                context: Context(std::ptr::null_mut()),
            })),
            state: Mutex::new(SessionState::new()),
            incoming: Arc::new(Mutex::new(Vec::new())),
            launch_gate: Mutex::new(()),
            finished: std::sync::atomic::AtomicBool::new(false),
            sealed: std::sync::atomic::AtomicBool::new(false),
            replay: Mutex::new(ReplayState::default()),
            iteration_range: None,
            pm: Mutex::new(None),
            pc: Mutex::new(None),
            self_time_at_start: None,
            stamps_missed_at_start: 0,
            time_api_calls,
            call_stamps_missed: std::sync::atomic::AtomicU64::new(0),
            call_stamp_error: std::sync::atomic::AtomicU32::new(0),
        });
        let session: Arc<dyn CaptureSession> = shared.clone();
        let route = BenchRoute::add(context_id, Arc::downgrade(&session));
        let driver_transfers = MEMCPYS.iter().map(|c| c.0).chain(crate::checked::memset::cbids(ApiDomain::Driver));
        let runtime_transfers =
            RUNTIME_MEMCPYS.iter().map(|c| c.0).chain(crate::checked::memset::cbids(ApiDomain::Runtime));
        let trampoline = BenchTrampoline::with_transfers(
            shared.cupti,
            BenchRoute::handler(),
            driver_transfers.collect(),
            runtime_transfers.collect(),
        );
        Ok(LaunchHarness {
            shared,
            context_id,
            trampoline,
            _route: route,
            next_correlation: 1,
            clock: cupti_ns + 1,
            in_evaluation: Default::default(),
            evaluated: Vec::new(),
            call_ns: 0,
        })
    }

    /// Turns per_kernel rotation on, as [`ProfilerBuilder::rotate`] and
    /// [`ProfilerBuilder::rotation_step`] do (before the first launch).
    ///
    /// [`ProfilerBuilder::rotate`]: super::ProfilerBuilder::rotate
    /// [`ProfilerBuilder::rotation_step`]: super::ProfilerBuilder::rotation_step
    pub fn rotate(&self, every: super::rotation::Every, step: Option<&str>) {
        let glob = step.map(|s| glob::Pattern::new(s).expect("a valid step glob"));
        self.shared.state.lock().rotation = Some(super::rotation::Rotation::new(every, glob, false));
    }

    /// Opens a range on the calling thread.
    pub fn push_range(&mut self, name: &str) -> Result<()> {
        self.clock += 1;
        self.shared.open_user_range(name, thread(), self.clock).map(|_| ())
    }

    /// Closes the calling thread's innermost range.
    pub fn pop_range(&mut self) -> Result<()> {
        self.clock += 1;
        self.shared.close_user_range(None, thread(), self.clock)
    }

    /// Sets the session's clock (push and pop times), e.g. to drive two sessions of one
    /// process, as the injection does, on one time line.
    pub fn set_clock(&mut self, ns: u64) {
        self.clock = ns;
    }

    /// Sets the next launch's correlation id: CUPTI numbers calls process-wide, so two
    /// sessions of one process never share one.
    pub fn set_next_correlation(&mut self, id: u32) {
        self.next_correlation = id;
    }

    /// The context id the session's records carry.
    pub fn context_id(&self) -> u32 {
        self.context_id
    }

    /// One kernel launch: `cuLaunchKernel`'s enter and exit, inside `cudaLaunchKernel`'s
    /// when `runtime`, of a kernel with a typical mangled name.
    pub fn launch(&mut self, runtime: bool) {
        self.launch_kernel(runtime, BENCH_KERNEL);
    }

    /// One launch of kernel `symbol` (CUPTI's `symbolName`), as [`LaunchHarness::launch`];
    /// returns its correlation id (the outer call's, which activity records carry).
    pub fn launch_kernel(&mut self, runtime: bool, symbol: &'static CStr) -> u32 {
        let outer = self.next_correlation;
        self.next_correlation += if runtime { 2 } else { 1 };
        let call = |domain, cbid, site, correlation_id, name| {
            self.launch_callback(domain, cbid, site, correlation_id, name, Some(symbol));
        };
        if runtime {
            call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Enter, outer, c"cudaLaunchKernel");
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Enter, outer + 1, c"cuLaunchKernel");
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Exit, outer + 1, c"cuLaunchKernel");
            self.call_returns();
            call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Exit, outer, c"cudaLaunchKernel");
        } else {
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Enter, outer, c"cuLaunchKernel");
            self.call_returns();
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Exit, outer, c"cuLaunchKernel");
        }
        outer
    }

    /// The scripted clock moves on by a call's duration before the call returns.
    fn call_returns(&self) {
        if self.call_ns > 0 {
            LaunchClock::set_scripted(LaunchClock::scripted_now() + self.call_ns);
        }
    }

    /// One launch into a capturing stream: as [`LaunchHarness::launch_kernel`], but the driver
    /// call creates a kernel node of graph `graph_id` (CUPTI's resource callback, between the
    /// call's enter and exit), so the launch built a graph and ran nothing. Returns its
    /// correlation id.
    pub fn launch_captured(&mut self, runtime: bool, graph_id: u32) -> u32 {
        let outer = self.next_correlation;
        self.next_correlation += if runtime { 2 } else { 1 };
        let inner = if runtime { outer + 1 } else { outer };
        let call = |domain, cbid, site, correlation_id, name| {
            self.launch_callback(domain, cbid, site, correlation_id, name, Some(BENCH_KERNEL));
        };
        if runtime {
            call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Enter, outer, c"cudaLaunchKernel");
        }
        call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Enter, inner, c"cuLaunchKernel");
        crate::capture::hub::node_created(graph_id, u64::from(inner), 0);
        call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Exit, inner, c"cuLaunchKernel");
        if runtime {
            call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Exit, outer, c"cudaLaunchKernel");
        }
        outer
    }

    /// The first launch of a program, whose runtime call creates the context it runs in: the
    /// runtime call's enter comes before the context (and the session) exists, so it names
    /// context 0; the driver call inside it and both exits name the session's context.
    /// Returns the driver call's correlation id, the one the launch is recorded under.
    pub fn launch_creating_context(&mut self) -> u32 {
        let outer = self.next_correlation;
        self.next_correlation += 2;
        let call = |domain, cbid, site, correlation_id, name, context_uid| {
            self.trampoline.call_with(&BenchCall {
                domain,
                cbid,
                site,
                correlation_id,
                context_uid,
                function_name: name,
                params: std::ptr::null_mut(),
                result: None,
                symbol_name: Some(BENCH_KERNEL),
            });
        };
        let ctx = self.context_id;
        call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Enter, outer, c"cudaLaunchKernel", 0);
        call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Enter, outer + 1, c"cuLaunchKernel", ctx);
        call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Exit, outer + 1, c"cuLaunchKernel", ctx);
        call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Exit, outer, c"cudaLaunchKernel", ctx);
        outer + 1
    }

    /// One CUDA graph launch through the runtime (`cudaGraphLaunch` around `cuGraphLaunch`,
    /// which CUPTI gives no kernel name); returns its correlation id.
    pub fn launch_graph(&mut self) -> u32 {
        let outer = self.next_correlation;
        self.next_correlation += 2;
        let call = |domain, cbid, site, correlation_id, name| {
            self.launch_callback(domain, cbid, site, correlation_id, name, None);
        };
        call(ApiDomain::Runtime, CUDA_GRAPH_LAUNCH, CallbackSite::Enter, outer, c"cudaGraphLaunch");
        call(ApiDomain::Driver, CU_GRAPH_LAUNCH, CallbackSite::Enter, outer + 1, c"cuGraphLaunch");
        call(ApiDomain::Driver, CU_GRAPH_LAUNCH, CallbackSite::Exit, outer + 1, c"cuGraphLaunch");
        call(ApiDomain::Runtime, CUDA_GRAPH_LAUNCH, CallbackSite::Exit, outer, c"cudaGraphLaunch");
        outer
    }

    /// One launch API callback, naming `symbol` as CUPTI's `symbolName`.
    fn launch_callback(
        &self,
        domain: ApiDomain,
        cbid: u32,
        site: CallbackSite,
        correlation_id: u32,
        function_name: &'static CStr,
        symbol_name: Option<&'static CStr>,
    ) {
        self.trampoline.call_with(&BenchCall {
            domain,
            cbid,
            site,
            correlation_id,
            context_uid: self.context_id,
            function_name,
            params: std::ptr::null_mut(),
            result: None,
            symbol_name,
        });
    }

    /// The activity record of a kernel of this harness's context that ran from `start_ns` to
    /// `end_ns` on stream 7, launched under `correlation_id` (for a runtime launch, the inner
    /// driver call's id, as CUPTI gives it).
    pub fn kernel_record(&self, correlation_id: u32, name: &str, start_ns: u64, end_ns: u64) -> ActivityRecord {
        self.kernel_record_on(DEVICE_ID, correlation_id, name, start_ns, end_ns)
    }

    /// [`LaunchHarness::kernel_record`] on device `device_id`.
    pub fn kernel_record_on(
        &self,
        device_id: u32,
        correlation_id: u32,
        name: &str,
        start_ns: u64,
        end_ns: u64,
    ) -> ActivityRecord {
        ActivityRecord::Kernel(crate::model::KernelActivity {
            correlation_id,
            name: name.into(),
            grid: [1024, 1, 1],
            block: [256, 1, 1],
            stream_id: 7,
            context_id: self.context_id,
            device_id,
            start_ns,
            end_ns,
            ..Default::default()
        })
    }

    /// Activity records arriving for the session, as CUPTI's buffer callback delivers them
    /// (they carry the inner driver call's correlation id for a runtime launch).
    pub fn deliver(&self, records: Vec<ActivityRecord>) {
        self.shared.on_records(records);
    }

    /// A PM sampler with no GPU behind it ([`PmSession::scripted`]): the test keeps samples
    /// in the returned capture as the decode thread does (its `samples`, in time order); a
    /// drain takes them, the finish takes what is left.
    ///
    /// [`PmSession::scripted`]: crate::capture::pm_sampling::PmSession::scripted
    pub fn with_pm_sampler(
        &self,
        metrics: Vec<crate::model::pm::PmMetric>,
    ) -> Result<Arc<Mutex<crate::model::pm::PmCapture>>> {
        let kept = Arc::new(Mutex::new(crate::model::pm::PmCapture { metrics, ..Default::default() }));
        let session = crate::capture::pm_sampling::PmSession::scripted(Arc::clone(&kept))?;
        *self.shared.pm.lock() = Some(session);
        Ok(kept)
    }

    /// A PC sampler with no CUPTI behind it, listing `reasons`: the test keeps records in the
    /// returned capture as the sampler's drain thread does.
    pub fn with_pc_sampler(
        &self,
        reasons: Vec<crate::model::pc::PcStallReason>,
    ) -> Result<Arc<Mutex<crate::model::pc::PcCapture>>> {
        let kept = Arc::new(Mutex::new(crate::model::pc::PcCapture { reasons, ..Default::default() }));
        let session = crate::capture::pc_sampling::PcSession::scripted(Arc::clone(&kept))?;
        *self.shared.pc.lock() = Some(session);
        Ok(kept)
    }

    /// Ends the PM sampler's decoding now, as a decode thread that stopped mid-run
    /// ([`PmSession::end_decoding`]).
    ///
    /// [`PmSession::end_decoding`]: crate::capture::pm_sampling::PmSession::end_decoding
    pub fn end_pm_decoding(&self) {
        if let Some(session) = self.shared.pm.lock().as_ref() {
            session.end_decoding();
        }
    }

    /// per_range: the nesting levels CUPTI measures, as a capture's counter configuration
    /// gives them to a streamed run (the harness has no capture); call it after
    /// [`Profiler::stream_into`].
    pub fn measure_levels(&self, levels: u16) {
        if let Some(s) = self.shared.state.lock().stream.as_deref_mut() {
            s.measured_levels = Some(levels);
        }
    }

    /// The session as a [`Profiler`] (its range, stream and checkpoint calls).
    pub fn profiler(&self) -> Profiler {
        Profiler { shared: Arc::clone(&self.shared) }
    }

    /// One streaming step as [`Profiler::stream_tick`] takes it, without CUPTI's flush: the
    /// records delivered so far are drained into the session, the scripted counter cycles
    /// evaluated so far go to it ([`LaunchHarness::evaluate_counter_cycles`]), then it is
    /// streamed past the limit.
    pub fn stream_step(&mut self) -> super::stream::StreamProgress {
        self.shared.drain_activity();
        let settled = self.settle_counter_cycles();
        let progress = self.shared.stream_step(std::time::Instant::now(), settled, 0);
        self.shared.live_health();
        progress
    }

    /// The scripted counter side of a counter mode: ends the counter cycle being filled, as
    /// a full image does: its counter ranges (per_kernel: one per launch of the cycle, named
    /// by its correlation id; per_range: one per range, named [`range_counter_name`]) go to
    /// the evaluator, valued by `value` (`None`: the range is not in the image, its counters
    /// missing) from a key that does not depend on streaming: the correlation id, or the
    /// range's `path#instance`. Launches and ranges from now on are the next cycle's.
    ///
    /// [`range_counter_name`]: crate::analysis::correlate::range_counter_name
    pub fn end_counter_cycle(&mut self, value: impl Fn(&str) -> Option<f64>) {
        let mut state = self.shared.state.lock();
        let cycle = state.uncounted_cycle;
        let named: Vec<(String, String)> = match self.shared.mode {
            ProfilingMode::PerRange => state
                .correlator
                .ranges_in_counter_cycle(cycle)
                .into_iter()
                .filter_map(|id| {
                    let node = state.tree.get(id)?;
                    Some((
                        crate::analysis::correlate::range_counter_name(id),
                        format!("{}#{}", node.path, node.instance),
                    ))
                })
                .collect(),
            _ => state
                .correlator
                .launches()
                .iter()
                .filter(|l| l.cycle == cycle && !l.unmeasured)
                .map(|l| (l.correlation_id.to_string(), l.correlation_id.to_string()))
                .collect(),
        };
        let metrics = self.shared.metric_set.metrics.len();
        let ranges = named
            .into_iter()
            .enumerate()
            .filter_map(|(index, (name, key))| {
                let v = value(&key)?;
                Some(CounterRange { cycle, index: index as u32, name, values: vec![v; metrics] })
            })
            .collect();
        self.in_evaluation.push_back((cycle, ranges));
        state.uncounted_cycle += 1;
    }

    /// The scripted evaluator finishes the `n` oldest cycles handed to it.
    pub fn evaluate_counter_cycles(&mut self, n: usize) {
        for _ in 0..n.min(self.in_evaluation.len()) {
            self.evaluated.extend(self.in_evaluation.pop_front());
        }
    }

    /// The scripted counters evaluated so far go to the session; returns the first cycle
    /// whose counters are not known yet (`None` in trace mode).
    fn settle_counter_cycles(&mut self) -> Option<u32> {
        if self.shared.mode == ProfilingMode::Trace {
            return None;
        }
        let mut state = self.shared.state.lock();
        for (cycle, ranges) in self.evaluated.drain(..) {
            state.correlator.add_counter_ranges(cycle, ranges);
        }
        Some(self.in_evaluation.front().map_or(state.uncounted_cycle, |c| c.0))
    }

    /// Nested driver correlation ids the session maps to their runtime call.
    pub fn aliases_held(&self) -> usize {
        let state = self.shared.state.lock();
        state.aliases.len() + state.alias_log.len()
    }

    /// Ends the session's window ([`Profiler::seal`]).
    pub fn seal(&self) {
        Profiler { shared: Arc::clone(&self.shared) }.seal();
    }

    /// Finishes the session as [`Profiler::finish_with`] does, with the synchronize, the
    /// CUPTI clock and the activity flush answered by `faults`.
    pub fn finish(mut self, run_end: RunEnd, faults: Faults) -> Result<Report> {
        // The scripted evaluator finishes every cycle handed to it, as the finish waits for it.
        self.evaluate_counter_cycles(usize::MAX);
        self.settle_counter_cycles();
        let calls = ScriptedCalls {
            faults: RefCell::new(faults),
            session: Arc::clone(&self.shared),
            clock: self.clock + 1,
            flush_failed: std::cell::Cell::new(false),
        };
        let profiler = Profiler { shared: Arc::clone(&self.shared) };
        profiler.finish_through(run_end, Teardown::Release, &calls, |_| {})
    }

    /// One memcpy or memset: `outer`'s enter and exit, with `inner`'s (the driver call a
    /// runtime call makes) between them; the outer call returns `result`. Returns the
    /// correlation ids of the outer and the inner call.
    pub fn transfer(&mut self, outer: TransferApi, inner: Option<TransferApi>, result: i32) -> (u32, Option<u32>) {
        let outer_id = self.next_correlation;
        let inner_id = inner.map(|_| outer_id + 1);
        self.next_correlation += if inner.is_some() { 2 } else { 1 };
        let call = |api: &TransferApi, site, correlation_id, result| {
            self.trampoline.call_with(&BenchCall {
                domain: api.domain,
                cbid: api.cbid,
                site,
                correlation_id,
                context_uid: self.context_id,
                function_name: api.name,
                params: api.params,
                result,
                symbol_name: None,
            });
        };
        call(&outer, CallbackSite::Enter, outer_id, None);
        if let (Some(api), Some(id)) = (inner.as_ref(), inner_id) {
            call(api, CallbackSite::Enter, id, None);
            call(api, CallbackSite::Exit, id, Some(result));
        }
        self.call_returns();
        call(&outer, CallbackSite::Exit, outer_id, Some(result));
        (outer_id, inner_id)
    }

    /// Memcpy and memset activity records, delivered as CUPTI's buffer callback delivers
    /// them, then drained into the session as a flush does.
    pub fn transfer_activity(&mut self, records: Vec<TransferActivity>) {
        let records = records.into_iter().map(ActivityRecord::Transfer).collect();
        crate::capture::hub::CaptureSession::on_records(&*self.shared, records);
        self.shared.drain_activity();
    }

    /// The report of what the session recorded, through the session's own finish with
    /// nothing failing (a program that exited normally).
    pub fn report(self) -> Report {
        self.finish(RunEnd::Finished { by: "process exit".into() }, Faults::default())
            .expect("a harness session with no faults finishes")
    }

    /// Launches the session recorded, and the inner ids it mapped to their outer call.
    pub fn recorded(&self) -> (usize, usize) {
        let state = self.shared.state.lock();
        (state.correlator.launch_count(), state.aliases.len() + state.alias_log.len())
    }

    /// Calls whose stamps the session holds (a session that times API calls).
    pub fn stamped_calls(&self) -> usize {
        self.shared.state.lock().correlator.call_stamp_count()
    }

    /// Whether no launch holds the kernel-replay launch gate.
    pub fn gate_is_free(&self) -> bool {
        self.shared.launch_gate.try_lock().is_some()
    }

    /// Each recorded launch's correlation id and ordinal, in launch order.
    pub fn launch_ordinals(&self) -> Vec<(u32, u32)> {
        let state = self.shared.state.lock();
        state.correlator.launches().iter().map(|l| (l.correlation_id, l.ordinal)).collect()
    }

    /// The range the session attributes the calling thread's next launch to, by path.
    pub fn current_range(&self) -> Option<String> {
        let state = self.shared.state.lock();
        let id = self.shared.attribute(&state.tree, thread())?;
        state.tree.get(id).map(|n| n.path.clone())
    }
}

/// A counter mode's session always collects the GPU time; trace mode collects nothing.
fn harness_metrics(mode: ProfilingMode) -> MetricSet {
    let time = MetricSpec {
        name: GPU_TIME_METRIC.into(),
        kind: MetricKind::Counter,
        unit: "nsecond".into(),
        description: "GPU time".into(),
    };
    MetricSet { metrics: if mode == ProfilingMode::Trace { Vec::new() } else { vec![time] } }
}

fn thread() -> ThreadId {
    super::launch::current_thread_id()
}
