//! Checkpoints: a copy of a running session's records holding only what is complete, so
//! that outputs written while the program runs carry no row that later data would change.
//!
//! Imports `correlator` (the state it copies); `mod.rs` re-exports [`CheckpointPending`].

use std::collections::HashSet;

use super::correlator::Correlator;
use crate::model::{LaunchRecord, ProfilingMode};

/// What [`Correlator::checkpoint`] left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointPending {
    /// Kernel launches left out: their counter cycle is still running, or their activity
    /// record has not arrived.
    pub kernels: u64,
    /// Memcpy/memset calls whose activity record has not arrived.
    pub transfers: u64,
}

impl Correlator {
    /// A copy of the records that are complete now, for a checkpoint report, and what was
    /// left out.
    ///
    /// `running_cycle` is the counter cycle still being collected in the modes that join
    /// counters to launches by cycle ([`ProfilingMode::KernelReplay`],
    /// [`ProfilingMode::PerKernel`]): every launch of an earlier cycle is kept (its counters
    /// were decoded; a positional join needs all of a cycle's launches) and every launch of
    /// it or later is left out. Otherwise (trace, per-range, or `None`) a launch is kept
    /// when its activity record has arrived. Activity records of left-out launches are left
    /// out with them, so they do not turn into rows without a launch.
    pub fn checkpoint(&self, mode: ProfilingMode, running_cycle: Option<u32>) -> (Correlator, CheckpointPending) {
        let by_cycle = matches!(mode, ProfilingMode::KernelReplay | ProfilingMode::PerKernel);
        let with_activity: HashSet<u32> = self.activities.iter().map(|a| a.correlation_id).collect();
        let mut pending = CheckpointPending::default();
        let mut left_out: HashSet<u32> = HashSet::new();
        let launches: Vec<LaunchRecord> = self
            .launches
            .iter()
            .filter(|l| {
                let keep = match (by_cycle, running_cycle) {
                    (true, Some(running)) => l.cycle < running,
                    // A captured launch never gets activity: it is complete as it is.
                    _ => with_activity.contains(&l.correlation_id) || self.captured.contains_key(&l.correlation_id),
                };
                if !keep {
                    pending.kernels += 1;
                    left_out.insert(l.correlation_id);
                }
                keep
            })
            .cloned()
            .collect();
        let activities = self.activities.iter().filter(|a| !left_out.contains(&a.correlation_id)).cloned().collect();
        let transfer_done: HashSet<u32> = self.transfer_activities.iter().map(|t| t.correlation_id).collect();
        let transfer_calls = self
            .transfer_calls
            .iter()
            .filter(|c| {
                // An untimed call waits for no record: it is complete as it is.
                let done = transfer_done.contains(&c.correlation_id)
                    || self.captured.contains_key(&c.correlation_id)
                    || c.untimed.is_some();
                pending.transfers += u64::from(!done);
                done
            })
            .cloned()
            .collect();
        let copy = Correlator {
            launches,
            activities,
            counter_cycles: self.counter_cycles.clone(),
            counter_ranges: self.counter_ranges,
            transfer_calls,
            transfer_activities: self.transfer_activities.clone(),
            warnings: self.warnings.clone(),
            replay_mismatched_kernels: self.replay_mismatched_kernels.clone(),
            replay_mismatched_ranges: self.replay_mismatched_ranges.clone(),
            captured: self.captured.clone(),
            internal_transfers: self.internal_transfers.clone(),
            // A checkpoint is taken while the context runs.
            context_failure: None,
            stale_activities: 0,
            stale_transfer_activities: 0,
            range_counter_cycles: Default::default(),
            call_stamps: self.call_stamps.clone(),
        };
        (copy, pending)
    }
}
