//! Starting a session: [`Profiler::builder`] and `Profiler::start`, which attaches to a
//! context, sets up counters, joins the hub and starts the samplers.
//!
//! Imports `state` (what it builds), `builder` (the configuration) and `scope`; `builder`
//! calls `Profiler::start` through the type, so the edge runs to `state`, not here.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;

use super::builder::{check_iteration_replay, iteration_pattern, ProfilerBuilder};
use super::state::{unix_ns, Capture, Profiler, ReplayState, SessionState, Shared};
use crate::capture::hub::{self, CaptureSession};
use crate::capture::pc_sampling::{beside_counters_message, beside_pm_sampling_message, PcSession};
use crate::capture::pm_sampling::PmSession;
use crate::capture::stream_capture;
use crate::checked::activity;
use crate::checked::driver::{self, PrimaryContext};
use crate::checked::target;
use crate::checked::Cupti;
use crate::error::{Error, Result};
use crate::model::{ClockPair, MetricSet, ProfilingMode};

/// Why a profiler does not start while the program captures a stream.
pub(crate) const STARTED_IN_CAPTURE: &str = "a CUDA stream of the program is capturing (cudaStreamBeginCapture … \
     cudaStreamEndCapture): starting a profiler turns on CUPTI's collection, which may allocate and wait on the GPU \
     and would invalidate the program's capture; start it after the capture ends";

impl Profiler {
    /// A builder with the defaults: kernel replay, DRAM bytes read and written.
    pub fn builder() -> ProfilerBuilder {
        ProfilerBuilder::default()
    }

    pub(super) fn start(mut cfg: ProfilerBuilder) -> Result<Profiler> {
        // PC sampling runs beside trace mode only: it picks trace when no mode was asked for,
        // and a counter mode or PM sampling is refused before anything starts.
        if cfg.pc_sampling.is_some() {
            if cfg.pm_sampling.is_some() {
                return Err(Error::InvalidConfig(beside_pm_sampling_message()));
            }
            match cfg.mode {
                None => cfg.mode = Some(ProfilingMode::Trace),
                Some(ProfilingMode::Trace) => {}
                Some(m) => return Err(Error::InvalidConfig(beside_counters_message(m.as_str()))),
            }
        }
        if stream_capture::any() {
            return Err(Error::InvalidState(STARTED_IN_CAPTURE.into()));
        }
        let cupti = Cupti::load()?;
        let drv = driver::init()?;
        if driver::device_count(&drv)? == 0 {
            return Err(Error::InvalidState(
                "no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)".into(),
            ));
        }
        // Attach to the application's context, or the device's primary context (the one the
        // CUDA runtime, cudarc and PyTorch use).
        let (context, primary, device) = match (cfg.context, driver::current_context(&drv)?, cfg.device) {
            (Some(ctx), _, _) => (ctx, None, driver::device(&drv, target::device_ordinal(&cupti, ctx)? as i32)?),
            (None, Some(ctx), None) => (ctx, None, driver::current_device(&drv)?),
            (None, _, ordinal) => {
                let dev = driver::device(&drv, ordinal.unwrap_or(0) as i32)?;
                let primary = PrimaryContext::retain(&drv, dev)?;
                driver::set_current(&drv, primary.context())?;
                (primary.context(), Some(primary), dev)
            }
        };
        let device_name = driver::device_name(&drv, device)?;
        let context_id = activity::context_id(&cupti, context)?;
        // CUPTI's device id of the context: the `deviceId` its activity records carry.
        let device_id = target::device_ordinal(&cupti, context)
            .inspect_err(|e| tracing::warn!("gmprof: could not read the context's device id: {e}"))
            .ok();

        let device_peaks = driver::device_peaks(&drv, device);
        let driver_version = driver::driver_release(&drv);
        // What went wrong while starting that the session goes on without: for the report.
        let mut start_warnings = Vec::new();
        let mut rotation = None;
        let (counters, metric_set, names, passes, chip, mode) = if cfg.mode == Some(ProfilingMode::Trace) {
            // Trace mode needs no counters, but the report names the chip in every mode.
            let chip = target::query_chip_name(&cupti, device as usize).unwrap_or_else(|e| {
                tracing::warn!("gmprof: could not read the chip name: {e}");
                start_warnings.push(format!(
                    "the chip's name could not be read ({e}): the report names no chip, and PM sampling, which needs \
                     the chip's metric tables, cannot run"
                ));
                String::new()
            });
            (None, MetricSet::default(), Vec::new(), 0, chip, ProfilingMode::Trace)
        } else {
            let c = Self::start_counters(&cfg, &cupti, context, device)?;
            rotation = c.rotation;
            (Some(c.counters), c.metric_set, c.names, c.passes, c.chip, c.mode)
        };
        let iteration_range = match &cfg.iteration_replay {
            Some((range, instances)) => {
                check_iteration_replay(mode, passes, range, *instances)?;
                Some(iteration_pattern(range)?)
            }
            None => None,
        };

        let clock_start = ClockPair { cupti_ns: activity::timestamp(&cupti)?, unix_ns: unix_ns() };
        let shared = Arc::new(Shared {
            launch_clock: activity::LaunchClock::of(&cupti),
            cupti,
            driver: drv,
            clock_start,
            memsets_unread: std::sync::atomic::AtomicU64::new(0),
            skipped_waits: Default::default(),
            rotation_stall_ns: std::sync::atomic::AtomicU64::new(0),
            device_id,
            context_id,
            mode,
            metric_set,
            metric_names: names,
            passes,
            flush_on_range_boundaries: cfg.flush_on_range_boundaries.unwrap_or(mode == ProfilingMode::KernelReplay),
            synchronize_on_pop: cfg.synchronize_on_pop,
            range_scope: cfg.range_scope,
            device_name,
            chip,
            device_peaks,
            driver_version,
            started_unix_ns: clock_start.unix_ns,
            capture: Mutex::new(None),
            state: Mutex::new(SessionState::new()),
            incoming: Arc::new(Mutex::new(Vec::new())),
            launch_gate: Mutex::new(()),
            finished: AtomicBool::new(false),
            sealed: AtomicBool::new(false),
            replay: Mutex::new(ReplayState::default()),
            iteration_range,
            pm: Mutex::new(None),
            pc: Mutex::new(None),
            self_time_at_start: crate::checked::self_time::snapshot(),
            stamps_missed_at_start: activity::launch_stamps_missed().0,
            time_api_calls: cfg.time_api_calls,
            call_stamps_missed: std::sync::atomic::AtomicU64::new(0),
            call_stamp_error: std::sync::atomic::AtomicU32::new(0),
        });
        {
            let mut state = shared.state.lock();
            state.warnings.append(&mut start_warnings);
            state.rotation = rotation;
        }
        // The capture is in place before the hub can route a callback to this session.
        *shared.capture.lock() = Some(Capture { membership: None, counters, _primary: primary, context });
        let session: Arc<dyn CaptureSession> = shared.clone();
        let kinds = if mode == ProfilingMode::KernelReplay {
            crate::checked::activity::ActivityKinds::KernelsAndMemcpy
        } else {
            crate::checked::activity::ActivityKinds::KernelsAndMemory
        };
        let membership = hub::join(&cupti, context_id, Arc::downgrade(&session), kinds)?;
        let mut guard = shared.capture.lock();
        if let Some(capture) = guard.as_mut() {
            if let Some(counters) = capture.counters.as_mut() {
                // A multi-pass set under user replay waits for `replay` to run the passes.
                let collect_now = mode == ProfilingMode::KernelReplay || passes <= 1;
                if let (true, Some(rp)) = (collect_now, counters.range_profiler.as_ref()) {
                    rp.start()?;
                    counters.running = true;
                }
            }
            capture.membership = Some(membership);
        }
        drop(guard);
        if let Some(pm_cfg) = &cfg.pm_sampling {
            let beside = (mode != ProfilingMode::Trace).then(|| mode.as_str());
            let session = PmSession::start(&shared.cupti, device as usize, &shared.chip, pm_cfg, beside);
            match session {
                Ok(session) => *shared.pm.lock() = Some(session),
                Err(e) if cfg.optional_samplers && may_be_left_out(&e) => left_out(&shared, "PM sampling", &e),
                Err(e) => {
                    // Nothing of this capture is handed out: leave the hub and stop counters.
                    if let Some(capture) = shared.capture.lock().take() {
                        if let Some(m) = capture.membership {
                            let _ = m.leave();
                        }
                    }
                    return Err(e);
                }
            }
        }
        if let Some(pc_cfg) = &cfg.pc_sampling {
            match PcSession::start(&shared.cupti, context, pc_cfg) {
                Ok(session) => *shared.pc.lock() = Some(session),
                Err(e) if cfg.optional_samplers && may_be_left_out(&e) => left_out(&shared, "PC sampling", &e),
                Err(e) => {
                    // Nothing of this capture is handed out: stop PM sampling, leave the hub.
                    if let Some(pm) = shared.pm.lock().take() {
                        let _ = pm.finish();
                    }
                    if let Some(capture) = shared.capture.lock().take() {
                        if let Some(m) = capture.membership {
                            let _ = m.leave();
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(Profiler { shared })
    }
}

/// Whether a sampler that failed to start with `e` may be left out of the session
/// ([`ProfilerBuilder::optional_samplers`]): a failed call, not a configuration it refuses.
fn may_be_left_out(e: &Error) -> bool {
    !matches!(e, Error::InvalidConfig(_) | Error::UnknownMetrics { .. })
}

/// The session goes on without sampler `what`, which failed to start with `e`; the report
/// says so.
fn left_out(shared: &Shared, what: &str, e: &Error) {
    tracing::warn!("gmprof: {what} did not start: {e}");
    shared.state.lock().warnings.push(format!("{what} did not start, and the session went on without it: {e}"));
}
