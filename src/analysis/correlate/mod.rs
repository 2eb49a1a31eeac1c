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

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::model::session::{SessionTree, ROOT_PATH};
use crate::model::{
    CounterRange, KernelActivity, LaunchApi, LaunchRecord, MetricSet, ProfilingMode, RangeId, ThreadId,
    TransferActivity, TransferCall, TransferKind, GPU_TIME_METRIC,
};

/// How many warnings a correlation keeps in full; the rest are counted in one final line, so
/// a capture that went wrong a million times does not produce a million-line report.
pub const MAX_WARNINGS: usize = 64;

/// What the correlator could establish about one kernel row.
///
/// A row has one status. When several problems apply, the one that says most about the
/// trustworthiness of its values wins, in this order: `graph_kernel`,
/// `unlaunched_activity`, `count_mismatch`, `replay_mismatch`, `name_mismatch`,
/// `missing_counters`, `missing_activity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelStatus {
    /// Launch, activity and (in counter modes) counters all joined.
    Ok,
    /// The launch was recorded but its activity record never came (CUPTI dropped records):
    /// name and geometry are unknown; counters and time may still be there.
    MissingActivity,
    /// No counter range belongs to this launch; its metrics are empty.
    MissingCounters,
    /// The launch's cycle has a different number of counter ranges than launches, so the
    /// positional join of the whole cycle is suspect. Values are kept only where the range
    /// name confirms the ordinal.
    CountMismatch,
    /// The counter range at this launch's ordinal has a different name; metrics are empty.
    NameMismatch,
    /// An activity record without a launch record (a context or thread gmprof did not
    /// capture); attributed to the root row, without counters.
    UnlaunchedActivity,
    /// One of several kernels a CUDA graph launch ran under one correlation id; attributed
    /// to the graph launch's range, without counters (they cannot be matched 1:1).
    GraphKernel,
    /// User replay: another pass ran a different kernel (name, grid or block) at this
    /// kernel's position, so CUPTI merged counters of different kernels; metrics are empty.
    ReplayMismatch,
}

impl KernelStatus {
    /// The serialized name, e.g. `missing_activity`.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelStatus::Ok => "ok",
            KernelStatus::MissingActivity => "missing_activity",
            KernelStatus::MissingCounters => "missing_counters",
            KernelStatus::CountMismatch => "count_mismatch",
            KernelStatus::NameMismatch => "name_mismatch",
            KernelStatus::UnlaunchedActivity => "unlaunched_activity",
            KernelStatus::GraphKernel => "graph_kernel",
            KernelStatus::ReplayMismatch => "replay_mismatch",
        }
    }

    /// True for every status but `ok`.
    pub fn is_flagged(self) -> bool {
        self != KernelStatus::Ok
    }

    /// Priority when several problems apply to one row; higher wins.
    fn severity(self) -> u8 {
        match self {
            KernelStatus::Ok => 0,
            KernelStatus::MissingActivity => 1,
            KernelStatus::MissingCounters => 2,
            KernelStatus::NameMismatch => 3,
            KernelStatus::ReplayMismatch => 4,
            KernelStatus::CountMismatch => 5,
            KernelStatus::UnlaunchedActivity => 6,
            KernelStatus::GraphKernel => 7,
        }
    }

    fn worst(self, other: KernelStatus) -> KernelStatus {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for KernelStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a kernel's duration comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeSource {
    /// The `gpu__time_duration.sum` metric. Used in every counter mode, because the range
    /// profiler serializes kernels and collapses activity timestamps (start == end).
    #[serde(rename = "gpu__time_duration")]
    GpuTimeDuration,
    /// Activity record end − start; used in trace mode, where no counters are collected.
    #[serde(rename = "activity")]
    Activity,
}

impl TimeSource {
    /// The time source a mode uses.
    pub fn for_mode(mode: ProfilingMode) -> Self {
        match mode {
            ProfilingMode::Trace => TimeSource::Activity,
            ProfilingMode::KernelReplay | ProfilingMode::PerKernel | ProfilingMode::PerRange => {
                TimeSource::GpuTimeDuration
            }
        }
    }

    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeSource::GpuTimeDuration => "gpu__time_duration",
            TimeSource::Activity => "activity",
        }
    }
}

impl fmt::Display for TimeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One kernel, with everything the three capture streams said about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRow {
    /// The innermost range open on the launching thread, `None` for the root row.
    pub range_id: Option<RangeId>,
    /// That range's path, or [`ROOT_PATH`].
    pub range_path: String,
    /// Counter cycle of the launch; `None` for activity records without a launch.
    pub cycle: Option<u32>,
    /// Launch ordinal within the cycle; `None` for activity records without a launch.
    pub ordinal: Option<u32>,
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Demangled kernel name (the raw name when it does not demangle); `None` without an
    /// activity record.
    pub kernel_name: Option<String>,
    /// The name as CUPTI reported it (mangled for C++ kernels).
    pub mangled_name: Option<String>,
    /// Grid dimensions.
    pub grid: Option<[i32; 3]>,
    /// Block dimensions.
    pub block: Option<[i32; 3]>,
    /// Registers per thread.
    pub registers_per_thread: Option<u16>,
    /// Static plus dynamic shared memory per block, bytes.
    pub shared_memory_bytes: Option<i64>,
    /// CUDA stream id.
    pub stream_id: Option<u32>,
    /// The launching thread; `None` for activity records without a launch.
    pub thread: Option<ThreadId>,
    /// Device ordinal.
    pub device_id: Option<u32>,
    /// Activity start timestamp, ns (collapsed to `end_ns` in counter modes).
    pub start_ns: Option<u64>,
    /// Activity end timestamp, ns.
    pub end_ns: Option<u64>,
    /// Kernel duration, ns, from [`KernelRow::time_source`].
    pub duration_ns: Option<u64>,
    /// Where `duration_ns` comes from.
    pub time_source: TimeSource,
    /// One value per metric of the session's [`MetricSet`], in its order; `None` where no
    /// value was measured or could be matched.
    pub metrics: Vec<Option<f64>>,
    /// What the join established.
    pub status: KernelStatus,
}

/// What the correlator could establish about one transfer row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatus {
    /// The API call and the activity record joined: thread and range are known.
    Ok,
    /// No API call was recorded, but a CUDA graph launch holds the correlation id (a memcpy
    /// or memset node of a graph): attributed to the graph launch's thread and range.
    GraphTransfer,
    /// No API call was recorded (a context or thread gmprof did not capture): attributed to
    /// the root row, without a thread.
    Unlaunched,
}

impl TransferStatus {
    /// The serialized name, e.g. `unlaunched`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferStatus::Ok => "ok",
            TransferStatus::GraphTransfer => "graph_transfer",
            TransferStatus::Unlaunched => "unlaunched",
        }
    }
}

impl fmt::Display for TransferStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One memcpy or memset: its activity record joined with the API call that issued it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferRow {
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Copy direction, or memset.
    pub kind: TransferKind,
    /// Bytes copied or set.
    pub bytes: u64,
    /// Start, ns (CUPTI clock).
    pub start_ns: u64,
    /// End, ns (CUPTI clock).
    pub end_ns: u64,
    /// End − start, ns (0 when the timestamps are not ordered).
    pub duration_ns: u64,
    /// CUDA stream id.
    pub stream_id: u32,
    /// Device ordinal.
    pub device_id: u32,
    /// The innermost range open on the calling thread, `None` for the root row.
    pub range_id: Option<RangeId>,
    /// That range's path, or [`ROOT_PATH`].
    pub range_path: String,
    /// The calling thread; `None` without a recorded call.
    pub thread: Option<ThreadId>,
    /// CUDA function name of the call, e.g. `cuMemcpyHtoDAsync_v2`; `None` without a call.
    #[serde(default)]
    pub api_name: Option<String>,
    /// What the join established.
    pub status: TransferStatus,
}

impl TransferRow {
    /// Bytes / duration, GB/s (bytes per ns); `None` for a zero duration.
    pub fn gbps(&self) -> Option<f64> {
        (self.duration_ns > 0).then(|| self.bytes as f64 / self.duration_ns as f64)
    }
}

/// Counts of what [`Correlator::finish`] saw and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrelationCounts {
    /// Launch records received.
    pub launches: u64,
    /// Activity records received.
    pub activity_records: u64,
    /// Counter ranges received.
    pub counter_ranges: u64,
    /// Distinct counter cycles seen in launches or counter ranges.
    pub counter_cycles: u64,
    /// Kernel rows produced.
    pub kernel_rows: u64,
    /// Rows with status `missing_activity`.
    pub missing_activity: u64,
    /// Rows with status `missing_counters`.
    pub missing_counters: u64,
    /// Rows with status `count_mismatch`.
    pub count_mismatch: u64,
    /// Rows with status `name_mismatch`.
    pub name_mismatch: u64,
    /// Rows with status `unlaunched_activity`.
    pub unlaunched_activity: u64,
    /// Rows with status `graph_kernel`.
    pub graph_kernel: u64,
    /// Rows with status `replay_mismatch`.
    #[serde(default)]
    pub replay_mismatch: u64,
    /// The range profiler's own kernels (CUPTI's one-thread `WaitNs`, launched on an internal
    /// stream under the user's correlation id when user ranges open and close); left out.
    #[serde(default)]
    pub profiler_internal_kernels: u64,
    /// Rows with any status but `ok`.
    pub flagged_rows: u64,
    /// Counter ranges no launch (or range) claimed.
    pub orphan_counter_ranges: u64,
    /// Launches and transfer calls whose range id the session tree did not know
    /// (attributed to the root).
    pub unknown_range_ids: u64,
    /// Memcpy/memset API calls received.
    #[serde(default)]
    pub transfer_calls: u64,
    /// Memcpy/memset activity records received.
    #[serde(default)]
    pub transfer_records: u64,
    /// Transfer rows produced (one per activity record).
    #[serde(default)]
    pub transfer_rows: u64,
    /// Transfer rows with status `unlaunched`.
    #[serde(default)]
    pub unlaunched_transfers: u64,
    /// Transfer rows with status `graph_transfer`.
    #[serde(default)]
    pub graph_transfers: u64,
    /// Transfer calls no activity record joined (CUPTI dropped records?).
    #[serde(default)]
    pub transfer_calls_without_activity: u64,
}

/// The joined result of a session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Correlation {
    /// One row per kernel: launches in (cycle, ordinal) order, the kernels of a graph launch
    /// in start order at the launch's place, then activity records without a launch in
    /// (start, correlation id) order.
    pub rows: Vec<KernelRow>,
    /// In [`ProfilingMode::PerRange`], the counter values CUPTI measured for each range
    /// (inclusive of nested ranges), by range; empty in the other modes.
    pub range_counters: HashMap<RangeId, Vec<Option<f64>>>,
    /// One row per memcpy/memset activity record, in (start, correlation id) order.
    pub transfers: Vec<TransferRow>,
    /// What was seen and flagged.
    pub counts: CorrelationCounts,
    /// Human-readable explanations of every disagreement, at most [`MAX_WARNINGS`] plus one
    /// line counting the rest.
    pub warnings: Vec<String>,
}

/// The counter range name gmprof gives the CUPTI user range of a gmprof range in
/// [`ProfilingMode::PerRange`]; the correlator joins counter ranges back to ranges by it.
pub fn range_counter_name(id: RangeId) -> String {
    format!("gmprof-range-{}-{}", id.slot, id.generation)
}

/// The inverse of [`range_counter_name`]; `None` for any other name.
pub fn parse_range_counter_name(name: &str) -> Option<RangeId> {
    let rest = name.strip_prefix("gmprof-range-")?;
    let (slot, generation) = rest.split_once('-')?;
    Some(RangeId { slot: parse_decimal_u32(slot)?, generation: parse_decimal_u32(generation)? })
}

/// Parses a canonical decimal `u32`: digits only, no sign, no leading zeros (except "0"), so
/// that a name matches an ordinal exactly when it is the ordinal's `to_string()`.
fn parse_decimal_u32(text: &str) -> Option<u32> {
    let canonical =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text.len() == 1 || !text.starts_with('0'));
    if canonical {
        text.parse().ok()
    } else {
        None
    }
}

/// A fast hasher for the small integer keys of analysis (correlation ids, cycles, range
/// ids). The keys come from CUPTI and gmprof, not from an adversary, so SipHash's DoS
/// resistance buys nothing and costs a large share of a million-kernel join.
///
/// The low 57 bits of the hash are the key itself (folded, for multi-word keys): hash tables
/// pick the bucket from the low bits, so consecutive correlation ids land in neighbouring
/// buckets and a join in launch order walks the table sequentially instead of missing the
/// cache on every lookup. The top 7 bits, which the table uses as a tag to tell keys of one
/// probe group apart, come from a multiplicative mix.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher {
    folded: u64,
    mixed: u64,
}

const ID_HASH_MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;
const ID_HASH_LOW_BITS: u64 = (1 << 57) - 1;

impl IdHasher {
    fn mix(&mut self, word: u64) {
        self.folded = self.folded.rotate_left(7) ^ word;
        self.mixed = (self.mixed.rotate_left(5) ^ word).wrapping_mul(ID_HASH_MULTIPLIER);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.mix(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
    fn finish(&self) -> u64 {
        (self.folded & ID_HASH_LOW_BITS) | (self.mixed & !ID_HASH_LOW_BITS)
    }
}

/// A `HashMap` keyed by ids, hashed with [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Collects warnings: keeps the first [`MAX_WARNINGS`], logs them, counts the rest.
#[derive(Debug, Default)]
pub(crate) struct WarningLog {
    kept: Vec<String>,
    suppressed: u64,
}

impl WarningLog {
    pub(crate) fn push(&mut self, text: String) {
        if self.kept.len() < MAX_WARNINGS {
            tracing::warn!("{text}");
            self.kept.push(text);
        } else {
            self.suppressed += 1;
        }
    }

    pub(crate) fn finish(mut self) -> Vec<String> {
        if self.suppressed > 0 {
            let text = format!("... and {} more warnings like the above", self.suppressed);
            tracing::warn!("{text}");
            self.kept.push(text);
        }
        self.kept
    }
}

/// Incremental collector of one session's capture records; see the [module docs](self).
#[derive(Debug, Default)]
pub struct Correlator {
    launches: Vec<LaunchRecord>,
    activities: Vec<KernelActivity>,
    counter_cycles: BTreeMap<u32, Vec<CounterRange>>,
    counter_ranges: u64,
    transfer_calls: Vec<TransferCall>,
    transfer_activities: Vec<TransferActivity>,
    warnings: WarningLog,
    replay_mismatched_kernels: std::collections::HashSet<u32>,
    replay_mismatched_ranges: std::collections::HashSet<RangeId>,
}

/// Where the activity records of one correlation id are.
enum ActivitySlots {
    One(u32),
    Many(Vec<u32>),
}

/// The activity records of a session; each can be claimed by one row only.
///
/// A claimed record is swapped for an empty one (no allocation) and marked, rather than the
/// whole list being rewrapped in `Option`s: that copy of a million records was a tenth of a
/// large join.
struct ActivityStore {
    records: Vec<KernelActivity>,
    claimed: Vec<bool>,
}

impl ActivityStore {
    fn new(records: Vec<KernelActivity>) -> Self {
        let claimed = vec![false; records.len()];
        Self { records, claimed }
    }

    /// The record at `index`, unless it was claimed before (or does not exist).
    fn take(&mut self, index: u32) -> Option<KernelActivity> {
        let index = index as usize;
        let claimed = self.claimed.get_mut(index)?;
        if *claimed {
            return None;
        }
        *claimed = true;
        let record = self.records.get_mut(index)?;
        Some(std::mem::replace(record, vacant_activity()))
    }

    /// The records no row claimed, in their original order.
    fn into_unclaimed(self) -> Vec<KernelActivity> {
        self.records.into_iter().zip(self.claimed).filter(|(_, claimed)| !claimed).map(|(r, _)| r).collect()
    }
}

/// The placeholder left where a claimed activity record was.
fn vacant_activity() -> KernelActivity {
    KernelActivity {
        correlation_id: 0,
        name: String::new(),
        grid: [0; 3],
        block: [0; 3],
        registers_per_thread: 0,
        static_shared_memory: 0,
        dynamic_shared_memory: 0,
        stream_id: 0,
        context_id: 0,
        device_id: 0,
        graph_id: 0,
        start_ns: 0,
        end_ns: 0,
    }
}

/// True for a kernel the range profiler launches itself under user ranges.
pub fn is_profiler_internal_kernel(a: &KernelActivity) -> bool {
    a.name == "WaitNs" && a.grid == [1, 1, 1] && a.block == [1, 1, 1]
}

/// State of [`Correlator::finish`] while it builds rows.
struct RowBuilder<'a> {
    tree: &'a SessionTree,
    mode: ProfilingMode,
    time_source: TimeSource,
    metric_count: usize,
    time_index: Option<usize>,
    demangled: HashMap<String, String>,
    counts: CorrelationCounts,
    warnings: WarningLog,
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

    /// Adds one memcpy/memset API call.
    pub fn add_transfer_call(&mut self, call: TransferCall) {
        self.transfer_calls.push(call);
    }

    /// Adds one memcpy/memset activity record.
    pub fn add_transfer_activity(&mut self, activity: TransferActivity) {
        self.transfer_activities.push(activity);
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
                counter_ranges,
                transfer_calls: transfer_calls.len() as u64,
                transfer_records: transfer_activities.len() as u64,
                ..CorrelationCounts::default()
            },
            warnings,
        };
        if mode != ProfilingMode::Trace && builder.time_index.is_none() {
            builder.warnings.push(format!(
                "{GPU_TIME_METRIC} was not collected: kernel durations, duration-weighted \
                 metrics and bandwidths are empty"
            ));
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
            let counters = match mode {
                ProfilingMode::KernelReplay => builder.match_cycle_by_ordinal(
                    cycle,
                    cycle_launches,
                    counter_cycles.remove(&cycle).unwrap_or_default(),
                ),
                ProfilingMode::PerKernel => cycle_launches
                    .iter()
                    .map(|l| match per_kernel_counters.remove(&l.correlation_id) {
                        Some(_) if replay_mismatched_kernels.contains(&l.correlation_id) => {
                            CounterMatch::Missing(KernelStatus::ReplayMismatch)
                        }
                        Some((_, range)) => CounterMatch::Values(builder.convert_values(range.values, cycle)),
                        None => CounterMatch::Missing(KernelStatus::MissingCounters),
                    })
                    .collect(),
                ProfilingMode::PerRange | ProfilingMode::Trace => {
                    vec![CounterMatch::NotExpected; cycle_launches.len()]
                }
            };
            for (launch, counter) in cycle_launches.iter().zip(counters) {
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

        let transfers = builder.transfer_rows(transfer_calls, transfer_activities, &launches);

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
                KernelStatus::GraphKernel => counts.graph_kernel += 1,
                KernelStatus::ReplayMismatch => counts.replay_mismatch += 1,
            }
        }
        counts.flagged_rows = rows.iter().filter(|r| r.status.is_flagged()).count() as u64;
        if counts.missing_activity > 0 {
            builder.warnings.push(format!(
                "{} launch(es) have no kernel activity record (CUPTI dropped activity records?); \
                 their rows have status missing_activity and no kernel name",
                counts.missing_activity
            ));
        }
        if counts.graph_kernel > 0 {
            builder.warnings.push(format!(
                "{} kernel(s) ran inside CUDA graph launches that ran several kernels under one \
                 correlation id; they are reported under the graph launch's range with status \
                 graph_kernel and without counters",
                counts.graph_kernel
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

/// What the counter join gave one launch.
#[derive(Clone, Debug)]
enum CounterMatch {
    /// Values to use, plus a status when they are suspect (count mismatch with a name that
    /// still confirms the ordinal).
    Values(Vec<Option<f64>>),
    FlaggedValues(Vec<Option<f64>>, KernelStatus),
    /// No usable values, and why.
    Missing(KernelStatus),
    /// The mode has no per-kernel counters.
    NotExpected,
}

impl RowBuilder<'_> {
    /// Counter ranges of cycle `cycle` matched to its launches by ordinal, one entry per
    /// launch in `launches`' order.
    fn match_cycle_by_ordinal(
        &mut self,
        cycle: u32,
        launches: &[LaunchRecord],
        ranges: Vec<CounterRange>,
    ) -> Vec<CounterMatch> {
        let launch_count = launches.len();
        let range_count = ranges.len();
        let ordinals_contiguous = launches.iter().enumerate().all(|(position, l)| l.ordinal as usize == position);
        if !ordinals_contiguous {
            self.warnings.push(format!(
                "cycle {cycle}: launch ordinals are not 0..{launch_count} (duplicate or missing \
                 ordinals in capture); all {launch_count} rows of the cycle are flagged \
                 count_mismatch"
            ));
        }

        if range_count == 0 {
            self.warnings.push(format!(
                "cycle {cycle}: no counter ranges for {launch_count} launch(es) (counter data \
                 dropped?); their rows have status missing_counters"
            ));
            return vec![CounterMatch::Missing(KernelStatus::MissingCounters); launch_count];
        }

        // Counter ranges by their index in the image; a repeated or out-of-range index is an
        // orphan, never a replacement.
        let mut by_index: Vec<Option<CounterRange>> = vec![None; launch_count];
        let mut orphans = 0u64;
        for range in ranges {
            match by_index.get_mut(range.index as usize) {
                Some(slot @ None) => *slot = Some(range),
                _ => orphans += 1,
            }
        }
        let suspect = !ordinals_contiguous || range_count != launch_count || orphans > 0;
        if range_count != launch_count {
            self.warnings.push(format!(
                "cycle {cycle}: {range_count} counter range(s) for {launch_count} launch(es); \
                 all rows of the cycle are flagged count_mismatch and keep counters only where \
                 the range name confirms the launch ordinal"
            ));
        } else if orphans > 0 {
            self.warnings.push(format!(
                "cycle {cycle}: {orphans} counter range(s) with a repeated or out-of-range \
                 index; all rows of the cycle are flagged count_mismatch"
            ));
        }

        let mut name_mismatches = 0u32;
        let mut matches = Vec::with_capacity(launch_count);
        for launch in launches {
            let claimed = by_index.get_mut(launch.ordinal as usize).and_then(Option::take);
            let result = match claimed {
                Some(range) if parse_decimal_u32(&range.name) == Some(launch.ordinal) => {
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
                            "cycle {cycle}: counter range {} is named {:?}, expected \"{}\"; \
                             launch {} gets no counters",
                            range.index, range.name, launch.ordinal, launch.correlation_id
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
            matches.push(result);
        }
        if name_mismatches > 3 {
            self.warnings.push(format!(
                "cycle {cycle}: {name_mismatches} counter range names disagree with their \
                 launch ordinals in total"
            ));
        }
        orphans += by_index.iter().filter(|r| r.is_some()).count() as u64;
        self.counts.orphan_counter_ranges += orphans;
        matches
    }

    /// PerKernel mode: counter ranges by the correlation id their name carries. Checks names
    /// and per-cycle counts; unusable ranges are counted as orphans.
    fn index_counters_by_correlation(
        &mut self,
        launches: &[LaunchRecord],
        counter_cycles: &mut BTreeMap<u32, Vec<CounterRange>>,
    ) -> IdMap<u32, (u32, CounterRange)> {
        let mut launches_per_cycle: IdMap<u32, u64> = IdMap::default();
        for l in launches {
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
    fn index_counters_by_range(
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
    fn convert_values(&mut self, values: Vec<f64>, cycle: u32) -> Vec<Option<f64>> {
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

    /// The rows of one launch: one, or one per kernel of a graph launch.
    fn launch_rows(
        &mut self,
        launch: &LaunchRecord,
        counter: CounterMatch,
        by_correlation: &mut IdMap<u32, ActivitySlots>,
        activities: &mut ActivityStore,
        rows: &mut Vec<KernelRow>,
    ) {
        let graph_kernels = match by_correlation.remove(&launch.correlation_id) {
            None => {
                rows.push(self.row(Some(launch), None, counter, KernelStatus::MissingActivity));
                return;
            }
            Some(ActivitySlots::One(index)) => {
                self.single_kernel_row(launch, index, counter, activities, rows);
                return;
            }
            Some(ActivitySlots::Many(list)) if launch.api == LaunchApi::Graph => list,
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
                return;
            }
        };
        let mut kernels: Vec<KernelActivity> = graph_kernels.iter().filter_map(|&i| activities.take(i)).collect();
        kernels.sort_by_key(|a| (a.start_ns, a.correlation_id));
        for activity in kernels {
            rows.push(self.row(Some(launch), Some(activity), CounterMatch::NotExpected, KernelStatus::GraphKernel));
        }
    }

    /// The row of a launch with one activity record (at `index`).
    fn single_kernel_row(
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
    fn row(
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

        let duration_ns = match self.time_source {
            TimeSource::GpuTimeDuration if self.mode != ProfilingMode::PerRange => self
                .time_index
                .and_then(|i| metrics.get(i).copied().flatten())
                .filter(|t| *t >= 0.0)
                .map(|t| t.round() as u64),
            TimeSource::GpuTimeDuration => None,
            TimeSource::Activity => activity.as_ref().and_then(|a| a.end_ns.checked_sub(a.start_ns)),
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
            device_id: None,
            start_ns: None,
            end_ns: None,
            duration_ns,
            time_source: self.time_source,
            metrics,
            status,
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
    fn resolve_range(&mut self, range_id: Option<RangeId>) -> (Option<RangeId>, String) {
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
    /// same correlation id); one row per record, in (start, correlation id) order.
    fn transfer_rows(
        &mut self,
        calls: Vec<TransferCall>,
        mut records: Vec<TransferActivity>,
        launches: &[LaunchRecord],
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
                    (Some(call.thread), call.range, Some(call.api_name.clone()), TransferStatus::Ok)
                }
                None => match graph_launches.get(&record.correlation_id) {
                    Some(launch) => (
                        Some(launch.thread),
                        launch.range,
                        Some(launch.api_name.clone()),
                        TransferStatus::GraphTransfer,
                    ),
                    None => (None, None, None, TransferStatus::Unlaunched),
                },
            };
            let (range_id, range_path) = self.resolve_range(range);
            rows.push(TransferRow {
                correlation_id: record.correlation_id,
                kind: record.kind,
                bytes: record.bytes,
                start_ns: record.start_ns,
                end_ns: record.end_ns,
                duration_ns: record.end_ns.saturating_sub(record.start_ns),
                stream_id: record.stream_id,
                device_id: record.device_id,
                range_id,
                range_path,
                thread,
                api_name,
                status,
            });
        }

        let counts = &mut self.counts;
        counts.transfer_rows = rows.len() as u64;
        counts.unlaunched_transfers = rows.iter().filter(|r| r.status == TransferStatus::Unlaunched).count() as u64;
        counts.graph_transfers = rows.iter().filter(|r| r.status == TransferStatus::GraphTransfer).count() as u64;
        counts.transfer_calls_without_activity = by_correlation.values().filter(|(_, claimed)| !claimed).count() as u64;
        if counts.unlaunched_transfers > 0 {
            let text = format!(
                "{} memcpy/memset record(s) have no recorded call (issued from a context or thread \
                 gmprof did not capture); they are reported under {ROOT_PATH} with status unlaunched",
                counts.unlaunched_transfers
            );
            self.warnings.push(text);
        }
        if self.counts.transfer_calls_without_activity > 0 {
            let text = format!(
                "{} memcpy/memset call(s) have no activity record (CUPTI dropped activity \
                 records?); they are not in the transfer table",
                self.counts.transfer_calls_without_activity
            );
            self.warnings.push(text);
        }
        rows
    }

    /// The demangled form of a kernel name, cached: a session launches few distinct kernels
    /// many times, and demangling costs microseconds.
    fn demangle(&mut self, raw: &str) -> String {
        if let Some(name) = self.demangled.get(raw) {
            return name.clone();
        }
        let name = demangle_kernel_name(raw);
        self.demangled.insert(raw.to_owned(), name.clone());
        name
    }
}

/// Demangles a C++ (Itanium ABI) kernel name; any other name is returned as it is.
pub fn demangle_kernel_name(raw: &str) -> String {
    if !raw.starts_with("_Z") {
        return raw.to_owned();
    }
    cpp_demangle::Symbol::new(raw).ok().and_then(|symbol| symbol.demangle().ok()).unwrap_or_else(|| raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MetricKind, MetricSpec};

    fn metrics() -> MetricSet {
        MetricSet {
            metrics: vec![
                MetricSpec {
                    name: GPU_TIME_METRIC.into(),
                    kind: MetricKind::Counter,
                    unit: "nsecond".into(),
                    description: String::new(),
                },
                MetricSpec {
                    name: "dram__bytes_read.sum".into(),
                    kind: MetricKind::Counter,
                    unit: "byte".into(),
                    description: String::new(),
                },
            ],
        }
    }

    fn launch(correlation_id: u32, cycle: u32, ordinal: u32, range: Option<RangeId>) -> LaunchRecord {
        LaunchRecord {
            correlation_id,
            thread: 1,
            range,
            cycle,
            ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
        }
    }

    fn activity(correlation_id: u32, name: &str) -> KernelActivity {
        KernelActivity {
            correlation_id,
            name: name.into(),
            grid: [1, 1, 1],
            block: [128, 1, 1],
            registers_per_thread: 32,
            static_shared_memory: 16,
            dynamic_shared_memory: 1024,
            stream_id: 7,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            start_ns: 100,
            end_ns: 100,
        }
    }

    fn counters(cycle: u32, index: u32, name: &str, time: f64, bytes: f64) -> CounterRange {
        CounterRange { cycle, index, name: name.into(), values: vec![time, bytes] }
    }

    #[test]
    fn canonical_decimal_only() {
        assert_eq!(parse_decimal_u32("0"), Some(0));
        assert_eq!(parse_decimal_u32("17"), Some(17));
        for bad in ["", "+1", "01", "1a", "-1", " 1", "99999999999"] {
            assert_eq!(parse_decimal_u32(bad), None, "{bad}");
        }
        let id = RangeId { slot: 3, generation: 9 };
        assert_eq!(parse_range_counter_name(&range_counter_name(id)), Some(id));
        assert_eq!(parse_range_counter_name("gmprof-range-3"), None);
    }

    #[test]
    fn demangles_cpp_and_keeps_c_names() {
        assert_eq!(demangle_kernel_name("_Z6vecAddPfS_S_i"), "vecAdd(float*, float*, float*, int)");
        assert_eq!(demangle_kernel_name("plain_c_kernel"), "plain_c_kernel");
        assert_eq!(demangle_kernel_name("_Z!!notvalid"), "_Z!!notvalid");
    }

    #[test]
    fn kernel_replay_joins_by_ordinal() {
        let mut tree = SessionTree::new();
        let r = tree.push("step", 1, 0);
        let mut c = Correlator::new();
        // Added out of order on purpose.
        c.add_counter_ranges(0, vec![counters(0, 1, "1", 20.0, 2000.0), counters(0, 0, "0", 10.0, 1000.0)]);
        c.add_activity(activity(11, "_Z1kv"));
        c.add_launch(launch(11, 0, 1, Some(r)));
        c.add_launch(launch(10, 0, 0, Some(r)));
        c.add_activity(activity(10, "k0"));
        let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
        assert_eq!(out.rows.len(), 2);
        assert_eq!(out.rows[0].correlation_id, 10);
        assert_eq!(out.rows[0].metrics, vec![Some(10.0), Some(1000.0)]);
        assert_eq!(out.rows[0].duration_ns, Some(10));
        assert_eq!(out.rows[1].kernel_name.as_deref(), Some("k()"));
        assert_eq!(out.rows[1].mangled_name.as_deref(), Some("_Z1kv"));
        assert_eq!(out.rows[1].shared_memory_bytes, Some(1040));
        assert_eq!(out.rows[1].range_path, "step");
        assert!(out.rows.iter().all(|r| r.status == KernelStatus::Ok));
        assert_eq!(out.counts.flagged_rows, 0);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    }

    #[test]
    fn name_mismatch_is_flagged_not_used() {
        let tree = SessionTree::new();
        let mut c = Correlator::new();
        c.add_launch(launch(1, 0, 0, None));
        c.add_launch(launch(2, 0, 1, None));
        c.add_activity(activity(1, "a"));
        c.add_activity(activity(2, "b"));
        c.add_counter_ranges(0, vec![counters(0, 0, "0", 1.0, 1.0), counters(0, 1, "7", 2.0, 2.0)]);
        let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
        assert_eq!(out.rows[0].status, KernelStatus::Ok);
        assert_eq!(out.rows[1].status, KernelStatus::NameMismatch);
        assert_eq!(out.rows[1].metrics, vec![None, None]);
        assert_eq!(out.counts.orphan_counter_ranges, 1);
        assert_eq!(out.rows[0].range_path, ROOT_PATH);
    }

    #[test]
    fn per_kernel_joins_by_correlation_id() {
        let tree = SessionTree::new();
        let mut c = Correlator::new();
        c.add_launch(launch(41, 0, 0, None));
        c.add_launch(launch(42, 0, 1, None));
        c.add_activity(activity(41, "a"));
        c.add_activity(activity(42, "b"));
        c.add_counter_ranges(0, vec![counters(0, 0, "42", 5.0, 50.0), counters(0, 1, "99", 1.0, 1.0)]);
        let out = c.finish(&tree, &metrics(), ProfilingMode::PerKernel);
        assert_eq!(out.rows[0].status, KernelStatus::MissingCounters);
        assert_eq!(out.rows[1].metrics, vec![Some(5.0), Some(50.0)]);
        assert_eq!(out.rows[1].status, KernelStatus::Ok);
        assert_eq!(out.counts.orphan_counter_ranges, 1);
    }

    #[test]
    fn extra_records_of_one_launch_stay_visible() {
        let tree = SessionTree::new();
        let mut c = Correlator::new();
        c.add_launch(launch(7, 0, 0, None));
        c.add_activity(activity(7, "a"));
        c.add_activity(activity(7, "b"));
        let out = c.finish(&tree, &metrics(), ProfilingMode::Trace);
        assert_eq!(out.rows.len(), 2);
        assert_eq!(out.rows[1].status, KernelStatus::UnlaunchedActivity);
    }

    #[test]
    fn the_range_profilers_own_kernels_are_left_out_under_user_ranges() {
        let tree = SessionTree::new();
        for (mode, rows, internal) in [(ProfilingMode::PerKernel, 1, 1), (ProfilingMode::Trace, 2, 0)] {
            let mut c = Correlator::new();
            c.add_launch(launch(4, 0, 0, None));
            c.add_activity(activity(4, "vector_add"));
            let mut wait = activity(4, "WaitNs");
            wait.grid = [1, 1, 1];
            wait.block = [1, 1, 1];
            c.add_activity(wait);
            c.add_counter_ranges(0, vec![counters(0, 0, "4", 5.0, 50.0)]);
            let out = c.finish(&tree, &metrics(), mode);
            assert_eq!(out.rows.len(), rows, "{mode:?}");
            assert_eq!(out.counts.profiler_internal_kernels, internal);
            assert_eq!(out.rows[0].kernel_name.as_deref(), Some("vector_add"));
        }
    }

    #[test]
    fn replay_mismatches_empty_the_kernel_and_its_ranges() {
        let mut tree = SessionTree::new();
        let outer = tree.push("step", 1, 0);
        let mut c = Correlator::new();
        c.add_launch(launch(1, 0, 0, Some(outer)));
        c.add_launch(launch(2, 0, 1, Some(outer)));
        c.add_activity(activity(1, "a"));
        c.add_activity(activity(2, "b"));
        c.add_counter_ranges(0, vec![counters(0, 0, "1", 5.0, 50.0), counters(0, 1, "2", 6.0, 60.0)]);
        c.flag_replay_mismatch(2);
        let out = c.finish(&tree, &metrics(), ProfilingMode::PerKernel);
        assert_eq!(out.rows[0].status, KernelStatus::Ok);
        assert_eq!(out.rows[1].status, KernelStatus::ReplayMismatch);
        assert_eq!(out.rows[1].metrics, vec![None, None], "never merged blindly");
        assert_eq!(out.counts.replay_mismatch, 1);

        let mut c = Correlator::new();
        c.add_counter_ranges(0, vec![counters(0, 0, &range_counter_name(outer), 9.0, 90.0)]);
        c.flag_range_replay_mismatch(outer);
        let out = c.finish(&tree, &metrics(), ProfilingMode::PerRange);
        assert!(!out.range_counters.contains_key(&outer));
        assert!(out.warnings.iter().any(|w| w.contains("step") && w.contains("discarded")), "{:?}", out.warnings);
    }

    #[test]
    fn graph_kernels_go_to_the_graph_launch_range() {
        let mut tree = SessionTree::new();
        let r = tree.push("graph_region", 1, 0);
        let mut c = Correlator::new();
        let mut g = launch(5, 0, 0, Some(r));
        g.api = LaunchApi::Graph;
        c.add_launch(g);
        let mut a = activity(5, "g1");
        a.start_ns = 20;
        c.add_activity(a);
        let mut b = activity(5, "g0");
        b.start_ns = 10;
        c.add_activity(b);
        c.add_activity(activity(77, "stranger"));
        let out = c.finish(&tree, &metrics(), ProfilingMode::Trace);
        assert_eq!(out.rows.len(), 3);
        assert_eq!(out.rows[0].kernel_name.as_deref(), Some("g0"));
        assert_eq!(out.rows[0].status, KernelStatus::GraphKernel);
        assert_eq!(out.rows[1].range_id, Some(r));
        assert_eq!(out.rows[2].status, KernelStatus::UnlaunchedActivity);
        assert_eq!(out.rows[2].range_path, ROOT_PATH);
        assert_eq!(out.rows[2].cycle, None);
        assert_eq!(out.counts.graph_kernel, 2);
        assert_eq!(out.counts.unlaunched_activity, 1);
    }

    #[test]
    fn trace_mode_time_comes_from_activity() {
        let tree = SessionTree::new();
        let mut c = Correlator::new();
        c.add_launch(launch(1, 0, 0, None));
        let mut a = activity(1, "k");
        a.start_ns = 1000;
        a.end_ns = 1750;
        c.add_activity(a);
        let out = c.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
        assert_eq!(out.rows[0].duration_ns, Some(750));
        assert_eq!(out.rows[0].time_source, TimeSource::Activity);
        assert_eq!(out.rows[0].status, KernelStatus::Ok);
    }

    #[test]
    fn nan_values_become_none_and_stale_ranges_go_to_root() {
        let mut tree = SessionTree::new();
        let stale = tree.push("old", 1, 0);
        tree.reset();
        let mut c = Correlator::new();
        c.add_launch(launch(1, 0, 0, Some(stale)));
        c.add_activity(activity(1, "k"));
        c.add_counter_ranges(0, vec![counters(0, 0, "0", 3.0, f64::NAN)]);
        let out = c.finish(&tree, &metrics(), ProfilingMode::KernelReplay);
        assert_eq!(out.rows[0].metrics, vec![Some(3.0), None]);
        assert_eq!(out.rows[0].range_id, None);
        assert_eq!(out.rows[0].range_path, ROOT_PATH);
        assert_eq!(out.counts.unknown_range_ids, 1);
        assert!(out.warnings.iter().any(|w| w.contains("range id")));
    }

    #[test]
    fn transfers_join_by_correlation_id() {
        let mut tree = SessionTree::new();
        let stale = tree.push("old", 1, 0);
        tree.reset();
        let r = tree.push("copying", 1, 0);
        let mut c = Correlator::new();
        let record = |correlation_id: u32, start_ns: u64| TransferActivity {
            correlation_id,
            kind: TransferKind::MemcpyHtoD,
            bytes: 100,
            start_ns,
            end_ns: start_ns + 10,
            stream_id: 2,
            context_id: 1,
            device_id: 0,
        };
        let call = |correlation_id: u32, thread: ThreadId, range: Option<RangeId>| TransferCall {
            correlation_id,
            thread,
            range,
            api_name: "cuMemcpyHtoD_v2".into(),
        };
        c.add_transfer_call(call(1, 5, Some(r)));
        // A repeated id: the first call wins.
        c.add_transfer_call(call(1, 6, None));
        // A range id of an earlier session: the root.
        c.add_transfer_call(call(2, 5, Some(stale)));
        c.add_transfer_activity(record(2, 50));
        c.add_transfer_activity(record(1, 40));
        let out = c.finish(&tree, &MetricSet::default(), ProfilingMode::Trace);
        assert_eq!(out.transfers.len(), 2);
        assert_eq!((out.transfers[0].correlation_id, out.transfers[0].thread), (1, Some(5)));
        assert_eq!((out.transfers[0].range_id, out.transfers[0].range_path.as_str()), (Some(r), "copying"));
        assert_eq!((out.transfers[1].range_id, out.transfers[1].range_path.as_str()), (None, ROOT_PATH));
        assert_eq!(out.transfers[1].status, TransferStatus::Ok);
        assert_eq!(out.counts.unknown_range_ids, 1);
        assert_eq!((out.counts.transfer_calls, out.counts.transfer_rows), (3, 2));
        assert_eq!(out.counts.transfer_calls_without_activity, 0);
        assert!(out.warnings.iter().any(|w| w.contains("repeat the correlation id")), "{:?}", out.warnings);
        assert_eq!(serde_json::to_string(&TransferStatus::Unlaunched).ok().as_deref(), Some("\"unlaunched\""));
    }

    #[test]
    fn per_range_counters_are_joined_by_range_name() {
        let mut tree = SessionTree::new();
        let r = tree.push("step", 1, 0);
        tree.pop(1, 10).expect("pop");
        let mut c = Correlator::new();
        c.add_launch(launch(1, 0, 0, Some(r)));
        c.add_activity(activity(1, "k"));
        c.add_counter_ranges(0, vec![counters(0, 0, &range_counter_name(r), 9.0, 90.0)]);
        let out = c.finish(&tree, &metrics(), ProfilingMode::PerRange);
        assert_eq!(out.range_counters.get(&r), Some(&vec![Some(9.0), Some(90.0)]));
        assert_eq!(out.rows[0].status, KernelStatus::Ok);
        assert_eq!(out.rows[0].duration_ns, None);
    }
}
