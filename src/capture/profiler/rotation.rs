//! Rotation: per_kernel counters for a slice of each step's launches
//! ([`ProfilerBuilder::rotate`](super::ProfilerBuilder::rotate)).
//!
//! Training steps repeat: step 1 001 launches the same kernels in the same order as step
//! 1 000. With rotation `N`, a step opens per-kernel CUPTI ranges for one block of `B`
//! consecutive launch positions, block `k mod N`, where `k` counts the earlier steps that
//! launched the same sequence up to that position. So every position of a repeating step is
//! measured once every `N` steps, and the other launches run as in trace mode: timed,
//! unmeasured, not serialized. A block, not a spread of single positions: a measured launch
//! makes the GPU's queue drain (its range waits for the work before it), and `B` in a row
//! drain it once. `B = ⌈L / N⌉` for the `L` launches of the second step (the first is often
//! longer: lazy initialization), so the first two steps only watch.
//!
//! `N` is given, or automatic ([`Every::Auto`]). An automatic rotation watches
//! [`AUTO_WARMUP_STEPS`] steps (nothing measured), then sizes blocks so that a measuring step
//! holds at most [`AUTO_STEP_CAP_NS`] of ranges at [`MEASURED_LAUNCH_COST_NS`] each (`B`, and
//! `N = ⌈L / B⌉`), and measures in one step of `M` (the *stride*): `M` keeps a measuring
//! step's cost at [`AUTO_BUDGET`] of the watched steps' time, the cost being the larger of the
//! model (`B` ranges at [`MEASURED_LAUNCH_COST_NS`]: what the GPU waits) and the time the
//! launching thread spent inside CUPTI's range calls, measured (what a drain of a long queue
//! costs it). Every position is then measured within `N · M` steps.
//!
//! A *step* is the launching thread's outermost open range, or the outermost one whose name
//! matches the step-range glob when one is given. Launches outside any step form a sequence of
//! their own, restarted whenever a step ends. `k` is kept per *prefix*: a hash of the step's
//! name pattern and of every kernel name launched in the step so far. Two step shapes (a
//! training step and an evaluation step) therefore rotate separately from where they part, and
//! a position is never skipped because another shape ran in between. Which positions were
//! measured is decided here; what was measured, and which steps share a template (kernel name
//! and block at every position), is worked out from the rows
//! ([`crate::analysis::rotation`]).
//!
//! Memory: one counter per distinct prefix seen, at most [`MAX_PREFIXES`]; past that a new
//! prefix rotates by the number of steps begun (said in the report's rotation section).
//!
//! Imports `model` and `analysis::rotation` (the step rule, shared with the analysis, and what
//! the report keeps); `launch.rs` consults it under the state lock.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};

use crate::analysis::rotation::{step_of, RotationRun};
use crate::model::session::SessionTree;
use crate::model::RangeId;

/// The most distinct launch prefixes a rotation keeps a count for.
pub const MAX_PREFIXES: usize = 1 << 20;

/// What one measured launch costs the program: CUPTI's per-kernel user range, about 50 µs
/// (H100 and H200, CUPTI 13.0; BENCHMARKS.md, "per_kernel in rotation").
pub const MEASURED_LAUNCH_COST_NS: f64 = 50_000.0;

/// The share of step time an automatic rotation spends on measured launches.
pub const AUTO_BUDGET: f64 = 0.015;

/// Steps an automatic rotation watches (nothing measured) before it picks N: the first step
/// is often slow (warm-up, lazy initialization), so N, and the step time measuring is held
/// against, come from the ones after it.
pub const AUTO_WARMUP_STEPS: usize = 5;

/// The most time an automatic rotation's measuring step spends in per-kernel ranges, at
/// [`MEASURED_LAUNCH_COST_NS`] each: the block size.
pub const AUTO_STEP_CAP_NS: f64 = 2_000_000.0;

/// Measuring steps whose range time sets an automatic rotation's stride (the median of the
/// latest ones).
pub const AUTO_STALL_STEPS: usize = 8;

/// The largest N an automatic rotation picks.
pub const AUTO_MAX_EVERY: u32 = 4096;

/// How N is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Every {
    /// Fixed.
    Steps(u32),
    /// From the first steps' launches and time, so that measured launches cost about
    /// [`AUTO_BUDGET`] of step time.
    Auto,
}

impl std::str::FromStr for Every {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(Every::Auto),
            n => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(Every::Steps(n)),
                _ => Err(format!("'{s}': use auto or a whole number of steps (1 or more, e.g. 16)")),
            },
        }
    }
}

/// Where a launch stands in the rotation, and whether it is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Its position in its step (0 for the step's first launch).
    pub position: u32,
    /// How many earlier steps launched the same sequence up to this position.
    pub occurrence: u32,
    /// Whether its per-kernel range is opened.
    pub measured: bool,
}

/// The rotation's state: the step in progress and a count per launch prefix.
///
/// Each step measures one *block* of consecutive positions, `[k·B, (k+1)·B)` with
/// `k = occurrence mod N` and `B = ⌈L / N⌉` for the `L` launches of the second step (the first
/// is often longer: lazy initialization), so nothing is measured before the third: a measured
/// launch drains the GPU's queue (its CUPTI range waits for the work before it), so measuring
/// `B` launches in a row costs one drain, where spreading them over the step cost `B`.
#[derive(Debug)]
pub struct Rotation {
    asked: Every,
    /// N once known (at once when fixed; after the warm-up steps when automatic).
    every: Option<u32>,
    /// B, once the first step's length is known.
    block: Option<u32>,
    /// Launches of the first step (steps after it may differ).
    step_length: Option<u32>,
    /// Push time and launches of the step in progress.
    last_push: Option<u64>,
    /// Warm-up step times, ns (automatic rotation): the baseline.
    baseline: Vec<u64>,
    /// M: one step in M measures (1 unless automatic).
    stride: u32,
    /// Time in CUPTI's range calls of the latest measuring steps, ns (automatic rotation).
    stalls: Vec<u64>,
    /// Whether the step in progress measured a launch.
    measuring: bool,
    /// How the stride changed.
    history: Vec<String>,
    step_glob: Option<glob::Pattern>,
    /// Whether a full counter image is cycled mid-run (a pause of the launching thread); else
    /// measuring stops when it is full and the image is decoded at the end.
    pub(super) cycles: bool,
    /// The step instance of the latest launch (`None`: outside any step).
    current: Option<Option<RangeId>>,
    position: u32,
    prefix: u64,
    seen: HashMap<u64, u32>,
    steps_begun: u64,
    /// Steps (instances of the step range) that ended.
    steps_done: u64,
    why: Option<String>,
    /// Launches measured.
    pub measured: u64,
    /// Launches left unmeasured.
    pub unmeasured: u64,
    /// Launches whose prefix found no room in the table (rotated by steps begun).
    pub untracked: u64,
    /// Launches left unmeasured because the counter image was full (measuring stopped).
    pub after_full: u64,
    /// The step (0-based, over all steps begun) at which the image filled.
    pub full_at_step: Option<u64>,
}

impl Rotation {
    /// A rotation over `every` steps (1 measures every launch), steps being the outermost
    /// ranges or, with `step_glob`, the outermost ranges whose name matches it.
    pub fn new(every: Every, step_glob: Option<glob::Pattern>, cycles: bool) -> Self {
        Rotation {
            asked: every,
            every: match every {
                Every::Steps(n) => Some(n.max(1)),
                Every::Auto => None,
            },
            block: None,
            step_length: None,
            last_push: None,
            baseline: Vec::new(),
            stride: 1,
            stalls: Vec::new(),
            measuring: false,
            history: Vec::new(),
            step_glob,
            cycles,
            current: None,
            position: 0,
            prefix: 0,
            seen: HashMap::new(),
            steps_begun: 0,
            steps_done: 0,
            why: None,
            measured: 0,
            unmeasured: 0,
            untracked: 0,
            after_full: 0,
            full_at_step: None,
        }
    }

    /// N, once known.
    pub fn every(&self) -> Option<u32> {
        self.every
    }

    /// The step a launch attributed to `range` belongs to: its outermost enclosing range (or
    /// the outermost matching the step glob); `None` outside any.
    pub fn step_of(&self, tree: &SessionTree, range: Option<RangeId>) -> Option<RangeId> {
        step_of(tree, range, self.step_glob.as_ref())
    }

    /// A step begins (pushed at `push_ns`): the step that ended gives the block size (the
    /// second one) and, in an automatic rotation, its time (the warm-up's pick N and B) or
    /// its time in CUPTI's range calls (`stall`, taken when it measured: the stride).
    fn begin_step(&mut self, step: Option<RangeId>, push_ns: Option<u64>, stall: &mut dyn FnMut() -> u64) {
        if self.steps_begun > 0 && self.current.flatten().is_some() {
            // Steps, not the launches outside them between steps, are what the warm-up counts.
            self.steps_done += 1;
            // The second step's length: the first is often longer (lazy initialization).
            let launches = self.position;
            if self.step_length.is_none() && launches > 0 && self.steps_done == 2 {
                self.step_length = Some(launches);
            }
            let wall = match (self.last_push, push_ns) {
                (Some(a), Some(b)) if b > a && step.is_some() => Some(b - a),
                _ => None,
            };
            if self.asked == Every::Auto {
                let stalled = std::mem::take(&mut self.measuring).then(stall);
                self.adapt(wall, stalled);
            }
        }
        if step.is_some() {
            self.last_push = push_ns;
        }
        if self.asked != Every::Auto {
            if let (Some(n), Some(length)) = (self.every, self.step_length) {
                self.block = Some(length.div_ceil(n).max(1));
            }
        }
    }

    /// An automatic rotation's step that ended after `wall` ns, `stalled` ns in range calls
    /// when it measured.
    fn adapt(&mut self, wall: Option<u64>, stalled: Option<u64>) {
        let steps_done = self.steps_done;
        if self.every.is_none() {
            // Warm-up: the first step is left out of the baseline.
            if let Some(w) = wall.filter(|_| steps_done > 1) {
                self.baseline.push(w);
            }
            if steps_done < AUTO_WARMUP_STEPS as u64 {
                return;
            }
            let launches = self.step_length.unwrap_or(0).max(1);
            let block = ((AUTO_STEP_CAP_NS / MEASURED_LAUNCH_COST_NS) as u32).clamp(1, launches);
            let every = launches.div_ceil(block).min(AUTO_MAX_EVERY);
            self.block = Some(launches.div_ceil(every));
            self.every = Some(every);
            self.stride = self.stride_for(f64::from(self.block.unwrap_or(1)) * MEASURED_LAUNCH_COST_NS);
            self.why = Some(format!(
                "auto: {launches} launches in {} a step (median of steps 1 to {} of {AUTO_WARMUP_STEPS} watched); \
                 blocks of {} launches (about {:.0} us of ranges each at {:.0} us a launch), one measuring step in {} \
                 for {:.1} % of step time",
                self.baseline_ns()
                    .map_or_else(|| "an unknown time".to_owned(), |b| format!("{:.3} ms", b as f64 / 1e6)),
                AUTO_WARMUP_STEPS - 1,
                self.block.unwrap_or(1),
                f64::from(self.block.unwrap_or(1)) * MEASURED_LAUNCH_COST_NS / 1e3,
                MEASURED_LAUNCH_COST_NS / 1e3,
                self.stride,
                AUTO_BUDGET * 100.0
            ));
            return;
        }
        let Some(stall) = stalled else { return };
        self.stalls.push(stall);
        if self.stalls.len() > AUTO_STALL_STEPS {
            self.stalls.remove(0);
        }
        let Some(typical) = median(&self.stalls) else { return };
        // The launching thread's time in range calls is what a drain costs it; the GPU's own
        // wait per range (measured on an H200: the CPU spent 0.3 ms in 40 ranges that cost the
        // step 2 ms) is the model's floor.
        let floor = f64::from(self.block.unwrap_or(1)) * MEASURED_LAUNCH_COST_NS;
        let stride = self.stride_for((typical as f64).max(floor));
        if stride != self.stride {
            if self.history.len() < 8 {
                self.history.push(format!(
                    "one step in {stride} from step {steps_done} (a measuring step spent {:.3} ms in CUPTI's range calls \
                     at the median)",
                    typical as f64 / 1e6
                ));
            }
            self.stride = stride;
        }
    }

    /// The median of the watched steps' times.
    fn baseline_ns(&self) -> Option<u64> {
        median(&self.baseline)
    }

    /// The stride that keeps `cost` ns a measuring step at the budget.
    fn stride_for(&self, cost: f64) -> u32 {
        match self.baseline_ns() {
            Some(b) if b > 0 => ((cost / (AUTO_BUDGET * b as f64)).ceil() as u32).clamp(1, AUTO_MAX_EVERY),
            _ => AUTO_MAX_EVERY,
        }
    }

    /// The slot of the next launch: of kernel `name` (empty for a graph launch), in `step`
    /// (from [`Rotation::step_of`]) named `step_name` and pushed at `step_push_ns`; `room`:
    /// whether the counter image has room for another range.
    pub fn next(
        &mut self,
        step: Option<RangeId>,
        step_name: &str,
        step_push_ns: Option<u64>,
        name: &[u8],
        room: bool,
        stall: &mut dyn FnMut() -> u64,
    ) -> Slot {
        if self.current != Some(step) {
            self.begin_step(step, step_push_ns, stall);
            self.current = Some(step);
            self.position = 0;
            self.steps_begun += 1;
            // Steps numbered in their names (`Train step 12`) share one pattern.
            let mut h = DefaultHasher::new();
            h.write_u8(u8::from(step.is_some()));
            for b in step_name.bytes().filter(|b| !b.is_ascii_digit()) {
                h.write_u8(b);
            }
            self.prefix = h.finish();
        }
        let mut h = DefaultHasher::new();
        h.write_u64(self.prefix);
        h.write(name);
        self.prefix = h.finish();
        let position = self.position;
        self.position = self.position.saturating_add(1);
        let room_in_table = self.seen.len() < MAX_PREFIXES;
        let occurrence = match self.seen.get_mut(&self.prefix) {
            Some(n) => {
                let k = *n;
                *n = n.saturating_add(1);
                Some(k)
            }
            None => None,
        };
        let occurrence = match occurrence {
            Some(k) => k,
            None if room_in_table => {
                self.seen.insert(self.prefix, 1);
                0
            }
            None => {
                self.untracked += 1;
                (self.steps_begun - 1) as u32
            }
        };
        let m = self.stride.max(1);
        let in_slot = match (self.every, self.block) {
            (Some(n), Some(b)) => occurrence % m == 0 && (position / b) % n == (occurrence / m) % n,
            _ => false,
        };
        let measured = in_slot && room;
        if in_slot && !room {
            self.after_full += 1;
            self.full_at_step.get_or_insert(self.steps_begun.saturating_sub(1));
        }
        if measured {
            self.measuring = true;
            self.measured += 1;
        } else {
            self.unmeasured += 1;
        }
        Slot { position, occurrence, measured }
    }

    /// Distinct prefixes counted.
    pub fn prefixes(&self) -> usize {
        self.seen.len()
    }

    /// What the report says of it.
    pub fn run(&self) -> RotationRun {
        let why = match (&self.why, self.history.is_empty()) {
            (Some(w), false) => Some(format!("{w}; {}", self.history.join("; "))),
            (w, _) => w.clone(),
        };
        RotationRun {
            every: self.every.unwrap_or(0),
            auto: self.asked == Every::Auto,
            why,
            block: self.block.unwrap_or(0),
            stride: self.stride,
            step_range: self.step_glob.as_ref().map(|g| g.as_str().to_owned()),
            measured_launches: self.measured,
            unmeasured_launches: self.unmeasured,
            prefixes: self.seen.len() as u64,
            untracked_launches: self.untracked,
            cycles: self.cycles,
            after_full_launches: self.after_full,
            full_at_step: self.full_at_step,
        }
    }
}

/// The median of `values` (the lower one of an even count); `None` when empty.
fn median(values: &[u64]) -> Option<u64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step_of_names(r: &mut Rotation, step: u32, names: &[&str]) -> Vec<bool> {
        names
            .iter()
            .map(|n| {
                r.next(Some(RangeId { slot: step, generation: 0 }), "Train step 7", None, n.as_bytes(), true, &mut || 0)
                    .measured
            })
            .collect()
    }

    #[test]
    fn each_step_measures_one_block_and_every_position_is_covered_in_n_steps() {
        let names: Vec<String> = (0..37).map(|i| format!("k{}", i % 5)).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut r = Rotation::new(Every::Steps(8), None, false);
        let mut times = vec![0u32; names.len()];
        for step in 0..18 {
            let measured = step_of_names(&mut r, step, &names);
            let at: Vec<usize> = measured.iter().enumerate().filter(|(_, m)| **m).map(|(p, _)| p).collect();
            if step < 2 {
                // The block size comes from the second step's 37 launches: ⌈37 / 8⌉ = 5.
                assert!(at.is_empty(), "step {step}: {at:?}");
                continue;
            }
            // One block of consecutive positions: block (step mod 8).
            let block = (step % 8) as usize;
            let want: Vec<usize> = (block * 5..(block * 5 + 5).min(37)).collect();
            assert_eq!(at, want, "step {step}");
            for p in at {
                times[p] += 1;
            }
            if step == 9 {
                assert!(times.iter().all(|&t| t == 1), "after 8 measuring steps each position once: {times:?}");
            }
        }
        assert!(times.iter().all(|&t| t == 2), "{times:?}");
        assert_eq!(r.run().block, 5);
        assert_eq!((r.measured, r.unmeasured), (74, 18 * 37 - 74));
    }

    #[test]
    fn a_second_step_shape_rotates_on_its_own_from_where_it_parts() {
        // A train step of 20 launches; every 5th step an eval step of 12 launches whose first
        // 4 are the train step's. B = ⌈20 / 4⌉ = 5.
        let train: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        let eval: Vec<String> = (0..12).map(|i| if i < 4 { format!("t{i}") } else { format!("e{i}") }).collect();
        let mut r = Rotation::new(Every::Steps(4), None, false);
        let mut eval_times = vec![0u32; eval.len()];
        let mut train_times = vec![0u32; train.len()];
        let mut step = 0;
        for round in 0..8 {
            for _ in 0..4 {
                for (p, n) in train.iter().enumerate() {
                    let id = Some(RangeId { slot: step, generation: 0 });
                    train_times[p] += u32::from(r.next(id, "train", None, n.as_bytes(), true, &mut || 0).measured);
                }
                step += 1;
            }
            for (p, n) in eval.iter().enumerate() {
                let id = Some(RangeId { slot: step, generation: 0 });
                eval_times[p] += u32::from(r.next(id, "eval", None, n.as_bytes(), true, &mut || 0).measured);
            }
            step += 1;
            if round == 3 {
                // Four eval steps cover every eval position once, wherever they fell.
                assert!(eval_times.iter().all(|&t| t == 1), "{eval_times:?}");
            }
        }
        assert!(eval_times.iter().all(|&t| t == 2), "{eval_times:?}");
        // 30 training steps measure (the first two only watch): each block 7 or 8 times.
        assert!(train_times.iter().all(|&t| t == 7 || t == 8), "{train_times:?}");
    }

    #[test]
    fn rotation_one_measures_every_launch_from_the_third_step() {
        let mut r = Rotation::new(Every::Steps(1), None, false);
        assert!(step_of_names(&mut r, 0, &["a", "b", "a"]).iter().all(|m| !*m));
        assert!(step_of_names(&mut r, 1, &["a", "b", "a"]).iter().all(|m| !*m));
        assert!(step_of_names(&mut r, 2, &["a", "b", "a"]).iter().all(|m| *m));
        assert!(step_of_names(&mut r, 3, &["a", "b", "a"]).iter().all(|m| *m));
    }

    #[test]
    fn the_step_is_the_outermost_range_or_the_outermost_matching_the_glob() {
        let mut tree = SessionTree::new();
        let epoch = tree.push("epoch 0", 1, 0);
        let step = tree.push("Train step 3", 1, 1);
        let layer = tree.push("layer 2", 1, 2);
        let plain = Rotation::new(Every::Steps(4), None, false);
        assert_eq!(plain.step_of(&tree, Some(layer)), Some(epoch));
        assert_eq!(plain.step_of(&tree, None), None);
        let named = Rotation::new(Every::Steps(4), Some(glob::Pattern::new("Train step *").unwrap()), false);
        assert_eq!(named.step_of(&tree, Some(layer)), Some(step));
        assert_eq!(named.step_of(&tree, Some(epoch)), None);
    }

    /// Runs `steps` steps of 100 launches, step `k` taking `wall(k)` ns and a measuring step
    /// `stall` ns in CUPTI's range calls; returns the positions measured in each.
    fn timed_steps(r: &mut Rotation, steps: u32, wall: impl Fn(u32) -> u64, stall: u64) -> Vec<Vec<u32>> {
        let mut push = 0;
        (0..steps)
            .map(|step| {
                let id = Some(RangeId { slot: step, generation: 0 });
                let at = (0..100u32)
                    .filter(|k| {
                        r.next(id, "step", Some(push), format!("k{k}").as_bytes(), true, &mut || stall).measured
                    })
                    .collect();
                push += wall(step);
                at
            })
            .collect()
    }

    #[test]
    fn auto_sizes_blocks_and_strides_from_the_watched_steps() {
        let mut r = Rotation::new(Every::Auto, None, false);
        // 100 launches a step; the first step is slow (40 ms), the next ones 10 ms; a measuring
        // step holds 0.3 ms in range calls, less than the model's 34 ranges cost the GPU.
        let measured = timed_steps(&mut r, 50, |k| if k == 0 { 40_000_000 } else { 10_000_000 }, 300_000);
        // Blocks of at most 40 (2 ms at 50 us): N = 3, B = 34; 34 x 50 us against 1.5 % of
        // 10 ms: one measuring step in 12.
        assert_eq!((r.every(), r.run().block, r.run().stride), (Some(3), 34, 12));
        for (step, at) in measured.iter().enumerate() {
            let want: Vec<u32> = match step {
                12 => (34..68).collect(),
                24 => (68..100).collect(),
                36 => (0..34).collect(),
                48 => (34..68).collect(),
                _ => Vec::new(),
            };
            assert_eq!(at, &want, "step {step}");
        }
        let why = r.run().why.unwrap();
        assert!(why.contains("100 launches in 10.000 ms a step (median of steps 1 to 4"), "{why}");
        assert!(why.contains("blocks of 34 launches") && why.contains("one measuring step in 12"), "{why}");
        assert!(!why.contains("from step"), "the model's floor holds: {why}");
    }

    #[test]
    fn auto_measures_less_often_when_range_calls_hold_the_thread_longer() {
        let mut r = Rotation::new(Every::Auto, None, false);
        // A measuring step holds 6 ms (the GPU's queue drains at its first range): one in 40.
        let measured = timed_steps(&mut r, 90, |_| 10_000_000, 6_000_000);
        let steps: Vec<usize> = measured.iter().enumerate().filter(|(_, at)| !at.is_empty()).map(|(s, _)| s).collect();
        assert_eq!(steps, [12, 40, 80]);
        assert_eq!(r.run().stride, 40);
        let why = r.run().why.unwrap();
        assert!(why.contains("one step in 40 from step 13 (a measuring step spent 6.000 ms"), "{why}");
    }

    #[test]
    fn a_full_image_stops_measuring_and_says_when() {
        let mut r = Rotation::new(Every::Steps(2), None, false);
        let mut measured = 0;
        for step in 0..6u32 {
            let id = Some(RangeId { slot: step, generation: 0 });
            for k in 0..4 {
                // The image holds 5 ranges.
                measured +=
                    u32::from(r.next(id, "step", None, format!("k{k}").as_bytes(), measured < 5, &mut || 0).measured);
            }
        }
        assert_eq!(measured, 5);
        let run = r.run();
        // B = 2 from the second step; steps 2 and 3 measure 4, step 4 fills the image.
        assert_eq!((run.full_at_step, run.after_full_launches), (Some(4), 3));
        assert_eq!(run.measured_launches + run.unmeasured_launches, 24);
    }

    #[test]
    fn launches_outside_steps_between_steps_are_not_watched_steps() {
        let mut r = Rotation::new(Every::Auto, None, false);
        let mut push = 0;
        for step in 0..8u32 {
            let id = Some(RangeId { slot: step, generation: 0 });
            for k in 0..100 {
                r.next(id, "step", Some(push), format!("k{k}").as_bytes(), true, &mut || 0);
            }
            // Three launches outside any step after each one (a logging kernel, say).
            for k in 0..3 {
                r.next(None, "", None, format!("log{k}").as_bytes(), true, &mut || 0);
            }
            push += 10_000_000;
        }
        // Five watched steps of 100 launches: B from a step's 100, not from the 3 outside.
        assert_eq!((r.every(), r.run().block), (Some(3), 34));
    }
}
