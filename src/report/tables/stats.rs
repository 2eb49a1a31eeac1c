//! Statistics per label: how the instances of one range path, or of one kernel within one
//! range path, are distributed.
//!
//! Layer 3 (the safe profiler), report output. Where [`crate::report::Summary`] gives one
//! line per range path, this module answers "how much does `train_step/forward` vary from
//! step to step" and "which kernel of `train_step/backward` takes the time":
//!
//! - [`Report::range_stats`]: range rows grouped by path, over their `gpu_time_ns`
//!   ([`StatsQuantity::GpuTimeNs`]); [`Report::range_wall_stats`] the same over
//!   `wall_time_ns` ([`StatsQuantity::WallTimeNs`]).
//! - [`Report::kernel_stats`]: kernel rows grouped by (range path, kernel name), over their
//!   `duration_ns` ([`StatsQuantity::DurationNs`]). Kernels without an activity record have no
//!   name and form one group per path with `kernel_name` `None`.
//!
//! Each group ([`LabelStats`]) has count, total, mean, min, max, p50, p99 and its share of a
//! grand total, and the groups are sorted by total, largest first, ties broken by range path
//! and then kernel name (ascending, `None` first), so the order is deterministic.
//!
//! # Definitions
//!
//! - Instances without a value (a range without known GPU time, a kernel without a
//!   duration) are left out of every statistic and counted in [`LabelStats::missing`];
//!   `count` is the number of values. Total, mean, min, max and percentiles are `None` (blank,
//!   never 0) for a group without values.
//! - Percentiles are **nearest rank**: with the `n` values sorted ascending as
//!   `v[1] ≤ … ≤ v[n]`, the p-th percentile is `v[⌈p·n/100⌉]` (rank at least 1). It is always
//!   one of the values, never an interpolation: for the values 1..=100, p50 is 50 and p99 is
//!   99; for a single value every percentile is that value. See [`nearest_rank`].
//! - `share_pct` is `100 · total / grand total`, `None` when the grand total is 0. For kernels
//!   the grand total is Σ `duration_ns` of every kernel, so kernel shares add up to 100%. Range
//!   rows are inclusive (a parent's time contains its children's), so for ranges the grand
//!   total is Σ over the *top-level* rows (depth 0, the root row included): the shares of
//!   top-level paths add up to 100%, and a nested path's share is its part of that same whole
//!   (the shares of all paths together exceed 100%). For GPU time this grand total is the
//!   session's kernel time; for wall time, ranges of different threads that ran at the same
//!   time each count in full.
//!
//! # Outputs
//!
//! [`Report::write_stats_csv`] writes the three sets to one CSV: `# ` metadata lines as the
//! other tables, then one record per group with a `table` column (`range` or `kernel`) and a
//! `quantity` column (`gpu_time_ns`, `wall_time_ns` or `duration_ns`), range GPU time first,
//! then range wall time, then kernels. [`Report::stats`] gathers them in a [`Stats`] whose
//! `Display` is a text table like the summary's ([`text::stats`](crate::report::text::stats)).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::tables::csv::{write_file, RecordWriter};

/// Which rows a [`LabelStats`] groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatsTable {
    /// Range rows, grouped by path.
    Range,
    /// Kernel rows, grouped by (range path, kernel name).
    Kernel,
}

impl StatsTable {
    /// The serialized name: `range` or `kernel`.
    pub fn as_str(self) -> &'static str {
        match self {
            StatsTable::Range => "range",
            StatsTable::Kernel => "kernel",
        }
    }
}

/// Which value of the rows a [`LabelStats`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatsQuantity {
    /// A range row's `gpu_time_ns` (Σ kernel durations, inclusive).
    GpuTimeNs,
    /// A range row's `wall_time_ns` (pop − push).
    WallTimeNs,
    /// A kernel row's `duration_ns`.
    DurationNs,
}

impl StatsQuantity {
    /// The serialized name, which is also the row field it is taken from.
    pub fn as_str(self) -> &'static str {
        match self {
            StatsQuantity::GpuTimeNs => "gpu_time_ns",
            StatsQuantity::WallTimeNs => "wall_time_ns",
            StatsQuantity::DurationNs => "duration_ns",
        }
    }
}

/// The distribution of one quantity over the instances of one label; see the
/// [module docs](self) for the definitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelStats {
    /// Range or kernel rows.
    pub table: StatsTable,
    /// The quantity described.
    pub quantity: StatsQuantity,
    /// The range path (or the root row's).
    pub range_path: String,
    /// The kernel name for kernel groups (`None` for kernels without an activity record);
    /// always `None` for range groups.
    pub kernel_name: Option<String>,
    /// Instances with a value.
    pub count: u64,
    /// Instances without a value, left out of the statistics.
    pub missing: u64,
    /// Σ values, ns.
    pub total_ns: Option<u64>,
    /// Mean value, ns.
    pub mean_ns: Option<f64>,
    /// Smallest value, ns.
    pub min_ns: Option<u64>,
    /// Median by nearest rank, ns.
    pub p50_ns: Option<u64>,
    /// 99th percentile by nearest rank, ns.
    pub p99_ns: Option<u64>,
    /// Largest value, ns.
    pub max_ns: Option<u64>,
    /// `total_ns` as a percentage of the grand total.
    pub share_pct: Option<f64>,
}

/// The nearest-rank `percentile` (0 to 100) of ascending `sorted` values: the value at
/// 1-based rank `⌈percentile · n / 100⌉`, at least rank 1. `None` for no values; a
/// percentile above 100 counts as 100.
pub fn nearest_rank(sorted: &[u64], percentile: u32) -> Option<u64> {
    let n = sorted.len() as u128;
    if n == 0 {
        return None;
    }
    let p = u128::from(percentile.min(100));
    let rank = (p * n).div_ceil(100).clamp(1, n);
    sorted.get(rank as usize - 1).copied()
}

impl LabelStats {
    /// The statistics of `values` (in any order; sorted here) for one label.
    pub fn of(
        table: StatsTable,
        quantity: StatsQuantity,
        range_path: String,
        kernel_name: Option<String>,
        mut values: Vec<u64>,
        missing: u64,
        grand_total_ns: u64,
    ) -> Self {
        values.sort_unstable();
        let total_ns = values.iter().fold(0u64, |sum, v| sum.saturating_add(*v));
        let count = values.len() as u64;
        LabelStats {
            table,
            quantity,
            range_path,
            kernel_name,
            count,
            missing,
            total_ns: (count > 0).then_some(total_ns),
            mean_ns: (count > 0).then(|| total_ns as f64 / count as f64),
            min_ns: values.first().copied(),
            p50_ns: nearest_rank(&values, 50),
            p99_ns: nearest_rank(&values, 99),
            max_ns: values.last().copied(),
            share_pct: (grand_total_ns > 0).then(|| 100.0 * total_ns as f64 / grand_total_ns as f64),
        }
    }
}

/// A group's key: range path and, for kernel groups, kernel name.
type GroupKey<'a> = (&'a str, Option<&'a str>);

/// Values (and the count of missing ones) of each group, and the groups in first-seen order.
struct Groups<'a> {
    order: Vec<GroupKey<'a>>,
    values: HashMap<GroupKey<'a>, (Vec<u64>, u64)>,
}

impl<'a> Groups<'a> {
    fn new() -> Self {
        Self { order: Vec::new(), values: HashMap::new() }
    }

    fn add(&mut self, key: GroupKey<'a>, value: Option<u64>) {
        let order = &mut self.order;
        let entry = self.values.entry(key).or_insert_with(|| {
            order.push(key);
            (Vec::new(), 0)
        });
        match value {
            Some(v) => entry.0.push(v),
            None => entry.1 += 1,
        }
    }

    fn into_stats(mut self, table: StatsTable, quantity: StatsQuantity, grand_total_ns: u64) -> Vec<LabelStats> {
        let mut stats: Vec<LabelStats> = self
            .order
            .iter()
            .filter_map(|key| {
                let (values, missing) = self.values.remove(key)?;
                Some(LabelStats::of(
                    table,
                    quantity,
                    key.0.to_owned(),
                    key.1.map(str::to_owned),
                    values,
                    missing,
                    grand_total_ns,
                ))
            })
            .collect();
        sort_stats(&mut stats);
        stats
    }
}

/// Total descending; ties by range path, then kernel name (`None` first), ascending.
fn sort_stats(stats: &mut [LabelStats]) {
    stats.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.range_path.cmp(&b.range_path))
            .then_with(|| a.kernel_name.cmp(&b.kernel_name))
    });
}

/// The three statistics sets of a report; its `Display` is a text table per set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Range paths by GPU time ([`Report::range_stats`]).
    pub ranges: Vec<LabelStats>,
    /// Range paths by wall time ([`Report::range_wall_stats`]).
    pub range_wall: Vec<LabelStats>,
    /// (range path, kernel name) by kernel duration ([`Report::kernel_stats`]).
    pub kernels: Vec<LabelStats>,
}

impl Report {
    /// Range rows grouped by path, over `gpu_time_ns`; see the [module docs](self).
    pub fn range_stats(&self) -> Vec<LabelStats> {
        self.range_stats_of(StatsQuantity::GpuTimeNs, |r| r.gpu_time_ns)
    }

    /// Range rows grouped by path, over `wall_time_ns` (the root row has none and is
    /// left out); see the [module docs](self).
    pub fn range_wall_stats(&self) -> Vec<LabelStats> {
        self.range_stats_of(StatsQuantity::WallTimeNs, |r| r.wall_time_ns)
    }

    fn range_stats_of(
        &self,
        quantity: StatsQuantity,
        value: impl Fn(&crate::analysis::aggregate::RangeRow) -> Option<u64>,
    ) -> Vec<LabelStats> {
        let mut groups = Groups::new();
        let mut grand_total = 0u64;
        for row in &self.ranges {
            let v = value(row);
            if row.range_id.is_none() && quantity == StatsQuantity::WallTimeNs {
                continue;
            }
            if row.depth == 0 {
                grand_total = grand_total.saturating_add(v.unwrap_or(0));
            }
            groups.add((row.path.as_str(), None), v);
        }
        groups.into_stats(StatsTable::Range, quantity, grand_total)
    }

    /// Kernel rows grouped by (range path, kernel name), over `duration_ns`; see the
    /// [module docs](self).
    pub fn kernel_stats(&self) -> Vec<LabelStats> {
        let mut groups = Groups::new();
        let mut grand_total = 0u64;
        // Whole-graph counter rows are not kernel executions: their kernels have rows.
        for k in self.kernels.iter().filter(|k| k.granularity.is_kernel_execution()) {
            grand_total = grand_total.saturating_add(k.duration_ns.unwrap_or(0));
            groups.add((k.range_path.as_str(), k.kernel_name.as_deref()), k.duration_ns);
        }
        groups.into_stats(StatsTable::Kernel, StatsQuantity::DurationNs, grand_total)
    }

    /// All three statistics sets.
    pub fn stats(&self) -> Stats {
        Stats { ranges: self.range_stats(), range_wall: self.range_wall_stats(), kernels: self.kernel_stats() }
    }

    /// Writes the statistics CSV (metadata lines, header, range GPU-time groups, range
    /// wall-time groups, kernel groups) to `out`; see the [module docs](self).
    pub fn write_stats_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        const WHAT: &str = "statistics CSV";
        self.write_metadata(&mut out, "statistics", WHAT)?;
        writeln!(out, "# {STATS_NOTE}").map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })?;
        let mut w = RecordWriter::new(out, WHAT);
        w.header(STATS_COLUMNS)?;
        let stats = self.stats();
        for s in stats.ranges.iter().chain(&stats.range_wall).chain(&stats.kernels) {
            w.text(s.table.as_str())?;
            w.text(s.quantity.as_str())?;
            w.text(&s.range_path)?;
            w.text(s.kernel_name.as_deref().unwrap_or(""))?;
            w.display(s.count)?;
            w.display(s.missing)?;
            w.optional(s.total_ns)?;
            w.optional(s.mean_ns)?;
            w.optional(s.min_ns)?;
            w.optional(s.p50_ns)?;
            w.optional(s.p99_ns)?;
            w.optional(s.max_ns)?;
            w.optional(s.share_pct)?;
            w.end_record()?;
        }
        w.finish()
    }

    /// Writes the statistics CSV to a file.
    pub fn write_stats_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_stats_csv_to(out))
    }
}

/// The metadata line the statistics table adds to the report's.
pub const STATS_NOTE: &str = "statistics: percentiles by nearest rank (value at rank ceil(p*n/100) of n ascending \
     values); share_pct of the sum over top-level ranges (range) or all kernels (kernel)";

/// Columns of the statistics CSV.
pub const STATS_COLUMNS: [&str; 13] = [
    "table",
    "quantity",
    "range_path",
    "kernel_name",
    "count",
    "missing",
    "total_ns",
    "mean_ns",
    "min_ns",
    "p50_ns",
    "p99_ns",
    "max_ns",
    "share_pct",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_definition() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&values, 50), Some(50));
        assert_eq!(nearest_rank(&values, 99), Some(99));
        assert_eq!(nearest_rank(&values, 100), Some(100));
        assert_eq!(nearest_rank(&values, 0), Some(1), "rank at least 1");
        assert_eq!(nearest_rank(&values, 1000), Some(100));
        assert_eq!(nearest_rank(&[7], 50), Some(7));
        assert_eq!(nearest_rank(&[7], 99), Some(7));
        assert_eq!(nearest_rank(&[], 50), None);
        // n = 4: p50 is rank 2, p99 rank 4.
        assert_eq!(nearest_rank(&[10, 20, 30, 40], 50), Some(20));
        assert_eq!(nearest_rank(&[10, 20, 30, 40], 99), Some(40));
        // n = 3: p50 is rank ceil(1.5) = 2.
        assert_eq!(nearest_rank(&[1, 2, 3], 50), Some(2));
    }

    #[test]
    fn label_stats_of_values() {
        let s = LabelStats::of(StatsTable::Kernel, StatsQuantity::DurationNs, "r".into(), None, vec![3, 1, 2], 2, 12);
        assert_eq!((s.count, s.missing, s.total_ns), (3, 2, Some(6)));
        assert_eq!((s.min_ns, s.p50_ns, s.p99_ns, s.max_ns), (Some(1), Some(2), Some(3), Some(3)));
        assert_eq!(s.mean_ns, Some(2.0));
        assert_eq!(s.share_pct, Some(50.0));
        let empty = LabelStats::of(StatsTable::Range, StatsQuantity::GpuTimeNs, "r".into(), None, vec![], 1, 0);
        assert_eq!(
            (empty.count, empty.total_ns, empty.mean_ns, empty.p50_ns, empty.share_pct),
            (0, None, None, None, None)
        );
    }
}
