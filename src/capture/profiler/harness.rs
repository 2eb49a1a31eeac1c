//! A trace-mode session with no GPU behind it, for the launch-path benchmark
//! (`benches/launch_path.rs`, feature `bench-internals`; not part of the API).
//!
//! Layer 3. CUPTI's callback trampoline, the hub's routing and the session's launch callbacks
//! run exactly as they do inside a program's CUDA calls, on callback data made up here: a
//! driver launch is an enter and an exit of `cuLaunchKernel`, a runtime launch wraps those in
//! `cudaLaunchKernel`'s. CUPTI and the driver are stand-ins whose functions are all missing;
//! the launch path never calls them.

use std::sync::Arc;

use parking_lot::Mutex;

use super::{Capture, ReplayState, SessionState, Shared};
use crate::capture::hub::{BenchRoute, CaptureSession};
use crate::checked::callback::{ApiDomain, BenchTrampoline, CallbackSite};
use crate::checked::driver::Context;
use crate::checked::{Cupti, Driver};
use crate::error::Result;
use crate::model::{ClockPair, DevicePeaks, MetricSet, ProfilingMode, ThreadId};

/// Context id the harness routes under (no real context has it).
const CONTEXT_ID: u32 = u32::MAX - 7;
/// `CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel`.
const CU_LAUNCH_KERNEL: u32 = 307;
/// `CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000`.
const CUDA_LAUNCH_KERNEL: u32 = 211;
/// The kernel [`LaunchHarness::launch`] names: a typical mangled CUDA C++ name.
const BENCH_KERNEL: &std::ffi::CStr = c"_Z21gemm_bias_relu_kernelPKfS0_S0_Pfiii";

/// A trace-mode session fed with made-up launch callbacks.
#[must_use = "the session is routed only while the harness lives"]
pub struct LaunchHarness {
    shared: Arc<Shared>,
    trampoline: BenchTrampoline,
    /// The hub's route to the session, removed when the harness is dropped.
    _route: BenchRoute,
    next_correlation: u32,
    clock: u64,
}

impl std::fmt::Debug for LaunchHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchHarness").field("next_correlation", &self.next_correlation).finish_non_exhaustive()
    }
}

impl LaunchHarness {
    /// A trace-mode session, routed by the hub. One harness at a time per process.
    pub fn trace() -> Result<LaunchHarness> {
        let shared = Arc::new(Shared {
            cupti: Cupti::stand_in()?,
            driver: Driver::stand_in()?,
            clock_start: ClockPair { cupti_ns: 0, unix_ns: 0 },
            launches: std::sync::atomic::AtomicU32::new(0),
            memsets_untraced: std::sync::atomic::AtomicU64::new(0),
            mode: ProfilingMode::Trace,
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
        let route = BenchRoute::add(CONTEXT_ID, Arc::downgrade(&session));
        let trampoline = BenchTrampoline::new(shared.cupti, BenchRoute::handler(), CONTEXT_ID);
        Ok(LaunchHarness { shared, trampoline, _route: route, next_correlation: 1, clock: 1 })
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
        let outer = self.next_correlation;
        self.next_correlation += if runtime { 2 } else { 1 };
        let call = |domain, cbid, site, correlation_id, name| {
            self.trampoline.call(domain, cbid, site, correlation_id, name, Some(BENCH_KERNEL));
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
