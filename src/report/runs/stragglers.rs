//! The straggler table of `gmprof merge`: per step, every rank's step time, the slowest rank
//! and the spread across ranks.
//!
//! Layer 3, beside [`crate::report::runs::merge`]. A *step* is one instance of a repeated range
//! (`train_step`, the `step` range of `gmprof run --torch-steps`): step `k` is instance `k`
//! of that range path in every rank. `--step PATH` names the path; without it, the first
//! rank's repeated path (two or more instances) of smallest depth is taken, the one with the
//! largest total time among those. A rank's time for a step is the Σ over that instance's
//! rows (one per thread) of GPU time (default) or wall time (`--step-time wall`); a rank that
//! has no such instance, or measured no time for it, is blank and left out of the
//! statistics, never 0.
//!
//! Per step: the ranks that measured it, min, median (the mean of the two middle values for
//! an even count), max, the spread `max − min`, how far the slowest is above the median (%),
//! and the slowest rank (the first with the largest time; none when all are equal). The
//! straggler is the argmax of each step, by construction.
//!
//! GPU time includes time spent in collective kernels waiting for other ranks (NCCL), so in
//! a job synchronised every step the rank whose compute is slowest often shows the *least*
//! GPU time in communication; read the per-range spread (`merged.csv`) of the compute ranges
//! beside it, or use wall time.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use crate::error::Result;
use crate::report::runs::rank_ranges::RankRanges;
use crate::report::tables::csv::{write_file, RecordWriter};
use crate::report::text::format::{cell, format_duration_ns, BLANK};

/// The file `gmprof merge` writes the straggler table to.
pub const STRAGGLERS_CSV: &str = "stragglers.csv";

pub use crate::report::runs::rank_ranges::StepTime;

/// Min, median, max and the slowest of values across ranks (blank ones left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spread {
    /// Smallest measured value.
    pub min: Option<u64>,
    /// Median of the measured values (the mean of the two middle ones for an even count).
    pub median: Option<u64>,
    /// Largest measured value.
    pub max: Option<u64>,
    /// Index of the first rank with the largest value; `None` when all measured are equal.
    pub slowest: Option<usize>,
    /// How many ranks measured a value.
    pub measured: usize,
}

impl Spread {
    /// The spread of `values` (one per rank).
    pub fn of(values: &[Option<u64>]) -> Spread {
        let mut measured: Vec<(u64, usize)> =
            values.iter().enumerate().filter_map(|(i, t)| t.map(|t| (t, i))).collect();
        measured.sort_unstable();
        let n = measured.len();
        let median = match n {
            0 => None,
            _ if n % 2 == 1 => Some(measured[n / 2].0),
            _ => Some(((measured[n / 2 - 1].0 as u128 + measured[n / 2].0 as u128) / 2) as u64),
        };
        let (min, max) = (measured.first().map(|m| m.0), measured.last().map(|m| m.0));
        // The first rank with the largest value; none when all are equal.
        let slowest = max.filter(|&hi| Some(hi) > min).and_then(|hi| measured.iter().find(|m| m.0 == hi)).map(|m| m.1);
        Spread { min, median, max, slowest, measured: n }
    }

    /// `max − min`.
    pub fn spread(&self) -> Option<u64> {
        Some(self.max? - self.min?)
    }

    /// How far the max is above the median, % of the median.
    pub fn max_over_median_pct(&self) -> Option<f64> {
        let median = self.median.filter(|&m| m > 0)?;
        Some((self.max? as f64 - median as f64) / median as f64 * 100.0)
    }
}

/// One step across ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRow {
    /// The step: the instance of the step range (for the ranks of one on-demand capture,
    /// the program's step number).
    pub step: u32,
    /// Per rank (in the merge's order): the step's time, ns; `None` when not measured.
    pub times: Vec<Option<u64>>,
    /// Their spread.
    pub spread: Spread,
}

/// The straggler table.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTable {
    /// The step range's path.
    pub path: String,
    /// Why this path: `--step` or how it was chosen.
    pub chosen_by: String,
    /// Which time is compared.
    pub time: StepTime,
    /// Rank labels, in column order.
    pub ranks: Vec<String>,
    /// One row per step, in step order.
    pub rows: Vec<StepRow>,
}

/// The first step of the on-demand capture `dir` holds (its `capture.json`, written by
/// `gmprof capture`; see README "On-demand capture"), when it is one.
fn capture_first_step(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("capture.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&text).ok()?.get("first_step")?.as_u64()
}

/// Builds a [`StepTable`] one rank at a time; it keeps one number per (step, rank).
#[derive(Clone, Debug)]
pub struct StepAccumulator {
    path: Option<String>,
    chosen_by: String,
    time: StepTime,
    ranks: Vec<String>,
    steps: BTreeMap<u32, Vec<Option<u64>>>,
    /// Each rank's first step when its directory is an on-demand capture's (`capture.json`).
    first_steps: Vec<Option<u64>>,
}

impl StepAccumulator {
    /// The step range's path, once given or chosen.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// Steps of the range `path` (`None`: chosen from the first rank), timed by `time`.
    pub fn new(path: Option<String>, time: StepTime) -> Self {
        let chosen_by = if path.is_some() { "--step".to_owned() } else { String::new() };
        Self { path, chosen_by, time, ranks: Vec::new(), steps: BTreeMap::new(), first_steps: Vec::new() }
    }

    /// Adds one rank's steps.
    pub fn add(&mut self, rank: &RankRanges) {
        if self.path.is_none() && self.ranks.is_empty() {
            if let Some(path) = choose_step_path(rank, self.time) {
                self.chosen_by =
                    format!("the repeated range of least depth and most time in {}; --step PATH chooses", rank.label);
                self.path = Some(path);
            }
        }
        let index = self.ranks.len();
        self.ranks.push(rank.label.clone());
        self.first_steps.push(capture_first_step(&rank.dir));
        let Some(path) = &self.path else { return };
        let mut mine: BTreeMap<u32, Option<u64>> = BTreeMap::new();
        for r in rank.ranges.iter().filter(|r| &r.path == path) {
            let value = match self.time {
                StepTime::Gpu => r.gpu_time_ns,
                StepTime::Wall => r.wall_time_ns,
            };
            let slot = mine.entry(r.instance).or_insert(None);
            if let Some(v) = value {
                *slot = Some(slot.unwrap_or(0).saturating_add(v));
            }
        }
        for (step, value) in mine {
            let times = self.steps.entry(step).or_default();
            times.resize(index, None);
            times.push(value);
        }
    }

    /// The table; `None` when no step range was named or found. The ranks of one on-demand
    /// capture (each directory's `capture.json` names the same first step) are numbered by
    /// the program's steps, as the capture is (`steps 39-41`), not from 0.
    pub fn finish(self) -> Option<StepTable> {
        let path = self.path?;
        let n = self.ranks.len();
        let offset = match self.first_steps.split_first() {
            Some((Some(first), rest)) if rest.iter().all(|s| *s == Some(*first)) => u32::try_from(*first).ok(),
            _ => None,
        };
        let mut chosen_by = self.chosen_by;
        if let Some(first) = offset {
            chosen_by.push_str(&format!("; numbered from the capture's first step, {first}"));
        }
        let rows = self
            .steps
            .into_iter()
            .map(|(step, mut times)| {
                times.resize(n, None);
                let spread = Spread::of(&times);
                StepRow { step: step.saturating_add(offset.unwrap_or(0)), times, spread }
            })
            .collect();
        Some(StepTable { path, chosen_by, time: self.time, ranks: self.ranks, rows })
    }
}

/// The repeated range path of least depth (the root row left out) and, among those, of most
/// total time in `rank`; `None` when no path repeats.
pub fn choose_step_path(rank: &RankRanges, time: StepTime) -> Option<String> {
    if let Some(folded) = &rank.folded {
        return crate::report::runs::rank_ranges::choose_folded(folded, time);
    }
    // (first row, depth, instances, total) per path.
    let mut paths: Vec<(&str, u32, u32, u64)> = Vec::new();
    for r in rank.ranges.iter().filter(|r| r.path != crate::model::session::ROOT_PATH) {
        let t = match time {
            StepTime::Gpu => r.gpu_time_ns,
            StepTime::Wall => r.wall_time_ns,
        }
        .unwrap_or(0);
        match paths.iter_mut().find(|p| p.0 == r.path) {
            Some(p) => {
                p.2 += 1;
                p.3 = p.3.saturating_add(t);
            }
            None => paths.push((&r.path, r.depth, 1, t)),
        }
    }
    paths.iter().filter(|p| p.2 >= 2).min_by(|a, b| a.1.cmp(&b.1).then(b.3.cmp(&a.3))).map(|p| p.0.to_owned())
}

impl StepTable {
    /// For each rank, the steps where it was the slowest.
    pub fn slowest_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.ranks.len()];
        for row in &self.rows {
            if let Some(i) = row.spread.slowest {
                counts[i] += 1;
            }
        }
        counts
    }

    /// Writes `stragglers.csv`: step, ranks with the step, min, median, max, spread (ns),
    /// slowest over median (%), the slowest rank, then each rank's time (ns); blank = not
    /// measured.
    pub fn write_csv_to<W: std::io::Write>(&self, out: W) -> Result<()> {
        let mut w = RecordWriter::new(out, "straggler CSV");
        let unit = self.time.as_str();
        let per_rank: Vec<String> = self.ranks.iter().map(|r| format!("{unit}_time_ns[{r}]")).collect();
        w.header(
            ["step", "measured", "min_ns", "median_ns", "max_ns", "spread_ns", "slowest_over_median_pct", "slowest"]
                .into_iter()
                .chain(per_rank.iter().map(String::as_str)),
        )?;
        for row in &self.rows {
            let s = &row.spread;
            w.display(row.step)?;
            w.display(s.measured)?;
            w.optional(s.min)?;
            w.optional(s.median)?;
            w.optional(s.max)?;
            w.optional(s.spread())?;
            w.optional(s.max_over_median_pct().map(|p| (p * 1000.0).round() / 1000.0))?;
            w.text(s.slowest.map_or("", |i| self.ranks[i].as_str()))?;
            for t in &row.times {
                w.optional(*t)?;
            }
            w.end_record()?;
        }
        w.finish()
    }

    /// Writes `stragglers.csv` to `path` (replaced whole).
    pub fn write_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_csv_to(out))
    }
}

/// Steps shown in the summary: those with the largest spread.
pub const SUMMARY_STEPS: usize = 10;

impl fmt::Display for StepTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = |t: Option<u64>| t.map_or_else(|| BLANK.to_owned(), |t| format_duration_ns(t as f64));
        let what = match self.time {
            StepTime::Gpu => "GPU time",
            StepTime::Wall => "wall time",
        };
        writeln!(
            f,
            "steps: {} instance(s) of '{}' ({what}; {}) across {} rank(s)",
            self.rows.len(),
            cell(&self.path),
            self.chosen_by,
            self.ranks.len()
        )?;
        let counts = self.slowest_counts();
        let mut order: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
        order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
        let most: Vec<String> =
            order.iter().take(3).map(|&i| format!("{} ({} step(s))", cell(&self.ranks[i]), counts[i])).collect();
        if !most.is_empty() {
            writeln!(f, "slowest most often: {}", most.join(", "))?;
        }
        let mut rows: Vec<&StepRow> = self.rows.iter().collect();
        rows.sort_by(|a, b| b.spread.spread().cmp(&a.spread.spread()).then(a.step.cmp(&b.step)));
        writeln!(
            f,
            "{:>8}  {:>8}  {:>12}  {:>12}  {:>12}  {:>12}  {:>8}  slowest (widest {} of {} steps)",
            "step",
            "measured",
            "min",
            "median",
            "max",
            "spread",
            "max/med",
            rows.len().min(SUMMARY_STEPS),
            rows.len()
        )?;
        for r in rows.into_iter().take(SUMMARY_STEPS) {
            let s = &r.spread;
            writeln!(
                f,
                "{:>8}  {:>8}  {:>12}  {:>12}  {:>12}  {:>12}  {:>8}  {}",
                r.step,
                format!("{}/{}", s.measured, self.ranks.len()),
                ns(s.min),
                ns(s.median),
                ns(s.max),
                ns(s.spread()),
                s.max_over_median_pct().map_or_else(|| BLANK.to_owned(), |p| format!("+{p:.1}%")),
                s.slowest.map_or(BLANK.to_owned(), |i| cell(&self.ranks[i]))
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::runs::rank_ranges::RangeTimes;

    fn rank(label: &str, steps: &[Option<u64>]) -> RankRanges {
        let mut ranges = vec![RangeTimes {
            path: "<root>".into(),
            depth: 0,
            instance: 0,
            gpu_time_ns: Some(1),
            wall_time_ns: Some(1),
        }];
        for (i, t) in steps.iter().enumerate() {
            ranges.push(RangeTimes {
                path: "train".into(),
                depth: 1,
                instance: i as u32,
                gpu_time_ns: *t,
                wall_time_ns: None,
            });
            ranges.push(RangeTimes {
                path: "train/fwd".into(),
                depth: 2,
                instance: i as u32,
                gpu_time_ns: *t,
                wall_time_ns: None,
            });
        }
        ranges.push(RangeTimes {
            path: "eval".into(),
            depth: 1,
            instance: 0,
            gpu_time_ns: Some(1 << 40),
            wall_time_ns: None,
        });
        let meta =
            crate::report::model::Report::from_json(include_str!("../../../tests/golden/report.json")).unwrap().meta;
        RankRanges {
            label: label.into(),
            dir: label.into(),
            meta,
            ranges,
            kernels: None,
            source: "test",
            ending: None,
            left_out: Vec::new(),
            folded: None,
        }
    }

    /// The ranks of one on-demand capture are numbered by the program's steps; ranks of
    /// different captures (or none) from 0.
    #[test]
    fn capture_ranks_are_numbered_from_their_first_step() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ranks = Vec::new();
        for (name, first) in [("vm-0", 39), ("vm-1", 39), ("vm-2", 40)] {
            let dir = tmp.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("capture.json"),
                format!(r#"{{"gmprof":1,"id":1,"first_step":{first},"steps":3}}"#),
            )
            .unwrap();
            let mut r = rank(name, &[Some(10), Some(20), Some(30)]);
            r.dir = dir;
            ranks.push(r);
        }
        let table = |ranks: &[RankRanges]| {
            let mut acc = StepAccumulator::new(None, StepTime::Gpu);
            for r in ranks {
                acc.add(r);
            }
            acc.finish().unwrap()
        };
        let same = table(&ranks[..2]);
        assert_eq!(same.rows.iter().map(|r| r.step).collect::<Vec<_>>(), [39, 40, 41]);
        assert!(same.chosen_by.ends_with("numbered from the capture's first step, 39"), "{}", same.chosen_by);
        let mut csv = Vec::new();
        same.write_csv_to(&mut csv).unwrap();
        assert!(String::from_utf8(csv).unwrap().lines().nth(1).unwrap().starts_with("39,2,"));
        let mixed = table(&ranks);
        assert_eq!(mixed.rows.iter().map(|r| r.step).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(table(&[rank("r0", &[Some(1), Some(2)])]).rows[0].step, 0, "not a capture");
    }

    #[test]
    fn the_straggler_is_the_argmax_of_each_step() {
        let ranks = [
            rank("r0", &[Some(100), Some(200), Some(300)]),
            rank("r1", &[Some(150), None, Some(300)]),
            rank("r2", &[Some(90), Some(400)]),
        ];
        let mut acc = StepAccumulator::new(None, StepTime::Gpu);
        for r in &ranks {
            acc.add(r);
        }
        let t = acc.finish().unwrap();
        assert_eq!(t.path, "train", "the repeated path of least depth; eval does not repeat");
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[0].times, [Some(100), Some(150), Some(90)]);
        assert_eq!(
            t.rows[0].spread,
            Spread { min: Some(90), median: Some(100), max: Some(150), slowest: Some(1), measured: 3 }
        );
        assert_eq!(t.rows[1].times, [Some(200), None, Some(400)], "blank, not 0");
        assert_eq!((t.rows[1].spread.median, t.rows[1].spread.slowest), (Some(300), Some(2)));
        assert_eq!(t.rows[2].times, [Some(300), Some(300), None]);
        assert_eq!(t.rows[2].spread.slowest, None, "a tie of all: nobody is slower");
        for row in &t.rows {
            let max = row.times.iter().flatten().max().copied();
            if let Some(i) = row.spread.slowest {
                assert_eq!(row.times[i], max);
            }
        }
        assert_eq!(t.slowest_counts(), [0, 1, 1]);
        assert_eq!(t.rows[0].spread.spread(), Some(60));
        assert_eq!(t.rows[0].spread.max_over_median_pct(), Some(50.0));
        let mut out = Vec::new();
        t.write_csv_to(&mut out).unwrap();
        let csv = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "\"step\",\"measured\",\"min_ns\",\"median_ns\",\"max_ns\",\"spread_ns\",\"slowest_over_median_pct\",\"slowest\",\"gpu_time_ns[r0]\",\"gpu_time_ns[r1]\",\"gpu_time_ns[r2]\""
        );
        assert_eq!(lines[1], "0,3,90,100,150,60,50,\"r1\",100,150,90");
        assert_eq!(lines[2], "1,2,200,300,400,200,33.333,\"r2\",200,\"\",400", "blank, not 0");
        let text = t.to_string();
        assert!(text.contains("slowest most often: r1 (1 step(s)), r2 (1 step(s))"), "{text}");
    }

    #[test]
    fn a_named_step_path_and_wall_time() {
        let mut acc = StepAccumulator::new(Some("train/fwd".into()), StepTime::Wall);
        acc.add(&rank("r0", &[Some(1), Some(2)]));
        let t = acc.finish().unwrap();
        assert_eq!(t.path, "train/fwd");
        assert_eq!(t.rows[0].times, [None], "no wall time measured: blank");
        assert!("cpu".parse::<StepTime>().is_err());
        let mut none = StepAccumulator::new(None, StepTime::Gpu);
        none.add(&rank("r0", &[Some(1)]));
        assert!(none.finish().is_none(), "nothing repeats");
    }
}
