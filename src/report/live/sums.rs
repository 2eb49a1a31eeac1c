//! What one streamed drain adds to the live metrics ([`DrainSums`]), summed by the stream
//! writer as it writes the rows (on the stream thread) and handed to the
//! [`LiveFeed`](super::LiveFeed) once per drain, so the exported values move once per drain
//! whatever the number of rows.
//!
//! **Range groups** are keyed as the online aggregates and the summary key them: the path
//! with its numbers folded ([`fold_numbers`]: `Train step 12/forward` is
//! `Train step #/forward`). A device exports at most [`MAX_RANGE_GROUPS`] of them, the first
//! seen; instances of any later group count in [`OTHER_RANGE`], so the series a scrape returns
//! are bounded whatever the program names its ranges.
//!
//! **Stall reasons** ride along ([`StallSums`]): each kernel row
//! says which range group its function ran in, for how long.
//!
//! Imports `stalls`, `crate::analysis` (the rows) and `crate::model`.

use std::collections::{HashMap, HashSet};

use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{KernelRow, TransferRow};
use crate::analysis::online::{fold_numbers, StepRow, OTHER_KEY};
use crate::model::pm::{PmMetric, PmSample};

use super::stalls::StallSums;
pub use super::stalls::{MAX_STALL_REASONS, OTHER_REASON};

/// Range groups a device exports by name; instances of later groups count in
/// [`OTHER_RANGE`].
pub const MAX_RANGE_GROUPS: usize = 64;

/// The `range` label of the groups past [`MAX_RANGE_GROUPS`] (the online aggregates' own
/// key for the groups past their bound).
pub const OTHER_RANGE: &str = OTHER_KEY;

/// DRAM traffic's direction (the `direction` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Bytes read.
    Read,
    /// Bytes written.
    Write,
}

impl Direction {
    /// `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }

    /// The direction of a DRAM byte-count metric: `dram__bytes_read.sum` (per_range and
    /// per_kernel counters) or, with `per_second`, PM sampling's
    /// `dram__bytes_read.sum.per_second` (`dram__bytes_op_read...` on Blackwell). `None` for
    /// any other metric.
    pub fn of_metric(name: &str, per_second: bool) -> Option<Direction> {
        let rest = name.strip_prefix("dram__bytes_")?;
        let rest = rest.strip_prefix("op_").unwrap_or(rest);
        let suffix = if per_second { ".sum.per_second" } else { ".sum" };
        match rest.strip_suffix(suffix)? {
            "read" => Some(Direction::Read),
            "write" => Some(Direction::Write),
            _ => None,
        }
    }
}

/// One range group's sums of one drain.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RangeSums {
    /// Instances completed.
    pub instances: u64,
    /// Σ GPU time, ns; `None` when no instance had one.
    pub gpu_ns: Option<u64>,
    /// Σ wall time, ns; `None` when no instance had one.
    pub wall_ns: Option<u64>,
    /// Σ kernels (inclusive).
    pub kernels: u64,
    /// Σ memcpy and memset bytes.
    pub transfer_bytes: u64,
    /// Σ DRAM bytes read, from the counters; `None` when not measured.
    pub dram_read: Option<f64>,
    /// Σ DRAM bytes written, from the counters; `None` when not measured.
    pub dram_write: Option<f64>,
}

/// PM sampling's DRAM rates of one drain's samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PmSums {
    read: (f64, u64),
    write: (f64, u64),
}

impl PmSums {
    /// The mean rate of each direction sampled since the last call.
    pub fn take_means(&mut self) -> Vec<(Direction, f64)> {
        let mean = |(sum, n): (f64, u64)| (n > 0).then(|| sum / n as f64);
        let out = [(Direction::Read, mean(self.read)), (Direction::Write, mean(self.write))]
            .into_iter()
            .filter_map(|(d, m)| m.map(|m| (d, m)))
            .collect();
        *self = PmSums::default();
        out
    }
}

fn add(sum: &mut Option<u64>, value: Option<u64>) {
    if let Some(v) = value {
        *sum = Some(sum.unwrap_or(0).saturating_add(v));
    }
}

fn add_f(sum: &mut Option<f64>, value: Option<f64>) {
    if let Some(v) = value.filter(|v| v.is_finite()) {
        *sum = Some(sum.unwrap_or(0.0) + v);
    }
}

/// What the drain so far adds; see the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct DrainSums {
    /// Drains ended (the run's finish publishes once more, its last rows, with no drain).
    pub drains: u64,
    /// Kernel executions.
    pub kernels: u64,
    /// Σ their durations, ns; `None` when none had one.
    pub kernel_gpu_ns: Option<u64>,
    /// Memcpys and memsets.
    pub transfers: u64,
    /// Σ their bytes.
    pub transfer_bytes: u64,
    /// Range groups by folded path (or [`OTHER_RANGE`]).
    pub ranges: HashMap<String, RangeSums>,
    /// Steps written.
    pub steps: Vec<StepRow>,
    /// PM samples decoded.
    pub pm_samples: u64,
    /// Whether the run samples PM counters (a drain handed samples, maybe none).
    pub pm_seen: bool,
    /// PM sampling's DRAM rates.
    pub pm: PmSums,
    /// Kernel rows flagged (`KernelStatus::is_flagged`: not ok, and not a rotation's unmeasured).
    pub flagged_rows: u64,
    /// Warnings of the streamed joins so far, when the drain said.
    pub warnings: Option<u64>,
    /// PC sampling's stall reasons per range group (kept across drains).
    pub stalls: StallSums,
    /// Whether the run samples PCs (a drain handed the sampler's totals): kernel rows then
    /// weigh their range groups for the stall reasons.
    pub pc_seen: bool,
    /// PC sampling's samples and dropped samples so far, when the drain said.
    pub pc_counts: Option<(u64, u64)>,
    /// The groups exported by name (kept across drains).
    named: HashSet<String>,
    /// Where the range rows' DRAM byte counters are: (read, write) column of `metrics`.
    dram_columns: (Option<usize>, Option<usize>),
}

impl DrainSums {
    /// Sums for a run whose range rows carry `metrics` (their names, in order): the DRAM
    /// byte counters among them are summed per range group.
    pub fn new(metrics: &[String]) -> Self {
        let find = |d: Direction| metrics.iter().position(|m| Direction::of_metric(m, false) == Some(d));
        Self { dram_columns: (find(Direction::Read), find(Direction::Write)), ..Self::default() }
    }

    /// One kernel row (whole-graph rows are not kernels, as in every kernel count).
    pub fn kernel(&mut self, row: &KernelRow) {
        if !row.granularity.is_kernel_execution() {
            return;
        }
        self.kernels += 1;
        add(&mut self.kernel_gpu_ns, row.duration_ns);
        if self.pc_seen {
            let function = row.mangled_name.as_deref().or(row.kernel_name.as_deref());
            if let (Some(function), Some(ns)) = (function, row.duration_ns) {
                let group = self.group(&row.range_path);
                self.stalls.kernel(function, &group, ns);
            }
        }
    }

    /// The range group of `path`: its numbers folded, or [`OTHER_RANGE`] past the bound.
    fn group(&mut self, path: &str) -> String {
        let folded = fold_numbers(path);
        if self.named.contains(folded.as_ref()) {
            folded.into_owned()
        } else if self.named.len() < MAX_RANGE_GROUPS {
            self.named.insert(folded.to_string());
            folded.into_owned()
        } else {
            OTHER_RANGE.to_owned()
        }
    }

    /// PC sampling's running totals, (function, stall reason, samples so far), and its
    /// counts of samples and dropped samples so far.
    pub fn pc_totals(&mut self, totals: Vec<(String, String, u64)>, samples: u64, dropped: u64) {
        self.pc_seen = true;
        self.stalls.pc_totals(totals);
        self.pc_counts = Some((samples, dropped));
    }

    /// One transfer row.
    pub fn transfer(&mut self, row: &TransferRow) {
        self.transfers += 1;
        self.transfer_bytes = self.transfer_bytes.saturating_add(row.bytes);
    }

    /// One completed range instance.
    pub fn range(&mut self, row: &RangeRow) {
        let folded = fold_numbers(&row.path);
        let key: &str = if self.named.contains(folded.as_ref()) {
            &folded
        } else if self.named.len() < MAX_RANGE_GROUPS {
            self.named.insert(folded.to_string());
            &folded
        } else {
            OTHER_RANGE
        };
        let sums = match self.ranges.get_mut(key) {
            Some(s) => s,
            None => self.ranges.entry(key.to_owned()).or_default(),
        };
        sums.instances += 1;
        add(&mut sums.gpu_ns, row.gpu_time_ns);
        add(&mut sums.wall_ns, row.wall_time_ns);
        sums.kernels += row.kernel_count;
        sums.transfer_bytes = sums.transfer_bytes.saturating_add(row.transfer_bytes);
        let metric = |column: Option<usize>| column.and_then(|c| row.metrics.get(c).copied().flatten());
        add_f(&mut sums.dram_read, metric(self.dram_columns.0));
        add_f(&mut sums.dram_write, metric(self.dram_columns.1));
    }

    /// One step row written to the steps table.
    pub fn step(&mut self, row: &StepRow) {
        self.steps.push(StepRow { groups: Vec::new(), ..row.clone() });
    }

    /// PM samples of `metrics` decoded since the last drain.
    pub fn pm_samples(&mut self, metrics: &[PmMetric], samples: &[PmSample]) {
        self.pm_seen = true;
        self.pm_samples += samples.len() as u64;
        for (i, m) in metrics.iter().enumerate() {
            let target = match Direction::of_metric(&m.name, true) {
                Some(Direction::Read) => &mut self.pm.read,
                Some(Direction::Write) => &mut self.pm.write,
                None => continue,
            };
            for v in samples.iter().filter_map(|s| s.values.get(i).copied().flatten()).filter(|v| v.is_finite()) {
                target.0 += v;
                target.1 += 1;
            }
        }
    }

    /// Empties what one drain added (the range groups' names stay).
    pub fn clear_counts(&mut self) {
        let (named, dram_columns, pc_seen) = (std::mem::take(&mut self.named), self.dram_columns, self.pc_seen);
        let stalls = std::mem::take(&mut self.stalls);
        *self = Self { named, dram_columns, stalls, pc_seen, ..Self::default() };
    }

    /// Range groups exported by name so far.
    pub fn named_groups(&self) -> usize {
        self.named.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(path: &str, gpu: Option<u64>) -> RangeRow {
        RangeRow {
            range_id: None,
            path: path.to_owned(),
            name: path.to_owned(),
            depth: 0,
            instance: 0,
            thread: None,
            kernel_count: 2,
            self_kernel_count: 2,
            flagged_kernel_count: 0,
            gpu_time_ns: gpu,
            wall_time_ns: Some(10),
            start_ns: None,
            end_ns: None,
            parent_id: None,
            gpu_busy_ns: None,
            transfer_count: 1,
            transfer_bytes: 8,
            memcpy_bytes: 8,
            memset_bytes: 0,
            untimed_transfer_count: 0,
            transfer_time_ns: None,
            transfer_gbps: None,
            metrics: vec![Some(100.0), None, Some(5.0)],
            dram_read_bytes: None,
            dram_write_bytes: None,
            dram_read_gbps: None,
            dram_write_gbps: None,
            dram_total_gbps: None,
        }
    }

    #[test]
    fn dram_metrics_are_found_by_name_and_direction() {
        assert_eq!(Direction::of_metric("dram__bytes_read.sum", false), Some(Direction::Read));
        assert_eq!(Direction::of_metric("dram__bytes_op_write.sum", false), Some(Direction::Write));
        assert_eq!(Direction::of_metric("dram__bytes_read.sum.per_second", true), Some(Direction::Read));
        assert_eq!(Direction::of_metric("dram__bytes_read.sum.per_second", false), None);
        assert_eq!(Direction::of_metric("dram__bytes_read.sum", true), None);
        assert_eq!(Direction::of_metric("dram__throughput.avg.pct_of_peak_sustained_elapsed", false), None);
        assert_eq!(Direction::of_metric("lts__t_bytes.sum", false), None);
    }

    #[test]
    fn range_groups_fold_numbers_sum_what_is_measured_and_past_the_bound_go_to_other() {
        let metrics = ["dram__bytes_read.sum".to_owned(), "x".to_owned(), "dram__bytes_write.sum".to_owned()];
        let mut sums = DrainSums::new(&metrics);
        sums.range(&range("Train step 12/forward", Some(100)));
        sums.range(&range("Train step 13/forward", None));
        let g = &sums.ranges["Train step #/forward"];
        assert_eq!((g.instances, g.gpu_ns, g.wall_ns, g.kernels, g.transfer_bytes), (2, Some(100), Some(20), 4, 16));
        assert_eq!((g.dram_read, g.dram_write), (Some(200.0), Some(10.0)));
        // No GPU time measured: absent, not 0.
        sums.range(&range("idle", None));
        assert_eq!(sums.ranges["idle"].gpu_ns, None);
        for i in 0..MAX_RANGE_GROUPS + 5 {
            sums.range(&range(&format!("group{i}"), Some(1)));
        }
        assert_eq!(sums.named_groups(), MAX_RANGE_GROUPS);
        // 2 named above, so groups 62.. go to <other>: 7 of them.
        assert_eq!(sums.ranges[OTHER_RANGE].instances, 7);
        assert_eq!(sums.ranges.len(), MAX_RANGE_GROUPS + 1);
        // The names stay across drains: a named group is still named, a new one is other.
        sums.clear_counts();
        assert!(sums.ranges.is_empty() && sums.kernels == 0);
        sums.range(&range("Train step 99/forward", Some(1)));
        sums.range(&range("brand new", Some(1)));
        assert_eq!(sums.ranges["Train step #/forward"].instances, 1);
        assert_eq!(sums.ranges[OTHER_RANGE].instances, 1);
        // Counters not among the metrics: no DRAM sums.
        let mut plain = DrainSums::new(&[]);
        plain.range(&range("a", Some(1)));
        assert_eq!((plain.ranges["a"].dram_read, plain.ranges["a"].dram_write), (None, None));
    }

    #[test]
    fn pm_rates_are_the_mean_of_the_drains_samples() {
        let metrics = vec![
            PmMetric::new("dram__bytes_read.sum.per_second", "byte/second"),
            PmMetric::new("sm__cycles_active.avg", "cycle"),
            PmMetric::new("dram__bytes_write.sum.per_second", "byte/second"),
        ];
        let sample =
            |r: Option<f64>, w: Option<f64>| PmSample { start_ns: 0, end_ns: 1, values: vec![r, Some(1.0), w] };
        let mut sums = DrainSums::new(&[]);
        sums.pm_samples(&metrics, &[sample(Some(1e9), None), sample(Some(3e9), Some(4e9))]);
        assert_eq!(sums.pm_samples, 2);
        assert_eq!(sums.pm.take_means(), vec![(Direction::Read, 2e9), (Direction::Write, 4e9)]);
        assert_eq!(sums.pm.take_means(), vec![]);
    }
}
