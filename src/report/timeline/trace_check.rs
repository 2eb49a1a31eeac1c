//! A well-formedness checker for Chrome trace event JSON, gmprof's own
//! ([`Report::write_chrome_trace`](crate::Report::write_chrome_trace)) or any other tool's.
//!
//! Layer 3 (the safe profiler), next to the report outputs. [`check_trace_json`] reads the
//! text as a `serde_json::Value` (no gmprof types involved) and lists every [`Violation`]
//! it finds; `gmprof check-trace FILE` runs it from the command line. Bad input never
//! panics and never is an [`Error`]: it is a violation. Only failing to read the file is an
//! error ([`check_trace_file`]).
//!
//! # Rules
//!
//! 1. [`Rule::InvalidJson`]: the text does not parse as JSON, or is neither an array of
//!    events nor an object with a `traceEvents` array, or an element of that array is not
//!    a JSON object.
//! 2. [`Rule::MissingField`]: a required field is missing or has the wrong type. Every event
//!    needs `ph` (a string). Metadata events (`ph` `"M"`) need `pid` and `name`. Every
//!    other event needs `ts` (a number), `pid`, `tid` and `name` (a string), except that an
//!    end event (`"E"`) may leave out `name` (it takes the name of its begin event).
//!    Complete events (`"X"`) also need `dur` (a number). A `pid` or `tid` is an integer or
//!    a string. An event with a missing field takes no part in the rules below.
//! 3. [`Rule::NegativeDuration`]: a complete event has `dur` < 0.
//! 4. [`Rule::UnbalancedBeginEnd`]: on one track (pid, tid), in file order, an `"E"` with no
//!    open `"B"`, an `"E"` whose `name` differs from the `"B"` it closes, or a `"B"` that is
//!    never ended.
//! 5. [`Rule::ChildOutsideParent`]: a complete event of category `"range"` (or
//!    `"user_annotation"`, gmprof's ranges in the Kineto form, [`RANGE_CATEGORIES`]) whose
//!    `args.parent_id` names another range event (by its `args.range_id`) does not lie
//!    within that parent's `[ts, ts + dur]`. A parent that is not in the trace (gmprof
//!    leaves out ranges that never ended) is not checked.
//!
//!    [`Rule::PartialOverlap`]: two complete events of one track overlap without one
//!    containing the other (viewers can only draw nested slices on one track).
//! 6. [`Rule::TimestampBackwards`]: on one track, in file order, an event (other than
//!    metadata) starts before the event before it.
//! 7. [`Rule::KernelOutsideRange`]: a complete event of category `"kernel"` whose
//!    `args.range_id` names a range event was not launched inside that range.
//!
//!    - **Exact**, when the kernel carries `args.launch_ts` (a number, on the clock of `ts`:
//!      when the launch call was recorded; gmprof writes it where kernel positions are
//!      measured): the launch call lies inside the range,
//!      `range.ts - 1 µs <= launch_ts <= range.ts + range.dur + 1 µs`
//!      ([`CLOCK_GRANULARITY_US`]). How long the kernel then waited on the GPU does not
//!      matter: under per_kernel the range profiler's own GPU work between kernels made an
//!      llm.c kernel on an H100 start 2077 µs after the end of the range it was launched in,
//!      with its stream idle for more than 2 ms before it.
//!    - **Heuristic**, for traces without `launch_ts` (other tools', or gmprof's before it
//!      wrote one). Ranges are pushed and popped on the CPU, and kernels run asynchronously
//!      after their launch: a kernel may start well after its range was popped (the launch
//!      queue can hold many kernels), so it may start up to
//!      [`CheckOptions::launch_latency_allowance_us`] after the range's end, or later when
//!      its stream was backed up: the kernel before it on the same track ended at most the
//!      allowance before it started (a queue of tiny kernels under per_kernel's ranges ran
//!      12 ms behind the CPU on an H100). It can never start before its range was pushed,
//!      since it was launched inside the range; only [`CLOCK_GRANULARITY_US`] of clock
//!      granularity is allowed there. The rule is
//!      `range.ts - 1 µs <= kernel.ts <= range.ts + range.dur + allowance`, the upper bound
//!      waived for a backed-up stream. A correct trace can break it (a GPU that lags the CPU
//!      by more than the allowance while its stream's track shows gaps); that is what
//!      `launch_ts` settles. Kernels with synthetic placement (counter modes) are checked
//!      too: they are inside their range by construction.
//! 8. [`Rule::KernelBeforeLaunch`]: a kernel with `args.launch_ts` starts before its launch
//!    call was recorded, beyond [`CLOCK_GRANULARITY_US`]: `kernel.ts < launch_ts - 1 µs`. A
//!    kernel runs after the call that launched it, in a range or not.
//!
//! 9. [`Rule::StepTimeline`], for gmprof's whole-run step timeline of a streamed run
//!    ([`step_trace`](super::step_trace): slices of category `"step"` and `"step_group"`): a
//!    step slice whose steps (`args.step`, or `args.first_step` to `args.last_step` for a
//!    bucket) repeat or come before those of an earlier step slice in file order, or a group
//!    slice that does not lie within the step slice of its steps (`args.step` or
//!    `args.first_step`). Other traces have no such slices and are not affected.
//!
//! Containment and overlap comparisons allow [`ROUNDING_US`] for the rounding of
//! nanoseconds to floating-point microseconds.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The default of [`CheckOptions::launch_latency_allowance_us`]: 2 ms.
pub const DEFAULT_LAUNCH_LATENCY_ALLOWANCE_US: f64 = 2000.0;

/// How far a kernel may seem to start before its range was pushed: clock granularity, µs.
pub const CLOCK_GRANULARITY_US: f64 = 1.0;

/// Tolerance of containment and overlap comparisons, µs (1 ns).
pub const ROUNDING_US: f64 = 0.001;

/// What the checker tolerates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckOptions {
    /// How long after its range's end a kernel without `args.launch_ts` may start, µs (see
    /// rule 7 in the [module docs](self)).
    pub launch_latency_allowance_us: f64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self { launch_latency_allowance_us: DEFAULT_LAUNCH_LATENCY_ALLOWANCE_US }
    }
}

/// The rule a [`Violation`] breaks (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Not JSON, or not a list of event objects.
    InvalidJson,
    /// A required field is missing or of the wrong type.
    MissingField,
    /// A complete event with `dur` < 0.
    NegativeDuration,
    /// `"B"`/`"E"` events that do not pair up on their track.
    UnbalancedBeginEnd,
    /// A range outside its parent range.
    ChildOutsideParent,
    /// Complete events of one track that overlap without nesting.
    PartialOverlap,
    /// An event that starts before the previous event of its track.
    TimestampBackwards,
    /// A kernel that was not launched inside the range it names.
    KernelOutsideRange,
    /// A kernel that starts before its launch call.
    KernelBeforeLaunch,
    /// A step timeline's step slices out of order, or a group slice outside its step.
    StepTimeline,
}

impl Rule {
    /// The serialized name, e.g. `negative_duration`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::InvalidJson => "invalid_json",
            Rule::MissingField => "missing_field",
            Rule::NegativeDuration => "negative_duration",
            Rule::UnbalancedBeginEnd => "unbalanced_begin_end",
            Rule::ChildOutsideParent => "child_outside_parent",
            Rule::PartialOverlap => "partial_overlap",
            Rule::TimestampBackwards => "timestamp_backwards",
            Rule::KernelOutsideRange => "kernel_outside_range",
            Rule::KernelBeforeLaunch => "kernel_before_launch",
            Rule::StepTimeline => "step_timeline",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// Index of the offending event in the events array; `None` for the whole file.
    pub event_index: Option<usize>,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.event_index {
            Some(index) => write!(f, "{}: event {index}: {}", self.rule, self.message),
            None => write!(f, "{}: {}", self.rule, self.message),
        }
    }
}

/// The result of a check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// Elements of the events array (0 when there is none).
    pub events: usize,
    /// Every violation found, grouped by rule.
    pub violations: Vec<Violation>,
}

impl CheckReport {
    /// True when no rule is broken.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many violations of `rule` were found.
    pub fn count(&self, rule: Rule) -> usize {
        self.violations.iter().filter(|v| v.rule == rule).count()
    }

    fn push(&mut self, rule: Rule, event_index: Option<usize>, message: String) {
        self.violations.push(Violation { rule, event_index, message });
    }
}

/// An event with its required fields present.
struct Event<'a> {
    index: usize,
    ph: &'a str,
    name: Option<&'a str>,
    /// (pid, tid) as JSON text; tid is empty for metadata.
    track: (String, String),
    ts: f64,
    dur: Option<f64>,
    cat: Option<&'a str>,
    args: Option<&'a Map<String, Value>>,
}

impl Event<'_> {
    fn end(&self) -> f64 {
        self.ts + self.dur.unwrap_or(0.0)
    }

    fn arg_id(&self, key: &str) -> Option<String> {
        match self.args?.get(key)? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }

    fn arg_number(&self, key: &str) -> Option<f64> {
        self.args?.get(key)?.as_f64()
    }

    fn track_label(&self) -> String {
        format!("pid {}, tid {}", self.track.0, self.track.1)
    }

    fn label(&self) -> &str {
        self.name.unwrap_or("<unnamed>")
    }
}

fn track_id(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Value::String(s) => Some(format!("{s:?}")),
        _ => None,
    }
}

/// Rule 2: the event's fields, or the first missing one.
fn read_event<'a>(index: usize, object: &'a Map<String, Value>) -> std::result::Result<Event<'a>, String> {
    let ph = object.get("ph").and_then(Value::as_str).ok_or("no \"ph\" string")?;
    let name = object.get("name").and_then(Value::as_str);
    let pid = track_id(object.get("pid")).ok_or_else(|| format!("ph {ph:?}: no \"pid\" integer or string"))?;
    let cat = object.get("cat").and_then(Value::as_str);
    let args = object.get("args").and_then(Value::as_object);
    if ph == "M" {
        name.ok_or("ph \"M\": no \"name\" string")?;
        return Ok(Event { index, ph, name, track: (pid, String::new()), ts: 0.0, dur: None, cat, args });
    }
    if name.is_none() && ph != "E" {
        return Err(format!("ph {ph:?}: no \"name\" string"));
    }
    let ts = object.get("ts").and_then(Value::as_f64).ok_or_else(|| format!("ph {ph:?}: no \"ts\" number"))?;
    let tid = track_id(object.get("tid")).ok_or_else(|| format!("ph {ph:?}: no \"tid\" integer or string"))?;
    let dur = match object.get("dur") {
        Some(v) => Some(v.as_f64().ok_or_else(|| format!("ph {ph:?}: \"dur\" is not a number"))?),
        None if ph == "X" => return Err("ph \"X\": no \"dur\" number".to_owned()),
        None => None,
    };
    Ok(Event { index, ph, name, track: (pid, tid), ts, dur, cat, args })
}

/// Checks a Chrome trace's text against every rule of the [module docs](self).
pub fn check_trace_json(text: &str, opts: &CheckOptions) -> CheckReport {
    let mut report = CheckReport::default();
    let root: Value = match serde_json::from_str(text) {
        Ok(root) => root,
        Err(e) => {
            report.push(Rule::InvalidJson, None, format!("not JSON: {e}"));
            return report;
        }
    };
    let list = match &root {
        Value::Array(list) => list,
        Value::Object(map) => match map.get("traceEvents") {
            Some(Value::Array(list)) => list,
            Some(_) => {
                report.push(Rule::InvalidJson, None, "\"traceEvents\" is not an array".into());
                return report;
            }
            None => {
                report.push(Rule::InvalidJson, None, "no \"traceEvents\" array".into());
                return report;
            }
        },
        _ => {
            report.push(
                Rule::InvalidJson,
                None,
                "neither an array of events nor an object with \"traceEvents\"".into(),
            );
            return report;
        }
    };
    report.events = list.len();

    let mut events = Vec::with_capacity(list.len());
    for (index, value) in list.iter().enumerate() {
        match value.as_object() {
            None => report.push(Rule::InvalidJson, Some(index), "event is not a JSON object".into()),
            Some(object) => match read_event(index, object) {
                Ok(event) => events.push(event),
                Err(message) => report.push(Rule::MissingField, Some(index), message),
            },
        }
    }
    let timed: Vec<&Event> = events.iter().filter(|e| e.ph != "M").collect();

    check_durations(&timed, &mut report);
    check_begin_end(&timed, &mut report);
    let slices: Vec<&Event> =
        timed.iter().copied().filter(|e| e.ph == "X" && e.dur.is_some_and(|d| d >= 0.0)).collect();
    check_parents(&slices, &mut report);
    check_nesting(&slices, &mut report);
    check_order(&timed, &mut report);
    check_kernels(&slices, opts, &mut report);
    check_steps(&slices, &mut report);
    report.violations.sort_by_key(|v| (v.rule, v.event_index));
    report
}

/// Reads and checks a trace file. Only a file that cannot be read is an error; text that is
/// not UTF-8 is an [`Rule::InvalidJson`] violation.
pub fn check_trace_file(path: impl AsRef<Path>, opts: &CheckOptions) -> Result<CheckReport> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.to_owned(), source: e })?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(check_trace_json(&text, opts)),
        Err(e) => Ok(CheckReport {
            events: 0,
            violations: vec![Violation {
                rule: Rule::InvalidJson,
                event_index: None,
                message: format!("not UTF-8: {e}"),
            }],
        }),
    }
}

/// Rule 3.
fn check_durations(events: &[&Event], report: &mut CheckReport) {
    for e in events.iter().filter(|e| e.ph == "X") {
        if let Some(dur) = e.dur.filter(|d| *d < 0.0) {
            report.push(Rule::NegativeDuration, Some(e.index), format!("{:?} has dur {dur}", e.label()));
        }
    }
}

/// Rule 4.
fn check_begin_end(events: &[&Event], report: &mut CheckReport) {
    let mut open: HashMap<&(String, String), Vec<&Event>> = HashMap::new();
    for e in events {
        match e.ph {
            "B" => open.entry(&e.track).or_default().push(e),
            "E" => match open.get_mut(&e.track).and_then(Vec::pop) {
                None => report.push(
                    Rule::UnbalancedBeginEnd,
                    Some(e.index),
                    format!("end event {:?} on track ({}) has no open begin event", e.label(), e.track_label()),
                ),
                Some(begin) => {
                    if let Some(name) = e.name.filter(|n| Some(*n) != begin.name) {
                        report.push(
                            Rule::UnbalancedBeginEnd,
                            Some(e.index),
                            format!(
                                "end event {name:?} closes begin event {:?} (event {})",
                                begin.label(),
                                begin.index
                            ),
                        );
                    }
                }
            },
            _ => {}
        }
    }
    let mut never_ended: Vec<&Event> = open.into_values().flatten().collect();
    never_ended.sort_by_key(|e| e.index);
    for e in never_ended {
        report.push(Rule::UnbalancedBeginEnd, Some(e.index), format!("begin event {:?} is never ended", e.label()));
    }
}

/// The categories of range events: gmprof's own trace's, and the Kineto form's.
pub const RANGE_CATEGORIES: [&str; 2] = ["range", "user_annotation"];

fn is_range(e: &Event) -> bool {
    e.cat.is_some_and(|cat| RANGE_CATEGORIES.contains(&cat))
}

/// Range events by `args.range_id`; the first of a duplicated id wins.
fn ranges_by_id<'a, 'e>(slices: &[&'a Event<'e>]) -> HashMap<String, &'a Event<'e>> {
    let mut ranges = HashMap::new();
    for e in slices.iter().filter(|e| is_range(e)) {
        if let Some(id) = e.arg_id("range_id") {
            ranges.entry(id).or_insert(*e);
        }
    }
    ranges
}

/// Rule 5, parents.
fn check_parents(slices: &[&Event], report: &mut CheckReport) {
    let ranges = ranges_by_id(slices);
    for e in slices.iter().filter(|e| is_range(e)) {
        let Some(parent) = e.arg_id("parent_id").and_then(|id| ranges.get(&id)) else { continue };
        if e.ts < parent.ts - ROUNDING_US || e.end() > parent.end() + ROUNDING_US {
            report.push(
                Rule::ChildOutsideParent,
                Some(e.index),
                format!(
                    "range {:?} [{}, {}] is not inside its parent {:?} [{}, {}] (event {})",
                    e.label(),
                    e.ts,
                    e.end(),
                    parent.label(),
                    parent.ts,
                    parent.end(),
                    parent.index
                ),
            );
        }
    }
}

/// Rule 5, nesting on a track.
fn check_nesting(slices: &[&Event], report: &mut CheckReport) {
    let mut tracks: HashMap<&(String, String), Vec<&Event>> = HashMap::new();
    for e in slices {
        tracks.entry(&e.track).or_default().push(e);
    }
    let mut found = Vec::new();
    for mut track in tracks.into_values() {
        track.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(b.end().total_cmp(&a.end())).then(a.index.cmp(&b.index)));
        let mut stack: Vec<&Event> = Vec::new();
        for e in track {
            while stack.last().is_some_and(|top| top.end() <= e.ts + ROUNDING_US) {
                stack.pop();
            }
            if let Some(top) = stack.last().filter(|top| e.end() > top.end() + ROUNDING_US) {
                found.push((
                    e.index,
                    format!(
                        "{:?} [{}, {}] partly overlaps {:?} [{}, {}] (event {}) on track ({})",
                        e.label(),
                        e.ts,
                        e.end(),
                        top.label(),
                        top.ts,
                        top.end(),
                        top.index,
                        e.track_label()
                    ),
                ));
            }
            stack.push(e);
        }
    }
    for (index, message) in found {
        report.push(Rule::PartialOverlap, Some(index), message);
    }
}

/// Rule 6.
fn check_order(events: &[&Event], report: &mut CheckReport) {
    let mut last: HashMap<&(String, String), &Event> = HashMap::new();
    for e in events {
        if let Some(previous) = last.get(&e.track).filter(|p| e.ts < p.ts) {
            report.push(
                Rule::TimestampBackwards,
                Some(e.index),
                format!(
                    "{:?} at ts {} starts before {:?} at ts {} (event {}) on track ({})",
                    e.label(),
                    e.ts,
                    previous.label(),
                    previous.ts,
                    previous.index,
                    e.track_label()
                ),
            );
        }
        last.insert(&e.track, e);
    }
}

/// Rules 7 and 8.
fn check_kernels(slices: &[&Event], opts: &CheckOptions, report: &mut CheckReport) {
    let ranges = ranges_by_id(slices);
    let allowance = opts.launch_latency_allowance_us;
    // Each kernel's predecessor on its stream (track), by start: a queue that was never idle
    // for more than the allowance explains any lag behind the CPU.
    let mut by_track: HashMap<&(String, String), Vec<&Event>> = HashMap::new();
    for k in slices.iter().filter(|e| e.cat == Some("kernel")) {
        by_track.entry(&k.track).or_default().push(k);
    }
    let mut backlogged: HashMap<usize, bool> = HashMap::new();
    for kernels in by_track.values_mut() {
        kernels.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        for pair in kernels.windows(2) {
            backlogged.insert(pair[1].index, pair[0].end() + allowance >= pair[1].ts);
        }
    }
    for k in slices.iter().filter(|e| e.cat == Some("kernel")) {
        let launch = k.arg_number("launch_ts");
        if let Some(launch) = launch.filter(|l| k.ts < l - CLOCK_GRANULARITY_US) {
            report.push(
                Rule::KernelBeforeLaunch,
                Some(k.index),
                format!(
                    "kernel {:?} at ts {} starts {} µs before its launch call (launch_ts {launch})",
                    k.label(),
                    k.ts,
                    launch - k.ts
                ),
            );
        }
        let Some(range) = k.arg_id("range_id").and_then(|id| ranges.get(&id)) else { continue };
        let problem = match launch {
            Some(l) if l < range.ts - CLOCK_GRANULARITY_US => {
                format!("was launched at {l}, {} µs before its range was pushed", range.ts - l)
            }
            Some(l) if l > range.end() + CLOCK_GRANULARITY_US => {
                format!("was launched at {l}, {} µs after its range ended", l - range.end())
            }
            Some(_) => continue,
            None if k.ts < range.ts - CLOCK_GRANULARITY_US => {
                format!("starts {} µs before its range was pushed", range.ts - k.ts)
            }
            None if k.ts > range.end() + allowance && !backlogged.get(&k.index).copied().unwrap_or(false) => {
                format!("starts {} µs after its range ended (allowance {allowance} µs)", k.ts - range.end())
            }
            None => continue,
        };
        report.push(
            Rule::KernelOutsideRange,
            Some(k.index),
            format!(
                "kernel {:?} at ts {} {problem}: range {:?} [{}, {}] (event {})",
                k.label(),
                k.ts,
                range.label(),
                range.ts,
                range.end(),
                range.index
            ),
        );
    }
}

/// Rule 9: a step timeline's step slices in order, each group slice inside its step's slice.
fn check_steps(slices: &[&Event], report: &mut CheckReport) {
    let first = |e: &Event| e.arg_number("step").or_else(|| e.arg_number("first_step"));
    let mut steps: HashMap<u64, &Event> = HashMap::new();
    let mut last: Option<f64> = None;
    for e in slices.iter().copied().filter(|e| e.cat == Some("step")) {
        let Some(from) = first(e) else {
            report.push(Rule::StepTimeline, Some(e.index), format!("step slice '{}' names no step", e.label()));
            continue;
        };
        let to = e.arg_number("last_step").unwrap_or(from);
        if last.is_some_and(|l| from <= l) || to < from {
            report.push(
                Rule::StepTimeline,
                Some(e.index),
                format!("step slice '{}' (steps {from} to {to}) does not follow the step slice before it", e.label()),
            );
        }
        last = Some(last.map_or(to, |l| l.max(to)));
        steps.insert(from as u64, e);
    }
    for g in slices.iter().copied().filter(|e| e.cat == Some("step_group")) {
        let Some(step) = steps.get(&(first(g).unwrap_or(-1.0) as u64)) else {
            let what = first(g).map_or("no step".to_owned(), |s| format!("step {s}, which has no step slice"));
            report.push(Rule::StepTimeline, Some(g.index), format!("group slice '{}' names {what}", g.label()));
            continue;
        };
        if g.ts < step.ts - ROUNDING_US || g.end() > step.end() + ROUNDING_US {
            report.push(
                Rule::StepTimeline,
                Some(g.index),
                format!(
                    "group slice '{}' [{}, {}] is not within its step slice '{}' [{}, {}]",
                    g.label(),
                    g.ts,
                    g.end(),
                    step.label(),
                    step.ts,
                    step.end()
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_match_serde() {
        for rule in [
            Rule::InvalidJson,
            Rule::MissingField,
            Rule::NegativeDuration,
            Rule::UnbalancedBeginEnd,
            Rule::ChildOutsideParent,
            Rule::PartialOverlap,
            Rule::TimestampBackwards,
            Rule::KernelOutsideRange,
            Rule::KernelBeforeLaunch,
            Rule::StepTimeline,
        ] {
            assert_eq!(serde_json::to_value(rule).unwrap(), Value::String(rule.as_str().to_owned()));
        }
    }

    #[test]
    fn step_timelines_keep_steps_in_order_and_groups_inside_their_step() {
        let step = |n: u64, ts: f64| {
            serde_json::json!({"name": format!("step {n}"), "cat": "step", "ph": "X", "ts": ts, "dur": 10.0,
                               "pid": 1, "tid": 1, "args": {"step": n}})
        };
        let group = |n: u64, ts: f64, dur: f64| {
            serde_json::json!({"name": "step/fwd", "cat": "step_group", "ph": "X", "ts": ts, "dur": dur,
                               "pid": 1, "tid": 16, "args": {"step": n}})
        };
        let check = |events: Vec<Value>| {
            let text = serde_json::json!({ "traceEvents": events }).to_string();
            check_trace_json(&text, &CheckOptions::default()).count(Rule::StepTimeline)
        };
        assert_eq!(check(vec![step(0, 0.0), step(1, 10.0), group(0, 0.0, 10.0), group(1, 10.0, 4.0)]), 0);
        // A step repeated, a group past its step's end, a group of a step with no slice.
        assert_eq!(check(vec![step(0, 0.0), step(0, 10.0)]), 1);
        assert_eq!(check(vec![step(0, 0.0), group(0, 5.0, 6.0)]), 1);
        assert_eq!(check(vec![step(0, 0.0), group(3, 0.0, 1.0)]), 1);
        // Traces without step slices are not affected.
        assert_eq!(
            check(
                vec![group(0, 0.0, 1.0)]
                    .into_iter()
                    .map(|mut g| {
                        g["cat"] = "range".into();
                        g
                    })
                    .collect()
            ),
            0
        );
    }

    #[test]
    fn track_ids_tell_numbers_from_strings() {
        assert_eq!(track_id(Some(&serde_json::json!(7))), Some("7".to_owned()));
        assert_eq!(track_id(Some(&serde_json::json!("7"))), Some("\"7\"".to_owned()));
        assert_eq!(track_id(Some(&serde_json::json!(7.5))), None);
        assert_eq!(track_id(Some(&Value::Null)), None);
        assert_eq!(track_id(None), None);
    }

    #[test]
    fn deep_and_empty_input_does_not_panic() {
        let deep = "[".repeat(100_000);
        assert_eq!(check_trace_json(&deep, &CheckOptions::default()).count(Rule::InvalidJson), 1);
        assert_eq!(check_trace_json("", &CheckOptions::default()).count(Rule::InvalidJson), 1);
        let empty = check_trace_json(r#"{"traceEvents":[]}"#, &CheckOptions::default());
        assert!(empty.is_ok());
        assert_eq!(empty.events, 0);
    }
}
