//! [`Profiler::finish`]: the ordered end of a capture, then analysis and the report.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::checked::activity;
use crate::checked::driver;
use crate::error::{Error, Result};
use crate::model::{ClockPair, ClockSync};
use crate::report::{CaptureInfo, Report};

use super::*;

impl Profiler {
    /// Stops profiling, correlates and aggregates. Ranges still open are closed with a
    /// warning in the report.
    pub fn finish(self) -> Result<Report> {
        let shared = &self.shared;
        if shared.finished.swap(true, Ordering::AcqRel) {
            return Err(Error::InvalidState("finish was already called".into()));
        }
        let t0 = Instant::now();
        let mut capture = shared
            .capture
            .lock()
            .take()
            .ok_or_else(|| Error::InvalidState("the profiler has no live capture".into()))?;
        tracing::debug!("gmprof: finish: synchronizing the context");
        driver::set_current(&shared.driver, capture.context)?;
        driver::synchronize(&shared.driver)?;
        let clock_finish = ClockPair { cupti_ns: activity::timestamp(&shared.cupti)?, unix_ns: unix_ns() };
        let mut cycles = 0;
        let mut dropped_ranges = 0;
        if let Some(mut counters) = capture.counters.take() {
            tracing::debug!("gmprof: finish: decoding the last counter cycle");
            let unfinished_round = {
                let replay = shared.replay.lock();
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
                shared.state.lock().warnings.push(format!(
                    "the last iteration-replay round ended after {done} of {} passes; its counters are incomplete \
                     and were dropped",
                    shared.passes
                ));
            }
            if counters.running {
                // CUPTI stops only with its user ranges closed (ranges left open are closed
                // in the report too, with a warning).
                if let Some(rp) = counters.range_profiler.as_ref() {
                    while counters.user_depth > 0 {
                        rp.pop()?;
                        counters.user_depth -= 1;
                    }
                }
                shared.finish_cycle(&mut counters)?;
            }
            // Every decoded image's counter ranges, from the evaluator thread. Its images
            // stay alive (in `evaluated`) until the range profiler is disabled.
            tracing::debug!("gmprof: finish: waiting for the counter evaluator");
            let stats = counters.evaluator.stats;
            let mut evaluated = counters.evaluator.finish();
            tracing::info!("gmprof: {}", stats.describe(&evaluated, counters.background_evaluation));
            {
                let mut state = shared.state.lock();
                for (cycle, ranges) in std::mem::take(&mut evaluated.cycles) {
                    state.correlator.add_counter_ranges(cycle, ranges);
                }
                state.warnings.append(&mut evaluated.errors);
                if stats.waits > 0 {
                    state.warnings.push(format!(
                        "the launching thread waited {} time(s), {:.1} ms in total, for the counter evaluator to \
                         finish an earlier cycle (a cycle filled faster than it was evaluated)",
                        stats.waits,
                        stats.waited.as_secs_f64() * 1e3
                    ));
                }
            }
            tracing::debug!("gmprof: finish: disabling the range profiler");
            if let Some(rp) = counters.range_profiler.take() {
                rp.shutdown()?;
            }
            drop(evaluated.images);
            cycles = counters.cycle + 1;
            dropped_ranges = counters.dropped_ranges;
            if let Some(host) = evaluated.host.take() {
                host.shutdown()?;
            }
            counters._api.shutdown()?;
        }
        // Leaving the hub flushes this context's records to us; the stats are read first.
        let mut dropped_records = 0;
        if let Some(membership) = capture.membership.take() {
            tracing::debug!("gmprof: finish: flushing activity");
            membership.flush()?;
            let stats = membership.stats();
            dropped_records = stats.records_dropped;
            let mut state = shared.state.lock();
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
            drop(state);
            membership.leave()?;
        }
        shared.drain_activity();
        drop(capture._primary);
        tracing::debug!("gmprof: finish: analyzing");

        let unreplayed = shared.replay.lock().unreplayed_launches;
        let mut state = shared.state.lock();
        if unreplayed > 0 {
            state.warnings.push(format!(
                "{unreplayed} kernel launch(es) ran outside Profiler::replay while the metric set needs {} \
                 passes under user replay; they have no counters",
                shared.passes
            ));
        }
        let open = state.tree.close_all_open(clock_finish.cupti_ns);
        let mut warnings = std::mem::take(&mut state.warnings);
        warnings.extend(open);
        let mut info = CaptureInfo::new(shared.mode);
        info.device_name = Some(shared.device_name.clone());
        info.chip = (!shared.chip.is_empty()).then(|| shared.chip.clone());
        info.dropped_counter_ranges = dropped_ranges;
        info.dropped_activity_records = dropped_records;
        info.started_unix_ns = Some(shared.started_unix_ns);
        info.finished_unix_ns = Some(clock_finish.unix_ns);
        info.clock = Some(ClockSync { start: shared.clock_start, finish: clock_finish });
        info.warnings = warnings;
        let correlator = std::mem::take(&mut state.correlator);
        let report = Report::analyze(info, &shared.metric_set, &state.tree, correlator);
        tracing::debug!(cycles, elapsed = ?t0.elapsed(), "gmprof: finished");
        Ok(report)
    }
}
