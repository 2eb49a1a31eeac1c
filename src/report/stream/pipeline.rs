//! The streaming path from a running session's records to the streamed outputs:
//! [`StreamPipeline::drain`] moves the complete records out of the session's correlator
//! ([`Correlator::drain_complete`]), joins them ([`Correlator::finish`]), folds them into
//! the range instances in flight ([`RangeInstances`]), removes completed ranges from the
//! session tree, and writes every row and completed range ([`StreamWriter`]). After a drain
//! the session holds only records in flight and ranges open or in flight.
//!
//! Imports `writer`; `mod.rs` re-exports it.

use std::time::Instant;

use super::summary::{StreamedSummary, StreamedTable};
use super::writer::{StreamWriter, StreamWritten};
use crate::analysis::correlate::{Correlation, CorrelationCounts, Correlator, MAX_WARNINGS};
use crate::analysis::online::RangeInstances;
use crate::error::Result;
use crate::model::session::SessionTree;
use crate::model::{MetricSet, ProfilingMode, RangeId};
use crate::report::model::Report;

/// What one drain moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Kernel rows written.
    pub kernels: u64,
    /// Transfer rows written.
    pub transfers: u64,
    /// Range rows written.
    pub ranges: u64,
}

impl StreamEnd {
    /// What `report.json` says of the run ([`Report::streamed`](crate::report::Report::streamed)):
    /// `why` it streamed, past `row_limit`.
    pub fn summary(&self, why: String, row_limit: u64) -> StreamedSummary {
        let rows = |name: &str| self.written.table(name).map_or(0, |p| p.rows);
        StreamedSummary {
            why,
            row_limit,
            kernels: rows("kernels"),
            transfers: rows("transfers"),
            ranges: rows("ranges"),
            steps: self.written.steps,
            step_group: self.written.step_group.clone(),
            tables: self
                .written
                .tables
                .iter()
                .map(|(name, p)| StreamedTable { table: (*name).to_owned(), parts: p.parts, rows: p.rows })
                .collect(),
            aggregates: self.written.aggregates.clone(),
            steps_table: self.written.steps_table.clone(),
            steps_table_left_out: self.written.steps_table_left_out,
            flight: self.written.flight.clone(),
        }
    }
}

/// A run's streaming state; see the [module docs](self).
#[derive(Debug)]
pub struct StreamPipeline {
    writer: StreamWriter,
    instances: RangeInstances,
    mode: ProfilingMode,
    counts: CorrelationCounts,
    warnings: Vec<String>,
    warnings_left_out: u64,
    /// per_range: range rows written with blank metrics (their counters known missing).
    ranges_without_counters: u64,
}

/// What a streamed run wrote and saw, at its end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamEnd {
    /// The streamed tables and the whole run's aggregates.
    pub written: StreamWritten,
    /// The joins' counts, summed over every drain.
    pub counts: CorrelationCounts,
    /// Their warnings (the first [`MAX_WARNINGS`] distinct ones, and a count of the rest).
    pub warnings: Vec<String>,
}

impl StreamPipeline {
    /// Streams a session in `mode` with `metrics` into `writer`.
    pub fn new(writer: StreamWriter, metrics: &MetricSet, mode: ProfilingMode) -> Self {
        Self {
            writer,
            instances: RangeInstances::new(metrics, mode),
            mode,
            counts: CorrelationCounts::default(),
            warnings: Vec::new(),
            warnings_left_out: 0,
            ranges_without_counters: 0,
        }
    }

    /// The writer (its aggregates so far).
    pub fn writer(&self) -> &StreamWriter {
        &self.writer
    }

    /// The empty report of the run that flight-recorder windows start from
    /// ([`StreamWriter::set_window_template`]).
    pub fn set_window_template(&mut self, template: Report) {
        self.writer.set_window_template(template);
    }

    /// The flight recorder's windows to write ([`StreamWriter::take_window_jobs`]).
    pub fn take_window_jobs(&mut self) -> Vec<super::flight::WindowJob> {
        self.writer.take_window_jobs()
    }

    /// A window could not be written ([`StreamWriter::window_failed`]).
    pub fn window_failed(&mut self, name: &str, error: &str) {
        self.writer.window_failed(name, error);
    }

    /// Asks the flight recorder for a window ([`StreamWriter::request_window`]).
    pub fn request_window(&mut self, why: impl Into<String>) -> bool {
        self.writer.request_window(why)
    }

    /// Closes every open segment now (a checkpoint, a signal): what is written so far is
    /// in complete part files.
    pub fn close_segments(&mut self) -> Result<()> {
        self.writer.close_segments()
    }

    /// Ranges with rows in flight.
    pub fn ranges_in_flight(&self) -> usize {
        self.instances.in_flight()
    }

    /// Moves what is complete out of `correlator` and `tree` into the streamed outputs and
    /// closes the segments that are due at `now`. `settled_below`: the first counter cycle
    /// whose counters are not in yet ([`Correlator::drain_complete`]); what waits for it
    /// stays.
    pub fn drain(
        &mut self,
        correlator: &mut Correlator,
        tree: &mut SessionTree,
        metrics: &MetricSet,
        now: Instant,
        settled_below: Option<u32>,
    ) -> Result<Drained> {
        let (chunk, pending) = correlator.drain_complete(self.mode, settled_below);
        let correlation = chunk.finish(tree, metrics, self.mode);
        let drained = self.write(correlation, tree, &pending)?;
        self.writer.tick(now)?;
        Ok(drained)
    }

    fn write(
        &mut self,
        correlation: Correlation,
        tree: &mut SessionTree,
        pending: &crate::analysis::correlate::PendingByRange,
    ) -> Result<Drained> {
        let mut drained = Drained::default();
        for k in &correlation.rows {
            self.writer.kernel(k, top_of(tree, k.range_id))?;
            drained.kernels += 1;
        }
        for t in &correlation.transfers {
            self.writer.transfer(t, top_of(tree, t.range_id))?;
            drained.transfers += 1;
        }
        self.instances.add(&correlation);
        for (row, top) in self.instances.complete(tree, pending) {
            let blank = !row.metrics.is_empty() && row.metrics.iter().all(Option::is_none);
            self.ranges_without_counters += u64::from(self.mode == ProfilingMode::PerRange && blank);
            self.writer.range(&row, top)?;
            if let Some(id) = row.range_id {
                tree.remove(id);
            }
            drained.ranges += 1;
        }
        self.writer.end_drain();
        self.counts.add(&correlation.counts);
        for w in correlation.warnings {
            if self.warnings.contains(&w) {
                continue;
            }
            if self.warnings.len() < MAX_WARNINGS {
                self.warnings.push(w);
            } else {
                self.warnings_left_out += 1;
            }
        }
        Ok(drained)
    }

    /// Ends the run: everything left in `correlator` is joined as it is (what never got its
    /// activity record is flagged as in a whole-session join), ranges still open are closed
    /// at `end_ns`, every range and the root row are written, and the writer finishes
    /// (`ending`: why the run ended abnormally, for the flight recorder).
    pub fn finish(
        mut self,
        correlator: Correlator,
        tree: &mut SessionTree,
        metrics: &MetricSet,
        end_ns: u64,
        ending: Option<String>,
    ) -> Result<StreamEnd> {
        let open = tree.close_all_open(end_ns);
        let correlation = correlator.finish(tree, metrics, self.mode);
        self.write(correlation, tree, &Default::default())?;
        if let Some(root) = self.instances.root() {
            self.writer.range(&root, None)?;
        }
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(open);
        if self.ranges_without_counters > 0 {
            warnings.push(format!(
                "{} range instance(s) were streamed with blank metrics: their counter cycle was evaluated without \
                 counters for them (lost, or not measured by CUPTI)",
                self.ranges_without_counters
            ));
        }
        if self.warnings_left_out > 0 {
            warnings.push(format!("... and {} more warning(s) of the streamed joins", self.warnings_left_out));
        }
        let written = self.writer.finish(ending)?;
        Ok(StreamEnd { written, counts: self.counts, warnings })
    }
}

/// The top-level ancestor of range `id` in `tree` (itself at depth 0); `None` for the root.
fn top_of(tree: &SessionTree, id: Option<RangeId>) -> Option<RangeId> {
    let mut top = id?;
    while let Some(parent) = tree.get(top).and_then(|n| n.parent) {
        top = parent;
    }
    Some(top)
}
