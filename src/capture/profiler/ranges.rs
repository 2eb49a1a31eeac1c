//! The session's ranges: the public range API of [`Profiler`] (open, close, seal, the
//! boundaries' flush and timestamp) and the [`Shared`] side that keeps the session tree and,
//! in per_range mode, CUPTI's user ranges.
//!
//! Imports `state`, `scope` and `launch` (the calling thread's id); nothing in the folder
//! imports it (its items are methods).

use std::sync::atomic::Ordering;

use super::launch::current_thread_id;
use super::scope::RangeScope;
use super::state::{Profiler, RangeGuard, Shared, EXTRA_REPLAY_RANGE};
use crate::capture::stream_capture::Wait;
use crate::checked::activity;
use crate::checked::driver;
use crate::error::{Error, Result};
use crate::model::session::SessionTree;
use crate::model::{MetricSet, ProfilingMode, RangeId, ThreadId};

impl Profiler {
    /// The device ordinal of the profiled context (CUPTI's device id), when CUPTI said.
    pub fn device_id(&self) -> Option<u32> {
        self.shared.device_id
    }

    /// CUPTI's id of the profiled context.
    pub fn context_id(&self) -> u32 {
        self.shared.context_id
    }

    /// The collection mode.
    pub fn mode(&self) -> ProfilingMode {
        self.shared.mode
    }

    /// Replay passes the metric set needs.
    pub fn passes(&self) -> usize {
        self.shared.passes
    }

    /// The metrics collected, in report order.
    pub fn metrics(&self) -> &MetricSet {
        &self.shared.metric_set
    }

    /// Opens a range on the calling thread; it closes when the guard drops.
    pub fn range(&self, name: &str) -> RangeGuard<'_> {
        let thread = current_thread_id();
        let id = match self.open_range(name, thread) {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::warn!("gmprof: {e}");
                None
            }
        };
        RangeGuard { profiler: self, id, thread }
    }

    /// Opens a range on the calling thread (pair with [`Profiler::pop_range`]).
    pub fn push_range(&self, name: &str) -> Result<()> {
        self.open_range(name, current_thread_id()).map(|_| ())
    }

    /// Closes the calling thread's innermost range.
    pub fn pop_range(&self) -> Result<()> {
        self.ensure_running()?;
        let ts = self.pop_boundary()?;
        self.shared.close_user_range(None, current_thread_id(), ts)
    }

    pub(super) fn ensure_running(&self) -> Result<()> {
        if self.shared.finished.load(Ordering::Acquire) {
            return Err(Error::InvalidState("the profiler has finished; build a new one to profile again".into()));
        }
        if self.shared.sealed.load(Ordering::Acquire) {
            return Err(Error::InvalidState("the profiler's window has ended (sealed); finish it".into()));
        }
        Ok(())
    }

    /// Ends the session's window now, without finishing it: launches and transfers made from
    /// now on, on any thread, are not part of the session (left out without a warning, as
    /// work after its end), and range calls fail. Cheap and safe inside a CUPTI callback: an
    /// on-demand capture seals at the step boundary where it ends, on the program's thread,
    /// and finishes on a thread of its own ([`Profiler::finish_with`], which may then
    /// synchronize and flush where that is allowed).
    pub fn seal(&self) {
        self.shared.sealed.store(true, Ordering::Release);
    }

    fn open_range(&self, name: &str, thread: ThreadId) -> Result<RangeId> {
        self.ensure_running()?;
        let ts = self.boundary()?;
        self.shared.open_user_range(name, thread, ts)
    }

    pub(super) fn close_range(&self, id: RangeId, thread: ThreadId) {
        if self.shared.finished.load(Ordering::Acquire) {
            return;
        }
        let result = self.pop_boundary().and_then(|ts| self.shared.close_user_range(Some(id), thread, ts));
        if let Err(e) = result {
            tracing::warn!("gmprof: {e}");
            self.shared.state.lock().warnings.push(e.to_string());
        }
    }

    /// Work done at every pop: the optional synchronization (left out, and counted, while a
    /// CUDA stream captures: it would invalidate the program's capture), then
    /// [`Profiler::boundary`].
    fn pop_boundary(&self) -> Result<u64> {
        if self.shared.synchronize_on_pop && !self.shared.skipped_waits.skip(Wait::SyncOnPop) {
            driver::synchronize(&self.shared.driver)?;
        }
        self.boundary()
    }

    /// Work done at every push and pop: the timestamp, and the activity flush if enabled.
    fn boundary(&self) -> Result<u64> {
        if self.shared.flush_on_range_boundaries {
            // The default flush: complete records only (after `--sync-on-pop`'s synchronize
            // that is every record); a forced one would take running kernels' records
            // without their times.
            activity::flush_all(&self.shared.cupti, false)?;
            self.shared.drain_activity();
        }
        activity::timestamp(&self.shared.cupti)
    }
}

impl Shared {
    /// The range a launch or transfer of `thread` belongs to, by the session's scope.
    pub(super) fn attribute(&self, tree: &SessionTree, thread: ThreadId) -> Option<RangeId> {
        match self.range_scope {
            RangeScope::Thread => tree.current(thread),
            RangeScope::Process => tree.current(thread).or_else(|| tree.latest_open()),
        }
    }

    /// Pushes a range into the session tree, nested by the session's scope: in the
    /// process scope a thread's first open range nests under the latest range open on
    /// any thread, the range its work is attributed to until then.
    fn push_range(&self, name: &str, thread: ThreadId, ts: u64) -> RangeId {
        let mut state = self.state.lock();
        match self.range_scope {
            RangeScope::Thread => state.tree.push(name, thread, ts),
            RangeScope::Process => state.tree.push_in_process(name, thread, ts),
        }
    }

    /// A streamed per_range run: range `id`'s counters come with cycle `cycle`'s image, and
    /// its row waits for them ([`Correlator::note_range_counter_cycle`]). Nothing to note
    /// without streaming, or for a replay pass's extra range.
    ///
    /// [`Correlator::note_range_counter_cycle`]: crate::analysis::correlate::Correlator::note_range_counter_cycle
    fn note_range_counter_cycle(&self, id: RangeId, cycle: u32) {
        let mut state = self.state.lock();
        if id != EXTRA_REPLAY_RANGE && state.stream.is_some() {
            state.correlator.note_range_counter_cycle(id, cycle);
        }
    }

    /// Whether `name` is an instance of the iteration-replay range.
    fn is_iteration_range(&self, name: &str) -> bool {
        self.iteration_range.as_ref().is_some_and(|p| p.matches(name))
    }

    pub(super) fn user_replay(&self) -> bool {
        matches!(self.mode, ProfilingMode::PerKernel | ProfilingMode::PerRange)
    }

    /// Opens a range: in the session tree and, in PerRange mode, as a CUPTI user range
    /// named by its [`range_counter_name`].
    pub(super) fn open_user_range(&self, name: &str, thread: ThreadId, ts: u64) -> Result<RangeId> {
        let mut replay = self.replay.lock();
        let instance =
            self.is_iteration_range(name) && replay.iteration_level.is_none() && self.user_replay() && self.passes > 1;
        if instance {
            replay.iteration_level = Some(replay.open_depth);
            drop(replay);
            self.begin_iteration_instance()?;
            replay = self.replay.lock();
        }
        replay.open_depth += 1;
        if self.mode != ProfilingMode::PerRange {
            // Later replay passes repeat pass 0's ranges: nothing new for the tree.
            if replay.replaying() {
                replay.extra_open += 1;
                return Ok(EXTRA_REPLAY_RANGE);
            }
            drop(replay);
            return Ok(self.push_range(name, thread, ts));
        }
        let id = if replay.replaying() {
            let position = replay.range_cursor;
            replay.range_cursor += 1;
            match replay.range_script.get(position).cloned() {
                Some((script_name, id)) => {
                    // Numbered instances of the iteration range differ in name only.
                    let same =
                        script_name == name || (self.is_iteration_range(&script_name) && self.is_iteration_range(name));
                    if !same {
                        replay.mismatched_ranges.push(id);
                    }
                    id
                }
                None => {
                    replay.extra_open += 1;
                    EXTRA_REPLAY_RANGE
                }
            }
        } else {
            let id = self.push_range(name, thread, ts);
            if replay.active {
                replay.range_script.push((name.to_owned(), id));
            }
            id
        };
        let active = replay.active;
        drop(replay);
        let counter_name = if id == EXTRA_REPLAY_RANGE {
            "gmprof-replay-extra".to_owned()
        } else {
            crate::analysis::correlate::range_counter_name(id)
        };
        let mut guard = self.capture.lock();
        if let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) {
            if !active && counters.user_depth == 0 {
                self.next_cycle_if_due(counters);
            }
            // A range whose CUPTI range cannot be pushed is still a range (its wall time,
            // kernels and transfers are right); it has no counters, and the warning says why.
            let pushed = match counters.range_profiler.as_ref().filter(|_| counters.running) {
                Some(rp) => match self.retried(|| rp.push(&counter_name)) {
                    Ok(()) => {
                        counters.user_depth += 1;
                        counters.ordinal_in_cycle += 1;
                        true
                    }
                    Err(e) => {
                        self.state.lock().warnings.push(format!("range '{name}' has no counters: {e}"));
                        false
                    }
                },
                None => false,
            };
            counters.pushed.push(pushed);
            if pushed {
                self.note_range_counter_cycle(id, counters.cycle);
            }
        } else if id != EXTRA_REPLAY_RANGE {
            // No counter image (the harness): the cycle its script numbers, streamed or not.
            let mut state = self.state.lock();
            let cycle = state.uncounted_cycle;
            state.correlator.note_range_counter_cycle(id, cycle);
        }
        Ok(id)
    }

    /// Closes `id` (or the thread's innermost range), and its CUPTI user range.
    pub(super) fn close_user_range(&self, id: Option<RangeId>, thread: ThreadId, ts: u64) -> Result<()> {
        let mut ends_instance = false;
        let replaying = {
            let mut replay = self.replay.lock();
            replay.open_depth = replay.open_depth.saturating_sub(1);
            if replay.iteration_level.is_some() && replay.iteration_level == Some(replay.open_depth) {
                replay.iteration_level = None;
                ends_instance = true;
            }
            let replaying = replay.replaying();
            if replaying && (id == Some(EXTRA_REPLAY_RANGE) || (id.is_none() && replay.extra_open > 0)) {
                replay.extra_open = replay.extra_open.saturating_sub(1);
            }
            replaying
        };
        if !replaying {
            let mut state = self.state.lock();
            match id {
                Some(id) => state.tree.pop_id(id, thread, ts)?,
                None => state.tree.pop(thread, ts)?,
            };
        }
        if self.mode == ProfilingMode::PerRange {
            let mut guard = self.capture.lock();
            if let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) {
                let pushed = counters.pushed.pop().unwrap_or(false);
                if let Some(rp) =
                    counters.range_profiler.as_ref().filter(|_| pushed && counters.running && counters.user_depth > 0)
                {
                    match self.retried(|| rp.pop()) {
                        Ok(()) => counters.user_depth -= 1,
                        // CUPTI's range stays open past its range: the cycle's counters
                        // cannot be trusted, so they are dropped when it is collected.
                        Err(e) => {
                            counters.broken.get_or_insert(format!("a CUPTI range did not close: {e}"));
                        }
                    }
                }
            }
        }
        if ends_instance {
            self.end_iteration_instance()?;
        }
        Ok(())
    }
}
