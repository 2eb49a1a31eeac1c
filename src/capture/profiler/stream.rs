//! A running session's streamed outputs (issue 42): [`Profiler::stream_into`] asks for them,
//! [`Profiler::stream_tick`] (the checkpoint thread's, every few seconds) drains what is
//! complete into the part files once the session has passed its row limit, and the finish
//! ([`Shared::analyze_at_finish`]) ends the stream and builds the report from its aggregates.
//!
//! Below the row limit nothing here touches the session: it keeps every row and the finish
//! is exactly the whole-session one. Past it, every drain moves the complete rows out of the
//! correlator and the completed ranges out of the tree (under the session lock), so the
//! session holds only what is in flight; the report then carries the aggregates
//! ([`Report::streamed`]) in place of rows, and the whole-file row tables are not written.
//! Trace, per_range and per_kernel stream. Counters arrive by cycle (decoded and evaluated
//! after the cycle's image is full), after their kernels and ranges may have completed: a
//! drain holds back what waits for a cycle whose counters are not known yet
//! ([`Shared::settle_counter_cycles`], [`Correlator::drain_complete`]). Kernel replay's
//! positional join is not drained yet, and is refused.
//!
//! On `state` (the session), as `finish` is; `mod.rs` re-exports [`StreamProgress`].

use std::time::Instant;

use super::state::{Profiler, SessionState, Shared, StreamConfig, Streaming};
use crate::analysis::correlate::Correlator;
use crate::checked::activity;
use crate::error::{Error, Result};
use crate::model::pm::PmCapture;
use crate::model::session::SessionTree;
use crate::model::{ProfilingMode, RunEnd};
use crate::report::stream::{Drained, PipelineCore, PmFeed, StreamMeta, StreamPipeline, StreamWriter, StreamedSummary};
use crate::report::{CaptureInfo, Report};

/// What one [`Profiler::stream_tick`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamProgress {
    /// The session does not stream (not asked for, or it could not start).
    Off,
    /// Below the row limit: nothing drained; the session holds `launches`.
    BelowLimit {
        /// Launches held.
        launches: u64,
    },
    /// Streaming: what this drain moved, and the launches and ranges still held after it.
    Streaming {
        /// Rows written by this drain.
        drained: Drained,
        /// Launches still held (in flight).
        launches_held: u64,
        /// Ranges still in the session tree (open or in flight).
        ranges_held: u64,
        /// PM samples held (those a kernel still to be written may overlap); `None` without
        /// PM sampling.
        pm_samples_held: Option<u64>,
    },
}

impl Profiler {
    /// Streams this session's rows into part files under `config.dir` once it has heard more
    /// than `config.row_limit` launches. Trace, per_range and per_kernel mode; call it before
    /// the program launches anything.
    pub fn stream_into(&self, config: StreamConfig) -> Result<()> {
        self.ensure_running()?;
        if self.shared.mode == ProfilingMode::KernelReplay {
            return Err(Error::InvalidConfig(
                "streamed outputs are not available in kernel_replay mode yet (trace, per_range and per_kernel \
                 stream): use --mode per_kernel for per-kernel counters of a whole run"
                    .into(),
            ));
        }
        // Lock order: capture, then state.
        let measured_levels = (self.shared.mode == ProfilingMode::PerRange)
            .then(|| {
                let capture = self.shared.capture.lock();
                capture.as_ref().and_then(|c| c.counters.as_ref()).map(|c| c.config.num_nesting_levels)
            })
            .flatten();
        let mut state = self.shared.state.lock();
        state.stream = Some(Box::new(Streaming {
            measured_levels,
            config,
            pipeline: None,
            failed_drains: 0,
            first_failure: None,
            window_writes: Default::default(),
            times: Default::default(),
        }));
        Ok(())
    }

    /// Whether the session has started streaming (passed its row limit): its rows are then
    /// not all in memory, and a whole-session checkpoint would describe only what is left.
    pub fn is_streaming(&self) -> bool {
        self.shared.state.lock().stream.as_ref().is_some_and(|s| s.pipeline.is_some())
    }

    /// One streaming step while the program runs: past the row limit it flushes CUPTI's
    /// activity buffers and drains what is complete into the part files (segments close by
    /// their policy). Below the limit it only counts.
    pub fn stream_tick(&self) -> Result<StreamProgress> {
        self.ensure_running()?;
        {
            // Below the limit nothing is flushed or drained: the session runs as it would
            // without streaming (launches are counted as they are made, not by the flush).
            let state = self.shared.state.lock();
            match state.stream.as_deref() {
                None => return Ok(StreamProgress::Off),
                Some(s) if s.pipeline.is_none() => {
                    let launches = state.correlator.launch_count() as u64;
                    if launches <= s.config.effective_row_limit() {
                        return Ok(StreamProgress::BelowLimit { launches });
                    }
                }
                Some(_) => {}
            }
        }
        // CUPTI's default flush: the buffers whose records are complete. A forced flush while
        // the GPU runs hands over the records of kernels still running without their times
        // (on an H200, llm.c's streamed drains every 2 s got 570 such records in 300 s).
        activity::flush_all(&self.shared.cupti, false)?;
        let moved = Instant::now();
        self.shared.drain_activity();
        let activity_ns = moved.elapsed().as_nanos() as u64;
        let settled = self.shared.settle_counter_cycles();
        let progress = self.shared.stream_step(Instant::now(), settled, activity_ns);
        self.shared.live_health();
        Ok(progress)
    }

    /// Asks the flight recorder for a window (a signal, the capture socket, the program):
    /// it opens at the next step, holding the ring. `why` says who asked. Returns false when
    /// the session has no flight recorder or has not started streaming yet (its first drain).
    pub fn request_flight_window(&self, why: &str) -> bool {
        match self.pipeline_handle() {
            Some(handle) => handle.lock().as_mut().is_some_and(|core| core.request_window(why)),
            None => false,
        }
    }

    /// Closes the open segments now, so every row streamed so far is in a complete part
    /// file (a checkpoint, a signal the program handles itself).
    pub fn close_stream_segments(&self) -> Result<()> {
        match self.pipeline_handle() {
            Some(handle) => handle.lock().as_mut().map_or(Ok(()), PipelineCore::close_segments),
            None => Ok(()),
        }
    }

    /// The streaming pipeline's state, taken with the session's lock let go before it is
    /// locked: a drain holds it while it writes (hundreds of ms), and the program's launches
    /// must not wait for that behind the session's lock (the checkpoint thread closed the
    /// segments every 30 s under the session's lock).
    fn pipeline_handle(&self) -> Option<crate::report::stream::PipelineHandle> {
        let state = self.shared.state.lock();
        state.stream.as_ref().and_then(|s| s.pipeline.as_ref()).map(StreamPipeline::handle)
    }
}

/// What the end of a drain ([`Shared::after_drain`]) adds to the drains' times and census.
struct DrainTail {
    times: std::sync::Arc<parking_lot::Mutex<crate::report::stream::DrainTimes>>,
    /// The session's lock held moving CUPTI's records in before the drain.
    activity_ns: u64,
    /// The drain's time and, of it, its time under the session's lock.
    drain_ns: u64,
    held_ns: u64,
    /// The memory census so far, when it is logged (`gmprof::census` at debug).
    census: Option<Vec<(&'static str, usize)>>,
}

/// The most completed ranges a drain removes from the session tree under one hold of the
/// session's lock (about 1 ms of removals: the program's launches wait no longer for them).
pub(super) const REMOVALS_PER_HOLD: usize = 4096;

/// After a drain, with no lock held: every `every` drains
/// ([`StreamSettings::release_every`](crate::report::stream::StreamSettings)), gives the
/// allocator's free pages back when `release`
/// ([`StreamSettings::release_memory`](crate::report::stream::StreamSettings)), timed into
/// `times`.
fn release_memory(release: bool, every: u64, times: &parking_lot::Mutex<crate::report::stream::DrainTimes>) {
    if release && times.lock().drains % every.max(1) == 1 % every.max(1) {
        let t = Instant::now();
        crate::report::stream::release_free_memory();
        times.lock().add_release(t.elapsed().as_nanos() as u64);
    }
}

impl Shared {
    /// Starts the pipeline of `streaming` (its writer's files); an error stops streaming for
    /// good, with the warning in `warnings`.
    fn start_pipeline(&self, streaming: &mut Streaming, warnings: &mut Vec<String>) -> bool {
        if streaming.pipeline.is_some() {
            return true;
        }
        let meta = StreamMeta::new(self.mode, self.metric_names.clone());
        match StreamWriter::create(&streaming.config.dir, &meta, streaming.config.settings.clone()) {
            Ok(writer) => {
                tracing::info!(
                    dir = %streaming.config.dir.display(),
                    "gmprof: past the row limit of {} launches: streaming rows to part files",
                    streaming.config.row_limit
                );
                let mut pipeline = StreamPipeline::new(writer, &self.metric_set, self.mode);
                if let Some(levels) = streaming.measured_levels {
                    pipeline.set_measured_levels(levels);
                }
                // The flight recorder's windows are tables of this run: its mode, metrics.
                let template = Report::analyze(
                    CaptureInfo::new(self.mode),
                    &self.metric_set,
                    &SessionTree::new(),
                    Correlator::new(),
                );
                pipeline.set_window_template(template);
                streaming.pipeline = Some(pipeline);
                true
            }
            Err(e) => {
                warnings.push(format!(
                    "the streamed outputs could not start ({e}); every row is kept and written whole instead"
                ));
                false
            }
        }
    }

    /// The PM samples decoded since the last drain, taken out of the PM session (under the
    /// session's lock: its lock comes after it), for a pipeline that streams them; the first
    /// drain of a sampling session starts streaming them. `None` without PM sampling, or when
    /// the PM tables could not start (the samples then stay whole in the session).
    fn pm_feed(&self, pipeline: &mut StreamPipeline, warnings: &mut Vec<String>) -> Option<PmFeed> {
        let pm = self.pm.lock();
        let Some(session) = pm.as_ref() else {
            // The sampler is gone (stopped): kernels stop waiting for it.
            return pipeline.streams_pm().then(PmFeed::default);
        };
        if !pipeline.streams_pm() {
            if let Err(e) = pipeline.enable_pm(session.metrics()) {
                warnings.push(format!(
                    "PM sampling's streamed tables could not start ({e}): the samples are kept whole and the kernels \
                     streamed without PM values"
                ));
                return None;
            }
        }
        let (samples, decoding) = session.take_decoded();
        Some(PmFeed { samples, decoding })
    }

    /// The live metrics' feed, when they are exported.
    fn live_feed(&self) -> Option<crate::report::live::LiveFeed> {
        self.state.lock().stream.as_ref().and_then(|s| s.config.settings.live.clone())
    }

    /// After a drain, for the live metrics (when exported): CUPTI's dropped activity records
    /// and PM sampling's lost samples so far, counts the drains do not see.
    pub(super) fn live_health(&self) {
        let Some(feed) = self.live_feed() else { return };
        feed.set_records_dropped(crate::capture::hub::process_activity_stats().records_dropped);
        if let Some(t) = crate::checked::self_time::snapshot() {
            feed.set_callback_times(t.api_callback_ns, t.activity_buffer_ns);
        }
        if let Some(pm) = self.pm.lock().as_ref() {
            feed.set_pm_samples_lost(pm.lost_samples());
        }
    }

    /// The drain of [`Profiler::stream_tick`], on records already drained into the session
    /// (which held the session's lock `activity_ns`); `settled`: the first counter cycle
    /// whose counters are not in yet.
    pub(super) fn stream_step(&self, now: Instant, settled: Option<u32>, activity_ns: u64) -> StreamProgress {
        let started = now;
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let Some(streaming) = state.stream.as_deref_mut() else { return StreamProgress::Off };
        if streaming.pipeline.is_none() {
            let launches = state.correlator.launch_count() as u64;
            if launches <= streaming.config.effective_row_limit() {
                return StreamProgress::BelowLimit { launches };
            }
            if !self.start_pipeline(streaming, &mut state.warnings) {
                state.stream = None;
                return StreamProgress::Off;
            }
        }
        let Some(pipeline) = streaming.pipeline.as_mut() else { return StreamProgress::Off };
        // The first half under the session's lock: what is complete leaves the session. The
        // pipeline's lock is taken before the session's is let go: drains follow each other
        // in order, and the finish (session, then pipeline) comes after this one.
        let pm = self.pm_feed(pipeline, &mut state.warnings);
        let handle = pipeline.handle();
        let mut core_guard = handle.lock();
        let Some(core) = core_guard.as_mut() else { return StreamProgress::Off };
        let census = tracing::enabled!(target: "gmprof::census", tracing::Level::DEBUG);
        let took = census.then(Instant::now);
        let input = core.take(&mut state.correlator, &mut state.tree, settled, pm);
        let took = took.map(|t| t.elapsed().as_nanos() as usize);
        // Nested driver ids of calls already drained are not needed any more.
        let held = state.correlator.held_call_ids();
        state.aliases.retain(|_, outer| held.contains(outer));
        let launches_held = state.correlator.launch_count() as u64;
        let mut census = census.then(|| {
            let mut out = Vec::with_capacity(64);
            out.extend(state.tree.census());
            out.extend(state.correlator.census());
            out.extend([
                ("session.aliases", state.aliases.len()),
                ("session.alias_log", state.alias_log.len()),
                ("session.after_finish", state.after_finish.len()),
                ("session.after_seal", state.after_seal.len()),
                ("session.warnings", state.warnings.len()),
            ]);
            out
        });
        let times = std::sync::Arc::clone(&streaming.times);
        let release = streaming.config.settings.release_memory;
        let release_every = streaming.config.settings.release_every;
        let window_writes = std::sync::Arc::clone(&streaming.window_writes);
        drop(guard);
        let held_ns = started.elapsed().as_nanos() as u64;
        // The live metrics' stall reasons: PC sampling's running totals, read with the
        // session let go (the PC drain thread takes the same lock every 100 ms).
        if let Some(sums) = core.live_sums() {
            if let Some(pc) = self.pc.lock().as_ref() {
                let (totals, samples, dropped) = pc.read(crate::report::live::stalls::running_totals);
                sums.pc_totals(totals, samples, dropped);
            }
        }
        let written = core.process(input, &self.metric_set, Instant::now());
        let windows = core.take_window_jobs();
        times.lock().add(held_ns, started.elapsed().as_nanos() as u64);
        if let Some(items) = census.as_mut() {
            items.extend([("ns.take", took.unwrap_or(0)), ("ns.locked", held_ns as usize)]);
            items.push(("ns.drain", started.elapsed().as_nanos() as usize));
            items.extend(core.census());
            items.extend(crate::report::stream::memory::process_memory());
        }
        let drain_ns = started.elapsed().as_nanos() as u64;
        let tail = DrainTail { times: std::sync::Arc::clone(&times), activity_ns, drain_ns, held_ns, census };
        let drained = written.as_ref().copied().unwrap_or_default();
        let writing = core_guard;
        if let Err(e) = written {
            // The drained rows that were not written are lost: counted and said at the end.
            drop(writing);
            tracing::warn!("gmprof: a streamed drain failed: {e}");
            if let Some(s) = self.state.lock().stream.as_deref_mut() {
                if let Some(feed) = &s.config.settings.live {
                    feed.drain_failed();
                }
                s.failed_drains += 1;
                s.first_failure.get_or_insert_with(|| e.to_string());
            }
            return self.after_drain(&handle, drained, launches_held, tail);
        }
        if windows.is_empty() {
            drop(writing);
            release_memory(release, release_every, &times);
            return self.after_drain(&handle, drained, launches_held, tail);
        }
        // The flight recorder's windows are written with the session let go: the program's
        // launches do not wait for them. The finish waits for them (`window_writes`, taken
        // here under the writer's lock, which the finish takes after the session's).
        let window_lock = window_writes.lock();
        drop(writing);
        let mut failed = Vec::new();
        for job in windows {
            let name = job.name().to_owned();
            if let Err(e) = job.write() {
                tracing::warn!("gmprof: the flight recorder's {name} could not be written: {e}");
                failed.push((name, e.to_string()));
            }
        }
        drop(window_lock);
        if !failed.is_empty() {
            if let Some(w) = handle.lock().as_mut() {
                for (name, e) in &failed {
                    w.window_failed(name, e);
                }
            }
        }
        release_memory(release, release_every, &times);
        self.after_drain(&handle, drained, launches_held, tail)
    }

    /// The end of a drain: the ranges it completed leave the session tree (the session's
    /// lock, then the pipeline's, the finish's order); what the session still holds.
    fn after_drain(
        &self,
        handle: &crate::report::stream::PipelineHandle,
        drained: Drained,
        launches_held: u64,
        tail: DrainTail,
    ) -> StreamProgress {
        // In batches of at most REMOVALS_PER_HOLD, the session let go between them (a drain
        // of llm.c completes about 50 000 ranges: 15 ms or more at once); the ranges removed
        // are freed with it let go.
        let mut removal_ns = 0;
        let mut longest_ns = 0;
        let (pm_samples_held, ranges_held) = loop {
            let locked = Instant::now();
            let mut state = self.state.lock();
            let mut core = handle.lock();
            let (removed, more) = match core.as_mut() {
                Some(core) => core.remove_completed_up_to(&mut state.tree, REMOVALS_PER_HOLD),
                None => (Default::default(), false),
            };
            let held = core.as_ref().and_then(|c| c.pm_samples_held()).map(|n| n as u64);
            drop(core);
            let ranges_held = state.tree.len() as u64;
            drop(state);
            let ns = locked.elapsed().as_nanos() as u64;
            removal_ns += ns;
            longest_ns = longest_ns.max(ns);
            drop(removed);
            if !more {
                break (held, ranges_held);
            }
        };
        if let Some(feed) = self.live_feed() {
            let other = tail.activity_ns + removal_ns;
            feed.drain_time(tail.drain_ns + other, tail.held_ns + other);
        }
        let mut times = tail.times.lock();
        times.add_other_lock(tail.activity_ns + removal_ns, tail.activity_ns.max(longest_ns));
        if let Some(mut items) = tail.census {
            items.extend([("ns.activity", tail.activity_ns as usize), ("ns.removal", removal_ns as usize)]);
            let line = crate::report::stream::memory::census_line(&items);
            tracing::debug!(target: "gmprof::census", "drain {}: {line}", times.drains);
        }
        StreamProgress::Streaming { drained, launches_held, ranges_held, pm_samples_held }
    }

    /// The finish's report: the whole-session one ([`Report::analyze`]) unless the session
    /// streams and passed its row limit (by now); then the stream ends (the last rows, the
    /// root row, the whole run's aggregates, every segment closed) and the report carries
    /// the aggregates and no rows.
    pub(super) fn analyze_at_finish(
        &self,
        state: &mut SessionState,
        correlator: Correlator,
        mut info: CaptureInfo,
        pm: &mut Option<PmCapture>,
        pc: Option<&crate::model::pc::PcCapture>,
    ) -> Report {
        let past_limit =
            |s: &Streaming| s.pipeline.is_some() || correlator.launch_count() as u64 > s.config.effective_row_limit();
        let Some(mut streaming) = state.stream.take().filter(|s| past_limit(s)) else {
            return Report::analyze(info, &self.metric_set, &state.tree, correlator);
        };
        if !self.start_pipeline(&mut streaming, &mut info.warnings) {
            return Report::analyze(info, &self.metric_set, &state.tree, correlator);
        }
        let Some(mut pipeline) = streaming.pipeline.take() else {
            return Report::analyze(info, &self.metric_set, &state.tree, correlator);
        };
        if info.rotation.take().is_some() {
            info.warnings.push(
                "per_kernel ran in rotation, but the rows were streamed: the positions table (positions.csv, the \
                 report's rotation section) is made from the whole-file rows and is not written; measured and \
                 unmeasured launches are in kernels/ (status unmeasured); set GMPROF_STREAM=0 for the table"
                    .into(),
            );
        }
        // A drain may be writing its batch (the writer's lock, taken under the session's,
        // which this finish holds: no new batch starts), then flight-recorder windows
        // (`window_writes`, taken before the writer's is let go): both end before the run's
        // outputs. The writer's lock is let go before `window_writes` is taken, as the drain
        // takes them in the other order.
        drop(pipeline.handle().lock());
        let window_writes = std::sync::Arc::clone(&streaming.window_writes);
        let _written = window_writes.lock();
        let end_ns = info.clock.map_or(0, |c| c.finish.cupti_ns);
        // A run ending abnormally (a signal, a CUDA error) asks the flight recorder for a
        // last window.
        let ending = match &info.run_end {
            None | Some(RunEnd::Finished { .. }) | Some(RunEnd::Checkpoint { .. }) => None,
            Some(other) => Some(format!("the run ended abnormally: {}", other.describe())),
        };
        // The PM samples decoded since the last drain (the sampler has stopped) go to the
        // parts too; the report keeps the sampler's counts and errors, no sample.
        let mut pm_feed = None;
        if let Some(capture) = pm.as_mut() {
            match pipeline.enable_pm(capture.metrics.clone()) {
                Ok(()) => pm_feed = Some(PmFeed { samples: std::mem::take(&mut capture.samples), decoding: false }),
                Err(e) => info.warnings.push(format!(
                    "PM sampling's streamed tables could not start ({e}): the kernels were streamed without PM values"
                )),
            }
        }
        if let Some(capture) = pc {
            // The samples since the last drain, for the live metrics' last values.
            pipeline.live_pc_totals(crate::report::live::stalls::running_totals(capture));
        }
        let ended = pipeline.finish(correlator, &mut state.tree, &self.metric_set, end_ns, ending, pm_feed);
        if streaming.failed_drains > 0 {
            info.warnings.push(format!(
                "{} streamed drain(s) failed, and the rows they had taken are not in the part files: {}",
                streaming.failed_drains,
                streaming.first_failure.as_deref().unwrap_or("no error kept")
            ));
        }
        let limit = streaming.config.effective_row_limit();
        let flight = streaming.config.settings.flight.is_some();
        let live = streaming.config.settings.live.is_some();
        match ended {
            Ok(end) => {
                info.warnings.extend(end.warnings.iter().cloned());
                let mut report = Report::analyze(info, &self.metric_set, &SessionTree::new(), Correlator::new());
                let why = if flight {
                    "the run had a flight recorder (GMPROF_SLOW_STEP, --slow-step), which streams from the run's \
                     start"
                        .to_owned()
                } else if live {
                    "the run exported live metrics (--metrics-port, --otlp), which stream from the \
                     run's start"
                        .to_owned()
                } else {
                    format!("the run launched more than {limit} kernels (GMPROF_ROW_LIMIT)")
                };
                let pm_dirs = match end.pm {
                    Some(pm) if pm.short_left_out > 0 => format!(
                        "pm/ (the kernels that fill at least half a PM sample window; {} shorter kernel(s) left out, \
                         their samples in pm_samples/: GMPROF_PM_KERNEL_ROWS=all writes them), pm_samples/, ",
                        pm.short_left_out
                    ),
                    Some(_) => "pm/, pm_samples/, ".to_owned(),
                    None => String::new(),
                };
                let summary = end.summary(
                    format!(
                        "{why}: every row was streamed to part files beside report.json (kernels/, transfers/, \
                         ranges/, steps/, step_ranges/, {pm_dirs}aggregates/) and left memory; the whole-file row \
                         tables are not written"
                    ),
                    limit,
                );
                report.meta.flagged_kernel_rows = end.counts.flagged_rows;
                report.meta.orphan_counter_ranges = end.counts.orphan_counter_ranges;
                report.meta.counts = end.counts;
                report.meta.kernel_count = summary.kernels;
                report.meta.total_gpu_time_ns = summary
                    .aggregates
                    .iter()
                    .filter(|a| a.quantity == crate::analysis::online::AggregateQuantity::DurationNs)
                    .try_fold(0u64, |sum, a| a.summary.total_ns.map(|t| sum + t));
                let times = *streaming.times.lock();
                report.streamed = Some(StreamedSummary {
                    drain_times: (times.drains > 0).then_some(times),
                    pm_kernels_left_out: end.pm.map_or(0, |pm| pm.short_left_out),
                    pm_kernels_left_out_ns: end.pm.map_or(0, |pm| pm.short_left_out_ns),
                    ..summary
                });
                report
            }
            Err(e) => {
                info.warnings.push(format!(
                    "the streamed outputs could not be finished ({e}): the part files closed before are complete, \
                     the rows of the open segments are lost"
                ));
                Report::analyze(info, &self.metric_set, &SessionTree::new(), Correlator::new())
            }
        }
    }
}
