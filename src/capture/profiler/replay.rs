//! User replay: [`Profiler::replay`] (closure replay) and iteration replay, which run a
//! multi-pass metric set's passes and check each pass against pass 0.

use crate::capture::stream_capture::Wait;
use crate::checked::activity;
use crate::checked::driver;
use crate::error::{Error, Result};
use crate::model::{ProfilingMode, RangeId};

use super::state::{Profiler, ReplayState, Shared};

impl Profiler {
    /// Runs `body` once per replay pass the metric set needs, passing the pass index, and
    /// returns the last pass's result. This is closure replay, for the user-replay modes
    /// ([`ProfilingMode::PerKernel`], [`ProfilingMode::PerRange`]) with a metric set that
    /// needs several passes: each pass collects part of the counters, and CUPTI merges them.
    ///
    /// Pass 0 is what the report shows (its ranges, kernels and times); later passes must
    /// run the same work: their ranges and kernels are matched to pass 0's by position,
    /// and a kernel whose name, grid or block differs from pass 0's gets status
    /// `replay_mismatch` and no metrics (in PerRange, its ranges lose their counters),
    /// never a blind merge. The work must be repeatable: re-running it must not depend on
    /// the state the previous pass left (an optimizer step, for instance, changes weights,
    /// which is fine for counters but not for control flow).
    ///
    /// With a one-pass metric set, or in the other modes, `body` runs once.
    pub fn replay<R>(&self, mut body: impl FnMut(usize) -> R) -> Result<R> {
        self.ensure_running()?;
        let shared = &self.shared;
        if !shared.user_replay() || shared.passes <= 1 {
            return Ok(body(0));
        }
        {
            let mut replay = shared.replay.lock();
            if replay.active {
                return Err(Error::InvalidState("Profiler::replay cannot be nested".into()));
            }
            replay.active = true;
            replay.kernel_script.clear();
            replay.range_script.clear();
            replay.pass_kernels.clear();
            replay.mismatched_ranges.clear();
        }
        let result = self.run_passes(&mut body);
        let mut replay = shared.replay.lock();
        replay.active = false;
        replay.pass = 0;
        result
    }

    pub(super) fn run_passes<R>(&self, body: &mut impl FnMut(usize) -> R) -> Result<R> {
        let shared = &self.shared;
        let passes = shared.passes;
        let mut last = None;
        // CUPTI says when it has every pass; `passes` is what gmprof expects it to need.
        for pass in 0..passes * 2 {
            shared.begin_pass(pass);
            shared.start_pass()?;
            last = Some(body(pass));
            if shared.end_pass(pass)? {
                break;
            }
        }
        shared.finish_replay_round()?;
        last.ok_or_else(|| Error::InvalidState("a replay ran no pass".into()))
    }
}

impl Shared {
    /// Resets the per-pass cursors for pass `pass`.
    pub(super) fn begin_pass(&self, pass: usize) {
        let mut replay = self.replay.lock();
        replay.pass = pass;
        replay.kernel_cursor = 0;
        replay.range_cursor = 0;
        replay.extra_open = 0;
        if pass > 0 {
            replay.pass_kernels.push(Vec::new());
        }
    }

    /// Stops pass `pass` and checks it; true when CUPTI has every pass (or gmprof gives up).
    pub(super) fn end_pass(&self, pass: usize) -> Result<bool> {
        let passes = self.passes;
        let complete = self.stop_pass(pass)?;
        let mut replay = self.replay.lock();
        if pass > 0 && replay.range_cursor < replay.range_script.len() {
            let missing: Vec<RangeId> = replay.range_script[replay.range_cursor..].iter().map(|(_, id)| *id).collect();
            replay.mismatched_ranges.extend(missing);
            drop(replay);
            self.state.lock().warnings.push(format!(
                "replay pass {pass} pushed fewer ranges than pass 0; the ranges it did not repeat lose their counters"
            ));
        } else {
            drop(replay);
        }
        if complete {
            if pass + 1 != passes {
                self.state
                    .lock()
                    .warnings
                    .push(format!("CUPTI had every pass after {} replay pass(es); gmprof expected {passes}", pass + 1));
            }
            return Ok(true);
        }
        if pass + 1 >= passes * 2 {
            self.state.lock().warnings.push(format!(
                "CUPTI did not report all passes submitted after {} replay passes; counters may be incomplete",
                pass + 1
            ));
            return Ok(true);
        }
        Ok(false)
    }

    /// After the last pass: decodes, re-arms, compares the passes, ends the replay.
    pub(super) fn finish_replay_round(&self) -> Result<()> {
        {
            let mut guard = self.capture.lock();
            if let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) {
                self.collect_cycle(counters)?;
                self.rearm(counters)?;
                super::counters::next_cycle(counters);
            }
        }
        // Every pass's activity records are needed to compare the passes.
        activity::flush_all(&self.cupti, true)?;
        self.drain_activity();
        let mut replay = self.replay.lock();
        self.check_replay(&mut replay);
        // The round's records are all in (flushed above) and compared: what was kept to
        // compare them is not needed again, so a long training run does not accumulate it.
        replay.signatures.clear();
        replay.tracked.clear();
        replay.replayed.clear();
        replay.rounds += 1;
        Ok(())
    }

    /// Iteration replay: the named range opens. Starts a pass (and a round at pass 0).
    pub(super) fn begin_iteration_instance(&self) -> Result<()> {
        let pass = {
            let mut replay = self.replay.lock();
            if !replay.active {
                replay.active = true;
                replay.pass = 0;
                replay.kernel_script.clear();
                replay.range_script.clear();
                replay.pass_kernels.clear();
                replay.mismatched_ranges.clear();
            } else {
                replay.pass += 1;
            }
            replay.pass
        };
        self.begin_pass(pass);
        self.start_pass()
    }

    /// Iteration replay: the named range closed. Ends its pass, and the round when complete.
    pub(super) fn end_iteration_instance(&self) -> Result<()> {
        let pass = self.replay.lock().pass;
        if self.end_pass(pass)? {
            self.finish_replay_round()?;
            let mut replay = self.replay.lock();
            replay.active = false;
            replay.pass = 0;
        }
        Ok(())
    }

    /// Starts one user-replay pass.
    pub(super) fn start_pass(&self) -> Result<()> {
        let mut guard = self.capture.lock();
        let capture = guard.as_mut().ok_or_else(|| Error::InvalidState("the profiler has no live capture".into()))?;
        driver::set_current(&self.driver, capture.context)?;
        let Some(counters) = capture.counters.as_mut() else { return Ok(()) };
        if let Some(rp) = counters.range_profiler.as_ref() {
            rp.start()?;
            counters.running = true;
        }
        Ok(())
    }

    /// Ends one user-replay pass; returns whether CUPTI has every pass.
    pub(super) fn stop_pass(&self, pass: usize) -> Result<bool> {
        let mut guard = self.capture.lock();
        let capture = guard.as_mut().ok_or_else(|| Error::InvalidState("the profiler has no live capture".into()))?;
        driver::set_current(&self.driver, capture.context)?;
        // Not inside a program's stream capture, which a synchronize would invalidate (the
        // captured work has not run: there is nothing to wait for).
        if !self.skipped_waits.skip(Wait::ReplayPass) {
            driver::synchronize(&self.driver)?;
        }
        let Some(counters) = capture.counters.as_mut() else { return Ok(true) };
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(true) };
        let mut unclosed = 0;
        while counters.user_depth > 0 {
            rp.pop()?;
            counters.user_depth -= 1;
            unclosed += 1;
        }
        let stop = rp.stop()?;
        counters.running = false;
        drop(guard);
        if unclosed > 0 {
            self.state.lock().warnings.push(format!(
                "replay pass {pass}: {unclosed} range(s) were still open when the pass ended; they were closed there"
            ));
        }
        Ok(stop.all_passes_submitted)
    }

    /// Compares the later replay passes with pass 0 and flags what differs.
    pub(super) fn check_replay(&self, replay: &mut ReplayState) {
        let mut mismatched: Vec<(u32, Option<RangeId>)> = Vec::new();
        let mut unverified = 0u64;
        let mut warnings = Vec::new();
        for (index, kernels) in replay.pass_kernels.iter().enumerate() {
            let pass = index + 1;
            if kernels.len() != replay.kernel_script.len() {
                warnings.push(format!(
                    "replay pass {pass} launched {} kernel(s), pass 0 launched {}; the kernels from the first \
                     difference on are flagged replay_mismatch",
                    kernels.len(),
                    replay.kernel_script.len()
                ));
            }
            for (position, (first, range)) in replay.kernel_script.iter().enumerate() {
                let Some(other) = kernels.get(position) else {
                    mismatched.push((*first, *range));
                    continue;
                };
                match (replay.signatures.get(first), replay.signatures.get(other)) {
                    (Some(a), Some(b)) if a == b => {}
                    (Some(a), Some(b)) => {
                        if mismatched.len() < 8 {
                            warnings.push(format!(
                                "replay pass {pass}, kernel {position}: {} grid {:?} block {:?} where pass 0 ran {} \
                                 grid {:?} block {:?}",
                                b.0, b.1, b.2, a.0, a.1, a.2
                            ));
                        }
                        mismatched.push((*first, *range));
                    }
                    _ => unverified += 1,
                }
            }
        }
        let mut state = self.state.lock();
        if unverified > 0 {
            warnings.push(format!(
                "{unverified} replayed kernel(s) could not be compared with pass 0 (activity records missing)"
            ));
        }
        let mut flagged_ranges: Vec<RangeId> = std::mem::take(&mut replay.mismatched_ranges);
        for (correlation_id, range) in &mismatched {
            state.correlator.flag_replay_mismatch(*correlation_id);
            flagged_ranges.extend(range);
        }
        if self.mode == ProfilingMode::PerRange {
            // A measured range holds its descendants' kernels: flag the ancestors too.
            let mut all = Vec::new();
            for id in flagged_ranges {
                let mut at = Some(id);
                while let Some(node) = at.and_then(|i| state.tree.get(i)) {
                    all.push(node.id);
                    at = node.parent;
                }
            }
            for id in all {
                state.correlator.flag_range_replay_mismatch(id);
            }
        }
        state.warnings.extend(warnings);
    }
}
