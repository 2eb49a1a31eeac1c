//! The steps table: one row per step of the whole run, made as range instances complete.
//!
//! A *step* is an instance of the step group: a top-level (depth 0) range group, numbers
//! folded ([`fold_numbers`]). It is the group the settings name
//! ([`OnlineSettings::step_range`], a glob on the exact or folded path), or else the first
//! top-level group with a second instance (`step`, `Train step #`). Until a group repeats,
//! the first instance of each top-level group waits here (at most
//! [`OnlineSettings::max_groups`] of them); when one repeats, its first instance becomes
//! step 0.
//!
//! Each step row carries the time of its range groups down to
//! [`OnlineSettings::step_detail_depth`] levels below the step (the [`MAX_STEP_GROUPS`] with
//! the most GPU time). Range instances complete children first, so a step's groups are
//! summed before the step itself arrives; what waits is one small map per top-level range
//! still open.
//!
//! Imports `folding` and `settings`; `aggregates` holds the tracker.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::folding::fold_numbers;
use super::settings::OnlineSettings;
use crate::analysis::aggregate::RangeRow;
use crate::model::RangeId;

/// The range groups a step row keeps, those with the most GPU time.
pub const MAX_STEP_GROUPS: usize = 16;

/// One range group inside one step.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepGroup {
    /// The group's folded path.
    pub path: String,
    /// Its instances in the step.
    pub count: u64,
    /// Σ of their GPU time (inclusive), ns; `None` when none had one.
    pub gpu_time_ns: Option<u64>,
}

/// One step of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    /// 0, 1, 2, ... in the order the steps completed.
    pub step: u64,
    /// The step range's exact path (`Train step 12`).
    pub path: String,
    /// Push, ns on the CUPTI clock.
    pub start_ns: Option<u64>,
    /// Pop, ns on the CUPTI clock.
    pub end_ns: Option<u64>,
    /// Pop − push, ns.
    pub wall_time_ns: Option<u64>,
    /// Σ kernel durations of the step (inclusive), ns.
    pub gpu_time_ns: Option<u64>,
    /// Kernels of the step.
    pub kernels: u64,
    /// Memcpys and memsets of the step.
    pub transfers: u64,
    /// The aggregates window the step belongs to (`step / window_steps`).
    pub window: u64,
    /// The step's range groups with the most GPU time, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<StepGroup>,
    /// The flight recorder's window that holds the step (`window-N/`), when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flight_window: Option<u64>,
}

/// Finds the step group and makes step rows; see the [module docs](self).
#[derive(Debug, Default)]
pub struct StepTracker {
    /// The step group's folded path, once known.
    group: Option<String>,
    /// Steps made so far.
    steps: u64,
    /// Before the step group is known: the first instance of each top-level group.
    candidates: HashMap<String, (RangeRow, Vec<StepGroup>)>,
    /// Range groups below each open top-level instance.
    pending: HashMap<RangeId, HashMap<String, StepGroup>>,
    /// Step rows not taken yet.
    ready: Vec<StepRow>,
}

impl StepTracker {
    /// What the tracker holds, by collection (a streamed run's per-drain memory census).
    pub fn census(&self) -> [(&'static str, usize); 4] {
        [
            ("steps.candidates", self.candidates.len()),
            ("steps.pending", self.pending.len()),
            ("steps.pending_groups", self.pending.values().map(HashMap::len).sum()),
            ("steps.ready", self.ready.len()),
        ]
    }

    /// The step group's folded path, once known.
    pub fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// Steps made so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Takes the step rows made since the last call.
    pub fn take(&mut self) -> Vec<StepRow> {
        std::mem::take(&mut self.ready)
    }

    /// Step rows made and not taken yet.
    pub fn ready(&self) -> &[StepRow] {
        &self.ready
    }

    /// Range instances waiting here: open top-level ranges with groups below them, and
    /// first instances waiting for the step group.
    pub fn waiting(&self) -> usize {
        self.pending.len() + self.candidates.len()
    }

    /// One completed range instance; `top` is its top-level ancestor (itself at depth 0).
    /// Returns the step row when the range is a step (also kept for [`StepTracker::take`]).
    pub fn add(&mut self, settings: &OnlineSettings, row: &RangeRow, top: Option<RangeId>) -> Option<StepRow> {
        if row.depth > 0 {
            if row.depth <= settings.step_detail_depth {
                if let Some(top) = top {
                    let folded = fold_numbers(&row.path);
                    let groups = self.pending.entry(top).or_default();
                    if let Some(g) = groups.get_mut(folded.as_ref()) {
                        add_group(g, row);
                    } else if groups.len() < settings.max_groups {
                        let mut g = StepGroup { path: folded.into_owned(), ..StepGroup::default() };
                        add_group(&mut g, row);
                        groups.insert(g.path.clone(), g);
                    }
                }
            }
            return None;
        }
        let groups = row.range_id.and_then(|id| self.pending.remove(&id)).map(top_groups).unwrap_or_default();
        // The root row (kernels outside every range) is never a step.
        row.range_id?;
        let folded = fold_numbers(&row.path);
        match &self.group {
            Some(group) if group == folded.as_ref() => Some(self.make_step(settings, row, groups)),
            Some(_) => None,
            None => {
                let named = settings.step_range.as_ref().map(|p| p.matches(&row.path) || p.matches(&folded));
                match named {
                    Some(true) => {
                        self.group = Some(folded.into_owned());
                        self.candidates.clear();
                        Some(self.make_step(settings, row, groups))
                    }
                    Some(false) => None,
                    None => {
                        if let Some((first, first_groups)) = self.candidates.remove(folded.as_ref()) {
                            self.group = Some(folded.into_owned());
                            self.candidates.clear();
                            self.make_step(settings, &first, first_groups);
                            Some(self.make_step(settings, row, groups))
                        } else {
                            if self.candidates.len() < settings.max_groups {
                                self.candidates.insert(folded.into_owned(), (row.clone(), groups));
                            }
                            None
                        }
                    }
                }
            }
        }
    }

    fn make_step(&mut self, settings: &OnlineSettings, row: &RangeRow, groups: Vec<StepGroup>) -> StepRow {
        let step = StepRow {
            step: self.steps,
            path: row.path.clone(),
            start_ns: row.start_ns,
            end_ns: row.end_ns,
            wall_time_ns: row.wall_time_ns,
            gpu_time_ns: row.gpu_time_ns,
            kernels: row.kernel_count,
            transfers: row.transfer_count,
            window: self.steps / settings.window_steps.max(1),
            groups,
            flight_window: None,
        };
        self.steps += 1;
        self.ready.push(step.clone());
        step
    }
}

fn add_group(group: &mut StepGroup, row: &RangeRow) {
    group.count += 1;
    if let Some(t) = row.gpu_time_ns {
        group.gpu_time_ns = Some(group.gpu_time_ns.unwrap_or(0).saturating_add(t));
    }
}

fn top_groups(groups: HashMap<String, StepGroup>) -> Vec<StepGroup> {
    let mut groups: Vec<StepGroup> = groups.into_values().collect();
    groups.sort_by(|a, b| b.gpu_time_ns.cmp(&a.gpu_time_ns).then_with(|| a.path.cmp(&b.path)));
    groups.truncate(MAX_STEP_GROUPS);
    groups
}
