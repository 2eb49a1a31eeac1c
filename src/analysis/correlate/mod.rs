//! The correlator: joins launch records, kernel activity records and decoded counter ranges
//! into one [`KernelRow`] per kernel.
//!
//! Layer 3 (the safe profiler). Capture feeds three independent streams, in any order:
//! [`LaunchRecord`]s from the launch callback (which range, which counter cycle and ordinal),
//! [`KernelActivity`] records from CUPTI's activity buffers (name, geometry, stream), and
//! [`CounterRange`]s decoded from each cycle's counter image. [`Correlator::finish`] joins
//! them:
//!
//! - activity ↔ launch by correlation id (a hash map);
//! - counters ↔ launch by position in [`ProfilingMode::KernelReplay`] (counter range `i` of
//!   cycle `c` is launch ordinal `i` of cycle `c`, and its name must be `"i"`), by name in
//!   [`ProfilingMode::PerKernel`] (the name is the launch's correlation id), and by range in
//!   [`ProfilingMode::PerRange`] (the name is [`range_counter_name`]).
//!
//! Positional joins are where a silent bug would hide: one dropped counter range shifts every
//! later kernel's counters onto its neighbour. So every count and name is checked, and a
//! disagreement never shifts rows: the affected rows get a [`KernelStatus`] other than `ok`
//! and the correlation carries a warning saying what happened (also logged with
//! `tracing::warn!`). Nothing is dropped: activity records without a launch become rows of
//! their own, counter ranges without a launch are counted as orphans.
//!
//! Memory transfers (memcpy, memset) travel a fourth and fifth stream: [`TransferCall`]s from
//! the API callback (which thread and range) and [`TransferActivity`] records (kind, bytes,
//! GPU timestamps). They are joined by correlation id into [`TransferRow`]s, in time order
//! ([`Correlation::transfers`]). A record without a call is never dropped: when a graph launch
//! holds its correlation id (a memcpy or memset node of a CUDA graph) it goes to the graph
//! launch's range with status `graph_transfer`, otherwise to the root row with status
//! `unlaunched`.

mod build;
mod checkpoint;
#[cfg(test)]
mod graph_tests;
mod names;
mod rows;
mod store;
#[cfg(test)]
mod tests;
mod warnings;

use self::build::{CounterMatch, NotCompletedLog, RowBuilder};
pub use self::checkpoint::CheckpointPending;
use self::names::parse_decimal_u32;
pub use self::names::{
    demangle_kernel_name, is_profiler_internal_kernel, parse_range_counter_name, range_counter_name,
};
pub use self::rows::*;
use self::store::ActivitySlots;
use self::store::ActivityStore;
pub(crate) use self::store::IdMap;
use self::warnings::WarningLog;

use std::collections::{BTreeMap, HashMap};

use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{
    CapturedNode, CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricSet, ProfilingMode, RangeId,
    TransferActivity, TransferCall, TransferKind, GPU_TIME_METRIC,
};

/// Incremental collector of one session's capture records; see the [module docs](self).
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

    /// Adds one memcpy/memset activity record.
    pub fn add_transfer_activity(&mut self, activity: TransferActivity) {
        self.transfer_activities.push(activity);
    }

    /// gmprof itself issued `count` transfers of `kind` and `bytes` bytes from inside CUPTI's
    /// callbacks (the probe engine's map buffers), where CUPTI reports no API call: as many
    /// matching transfer records without a call are left out of the table and counted in
    /// [`CorrelationCounts::profiler_internal_transfers`] instead of being reported as
    /// unlaunched.
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

    /// Number of activity records added so far.
    pub fn activity_count(&self) -> usize {
        self.activities.len()
    }

    /// Joins everything added; see the [module docs](self) for the rules.
    ///
    /// `metrics` is the session's metric set (the order of [`CounterRange::values`]);
    /// `tree` names the ranges of launch records.
    pub fn finish(self, tree: &SessionTree, metrics: &MetricSet, mode: ProfilingMode) -> Correlation {
        let Correlator {
            mut launches,
            activities,
            mut counter_cycles,
            counter_ranges,
            transfer_calls,
            transfer_activities,
            warnings,
            replay_mismatched_kernels,
            replay_mismatched_ranges,
            captured,
            internal_transfers,
            context_failure,
        } = self;

        // Under user ranges the range profiler launches a one-thread `WaitNs` kernel of its
        // own with the user's correlation id (seen with CUPTI 13.0 on an H200): not the
        // program's work, so not a row.
        let (activities, internal): (Vec<KernelActivity>, Vec<KernelActivity>) =
            if matches!(mode, ProfilingMode::PerKernel | ProfilingMode::PerRange) {
                activities.into_iter().partition(|a| !is_profiler_internal_kernel(a))
            } else {
                (activities, Vec::new())
            };
        // Kernel replay reports a replayed graph kernel more than once under its launch's
        // correlation id: one row per (launch, node).
        let mut repeated_graph_node_records = 0u64;
        let activities = {
            let mut seen: std::collections::HashSet<(u32, u64)> = std::collections::HashSet::new();
            let mut kept = activities;
            kept.retain(|a| {
                let first = a.graph_node_id == 0 || seen.insert((a.correlation_id, a.graph_node_id));
                repeated_graph_node_records += u64::from(!first);
                first
            });
            kept
        };
        let mut builder = RowBuilder {
            tree,
            mode,
            time_source: TimeSource::for_mode(mode),
            metric_count: metrics.metrics.len(),
            time_index: metrics.index_of(GPU_TIME_METRIC),
            demangled: HashMap::new(),
            counts: CorrelationCounts {
                launches: launches.len() as u64,
                activity_records: activities.len() as u64,
                profiler_internal_kernels: internal.len() as u64,
                repeated_graph_node_records,
                counter_ranges,
                transfer_calls: transfer_calls.len() as u64,
                transfer_records: transfer_activities.len() as u64,
                ..CorrelationCounts::default()
            },
            warnings,
            untimed_activity: 0,
            context_failure,
            not_completed: NotCompletedLog::default(),
        };
        if mode != ProfilingMode::Trace && builder.time_index.is_none() {
            let empty = if builder.time_source == TimeSource::GpuTimeDuration {
                "kernel durations, duration-weighted metrics and bandwidths are"
            } else {
                "duration-weighted metrics are"
            };
            builder.warnings.push(format!("{GPU_TIME_METRIC} was not collected: {empty} empty"));
        }

        if !launches.is_sorted_by_key(|l| (l.cycle, l.ordinal)) {
            launches.sort_by_key(|l| (l.cycle, l.ordinal));
        }
        let mut cycles: Vec<u32> = launches.iter().map(|l| l.cycle).collect();
        cycles.extend(counter_cycles.keys().copied());
        cycles.sort_unstable();
        cycles.dedup();
        builder.counts.counter_cycles = cycles.len() as u64;

        // Activity records by correlation id; taken out as rows claim them, so each record
        // becomes exactly one row.
        let mut by_correlation: IdMap<u32, ActivitySlots> = IdMap::default();
        by_correlation.reserve(activities.len());
        for (index, activity) in activities.iter().enumerate() {
            let index = index as u32;
            by_correlation
                .entry(activity.correlation_id)
                .and_modify(|slots| match slots {
                    ActivitySlots::One(first) => *slots = ActivitySlots::Many(vec![*first, index]),
                    ActivitySlots::Many(list) => list.push(index),
                })
                .or_insert(ActivitySlots::One(index));
        }
        let mut activities = ActivityStore::new(activities);

        // Counters joined by name rather than position.
        let mut per_kernel_counters: IdMap<u32, (u32, CounterRange)> = IdMap::default();
        let mut range_counters: HashMap<RangeId, Vec<Option<f64>>> = HashMap::new();
        match mode {
            ProfilingMode::KernelReplay => {}
            ProfilingMode::PerKernel => {
                per_kernel_counters = builder.index_counters_by_correlation(&launches, &mut counter_cycles);
            }
            ProfilingMode::PerRange => {
                range_counters = builder.index_counters_by_range(&mut counter_cycles);
                for id in &replay_mismatched_ranges {
                    if range_counters.remove(id).is_some() {
                        builder.warnings.push(format!(
                            "range {}: the replay passes did not push the same ranges here; its \
                             merged counters are discarded",
                            builder.tree.get(*id).map_or("?", |n| n.path.as_str())
                        ));
                    }
                }
            }
            ProfilingMode::Trace => {
                let stray: usize = counter_cycles.values().map(Vec::len).sum();
                if stray > 0 {
                    builder.counts.orphan_counter_ranges += stray as u64;
                    builder.warnings.push(format!(
                        "trace mode collects no counters, yet {stray} counter range(s) were \
                         added; they are ignored"
                    ));
                }
                counter_cycles.clear();
            }
        }

        let mut rows: Vec<KernelRow> = Vec::with_capacity(launches.len().max(activities.records.len()));
        let mut start = 0;
        while start < launches.len() {
            let cycle = launches[start].cycle;
            let end = start + launches[start..].iter().position(|l| l.cycle != cycle).unwrap_or(launches.len() - start);
            let cycle_launches = &launches[start..end];
            let counters: Vec<Vec<CounterMatch>> = match mode {
                ProfilingMode::KernelReplay => {
                    // CUPTI's auto range in kernel replay is one range per kernel that ran:
                    // none for a captured launch, one per kernel node for a graph launch.
                    let slots: Vec<u32> = cycle_launches
                        .iter()
                        .map(|l| {
                            if captured.contains_key(&l.correlation_id) {
                                0
                            } else if l.api == LaunchApi::Graph {
                                by_correlation.get(&l.correlation_id).map_or(0, ActivitySlots::len)
                            } else {
                                1
                            }
                        })
                        .collect();
                    builder.match_cycle_by_ordinal(
                        cycle,
                        cycle_launches,
                        &slots,
                        counter_cycles.remove(&cycle).unwrap_or_default(),
                    )
                }
                ProfilingMode::PerKernel => cycle_launches
                    .iter()
                    .map(|l| {
                        let m = match per_kernel_counters.remove(&l.correlation_id) {
                            // A captured launch's range measured nothing that ran.
                            _ if captured.contains_key(&l.correlation_id) => CounterMatch::NotExpected,
                            Some(_) if replay_mismatched_kernels.contains(&l.correlation_id) => {
                                CounterMatch::Missing(KernelStatus::ReplayMismatch)
                            }
                            Some((_, range)) => CounterMatch::Values(builder.convert_values(range.values, cycle)),
                            None => CounterMatch::Missing(KernelStatus::MissingCounters),
                        };
                        vec![m]
                    })
                    .collect(),
                ProfilingMode::PerRange | ProfilingMode::Trace => {
                    vec![vec![CounterMatch::NotExpected]; cycle_launches.len()]
                }
            };
            for (launch, counter) in cycle_launches.iter().zip(counters) {
                if captured.contains_key(&launch.correlation_id) {
                    builder.counts.captured_launches += 1;
                    continue;
                }
                builder.launch_rows(launch, counter, &mut by_correlation, &mut activities, &mut rows);
            }
            start = end;
        }

        // Leftover counter ranges: cycles with counter data but no launches.
        for (cycle, ranges) in counter_cycles {
            if !ranges.is_empty() && mode == ProfilingMode::KernelReplay {
                builder.counts.orphan_counter_ranges += ranges.len() as u64;
                builder.warnings.push(format!(
                    "cycle {cycle}: {} counter range(s) but no recorded launches; they are \
                     counted as orphans",
                    ranges.len()
                ));
            }
        }
        for (correlation_id, (cycle, _)) in per_kernel_counters {
            builder.counts.orphan_counter_ranges += 1;
            builder.warnings.push(format!(
                "cycle {cycle}: counter range for correlation id {correlation_id} matches no \
                 recorded launch; counted as an orphan"
            ));
        }

        // Activity records no launch claimed.
        let mut unlaunched: Vec<KernelActivity> = activities.into_unclaimed();
        if !unlaunched.is_empty() {
            unlaunched.sort_by_key(|a| (a.start_ns, a.correlation_id));
            builder.warnings.push(format!(
                "{} kernel activity record(s) have no launch record (launched from a context or \
                 thread gmprof did not capture, or by a CUDA graph); they are reported under {} \
                 with status unlaunched_activity",
                unlaunched.len(),
                ROOT_PATH
            ));
            for activity in unlaunched {
                let row =
                    builder.row(None, Some(activity), CounterMatch::NotExpected, KernelStatus::UnlaunchedActivity);
                rows.push(row);
            }
        }

        let (transfer_calls, captured_calls): (Vec<TransferCall>, Vec<TransferCall>) =
            transfer_calls.into_iter().partition(|c| !captured.contains_key(&c.correlation_id));
        builder.counts.captured_transfers = captured_calls.len() as u64;
        builder.counts.graph_launches =
            launches.iter().filter(|l| l.api == LaunchApi::Graph && !captured.contains_key(&l.correlation_id)).count()
                as u64;
        let transfers = builder.transfer_rows(transfer_calls, transfer_activities, &launches, internal_transfers);

        if let Some(text) = builder.not_completed_warning() {
            builder.warnings.push(text);
        }
        let counts = &mut builder.counts;
        counts.kernel_rows = rows.len() as u64;
        for row in &rows {
            match row.status {
                KernelStatus::Ok => {}
                KernelStatus::MissingActivity => counts.missing_activity += 1,
                KernelStatus::MissingCounters => counts.missing_counters += 1,
                KernelStatus::CountMismatch => counts.count_mismatch += 1,
                KernelStatus::NameMismatch => counts.name_mismatch += 1,
                KernelStatus::UnlaunchedActivity => counts.unlaunched_activity += 1,
                KernelStatus::ReplayMismatch => counts.replay_mismatch += 1,
                KernelStatus::NotCompleted => counts.not_completed += 1,
            }
        }
        counts.flagged_rows = rows.iter().filter(|r| r.status.is_flagged()).count() as u64;
        counts.graph_node_rows = rows.iter().filter(|r| r.granularity == Granularity::GraphNode).count() as u64;
        if counts.missing_activity > 0 {
            builder.warnings.push(format!(
                "{} launch(es) have no kernel activity record (CUPTI dropped activity records?); \
                 their rows have status missing_activity and no kernel name",
                counts.missing_activity
            ));
        }
        if mode == ProfilingMode::KernelReplay && counts.count_mismatch > 0 && counts.unlaunched_activity > 0 {
            // Seen on torch.compile(mode="reduce-overhead") under kernel replay: one kernel
            // record with correlation id 0 and no launch, and its cycle one range over.
            builder.warnings.push(format!(
                "kernel replay numbers its counter ranges by position, one per kernel that ran: \
                 the {} kernel(s) with no launch gmprof heard (unlaunched_activity) may hold \
                 positions no launch accounts for, which shifts the ranges after them; per_kernel \
                 names each range after its launch and is not affected",
                counts.unlaunched_activity
            ));
        }
        if builder.untimed_activity > 0 {
            // Kernel replay collapses activity timestamps (start == end). Outside it, CUPTI
            // itself delivered records without times: on an H100 under PM sampling at 10 µs,
            // 117 of llm.c's 511 197 kernels came with start and end 0, in runs of one layer.
            let why = if mode == ProfilingMode::KernelReplay {
                "kernel replay collapses activity timestamps like this"
            } else {
                "CUPTI delivered them without times (seen under heavy PM sampling); these kernels \
                 have no duration and no PM value"
            };
            builder.warnings.push(format!(
                "{} kernel activity record(s) have end <= start, so their duration (from {}) is \
                 empty; {why}",
                builder.untimed_activity, builder.time_source
            ));
        }
        if counts.unknown_range_ids > 0 {
            builder.warnings.push(format!(
                "{} launch(es) or transfer call(s) name a range id the session does not know; they are reported \
                 under {}",
                counts.unknown_range_ids, ROOT_PATH
            ));
        }

        Correlation { rows, range_counters, transfers, counts: builder.counts, warnings: builder.warnings.finish() }
    }
}
