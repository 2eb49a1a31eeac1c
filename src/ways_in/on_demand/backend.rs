//! What a capture runs on: the seam between the on-demand service and CUPTI.
//!
//! Layer 3. [`CaptureBackend`] turns a capture's settings into a [`LiveCapture`] and switches
//! what an idle process keeps off; [`ProfilerBackend`] is the real one: one [`Profiler`] per
//! capture, on the process's first CUDA context, started with the launch callbacks it needs
//! and finished into the capture's directory, after which the callbacks go off again and the
//! hub's activity registration is gone with the profiler. The CPU tests drive the service
//! through a fake backend of their own.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::capture::pm_sampling::{PmSamplingConfig, PM_INTERVAL_ENV, PM_SAMPLING_ENV};
use crate::capture::profiler::{Profiler, RangeScope, Teardown};
use crate::checked::driver::Context;
use crate::error::Result;
use crate::model::RunEnd;
use crate::ways_in::on_demand::protocol::CaptureSettings;
use crate::ways_in::outputs::Outputs;

/// What a finished capture wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// Kernel rows.
    pub kernels: u64,
    /// Range rows.
    pub ranges: u64,
    /// How the report records its end (with the steps of finishing that failed).
    pub run_end: Option<RunEnd>,
}

/// A capture collecting now.
pub trait LiveCapture: Send + Sync {
    /// Opens a range on the calling thread.
    fn push_range(&self, name: &str) -> Result<()>;
    /// Closes the calling thread's innermost range.
    fn pop_range(&self) -> Result<()>;
    /// Ends the window: work from now on is not the capture's. Cheap; any thread, inside a
    /// CUPTI callback too.
    fn seal(&self);
    /// Writes what is complete so far into the capture's directory.
    fn checkpoint(&self, reason: &str) -> Result<()>;
    /// Finishes and writes the outputs into the capture's directory (once).
    fn finish(&self, end: RunEnd, teardown: Teardown) -> Result<Written>;
    /// The capture's first step is the program's step `step` (the service's count of the
    /// step range's pushes): a Kineto `trace.json` numbers its `ProfilerStep#N` from it.
    fn first_step(&self, _step: u64) {}
}

/// Makes captures.
pub trait CaptureBackend: Send + Sync {
    /// A capture waits for its start: turn on what hearing it needs. `at_next_call`: it
    /// starts at the next CUDA call the program makes, on that thread ([`CaptureBackend::start`]
    /// is then called from inside the call).
    fn arm(&self, at_next_call: bool) -> Result<()>;
    /// Starts collecting into `dir`, on the calling thread.
    fn start(&self, settings: &CaptureSettings, dir: &Path) -> Result<Arc<dyn LiveCapture>>;
    /// Back to idle: nothing armed, no capture running.
    fn disarm(&self);
}

/// PM sampling as `settings` ask for it.
pub fn pm_sampling(settings: &CaptureSettings) -> Result<Option<PmSamplingConfig>> {
    PmSamplingConfig::from_lookup(|key| match key {
        PM_SAMPLING_ENV => settings.pm_sampling.clone(),
        PM_INTERVAL_ENV => settings.pm_interval.clone(),
        _ => None,
    })
}

/// What every capture of an injected run shares: the run's range scope and cycle size.
#[derive(Clone, Copy, Debug)]
pub struct ProfilerDefaults {
    /// How helper threads' kernels are attributed.
    pub range_scope: RangeScope,
    /// Synchronize before each pop.
    pub synchronize_on_pop: bool,
    /// Counter ranges per cycle (`None`: the library's).
    pub ranges_per_cycle: Option<usize>,
    /// Time API calls (a Kineto `trace.json`; `ProfilerBuilder::time_api_calls`).
    pub time_api_calls: bool,
}

/// The real backend: a [`Profiler`] per capture on the process's first CUDA context.
pub struct ProfilerBackend {
    context: Context,
    context_uid: u32,
    defaults: ProfilerDefaults,
    /// Whether the hub's launch callbacks are on.
    launches_on: AtomicBool,
    /// Called inside the next CUDA call of `context` once [`CaptureBackend::arm`] asked for it.
    on_next_call: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for ProfilerBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilerBackend").field("context_uid", &self.context_uid).finish_non_exhaustive()
    }
}

impl ProfilerBackend {
    /// A backend for `context`; `on_next_call` runs inside the next CUDA call of that context
    /// after an [`CaptureBackend::arm`] that asked for it.
    pub(crate) fn new(
        context: Context,
        defaults: ProfilerDefaults,
        on_next_call: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<ProfilerBackend> {
        let cupti = crate::checked::Cupti::load()?;
        let context_uid = crate::checked::activity::context_id(&cupti, context)?;
        Ok(ProfilerBackend { context, context_uid, defaults, launches_on: AtomicBool::new(false), on_next_call })
    }

    fn launches(&self, on: bool) -> Result<()> {
        if self.launches_on.swap(on, Ordering::AcqRel) != on {
            if let Err(e) = crate::capture::hub::set_launch_callbacks(on) {
                self.launches_on.store(!on, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }
}

impl CaptureBackend for ProfilerBackend {
    fn arm(&self, at_next_call: bool) -> Result<()> {
        self.launches(true)?;
        if at_next_call {
            let (uid, call) = (self.context_uid, Arc::clone(&self.on_next_call));
            crate::capture::hub::set_launch_hook(Some(Arc::new(move |context_uid| {
                if context_uid == uid {
                    crate::capture::hub::set_launch_hook(None);
                    call();
                }
            })));
        }
        Ok(())
    }

    fn start(&self, settings: &CaptureSettings, dir: &Path) -> Result<Arc<dyn LiveCapture>> {
        crate::capture::hub::set_launch_hook(None);
        self.launches(true)?;
        let d = self.defaults;
        // Range boundaries arrive in CUPTI's NVTX callbacks, where flushing crashed CUPTI 13.0
        // (see `injection`): captures never flush there either.
        let mut builder = Profiler::builder()
            .context(self.context)
            .range_scope(d.range_scope)
            .synchronize_on_pop(d.synchronize_on_pop)
            .flush_on_range_boundaries(false)
            .time_api_calls(d.time_api_calls)
            .pm_sampling(pm_sampling(settings)?);
        if let Some(mode) = settings.profiling_mode()? {
            builder = builder.mode(mode);
        }
        if let Some(metrics) = &settings.metrics {
            builder = builder.metrics(metrics.iter().map(|m| m.trim()).filter(|m| !m.is_empty()).map(String::from));
        }
        if let Some(n) = d.ranges_per_cycle {
            builder = builder.max_ranges_per_cycle(n);
        }
        let profiler = builder.build()?;
        Ok(Arc::new(ProfiledCapture { profiler, outputs: Outputs::new(dir.to_owned()) }))
    }

    fn disarm(&self) {
        crate::capture::hub::set_launch_hook(None);
        if let Err(e) = self.launches(false) {
            tracing::warn!("gmprof: could not turn the launch callbacks off after a capture: {e}");
        }
    }
}

/// A [`Profiler`] and the directory it writes.
struct ProfiledCapture {
    profiler: Profiler,
    outputs: Outputs,
}

impl LiveCapture for ProfiledCapture {
    fn push_range(&self, name: &str) -> Result<()> {
        self.profiler.push_range(name)
    }

    fn pop_range(&self) -> Result<()> {
        self.profiler.pop_range()
    }

    fn seal(&self) {
        self.profiler.seal();
    }

    fn checkpoint(&self, reason: &str) -> Result<()> {
        self.outputs.write_checkpoint(&self.profiler, reason).map(|_| ())
    }

    fn first_step(&self, step: u64) {
        self.outputs.set_first_step(step);
    }

    fn finish(&self, end: RunEnd, teardown: Teardown) -> Result<Written> {
        let mut written = Err(crate::error::Error::InvalidState("the capture's report was never built".into()));
        // A second finish fails in the profiler ("finish was already called").
        self.profiler.clone().finish_with(end, teardown, |report| {
            written = self.outputs.write_final(report).map(|()| Written {
                kernels: report.kernels.len() as u64,
                ranges: report.ranges.len() as u64,
                run_end: report.meta.run_end.clone(),
            });
        })?;
        written
    }
}
