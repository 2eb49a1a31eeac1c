//! The online aggregates: per range group (path, numbers folded) and per kernel name, the
//! distribution of their time, for the whole run and per window of steps, kept while rows
//! stream past and never holding a row.
//!
//! - **Kernels** ([`AggregateTable::Kernel`]): each kernel row's `duration_ns`, keyed by its
//!   demangled name ([`NO_NAME`] without an activity record). Whole-graph rows (per_kernel's
//!   `graph` granularity) are not kernels and are left out, as in every kernel count.
//! - **Range groups** ([`AggregateTable::Range`]): each completed range instance's
//!   `gpu_time_ns` (Σ kernel durations, inclusive) and `wall_time_ns`, keyed by
//!   [`fold_numbers`] of its path, as the summary groups them.
//!
//! Count, missing, total, min and max are exact (they equal a recomputation from the rows);
//! p50, p90 and p99 are within [`RELATIVE_ERROR`](super::distribution::RELATIVE_ERROR).
//!
//! **Windows.** A row counts in the window of the steps completed when it is added:
//! window `w` holds what was added while steps `w·W ... (w+1)·W − 1` ran (`W` =
//! [`OnlineSettings::window_steps`]). A kernel of step `k` completes before step `k` does,
//! so it lands in step `k`'s window. When a window's last step completes, the window is
//! closed into [`WindowAggregates`] (rows, no sketches), merged into the whole run and
//! handed out by [`OnlineAggregates::take_closed_windows`].
//!
//! **Memory.** Two tables of at most [`OnlineSettings::max_groups`] keys each (the window's
//! and the whole run's), each key one [`Distribution`] (at most 16 KiB of sketch, about
//! 5 KiB for kernels of 1 µs to 1 s), the [`StepTracker`]'s waiting ranges, and the windows
//! and steps not taken yet.
//!
//! Imports every other file of `online`.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use serde::{Deserialize, Serialize};
use twox_hash::XxHash64;

use super::distribution::{Distribution, DistributionSummary};
use super::folding::fold_numbers;
use super::settings::{OnlineSettings, OTHER_KEY};
use super::steps::{StepRow, StepTracker};
use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::KernelRow;
use crate::model::RangeId;

/// The key of kernel rows without a name (no activity record).
pub const NO_NAME: &str = "<no activity record>";

type Keyed<V> = HashMap<String, V, BuildHasherDefault<XxHash64>>;

/// Which rows an [`AggregateRow`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregateTable {
    /// Range instances, by folded path.
    Range,
    /// Kernel rows, by kernel name.
    Kernel,
}

impl AggregateTable {
    /// `range` or `kernel`.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregateTable::Range => "range",
            AggregateTable::Kernel => "kernel",
        }
    }
}

/// Which value an [`AggregateRow`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregateQuantity {
    /// A range instance's Σ kernel durations (inclusive).
    GpuTimeNs,
    /// A range instance's pop − push.
    WallTimeNs,
    /// A kernel's duration.
    DurationNs,
}

impl AggregateQuantity {
    /// The column name it stands for: `gpu_time_ns`, `wall_time_ns` or `duration_ns`.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregateQuantity::GpuTimeNs => "gpu_time_ns",
            AggregateQuantity::WallTimeNs => "wall_time_ns",
            AggregateQuantity::DurationNs => "duration_ns",
        }
    }
}

/// One key's distribution of one quantity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggregateRow {
    /// Range groups or kernels.
    pub table: AggregateTable,
    /// The value described.
    pub quantity: AggregateQuantity,
    /// The folded range path, or the kernel name.
    pub key: String,
    /// Its numbers.
    #[serde(flatten)]
    pub summary: DistributionSummary,
}

/// The aggregates of one closed window of steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowAggregates {
    /// The window's number: steps `window·W` up to `(window+1)·W − 1`.
    pub window: u64,
    /// Its first step.
    pub first_step: u64,
    /// Steps it holds (`W`, fewer for the run's last window).
    pub steps: u64,
    /// Its rows, as [`OnlineAggregates::whole_rows`] orders them.
    pub rows: Vec<AggregateRow>,
}

#[derive(Debug, Default)]
struct RangeGroup {
    gpu: Distribution,
    wall: Distribution,
}

#[derive(Debug, Default)]
struct Tables {
    ranges: Keyed<RangeGroup>,
    kernels: Keyed<Distribution>,
}

impl Tables {
    fn is_empty(&self) -> bool {
        self.ranges.is_empty() && self.kernels.is_empty()
    }

    fn merge_into(&self, whole: &mut Tables, max_groups: usize) {
        for (key, g) in &self.ranges {
            let target = entry(&mut whole.ranges, key, max_groups);
            target.gpu.merge(&g.gpu);
            target.wall.merge(&g.wall);
        }
        for (key, d) in &self.kernels {
            entry(&mut whole.kernels, key, max_groups).merge(d);
        }
    }

    /// Rows: range GPU time, range wall time, then kernels; each by total, largest first.
    fn rows(&self) -> Vec<AggregateRow> {
        let mut out = Vec::with_capacity(self.ranges.len() * 2 + self.kernels.len());
        let mut push = |table, quantity, mut part: Vec<(&String, &Distribution)>| {
            part.sort_by(|a, b| b.1.sum.cmp(&a.1.sum).then_with(|| a.0.cmp(b.0)));
            out.extend(part.into_iter().map(|(key, d)| AggregateRow {
                table,
                quantity,
                key: key.clone(),
                summary: d.summary(),
            }));
        };
        use AggregateQuantity::*;
        push(AggregateTable::Range, GpuTimeNs, self.ranges.iter().map(|(k, g)| (k, &g.gpu)).collect());
        push(AggregateTable::Range, WallTimeNs, self.ranges.iter().map(|(k, g)| (k, &g.wall)).collect());
        push(AggregateTable::Kernel, DurationNs, self.kernels.iter().collect());
        out
    }

    fn sketch_bytes(&self) -> usize {
        self.ranges.values().map(|g| g.gpu.sketch_bytes() + g.wall.sketch_bytes()).sum::<usize>()
            + self.kernels.values().map(Distribution::sketch_bytes).sum::<usize>()
    }
}

/// The entry of `key`, or of [`OTHER_KEY`] once `max_groups` other keys exist.
fn entry<'a, V: Default>(map: &'a mut Keyed<V>, key: &str, max_groups: usize) -> &'a mut V {
    let named = map.len() - usize::from(map.contains_key(OTHER_KEY));
    let key = if key == OTHER_KEY || map.contains_key(key) || named < max_groups { key } else { OTHER_KEY };
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key).expect("inserted above")
}

/// The online aggregates and the steps table of one run; see the [module docs](self).
#[derive(Debug)]
pub struct OnlineAggregates {
    settings: OnlineSettings,
    /// Closed windows, merged.
    whole: Tables,
    /// The open window.
    window: Tables,
    window_index: u64,
    window_first_step: u64,
    steps: StepTracker,
    closed: Vec<WindowAggregates>,
    kernels: u64,
    ranges: u64,
}

impl Default for OnlineAggregates {
    fn default() -> Self {
        Self::new(OnlineSettings::default())
    }
}

impl OnlineAggregates {
    /// Empty aggregates.
    pub fn new(settings: OnlineSettings) -> Self {
        Self {
            settings,
            whole: Tables::default(),
            window: Tables::default(),
            window_index: 0,
            window_first_step: 0,
            steps: StepTracker::default(),
            closed: Vec::new(),
            kernels: 0,
            ranges: 0,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &OnlineSettings {
        &self.settings
    }

    /// What the aggregates hold, by collection (a streamed run's per-drain memory census).
    pub fn census(&self) -> Vec<(&'static str, usize)> {
        let mut out = vec![
            ("agg.whole_ranges", self.whole.ranges.len()),
            ("agg.whole_kernels", self.whole.kernels.len()),
            ("agg.window_ranges", self.window.ranges.len()),
            ("agg.window_kernels", self.window.kernels.len()),
            ("agg.closed", self.closed.len()),
        ];
        out.extend(self.steps.census());
        out
    }

    /// Adds one kernel row.
    pub fn add_kernel(&mut self, row: &KernelRow) {
        if !row.granularity.is_kernel_execution() {
            return;
        }
        self.kernels += 1;
        let key = row.kernel_name.as_deref().unwrap_or(NO_NAME);
        let max = self.settings.max_groups;
        // The common case, a name seen before, hashes once and allocates nothing.
        match self.window.kernels.get_mut(key) {
            Some(d) => d.add(row.duration_ns),
            None => entry(&mut self.window.kernels, key, max).add(row.duration_ns),
        }
    }

    /// Adds one completed range instance (children before their parents, as ranges
    /// complete); `top` is its top-level ancestor, itself at depth 0.
    pub fn add_range(&mut self, row: &RangeRow, top: Option<RangeId>) {
        self.ranges += 1;
        let folded = fold_numbers(&row.path);
        let group = entry(&mut self.window.ranges, &folded, self.settings.max_groups);
        group.gpu.add(row.gpu_time_ns);
        group.wall.add(row.wall_time_ns);
        if self.steps.add(&self.settings, row, top).is_some() {
            // The tracker may have made two steps at once (the step group's first instance).
            while self.steps.steps() >= self.window_first_step + self.settings.window_steps.max(1) {
                self.close_window();
            }
        }
    }

    fn close_window(&mut self) {
        let steps = (self.steps.steps() - self.window_first_step).min(self.settings.window_steps.max(1));
        let window = std::mem::take(&mut self.window);
        window.merge_into(&mut self.whole, self.settings.max_groups);
        self.closed.push(WindowAggregates {
            window: self.window_index,
            first_step: self.window_first_step,
            steps,
            rows: window.rows(),
        });
        self.window_index += 1;
        self.window_first_step += steps;
    }

    /// Closes the open window if it holds anything (at the end of the run).
    pub fn finish_window(&mut self) {
        if !self.window.is_empty() {
            self.close_window();
        }
    }

    /// Windows closed since the last call.
    pub fn take_closed_windows(&mut self) -> Vec<WindowAggregates> {
        std::mem::take(&mut self.closed)
    }

    /// Step rows made since the last call.
    pub fn take_steps(&mut self) -> Vec<StepRow> {
        self.steps.take()
    }

    /// The steps table's tracker.
    pub fn steps(&self) -> &StepTracker {
        &self.steps
    }

    /// Kernel rows added (whole-graph rows left out).
    pub fn kernels(&self) -> u64 {
        self.kernels
    }

    /// Range instances added.
    pub fn ranges(&self) -> u64 {
        self.ranges
    }

    /// The whole run's rows so far (closed windows and the open one): range GPU time, range
    /// wall time, kernels, each by total, largest first.
    pub fn whole_rows(&self) -> Vec<AggregateRow> {
        if self.window.is_empty() {
            return self.whole.rows();
        }
        let mut whole = Tables::default();
        self.whole.merge_into(&mut whole, self.settings.max_groups);
        self.window.merge_into(&mut whole, self.settings.max_groups);
        whole.rows()
    }

    /// The open window's rows so far.
    pub fn window_rows(&self) -> Vec<AggregateRow> {
        self.window.rows()
    }

    /// Bytes the sketches take now (the bulk of this value's memory).
    pub fn sketch_bytes(&self) -> usize {
        self.whole.sketch_bytes() + self.window.sketch_bytes()
    }
}
