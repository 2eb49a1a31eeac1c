//! The steps of a Kineto trace: which range instances become PyTorch's `ProfilerStep#N`
//! annotations, and their numbers ([`choose_steps`]).
//!
//! Layer 3 (the safe profiler), report output, for `kineto_events`.
//! PyTorch's profiler writes one `user_annotation` named `ProfilerStep#N` per `prof.step()`
//! interval, on the thread that steps; HTA reads its iterations from them (and, with two or
//! more, leaves out the work launched in the last one: see [`kineto`](super::kineto)). gmprof
//! has no profiler step of its own: a step is an instance of the step range.
//!
//! - **Which range.** The one the trace options name (`TraceOptions::step_range`, a name or
//!   glob: `gmprof
//!   run`'s `GMPROF_STEP_RANGE`, the range of `--torch-steps`, or `GMPROF_ROTATE_STEP`), each
//!   instance whose name matches and that is not inside another match. Without one, the
//!   repeated range path (two or more instances) of least depth and, among those, of most GPU
//!   time: the step `gmprof merge`'s straggler table picks.
//! - **Which number.** The program's own where the names carry it (`Train step 17` is step 17:
//!   every name ends in a number and the numbers rise in time order); else from the capture's
//!   first step (`TraceOptions::first_step`, an on-demand capture); else 0, 1, ... in time
//!   order, as gmprof numbers a step range's instances.
//!
//! Only ranges the timeline places (both timestamps) become steps; the rest are counted
//! ([`StepsInfo::left_out`]). In the counter modes, whose kernel positions are synthetic and
//! whose launches have no events, the trace has no steps at all: HTA keeps only the GPU events
//! whose launch it has once a trace has steps, and would keep none.
//!
//! Imports the report model only (`kineto` imports it, for [`StepsInfo`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::analysis::aggregate::RangeRow;
use crate::model::session::ROOT_PATH;
use crate::model::{RangeId, ThreadId};

/// One step: a placed instance of the step range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KinetoStep {
    /// `N` of `ProfilerStep#N`.
    pub number: u64,
    /// The range instance.
    pub range_id: RangeId,
    /// The thread that pushed it.
    pub thread: ThreadId,
    /// Push and pop, ns on the CUPTI clock.
    pub start_ns: u64,
    /// See [`KinetoStep::start_ns`].
    pub end_ns: u64,
}

/// What `otherData.steps` says of the steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepsInfo {
    /// The step range: the name or glob asked for, or the path chosen.
    pub range: String,
    /// How the range was chosen.
    pub chosen_by: String,
    /// How the steps are numbered.
    pub numbered_by: String,
    /// `ProfilerStep#N` events written.
    pub steps: u64,
    /// Instances of the step range with no place on the timeline (open, or without times).
    pub left_out: u64,
}

/// The steps of a trace and what `otherData.steps` says of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepChoice {
    /// The steps, in time order.
    pub steps: Vec<KinetoStep>,
    /// What was chosen, and how.
    pub info: StepsInfo,
}

/// The steps among `rows` (every range row of the report) of which `placed` (range → push
/// and pop) have a place on the timeline: instances of `step_range` (a name or glob; `None`:
/// the repeated path chosen), numbered from `first_step` unless their names number them.
/// `None` when no range is a step (no step range asked for and no range path repeats, or one
/// asked for that no range matches).
pub fn choose_steps(
    rows: &[RangeRow],
    placed: &HashMap<RangeId, (u64, u64)>,
    step_range: Option<&str>,
    first_step: Option<u64>,
) -> Option<StepChoice> {
    let (members, range, chosen_by) = match step_range.map(str::trim).filter(|s| !s.is_empty()) {
        Some(asked) => (named(rows, asked), asked.to_owned(), format!("the step range '{asked}'")),
        None => {
            let path = repeated_path(rows)?;
            let members = rows.iter().enumerate().filter(|(_, r)| r.path == path).map(|(i, _)| i).collect();
            let how = "the repeated range of least depth and most GPU time, as gmprof merge's straggler table \
                       picks (GMPROF_STEP_RANGE, --torch-steps or GMPROF_ROTATE_STEP names one)";
            (members, path, how.to_owned())
        }
    };
    if members.is_empty() {
        return None;
    }
    let mut steps: Vec<(&RangeRow, u64, u64)> = members
        .iter()
        .filter_map(|i| placed.get(&rows[*i].range_id?).map(|&(start, end)| (&rows[*i], start, end)))
        .collect();
    let left_out = (members.len() - steps.len()) as u64;
    steps.sort_by_key(|(row, start, _)| (*start, row.thread));
    let (numbers, numbered_by) = numbers(&steps, first_step);
    let steps = steps
        .iter()
        .zip(numbers)
        .filter_map(|((row, start, end), number)| {
            Some(KinetoStep { number, range_id: row.range_id?, thread: row.thread?, start_ns: *start, end_ns: *end })
        })
        .collect::<Vec<_>>();
    let info = StepsInfo { range, chosen_by, numbered_by, steps: steps.len() as u64, left_out };
    Some(StepChoice { steps, info })
}

/// The rows whose name matches `asked` (a glob, or the name itself when it is not one) and
/// that lie inside no other such row.
fn named(rows: &[RangeRow], asked: &str) -> Vec<usize> {
    let pattern = glob::Pattern::new(asked).ok();
    let matches = |name: &str| pattern.as_ref().map_or(name == asked, |p| p.matches(name));
    let matched: HashSet<RangeId> = rows.iter().filter(|r| matches(&r.name)).filter_map(|r| r.range_id).collect();
    let parents: HashMap<RangeId, Option<RangeId>> =
        rows.iter().filter_map(|r| Some((r.range_id?, r.parent_id))).collect();
    let inside_a_match = |row: &RangeRow| {
        let mut at = row.parent_id;
        // Bounded by the rows: a malformed report with a parent cycle ends the walk.
        for _ in 0..rows.len() {
            let Some(id) = at else { return false };
            if matched.contains(&id) {
                return true;
            }
            at = parents.get(&id).copied().flatten();
        }
        false
    };
    rows.iter()
        .enumerate()
        .filter(|(_, r)| r.range_id.is_some_and(|id| matched.contains(&id)) && !inside_a_match(r))
        .map(|(i, _)| i)
        .collect()
}

/// The repeated path (two or more rows) of least depth and, among those, of most GPU time
/// (the first met on a tie); the root row is never one.
fn repeated_path(rows: &[RangeRow]) -> Option<String> {
    // path → (first row, depth, rows, Σ GPU time)
    let mut paths: BTreeMap<&str, (usize, u32, u64, u64)> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate().filter(|(_, r)| r.range_id.is_some() && r.path != ROOT_PATH) {
        let entry = paths.entry(&r.path).or_insert((i, r.depth, 0, 0));
        entry.2 += 1;
        entry.3 = entry.3.saturating_add(r.gpu_time_ns.unwrap_or(0));
    }
    paths
        .into_iter()
        .filter(|(_, p)| p.2 >= 2)
        .min_by(|a, b| a.1 .1.cmp(&b.1 .1).then(b.1 .3.cmp(&a.1 .3)).then(a.1 .0.cmp(&b.1 .0)))
        .map(|(path, _)| path.to_owned())
}

/// The number at the end of `name` (`Train step 17`: 17).
fn trailing_number(name: &str) -> Option<u64> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    name[name.len() - digits..].parse().ok()
}

/// The steps' numbers, in their (time) order, and how they were given.
fn numbers(steps: &[(&RangeRow, u64, u64)], first_step: Option<u64>) -> (Vec<u64>, String) {
    let named: Option<Vec<u64>> = steps.iter().map(|(row, _, _)| trailing_number(&row.name)).collect();
    if let Some(named) = named.filter(|n| !n.is_empty() && n.windows(2).all(|w| w[0] < w[1])) {
        return (named, "the numbers that end the step ranges' names".into());
    }
    let first = first_step.unwrap_or(0);
    let numbers = (0..steps.len() as u64).map(|i| first.saturating_add(i)).collect();
    let how = match first_step {
        Some(first) => format!("in time order from the capture's first step, {first}"),
        None => "in time order from 0, as gmprof numbers the instances of a step range".into(),
    };
    (numbers, how)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(slot: u32, name: &str, path: &str, depth: u32, parent: Option<u32>, gpu: u64) -> RangeRow {
        RangeRow {
            range_id: Some(RangeId { slot, generation: 0 }),
            path: path.into(),
            name: name.into(),
            depth,
            instance: 0,
            thread: Some(7),
            kernel_count: 0,
            self_kernel_count: 0,
            flagged_kernel_count: 0,
            gpu_time_ns: Some(gpu),
            wall_time_ns: None,
            start_ns: None,
            end_ns: None,
            parent_id: parent.map(|slot| RangeId { slot, generation: 0 }),
            gpu_busy_ns: None,
            transfer_count: 0,
            transfer_bytes: 0,
            memcpy_bytes: 0,
            memset_bytes: 0,
            untimed_transfer_count: 0,
            transfer_time_ns: None,
            transfer_gbps: None,
            metrics: Vec::new(),
            dram_read_bytes: None,
            dram_write_bytes: None,
            dram_read_gbps: None,
            dram_write_gbps: None,
            dram_total_gbps: None,
        }
    }

    fn placed(rows: &[RangeRow], skip: &[usize]) -> HashMap<RangeId, (u64, u64)> {
        let at = |i: usize| (1_000 * i as u64, 1_000 * i as u64 + 900);
        (0..rows.len()).filter(|i| !skip.contains(i)).map(|i| (rows[i].range_id.unwrap(), at(i))).collect()
    }

    #[test]
    fn without_a_step_range_the_shallowest_repeated_path_with_most_gpu_time_is_the_step() {
        // Two top-level paths repeat; `train` has more GPU time. `fwd` repeats deeper.
        let rows = vec![
            row(1, "setup", "setup", 1, None, 900),
            row(2, "train", "train", 1, None, 50),
            row(3, "fwd", "train/fwd", 2, Some(2), 40),
            row(4, "eval", "eval", 1, None, 10),
            row(5, "train", "train", 1, None, 60),
            row(6, "fwd", "train/fwd", 2, Some(5), 40),
            row(7, "eval", "eval", 1, None, 10),
        ];
        let choice = choose_steps(&rows, &placed(&rows, &[]), None, None).unwrap();
        assert_eq!(choice.info.range, "train");
        let numbered: Vec<(u64, u32)> = choice.steps.iter().map(|s| (s.number, s.range_id.slot)).collect();
        assert_eq!(numbered, [(0, 2), (1, 5)]);
        assert!(choice.info.chosen_by.contains("least depth"), "{}", choice.info.chosen_by);
        // No repeated path: no steps.
        assert!(choose_steps(&rows[..2], &placed(&rows, &[]), None, None).is_none());
    }

    #[test]
    fn a_named_step_range_takes_its_outermost_matches_and_the_program_s_numbers() {
        let rows = vec![
            row(1, "Train step 17", "Train step 17", 1, None, 1),
            row(2, "Train step 99", "Train step 17/Train step 99", 2, Some(1), 1),
            row(3, "Train step 18", "Train step 18", 1, None, 1),
            row(4, "Train step 19", "Train step 19", 1, None, 1),
        ];
        let choice = choose_steps(&rows, &placed(&rows, &[3]), Some("Train step *"), None).unwrap();
        let numbered: Vec<(u64, u32)> = choice.steps.iter().map(|s| (s.number, s.range_id.slot)).collect();
        assert_eq!(numbered, [(17, 1), (18, 3)], "the nested match is not a step; the unplaced one is left out");
        assert_eq!((choice.info.left_out, choice.info.steps), (1, 2));
        assert!(choice.info.numbered_by.contains("names"));
        // Names without rising numbers: numbered in order, from the capture's first step.
        let rows = vec![row(1, "step", "step", 1, None, 1), row(2, "step", "step", 1, None, 1)];
        let choice = choose_steps(&rows, &placed(&rows, &[]), Some("step"), Some(1236)).unwrap();
        assert_eq!(choice.steps.iter().map(|s| s.number).collect::<Vec<_>>(), [1236, 1237]);
        assert!(choice.info.numbered_by.contains("first step, 1236"));
        assert!(choose_steps(&rows, &placed(&rows, &[]), Some("optimizer"), None).is_none(), "no range matches");
    }
}
