//! The correlator's state: [`Correlator`] collects one session's capture records as they
//! arrive (launches, kernel activity, counter ranges, transfers), and [`ContextFailure`]
//! records a failed CUDA context.
//!
//! The shared bottom of this folder's join: `join` ([`Correlator::finish`]), `checkpoint`,
//! `call_stamps` and `build` import it; it imports only `warnings` and `store`, never
//! `mod.rs`.

use std::collections::{BTreeMap, HashMap};

use super::store::IdMap;
use super::warnings::WarningLog;
use crate::model::{
    CapturedNode, CounterRange, KernelActivity, LaunchRecord, RangeId, TransferActivity, TransferCall, TransferKind,
};

/// Incremental collector of one session's capture records; see the [module docs](super).
#[derive(Debug, Default)]
pub struct Correlator {
    pub(super) launches: Vec<LaunchRecord>,
    pub(super) activities: Vec<KernelActivity>,
    pub(super) counter_cycles: BTreeMap<u32, Vec<CounterRange>>,
    pub(super) counter_ranges: u64,
    pub(super) transfer_calls: Vec<TransferCall>,
    pub(super) transfer_activities: Vec<TransferActivity>,
    pub(super) warnings: WarningLog,
    pub(super) replay_mismatched_kernels: std::collections::HashSet<u32>,
    pub(super) replay_mismatched_ranges: std::collections::HashSet<RangeId>,
    /// Calls made while their stream was capturing, by correlation id: the graph nodes
    /// they created.
    pub(super) captured: IdMap<u32, Vec<CapturedNode>>,
    /// gmprof's own transfers by (kind, bytes): as many record-less transfer records of
    /// each are left out of the transfer table.
    pub(super) internal_transfers: BTreeMap<(TransferKind, u64), u64>,
    /// Set when the CUDA context failed before the session finished.
    pub(super) context_failure: Option<ContextFailure>,
    /// Kernel activity records that were here at the last drain (the first ones).
    pub(super) stale_activities: usize,
    /// Transfer activity records that were here at the last drain (the first ones).
    pub(super) stale_transfer_activities: usize,
    /// Streamed per_range runs: the counter cycle whose image carries each range's counters
    /// ([`Correlator::note_range_counter_cycle`]), until that cycle is decoded.
    pub(super) range_counter_cycles: HashMap<RangeId, u32>,
    /// When calls were made and returned, where capture stamped them ([`super::call_stamps`]).
    pub(super) call_stamps: super::store::StampLog,
}

/// The CUDA context failed before the session finished ([`Correlator::context_failed`]).
#[derive(Clone, Debug, Default)]
pub(super) struct ContextFailure {
    /// The CUDA error, as the warning names it.
    pub(super) error: String,
    /// Kernel names the launch callback kept, by correlation id.
    pub(super) names: HashMap<u32, String>,
}

impl Correlator {
    /// An empty correlator.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the correlator holds, by collection: lengths, and the launch and activity
    /// vectors' capacities (a streamed run's per-drain memory census).
    pub fn census(&self) -> [(&'static str, usize); 12] {
        [
            ("corr.launches", self.launches.len()),
            ("corr.launches_cap", self.launches.capacity()),
            ("corr.activities", self.activities.len()),
            ("corr.activities_cap", self.activities.capacity()),
            ("corr.counter_cycles", self.counter_cycles.len()),
            ("corr.transfer_calls", self.transfer_calls.len()),
            ("corr.transfer_activities", self.transfer_activities.len()),
            ("corr.captured", self.captured.len()),
            ("corr.internal_transfers", self.internal_transfers.len()),
            ("corr.range_counter_cycles", self.range_counter_cycles.len()),
            ("corr.call_stamps", self.call_stamps.len()),
            ("corr.replay_mismatched", self.replay_mismatched_kernels.len() + self.replay_mismatched_ranges.len()),
        ]
    }

    /// Adds one launch record.
    pub fn add_launch(&mut self, launch: LaunchRecord) {
        self.launches.push(launch);
    }

    /// Adds one kernel activity record.
    pub fn add_activity(&mut self, activity: KernelActivity) {
        self.activities.push(activity);
    }

    /// User replay: the kernel of launch `correlation_id` did not match the kernel another
    /// pass ran in its place; its row gets status `replay_mismatch` and no metrics.
    pub fn flag_replay_mismatch(&mut self, correlation_id: u32) {
        self.replay_mismatched_kernels.insert(correlation_id);
    }

    /// User replay: range `id` was not matched by the same range in another pass; its
    /// measured counters are discarded.
    pub fn flag_range_replay_mismatch(&mut self, id: RangeId) {
        self.replay_mismatched_ranges.insert(id);
    }

    /// Adds the counter ranges decoded from cycle `cycle`'s counter image.
    ///
    /// A range whose own `cycle` field disagrees with `cycle` is kept under `cycle` (the image
    /// it was decoded from) with a warning. Calling this twice for one cycle appends.
    pub fn add_counter_ranges(&mut self, cycle: u32, ranges: Vec<CounterRange>) {
        let disagreeing = ranges.iter().filter(|r| r.cycle != cycle).count();
        if disagreeing > 0 {
            self.warnings.push(format!(
                "counter image of cycle {cycle}: {disagreeing} counter range(s) carry another \
                 cycle number; they are treated as cycle {cycle}"
            ));
        }
        self.counter_ranges += ranges.len() as u64;
        self.counter_cycles.entry(cycle).or_default().extend(ranges);
    }

    /// Streamed per_range runs: range `id` pushed a CUPTI range in counter cycle `cycle`, so
    /// its counters come with that cycle's image; a drain holds the range back until the
    /// cycle is decoded ([`Correlator::drain_complete`]). A range pushed in several cycles
    /// (replay passes) waits for the last.
    pub fn note_range_counter_cycle(&mut self, id: RangeId, cycle: u32) {
        let at = self.range_counter_cycles.entry(id).or_insert(cycle);
        *at = (*at).max(cycle);
    }

    /// The ranges whose counters come with cycle `cycle`'s image (noted, not yet drained).
    pub fn ranges_in_counter_cycle(&self, cycle: u32) -> Vec<RangeId> {
        let mut ids: Vec<RangeId> =
            self.range_counter_cycles.iter().filter(|(_, c)| **c == cycle).map(|(id, _)| *id).collect();
        ids.sort_unstable_by_key(|id| id.slot);
        ids
    }

    /// Whether the counter ranges of cycle `cycle` were added.
    pub fn has_counter_cycle(&self, cycle: u32) -> bool {
        self.counter_cycles.contains_key(&cycle)
    }

    /// The call `correlation_id` (a launch, memcpy or memset) created graph nodes instead
    /// of running: its stream was capturing. It gets no row and is not missing activity.
    pub fn add_captured_call(&mut self, correlation_id: u32, nodes: Vec<CapturedNode>) {
        self.captured.entry(correlation_id).or_default().extend(nodes);
    }

    /// Adds one memcpy/memset API call.
    pub fn add_transfer_call(&mut self, call: TransferCall) {
        self.transfer_calls.push(call);
    }

    /// The memcpy/memset call `correlation_id` returned `error`: kept on its call (searched
    /// from the newest, where a call's exit finds it).
    pub fn note_transfer_error(&mut self, correlation_id: u32, error: i32) {
        if let Some(call) = self.transfer_calls.iter_mut().rev().find(|c| c.correlation_id == correlation_id) {
            if let Some(p) = call.params.as_mut() {
                p.error = Some(error);
            }
        }
    }

    /// Adds one memcpy/memset activity record.
    pub fn add_transfer_activity(&mut self, activity: TransferActivity) {
        self.transfer_activities.push(activity);
    }

    /// gmprof itself issued `count` transfers of `kind` and `bytes` bytes from inside CUPTI's
    /// callbacks (the probe engine's map buffers), where CUPTI reports no API call: as many
    /// matching transfer records without a call are left out of the table and counted in
    /// [`CorrelationCounts::profiler_internal_transfers`] instead of being reported as
    /// unlaunched.
    ///
    /// [`CorrelationCounts::profiler_internal_transfers`]: super::CorrelationCounts::profiler_internal_transfers
    pub fn add_internal_transfers(&mut self, kind: TransferKind, bytes: u64, count: u64) {
        *self.internal_transfers.entry((kind, bytes)).or_insert(0) += count;
    }

    /// The CUDA context failed with `error` (the program's own CUDA error, seen when the
    /// session finished): a launch with neither an activity record nor counters never
    /// completed, and its row gets status `not_completed` instead of `missing_activity`.
    /// `names` are kernel names (as CUPTI gives them, mangled) of the last launches, by
    /// correlation id; the rows of those launches carry them.
    pub fn context_failed(&mut self, error: String, names: Vec<(u32, String)>) {
        self.context_failure = Some(ContextFailure { error, names: names.into_iter().collect() });
    }

    /// Launch records of counter cycle `cycle`.
    pub fn launches_in_cycle(&self, cycle: u32) -> u64 {
        self.launches.iter().filter(|l| l.cycle == cycle).count() as u64
    }

    /// The launch records added so far, in the order they were added.
    pub fn launches(&self) -> &[LaunchRecord] {
        &self.launches
    }

    /// Number of launch records added so far.
    pub fn launch_count(&self) -> usize {
        self.launches.len()
    }

    /// The correlation ids of the launches and memcpy/memset calls held.
    pub fn held_call_ids(&self) -> std::collections::HashSet<u32> {
        self.launches
            .iter()
            .map(|l| l.correlation_id)
            .chain(self.transfer_calls.iter().map(|c| c.correlation_id))
            .collect()
    }

    /// Number of activity records added so far.
    pub fn activity_count(&self) -> usize {
        self.activities.len()
    }
}
