//! The join: [`Correlator::finish`] turns the collected records into a [`Correlation`], by
//! the rules of the [module docs](super).
//!
//! Imports `correlator` (the state it consumes), `build` (the row builder), `call_stamps`,
//! `store`, `names` and `rows`; `mod.rs` declares it and nothing imports it (its one item is a method).

use std::collections::HashMap;

use super::build::{CounterMatch, NotCompletedLog, RowBuilder};
use super::correlator::Correlator;
use super::names::is_profiler_internal_kernel;
use super::rows::{Correlation, CorrelationCounts, Granularity, KernelRow, KernelStatus, TimeSource};
use super::store::{ActivitySlots, ActivityStore, IdMap};
use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{
    CounterRange, KernelActivity, LaunchApi, MetricSet, ProfilingMode, RangeId, TransferCall, GPU_TIME_METRIC,
};

impl Correlator {
    /// Joins everything added; see the [module docs](super) for the rules.
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
            call_stamps,
            ..
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
                            // Rotation: its position is measured in another step.
                            None if l.unmeasured => CounterMatch::Missing(KernelStatus::Unmeasured),
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
        let mut transfers = builder.transfer_rows(transfer_calls, transfer_activities, &launches, internal_transfers);
        super::call_stamps::apply(&call_stamps, &mut rows, &mut transfers);

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
                KernelStatus::Unmeasured => counts.unmeasured += 1,
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
            // On an H200 with CUPTI 13.0.1, 3 130 of a GPT-2's 3 390 CUDA graph kernels came
            // without times after the probes' SASS metrics path had run in the process (it
            // stops at the first capture; the kernels ran after it), and none without it.
            let why = if mode == ProfilingMode::KernelReplay {
                "kernel replay collapses activity timestamps like this"
            } else {
                "CUPTI delivered them without times (a forced flush of its buffers while they ran does this; seen \
                 under heavy PM sampling, and for CUDA graph kernels once the probes' SASS metrics had run in the \
                 process); these kernels have no duration and no PM value"
            };
            let graph = if builder.time_source == TimeSource::Activity {
                rows.iter().filter(|r| r.granularity == Granularity::GraphNode && r.duration_ns.is_none()).count()
            } else {
                0
            };
            let graph =
                if graph > 0 { format!(" ({graph} of them kernels of CUDA graph launches)") } else { String::new() };
            builder.warnings.push(format!(
                "{} kernel activity record(s){graph} have end <= start, so their duration (from {}) is \
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
