//! The streaming path from a running session's records to the streamed outputs:
//! [`StreamPipeline::drain`] moves the complete records out of the session's correlator
//! ([`Correlator::drain_complete`]), joins them ([`Correlator::finish`]), folds them into
//! the range instances in flight ([`RangeInstances`]), removes completed ranges from the
//! session tree, and writes every row and completed range ([`StreamWriter`]). After a drain
//! the session holds only records in flight and ranges open or in flight.
//!
//! A drain has two halves, so that a running program's launches (which take the session's
//! lock) wait only for the first, which is short: [`PipelineCore::take`], under the
//! session's lock, removes the ranges the last drain completed from the session tree, moves
//! the complete records out of the correlator ([`Correlator::drain_complete`]) and copies
//! the tree (only ranges open or in flight are left in it); [`PipelineCore::process`], with
//! the session let go, joins the records against that copy ([`Correlator::finish`]),
//! completes the range instances, and writes every row (the Parquet encoding, compression
//! and the aggregates). The join and the writing are most of a drain's time. The pipeline's
//! state is behind its own lock ([`StreamPipeline::handle`]), which the drain takes before it
//! lets the session go, so drains follow each other in order and the finish (which takes the
//! session's lock, then the pipeline's) comes after the one in progress. A range completed
//! by a drain stays in the session tree until the next drain's `take` (or the finish)
//! removes it: nothing of it is reported twice, as a drain's copy no longer holds it.
//! The drain does it itself once it is done ([`PipelineCore::remove_completed`], the session's
//! lock taken again, then the pipeline's, as the finish takes them).
//!
//! Imports `writer`; `mod.rs` re-exports it.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::pm::{PmFeed, PmStream, PmStreamCounts, PmWait};
use super::summary::{StreamedSummary, StreamedTable};
use super::writer::{StreamWriter, StreamWritten};
use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{
    Correlation, CorrelationCounts, Correlator, KernelRow, PendingByRange, TransferRow, MAX_WARNINGS,
};
use crate::analysis::online::RangeInstances;
use crate::error::Result;
use crate::model::pm::{PmMetric, PmSample};
use crate::model::session::{RemovedRanges, SessionTree};
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
            drain_times: None,
            pm_kernels_left_out: 0,
            pm_kernels_left_out_ns: 0,
        }
    }
}

/// The state of a [`StreamPipeline`], behind its own lock ([`StreamPipeline::handle`]):
/// `None` once the run's finish took it.
pub type PipelineHandle = Arc<Mutex<Option<PipelineCore>>>;

/// A drain's PM sampling: the samples decoded since the last drain, whether its kernels did
/// not wait for the decoder, and the earliest a kernel still held can have started.
#[derive(Debug, Default)]
struct PmBatch {
    samples: Vec<PmSample>,
    released: bool,
    oldest_waiting: Option<u64>,
}

/// The rows one drain took out of the session, each with the top-level range it ran under.
#[derive(Debug, Default)]
struct DrainBatch {
    kernels: Vec<KernelRow>,
    kernel_tops: Vec<Option<RangeId>>,
    transfers: Vec<TransferRow>,
    transfer_tops: Vec<Option<RangeId>>,
    ranges: Vec<(RangeRow, Option<RangeId>)>,
    /// PM sampling's part, when the run samples.
    pm: Option<PmBatch>,
}

impl DrainBatch {
    fn drained(&self) -> Drained {
        Drained {
            kernels: self.kernels.len() as u64,
            transfers: self.transfers.len() as u64,
            ranges: self.ranges.len() as u64,
        }
    }

    /// Writes the batch's rows into `writer` (part files, aggregates, the steps table, the
    /// flight recorder) and ends the drain.
    fn write(mut self, writer: &mut StreamWriter) -> Result<Drained> {
        let drained = self.drained();
        if let Some(batch) = self.pm.take() {
            writer.live_pm_samples(&batch.samples);
            if let Some(pm) = writer.pm_mut() {
                // The samples first (each written once), then the kernels folded over them.
                pm.feed(batch.samples)?;
                pm.kernels(&self.kernels, batch.released)?;
                pm.prune(batch.oldest_waiting);
            }
        }
        for (k, top) in self.kernels.iter().zip(self.kernel_tops) {
            writer.kernel(k, top)?;
        }
        for (t, top) in self.transfers.iter().zip(self.transfer_tops) {
            writer.transfer(t, top)?;
        }
        for (row, top) in &self.ranges {
            writer.range(row, *top)?;
        }
        writer.end_drain();
        Ok(drained)
    }
}

/// What [`PipelineCore::take`] took out of the session for [`PipelineCore::process`].
#[derive(Debug)]
pub struct DrainInput {
    chunk: Correlator,
    pending: PendingByRange,
    /// The session tree when the records were taken.
    tree: SessionTree,
    /// PM sampling's part, when the run samples.
    pm: Option<PmBatch>,
    /// The ranges the take removed from the session tree, freed by `process`.
    removed: RemovedRanges,
}

/// A run's streaming state: the writer, the range instances in flight, the joins' counts and
/// warnings; see the [module docs](self).
#[derive(Debug)]
pub struct PipelineCore {
    writer: StreamWriter,
    instances: RangeInstances,
    mode: ProfilingMode,
    counts: CorrelationCounts,
    warnings: Vec<String>,
    warnings_left_out: u64,
    /// per_range: range rows written with blank metrics (their counters known missing), at
    /// a nesting level that was measured.
    ranges_without_counters: u64,
    /// per_range: the nesting levels CUPTI measures (`max_nesting_levels`), when known;
    /// ranges nested deeper have no counters by design.
    measured_levels: Option<u16>,
    /// Ranges the last drain completed and wrote, to leave the session tree at the next
    /// [`PipelineCore::take`].
    to_remove: Vec<RangeId>,
    /// PM sampling's wait, when the run samples ([`StreamPipeline::enable_pm`]).
    pm: Option<PmWait>,
    /// The session tree's pushes at the last `take`: numbered paths no push used since are
    /// forgotten at the next ([`SessionTree::forget_numbered_paths`]).
    pushes_at_last_take: u64,
}

/// A run's streaming path; see the [module docs](self).
#[derive(Debug)]
pub struct StreamPipeline {
    core: PipelineHandle,
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
    /// PM sampling's counts, when the run sampled.
    pub pm: Option<PmStreamCounts>,
}

impl PipelineCore {
    /// The live metrics' sums of the drain to come, when exported (the capture hands them
    /// what only it knows: PC sampling's running totals).
    pub fn live_sums(&mut self) -> Option<&mut crate::report::live::DrainSums> {
        self.writer.live_sums()
    }

    /// The first half of a drain, under the session's lock: removes the ranges the last
    /// drain completed from `tree`, takes what is complete out of `correlator`
    /// (`settled_below`: the first counter cycle whose counters are not in yet, see
    /// [`Correlator::drain_complete`]; what waits for it stays) and copies `tree`.
    ///
    /// With PM sampling (`pm`: the samples decoded since the last drain), a kernel the
    /// decoder has not passed yet stays in the session ([`PmWait`]).
    pub fn take(
        &mut self,
        correlator: &mut Correlator,
        tree: &mut SessionTree,
        settled_below: Option<u32>,
        pm: Option<PmFeed>,
    ) -> DrainInput {
        let removed = self.remove_completed(tree);
        tree.forget_numbered_paths(self.pushes_at_last_take);
        self.pushes_at_last_take = tree.pushes();
        let mut pm_horizon = None;
        let mut pm_batch = None;
        if let Some(wait) = self.pm.as_mut() {
            let feed = pm.unwrap_or_default();
            wait.observe(&feed);
            pm_horizon = wait.wait_horizon(correlator.launch_count() > 0);
            pm_batch = Some(PmBatch { samples: feed.samples, released: wait.released(), oldest_waiting: None });
        }
        let (chunk, pending) = correlator.drain_complete(self.mode, settled_below, pm_horizon);
        if let (Some(wait), Some(batch)) = (self.pm.as_mut(), pm_batch.as_mut()) {
            wait.drained(chunk.launch_count() as u64, correlator.launch_count() > 0);
            batch.oldest_waiting = correlator.oldest_waiting_ns();
        }
        DrainInput { chunk, pending, tree: tree.snapshot(), pm: pm_batch, removed }
    }

    /// The second half, with the session let go: joins `input`, completes the range
    /// instances it finishes (they leave the session tree at the next `take`), writes every
    /// row, and closes the segments that are due at `now`.
    pub fn process(&mut self, input: DrainInput, metrics: &MetricSet, now: Instant) -> Result<Drained> {
        let DrainInput { chunk, pending, tree, pm, removed } = input;
        // Freed here, with the session let go.
        drop(removed);
        let correlation = chunk.finish(&tree, metrics, self.mode);
        let mut batch = self.take_rows(correlation, &tree, &pending);
        batch.pm = pm;
        let drained = batch.write(&mut self.writer)?;
        self.writer.tick(now)?;
        Ok(drained)
    }

    /// Removes the ranges the last [`process`](Self::process) completed from `tree` (under
    /// the session's lock, after it; the next `take` does it otherwise) and hands them back,
    /// to be dropped once the lock is let go.
    pub fn remove_completed(&mut self, tree: &mut SessionTree) -> RemovedRanges {
        self.remove_completed_up_to(tree, usize::MAX).0
    }

    /// As [`remove_completed`](Self::remove_completed), at most `most` ranges (the
    /// shallowest first); true when some are left, for a caller that lets the session's
    /// lock go between batches so that the program's launches never wait for a whole
    /// drain's removals at once.
    pub fn remove_completed_up_to(&mut self, tree: &mut SessionTree, most: usize) -> (RemovedRanges, bool) {
        // `to_remove` is deepest first; `remove_all` removes from its end.
        let start = self.to_remove.len().saturating_sub(most.max(1));
        let removed = tree.remove_all(&self.to_remove[start..]);
        self.to_remove.truncate(start);
        (removed, start > 0)
    }

    /// The flight recorder's windows to write ([`StreamWriter::take_window_jobs`]).
    pub fn take_window_jobs(&mut self) -> Vec<super::flight::WindowJob> {
        self.writer.take_window_jobs()
    }

    /// What the pipeline holds, by collection (a streamed run's per-drain memory census).
    pub fn census(&self) -> Vec<(&'static str, usize)> {
        let mut out = vec![("pipe.instances", self.instances.in_flight()), ("pipe.to_remove", self.to_remove.len())];
        out.extend(self.writer.census());
        out
    }

    /// Asks the flight recorder for a window ([`StreamWriter::request_window`]).
    pub fn request_window(&mut self, why: impl Into<String>) -> bool {
        self.writer.request_window(why)
    }

    /// Closes every open segment now ([`StreamWriter::close_segments`]).
    pub fn close_segments(&mut self) -> Result<()> {
        self.writer.close_segments()
    }

    /// A window could not be written ([`StreamWriter::window_failed`]).
    pub fn window_failed(&mut self, name: &str, error: &str) {
        self.writer.window_failed(name, error);
    }

    /// Joins' rows out of `correlation`, with their top-level ranges in `tree`, and the
    /// range instances they complete (their ids kept for removal). The joins' counts and
    /// warnings are kept here.
    fn take_rows(&mut self, mut correlation: Correlation, tree: &SessionTree, pending: &PendingByRange) -> DrainBatch {
        let kernel_tops = correlation.rows.iter().map(|k| top_of(tree, k.range_id)).collect();
        let transfer_tops = correlation.transfers.iter().map(|t| top_of(tree, t.range_id)).collect();
        self.instances.add(&correlation);
        let mut ranges = Vec::new();
        for (row, top) in self.instances.complete(tree, pending) {
            let blank = !row.metrics.is_empty() && row.metrics.iter().all(Option::is_none);
            // A range nested deeper than the levels measured has no counters by design (as in
            // the whole-file report); only the others were lost.
            let unmeasured_level = self.measured_levels.is_some_and(|levels| row.depth >= u32::from(levels));
            self.ranges_without_counters +=
                u64::from(self.mode == ProfilingMode::PerRange && blank && !unmeasured_level);
            if let Some(id) = row.range_id {
                self.to_remove.push(id);
            }
            ranges.push((row, top));
        }
        self.counts.add(&correlation.counts);
        let flagged = correlation.counts.flagged_rows;
        for w in std::mem::take(&mut correlation.warnings) {
            if self.warnings.contains(&w) || add_to_counted(&mut self.warnings, &w) {
                continue;
            }
            if self.warnings.len() < MAX_WARNINGS {
                self.warnings.push(w);
            } else {
                self.warnings_left_out += 1;
            }
        }
        if let Some(sums) = self.writer.live_sums() {
            sums.flagged_rows += flagged;
            sums.warnings = Some(self.warnings.len() as u64 + self.warnings_left_out);
        }
        DrainBatch {
            kernels: std::mem::take(&mut correlation.rows),
            kernel_tops,
            transfers: std::mem::take(&mut correlation.transfers),
            transfer_tops,
            ranges,
            pm: None,
        }
    }

    /// PM samples held for kernels still to be written ([`PmStream`]); `None` without PM.
    pub fn pm_samples_held(&self) -> Option<usize> {
        self.writer.pm_samples_held()
    }
}

impl StreamPipeline {
    /// Streams a session in `mode` with `metrics` into `writer`.
    pub fn new(writer: StreamWriter, metrics: &MetricSet, mode: ProfilingMode) -> Self {
        let core = PipelineCore {
            writer,
            instances: RangeInstances::new(metrics, mode),
            mode,
            counts: CorrelationCounts::default(),
            warnings: Vec::new(),
            warnings_left_out: 0,
            ranges_without_counters: 0,
            measured_levels: None,
            to_remove: Vec::new(),
            pm: None,
            pushes_at_last_take: 0,
        };
        Self { core: Arc::new(Mutex::new(Some(core))) }
    }

    /// The pipeline's state, behind its lock: a drain takes it under the session's lock,
    /// then lets the session go for [`PipelineCore::process`].
    pub fn handle(&self) -> PipelineHandle {
        Arc::clone(&self.core)
    }

    /// Streams PM samples of `metrics` too (`pm/`, `pm_samples/`, [`PmStream`]): from now on
    /// kernels wait for the samples that cover them. Once only.
    pub fn enable_pm(&mut self, metrics: Vec<PmMetric>) -> Result<()> {
        let created = self.with_core(|c| {
            if c.pm.is_some() {
                return Ok(());
            }
            let w = &mut c.writer;
            let (meta, policy) = w.part_settings();
            let rows = w.pm_kernel_rows();
            PmStream::create(w.dir(), meta, policy, metrics, rows).map(|pm| w.set_pm(pm))?;
            c.pm = Some(PmWait::default());
            Ok(())
        });
        created.unwrap_or_else(|| {
            Err(crate::error::Error::InvalidState("the streamed outputs were already finished".into()))
        })
    }

    /// Whether PM samples stream ([`StreamPipeline::enable_pm`]).
    pub fn streams_pm(&self) -> bool {
        self.with_core(|c| c.pm.is_some()).unwrap_or(false)
    }

    /// Hands PC sampling's running totals to the live metrics' next publish (the finish's
    /// last drain), when exported: see [`crate::report::live::DrainSums::pc_totals`].
    pub fn live_pc_totals(&self, totals: (Vec<(String, String, u64)>, u64, u64)) {
        self.with_core(|c| {
            if let Some(sums) = c.live_sums() {
                sums.pc_totals(totals.0, totals.1, totals.2);
            }
        });
    }

    /// Runs `f` on the state (`None` once the run's finish took it).
    fn with_core<T>(&self, f: impl FnOnce(&mut PipelineCore) -> T) -> Option<T> {
        self.core.lock().as_mut().map(f)
    }

    /// per_range: the nesting levels CUPTI measures; a range nested deeper is written with
    /// blank metrics without a warning, as the whole-file report does.
    pub fn set_measured_levels(&mut self, levels: u16) {
        self.with_core(|c| c.measured_levels = Some(levels));
    }

    /// The empty report of the run that flight-recorder windows start from
    /// ([`StreamWriter::set_window_template`]).
    pub fn set_window_template(&mut self, template: Report) {
        self.with_core(|c| c.writer.set_window_template(template));
    }

    /// The flight recorder's windows to write ([`StreamWriter::take_window_jobs`]).
    pub fn take_window_jobs(&mut self) -> Vec<super::flight::WindowJob> {
        self.with_core(PipelineCore::take_window_jobs).unwrap_or_default()
    }

    /// A window could not be written ([`StreamWriter::window_failed`]).
    pub fn window_failed(&mut self, name: &str, error: &str) {
        self.with_core(|c| c.window_failed(name, error));
    }

    /// Asks the flight recorder for a window ([`StreamWriter::request_window`]).
    pub fn request_window(&mut self, why: impl Into<String>) -> bool {
        self.with_core(|c| c.writer.request_window(why)).unwrap_or(false)
    }

    /// Closes every open segment now (a checkpoint, a signal): what is written so far is
    /// in complete part files.
    pub fn close_segments(&mut self) -> Result<()> {
        self.with_core(|c| c.writer.close_segments()).unwrap_or(Ok(()))
    }

    /// Ranges with rows in flight.
    pub fn ranges_in_flight(&self) -> usize {
        self.with_core(|c| c.instances.in_flight()).unwrap_or(0)
    }

    /// A whole drain at once, both halves ([`PipelineCore::take`], then
    /// [`PipelineCore::process`]), for a caller that holds `correlator` and `tree` alone.
    pub fn drain(
        &mut self,
        correlator: &mut Correlator,
        tree: &mut SessionTree,
        metrics: &MetricSet,
        now: Instant,
        settled_below: Option<u32>,
        pm: Option<PmFeed>,
    ) -> Result<Drained> {
        let mut guard = self.core.lock();
        let Some(core) = guard.as_mut() else { return Ok(Drained::default()) };
        let input = core.take(correlator, tree, settled_below, pm);
        let drained = core.process(input, metrics, now);
        drop(core.remove_completed(tree));
        drained
    }

    /// Ends the run: the ranges the last drain completed leave `tree`, everything left in
    /// `correlator` is joined as it is (what never got its activity record is flagged as in
    /// a whole-session join), ranges still open are closed at `end_ns`, every range and the
    /// root row are written, and the writer finishes (`ending`: why the run ended
    /// abnormally, for the flight recorder).
    pub fn finish(
        self,
        correlator: Correlator,
        tree: &mut SessionTree,
        metrics: &MetricSet,
        end_ns: u64,
        ending: Option<String>,
        pm: Option<PmFeed>,
    ) -> Result<StreamEnd> {
        let Some(mut core) = self.core.lock().take() else {
            return Err(crate::error::Error::InvalidState("the streamed outputs were already finished".into()));
        };
        drop(core.remove_completed(tree));
        let open = tree.close_all_open(end_ns);
        let correlation = correlator.finish(tree, metrics, core.mode);
        let mut batch = core.take_rows(correlation, tree, &Default::default());
        drop(core.remove_completed(tree));
        if let Some(wait) = core.pm.as_mut() {
            // The sampler has stopped: the last samples, and nothing waits any more.
            wait.stop();
            let samples = pm.unwrap_or_default().samples;
            batch.pm = Some(PmBatch { samples, released: true, oldest_waiting: None });
        }
        batch.write(&mut core.writer)?;
        if let Some(root) = core.instances.root() {
            core.writer.range(&root, None)?;
        }
        let mut warnings = std::mem::take(&mut core.warnings);
        warnings.extend(open);
        if core.ranges_without_counters > 0 {
            warnings.push(format!(
                "{} range instance(s) were streamed with blank metrics: their counter cycle was evaluated without \
                 counters for them (lost, or not measured by CUPTI)",
                core.ranges_without_counters
            ));
        }
        if core.warnings_left_out > 0 {
            warnings.push(format!("... and {} more warning(s) of the streamed joins", core.warnings_left_out));
        }
        let mut pm_counts = None;
        let mut pm_tables = Vec::new();
        if let Some(stream) = core.writer.take_pm() {
            let end = stream.finish()?;
            warnings.extend(core.pm.as_ref().and_then(PmWait::warning));
            warnings.extend(end.warnings);
            pm_counts = Some(end.counts);
            pm_tables = end.tables;
        }
        let mut written = core.writer.finish(ending)?;
        written.tables.extend(pm_tables);
        Ok(StreamEnd { written, counts: core.counts, warnings, pm: pm_counts })
    }
}

/// A warning that starts with a count (`49 kernel activity record(s) have end <= start, ...`)
/// said again by a later drain with its own count: adds the count to the warning already kept
/// with the same words, so a run says it once with the whole run's number. False when no
/// such warning is kept (or `w` has no count).
fn add_to_counted(kept: &mut [String], w: &str) -> bool {
    let Some((n, words)) = leading_count(w) else { return false };
    for k in kept.iter_mut() {
        if let Some((m, same)) = leading_count(k).filter(|(_, rest)| *rest == words) {
            *k = format!("{}{same}", m.saturating_add(n));
            return true;
        }
    }
    false
}

/// The count a warning starts with, and the words after it (from the space on).
fn leading_count(s: &str) -> Option<(u64, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = s.get(digits..)?;
    if digits == 0 || !rest.starts_with(' ') {
        return None;
    }
    Some((s[..digits].parse().ok()?, rest))
}

/// The top-level ancestor of range `id` in `tree` (itself at depth 0); `None` for the root.
fn top_of(tree: &SessionTree, id: Option<RangeId>) -> Option<RangeId> {
    let mut top = id?;
    while let Some(parent) = tree.get(top).and_then(|n| n.parent) {
        top = parent;
    }
    Some(top)
}

#[cfg(test)]
mod tests {
    use super::add_to_counted;

    #[test]
    fn counted_warnings_of_several_drains_become_one_with_the_sum() {
        let mut kept = vec!["49 kernel activity record(s) have end <= start".to_owned(), "no count here".to_owned()];
        assert!(add_to_counted(&mut kept, "214 kernel activity record(s) have end <= start"));
        assert_eq!(kept[0], "263 kernel activity record(s) have end <= start");
        // Other words, or no count: not merged.
        assert!(!add_to_counted(&mut kept, "3 range(s) were left open"));
        assert!(!add_to_counted(&mut kept, "no count here"));
        assert!(!add_to_counted(&mut kept, "12345"));
        assert_eq!(kept.len(), 2);
    }
}
