//! The streamed outputs of one run: [`StreamWriter`] takes rows as they complete, writes them
//! to part files (`kernels/`, `transfers/`, `ranges/`, `steps/`, `step_ranges/`,
//! `aggregates/`, see [`parts`](crate::report::tables::parquet::parts)) and folds them into
//! the [`OnlineAggregates`]; it holds no row once written.
//!
//! With a flight recorder ([`StreamSettings::flight`]) it also feeds the
//! [`FlightRecorder`], hands out its windows as they complete ([`StreamWriter::take_window_jobs`]:
//! the caller writes them, out of the session's lock; the finish writes those left), and
//! writes each step row once the recorder has marked it (so `steps/` lags the run by the
//! ring's steps).
//!
//! Its memory is bounded by its settings: one open segment per table (a row group of
//! [`SegmentPolicy::row_group`] rows at most), the online aggregates'
//! ([`OnlineSettings`]) and the flight recorder's ([`FlightSettings`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::flight::WindowJob;
use super::pm::{PmKernelRows, PmStream};
use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{KernelRow, TransferRow};
use crate::analysis::online::{
    AggregateRow, FlightRecorder, FlightSettings, FlightSummary, OnlineAggregates, OnlineSettings, StepRow,
};
use crate::error::{Error, Result};
use crate::model::{ProfilingMode, RangeId};
use crate::report::live::{DrainSums, LiveFeed};
use crate::report::model::Report;
use crate::report::tables::parquet::parts::{PartWriter, PartsWritten, SegmentPolicy};
use crate::report::tables::parquet::rows::{
    kernel_columns, push_kernel, push_range, push_transfer, range_columns, transfer_columns,
};
use crate::report::tables::parquet::streamed::{
    aggregate_columns, push_aggregate, push_step, push_step_range, step_columns, step_range_columns,
};
use crate::report::tables::parquet::{KEY_META, KEY_TABLE};
use crate::report::timeline::kineto::TraceOptions;

/// Directory names of the streamed tables.
pub const STREAMED_TABLES: [&str; 6] = ["kernels", "transfers", "ranges", "steps", "step_ranges", "aggregates"];

/// Step rows [`StreamWritten::steps_table`] keeps for `report.json` (without their range
/// groups); later steps are in `steps/` only, and counted.
pub const MAX_REPORT_STEPS: usize = 100_000;

/// Drains between two releases of the allocator's free pages by default: a release after
/// every drain put about a fifth of the stream benchmark's drain time in page faults, while
/// the creep it stops is slow.
pub const DEFAULT_RELEASE_EVERY: u64 = 8;

/// How a run streams.
#[derive(Clone, Debug)]
pub struct StreamSettings {
    /// When segments close.
    pub segment: SegmentPolicy,
    /// What the online aggregates keep.
    pub online: OnlineSettings,
    /// The flight recorder, when one is asked for (`--slow-step`, `GMPROF_SLOW_STEP`).
    pub flight: Option<FlightSettings>,
    /// Whether the stream thread gives the allocator's free pages back after each drain
    /// ([`super::release_free_memory`]; on by default, `GMPROF_STREAM_TRIM=0` turns it off).
    pub release_memory: bool,
    /// Drains between two such releases (`GMPROF_STREAM_TRIM_EVERY`, default
    /// [`DEFAULT_RELEASE_EVERY`]).
    pub release_every: u64,
    /// The live metrics this run's drains feed (`--metrics-port`, `--otlp`), when they are
    /// exported; the run then streams from its start.
    pub live: Option<LiveFeed>,
    /// The form of the flight recorder's windows' `trace.json` (`--trace-format`): a window
    /// holds every row of its steps, so it can be a Kineto trace, unlike the whole run's
    /// step timeline.
    pub window_trace: TraceOptions,
    /// Which kernels get rows in `pm/` when the run samples PM (`GMPROF_PM_KERNEL_ROWS`).
    pub pm_kernel_rows: PmKernelRows,
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self {
            segment: SegmentPolicy::default(),
            online: OnlineSettings::default(),
            flight: None,
            release_memory: true,
            release_every: DEFAULT_RELEASE_EVERY,
            live: None,
            window_trace: TraceOptions::default(),
            pm_kernel_rows: PmKernelRows::default(),
        }
    }
}

/// What the part files' `gmprof.meta` says of the run (known when it starts).
#[derive(Clone, Debug, Serialize)]
pub struct StreamMeta {
    /// The profiling mode.
    pub mode: ProfilingMode,
    /// Metric columns, in order.
    pub metrics: Vec<String>,
    /// The gmprof version.
    pub gmprof_version: String,
}

impl StreamMeta {
    /// The meta of a run in `mode` collecting `metrics`.
    pub fn new(mode: ProfilingMode, metrics: Vec<String>) -> Self {
        Self { mode, metrics, gmprof_version: env!("CARGO_PKG_VERSION").to_owned() }
    }
}

/// What a [`StreamWriter`] wrote, table by table, and the whole run's aggregates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamWritten {
    /// Each table's directory name and its parts.
    pub tables: Vec<(&'static str, PartsWritten)>,
    /// The whole run's aggregate rows.
    pub aggregates: Vec<AggregateRow>,
    /// Step rows written.
    pub steps: u64,
    /// The step group, when one was found.
    pub step_group: Option<String>,
    /// The first [`MAX_REPORT_STEPS`] step rows, without their range groups.
    pub steps_table: Vec<StepRow>,
    /// Step rows beyond those (in `steps/` only).
    pub steps_table_left_out: u64,
    /// What the flight recorder did, when there was one.
    pub flight: Option<FlightSummary>,
}

impl StreamWritten {
    /// The parts of table `name`.
    pub fn table(&self, name: &str) -> Option<&PartsWritten> {
        self.tables.iter().find(|(n, _)| *n == name).map(|(_, p)| p)
    }
}

/// The streamed outputs of one run; see the [module docs](self).
#[derive(Debug)]
pub struct StreamWriter {
    dir: PathBuf,
    /// Every part's `gmprof.meta`, and the segment policy (for the PM tables, [`super::pm`]).
    meta_json: String,
    policy: SegmentPolicy,
    metrics: usize,
    kernels: PartWriter,
    transfers: PartWriter,
    ranges: PartWriter,
    steps: PartWriter,
    step_ranges: PartWriter,
    aggregates: PartWriter,
    online: OnlineAggregates,
    steps_written: u64,
    steps_table: Vec<StepRow>,
    flight: Option<Flight>,
    /// PM sampling's tables, when the run samples ([`StreamWriter::set_pm`]).
    pm: Option<PmStream>,
    /// Which kernels get rows in `pm/`.
    pm_kernel_rows: PmKernelRows,
    /// The live metrics, when exported: the drain's sums, handed to the feed at its end.
    live: Option<(LiveFeed, DrainSums)>,
}

/// The flight recorder, the report its windows' tables start from, and the windows that
/// could not be written.
#[derive(Debug)]
struct Flight {
    recorder: FlightRecorder,
    template: Option<Box<Report>>,
    /// The form of its windows' `trace.json`.
    trace: TraceOptions,
    errors: Vec<String>,
    /// Complete windows not handed out yet.
    jobs: Vec<WindowJob>,
}

impl StreamWriter {
    /// Opens the streamed tables under `dir` (part files of an earlier run there are
    /// removed).
    pub fn create(dir: &Path, meta: &StreamMeta, settings: StreamSettings) -> Result<Self> {
        let meta_json = serde_json::to_string(meta)
            .map_err(|e| Error::Serialize { what: "streamed tables' metadata", message: e.to_string() })?;
        let names: Vec<&str> = meta.metrics.iter().map(String::as_str).collect();
        let policy = settings.segment;
        let open = |table: &'static str, what: &'static str, columns| {
            let metadata = vec![(KEY_TABLE.to_owned(), table.to_owned()), (KEY_META.to_owned(), meta_json.clone())];
            PartWriter::create(&dir.join(table), what, columns, metadata, policy)
        };
        Ok(Self {
            dir: dir.to_owned(),
            meta_json: meta_json.clone(),
            policy,
            metrics: names.len(),
            kernels: open("kernels", "streamed kernels", kernel_columns(&names))?,
            transfers: open("transfers", "streamed transfers", transfer_columns())?,
            ranges: open("ranges", "streamed ranges", range_columns(&names))?,
            steps: open("steps", "streamed steps", step_columns())?,
            step_ranges: open("step_ranges", "streamed step ranges", step_range_columns())?,
            aggregates: open("aggregates", "streamed aggregates", aggregate_columns())?,
            online: OnlineAggregates::new(settings.online),
            steps_written: 0,
            steps_table: Vec::new(),
            flight: settings.flight.map(|f| Flight {
                recorder: FlightRecorder::new(f),
                template: None,
                trace: settings.window_trace,
                errors: Vec::new(),
                jobs: Vec::new(),
            }),
            pm: None,
            pm_kernel_rows: settings.pm_kernel_rows,
            live: settings.live.map(|feed| (feed, DrainSums::new(&meta.metrics))),
        })
    }

    /// The empty report of the run that the flight recorder's windows fill with their rows
    /// (its mode, metrics and version); without it a window writes only its `why.json`.
    pub fn set_window_template(&mut self, template: Report) {
        if let Some(f) = self.flight.as_mut() {
            f.template = Some(Box::new(template));
        }
    }

    /// The flight recorder, when there is one.
    pub fn flight(&self) -> Option<&FlightRecorder> {
        self.flight.as_ref().map(|f| &f.recorder)
    }

    /// Asks the flight recorder for a window (a signal, a CUDA error); `why` says who asked.
    /// False without a flight recorder.
    pub fn request_window(&mut self, why: impl Into<String>) -> bool {
        match self.flight.as_mut() {
            Some(f) => {
                f.recorder.request(why);
                true
            }
            None => false,
        }
    }

    /// The output directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every part's `gmprof.meta` and the segment policy: what further tables of the run
    /// (PM sampling's, [`super::pm::PmStream`]) are opened with.
    pub fn part_settings(&self) -> (&str, SegmentPolicy) {
        (&self.meta_json, self.policy)
    }

    /// Which kernels get rows in `pm/` ([`StreamSettings::pm_kernel_rows`]).
    pub fn pm_kernel_rows(&self) -> PmKernelRows {
        self.pm_kernel_rows
    }

    /// What the writer holds, by collection (a streamed run's per-drain memory census).
    pub fn census(&self) -> Vec<(&'static str, usize)> {
        let mut out = self.online.census();
        out.push(("writer.steps_table", self.steps_table.len()));
        if let Some(f) = &self.flight {
            out.extend(f.recorder.census());
            out.push(("flight.jobs", f.jobs.len()));
        }
        if let Some(held) = self.pm_samples_held() {
            out.push(("pm.held", held));
        }
        out
    }

    /// The online aggregates so far.
    pub fn online(&self) -> &OnlineAggregates {
        &self.online
    }

    /// Writes one kernel row and folds it into the aggregates; `top` is the top-level range
    /// it ran under (the flight recorder keys its rows by it).
    pub fn kernel(&mut self, row: &KernelRow, top: Option<RangeId>) -> Result<()> {
        let metrics = self.metrics;
        self.kernels.row(|w| push_kernel(w, row, metrics))?;
        self.online.add_kernel(row);
        if let Some((_, sums)) = self.live.as_mut() {
            sums.kernel(row);
        }
        if let Some(f) = self.flight.as_mut() {
            f.recorder.kernel(row, top);
        }
        Ok(())
    }

    /// The end of a drain: the flight recorder trims the rows still waiting for a step to
    /// its bound ([`crate::analysis::online::FlightRecorder::end_drain`]).
    pub fn end_drain(&mut self) {
        if let Some(f) = self.flight.as_mut() {
            f.recorder.end_drain();
        }
        if let Some((_, sums)) = self.live.as_mut() {
            sums.drains += 1;
        }
        self.publish_live();
    }

    /// Hands the drain's sums to the live metrics, when exported.
    fn publish_live(&mut self) {
        if let Some((feed, sums)) = self.live.as_mut() {
            feed.publish(sums);
        }
    }

    /// The live metrics' sums of the drain in progress, when exported (the pipeline adds
    /// its joins' counts and warnings).
    pub fn live_sums(&mut self) -> Option<&mut DrainSums> {
        self.live.as_mut().map(|(_, sums)| sums)
    }

    /// Writes one transfer row; `top` as for [`StreamWriter::kernel`].
    pub fn transfer(&mut self, row: &TransferRow, top: Option<RangeId>) -> Result<()> {
        self.transfers.row(|w| push_transfer(w, row))?;
        if let Some((_, sums)) = self.live.as_mut() {
            sums.transfer(row);
        }
        if let Some(f) = self.flight.as_mut() {
            f.recorder.transfer(row, top);
        }
        Ok(())
    }

    /// Writes one completed range instance (children before parents) and folds it into the
    /// aggregates and the steps table; `top` is its top-level ancestor.
    pub fn range(&mut self, row: &RangeRow, top: Option<RangeId>) -> Result<()> {
        let metrics = self.metrics;
        self.ranges.row(|w| push_range(w, row, metrics))?;
        self.online.add_range(row, top);
        if let Some((_, sums)) = self.live.as_mut() {
            sums.range(row);
        }
        if let Some(f) = self.flight.as_mut() {
            // The steps this range made (none, one, or two when the step group was found).
            let made = self.online.steps().ready().to_vec();
            f.recorder.range(row, top, made);
        }
        self.write_steps_and_windows()
    }

    /// Queues the flight recorder's windows that are complete, to be written.
    fn queue_flight_windows(&mut self) {
        let Some(f) = self.flight.as_mut() else { return };
        let settings = f.recorder.settings().describe();
        for window in f.recorder.take_windows() {
            match &f.template {
                Some(template) => f.jobs.push(WindowJob {
                    dir: self.dir.clone(),
                    template: (**template).clone(),
                    settings: settings.clone(),
                    trace: f.trace.clone(),
                    window,
                }),
                None => f.errors.push(format!("{} could not be written: no report template was set", window.entry.dir)),
            }
        }
    }

    /// The flight recorder's windows complete since the last call, to be written
    /// ([`WindowJob::write`]) by the caller, who says a failure with
    /// [`StreamWriter::window_failed`]; those not taken are written by the finish.
    pub fn take_window_jobs(&mut self) -> Vec<WindowJob> {
        self.flight.as_mut().map(|f| std::mem::take(&mut f.jobs)).unwrap_or_default()
    }

    /// Window `name` could not be written (`error`): the summary says so, and the run goes on.
    pub fn window_failed(&mut self, name: &str, error: &str) {
        if let Some(f) = self.flight.as_mut() {
            f.errors.push(format!("{name} could not be written: {error}"));
        }
    }

    fn write_steps_and_windows(&mut self) -> Result<()> {
        let mut steps = self.online.take_steps();
        if let Some(f) = self.flight.as_mut() {
            // With a flight recorder a step row is written once no later window can take it.
            steps = f.recorder.take_final_steps();
        }
        self.queue_flight_windows();
        for step in steps {
            self.steps.row(|w| push_step(w, &step))?;
            for g in &step.groups {
                self.step_ranges.row(|w| push_step_range(w, step.step, g))?;
            }
            self.steps_written += 1;
            if let Some((_, sums)) = self.live.as_mut() {
                sums.step(&step);
            }
            if self.steps_table.len() < MAX_REPORT_STEPS {
                self.steps_table.push(StepRow { groups: Vec::new(), ..step });
            }
        }
        for window in self.online.take_closed_windows() {
            let span = Some((window.window, window.first_step, window.steps));
            for r in &window.rows {
                self.aggregates.row(|w| push_aggregate(w, span, r))?;
            }
        }
        Ok(())
    }

    /// Closes every segment that has been open for the policy's time.
    pub fn tick(&mut self, now: Instant) -> Result<()> {
        for table in self.tables_mut() {
            table.tick(now)?;
        }
        match self.pm.as_mut() {
            Some(pm) => pm.tick(now),
            None => Ok(()),
        }
    }

    /// Streams PM sampling's tables too ([`PmStream`], `pm/` and `pm_samples/`).
    pub fn set_pm(&mut self, pm: PmStream) {
        self.pm = Some(pm);
    }

    /// PM sampling's tables, when the run samples.
    pub fn pm_mut(&mut self) -> Option<&mut PmStream> {
        self.pm.as_mut()
    }

    /// PM samples decoded since the last drain, for the live metrics (DRAM bandwidth) when
    /// they are exported and the run streams PM sampling's tables.
    pub fn live_pm_samples(&mut self, samples: &[crate::model::pm::PmSample]) {
        if let (Some((_, sums)), Some(pm)) = (self.live.as_mut(), self.pm.as_ref()) {
            sums.pm_samples(pm.metrics(), samples);
        }
    }

    /// PM samples held (those a kernel still to be written may overlap), when the run samples.
    pub fn pm_samples_held(&self) -> Option<usize> {
        self.pm.as_ref().map(PmStream::held)
    }

    /// Takes PM sampling's tables out, to finish them ([`PmStream::finish`]).
    pub fn take_pm(&mut self) -> Option<PmStream> {
        self.pm.take()
    }

    /// Closes every open segment now (a checkpoint, or before the process ends by a signal).
    pub fn close_segments(&mut self) -> Result<()> {
        for table in self.tables_mut() {
            table.close_segment()?;
        }
        match self.pm.as_mut() {
            Some(pm) => pm.close_segments(),
            None => Ok(()),
        }
    }

    fn tables_mut(&mut self) -> [&mut PartWriter; 6] {
        [
            &mut self.kernels,
            &mut self.transfers,
            &mut self.ranges,
            &mut self.steps,
            &mut self.step_ranges,
            &mut self.aggregates,
        ]
    }

    /// Encoded bytes the open segments hold in memory.
    pub fn open_bytes(&mut self) -> usize {
        self.tables_mut().iter().map(|t| t.open_bytes()).sum()
    }

    /// Ends the run: closes the last window, writes the whole run's aggregates (window
    /// null), ends the flight recorder (`ending`: why the run ended abnormally, which asks
    /// it for a last window), closes every segment.
    pub fn finish(mut self, ending: Option<String>) -> Result<StreamWritten> {
        self.online.finish_window();
        if let Some(f) = self.flight.as_mut() {
            // Steps made by the last ranges reach the recorder before it ends.
            f.recorder.finish(ending);
        }
        self.write_steps_and_windows()?;
        for job in self.take_window_jobs() {
            let name = job.name().to_owned();
            if let Err(e) = job.write() {
                tracing::warn!("gmprof: the flight recorder's {name} could not be written: {e}");
                self.window_failed(&name, &e.to_string());
            }
        }
        // The last rows' and steps' live values, before the process may end.
        self.publish_live();
        let whole = self.online.whole_rows();
        for r in &whole {
            self.aggregates.row(|w| push_aggregate(w, None, r))?;
        }
        let step_group = self.online.steps().group().map(str::to_owned);
        let flight = self.flight.as_ref().map(|f| {
            let mut summary = f.recorder.summary();
            summary.errors.clone_from(&f.errors);
            summary
        });
        let Self { kernels, transfers, ranges, steps, step_ranges, aggregates, steps_written, steps_table, .. } = self;
        let mut tables = Vec::with_capacity(STREAMED_TABLES.len());
        for (name, table) in
            STREAMED_TABLES.into_iter().zip([kernels, transfers, ranges, steps, step_ranges, aggregates])
        {
            tables.push((name, table.finish()?));
        }
        let steps_table_left_out = steps_written.saturating_sub(steps_table.len() as u64);
        Ok(StreamWritten {
            tables,
            aggregates: whole,
            steps: steps_written,
            step_group,
            steps_table,
            steps_table_left_out,
            flight,
        })
    }
}
