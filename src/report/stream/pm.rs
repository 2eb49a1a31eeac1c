//! PM sampling in a streamed run (issue 42): [`PmStream`] takes the samples the decode thread
//! kept since the last drain, writes each once to `pm_samples/`, and holds only those a kernel
//! still to be written may overlap; each drain's kernel rows are folded over the held samples
//! ([`pm_fold::fold_kernels`]) and written to `pm/` in `pm.parquet`'s columns.
//!
//! By default ([`PmKernelRows::Covered`]) `pm/` gets a kernel's row only when the kernel
//! fills at least [`MIN_KERNEL_WINDOWS`] of a sample window, or when no sample covers it (its
//! values blank, said): a shorter kernel's values are mostly its neighbours' (the sample's
//! amount split by a model, [`pm_fold`]'s `few_samples`), and at the auto interval they are
//! most of a training step's launches: 9 minutes of llm.c wrote 64.6 M such rows, 1 GB. They
//! are counted ([`PmStreamCounts::short_left_out`]) and said in the summary; their samples are
//! in `pm_samples/`, their times in `kernels/`, and `GMPROF_PM_KERNEL_ROWS=all` writes them.
//!
//! A kernel waits in the session until the decoder has passed its end
//! ([`PmWait::wait_horizon`], [`Correlator::drain_complete`]'s `pm_horizon`), so it is
//! folded over every sample it will ever have. Samples ending before the oldest kernel still
//! waiting ([`Correlator::oldest_waiting_ns`]) are dropped, but for [`TAIL_SAMPLES`] kept as
//! the next drain's context, with the kernels written over them. When the decoder stops (it
//! failed, or the run ends) or passes [`STALL_DRAINS`] drains with kernels waiting and no new
//! sample, or without a kernel drained while kernels are held (samples on another clock than
//! the kernels' would never pass them), kernels stop waiting for that drain: those no sample
//! covers are written with blank values, counted and said.
//!
//! [`Correlator::drain_complete`]: crate::analysis::correlate::Correlator::drain_complete
//! [`Correlator::oldest_waiting_ns`]: crate::analysis::correlate::Correlator::oldest_waiting_ns

use std::path::Path;
use std::time::Instant;

use crate::analysis::correlate::KernelRow;
use crate::analysis::pm_fold;
use crate::error::Result;
use crate::model::pm::{PmMetric, PmSample};
use crate::report::tables::parquet::parts::{PartWriter, PartsWritten, SegmentPolicy};
use crate::report::tables::parquet::streamed::{pm_columns, pm_sample_columns, push_pm_sample, push_pm_value};
use crate::report::tables::parquet::{KEY_META, KEY_TABLE};

/// Samples kept before the oldest kernel still waiting: the attribution's context at the
/// edge of the next drain.
pub const TAIL_SAMPLES: usize = 8;

/// Drains in a row with no sample decoded, or with kernels held and none drained, after
/// which kernels stop waiting for one drain (a stalled decoder must not hold the run's
/// kernels).
pub const STALL_DRAINS: u32 = 5;

/// The part of a sample window a kernel fills from which `pm/` gets its row by default.
pub const MIN_KERNEL_WINDOWS: f64 = 0.5;

/// Which kernels get rows in a streamed run's `pm/` (`GMPROF_PM_KERNEL_ROWS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PmKernelRows {
    /// Kernels that fill at least [`MIN_KERNEL_WINDOWS`] of a sample window, and those no
    /// sample covers (the default: `covered`).
    #[default]
    Covered,
    /// Every kernel (`all`).
    All,
}

impl PmKernelRows {
    /// Its name in `GMPROF_PM_KERNEL_ROWS`.
    pub fn as_str(self) -> &'static str {
        match self {
            PmKernelRows::Covered => "covered",
            PmKernelRows::All => "all",
        }
    }

    /// The setting named `word` (`covered` or `all`).
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "covered" => Some(PmKernelRows::Covered),
            "all" => Some(PmKernelRows::All),
            _ => None,
        }
    }
}

/// What one drain hands over from the PM sampler.
#[derive(Clone, Debug, Default)]
pub struct PmFeed {
    /// The samples decoded since the last drain, in time order.
    pub samples: Vec<PmSample>,
    /// Whether the decode thread still runs.
    pub decoding: bool,
}

/// The PM side of a streamed run; see the [module docs](self).
#[derive(Debug)]
pub struct PmStream {
    metrics: Vec<PmMetric>,
    units: Vec<Option<String>>,
    rows: PartWriter,
    samples: PartWriter,
    /// Decoded samples a kernel still to be written may overlap, in time order.
    held: Vec<PmSample>,
    /// Kernels written over the held samples: the next drain's attribution context.
    context: Vec<KernelRow>,
    /// The end of the last sample decoded.
    horizon: Option<u64>,
    counts: PmStreamCounts,
    kernel_rows: PmKernelRows,
}

/// The session's side of PM sampling in a streamed run: how far the decoder got, and whether
/// a drain's kernels wait for it ([`PmWait::wait_horizon`]). The drain's collect (under the
/// session's lock) keeps it; [`PmStream`] writes with the session let go.
#[derive(Clone, Copy, Debug)]
pub struct PmWait {
    /// The end of the last sample decoded.
    horizon: Option<u64>,
    decoding: bool,
    /// Drains in a row without a new sample.
    stalled: u32,
    /// Drains in a row that held kernels and drained none while they waited.
    blocked: u32,
    /// Whether this drain's kernels do not wait ([`PmWait::wait_horizon`]).
    released: bool,
    /// Drains whose kernels did not wait because of a stall.
    gave_up: u64,
}

impl Default for PmWait {
    fn default() -> Self {
        Self { horizon: None, decoding: true, stalled: 0, blocked: 0, released: false, gave_up: 0 }
    }
}

impl PmWait {
    /// Notes one drain's samples (in time order) and whether the decoder still runs.
    pub fn observe(&mut self, feed: &PmFeed) {
        if let Some(last) = feed.samples.iter().map(|s| s.end_ns).max() {
            self.horizon = Some(self.horizon.map_or(last, |h| h.max(last)));
        }
        self.decoding &= feed.decoding;
        self.stalled = if feed.samples.is_empty() { self.stalled + 1 } else { 0 };
    }

    /// The PM horizon kernels wait for in this drain ([`Correlator::drain_complete`]'s
    /// `pm_horizon`): the end of the last sample decoded (0 before the first), or `None`
    /// when they do not wait: the decoder stopped, or for one drain after [`STALL_DRAINS`]
    /// drains without a sample or without a kernel drained ([`PmWait::drained`]).
    ///
    /// [`Correlator::drain_complete`]: crate::analysis::correlate::Correlator::drain_complete
    pub fn wait_horizon(&mut self, kernels_held: bool) -> Option<u64> {
        self.released = !self.decoding;
        if self.decoding && kernels_held && (self.stalled >= STALL_DRAINS || self.blocked >= STALL_DRAINS) {
            self.released = true;
            self.gave_up += 1;
            self.stalled = 0;
            self.blocked = 0;
        }
        (!self.released).then(|| self.horizon.unwrap_or(0))
    }

    /// What the drain did: `kernels` drained, and whether kernels are still held.
    pub fn drained(&mut self, kernels: u64, held: bool) {
        self.blocked = if !self.released && held && kernels == 0 { self.blocked + 1 } else { 0 };
    }

    /// The decoder stopped: no sample comes any more (the finish).
    pub fn stop(&mut self) {
        self.decoding = false;
        self.released = true;
    }

    /// Whether this drain's kernels do not wait.
    pub fn released(&self) -> bool {
        self.released
    }

    /// What a reader must know of the drains that did not wait.
    pub fn warning(&self) -> Option<String> {
        (self.gave_up > 0).then(|| {
            format!(
                "PM sampling: {} streamed drain(s) wrote their kernels without waiting for their samples: the \
                 decoder had given no sample, or no kernel had passed it, for {STALL_DRAINS} drains in a row",
                self.gave_up
            )
        })
    }
}

/// What [`PmStream`] wrote and held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmStreamCounts {
    /// Samples written to `pm_samples/`.
    pub samples: u64,
    /// Kernels written to `pm/` (one row per metric each).
    pub kernels: u64,
    /// Kernels folded but not written to `pm/`: shorter than [`MIN_KERNEL_WINDOWS`] of a
    /// sample window, with [`PmKernelRows::Covered`].
    pub short_left_out: u64,
    /// Their GPU time, ns.
    pub short_left_out_ns: u64,
    /// Of those, kernels no sample covered (every value blank).
    pub blank_kernels: u64,
    /// Of those, blank kernels that were written once kernels stopped waiting (the decoder
    /// had stopped or stalled).
    pub released_blank: u64,
    /// The most samples held after a drain.
    pub most_held: u64,
}

/// The end of a streamed run's PM side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PmStreamEnd {
    /// `pm` and `pm_samples`.
    pub tables: Vec<(&'static str, PartsWritten)>,
    /// The counts.
    pub counts: PmStreamCounts,
    /// What a reader must know.
    pub warnings: Vec<String>,
}

impl PmStream {
    /// Opens `dir/pm/` and `dir/pm_samples/` for samples of `metrics`; `meta_json` is the
    /// streamed tables' `gmprof.meta`.
    pub fn create(
        dir: &Path,
        meta_json: &str,
        policy: SegmentPolicy,
        metrics: Vec<PmMetric>,
        kernel_rows: PmKernelRows,
    ) -> Result<Self> {
        let open = |table: &'static str, what: &'static str, columns| {
            let metadata = vec![(KEY_TABLE.to_owned(), table.to_owned()), (KEY_META.to_owned(), meta_json.to_owned())];
            PartWriter::create(&dir.join(table), what, columns, metadata, policy)
        };
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        let sample_columns = pm_sample_columns(&names);
        Ok(Self {
            units: metrics.iter().map(PmMetric::integral_unit).collect(),
            rows: open("pm", "streamed PM values", pm_columns())?,
            samples: open("pm_samples", "streamed PM samples", sample_columns)?,
            metrics,
            held: Vec::new(),
            context: Vec::new(),
            horizon: None,
            counts: PmStreamCounts::default(),
            kernel_rows,
        })
    }

    /// Takes one drain's samples (in time order): each is written to `pm_samples/` once and
    /// held.
    pub fn feed(&mut self, samples: Vec<PmSample>) -> Result<()> {
        let metrics = self.metrics.len();
        for s in samples {
            self.samples.row(|w| push_pm_sample(w, &s, metrics))?;
            self.counts.samples += 1;
            self.horizon = Some(self.horizon.map_or(s.end_ns, |h| h.max(s.end_ns)));
            self.held.push(s);
        }
        Ok(())
    }

    /// Folds a drain's kernel rows over the held samples and writes them to `pm/`;
    /// `released`: they did not wait for the decoder ([`PmWait::released`]).
    pub fn kernels(&mut self, rows: &[KernelRow], released: bool) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let waiting = !released;
        let folded = pm_fold::fold_kernels(&self.metrics, &self.held, &self.context, rows);
        for row in folded.into_iter().flatten() {
            let short = row.values.iter().flatten().next().is_some_and(|v| v.windows < MIN_KERNEL_WINDOWS);
            if short && self.kernel_rows == PmKernelRows::Covered {
                self.counts.short_left_out += 1;
                self.counts.short_left_out_ns += row.end_ns.saturating_sub(row.start_ns);
                continue;
            }
            for (index, metric) in self.metrics.iter().enumerate() {
                let unit = self.units[index].as_deref();
                self.rows.row(|w| push_pm_value(w, &row, index, metric, unit))?;
            }
            self.counts.kernels += 1;
            if row.values.iter().all(Option::is_none) {
                self.counts.blank_kernels += 1;
                self.counts.released_blank += u64::from(!waiting);
            }
        }
        self.context.extend(rows.iter().filter(|k| k.end_ns.is_some()).cloned());
        Ok(())
    }

    /// Drops the samples no kernel still to be written can overlap: those ending before
    /// `oldest_waiting` ([`Correlator::oldest_waiting_ns`]; `None`: no kernel waits, so
    /// before the horizon), but for the last [`TAIL_SAMPLES`] of them, and the context
    /// kernels that ended before the first sample kept.
    ///
    /// [`Correlator::oldest_waiting_ns`]: crate::analysis::correlate::Correlator::oldest_waiting_ns
    pub fn prune(&mut self, oldest_waiting: Option<u64>) {
        let horizon = self.horizon.unwrap_or(0);
        let bound = oldest_waiting.map_or(horizon, |o| o.min(horizon));
        let before = self.held.partition_point(|s| s.end_ns <= bound);
        self.held.drain(..before.saturating_sub(TAIL_SAMPLES));
        let first = self.held.first().map_or(u64::MAX, |s| s.start_ns);
        self.context.retain(|k| k.end_ns.is_some_and(|e| e > first));
        self.counts.most_held = self.counts.most_held.max(self.held.len() as u64);
    }

    /// The sampled metrics, in value order.
    pub fn metrics(&self) -> &[PmMetric] {
        &self.metrics
    }

    /// Samples held now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Closes the segments due at `now`.
    pub fn tick(&mut self, now: Instant) -> Result<()> {
        self.rows.tick(now)?;
        self.samples.tick(now)?;
        Ok(())
    }

    /// Closes the open segments.
    pub fn close_segments(&mut self) -> Result<()> {
        self.rows.close_segment()?;
        self.samples.close_segment()
    }

    /// Bytes of the open segments.
    pub fn open_bytes(&self) -> usize {
        self.rows.open_bytes() + self.samples.open_bytes()
    }

    /// Ends the tables; says what the reader must know.
    pub fn finish(self) -> Result<PmStreamEnd> {
        let counts = self.counts;
        let mut warnings = Vec::new();
        if counts.released_blank > 0 {
            warnings.push(format!(
                "PM sampling: {} kernel(s) were streamed with blank PM values: no decoded sample covers them \
                 (sampling stopped, failed or stalled before they ran)",
                counts.released_blank
            ));
        }
        let tables = vec![("pm", self.rows.finish()?), ("pm_samples", self.samples.finish()?)];
        Ok(PmStreamEnd { tables, counts, warnings })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(start_ns: u64) -> PmSample {
        PmSample { start_ns, end_ns: start_ns + 100, values: vec![Some(1.0)] }
    }

    /// Samples that never pass the kernels held (a sampler on another clock) hold them for
    /// [`STALL_DRAINS`] drains at most; then one drain releases them, and waiting resumes.
    #[test]
    fn kernels_held_past_the_samples_stop_waiting_after_stall_drains() {
        let mut wait = PmWait::default();
        let mut horizons = Vec::new();
        for drain in 0..(2 * STALL_DRAINS as u64 + 2) {
            wait.observe(&PmFeed { samples: vec![sample(drain * 100)], decoding: true });
            horizons.push(wait.wait_horizon(true));
            // The kernels end past every sample: none drains while they are held.
            wait.drained(0, true);
        }
        let released: Vec<usize> = (0..horizons.len()).filter(|&i| horizons[i].is_none()).collect();
        assert_eq!(released, vec![STALL_DRAINS as usize, 2 * STALL_DRAINS as usize + 1], "{horizons:?}");
        assert_eq!(horizons[0], Some(100));
        assert!(wait.warning().is_some_and(|w| w.contains("2 streamed drain(s)")), "{:?}", wait.warning());
        // A decoder that stopped holds nothing.
        wait.observe(&PmFeed { samples: Vec::new(), decoding: false });
        assert_eq!(wait.wait_horizon(true), None);
    }

    /// Every sample fed is written once; those before the oldest kernel waiting go, but for
    /// the tail.
    #[test]
    fn samples_are_written_once_and_pruned_to_the_oldest_kernel_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = vec![PmMetric::new("dram__bytes_read.sum.per_second", "byte/second")];
        let mut pm =
            PmStream::create(dir.path(), "{}", SegmentPolicy::default(), metrics, PmKernelRows::default()).unwrap();
        pm.feed((0..100).map(|i| sample(i * 100)).collect()).unwrap();
        pm.prune(Some(5_000));
        assert_eq!(pm.held(), 50 + TAIL_SAMPLES);
        pm.prune(None);
        assert_eq!(pm.held(), TAIL_SAMPLES);
        let end = pm.finish().unwrap();
        assert_eq!(end.counts.samples, 100);
        assert_eq!(end.tables.iter().find(|t| t.0 == "pm_samples").map(|t| t.1.rows), Some(100));
    }

    fn kernel(correlation_id: u32, start_ns: u64, end_ns: u64) -> KernelRow {
        use crate::analysis::correlate::{Granularity, KernelStatus, TimeSource};
        KernelRow {
            range_id: None,
            range_path: "step".into(),
            cycle: None,
            ordinal: None,
            correlation_id,
            kernel_name: Some("k".into()),
            mangled_name: Some("k".into()),
            grid: Some([1, 1, 1]),
            block: Some([32, 1, 1]),
            registers_per_thread: None,
            shared_memory_bytes: None,
            stream_id: Some(7),
            thread: Some(1),
            launch_ns: None,
            launch_end_ns: None,
            api_name: None,
            device_id: Some(0),
            start_ns: Some(start_ns),
            end_ns: Some(end_ns),
            duration_ns: Some(end_ns - start_ns),
            time_source: TimeSource::Activity,
            range_duration_ns: None,
            metrics: Vec::new(),
            status: KernelStatus::Ok,
            granularity: Granularity::Kernel,
            graph_id: None,
            graph_node_id: None,
            graph_kernels: None,
        }
    }

    /// Kernels written by each [`PmKernelRows`] setting: by default only those that fill
    /// half a sample window or more, and those no sample covers (blank, said); with `all`
    /// every kernel. The rest are counted.
    #[test]
    fn kernels_shorter_than_half_a_window_are_counted_not_written_by_default() {
        let window = 1_000;
        let samples: Vec<PmSample> = (0..20u64)
            .map(|i| PmSample { start_ns: i * window, end_ns: (i + 1) * window, values: vec![Some(2.0e9)] })
            .collect();
        // 0.2, 0.4, 0.5, 0.9 and 3 windows long; the last one past every sample.
        let kernels = vec![
            kernel(1, 1_000, 1_200),
            kernel(2, 2_000, 2_400),
            kernel(3, 3_000, 3_500),
            kernel(4, 4_000, 4_900),
            kernel(5, 6_000, 9_000),
            kernel(6, 50_000, 51_000),
        ];
        let written = |rows: PmKernelRows| {
            let dir = tempfile::tempdir().unwrap();
            let metrics = vec![PmMetric::new("dram__bytes_read.sum.per_second", "byte/second")];
            let mut pm = PmStream::create(dir.path(), "{}", SegmentPolicy::default(), metrics, rows).unwrap();
            pm.feed(samples.clone()).unwrap();
            pm.kernels(&kernels, true).unwrap();
            let end = pm.finish().unwrap();
            let table = end.tables.iter().find(|(n, _)| *n == "pm").map(|(_, p)| p.rows);
            (
                table,
                end.counts.kernels,
                end.counts.short_left_out,
                end.counts.blank_kernels,
                end.counts.short_left_out_ns,
            )
        };
        // Covered: kernels 3, 4 and 5 (0.5 window and more) and the blank kernel 6.
        assert_eq!(written(PmKernelRows::Covered), (Some(4), 4, 2, 1, 600));
        assert_eq!(written(PmKernelRows::All), (Some(6), 6, 0, 1, 0));
        assert_eq!(PmKernelRows::parse("all"), Some(PmKernelRows::All));
        assert_eq!(PmKernelRows::parse(PmKernelRows::Covered.as_str()), Some(PmKernelRows::Covered));
        assert_eq!(PmKernelRows::parse("some"), None);
    }
}
