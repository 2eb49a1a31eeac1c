//! The end of a capture, in the order that loses nothing: collect everything (synchronize,
//! decode the last counter cycle, flush activity), analyze it into the [`Report`], hand the
//! report to the caller to write, and only then tear CUPTI down. A teardown step that fails,
//! or one skipped because the process is exiting, can no longer cost the data.
//!
//! A collection step that fails does not stop the others either. When the program's own
//! CUDA error (an illegal address or instruction: a "sticky" error) has failed the context,
//! the synchronize returns it and later CUDA and CUPTI calls fail fast; each step is still
//! tried, what arrived is correlated and written, and the report's
//! [`RunEnd::FinishedWithErrors`] names the error and the steps that failed. Launches whose
//! kernels never completed become rows with status `not_completed`, named where the launch
//! callback kept the kernel's name ([`super::recent`]).
//!
//! [`Profiler::checkpoint`] is the same collection without the stop: a report of what is
//! complete so far, for outputs written while the program still runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::capture::hub::HubMembership;
use crate::capture::pc_sampling::PcSession;
use crate::capture::pm_sampling::{PmLeftovers, PmSession};
use crate::capture::stream_capture::Wait;
use crate::checked::activity;
use crate::checked::driver::{self, Context, PrimaryContext};
use crate::checked::{Cupti, Driver};
use crate::error::{Error, Result};
use crate::model::pc::PcCapture;
use crate::model::pm::PmCapture;
use crate::model::{ClockPair, ClockSync, CudaError, FailedStep, FinishStep, ProfilingMode, RunEnd};
use crate::report::{CaptureInfo, Report};

use super::evaluator::EvaluatorOutput;
use super::state::{unix_ns, Counters, Profiler, Shared};

/// What [`Shared::collect`] hands back: the capture info, the CUPTI objects to release, and
/// the PM and PC samples.
type Collected = (CaptureInfo, Leftovers, Option<PmCapture>, Option<PcCapture>);

/// Whether [`Profiler::finish_with`] releases CUPTI's objects after the report is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Teardown {
    /// Disable the range profiler, release the host objects, leave the activity hub: a
    /// program that goes on using the GPU (or profiles again) needs this.
    Release,
    /// Leave them to the process's end. For exit paths: once the process exits (atexit
    /// handlers, a fatal signal), CUPTI may already be tearing itself down, and a call into
    /// it crashed there (cuptiActivityFlushAll after the range profiler was disabled, CUDA
    /// 13.0, kernel replay).
    Skip,
}

/// The calls into CUDA and CUPTI that collecting makes at the end: a seam, through which
/// the CPU tests (the GPU-less harness) fail them as a failed context does.
pub(super) trait FinishCalls {
    /// Makes `context` current on the calling thread.
    fn make_current(&self, context: Context) -> Result<()>;
    /// Waits for the current context's work.
    fn synchronize(&self) -> Result<()>;
    /// The CUPTI clock now.
    fn timestamp(&self) -> Result<u64>;
    /// Flushes CUPTI's activity buffers; the hub routes their records to the session.
    fn flush_activity(&self, membership: Option<&HubMembership>) -> Result<()>;
}

/// The real calls.
struct LiveCalls<'a> {
    cupti: &'a Cupti,
    driver: &'a Driver,
}

impl FinishCalls for LiveCalls<'_> {
    fn make_current(&self, context: Context) -> Result<()> {
        driver::set_current(self.driver, context)
    }

    fn synchronize(&self) -> Result<()> {
        driver::synchronize(self.driver)
    }

    fn timestamp(&self) -> Result<u64> {
        activity::timestamp(self.cupti)
    }

    fn flush_activity(&self, membership: Option<&HubMembership>) -> Result<()> {
        membership.map_or(Ok(()), HubMembership::flush)
    }
}

/// The steps of collecting that failed, and the CUDA error among their errors.
#[derive(Debug, Default)]
struct Failures {
    cuda_error: Option<CudaError>,
    steps: Vec<FailedStep>,
}

impl Failures {
    /// Records `result`'s error under `step`; true when the step succeeded.
    fn check(&mut self, step: FinishStep, result: Result<()>) -> bool {
        match result {
            Ok(()) => true,
            Err(e) => {
                self.push(step, &e);
                false
            }
        }
    }

    fn push(&mut self, step: FinishStep, error: &Error) {
        if self.cuda_error.is_none() {
            self.cuda_error = CudaError::from_error(error);
        }
        self.push_text(step, error.to_string());
    }

    fn push_text(&mut self, step: FinishStep, error: String) {
        tracing::warn!("gmprof: finishing: {} failed: {error}", step.as_str());
        self.steps.push(FailedStep { step, error });
    }

    /// One warning line per failed step, for the report.
    fn warnings(&self) -> impl Iterator<Item = String> + '_ {
        self.steps.iter().map(|s| format!("finishing: {} failed: {}", s.step.as_str(), s.error))
    }
}

/// What a capture holds until teardown.
struct Leftovers {
    counters: Option<Counters>,
    /// The evaluator's host object and images: the images stay alive until the range
    /// profiler is disabled.
    evaluated: Option<EvaluatorOutput>,
    membership: Option<HubMembership>,
    primary: Option<PrimaryContext>,
    pm: Option<PmLeftovers>,
}

impl Profiler {
    /// Stops profiling, correlates and aggregates. Ranges still open are closed with a
    /// warning in the report.
    pub fn finish(self) -> Result<Report> {
        self.finish_with(RunEnd::Finished { by: "finish".into() }, Teardown::Release, |_| {})
    }

    /// Stops profiling and builds the report; `before_teardown` gets it (to write it)
    /// before any CUPTI object is released, then `teardown` says whether they are. A
    /// teardown error becomes a warning of the returned report.
    pub fn finish_with(
        self,
        run_end: RunEnd,
        teardown: Teardown,
        before_teardown: impl FnOnce(&mut Report),
    ) -> Result<Report> {
        let shared = Arc::clone(&self.shared);
        let calls = LiveCalls { cupti: &shared.cupti, driver: &shared.driver };
        self.finish_through(run_end, teardown, &calls, before_teardown)
    }

    /// [`Profiler::finish_with`] through `calls`.
    pub(super) fn finish_through(
        self,
        run_end: RunEnd,
        teardown: Teardown,
        calls: &dyn FinishCalls,
        before_teardown: impl FnOnce(&mut Report),
    ) -> Result<Report> {
        let shared = &self.shared;
        if shared.finished.swap(true, Ordering::AcqRel) {
            return Err(Error::InvalidState("finish was already called".into()));
        }
        let t0 = Instant::now();
        let (info, leftovers, mut pm, pc) = shared.collect(run_end, calls)?;
        // The finish's phases, timed (GMPROF_LOG=gmprof=info): what the exit costs.
        tracing::info!(
            elapsed_ms = t0.elapsed().as_millis() as u64,
            "gmprof: finish: collected (last flush, samplers stopped)"
        );
        let mut report = {
            let mut state = shared.state.lock();
            let mut correlator = std::mem::take(&mut state.correlator);
            for (kind, bytes, count) in crate::capture::probe::internal_transfers(true) {
                correlator.add_internal_transfers(kind, bytes, count);
            }
            shared.analyze_at_finish(&mut state, correlator, info, &mut pm, pc.as_ref())
        };
        if let Some(pm) = pm {
            report.attach_pm(&pm);
            // A streamed run's samples are in its parts (`pm_samples/`), not in the report.
            let streamed = report.streamed.as_ref().and_then(|s| s.tables.iter().find(|t| t.table == "pm_samples"));
            if let (Some(table), Some(folded)) = (streamed, report.pm.as_mut()) {
                folded.sample_count = table.rows;
            }
        }
        if let Some(pc) = pc {
            report.attach_pc(&pc);
        }
        tracing::info!(elapsed_ms = t0.elapsed().as_millis() as u64, "gmprof: finish: report made");
        before_teardown(&mut report);
        tracing::info!(elapsed_ms = t0.elapsed().as_millis() as u64, "gmprof: finish: outputs written");
        if teardown == Teardown::Release {
            if let Err(e) = shared.release(leftovers) {
                tracing::warn!("gmprof: releasing CUPTI after the report was built: {e}");
                report.meta.warnings.push(format!("releasing CUPTI after the report was built: {e}"));
            }
        } else {
            std::mem::forget(leftovers);
        }
        tracing::info!(elapsed_ms = t0.elapsed().as_millis() as u64, "gmprof: finish: CUPTI released, finished");
        Ok(report)
    }

    /// A report of what is complete now, while profiling goes on: ranges still open are
    /// shown closed at this moment (with a warning), and kernels whose counters or activity
    /// are not in yet are left out and counted in [`RunEnd::Checkpoint`].
    pub fn checkpoint(&self, reason: &str) -> Result<Report> {
        self.ensure_running()?;
        if self.is_streaming() {
            return Err(Error::InvalidState(
                "the session streams its rows to part files (past its row limit): no whole-session checkpoint".into(),
            ));
        }
        let shared = &self.shared;
        // The default flush mid-run: a forced one would hand over running kernels' records
        // without their times (see `activity::flush_all`); those wait for the next one.
        activity::flush_all(&shared.cupti, false)?;
        shared.drain_activity();
        // Counter cycles the evaluator finished go to the correlator now; a cycle still being
        // evaluated counts as running, so its launches wait for the next checkpoint.
        let (running_cycle, evaluated) = {
            let guard = shared.capture.lock();
            match guard.as_ref().and_then(|c| c.counters.as_ref()) {
                Some(c) => (Some(c.cycle), c.evaluator.take_evaluated()),
                None => (None, Vec::new()),
            }
        };
        let running_cycle = {
            let mut state = shared.state.lock();
            for (cycle, ranges) in evaluated {
                state.correlator.add_counter_ranges(cycle, ranges);
            }
            running_cycle
                .map(|running| (0..running).find(|c| !state.correlator.has_counter_cycle(*c)).unwrap_or(running))
        };
        let now = ClockPair { cupti_ns: activity::timestamp(&shared.cupti)?, unix_ns: unix_ns() };
        let (correlator, mut tree, mut warnings, pending, rotation) = {
            let state = shared.state.lock();
            let (mut correlator, pending) = state.correlator.checkpoint(shared.mode, running_cycle);
            for (kind, bytes, count) in crate::capture::probe::internal_transfers(false) {
                correlator.add_internal_transfers(kind, bytes, count);
            }
            let rotation = state.rotation.as_ref().map(super::rotation::Rotation::run);
            (correlator, state.tree.clone(), state.warnings.clone(), pending, rotation)
        };
        for open in tree.close_all_open(now.cupti_ns) {
            warnings.push(format!("at this checkpoint: {open}"));
        }
        warnings.extend(shared.skipped_waits.warnings());
        if pending.transfers > 0 {
            warnings.push(format!("{} memcpy/memset call(s) were still pending at this checkpoint", pending.transfers));
        }
        let mut info = shared.capture_info(now, warnings, 0, 0);
        info.rotation = rotation;
        info.run_end = Some(RunEnd::Checkpoint { reason: reason.to_owned(), pending_kernels: pending.kernels });
        let mut report = Report::analyze(info, &shared.metric_set, &tree, correlator);
        // PM samples up to the sampler's last drain (at most one decode period old).
        let pm = shared.pm.lock().as_ref().map(PmSession::snapshot);
        if let Some(pm) = pm {
            report.attach_pm(&pm);
        }
        // PC samples up to the last drain (at most one drain period old).
        let pc = shared.pc.lock().as_ref().map(PcSession::snapshot);
        if let Some(pc) = pc {
            report.attach_pc(&pc);
        }
        Ok(report)
    }
}

impl Shared {
    /// Memsets under kernel replay whose parameters gmprof could not read: the one case
    /// where a memset is missing from transfers.csv.
    pub(super) fn unread_memsets_warning(&self) -> Option<String> {
        let memsets = self.memsets_unread.load(Ordering::Relaxed);
        (memsets > 0).then(|| {
            format!(
                "{memsets} memset call(s) are not in transfers.csv: kernel_replay records no memset activity \
                 (with it, CUPTI 13.0 crashes in its activity flush) and gmprof could not read their parameters"
            )
        })
    }

    /// The common part of a report's capture info.
    fn capture_info(
        &self,
        now: ClockPair,
        warnings: Vec<String>,
        dropped_ranges: u64,
        dropped_records: u64,
    ) -> CaptureInfo {
        let mut info = CaptureInfo::new(self.mode);
        info.device_name = Some(self.device_name.clone());
        info.chip = (!self.chip.is_empty()).then(|| self.chip.clone());
        info.device_peaks = Some(self.device_peaks);
        info.driver_version = self.driver_version.clone();
        info.dropped_counter_ranges = dropped_ranges;
        info.dropped_activity_records = dropped_records;
        info.started_unix_ns = Some(self.started_unix_ns);
        info.finished_unix_ns = Some(now.unix_ns);
        info.clock = Some(ClockSync { start: self.clock_start, finish: now });
        info.warnings = warnings;
        info.self_time =
            crate::checked::self_time::snapshot().map(|now| now.since(self.self_time_at_start.unwrap_or_default()));
        info
    }

    /// Stops collection and brings every record in: synchronize, decode the last cycle,
    /// flush activity. CUPTI objects stay alive (see [`Teardown`]). A step that fails is
    /// recorded in the run end and the others are still tried; only a session with no live
    /// capture is an error.
    fn collect(&self, run_end: RunEnd, calls: &dyn FinishCalls) -> Result<Collected> {
        let mut capture =
            self.capture.lock().take().ok_or_else(|| Error::InvalidState("the profiler has no live capture".into()))?;
        let mut failures = Failures::default();
        tracing::debug!("gmprof: finish: synchronizing the context");
        // Synchronizing whatever other context is current would wait for the wrong work; and
        // inside a program's stream capture (an on-demand capture ending on its timer), a
        // synchronize would invalidate the program's capture: left out, and said.
        if failures.check(FinishStep::MakeCurrent, calls.make_current(capture.context))
            && !self.skipped_waits.skip(Wait::Finish)
        {
            failures.check(FinishStep::Synchronize, calls.synchronize());
        }
        let now_unix = unix_ns();
        let cupti_ns = match calls.timestamp() {
            Ok(t) => t,
            Err(e) => {
                failures.push(FinishStep::Timestamp, &e);
                // The CUPTI clock advanced like the wall clock since the start pair.
                self.clock_start.cupti_ns.saturating_add(now_unix.saturating_sub(self.clock_start.unix_ns))
            }
        };
        let clock_finish = ClockPair { cupti_ns, unix_ns: now_unix };
        let (pm, pm_leftovers) = match self.pm.lock().take() {
            Some(session) => {
                tracing::debug!("gmprof: finish: stopping PM sampling");
                let (capture, leftovers, error) = session.finish();
                if let Some(error) = error {
                    failures.push_text(FinishStep::PmSamplingStop, error);
                }
                (Some(capture), leftovers)
            }
            None => (None, None),
        };
        let pc = self.pc.lock().take().map(|session| {
            tracing::debug!("gmprof: finish: stopping PC sampling");
            let (capture, error) = session.finish();
            if let Some(error) = error {
                failures.push_text(FinishStep::PcSamplingStop, error);
            }
            capture
        });
        let (mut dropped_ranges, mut lost_ranges) = (0, 0);
        let mut counters = capture.counters.take();
        let mut evaluated = None;
        if let Some(counters) = counters.as_mut() {
            tracing::debug!("gmprof: finish: decoding the last counter cycle");
            evaluated = Some(self.stop_counters(counters, &mut failures));
            (dropped_ranges, lost_ranges) = (counters.dropped_ranges, counters.lost_ranges);
        }
        // The last activity records, while every CUPTI object is still alive. A flush that
        // fails is tried once more: the records it did not bring in are still in CUPTI's
        // buffers, and a second flush that works loses nothing (the warning says so).
        tracing::debug!("gmprof: finish: flushing activity");
        let flushed = calls.flush_activity(capture.membership.as_ref()).or_else(|first| {
            match calls.flush_activity(capture.membership.as_ref()) {
                Ok(()) => {
                    self.state.lock().warnings.push(format!(
                        "the last activity flush failed and brought every record in when tried again: {first}"
                    ));
                    Ok(())
                }
                Err(_) => Err(first),
            }
        });
        failures.check(FinishStep::ActivityFlush, flushed);
        let mut dropped_records = 0;
        let mut unprofiled = Vec::new();
        if let Some(membership) = capture.membership.as_ref() {
            unprofiled = membership.unprofiled_contexts();
            let stats = membership.stats();
            dropped_records = stats.records_dropped;
            let mut state = self.state.lock();
            if stats.buffers_allocated_late > 0 {
                state.warnings.push(format!(
                    "{} activity buffer(s) were allocated while profiling because the pool ran dry",
                    stats.buffers_allocated_late
                ));
            }
            if stats.callback_panics > 0 {
                state.warnings.push(format!(
                    "{} activity buffer(s) were lost to an internal error in gmprof's buffer callback",
                    stats.callback_panics
                ));
            }
            state.warnings.extend(activity_read_warnings(&stats, activity::first_read_error()));
        }
        self.drain_activity();

        let unreplayed = self.replay.lock().unreplayed_launches;
        let mut state = self.state.lock();
        let after_finish = state.records_after_finish;
        if after_finish > 0 {
            state.warnings.push(format!(
                "{after_finish} kernel(s) and transfer(s) were launched by other threads after profiling stopped \
                 (at {}); they are not in the report",
                run_end.describe()
            ));
        }
        if let Some(warning) = self.unread_memsets_warning() {
            state.warnings.push(warning);
        }
        state.warnings.extend(self.skipped_waits.warnings());
        let (missed, code) = activity::launch_stamps_missed();
        if let (missed @ 1.., Some(code)) = (missed.saturating_sub(self.stamps_missed_at_start), code) {
            let error = self.cupti.error(code, "cuptiGetTimestamp", "stamping a launch");
            state.warnings.push(format!(
                "{missed} launch(es) have no launch time (no launch_ns, no launch mark on the timeline): {error}"
            ));
        }
        let missed = self.call_stamps_missed.load(Ordering::Relaxed);
        let code = self.call_stamp_error.load(Ordering::Relaxed);
        if missed > 0 && code != 0 {
            let error =
                self.cupti.error(crate::sys::cupti::CUptiResult(code), "cuptiGetTimestamp", "stamping an API call");
            state.warnings.push(format!(
                "{missed} API call stamp(s) could not be taken (those calls have no call time in the Kineto \
                 trace: dur 0): {error}"
            ));
        }
        if unreplayed > 0 {
            state.warnings.push(format!(
                "{unreplayed} kernel launch(es) ran outside Profiler::replay while the metric set needs {} \
                 passes under user replay; they have no counters",
                self.passes
            ));
        }
        if let Some(cuda) = &failures.cuda_error {
            // The context failed: a launch with no record of completing never completed.
            let mut error = cuda.describe();
            if failures.steps.iter().any(|s| s.step == FinishStep::ActivityFlush) {
                error.push_str(
                    "; the activity flush failed too, so some of them may have completed and lost their record",
                );
            }
            let names = state.recent.names();
            state.correlator.context_failed(error, names);
        }
        let open = state.tree.close_all_open(clock_finish.cupti_ns);
        let mut warnings = std::mem::take(&mut state.warnings);
        warnings.extend(failures.warnings());
        if failures.steps.iter().any(|s| s.step == FinishStep::Timestamp) {
            warnings.push("the session's end time is the wall clock's: the CUPTI clock could not be read".into());
        }
        warnings.extend(open);
        let rotation = state.rotation.as_ref().map(super::rotation::Rotation::run);
        drop(state);
        let mut info = self.capture_info(clock_finish, warnings, dropped_ranges, dropped_records);
        info.rotation = rotation;
        info.counter_ranges_lost = lost_ranges;
        info.unprofiled_contexts = unprofiled;
        info.run_end = Some(run_end.with_failures(failures.cuda_error, failures.steps));
        if let Some(counters) = counters.as_mut() {
            info.profiler_pauses = std::mem::take(&mut counters.pauses);
        }
        let leftovers = Leftovers {
            counters,
            evaluated,
            membership: capture.membership.take(),
            primary: capture._primary.take(),
            pm: pm_leftovers,
        };
        Ok((info, leftovers, pm, pc))
    }

    /// Ends the counter side: closes what is open, stops and decodes the last cycle (an
    /// unfinished iteration-replay round is dropped, with a warning), and collects what the
    /// evaluator decoded. A last cycle that cannot be stopped or decoded (a failed context)
    /// is counted in the dropped counter ranges; the cycles before it keep their values.
    fn stop_counters(&self, counters: &mut Counters, failures: &mut Failures) -> EvaluatorOutput {
        let unfinished_round = {
            let replay = self.replay.lock();
            replay.active.then_some(replay.pass + 1)
        };
        if let Some(done) = unfinished_round {
            // An iteration-replay round the program stopped in the middle of: its passes
            // cannot be merged, so they are dropped, and the report says so.
            if let Some(rp) = counters.range_profiler.as_ref().filter(|_| counters.running) {
                while counters.user_depth > 0 && rp.pop().is_ok() {
                    counters.user_depth -= 1;
                }
                let _ = rp.stop();
            }
            counters.running = false;
            self.state.lock().warnings.push(format!(
                "the last iteration-replay round ended after {done} of {} passes; its counters are incomplete \
                 and were dropped",
                self.passes
            ));
        }
        if counters.running {
            self.end_last_cycle(counters, failures);
        } else if counters.restart.take().is_some() {
            // A mid-run cycle failed and the profiler never ran again: the launches since
            // have no counters.
            let what = "never ran: the profiler could not be started again";
            self.drop_cycle(counters, false, what, "the cycles before keep theirs");
        }
        // Every decoded image's counter ranges, from the evaluator thread.
        tracing::debug!("gmprof: finish: waiting for the counter evaluator");
        let stats = counters.evaluator.stats;
        let mut evaluated = counters.evaluator.finish();
        tracing::info!("gmprof: {}", stats.describe(&evaluated, counters.background_evaluation));
        counters.dropped_ranges += evaluated.lost_ranges;
        counters.lost_ranges += evaluated.lost_ranges;
        let mut state = self.state.lock();
        for (cycle, ranges) in std::mem::take(&mut evaluated.cycles) {
            state.correlator.add_counter_ranges(cycle, ranges);
        }
        state.warnings.append(&mut evaluated.errors);
        if stats.waits > 0 {
            state.warnings.push(format!(
                "the launching thread waited {} time(s), {:.1} ms in total, for the counter evaluator to finish \
                 an earlier cycle (a cycle filled faster than it was evaluated)",
                stats.waits,
                stats.waited.as_secs_f64() * 1e3
            ));
        }
        evaluated
    }

    /// Closes the last cycle's open CUPTI ranges (CUPTI stops only with its user ranges
    /// closed; they are closed in the report too, with a warning), stops the range profiler
    /// and decodes the cycle. Each step is tried after a failed one where it can run: the
    /// stop after a failed pop; the decode needs the stop.
    fn end_last_cycle(&self, counters: &mut Counters, failures: &mut Failures) {
        let cycle = counters.cycle;
        if let Some(rp) = counters.range_profiler.as_ref() {
            while counters.user_depth > 0 {
                if let Err(e) = self.retried(|| rp.pop()) {
                    failures.push(FinishStep::RangeProfilerStop, &e);
                    break;
                }
                counters.user_depth -= 1;
            }
        }
        let decoded = match self.stop_cycle(counters) {
            Ok(()) => self.collect_cycle(counters).map_err(|e| (FinishStep::CounterDecode, e)),
            Err(e) => Err((FinishStep::RangeProfilerStop, e)),
        };
        let Err((step, error)) = decoded else { return };
        failures.push(step, &error);
        counters.running = false;
        let (lost, what) = match self.mode {
            ProfilingMode::PerRange => (u64::from(counters.ordinal_in_cycle), "range(s)"),
            _ if counters.rotating => (u64::from(counters.ranges_in_cycle), "measured launch(es)"),
            _ => (self.state.lock().correlator.launches_in_cycle(cycle), "launch(es)"),
        };
        counters.dropped_ranges += lost;
        counters.lost_ranges += lost;
        self.state.lock().warnings.push(undecoded_cycle_warning(cycle, lost, what, step));
    }

    /// Releases CUPTI's objects, after the report exists.
    fn release(&self, leftovers: Leftovers) -> Result<()> {
        let Leftovers { counters, evaluated, membership, primary, pm } = leftovers;
        if let Some(pm) = pm {
            tracing::debug!("gmprof: finish: disabling PM sampling");
            pm.release()?;
        }
        if let Some(mut counters) = counters {
            tracing::debug!("gmprof: finish: disabling the range profiler");
            if let Some(rp) = counters.range_profiler.take() {
                rp.shutdown()?;
            }
            if let Some(mut evaluated) = evaluated {
                drop(std::mem::take(&mut evaluated.images));
                if let Some(host) = evaluated.host.take() {
                    host.shutdown()?;
                }
            }
            counters._api.shutdown()?;
        }
        if let Some(membership) = membership {
            membership.leave()?;
        }
        drop(primary);
        Ok(())
    }
}

/// The warnings for completed activity buffers gmprof could not read to their end, and for
/// dropped-record counts it could not read (`error`: the first such call's).
pub(super) fn activity_read_warnings(stats: &activity::ActivityStats, error: Option<String>) -> Vec<String> {
    let error = error.unwrap_or_else(|| "no error kept".into());
    let mut out = Vec::new();
    if stats.buffers_cut_short > 0 {
        out.push(format!(
            "{} activity buffer(s) could not be read to their end ({error}): the records after that point are lost, \
             so their launches and transfers have no activity record",
            stats.buffers_cut_short
        ));
    }
    if stats.dropped_counts_unread > 0 {
        out.push(format!(
            "CUPTI's count of dropped activity records could not be read after {} buffer(s) ({error}): the dropped \
             activity records may be more than counted",
            stats.dropped_counts_unread
        ));
    }
    out
}

/// The warning for a last counter cycle that could not be stopped or decoded.
pub(super) fn undecoded_cycle_warning(cycle: u32, lost: u64, what: &str, step: FinishStep) -> String {
    let failed = match step {
        FinishStep::CounterDecode => "could not be decoded",
        _ => "could not be stopped, so it was not decoded",
    };
    format!(
        "counter cycle {cycle} {failed}: the counters of its {lost} {what} are dropped (counted in the dropped \
         counter ranges) and left blank; the cycles before it keep theirs"
    )
}
