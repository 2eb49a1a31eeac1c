//! The row builder: [`Correlator::finish`](super::Correlator::finish)'s state while it joins
//! launches, activity and counters into rows.
//!
//! Imports `correlator` ([`ContextFailure`]), `names`, `rows`, `store` and `warnings`; `join`
//! imports it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{
    CounterRange, KernelActivity, LaunchApi, LaunchRecord, ProfilingMode, RangeId, TransferActivity, TransferCall,
    TransferKind, UntimedTransfer,
};

use super::correlator::ContextFailure;
use super::names::{demangle_kernel_name, is_profiler_internal_kernel, parse_decimal_u32, parse_range_counter_name};
use super::rows::{
    CorrelationCounts, Granularity, KernelRow, KernelStatus, TimeSource, TransferRow, TransferStatus, TransferTiming,
};
use super::store::{ActivitySlots, ActivityStore, IdMap};
use super::transfer_calls::describe_calls;
use super::warnings::WarningLog;

/// State of [`Correlator::finish`](super::Correlator::finish) while it builds rows.
pub(super) struct RowBuilder<'a> {
    pub(super) tree: &'a SessionTree,
    pub(super) mode: ProfilingMode,
    pub(super) time_source: TimeSource,
    pub(super) metric_count: usize,
    pub(super) time_index: Option<usize>,
    pub(super) demangled: HashMap<String, String>,
    pub(super) counts: CorrelationCounts,
    pub(super) warnings: WarningLog,
    /// Rows whose activity record has end ≤ start where the time source is activity.
    pub(super) untimed_activity: u64,
    /// Set when the CUDA context failed ([`Correlator::context_failed`](super::Correlator::context_failed)).
    pub(super) context_failure: Option<ContextFailure>,
    /// The launches that never completed, for the warning.
    pub(super) not_completed: NotCompletedLog,
}

/// How many launches that never completed the warning names after the first.
const NOT_COMPLETED_NAMED: usize = 3;

/// The launches that never completed: their count, the first and the last few, described.
#[derive(Debug, Default)]
pub(super) struct NotCompletedLog {
    count: u64,
    first: Option<String>,
    last: std::collections::VecDeque<String>,
}

impl NotCompletedLog {
    fn note(&mut self, described: String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(described);
            return;
        }
        if self.last.len() == NOT_COMPLETED_NAMED {
            self.last.pop_front();
        }
        self.last.push_back(described);
    }
}

/// What the counter join gave one launch.
#[derive(Clone, Debug)]
pub(super) enum CounterMatch {
    /// Values to use, plus a status when they are suspect (count mismatch with a name that
    /// still confirms the ordinal).
    Values(Vec<Option<f64>>),
    FlaggedValues(Vec<Option<f64>>, KernelStatus),
    /// No usable values, and why.
    Missing(KernelStatus),
    /// The mode has no per-kernel counters.
    NotExpected,
}

impl CounterMatch {
    /// Whether any counter value was measured: the kernel ran.
    fn has_values(&self) -> bool {
        match self {
            CounterMatch::Values(values) | CounterMatch::FlaggedValues(values, _) => values.iter().any(Option::is_some),
            CounterMatch::Missing(_) | CounterMatch::NotExpected => false,
        }
    }
}

impl RowBuilder<'_> {
    /// Counter ranges of cycle `cycle` matched to its launches by position (kernel replay).
    ///
    /// CUPTI's auto range makes one range per kernel that ran, in launch order: `slots`
    /// says how many each launch made (one for a kernel, none for a launch captured into a
    /// graph, one per kernel node for a graph launch). The result has one entry per launch,
    /// each with one match per slot. A range's name is its position in the cycle, so the
    /// join checks every range's name against the position it fills.
    pub(super) fn match_cycle_by_ordinal(
        &mut self,
        cycle: u32,
        launches: &[LaunchRecord],
        slots: &[u32],
        ranges: Vec<CounterRange>,
    ) -> Vec<Vec<CounterMatch>> {
        let launch_count = launches.len();
        let expected: usize = slots.iter().map(|&n| n as usize).sum();
        let range_count = ranges.len();
        let ordinals_contiguous = launches.iter().enumerate().all(|(position, l)| l.ordinal as usize == position);
        if !ordinals_contiguous {
            self.warnings.push(format!(
                "cycle {cycle}: launch ordinals are not 0..{launch_count} (duplicate or missing \
                 ordinals in capture); all {launch_count} rows of the cycle are flagged \
                 count_mismatch"
            ));
        }
        let per_slot = |m: CounterMatch| -> Vec<Vec<CounterMatch>> {
            slots.iter().map(|&n| vec![m.clone(); n as usize]).collect()
        };
        if range_count == 0 {
            if expected > 0 {
                self.warnings.push(format!(
                    "cycle {cycle}: no counter ranges for {expected} kernel(s) (counter data \
                     dropped?); their rows have status missing_counters"
                ));
            }
            return per_slot(CounterMatch::Missing(KernelStatus::MissingCounters));
        }

        // Counter ranges by their index in the image; a repeated or out-of-range index is an
        // orphan, never a replacement.
        let mut by_index: Vec<Option<CounterRange>> = vec![None; expected];
        let mut orphans = 0u64;
        for range in ranges {
            match by_index.get_mut(range.index as usize) {
                Some(slot @ None) => *slot = Some(range),
                _ => orphans += 1,
            }
        }
        let suspect = !ordinals_contiguous || range_count != expected || orphans > 0;
        if range_count != expected {
            self.warnings.push(format!(
                "cycle {cycle}: {range_count} counter range(s) for {expected} kernel(s) of \
                 {launch_count} launch(es); all rows of the cycle are flagged count_mismatch and \
                 keep counters only where the range name confirms the position"
            ));
        } else if orphans > 0 {
            self.warnings.push(format!(
                "cycle {cycle}: {orphans} counter range(s) with a repeated or out-of-range \
                 index; all rows of the cycle are flagged count_mismatch"
            ));
        }

        let mut name_mismatches = 0u32;
        let mut matches = Vec::with_capacity(launch_count);
        let mut position = 0u32;
        for (launch, &n) in launches.iter().zip(slots) {
            let mut launch_matches = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let claimed = by_index.get_mut(position as usize).and_then(Option::take);
                let result = match claimed {
                    Some(range) if parse_decimal_u32(&range.name) == Some(position) => {
                        let values = self.convert_values(range.values, cycle);
                        if suspect {
                            CounterMatch::FlaggedValues(values, KernelStatus::CountMismatch)
                        } else {
                            CounterMatch::Values(values)
                        }
                    }
                    Some(range) => {
                        name_mismatches += 1;
                        if name_mismatches <= 3 {
                            self.warnings.push(format!(
                                "cycle {cycle}: counter range {} is named {:?}, expected \"{position}\"; \
                                 launch {} gets no counters there",
                                range.index, range.name, launch.correlation_id
                            ));
                        }
                        // The unclaimed range is an orphan: no launch can use it.
                        orphans += 1;
                        CounterMatch::Missing(if suspect {
                            KernelStatus::CountMismatch
                        } else {
                            KernelStatus::NameMismatch
                        })
                    }
                    None => CounterMatch::Missing(if suspect {
                        KernelStatus::CountMismatch
                    } else {
                        KernelStatus::MissingCounters
                    }),
                };
                launch_matches.push(result);
                position += 1;
            }
            matches.push(launch_matches);
        }
        if name_mismatches > 3 {
            self.warnings.push(format!(
                "cycle {cycle}: {name_mismatches} counter range names disagree with their \
                 positions in total"
            ));
        }
        orphans += by_index.iter().filter(|r| r.is_some()).count() as u64;
        self.counts.orphan_counter_ranges += orphans;
        matches
    }

    /// PerKernel mode: counter ranges by the correlation id their name carries. Checks names
    /// and per-cycle counts; unusable ranges are counted as orphans.
    pub(super) fn index_counters_by_correlation(
        &mut self,
        launches: &[LaunchRecord],
        counter_cycles: &mut BTreeMap<u32, Vec<CounterRange>>,
    ) -> IdMap<u32, (u32, CounterRange)> {
        let mut launches_per_cycle: IdMap<u32, u64> = IdMap::default();
        // A rotation's unmeasured launches opened no range.
        for l in launches.iter().filter(|l| !l.unmeasured) {
            *launches_per_cycle.entry(l.cycle).or_default() += 1;
        }
        let mut by_correlation: IdMap<u32, (u32, CounterRange)> = IdMap::default();
        for (cycle, ranges) in std::mem::take(counter_cycles) {
            let launch_count = launches_per_cycle.get(&cycle).copied().unwrap_or(0);
            if ranges.len() as u64 != launch_count {
                self.warnings.push(format!(
                    "cycle {cycle}: {} counter range(s) for {launch_count} launch(es); ranges \
                     are joined by correlation id, unmatched launches are flagged \
                     missing_counters",
                    ranges.len()
                ));
            }
            for range in ranges {
                match parse_decimal_u32(&range.name) {
                    Some(correlation_id) if !by_correlation.contains_key(&correlation_id) => {
                        by_correlation.insert(correlation_id, (cycle, range));
                    }
                    Some(correlation_id) => {
                        self.counts.orphan_counter_ranges += 1;
                        self.warnings.push(format!(
                            "cycle {cycle}: a second counter range for correlation id \
                             {correlation_id}; counted as an orphan"
                        ));
                    }
                    None => {
                        self.counts.orphan_counter_ranges += 1;
                        self.warnings.push(format!(
                            "cycle {cycle}: counter range name {:?} is not a correlation id; \
                             counted as an orphan",
                            range.name
                        ));
                    }
                }
            }
        }
        by_correlation
    }

    /// PerRange mode: counter ranges by the range their name carries.
    pub(super) fn index_counters_by_range(
        &mut self,
        counter_cycles: &mut BTreeMap<u32, Vec<CounterRange>>,
    ) -> HashMap<RangeId, Vec<Option<f64>>> {
        let mut by_range = HashMap::new();
        for (cycle, ranges) in std::mem::take(counter_cycles) {
            for range in ranges {
                let id = parse_range_counter_name(&range.name).filter(|id| self.tree.get(*id).is_some());
                match id {
                    Some(id) if !by_range.contains_key(&id) => {
                        let values = self.convert_values(range.values, cycle);
                        by_range.insert(id, values);
                    }
                    _ => {
                        self.counts.orphan_counter_ranges += 1;
                        self.warnings.push(format!(
                            "cycle {cycle}: counter range {:?} names no range of this session \
                             (or repeats one); counted as an orphan",
                            range.name
                        ));
                    }
                }
            }
        }
        by_range
    }

    /// Captured values to row values: NaN and infinities (no value) become `None`; a value
    /// list of the wrong length is padded or cut, with a warning.
    pub(super) fn convert_values(&mut self, values: Vec<f64>, cycle: u32) -> Vec<Option<f64>> {
        if values.len() != self.metric_count {
            self.warnings.push(format!(
                "cycle {cycle}: a counter range has {} value(s) for {} metric(s); missing \
                 values are left empty, extra ones ignored",
                values.len(),
                self.metric_count
            ));
        }
        let mut converted: Vec<Option<f64>> =
            values.into_iter().take(self.metric_count).map(|v| v.is_finite().then_some(v)).collect();
        converted.resize(self.metric_count, None);
        converted
    }

    /// The rows of one launch: one, or one per kernel of a graph launch (plus, with
    /// whole-graph counters, the graph's own row first).
    ///
    /// `counters` holds one match for a kernel launch; for a graph launch, one per kernel
    /// node (kernel replay, in execution order) or one for the whole graph (per_kernel).
    pub(super) fn launch_rows(
        &mut self,
        launch: &LaunchRecord,
        counters: Vec<CounterMatch>,
        by_correlation: &mut IdMap<u32, ActivitySlots>,
        activities: &mut ActivityStore,
        rows: &mut Vec<KernelRow>,
    ) {
        if launch.api == LaunchApi::Graph {
            let list = match by_correlation.remove(&launch.correlation_id) {
                None => Vec::new(),
                Some(ActivitySlots::One(index)) => vec![index],
                Some(ActivitySlots::Many(list)) => list,
            };
            let kernels: Vec<KernelActivity> = list.iter().filter_map(|&i| activities.take(i)).collect();
            let ran = counters.iter().any(CounterMatch::has_values);
            if kernels.is_empty() && !ran && self.context_failure.is_some() {
                // No kernel of the graph completed before the context failed.
                let counter = counters.into_iter().next().unwrap_or(CounterMatch::NotExpected);
                let mut row = self.not_completed_row(launch, counter);
                row.granularity = Granularity::Graph;
                rows.push(row);
                return;
            }
            self.graph_rows(launch, kernels, counters, rows);
            return;
        }
        let counter = counters.into_iter().next().unwrap_or(CounterMatch::NotExpected);
        match by_correlation.remove(&launch.correlation_id) {
            None if self.context_failure.is_some() && !counter.has_values() => {
                let row = self.not_completed_row(launch, counter);
                rows.push(row);
            }
            None => {
                rows.push(self.row(Some(launch), None, counter, KernelStatus::MissingActivity));
            }
            Some(ActivitySlots::One(index)) => {
                self.single_kernel_row(launch, index, counter, activities, rows);
            }
            Some(ActivitySlots::Many(list)) => {
                // A plain launch has one kernel: it claims the first record; the others stay
                // unclaimed and are reported as unlaunched activity.
                let described: Vec<String> = list
                    .iter()
                    .filter_map(|&i| activities.records.get(i as usize))
                    .take(3)
                    .map(|a| {
                        format!(
                            "{} grid {:?} block {:?} graph {} stream {}",
                            a.name, a.grid, a.block, a.graph_id, a.stream_id
                        )
                    })
                    .collect();
                self.warnings.push(format!(
                    "correlation id {}: {} activity records for one {} launch ({}); the extra ones \
                     are reported as unlaunched activity",
                    launch.correlation_id,
                    list.len(),
                    launch.api_name,
                    described.join("; ")
                ));
                let first = list.first().copied().unwrap_or(u32::MAX);
                self.single_kernel_row(launch, first, counter, activities, rows);
            }
        }
    }

    /// The rows of a graph launch: with whole-graph counters (one match for a launch whose
    /// kernels are not matched one by one), a row of granularity `graph` first; then one
    /// `graph_node` row per kernel in execution order, with its own counters where there is
    /// one match per kernel (kernel replay).
    fn graph_rows(
        &mut self,
        launch: &LaunchRecord,
        mut kernels: Vec<KernelActivity>,
        counters: Vec<CounterMatch>,
        rows: &mut Vec<KernelRow>,
    ) {
        // Execution order. Kernel replay collapses start onto end, so end breaks ties, then
        // the node id (creation order).
        kernels.sort_by_key(|a| (a.start_ns, a.end_ns, a.graph_node_id));
        let per_node = counters.len() == kernels.len() && self.mode == ProfilingMode::KernelReplay;
        let (mut node_counters, whole) = if per_node {
            (counters, None)
        } else {
            (Vec::new(), Some(counters.into_iter().next().unwrap_or(CounterMatch::NotExpected)))
        };
        if let Some(whole) = whole {
            if !matches!(whole, CounterMatch::NotExpected)
                || kernels.is_empty() && self.mode == ProfilingMode::PerKernel
            {
                let row = self.whole_graph_row(launch, &kernels, whole);
                rows.push(row);
            }
        }
        node_counters.resize(kernels.len(), CounterMatch::NotExpected);
        for (activity, counter) in kernels.into_iter().zip(node_counters) {
            if is_profiler_internal_kernel(&activity) {
                // Kernel replay of a graph launch runs the range profiler's own `WaitNs`
                // kernels under the launch's correlation id, each with an auto range of its
                // own (CUPTI 13.0, H100): they hold their position in the join, not a row.
                self.counts.profiler_internal_kernels += 1;
                continue;
            }
            let (graph_id, node_id) = (activity.graph_id, activity.graph_node_id);
            let mut row = self.row(Some(launch), Some(activity), counter, KernelStatus::Ok);
            row.granularity = Granularity::GraphNode;
            row.graph_id = Some(graph_id);
            row.graph_node_id = Some(node_id);
            rows.push(row);
        }
    }

    /// The row of a whole graph launch: its counters, the span and summed time of its
    /// kernels, and a name that lists them.
    fn whole_graph_row(
        &mut self,
        launch: &LaunchRecord,
        kernels: &[KernelActivity],
        counter: CounterMatch,
    ) -> KernelRow {
        let mut row = self.row(Some(launch), None, counter, KernelStatus::Ok);
        row.granularity = Granularity::Graph;
        row.graph_id = kernels.first().map(|k| k.graph_id);
        row.graph_kernels = Some(kernels.len() as u32);
        let mut names: Vec<String> = Vec::new();
        for k in kernels {
            let name = self.demangle(&k.name);
            let short = name.split('(').next().unwrap_or(&name).to_owned();
            if !names.contains(&short) {
                names.push(short);
            }
        }
        let listed = if names.len() > 4 {
            format!("{}, … ({} distinct)", names[..4].join(", "), names.len())
        } else {
            names.join(", ")
        };
        let graph = row.graph_id.map_or_else(|| "?".to_owned(), |g| g.to_string());
        row.kernel_name = Some(format!("graph {graph}: {} kernel(s): {listed}", kernels.len()));
        row.stream_id = kernels.first().map(|k| k.stream_id);
        row.device_id = kernels.first().map(|k| k.device_id);
        row.start_ns = kernels.iter().map(|k| k.start_ns).min();
        row.end_ns = kernels.iter().map(|k| k.end_ns).max();
        // The graph's kernel time: the sum of its kernels' own durations, all of them or none.
        let durations: Option<Vec<u64>> =
            kernels.iter().map(|k| (k.end_ns > k.start_ns).then(|| k.end_ns - k.start_ns)).collect();
        row.duration_ns = durations.map(|d| d.iter().sum()).filter(|_| !kernels.is_empty());
        row
    }

    /// The row of a launch whose kernel never completed (the context failed first): no
    /// times, no metrics, the kernel's name where the launch callback kept it.
    fn not_completed_row(&mut self, launch: &LaunchRecord, counter: CounterMatch) -> KernelRow {
        let mut row = self.row(Some(launch), None, counter, KernelStatus::NotCompleted);
        let kept = self.context_failure.as_ref().and_then(|f| f.names.get(&launch.correlation_id)).cloned();
        if let Some(mangled) = kept {
            row.kernel_name = Some(self.demangle(&mangled));
            row.mangled_name = Some(mangled);
        }
        let what = match (&row.kernel_name, launch.api) {
            (Some(name), _) => name.clone(),
            (None, LaunchApi::Graph) => format!("a CUDA graph ({})", launch.api_name),
            (None, _) => format!("a kernel ({}; its name was not kept)", launch.api_name),
        };
        self.not_completed.note(format!("{what} (correlation id {}, in {})", launch.correlation_id, row.range_path));
        row
    }

    /// The warning naming the launches that never completed, when there were any.
    pub(super) fn not_completed_warning(&self) -> Option<String> {
        let log = &self.not_completed;
        let first = log.first.as_ref()?;
        let error = self.context_failure.as_ref().map_or("", |f| f.error.as_str());
        let named = if log.count == 1 {
            format!("it was {first}")
        } else {
            let between = log.count - 1 - log.last.len() as u64;
            let between = if between > 0 { format!(" ({between} more between)") } else { String::new() };
            format!(
                "the first was {first}; the last{between}: {}",
                log.last.iter().map(String::as_str).collect::<Vec<_>>().join("; ")
            )
        };
        Some(format!(
            "{} launch(es) never completed: the CUDA context failed ({error}) before an activity record or counters \
             came for them; their rows have status not_completed and no times or metrics; {named}",
            log.count
        ))
    }

    /// The row of a launch with one activity record (at `index`).
    pub(super) fn single_kernel_row(
        &mut self,
        launch: &LaunchRecord,
        index: u32,
        counter: CounterMatch,
        activities: &mut ActivityStore,
        rows: &mut Vec<KernelRow>,
    ) {
        let activity = activities.take(index);
        let status = if activity.is_some() { KernelStatus::Ok } else { KernelStatus::MissingActivity };
        rows.push(self.row(Some(launch), activity, counter, status));
    }

    /// Builds one row from what is known about a kernel.
    pub(super) fn row(
        &mut self,
        launch: Option<&LaunchRecord>,
        activity: Option<KernelActivity>,
        counter: CounterMatch,
        status: KernelStatus,
    ) -> KernelRow {
        let (metrics, status) = match counter {
            CounterMatch::Values(values) => (values, status),
            CounterMatch::FlaggedValues(values, flag) => (values, status.worst(flag)),
            CounterMatch::Missing(flag) => (vec![None; self.metric_count], status.worst(flag)),
            CounterMatch::NotExpected => (vec![None; self.metric_count], status),
        };

        let (range_id, range_path) = self.resolve_range(launch.and_then(|l| l.range));

        // The kernel's own counter range (CUPTI's auto range in kernel_replay, the per-kernel
        // user range in per_kernel) measured this.
        let counter_time = self
            .time_index
            .and_then(|i| metrics.get(i).copied().flatten())
            .filter(|t| *t >= 0.0)
            .map(|t| t.round() as u64);
        let range_duration_ns = match self.mode {
            ProfilingMode::KernelReplay | ProfilingMode::PerKernel => counter_time,
            ProfilingMode::PerRange | ProfilingMode::Trace => None,
        };
        let duration_ns = match self.time_source {
            TimeSource::GpuTimeDuration => counter_time,
            TimeSource::Activity => match activity.as_ref() {
                Some(a) if a.end_ns > a.start_ns => Some(a.end_ns - a.start_ns),
                Some(_) => {
                    self.untimed_activity += 1;
                    None
                }
                None => None,
            },
        };

        let mut row = KernelRow {
            range_id,
            range_path,
            cycle: launch.map(|l| l.cycle),
            ordinal: launch.map(|l| l.ordinal),
            correlation_id: launch
                .map(|l| l.correlation_id)
                .or(activity.as_ref().map(|a| a.correlation_id))
                .unwrap_or_default(),
            kernel_name: None,
            mangled_name: None,
            grid: None,
            block: None,
            registers_per_thread: None,
            shared_memory_bytes: None,
            stream_id: None,
            thread: launch.map(|l| l.thread),
            launch_ns: launch.and_then(|l| l.launch_ns),
            launch_end_ns: None,
            api_name: launch.map(|l| l.api_name.clone()),
            device_id: None,
            start_ns: None,
            end_ns: None,
            duration_ns,
            time_source: self.time_source,
            range_duration_ns,
            metrics,
            status,
            granularity: Granularity::Kernel,
            graph_id: None,
            graph_node_id: None,
            graph_kernels: None,
        };
        if let Some(a) = activity {
            row.kernel_name = Some(self.demangle(&a.name));
            row.grid = Some(a.grid);
            row.block = Some(a.block);
            row.registers_per_thread = Some(a.registers_per_thread);
            row.shared_memory_bytes = Some(i64::from(a.static_shared_memory) + i64::from(a.dynamic_shared_memory));
            row.stream_id = Some(a.stream_id);
            row.device_id = Some(a.device_id);
            row.start_ns = Some(a.start_ns);
            row.end_ns = Some(a.end_ns);
            row.mangled_name = Some(a.name);
        }
        row
    }

    /// A range id and its path; an id the tree does not know is counted and becomes the root.
    pub(super) fn resolve_range(&mut self, range_id: Option<RangeId>) -> (Option<RangeId>, String) {
        match range_id.map(|id| (id, self.tree.get(id))) {
            Some((id, Some(node))) => (Some(id), node.path.clone()),
            Some((_, None)) => {
                self.counts.unknown_range_ids += 1;
                (None, ROOT_PATH.to_owned())
            }
            None => (None, ROOT_PATH.to_owned()),
        }
    }

    /// Joins transfer records to their calls (or, failing that, to a graph launch with the
    /// same correlation id); one row per record, in (start, correlation id) order. Calls no
    /// activity record times ([`TransferCall::untimed`]) and that none joined become rows of
    /// their own, without times, at their call's place (see [`Correlation::transfers`]).
    pub(super) fn transfer_rows(
        &mut self,
        calls: Vec<TransferCall>,
        mut records: Vec<TransferActivity>,
        launches: &[LaunchRecord],
        mut internal: BTreeMap<(TransferKind, u64), u64>,
    ) -> Vec<TransferRow> {
        if calls.is_empty() && records.is_empty() {
            return Vec::new();
        }
        // Calls by correlation id; the first call of an id wins.
        let mut by_correlation: IdMap<u32, (usize, bool)> = IdMap::default();
        by_correlation.reserve(calls.len());
        let mut duplicate_calls = 0u64;
        for (index, call) in calls.iter().enumerate() {
            match by_correlation.entry(call.correlation_id) {
                Entry::Occupied(_) => duplicate_calls += 1,
                Entry::Vacant(slot) => {
                    slot.insert((index, false));
                }
            }
        }
        if duplicate_calls > 0 {
            self.warnings.push(format!(
                "{duplicate_calls} memcpy/memset call(s) repeat the correlation id of an earlier \
                 call; their transfers are attributed to the first call"
            ));
        }
        // Graph launches, for records whose correlation id no call holds.
        let mut graph_launches: IdMap<u32, &LaunchRecord> = IdMap::default();
        let callless = records.iter().any(|r| !by_correlation.contains_key(&r.correlation_id));
        if callless {
            for launch in launches.iter().filter(|l| l.api == LaunchApi::Graph) {
                graph_launches.entry(launch.correlation_id).or_insert(launch);
            }
        }

        records.sort_by_key(|r| (r.start_ns, r.correlation_id));
        let mut rows = Vec::with_capacity(records.len());
        for record in records {
            let (thread, range, api_name, status) = match by_correlation.get_mut(&record.correlation_id) {
                Some((index, claimed)) => {
                    *claimed = true;
                    let call = &calls[*index];
                    (Some(call.thread), call.range, Some(call.api_name.to_string()), TransferStatus::Ok)
                }
                None => match graph_launches.get(&record.correlation_id) {
                    Some(launch) => (
                        Some(launch.thread),
                        launch.range,
                        Some(launch.api_name.to_string()),
                        TransferStatus::GraphTransfer,
                    ),
                    None => {
                        if let Some(left) = internal.get_mut(&(record.kind, record.bytes)).filter(|n| **n > 0) {
                            // gmprof's own transfer (see Correlator::add_internal_transfers).
                            *left -= 1;
                            self.counts.profiler_internal_transfers += 1;
                            continue;
                        }
                        (None, None, None, TransferStatus::Unlaunched)
                    }
                },
            };
            let (range_id, range_path) = self.resolve_range(range);
            rows.push(TransferRow {
                correlation_id: record.correlation_id,
                kind: record.kind,
                bytes: record.bytes,
                start_ns: Some(record.start_ns),
                end_ns: Some(record.end_ns),
                duration_ns: Some(record.end_ns.saturating_sub(record.start_ns)),
                timing: TransferTiming::Activity,
                stream_id: Some(record.stream_id),
                device_id: Some(record.device_id),
                range_id,
                range_path,
                thread,
                api_name,
                call_ns: None,
                call_end_ns: None,
                status,
                graph_id: (record.graph_id != 0).then_some(record.graph_id),
                graph_node_id: (record.graph_node_id != 0).then_some(record.graph_node_id),
            });
        }

        // Untimed calls no record claimed, in call (correlation id) order.
        let mut untimed: Vec<(&TransferCall, UntimedTransfer)> = by_correlation
            .values()
            .filter(|(_, claimed)| !claimed)
            .filter_map(|(index, _)| Some((&calls[*index], calls[*index].untimed?)))
            .collect();
        untimed.sort_unstable_by_key(|(call, _)| call.correlation_id);
        let untimed_rows: Vec<TransferRow> = untimed
            .into_iter()
            .map(|(call, what)| {
                let (range_id, range_path) = self.resolve_range(call.range);
                TransferRow {
                    correlation_id: call.correlation_id,
                    kind: what.kind,
                    bytes: what.bytes,
                    start_ns: None,
                    end_ns: None,
                    duration_ns: None,
                    timing: TransferTiming::ApiCall,
                    stream_id: None,
                    device_id: what.device_id,
                    range_id,
                    range_path,
                    thread: Some(call.thread),
                    api_name: Some(call.api_name.to_string()),
                    call_ns: None,
                    call_end_ns: None,
                    status: TransferStatus::Ok,
                    graph_id: None,
                    graph_node_id: None,
                }
            })
            .collect();
        let rows = merge_by_call(rows, untimed_rows);

        let counts = &mut self.counts;
        counts.transfer_rows = rows.len() as u64;
        counts.untimed_transfers = rows.iter().filter(|r| r.timing == TransferTiming::ApiCall).count() as u64;
        counts.unlaunched_transfers = rows.iter().filter(|r| r.status == TransferStatus::Unlaunched).count() as u64;
        counts.graph_transfers = rows.iter().filter(|r| r.status == TransferStatus::GraphTransfer).count() as u64;
        let mut without: Vec<&TransferCall> = by_correlation
            .values()
            .filter(|(index, claimed)| !claimed && calls[*index].untimed.is_none())
            .map(|(index, _)| &calls[*index])
            .collect();
        without.sort_unstable_by_key(|c| c.correlation_id);
        counts.transfer_calls_without_activity = without.len() as u64;
        if counts.unlaunched_transfers > 0 {
            let text = format!(
                "{} memcpy/memset record(s) have no recorded call (issued from a context or thread \
                 gmprof did not capture); they are reported under {ROOT_PATH} with status unlaunched",
                counts.unlaunched_transfers
            );
            self.warnings.push(text);
        }
        if !without.is_empty() {
            let text = format!(
                "{} memcpy/memset call(s) have no activity record: {}; they are not in the transfer table",
                without.len(),
                describe_calls(&without)
            );
            self.warnings.push(text);
        }
        rows
    }

    /// The demangled form of a kernel name, cached: a session launches few distinct kernels
    /// many times, and demangling costs microseconds.
    pub(super) fn demangle(&mut self, raw: &str) -> String {
        if let Some(name) = self.demangled.get(raw) {
            return name.clone();
        }
        let name = demangle_kernel_name(raw);
        self.demangled.insert(raw.to_owned(), name.clone());
        name
    }
}

/// Timed rows (in start order) with the untimed ones (in correlation id order) placed at
/// their call's place: each before the first timed row of a later call.
fn merge_by_call(timed: Vec<TransferRow>, untimed: Vec<TransferRow>) -> Vec<TransferRow> {
    if untimed.is_empty() {
        return timed;
    }
    let mut out = Vec::with_capacity(timed.len() + untimed.len());
    let mut untimed = untimed.into_iter().peekable();
    for row in timed {
        while let Some(next) = untimed.next_if(|u| u.correlation_id < row.correlation_id) {
            out.push(next);
        }
        out.push(row);
    }
    out.extend(untimed);
    out
}
