//! A session with no GPU behind it, for the launch-path benchmark (`benches/launch_path.rs`,
//! feature `bench-internals`; not part of the API) and the CPU tests of the launch path and
//! of finishing.
//!
//! Layer 3. CUPTI's callback trampoline, the hub's routing and the session's launch callbacks
//! run exactly as they do inside a program's CUDA calls, on callback data made up here: a
//! driver launch is an enter and an exit of `cuLaunchKernel`, a runtime launch wraps those in
//! `cudaLaunchKernel`'s. CUPTI and the driver are stand-ins whose functions are all missing;
//! the launch path never calls them. [`LaunchHarness::finish`] runs the session's finish
//! through calls scripted by [`Faults`] in place of the synchronize, the CUPTI clock and the
//! activity flush, as a context failed by the program's own CUDA error answers them.

use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::finish::FinishCalls;
use super::{Capture, Profiler, ReplayState, SessionState, Shared, Teardown};
use crate::capture::hub::{BenchRoute, CaptureSession, HubMembership};
use crate::checked::activity::ActivityRecord;
use crate::checked::callback::{ApiDomain, BenchTrampoline, CallbackSite};
use crate::checked::driver::Context;
use crate::checked::{Cupti, Driver};
use crate::error::{Error, Result};
use crate::model::{ClockPair, DevicePeaks, MetricSet, ProfilingMode, RunEnd, ThreadId};
use crate::report::Report;

/// Context ids the harnesses route under, one each (no real context has them), so that
/// harnesses of tests running side by side never hear each other's launches.
static NEXT_CONTEXT_ID: AtomicU32 = AtomicU32::new(u32::MAX - 7);
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

/// A session fed with made-up launch callbacks.
#[must_use = "the session is routed only while the harness lives"]
pub struct LaunchHarness {
    shared: Arc<Shared>,
    trampoline: BenchTrampoline,
    /// The hub's route to the session, removed when the harness is dropped.
    _route: BenchRoute,
    context_id: u32,
    next_correlation: u32,
    clock: u64,
}

/// The errors [`LaunchHarness::finish`]'s calls return; `None` succeeds.
#[derive(Debug, Default)]
pub struct Faults {
    /// What `cuCtxSynchronize` returns.
    pub synchronize: Option<Error>,
    /// What `cuptiGetTimestamp` returns.
    pub timestamp: Option<Error>,
    /// What `cuptiActivityFlushAll` returns.
    pub activity_flush: Option<Error>,
    /// Records the flush delivers before it returns (those CUPTI still held).
    pub flushed_records: Vec<ActivityRecord>,
}

/// [`Faults`] as the finish's calls.
struct ScriptedCalls {
    faults: RefCell<Faults>,
    session: Arc<Shared>,
    clock: u64,
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
        self.faults.borrow_mut().activity_flush.take().map_or(Ok(()), Err)
    }
}

impl std::fmt::Debug for LaunchHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchHarness").field("next_correlation", &self.next_correlation).finish_non_exhaustive()
    }
}

impl LaunchHarness {
    /// A trace-mode session, routed by the hub.
    pub fn trace() -> Result<LaunchHarness> {
        Self::with_mode(ProfilingMode::Trace)
    }

    /// A session of `mode` without counters (no range profiler stands in): the launch path
    /// of the mode, with kernel replay's launch gate; the kernels get no counter values.
    pub fn with_mode(mode: ProfilingMode) -> Result<LaunchHarness> {
        let context_id = NEXT_CONTEXT_ID.fetch_sub(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            cupti: Cupti::stand_in()?,
            driver: Driver::stand_in()?,
            clock_start: ClockPair { cupti_ns: 0, unix_ns: 0 },
            launches: std::sync::atomic::AtomicU32::new(0),
            memsets_untraced: std::sync::atomic::AtomicU64::new(0),
            mode,
            metric_set: MetricSet::default(),
            metric_names: Vec::new(),
            passes: 0,
            flush_on_range_boundaries: false,
            synchronize_on_pop: false,
            range_scope: super::RangeScope::Process,
            device_name: "stand-in".into(),
            chip: String::new(),
            device_peaks: DevicePeaks::default(),
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
            replay: Mutex::new(ReplayState::default()),
            iteration_range: None,
            pm: Mutex::new(None),
            self_time_at_start: None,
        });
        let session: Arc<dyn CaptureSession> = shared.clone();
        let route = BenchRoute::add(context_id, Arc::downgrade(&session));
        let trampoline = BenchTrampoline::new(shared.cupti, BenchRoute::handler(), context_id);
        Ok(LaunchHarness { shared, trampoline, _route: route, context_id, next_correlation: 1, clock: 1 })
    }

    /// The context id the session's records carry.
    pub fn context_id(&self) -> u32 {
        self.context_id
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

    /// One kernel launch: `cuLaunchKernel`'s enter and exit, inside `cudaLaunchKernel`'s
    /// when `runtime`, of a kernel with a typical mangled name.
    pub fn launch(&mut self, runtime: bool) {
        self.launch_kernel(runtime, BENCH_KERNEL);
    }

    /// One launch of kernel `symbol` (CUPTI's `symbolName`), as [`LaunchHarness::launch`];
    /// returns its correlation id (the outer call's, which activity records carry).
    pub fn launch_kernel(&mut self, runtime: bool, symbol: &CStr) -> u32 {
        let outer = self.next_correlation;
        self.next_correlation += if runtime { 2 } else { 1 };
        let call = |domain, cbid, site, correlation_id, name| {
            self.trampoline.call(domain, cbid, site, correlation_id, name, Some(symbol));
        };
        if runtime {
            call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Enter, outer, c"cudaLaunchKernel");
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Enter, outer + 1, c"cuLaunchKernel");
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Exit, outer + 1, c"cuLaunchKernel");
            call(ApiDomain::Runtime, CUDA_LAUNCH_KERNEL, CallbackSite::Exit, outer, c"cudaLaunchKernel");
        } else {
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Enter, outer, c"cuLaunchKernel");
            call(ApiDomain::Driver, CU_LAUNCH_KERNEL, CallbackSite::Exit, outer, c"cuLaunchKernel");
        }
        outer
    }

    /// One CUDA graph launch through the runtime (`cudaGraphLaunch` around `cuGraphLaunch`,
    /// which CUPTI gives no kernel name); returns its correlation id.
    pub fn launch_graph(&mut self) -> u32 {
        let outer = self.next_correlation;
        self.next_correlation += 2;
        let call = |domain, cbid, site, correlation_id, name| {
            self.trampoline.call(domain, cbid, site, correlation_id, name, None);
        };
        call(ApiDomain::Runtime, CUDA_GRAPH_LAUNCH, CallbackSite::Enter, outer, c"cudaGraphLaunch");
        call(ApiDomain::Driver, CU_GRAPH_LAUNCH, CallbackSite::Enter, outer + 1, c"cuGraphLaunch");
        call(ApiDomain::Driver, CU_GRAPH_LAUNCH, CallbackSite::Exit, outer + 1, c"cuGraphLaunch");
        call(ApiDomain::Runtime, CUDA_GRAPH_LAUNCH, CallbackSite::Exit, outer, c"cudaGraphLaunch");
        outer
    }

    /// Activity records arriving for the session, as CUPTI's buffer callback delivers them
    /// (they carry the inner driver call's correlation id for a runtime launch).
    pub fn deliver(&self, records: Vec<ActivityRecord>) {
        self.shared.on_records(records);
    }

    /// Finishes the session as [`Profiler::finish_with`] does, with the synchronize, the
    /// CUPTI clock and the activity flush answered by `faults`.
    pub fn finish(self, run_end: RunEnd, faults: Faults) -> Result<Report> {
        let calls =
            ScriptedCalls { faults: RefCell::new(faults), session: Arc::clone(&self.shared), clock: self.clock + 1 };
        let profiler = Profiler { shared: Arc::clone(&self.shared) };
        profiler.finish_through(run_end, Teardown::Release, &calls, |_| {})
    }

    /// Launches the session recorded, and the inner ids it mapped to their outer call.
    pub fn recorded(&self) -> (usize, usize) {
        let state = self.shared.state.lock();
        (state.correlator.launch_count(), state.aliases.len() + state.alias_log.len())
    }

    /// The range the session attributes the calling thread's next launch to, by path.
    pub fn current_range(&self) -> Option<String> {
        let state = self.shared.state.lock();
        let id = self.shared.attribute(&state.tree, thread())?;
        state.tree.get(id).map(|n| n.path.clone())
    }
}

fn thread() -> ThreadId {
    super::launch::current_thread_id()
}
