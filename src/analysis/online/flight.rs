//! The flight recorder (issue 42): the last steps of full detail (kernel rows, transfers,
//! range instances) held in a ring keyed by step, and the rules that turn them into a
//! *window* ([`FlightWindow`]) when something goes wrong.
//!
//! Rows arrive as a streamed run completes them, each with its top-level range
//! ([`FlightRecorder::kernel`], [`FlightRecorder::transfer`], [`FlightRecorder::range`]);
//! they wait under that range until it completes. When it completes as a step (the
//! [`StepTracker`](super::steps::StepTracker) made a step row of it), its rows become that
//! step's slot in the ring; rows of anything else (kernels outside every range, top-level
//! ranges that are not steps) go with the next step made.
//!
//! Each step made is judged ([`FlightSettings`]): its time (the larger of its wall time and
//! its GPU time) against the slow-step rule and the running median of the last
//! [`MEDIAN_STEPS`] steps, each of its range groups against its own running median, and any
//! trigger asked for from outside ([`FlightRecorder::request`]: a signal, the run ending
//! abnormally). A trigger opens a window holding the ring (the trigger step and the
//! [`FlightSettings::ring_steps`] − 1 before it) and the next
//! [`FlightSettings::after_steps`] steps; triggers while a window is open join it. Windows
//! are rate-limited: at least [`FlightSettings::min_gap_steps`] between two triggers and at
//! most [`FlightSettings::max_windows`]; a trigger past either is counted, not written.
//!
//! A step is in one window at most, and its step row says which
//! ([`StepRow::flight_window`]): step rows are handed out ([`FlightRecorder::take_final_steps`])
//! only once no later window can take them, that is when they leave the ring or join a window.
//!
//! **Memory.** At most [`FlightSettings::max_rows`] rows between drains (the ring, the rows
//! of ranges still open, and the open window's), and within a drain that bound plus the
//! drain's own rows (a drain hands over its rows before the ranges that complete their steps;
//! the drain holds those rows anyway). At the drain's end ([`FlightRecorder::end_drain`]),
//! past the bound, the oldest steps of the ring lose their detail first (a window then lists
//! them as steps without detail), then the older half of the largest set of rows still
//! waiting for a step goes; every row dropped is counted. Besides the rows: `ring_steps` + `after_steps`
//! step rows, [`MEDIAN_STEPS`] step times, and [`MEDIAN_STEPS`] times for each of at most
//! [`MAX_JUDGED_GROUPS`] range groups.
//!
//! Imports `flight_rules` and `steps`; the streamed outputs' writer holds it.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::flight_rules::{FlightSettings, StepTime, TriggerRule, MAX_JUDGED_GROUPS, MEDIAN_STEPS, MIN_HISTORY};
use super::steps::StepRow;
use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{KernelRow, TransferRow};
use crate::model::RangeId;

/// A range group's jump is judged only when it is at least this much above its median, ns
/// (jumps of microseconds in tiny groups are noise).
pub const MIN_JUMP_NS: u64 = 100_000;

/// Rows of one step (or of what waits for a step).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepDetail {
    /// Kernel rows.
    pub kernels: Vec<KernelRow>,
    /// Memcpy and memset rows.
    pub transfers: Vec<TransferRow>,
    /// Completed range instances, children before parents.
    pub ranges: Vec<RangeRow>,
}

impl StepDetail {
    /// Rows held.
    pub fn rows(&self) -> usize {
        self.kernels.len() + self.transfers.len() + self.ranges.len()
    }

    /// Drops the older half of each kind of row; returns how many went.
    fn drop_older_half(&mut self) -> usize {
        let (k, t, r) = (self.kernels.len() / 2, self.transfers.len() / 2, self.ranges.len() / 2);
        self.kernels.drain(..k);
        self.transfers.drain(..t);
        self.ranges.drain(..r);
        k + t + r
    }

    /// Drops a set of one row (the older half of it is none); returns how many went.
    fn drop_all_if_single(&mut self) -> usize {
        if self.rows() != 1 {
            return 0;
        }
        *self = StepDetail::default();
        1
    }

    fn append(&mut self, mut other: StepDetail) {
        self.kernels.append(&mut other.kernels);
        self.transfers.append(&mut other.transfers);
        self.ranges.append(&mut other.ranges);
    }
}

/// What a window lists of itself: in the summary, in `why.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowEntry {
    /// Its number: its outputs are in `window-N/`.
    pub window: u64,
    /// Its directory beside `report.json`.
    pub dir: String,
    /// The step that triggered it (`None`: asked for at the run's end, after its last step).
    pub trigger_step: Option<u64>,
    /// Its first and last steps.
    pub first_step: Option<u64>,
    /// Its last step.
    pub last_step: Option<u64>,
    /// Why, one line per trigger (those that joined it while it was open too).
    pub triggers: Vec<String>,
    /// Kernel rows it holds.
    pub kernels: u64,
    /// Steps it lists without their rows (the ring's row bound took them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps_without_detail: Vec<u64>,
    /// Why it holds fewer steps after its trigger than asked (the run ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_early: Option<String>,
}

/// One window: its entry, its steps and their rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlightWindow {
    /// What the summary lists of it.
    pub entry: WindowEntry,
    /// Its step rows, in order, each marked with the window.
    pub steps: Vec<StepRow>,
    /// Their rows.
    pub detail: StepDetail,
}

/// What a run's flight recorder did: in `report.json`'s streamed summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlightSummary {
    /// Its rules and bounds, in words.
    pub settings: String,
    /// Every window written, in order.
    pub windows: Vec<WindowEntry>,
    /// Triggers that the rate limit kept from opening a window.
    pub suppressed: u64,
    /// The first of those, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suppressed_first: Vec<String>,
    /// Rows dropped at the row bound: of steps not complete yet, or rows that found no room
    /// (the ring's steps that gave up their rows are listed by their windows instead).
    pub dropped_rows: u64,
    /// Windows that could not be written, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Triggers kept in words in [`FlightSummary::suppressed_first`].
const MAX_SUPPRESSED_KEPT: usize = 10;

/// Reasons a window asked for keeps until it opens ([`FlightRecorder::request`]).
pub const MAX_REQUESTS_KEPT: usize = 8;

struct Slot {
    step: StepRow,
    detail: StepDetail,
    detail_dropped: bool,
}

struct Open {
    window: FlightWindow,
    after_left: u32,
}

/// The ring and its triggers; see the [module docs](self).
pub struct FlightRecorder {
    settings: FlightSettings,
    ring: VecDeque<Slot>,
    /// Rows under top-level ranges still open.
    waiting: HashMap<RangeId, StepDetail>,
    /// Rows that go with the next step made.
    between: StepDetail,
    held_rows: usize,
    dropped_rows: u64,
    step_times: VecDeque<u64>,
    group_times: HashMap<String, VecDeque<u64>>,
    open: Option<Open>,
    requested: Vec<String>,
    windows: Vec<WindowEntry>,
    last_trigger_step: Option<u64>,
    suppressed: u64,
    suppressed_first: Vec<String>,
    ready: Vec<FlightWindow>,
    final_steps: Vec<StepRow>,
}

impl std::fmt::Debug for FlightRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightRecorder")
            .field("settings", &self.settings)
            .field("ring_steps", &self.ring.len())
            .field("held_rows", &self.held_rows)
            .field("windows", &self.windows.len())
            .finish_non_exhaustive()
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn median(times: &VecDeque<u64>) -> Option<u64> {
    if times.len() < MIN_HISTORY {
        return None;
    }
    let mut sorted: Vec<u64> = times.iter().copied().collect();
    sorted.sort_unstable();
    Some(sorted[sorted.len() / 2])
}

fn remember(times: &mut VecDeque<u64>, value: u64) {
    if times.len() == MEDIAN_STEPS {
        times.pop_front();
    }
    times.push_back(value);
}

impl FlightRecorder {
    /// What the recorder holds, by collection (a streamed run's per-drain memory census).
    pub fn census(&self) -> [(&'static str, usize); 7] {
        [
            ("flight.ring", self.ring.len()),
            ("flight.waiting", self.waiting.len()),
            ("flight.held_rows", self.held_rows),
            ("flight.step_times", self.step_times.len()),
            ("flight.group_times", self.group_times.values().map(VecDeque::len).sum()),
            ("flight.windows", self.windows.len()),
            ("flight.ready", self.ready.len() + self.final_steps.len()),
        ]
    }

    /// An empty recorder.
    pub fn new(settings: FlightSettings) -> Self {
        Self {
            settings,
            ring: VecDeque::new(),
            waiting: HashMap::new(),
            between: StepDetail::default(),
            held_rows: 0,
            dropped_rows: 0,
            step_times: VecDeque::new(),
            group_times: HashMap::new(),
            open: None,
            requested: Vec::new(),
            windows: Vec::new(),
            last_trigger_step: None,
            suppressed: 0,
            suppressed_first: Vec::new(),
            ready: Vec::new(),
            final_steps: Vec::new(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &FlightSettings {
        &self.settings
    }

    /// Rows held now (bounded by [`FlightSettings::max_rows`]).
    pub fn held_rows(&self) -> usize {
        self.held_rows
    }

    /// Steps held in the ring now.
    pub fn ring_steps(&self) -> usize {
        self.ring.len()
    }

    /// Counts one more row held. Within a drain nothing is given up (a drain hands over its
    /// rows before the ranges that complete their steps, and the drain holds them anyway):
    /// past the bound rows are given up when the drain ends ([`FlightRecorder::end_drain`]).
    /// Always true.
    fn room(&mut self) -> bool {
        self.held_rows += 1;
        true
    }

    /// At the end of a drain: past the bound, the ring's oldest steps give up their rows, then
    /// the older half of the largest set of rows still waiting for a step goes, until the rows
    /// held are within the bound (so a run with no step, or one top-level range around
    /// everything, keeps its latest rows). Every row that goes is counted.
    pub fn end_drain(&mut self) {
        let max = self.settings.max_rows.max(1);
        while self.held_rows > max {
            if let Some(slot) = self.ring.iter_mut().find(|s| s.detail.rows() > 0) {
                let gone = slot.detail.rows();
                self.held_rows = self.held_rows.saturating_sub(gone);
                self.dropped_rows += gone as u64;
                slot.detail = StepDetail::default();
                slot.detail_dropped = true;
                continue;
            }
            let waiting = self.waiting.values_mut().chain(std::iter::once(&mut self.between));
            match waiting.max_by_key(|d| d.rows()) {
                Some(d) if d.rows() > 0 => {
                    let gone = d.drop_older_half().max(d.drop_all_if_single());
                    self.held_rows = self.held_rows.saturating_sub(gone);
                    self.dropped_rows += gone as u64;
                }
                _ => break,
            }
        }
    }

    fn bucket(&mut self, top: Option<RangeId>) -> &mut StepDetail {
        match top {
            Some(id) => self.waiting.entry(id).or_default(),
            None => &mut self.between,
        }
    }

    /// One kernel row; `top` is the top-level range it ran under (`None`: outside every
    /// range).
    pub fn kernel(&mut self, row: &KernelRow, top: Option<RangeId>) {
        if self.room() {
            self.bucket(top).kernels.push(row.clone());
        }
    }

    /// One transfer row; `top` as for [`FlightRecorder::kernel`].
    pub fn transfer(&mut self, row: &TransferRow, top: Option<RangeId>) {
        if self.room() {
            self.bucket(top).transfers.push(row.clone());
        }
    }

    /// One completed range instance (children before parents); `top` is its top-level
    /// ancestor, and `made` the step rows its completion made (the tracker makes two at once
    /// when the step group's first instance is found, none for anything but a step).
    pub fn range(&mut self, row: &RangeRow, top: Option<RangeId>, made: Vec<StepRow>) {
        let is_top = row.depth == 0 || row.range_id.is_none();
        if self.room() {
            let key = if is_top { row.range_id } else { top };
            self.bucket(key).ranges.push(row.clone());
        }
        if !is_top {
            return;
        }
        let mut detail = row.range_id.and_then(|id| self.waiting.remove(&id)).unwrap_or_default();
        if made.is_empty() {
            self.between.append(detail);
            return;
        }
        let last = made.len() - 1;
        for (i, step) in made.into_iter().enumerate() {
            let mut rows = std::mem::take(&mut self.between);
            if i == last {
                rows.append(std::mem::take(&mut detail));
            }
            self.step_done(Slot { step, detail: rows, detail_dropped: false });
        }
    }

    /// Asks for a window now (a signal, the capture socket, a CUDA error): it opens at the
    /// next step made, or at the run's end. `why` says who asked; a reason already waiting is
    /// not repeated (a sticky CUDA error fails every later call), and at most
    /// [`MAX_REQUESTS_KEPT`] wait.
    pub fn request(&mut self, why: impl Into<String>) {
        let why = why.into();
        if self.requested.len() < MAX_REQUESTS_KEPT && !self.requested.contains(&why) {
            self.requested.push(why);
        }
    }

    /// The triggers that `step` breaks.
    fn judge(&mut self, step: &StepRow) -> Vec<String> {
        let mut triggers: Vec<String> =
            self.requested.drain(..).map(|why| format!("asked for ({why}); opened at step {}", step.step)).collect();
        let time = |q: StepTime| match q {
            StepTime::Gpu => step.gpu_time_ns,
            StepTime::Wall => step.wall_time_ns,
        };
        if let Some((slow, t)) = self.settings.slow_step.and_then(|s| time(s.time).map(|t| (s, t))) {
            let rule = slow.rule;
            let m = median(&self.step_times);
            if rule.breaks(t, m) {
                let against = match (rule, m) {
                    (TriggerRule::TimesMedian(f), Some(m)) => {
                        format!("more than {f}x the running median of {} over {} steps", ms(m), self.step_times.len())
                    }
                    _ => format!(
                        "above {}",
                        ms(match rule {
                            TriggerRule::AboveNs(ns) => ns,
                            TriggerRule::TimesMedian(_) => 0,
                        })
                    ),
                };
                let (other, other_time) = match slow.time {
                    StepTime::Gpu => ("wall time", step.wall_time_ns),
                    StepTime::Wall => ("GPU time", step.gpu_time_ns),
                };
                triggers.push(format!(
                    "slow step: step {} took {} of {} time ({other} {}), {against}",
                    step.step,
                    ms(t),
                    if slow.time == StepTime::Gpu { "GPU" } else { "wall" },
                    other_time.map_or("unknown".to_owned(), ms),
                ));
            }
            remember(&mut self.step_times, t);
        }
        if let Some(rule) = self.settings.group_jump {
            for g in &step.groups {
                let Some(t) = g.gpu_time_ns else { continue };
                if !self.group_times.contains_key(&g.path) && self.group_times.len() >= MAX_JUDGED_GROUPS {
                    continue;
                }
                let times = self.group_times.entry(g.path.clone()).or_default();
                if let Some(m) = median(times) {
                    let jumped = t >= m.saturating_add(MIN_JUMP_NS)
                        && match rule {
                            TriggerRule::TimesMedian(_) => rule.breaks(t, Some(m)),
                            TriggerRule::AboveNs(ns) => t > m.saturating_add(ns),
                        };
                    if jumped {
                        triggers.push(format!(
                            "range group jump: `{}` took {} of GPU time in step {}, against a running median of {} \
                             (rule {rule})",
                            g.path,
                            ms(t),
                            step.step,
                            ms(m)
                        ));
                    }
                }
                remember(times, t);
            }
        }
        triggers
    }

    /// Whether a trigger at `step` may open a window; counts it when not.
    fn allowed(&mut self, step: Option<u64>, triggers: &[String]) -> bool {
        let why_not = if self.windows.len() as u64 >= u64::from(self.settings.max_windows) {
            Some(format!("the run has its {} windows already", self.settings.max_windows))
        } else {
            match (step, self.last_trigger_step) {
                (Some(s), Some(last)) if s.saturating_sub(last) < self.settings.min_gap_steps => Some(format!(
                    "{} steps after the last window's trigger (at least {} apart)",
                    s - last,
                    self.settings.min_gap_steps
                )),
                _ => None,
            }
        };
        match why_not {
            None => true,
            Some(why) => {
                self.suppressed += 1;
                if self.suppressed_first.len() < MAX_SUPPRESSED_KEPT {
                    self.suppressed_first.push(format!("{}: not written, {why}", triggers.join("; ")));
                }
                false
            }
        }
    }

    /// Opens a window on the ring, triggered at `step` (`None`: at the run's end).
    fn open_window(&mut self, step: Option<u64>, triggers: Vec<String>) {
        let number = self.windows.len() as u64;
        let mut window = FlightWindow {
            entry: WindowEntry {
                window: number,
                dir: format!("window-{number}"),
                trigger_step: step,
                triggers,
                ..WindowEntry::default()
            },
            ..FlightWindow::default()
        };
        for slot in std::mem::take(&mut self.ring) {
            add_to_window(&mut window, slot, &mut self.final_steps);
        }
        self.windows.push(window.entry.clone());
        self.last_trigger_step = step.or(self.last_trigger_step);
        self.open = Some(Open { window, after_left: self.settings.after_steps });
        if self.settings.after_steps == 0 {
            self.close_window(None);
        }
    }

    fn close_window(&mut self, ended_early: Option<String>) {
        if let Some(mut open) = self.open.take() {
            open.window.entry.ended_early = ended_early;
            if let Some(e) = self.windows.get_mut(open.window.entry.window as usize) {
                e.clone_from(&open.window.entry);
            }
            self.ready.push(open.window);
        }
    }

    fn step_done(&mut self, slot: Slot) {
        let triggers = self.judge(&slot.step);
        let step = slot.step.step;
        if let Some(open) = self.open.as_mut() {
            open.window.entry.triggers.extend(triggers.into_iter().map(|t| format!("while open: {t}")));
            add_to_window(&mut open.window, slot, &mut self.final_steps);
            open.after_left = open.after_left.saturating_sub(1);
            if open.after_left == 0 {
                self.close_window(None);
            }
            return;
        }
        self.ring.push_back(slot);
        while self.ring.len() > self.settings.ring_steps.max(1) as usize {
            if let Some(old) = self.ring.pop_front() {
                self.held_rows = self.held_rows.saturating_sub(old.detail.rows());
                self.final_steps.push(old.step);
            }
        }
        if !triggers.is_empty() && self.allowed(Some(step), &triggers) {
            self.open_window(Some(step), triggers);
        }
    }

    /// Windows complete since the last call. Their rows no longer count as held.
    pub fn take_windows(&mut self) -> Vec<FlightWindow> {
        let ready = std::mem::take(&mut self.ready);
        for w in &ready {
            self.held_rows = self.held_rows.saturating_sub(w.detail.rows());
        }
        ready
    }

    /// Step rows no later window can take, in order, each marked with its window (if any).
    pub fn take_final_steps(&mut self) -> Vec<StepRow> {
        std::mem::take(&mut self.final_steps)
    }

    /// Ends the run: a trigger asked for (or `ending`, a run ending abnormally) opens a last
    /// window on the ring; an open window closes with what it has; rows after the last
    /// step go into it; every step row left is handed out.
    pub fn finish(&mut self, ending: Option<String>) {
        let mut asked: Vec<String> = self.requested.drain(..).map(|why| format!("asked for ({why})")).collect();
        asked.extend(ending);
        if !asked.is_empty() {
            match self.open.as_mut() {
                Some(open) => open.window.entry.triggers.extend(asked.into_iter().map(|t| format!("while open: {t}"))),
                None => {
                    if self.allowed(None, &asked) {
                        self.open_window(None, asked);
                    }
                }
            }
        }
        let mut rest = std::mem::take(&mut self.between);
        for (_, d) in self.waiting.drain() {
            rest.append(d);
        }
        if let Some(open) = self.open.as_mut() {
            open.window.entry.kernels += rest.kernels.len() as u64;
            open.window.detail.append(rest);
            let (left, stepped) = (open.after_left, open.window.entry.trigger_step.is_some());
            let why = format!(
                "the run ended {left} step(s) short of the {} asked for after the trigger",
                self.settings.after_steps
            );
            self.close_window((left > 0 && stepped).then_some(why));
        }
        for slot in std::mem::take(&mut self.ring) {
            self.final_steps.push(slot.step);
        }
        self.held_rows = self.ready.iter().map(|w| w.detail.rows()).sum();
    }

    /// What the recorder did so far.
    pub fn summary(&self) -> FlightSummary {
        FlightSummary {
            settings: self.settings.describe(),
            windows: self.windows.clone(),
            suppressed: self.suppressed,
            suppressed_first: self.suppressed_first.clone(),
            dropped_rows: self.dropped_rows,
            errors: Vec::new(),
        }
    }
}

fn add_to_window(window: &mut FlightWindow, mut slot: Slot, final_steps: &mut Vec<StepRow>) {
    let e = &mut window.entry;
    slot.step.flight_window = Some(e.window);
    e.first_step.get_or_insert(slot.step.step);
    e.last_step = Some(slot.step.step);
    e.kernels += slot.detail.kernels.len() as u64;
    if slot.detail_dropped {
        e.steps_without_detail.push(slot.step.step);
    }
    window.detail.append(slot.detail);
    final_steps.push(slot.step.clone());
    window.steps.push(slot.step);
}
