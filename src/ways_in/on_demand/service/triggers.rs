//! The triggers a program pulls itself: the profiler API and the capture signal of a capture
//! range or an on-demand run, and the API's start and stop (`gmprof_capture_start`).
//!
//! Layer 3, methods of [`Service`] beside its phases (see the parent module).

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::{not_attached, Pending, Phase, Service, Trigger};
use crate::capture::profiler::Teardown;
use crate::checked::callback::ProfilerApiCall;
use crate::model::RunEnd;
use crate::ways_in::on_demand::captures;
use crate::ways_in::on_demand::config::CaptureRange;
use crate::ways_in::on_demand::protocol::{CaptureRecord, CaptureSettings, Span, StartAt};

impl Service {
    /// `cudaProfilerStart` or `cudaProfilerStop` on the calling thread.
    pub fn on_profiler_api(&self, call: ProfilerApiCall) {
        if self.config.capture_range != Some(CaptureRange::CudaProfilerApi) {
            return;
        }
        match call {
            ProfilerApiCall::Start => {
                if self.ended.load(Ordering::Acquire) || !self.range_capture_left() {
                    return;
                }
                let pending = {
                    let mut phase = self.phase.lock();
                    if !matches!(*phase, Phase::Idle) {
                        eprintln!(
                            "gmprof: cudaProfilerStart while {}: not a capture of its own",
                            self.describe_locked(&phase)
                        );
                        return;
                    }
                    match self.own_pending(Trigger::ProfilerApi, Span::UntilStopped) {
                        Ok(p) => {
                            *phase = Phase::Starting(p.id);
                            self.active.store(true, Ordering::Release);
                            self.range_captures.fetch_add(1, Ordering::AcqRel);
                            p
                        }
                        Err(e) => return eprintln!("gmprof: cudaProfilerStart: no capture: {e}"),
                    }
                };
                self.start(pending, None);
            }
            ProfilerApiCall::Stop => {
                let phase = self.phase.lock();
                if matches!(&*phase, Phase::Running(live) if live.pending.trigger == Trigger::ProfilerApi) {
                    self.end_in_background(phase, "cudaProfilerStop".into());
                }
            }
        }
    }

    /// The capture signal: a capture of the run's defaults, at the next step.
    pub fn on_signal(&self, name: &str) {
        let settings = CaptureSettings::default();
        match self.request(Trigger::Signal(name.to_owned()), None, &settings, self.config.signal_span, StartAt::Next) {
            Ok(id) => {
                eprintln!("gmprof: {name}: capture {id} ({}) at the next step", self.config.signal_span.describe())
            }
            Err(e) => eprintln!("gmprof: {name}: no capture: {e}"),
        }
    }

    /// Starts a capture now, on the calling thread, until [`Service::api_stop`]
    /// (`gmprof_capture_start`). Returns its number and this process's directory of it.
    pub fn api_start(&self, settings: &CaptureSettings) -> Result<(u64, PathBuf), String> {
        let (Some(process), Some(_)) = (self.process.get(), self.backend.get()) else {
            return Err(not_attached());
        };
        let settings = settings.or(&self.config.defaults);
        settings.validate().map_err(|e| e.to_string())?;
        let pending = {
            let mut phase = self.phase.lock();
            if !matches!(*phase, Phase::Idle) {
                return Err(format!("{}; one capture at a time", self.describe_locked(&phase)));
            }
            let id = captures::own_next(&process.run_dir, &process.process);
            let dir = captures::claim(&process.run_dir, id, &process.process).map_err(|e| e.to_string())?;
            *phase = Phase::Starting(id);
            self.active.store(true, Ordering::Release);
            Pending { id, trigger: Trigger::Api, settings, span: Span::UntilStopped, start: StartAt::Next, dir }
        };
        let (id, dir) = (pending.id, pending.dir.clone());
        self.start(pending, None);
        self.started_or_failed(id).map(|id| (id, dir))
    }

    /// Ends the capture [`Service::api_start`] started and writes it, on the calling thread.
    pub fn api_stop(&self) -> Result<CaptureRecord, String> {
        let live = {
            let mut phase = self.phase.lock();
            match &*phase {
                Phase::Running(live) if live.pending.trigger == Trigger::Api => {
                    let id = live.pending.id;
                    let Phase::Running(live) = std::mem::replace(&mut *phase, Phase::Finishing(id, None)) else {
                        unreachable!()
                    };
                    live.capture.seal();
                    live
                }
                other => {
                    return Err(format!(
                        "no capture of gmprof_capture_start is running ({})",
                        self.describe_locked(other)
                    ))
                }
            }
        };
        let end = RunEnd::Finished { by: "capture end: gmprof_capture_stop".into() };
        self.finish(*live, end, "gmprof_capture_stop".into(), Teardown::Release);
        self.last().ok_or_else(|| "the capture left no record".into())
    }
}
