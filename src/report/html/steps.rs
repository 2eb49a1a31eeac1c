//! What the HTML report draws of a streamed run ([`StreamedView`]): step time over the run,
//! downsampled to at most [`MAX_STEP_POINTS`] points that keep each bucket's minimum and
//! maximum (a single slow step stays visible however long the run), the slowest steps and
//! the slow windows of steps marked, and the whole run's aggregates as tables.
//!
//! The steps come from the run's `steps/` parts when its directory is known
//! ([`StreamedView::of_parts`], every step, read one batch at a time through [`StepSeries`]),
//! else from `report.json`'s steps table (the run's first 100 000 steps; the rest counted in
//! [`StreamedView::steps_left_out`]). Imports the streamed summary, the online rows and the
//! part reader; `data` holds the view in [`HtmlData`](super::data::HtmlData).

use std::path::Path;

use serde::Serialize;

use crate::analysis::online::{AggregateQuantity, AggregateRow, AggregateTable};
use crate::error::Result;
use crate::report::stream::summary::StreamedSummary;
use crate::report::tables::parquet::part_reader::read_parts;

/// Most points of the step-time series.
pub const MAX_STEP_POINTS: usize = 2_000;
/// Slowest steps marked.
pub const SLOW_STEPS: usize = 10;
/// A window of steps is marked slow when its mean step time is at least this much above the
/// median of the windows' means.
pub const SLOW_WINDOW_FACTOR: f64 = 1.10;
/// Most rows of each aggregates table.
pub const MAX_AGGREGATE_ROWS: usize = 2_000;

/// One point of the series: a bucket of consecutive steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepPoint {
    /// Its first step.
    pub first_step: u64,
    /// Its last step.
    pub last_step: u64,
    /// Wall time per step (pop − push): min, mean, max over the bucket's measured steps, ns.
    pub wall: [Option<f64>; 3],
    /// GPU time per step: min, mean, max, ns.
    pub gpu: [Option<f64>; 3],
}

/// One of the slowest steps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlowStep {
    /// Its number.
    pub step: u64,
    /// The step range's path.
    pub path: String,
    /// Wall time, ns.
    pub wall_time_ns: u64,
    /// GPU time, ns (`None`: not measured).
    pub gpu_time_ns: Option<u64>,
}

/// One window of steps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowView {
    /// Its number.
    pub window: u64,
    /// Its first step in the series.
    pub first_step: u64,
    /// Its last step.
    pub last_step: u64,
    /// Mean wall time per step, ns (`None`: none measured).
    pub mean_wall_ns: Option<f64>,
    /// Its mean is at least [`SLOW_WINDOW_FACTOR`] times the median window's.
    pub slow: bool,
}

/// A streamed run, for the page; see the [module docs](self).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StreamedView {
    /// Why the run streamed.
    pub why: String,
    /// Steps of the run.
    pub steps: u64,
    /// The step range group.
    pub step_group: Option<String>,
    /// Steps in the series.
    pub steps_shown: u64,
    /// Steps of the run not in report.json's steps table (in `steps/` only).
    pub steps_left_out: u64,
    /// Steps per point.
    pub bucket: u64,
    /// The series.
    pub series: Vec<StepPoint>,
    /// The slowest steps by wall time, slowest first.
    pub slow_steps: Vec<SlowStep>,
    /// The windows of steps.
    pub windows: Vec<WindowView>,
    /// Range groups' GPU time, whole run, by total.
    pub ranges: Vec<AggregateRow>,
    /// Kernels' durations, whole run, by total.
    pub kernels: Vec<AggregateRow>,
    /// Where the steps were read: `steps/` (every step) or `report.json` (its steps table).
    pub steps_source: String,
    /// Step part files that could not be read, each `steps/part-NNNNN.parquet: why`.
    pub left_out: Vec<String>,
}

#[derive(Default)]
struct Bucket {
    min: Option<u64>,
    max: Option<u64>,
    sum: f64,
    n: u64,
}

impl Bucket {
    fn add(&mut self, v: Option<u64>) {
        let Some(v) = v else { return };
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
        self.sum += v as f64;
        self.n += 1;
    }

    fn triple(&self) -> [Option<f64>; 3] {
        let mean = (self.n > 0).then(|| self.sum / self.n as f64);
        [self.min.map(|v| v as f64), mean, self.max.map(|v| v as f64)]
    }
}

/// The series, slowest steps and windows of a run's steps, fed one step at a time in step
/// order: memory is bounded by [`MAX_STEP_POINTS`], [`SLOW_STEPS`] and the windows, not by
/// the steps.
#[derive(Default)]
pub struct StepSeries {
    bucket: u64,
    points: Vec<StepPoint>,
    open: Option<(StepPoint, Bucket, Bucket, u64)>,
    slow: Vec<SlowStep>,
    windows: Vec<(WindowView, Bucket)>,
    added: u64,
}

impl StepSeries {
    /// A series of about `expected` steps (the run's count): `ceil(expected / MAX_STEP_POINTS)`
    /// steps per point.
    pub fn new(expected: u64) -> Self {
        Self { bucket: expected.div_ceil(MAX_STEP_POINTS as u64).max(1), ..Self::default() }
    }

    /// Steps added.
    pub fn added(&self) -> u64 {
        self.added
    }

    /// Adds the next step.
    pub fn add(&mut self, step: u64, path: &str, wall: Option<u64>, gpu: Option<u64>, window: u64) {
        self.added += 1;
        let (point, w, g, n) = self.open.get_or_insert_with(|| {
            (StepPoint { first_step: step, ..StepPoint::default() }, Bucket::default(), Bucket::default(), 0)
        });
        point.last_step = step;
        w.add(wall);
        g.add(gpu);
        *n += 1;
        if *n >= self.bucket {
            self.close_point();
        }
        if let Some(wall_time_ns) = wall {
            let slower = |s: &SlowStep| (s.wall_time_ns, std::cmp::Reverse(s.step));
            let candidate = (wall_time_ns, std::cmp::Reverse(step));
            if self.slow.len() < SLOW_STEPS || self.slow.last().is_some_and(|last| candidate > slower(last)) {
                self.slow.push(SlowStep { step, path: path.to_owned(), wall_time_ns, gpu_time_ns: gpu });
                self.slow.sort_by_key(|s| std::cmp::Reverse(slower(s)));
                self.slow.truncate(SLOW_STEPS);
            }
        }
        match self.windows.last_mut() {
            Some((w, b)) if w.window == window => {
                w.last_step = step;
                b.add(wall);
            }
            _ => {
                let mut b = Bucket::default();
                b.add(wall);
                let w = WindowView { window, first_step: step, last_step: step, mean_wall_ns: None, slow: false };
                self.windows.push((w, b));
            }
        }
    }

    fn close_point(&mut self) {
        if let Some((mut point, w, g, _)) = self.open.take() {
            point.wall = w.triple();
            point.gpu = g.triple();
            self.points.push(point);
        }
    }

    /// The points, the steps per point, the slowest steps (slowest first) and the windows.
    pub fn finish(mut self) -> (Vec<StepPoint>, u64, Vec<SlowStep>, Vec<WindowView>) {
        self.close_point();
        let mut means: Vec<f64> = self.windows.iter().filter_map(|(_, b)| b.triple()[1]).collect();
        means.sort_by(f64::total_cmp);
        // The lower median, so that one slow window of two is marked against the other.
        let median = (means.len() >= 2).then(|| means[(means.len() - 1) / 2]);
        let windows = self
            .windows
            .into_iter()
            .map(|(mut w, b)| {
                w.mean_wall_ns = b.triple()[1];
                w.slow = median.zip(w.mean_wall_ns).is_some_and(|(m, v)| v >= SLOW_WINDOW_FACTOR * m && v > m);
                w
            })
            .collect();
        (self.points, self.bucket, self.slow, windows)
    }
}

fn top(s: &StreamedSummary, table: AggregateTable, quantity: AggregateQuantity) -> Vec<AggregateRow> {
    let mut rows: Vec<AggregateRow> =
        s.aggregates.iter().filter(|a| a.table == table && a.quantity == quantity).cloned().collect();
    rows.sort_by(|a, b| b.summary.total_ns.cmp(&a.summary.total_ns).then_with(|| a.key.cmp(&b.key)));
    rows.truncate(MAX_AGGREGATE_ROWS);
    rows
}

impl StreamedView {
    /// The view of a streamed run's summary, its steps from `report.json`'s steps table.
    pub fn of(s: &StreamedSummary) -> Self {
        let mut series = StepSeries::new(s.steps_table.len() as u64);
        for r in &s.steps_table {
            series.add(r.step, &r.path, r.wall_time_ns, r.gpu_time_ns, r.window);
        }
        Self::with(s, series, "report.json", Vec::new())
    }

    /// The view of a streamed run whose outputs are in `dir`: every step of its `steps/` parts
    /// (a corrupt part is named in [`StreamedView::left_out`] and skipped).
    pub fn of_parts(s: &StreamedSummary, dir: &Path) -> Result<Self> {
        let mut series = StepSeries::new(s.steps);
        let int = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        let read = read_parts(dir, "steps", &["step", "path", "wall_time_ns", "gpu_time_ns", "window"], |b| {
            for r in 0..b.len() {
                let step = int(b.int(0, r)?).unwrap_or(0);
                let window = int(b.int(4, r)?).unwrap_or(0);
                series.add(step, b.text(1, r)?.unwrap_or(""), int(b.int(2, r)?), int(b.int(3, r)?), window);
            }
            Ok(())
        })?;
        Ok(Self::with(s, series, "steps/", read.skipped))
    }

    fn with(s: &StreamedSummary, series: StepSeries, source: &str, left_out: Vec<String>) -> Self {
        let shown = series.added();
        let (points, bucket, slow_steps, windows) = series.finish();
        StreamedView {
            why: s.why.clone(),
            steps: s.steps,
            step_group: s.step_group.clone(),
            steps_shown: shown,
            steps_left_out: s.steps.saturating_sub(shown),
            steps_source: source.to_owned(),
            bucket,
            series: points,
            slow_steps,
            windows,
            ranges: top(s, AggregateTable::Range, AggregateQuantity::GpuTimeNs),
            kernels: top(s, AggregateTable::Kernel, AggregateQuantity::DurationNs),
            left_out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::online::StepRow;

    fn step(n: u64, wall: Option<u64>, window: u64) -> StepRow {
        StepRow {
            step: n,
            path: format!("step {n}"),
            start_ns: None,
            end_ns: None,
            wall_time_ns: wall,
            gpu_time_ns: wall.map(|w| w / 2),
            kernels: 1,
            transfers: 0,
            window,
            ..StepRow::default()
        }
    }

    #[test]
    fn a_long_run_is_downsampled_with_each_buckets_min_and_max_kept() {
        // 10 000 steps of 1 ms, one of 9 ms, windows of 1 000 steps, window 7 20 % slower.
        let steps: Vec<StepRow> = (0..10_000u64)
            .map(|n| {
                let base = if n / 1_000 == 7 { 1_200_000 } else { 1_000_000 };
                let wall = if n == 4_321 {
                    Some(9_000_000)
                } else if n == 17 {
                    None
                } else {
                    Some(base)
                };
                step(n, wall, n / 1_000)
            })
            .collect();
        let s = StreamedSummary { steps: 10_000, steps_table: steps, ..StreamedSummary::default() };
        let view = StreamedView::of(&s);
        let series = &view.series;
        assert_eq!(view.bucket, 5);
        assert_eq!(series.len(), 2_000);
        assert_eq!((view.steps_shown, view.steps_left_out), (10_000, 0));
        let spike = series.iter().find(|p| p.first_step <= 4_321 && 4_321 <= p.last_step).unwrap();
        assert_eq!((spike.first_step, spike.last_step), (4_320, 4_324));
        assert_eq!(spike.wall[2], Some(9_000_000.0), "the slow step is the bucket's max");
        assert_eq!(spike.wall[0], Some(1_000_000.0));
        assert_eq!(spike.wall[1], Some((4.0 * 1e6 + 9e6) / 5.0));
        assert_eq!(series[3].wall[1], Some(1e6), "step 17 not measured: left out of its bucket's mean");
        assert_eq!(view.slow_steps[0].step, 4_321);
        assert_eq!(view.slow_steps.len(), SLOW_STEPS);
        assert!(view.slow_steps[1..].iter().all(|s| (7_000..8_000).contains(&s.step)), "{:?}", view.slow_steps);
        assert_eq!(view.windows.len(), 10);
        let slow: Vec<u64> = view.windows.iter().filter(|w| w.slow).map(|w| w.window).collect();
        assert_eq!(slow, [7]);
        assert_eq!((view.windows[7].first_step, view.windows[7].last_step), (7_000, 7_999));
    }

    #[test]
    fn the_steps_of_the_parts_are_those_of_report_json() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/streamed/rank1");
        let report = crate::report::Report::read_json(dir.join("report.json")).unwrap();
        let s = report.streamed.as_ref().unwrap();
        let from_parts = StreamedView::of_parts(s, &dir).unwrap();
        assert_eq!((from_parts.steps_shown, from_parts.steps_left_out), (24, 0));
        assert_eq!(from_parts.steps_source, "steps/");
        assert!(from_parts.left_out.is_empty());
        let from_json = StreamedView::of(s);
        assert_eq!(from_parts.series, from_json.series);
        assert_eq!(from_parts.slow_steps, from_json.slow_steps);
        assert_eq!(from_parts.windows, from_json.windows);
        assert_eq!(from_parts.windows.len(), 3, "windows of 10 steps");
        assert_eq!(from_parts.kernels.len(), 3);
    }

    #[test]
    fn no_steps_no_points() {
        let view = StreamedView::of(&StreamedSummary::default());
        assert!(view.series.is_empty() && view.windows.is_empty() && view.slow_steps.is_empty());
        assert_eq!(view.bucket, 1);
    }
}
