//! The whole-run timeline of a streamed run (issue 42): its `trace.json` at step granularity,
//! read from the `steps/` and `step_ranges/` part files one record batch at a time, and the
//! index of the flight recorder's windows (`windows.json`).
//!
//! A streamed run's rows are in part files, not in memory, so its `trace.json` cannot hold
//! its kernels; it holds its steps instead, and stays bounded however long the run:
//!
//! - Process [`CPU_PID`] ("steps (whole run)"), thread [`STEPS_TID`] ("steps"): one complete
//!   event (category `"step"`) per step, `step N`, from the step's wall start to its end
//!   (`start_ns`, `end_ns` of `steps/`); args: the step, its path, wall and GPU time,
//!   kernels, transfers and its flight window.
//! - Thread [`COUNTER_TID`]: the counter `step time (ms)` (series `wall` and `gpu`), one sample
//!   per step slice.
//! - One thread per range group of `step_ranges/` (the first [`MAX_GROUP_TRACKS`] met; rows
//!   of later groups are counted in `otherData.group_rows_left_out`), from
//!   [`GROUP_TID_BASE`]: in each step, one slice (category `"step_group"`) from the step's
//!   start lasting the group's GPU time in the step (`step_ranges.gpu_time_ns`; cut at the
//!   step's end, with `args.cut`, when it is longer: several streams).
//! - Thread [`WINDOWS_TID`] ("flight windows"): one slice (category `"flight_window"`) per
//!   window of the flight recorder, over its steps, with `args.trace` the window's own
//!   full-detail `window-N/trace.json`; [`WINDOWS_JSON`] lists the same windows.
//!
//! Past `max_slices` steps ([`STEP_TRACE_MAX_SLICES`] by default) consecutive steps are
//! bucketed, `ceil(steps / max_slices)` per slice: a bucket is one slice `steps A..B` from
//! the first step's start to the last one's end, its args the mean, minimum and maximum of
//! its steps' times (a slow step is not averaged away), and a group's slice lasts its GPU time
//! in the bucket. The file then holds at most `max_slices` step slices and counter samples and
//! `max_slices` × [`MAX_GROUP_TRACKS`] group slices. Measured (`step_trace_tests`): a step
//! slice 213 bytes, a counter sample 112, a group slice 148; bucketed, a step slice 298 and a
//! group slice 265. So at most about `max_slices` × (0.41 KB + 0.27 KB per group track):
//! 82 MB at the default cap without group tracks, 0.5 GB with all 8 used in every bucket (a
//! run of two groups per step: 0.6 KB per slice, 125 MB). Its memory is one span (48 bytes) per
//! step slice, the group tracks' names and the windows.
//!
//! Slices of one track never overlap partially: a step that starts before the one before it
//! ended (steps on several threads) goes to the track's overlap lane (thread + [`OVERLAP_LANE`],
//! `steps · overlapped`); one that overlaps there too is left out and counted.
//!
//! `gmprof check-trace` checks it as any trace, and its rule 9 ([`Rule::StepTimeline`](super::trace_check::Rule::StepTimeline))
//! that step slices follow each other and each group slice lies within its step's.
//!
//! Imports the part reader of [`tables`](crate::report::tables) and the `Report` model only.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Value};

use super::events::{COUNTER_TID, CPU_PID};
use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::tables::csv::write_file;
use crate::report::tables::parquet::part_reader::read_parts;
use crate::report::tables::parquet::read::Columns;

/// Step slices a whole-run timeline holds at most by default; past it steps are bucketed.
pub const STEP_TRACE_MAX_SLICES: u64 = 50_000;

/// Range groups of `step_ranges/` that get a track.
pub const MAX_GROUP_TRACKS: usize = 8;

/// The index of the flight recorder's windows, beside `trace.json`.
pub const WINDOWS_JSON: &str = "windows.json";

/// Thread of the step slices.
pub const STEPS_TID: u64 = 1;

/// Thread of the flight windows' slices.
pub const WINDOWS_TID: u64 = 2;

/// Thread of the first range group's track.
pub const GROUP_TID_BASE: u64 = 16;

/// A track's overlap lane is its thread + this.
pub const OVERLAP_LANE: u64 = 1 << 20;

/// What [`Report::write_step_trace`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepTraceWritten {
    /// Step rows read from `steps/`.
    pub steps: u64,
    /// Steps per slice (1 below the cap).
    pub steps_per_slice: u64,
    /// Step slices written.
    pub step_slices: u64,
    /// Group slices written.
    pub group_slices: u64,
    /// Flight windows marked.
    pub windows: u64,
    /// Part files that could not be read, each `TABLE/part-NNNNN.parquet: why`.
    pub parts_left_out: Vec<String>,
}

#[derive(Serialize)]
struct Event<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u64,
    tid: u64,
    args: Value,
}

/// Mean, minimum and maximum of some values.
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    n: u64,
    sum: u64,
    min: u64,
    max: u64,
}

impl Stat {
    fn add(&mut self, v: u64) {
        self.min = if self.n == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.sum = self.sum.saturating_add(v);
        self.n += 1;
    }

    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    fn json(&self) -> Value {
        match self.mean() {
            Some(mean) => json!({"mean": mean, "min": self.min, "max": self.max}),
            None => Value::Null,
        }
    }
}

/// The last end of a track's lane and of its overlap lane, ns.
#[derive(Clone, Copy, Debug, Default)]
struct Lanes([Option<u64>; 2]);

impl Lanes {
    /// The thread offset of the lane `[start, end]` fits on, or none.
    fn place(&mut self, start: u64, end: u64) -> Option<u64> {
        for (i, last) in self.0.iter_mut().enumerate() {
            if last.is_none_or(|l| start >= l) {
                *last = Some(end);
                return Some(i as u64 * OVERLAP_LANE);
            }
        }
        None
    }

    /// Whether a slice went to the overlap lane.
    fn overlapped(&self) -> bool {
        self.0[1].is_some()
    }
}

/// Consecutive steps becoming one slice.
#[derive(Debug, Default)]
struct Bucket {
    first_step: u64,
    last_step: u64,
    steps: u64,
    path: String,
    start: Option<u64>,
    end: Option<u64>,
    wall: Stat,
    gpu: Stat,
    kernels: Stat,
    transfers: u64,
    flight_window: Option<u64>,
}

/// A step slice's steps and times, kept to place its groups.
#[derive(Clone, Copy, Debug)]
struct Span {
    first_step: u64,
    last_step: u64,
    start: Option<u64>,
    end: Option<u64>,
}

/// A group's GPU time in the current slice.
#[derive(Clone, Copy, Debug, Default)]
struct GroupAcc {
    gpu: Stat,
    count: u64,
}

struct Builder<'w, W: Write> {
    out: &'w mut W,
    path: &'w Path,
    events: u64,
    origin: u64,
    per_slice: u64,
    row: u64,
    bucket: Option<Bucket>,
    spans: Vec<Span>,
    ordered: bool,
    step_lanes: Lanes,
    last_counter: Option<u64>,
    windows: BTreeMap<u64, (Option<u64>, Option<u64>)>,
    groups: HashMap<String, usize>,
    group_names: Vec<String>,
    group_lanes: Vec<Lanes>,
    group_span: Option<usize>,
    group_acc: Vec<GroupAcc>,
    written: StepTraceWritten,
    steps_without_times: u64,
    group_rows_left_out: u64,
    group_rows_without_step: u64,
    overlapping_left_out: u64,
    run_end: Option<u64>,
}

fn micros(ns: u64, origin: u64) -> f64 {
    ns.saturating_sub(origin) as f64 / 1000.0
}

fn int(v: Option<i64>) -> Option<u64> {
    v.and_then(|v| u64::try_from(v).ok())
}

impl<W: Write> Builder<'_, W> {
    fn event(&mut self, e: &Event) -> Result<()> {
        if self.events > 0 {
            self.out.write_all(b",").map_err(|e| Error::io(self.path, e))?;
        }
        serde_json::to_writer(&mut *self.out, e)
            .map_err(|e| Error::Serialize { what: "step timeline", message: e.to_string() })?;
        self.events += 1;
        Ok(())
    }

    fn metadata(&mut self, name: &str, tid: u64, args: Value) -> Result<()> {
        self.event(&Event { name, cat: None, ph: "M", ts: None, dur: None, pid: CPU_PID, tid, args })
    }

    /// One `steps/` batch: `step`, `path`, `start_ns`, `end_ns`, `wall_time_ns`,
    /// `gpu_time_ns`, `kernels`, `transfers`, `flight_window`.
    fn step_batch(&mut self, b: &Columns) -> Result<()> {
        for r in 0..b.len() {
            let step = int(b.int(0, r)?).unwrap_or(0);
            let (start, end) = (int(b.int(2, r)?), int(b.int(3, r)?));
            if self.bucket.is_some() && self.row % self.per_slice == 0 {
                self.end_bucket()?;
            }
            if self.bucket.is_none() {
                let path = b.text(1, r)?.unwrap_or("").to_owned();
                self.bucket = Some(Bucket { first_step: step, path, ..Bucket::default() });
            }
            let Some(bucket) = self.bucket.as_mut() else { continue };
            bucket.last_step = step;
            bucket.steps += 1;
            match (start, end) {
                (Some(s), Some(e)) => {
                    let e = e.max(s);
                    bucket.start = Some(bucket.start.map_or(s, |b| b.min(s)));
                    bucket.end = Some(bucket.end.map_or(e, |b| b.max(e)));
                    self.run_end = Some(self.run_end.map_or(e, |b| b.max(e)));
                }
                _ => self.steps_without_times += 1,
            }
            if let Some(w) = int(b.int(4, r)?) {
                bucket.wall.add(w);
            }
            if let Some(g) = int(b.int(5, r)?) {
                bucket.gpu.add(g);
            }
            bucket.kernels.add(int(b.int(6, r)?).unwrap_or(0));
            bucket.transfers += int(b.int(7, r)?).unwrap_or(0);
            bucket.flight_window = int(b.int(8, r)?);
            if let (Some(w), Some(s), Some(e)) = (bucket.flight_window, start, end) {
                let span = self.windows.entry(w).or_insert((None, None));
                span.0 = Some(span.0.map_or(s, |b| b.min(s)));
                span.1 = Some(span.1.map_or(e, |b| b.max(e.max(s))));
            }
            self.row += 1;
        }
        Ok(())
    }

    fn end_bucket(&mut self) -> Result<()> {
        let Some(b) = self.bucket.take() else { return Ok(()) };
        if let Some(last) = self.spans.last() {
            self.ordered &= b.first_step > last.last_step;
        }
        self.ordered &= b.first_step <= b.last_step;
        self.spans.push(Span { first_step: b.first_step, last_step: b.last_step, start: b.start, end: b.end });
        let (Some(start), Some(end)) = (b.start, b.end) else { return Ok(()) };
        let (name, args) = if b.steps == 1 {
            (
                format!("step {}", b.first_step),
                json!({
                    "step": b.first_step, "path": b.path, "wall_time_ns": b.wall.mean().map(|_| b.wall.sum),
                    "gpu_time_ns": b.gpu.mean().map(|_| b.gpu.sum), "kernels": b.kernels.sum,
                    "transfers": b.transfers, "flight_window": b.flight_window,
                }),
            )
        } else {
            (
                format!("steps {}..{}", b.first_step, b.last_step),
                json!({
                    "first_step": b.first_step, "last_step": b.last_step, "steps": b.steps,
                    "wall_time_ns": b.wall.json(), "gpu_time_ns": b.gpu.json(), "kernels": b.kernels.sum,
                    "transfers": b.transfers,
                }),
            )
        };
        let (ts, dur) = (micros(start, self.origin), (end - start) as f64 / 1000.0);
        match self.step_lanes.place(start, end) {
            Some(lane) => {
                let tid = STEPS_TID + lane;
                self.event(&Event {
                    name: &name,
                    cat: Some("step"),
                    ph: "X",
                    ts: Some(ts),
                    dur: Some(dur),
                    pid: CPU_PID,
                    tid,
                    args,
                })?;
                self.written.step_slices += 1;
            }
            None => self.overlapping_left_out += 1,
        }
        if self.last_counter.is_none_or(|l| start >= l) {
            self.last_counter = Some(start);
            let mut values = serde_json::Map::new();
            if let Some(w) = b.wall.mean() {
                values.insert("wall".into(), json!(w / 1e6));
            }
            if let Some(g) = b.gpu.mean() {
                values.insert("gpu".into(), json!(g / 1e6));
            }
            if !values.is_empty() {
                let args = Value::Object(values);
                let e = Event {
                    name: "step time (ms)",
                    cat: Some("step"),
                    ph: "C",
                    ts: Some(ts),
                    dur: None,
                    pid: CPU_PID,
                    tid: COUNTER_TID,
                    args,
                };
                self.event(&e)?;
            }
        }
        Ok(())
    }

    /// The slice of `self.spans` that holds `step`.
    fn span_of(&self, step: u64) -> Option<usize> {
        if !self.ordered {
            return self.spans.iter().position(|s| s.first_step <= step && step <= s.last_step);
        }
        let i = self.spans.partition_point(|s| s.first_step <= step).checked_sub(1)?;
        (step <= self.spans[i].last_step).then_some(i)
    }

    /// One `step_ranges/` batch: `step`, `path`, `count`, `gpu_time_ns`.
    fn group_batch(&mut self, b: &Columns) -> Result<()> {
        for r in 0..b.len() {
            let Some(span) = int(b.int(0, r)?).and_then(|s| self.span_of(s)) else {
                self.group_rows_without_step += 1;
                continue;
            };
            if self.group_span != Some(span) {
                self.end_groups()?;
                self.group_span = Some(span);
            }
            let path = b.text(1, r)?.unwrap_or("");
            let group = match self.groups.get(path) {
                Some(&g) => g,
                None if self.group_names.len() < MAX_GROUP_TRACKS => {
                    let g = self.group_names.len();
                    self.groups.insert(path.to_owned(), g);
                    self.group_names.push(path.to_owned());
                    self.group_lanes.push(Lanes::default());
                    self.group_acc.push(GroupAcc::default());
                    g
                }
                None => {
                    self.group_rows_left_out += 1;
                    continue;
                }
            };
            let acc = &mut self.group_acc[group];
            acc.count += int(b.int(2, r)?).unwrap_or(0);
            if let Some(g) = int(b.int(3, r)?) {
                acc.gpu.add(g);
            }
        }
        Ok(())
    }

    fn end_groups(&mut self) -> Result<()> {
        let Some(span) = self.group_span.take().map(|i| self.spans[i]) else { return Ok(()) };
        let accs = std::mem::replace(&mut self.group_acc, vec![GroupAcc::default(); self.group_names.len()]);
        let (Some(start), Some(end)) = (span.start, span.end) else { return Ok(()) };
        for (g, acc) in accs.iter().enumerate() {
            if acc.gpu.n == 0 {
                continue;
            }
            let total = acc.gpu.sum;
            let drawn = total.min(end - start);
            let mut args = if span.first_step == span.last_step {
                json!({"step": span.first_step, "gpu_time_ns": total, "count": acc.count})
            } else {
                json!({"first_step": span.first_step, "last_step": span.last_step, "gpu_time_ns": total,
                       "per_step_gpu_time_ns": acc.gpu.json(), "steps_with_group": acc.gpu.n, "count": acc.count})
            };
            if drawn < total {
                args["cut"] = json!("longer than its step: GPU time on several streams; drawn to the step's end");
            }
            let Some(lane) = self.group_lanes[g].place(start, start + drawn) else {
                self.overlapping_left_out += 1;
                continue;
            };
            let name = self.group_names[g].clone();
            let (ts, dur) = (micros(start, self.origin), drawn as f64 / 1000.0);
            let tid = GROUP_TID_BASE + g as u64 + lane;
            self.event(&Event {
                name: &name,
                cat: Some("step_group"),
                ph: "X",
                ts: Some(ts),
                dur: Some(dur),
                pid: CPU_PID,
                tid,
                args,
            })?;
            self.written.group_slices += 1;
        }
        Ok(())
    }
}

impl Report {
    /// Writes the whole-run step timeline of a streamed run whose part files are in `dir` as
    /// `dir/trace.json` (see the [module docs](self)), and [`WINDOWS_JSON`] when it had a
    /// flight recorder; at most [`STEP_TRACE_MAX_SLICES`] step slices.
    pub fn write_step_trace(&self, dir: &Path) -> Result<StepTraceWritten> {
        self.write_step_trace_with(dir, STEP_TRACE_MAX_SLICES)
    }

    /// [`Report::write_step_trace`] with at most `max_slices` step slices (at least 1).
    pub fn write_step_trace_with(&self, dir: &Path, max_slices: u64) -> Result<StepTraceWritten> {
        // First pass: how many steps, and the earliest start (the origin).
        let (mut steps, mut origin) = (0u64, None::<u64>);
        read_parts(dir, "steps", &["start_ns"], |b| {
            for r in 0..b.len() {
                steps += 1;
                if let Some(s) = int(b.int(0, r)?) {
                    origin = Some(origin.map_or(s, |o| o.min(s)));
                }
            }
            Ok(())
        })?;
        let per_slice = steps.div_ceil(max_slices.max(1)).max(1);
        let path = dir.join("trace.json");
        let mut written = None;
        write_file(&path, |out| {
            out.write_all(b"{\"traceEvents\":[").map_err(|e| Error::io(&path, e))?;
            let mut b = Builder {
                out,
                path: &path,
                events: 0,
                origin: origin.unwrap_or(0),
                per_slice,
                row: 0,
                bucket: None,
                spans: Vec::new(),
                ordered: true,
                step_lanes: Lanes::default(),
                last_counter: None,
                windows: BTreeMap::new(),
                groups: HashMap::new(),
                group_names: Vec::new(),
                group_lanes: Vec::new(),
                group_span: None,
                group_acc: Vec::new(),
                written: StepTraceWritten { steps_per_slice: per_slice, ..Default::default() },
                steps_without_times: 0,
                group_rows_left_out: 0,
                group_rows_without_step: 0,
                overlapping_left_out: 0,
                run_end: None,
            };
            b.metadata("process_name", 0, json!({"name": "steps (whole run)"}))?;
            let columns = [
                "step",
                "path",
                "start_ns",
                "end_ns",
                "wall_time_ns",
                "gpu_time_ns",
                "kernels",
                "transfers",
                "flight_window",
            ];
            let read = read_parts(dir, "steps", &columns, |batch| b.step_batch(batch))?;
            b.end_bucket()?;
            b.written.steps = read.rows;
            // The first pass read the same parts: their failures are these.
            let mut left_out = read.skipped;
            let read = read_parts(dir, "step_ranges", &["step", "path", "count", "gpu_time_ns"], |batch| {
                b.group_batch(batch)
            })?;
            b.end_groups()?;
            left_out.extend(read.skipped);
            let index = self.window_slices(&mut b, dir)?;
            b.metadata("thread_name", STEPS_TID, json!({"name": "steps"}))?;
            if b.step_lanes.overlapped() {
                b.metadata("thread_name", STEPS_TID + OVERLAP_LANE, json!({"name": "steps · overlapped"}))?;
            }
            b.metadata("thread_name", COUNTER_TID, json!({"name": "step time"}))?;
            if !index.is_empty() {
                b.metadata("thread_name", WINDOWS_TID, json!({"name": "flight windows"}))?;
            }
            for (g, name) in b.group_names.clone().iter().enumerate() {
                let tid = GROUP_TID_BASE + g as u64;
                b.metadata("thread_name", tid, json!({"name": name}))?;
                if b.group_lanes[g].overlapped() {
                    b.metadata("thread_name", tid + OVERLAP_LANE, json!({"name": format!("{name} · overlapped")}))?;
                }
            }
            b.written.parts_left_out = left_out;
            let streamed = self.streamed.as_ref().map_or(0, |s| s.steps);
            let warning = (streamed != b.written.steps).then(|| {
                format!(
                    "the run streamed {streamed} step rows but {} holds {}: its parts are where the run streamed \
                     them, or some could not be read (parts_left_out)",
                    dir.join("steps").display(),
                    b.written.steps
                )
            });
            let other = json!({
                "gmprof_version": self.meta.gmprof_version,
                "mode": self.meta.mode,
                "timeline": "steps",
                "note": "a streamed run's whole-run timeline at step granularity, from steps/ and step_ranges/; \
                         its kernels are in kernels/ and in each flight window's own trace.json",
                "origin_cupti_ns": b.origin,
                "origin_unix_ns": self.meta.clock.map(|c| c.to_unix_ns(b.origin)),
                "step_group": self.streamed.as_ref().and_then(|s| s.step_group.clone()),
                "steps": b.written.steps,
                "steps_streamed": streamed,
                "warning": warning,
                "steps_per_slice": per_slice,
                "max_slices": max_slices,
                "step_slices": b.written.step_slices,
                "group_slices": b.written.group_slices,
                "group_tracks": b.group_names,
                "group_rows_left_out": b.group_rows_left_out,
                "group_rows_without_step": b.group_rows_without_step,
                "steps_without_times": b.steps_without_times,
                "slices_left_out_overlapping": b.overlapping_left_out,
                "parts_left_out": b.written.parts_left_out,
                "windows_index": (!index.is_empty()).then_some(WINDOWS_JSON),
            });
            write!(b.out, "],\"displayTimeUnit\":\"ns\",\"otherData\":").map_err(|e| Error::io(&path, e))?;
            serde_json::to_writer(&mut *b.out, &other)
                .map_err(|e| Error::Serialize { what: "step timeline", message: e.to_string() })?;
            b.out.write_all(b"}\n").map_err(|e| Error::io(&path, e))?;
            written = Some((b.written.clone(), index));
            Ok(())
        })?;
        let (written, index) = written.unwrap_or_default();
        if self.streamed.as_ref().is_some_and(|s| s.flight.is_some()) {
            let index_path = dir.join(WINDOWS_JSON);
            let text = serde_json::to_string_pretty(&json!({"timeline": "trace.json", "windows": index}))
                .map_err(|e| Error::Serialize { what: WINDOWS_JSON, message: e.to_string() })?;
            write_file(&index_path, |out| out.write_all(text.as_bytes()).map_err(|e| Error::io(&index_path, e)))?;
        }
        Ok(written)
    }

    /// The flight windows' slices, in the order of their start, and their index entries.
    fn window_slices<W: Write>(&self, b: &mut Builder<'_, W>, dir: &Path) -> Result<Vec<Value>> {
        let Some(flight) = self.streamed.as_ref().and_then(|s| s.flight.as_ref()) else { return Ok(Vec::new()) };
        let run_end = b.run_end.unwrap_or(b.origin);
        let mut placed: Vec<(u64, u64, Value)> = Vec::new();
        for w in &flight.windows {
            let trace = format!("{}/trace.json", w.dir);
            let (start, end) = match b.windows.get(&w.window) {
                Some(&(Some(s), Some(e))) => (s, e),
                _ => (run_end, run_end),
            };
            let entry = json!({
                "window": w.window, "dir": w.dir, "trace": trace, "trace_written": dir.join(&trace).is_file(),
                "trigger_step": w.trigger_step, "first_step": w.first_step, "last_step": w.last_step,
                "why": w.triggers, "kernels": w.kernels, "start_ns": start, "end_ns": end,
                "ts_us": micros(start, b.origin),
            });
            placed.push((start, end, entry));
        }
        placed.sort_by_key(|p| (p.0, p.1));
        let mut lanes = Lanes::default();
        for (start, end, entry) in &placed {
            let Some(lane) = lanes.place(*start, *end) else {
                b.overlapping_left_out += 1;
                continue;
            };
            let name = entry["dir"].as_str().unwrap_or("window").to_owned();
            let (ts, dur) = (micros(*start, b.origin), (end - start) as f64 / 1000.0);
            let tid = WINDOWS_TID + lane;
            b.event(&Event {
                name: &name,
                cat: Some("flight_window"),
                ph: "X",
                ts: Some(ts),
                dur: Some(dur),
                pid: CPU_PID,
                tid,
                args: entry.clone(),
            })?;
            b.written.windows += 1;
        }
        Ok(placed.into_iter().map(|p| p.2).collect())
    }
}
