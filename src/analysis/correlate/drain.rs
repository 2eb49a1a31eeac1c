//! Draining: [`Correlator::drain_complete`] moves the records that are complete out of a
//! running session's correlator into a correlator of their own, which
//! [`Correlator::finish`] joins into rows that no later record can change (their activity
//! and, in per_range and per_kernel, their counters are in). The streamed outputs drain
//! every few seconds, so the session's correlator holds only what is in flight.
//!
//! Imports `correlator` (the state it splits), `call_stamps` and `store`; `mod.rs` declares
//! it and nothing imports it (its one item is a method).

use std::collections::{HashMap, HashSet};

use super::correlator::Correlator;
use super::store::IdMap;
use crate::model::{LaunchApi, LaunchRecord, ProfilingMode, RangeId};

/// A set of correlation ids.
type IdSet = IdMap<u32, ()>;

/// What a drain left in the correlator, per range: launches and transfer calls still
/// waiting for their activity records. A range with any is not complete.
pub type PendingByRange = HashMap<RangeId, u64>;

impl Correlator {
    /// Moves the complete records out, for [`Correlator::finish`] on their own; returns
    /// them and what stays pending per range. `settled_below` is the first counter cycle
    /// whose counters are not known yet (its image is still being filled or evaluated):
    /// every cycle before it was decoded, and its counter ranges were added, or it is known
    /// lost. `None` where no counter cycles run (trace): nothing waits for counters.
    ///
    /// In every mode that drains (trace, per_range, per_kernel):
    ///
    /// - a launch is complete when its activity record has arrived, or when it was captured
    ///   into a graph (it never gets one); a CUDA graph launch, whose kernels' records may
    ///   come in several buffers, waits until its records were already here at the previous
    ///   drain;
    /// - a memcpy/memset call is complete when its record has arrived, when it was captured,
    ///   or when no record will time it (untimed);
    /// - an activity record goes with its launch or call; one with neither, still without
    ///   one at the next drain, is drained on its own (an unlaunched row), as a transfer
    ///   record of a graph launch already drained is.
    ///
    /// Counters:
    ///
    /// - per_range: counter ranges are drained as they were decoded; a range whose counter
    ///   cycle ([`Correlator::note_range_counter_cycle`]) is not settled yet is pending, so
    ///   it stays in the session (and its row unwritten) until its counters are in, or
    ///   known missing (its row then has blank metrics);
    /// - per_kernel: a cycle's launches drain together with its counter ranges, once the
    ///   cycle is settled and every launch of it is complete (the join checks a cycle's
    ///   counter ranges against its launches); until then they are pending. A launch a
    ///   rotation left unmeasured drains once its activity is in;
    /// - kernel_replay (counters join launches by position): nothing is drained.
    ///
    /// PM sampling (`pm_horizon`, the end of the last PM sample decoded; `None` where no PM
    /// samples are awaited): a launch whose kernel ran past the horizon (one of its activity
    /// records ends after it) is pending, as an unlaunched record past it stays, so that
    /// every kernel drained is covered by the samples it will ever have.
    pub fn drain_complete(
        &mut self,
        mode: ProfilingMode,
        settled_below: Option<u32>,
        pm_horizon: Option<u64>,
    ) -> (Correlator, PendingByRange) {
        let mut chunk = Correlator::default();
        let mut pending = PendingByRange::default();
        if mode == ProfilingMode::KernelReplay {
            for l in &self.launches {
                if let Some(r) = l.range {
                    *pending.entry(r).or_default() += 1;
                }
            }
            return (chunk, pending);
        }
        let settled = settled_below.unwrap_or(u32::MAX);
        let by_cycle = mode == ProfilingMode::PerKernel;
        let stale = self.stale_activities.min(self.activities.len());
        // Correlation id -> whether every one of its records was here at the last drain.
        let mut arrived: IdMap<u32, bool> = IdMap::default();
        arrived.reserve(self.activities.len());
        for (i, a) in self.activities.iter().enumerate() {
            *arrived.entry(a.correlation_id).or_insert(true) &= i < stale;
        }
        // Correlation ids with a kernel that ended past the PM horizon.
        let mut past_horizon = IdSet::default();
        if let Some(horizon) = pm_horizon {
            for a in self.activities.iter().filter(|a| a.end_ns > horizon) {
                past_horizon.insert(a.correlation_id, ());
            }
        }
        let captured = &self.captured;
        let complete_alone = |l: &LaunchRecord| {
            captured.contains_key(&l.correlation_id)
                || !past_horizon.contains_key(&l.correlation_id)
                    && match (arrived.get(&l.correlation_id), l.api) {
                        (Some(all_stale), LaunchApi::Graph) => *all_stale,
                        (Some(_), _) => true,
                        (None, _) => false,
                    }
        };
        // per_kernel: cycles not settled, or with a launch not complete, wait whole. A launch a
        // rotation left unmeasured opened no counter range: it waits for nothing but its
        // activity, and holds no cycle back (a rotation's one cycle settles only at the end).
        let mut blocked: HashSet<u32> = HashSet::new();
        if by_cycle {
            for l in self.launches.iter().filter(|l| !l.unmeasured) {
                if l.cycle >= settled || !complete_alone(l) {
                    blocked.insert(l.cycle);
                }
            }
        }
        // Most of what is held drains: the chunk's vectors are sized once (growing them
        // record by record was a tenth of the drain's time under the session's lock).
        chunk.launches.reserve(self.launches.len());
        chunk.activities.reserve(self.activities.len());
        let mut drained = IdSet::default();
        drained.reserve(self.launches.len());
        let mut launched = IdSet::default();
        let mut kept = Vec::with_capacity(self.launches.len() / 8);
        for l in std::mem::take(&mut self.launches) {
            let complete = complete_alone(&l) && !(by_cycle && !l.unmeasured && blocked.contains(&l.cycle));
            if complete {
                drained.insert(l.correlation_id, ());
                chunk.launches.push(l);
            } else {
                launched.insert(l.correlation_id, ());
                if let Some(r) = l.range {
                    *pending.entry(r).or_default() += 1;
                }
                kept.push(l);
            }
        }
        self.launches = kept;
        let mut kept = Vec::with_capacity(self.activities.len() / 8);
        for (i, a) in std::mem::take(&mut self.activities).into_iter().enumerate() {
            let alone =
                i < stale && !launched.contains_key(&a.correlation_id) && !past_horizon.contains_key(&a.correlation_id);
            if drained.contains_key(&a.correlation_id) || alone {
                chunk.activities.push(a);
            } else {
                kept.push(a);
            }
        }
        self.activities = kept;
        self.stale_activities = self.activities.len();

        let stale = self.stale_transfer_activities.min(self.transfer_activities.len());
        let timed: IdSet = self.transfer_activities.iter().map(|t| (t.correlation_id, ())).collect();
        let mut calls_drained = IdSet::default();
        let mut calls_kept = IdSet::default();
        let mut kept = Vec::new();
        for c in std::mem::take(&mut self.transfer_calls) {
            let id = c.correlation_id;
            if timed.contains_key(&id) || self.captured.contains_key(&id) || c.untimed.is_some() {
                calls_drained.insert(id, ());
                chunk.transfer_calls.push(c);
            } else {
                calls_kept.insert(id, ());
                if let Some(r) = c.range {
                    *pending.entry(r).or_default() += 1;
                }
                kept.push(c);
            }
        }
        self.transfer_calls = kept;
        let mut kept = Vec::new();
        for (i, t) in std::mem::take(&mut self.transfer_activities).into_iter().enumerate() {
            let id = t.correlation_id;
            let with_call = calls_drained.contains_key(&id);
            // Without a call: a graph launch's memcpy or memset node, or unlaunched. It goes
            // with its graph launch, or on its own once stale.
            let alone = !calls_kept.contains_key(&id)
                && (drained.contains_key(&id) || (i < stale && !launched.contains_key(&id)));
            if with_call || alone {
                chunk.transfer_activities.push(t);
            } else {
                kept.push(t);
            }
        }
        self.transfer_activities = kept;
        self.stale_transfer_activities = self.transfer_activities.len();

        for id in drained.keys().chain(calls_drained.keys()) {
            if let Some(nodes) = self.captured.remove(id) {
                chunk.captured.insert(*id, nodes);
            }
        }
        super::call_stamps::drain(
            &mut self.call_stamps,
            &mut chunk.call_stamps,
            |id| drained.contains_key(&id) || calls_drained.contains_key(&id),
            |id| launched.contains_key(&id) || calls_kept.contains_key(&id),
        );
        if by_cycle {
            let (ready, waiting) = std::mem::take(&mut self.counter_cycles)
                .into_iter()
                .partition(|(cycle, _)| *cycle < settled && !blocked.contains(cycle));
            chunk.counter_cycles = ready;
            self.counter_cycles = waiting;
        } else {
            chunk.counter_cycles = std::mem::take(&mut self.counter_cycles);
        }
        if mode == ProfilingMode::PerRange {
            // A range waits for its cycle's counters; once the cycle is settled they are in
            // this chunk (or known missing) and the range may complete.
            self.range_counter_cycles.retain(|id, cycle| {
                let waiting = *cycle >= settled;
                if waiting {
                    *pending.entry(*id).or_default() += 1;
                }
                waiting
            });
        }
        chunk.counter_ranges = chunk.counter_cycles.values().map(|c| c.len() as u64).sum();
        self.counter_ranges -= chunk.counter_ranges.min(self.counter_ranges);
        // Replay mismatches flag rows and ranges of whichever chunk holds them.
        chunk.replay_mismatched_kernels.clone_from(&self.replay_mismatched_kernels);
        chunk.replay_mismatched_ranges.clone_from(&self.replay_mismatched_ranges);
        (chunk, pending)
    }
}

impl Correlator {
    /// The earliest a kernel held here can have started, on the activity clock: the first
    /// activity record's start, or the first launch's API time (a kernel starts after its
    /// launch call; a launch without one counts as 0). `None` when no kernel is held. PM
    /// samples that end before it are not needed by any kernel still to be drained (one
    /// launched later starts later still).
    pub fn oldest_waiting_ns(&self) -> Option<u64> {
        let launches = self.launches.iter().map(|l| l.launch_ns.unwrap_or(0));
        let records = self.activities.iter().map(|a| a.start_ns);
        launches.chain(records).min()
    }
}
