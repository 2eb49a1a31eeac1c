//! What the HTML report draws of a streamed run ([`StreamedView`]): step time over the run,
//! downsampled to at most [`MAX_STEP_POINTS`] points that keep each bucket's minimum and
//! maximum (a single slow step stays visible however long the run), the slowest steps and
//! the slow windows of steps marked, and the whole run's aggregates as tables.
//!
//! The steps come from `report.json`'s steps table (the run's first 100 000 steps; the rest
//! are in `steps/` and counted in [`StreamedView::steps_left_out`]). Imports the streamed
//! summary and the online rows; `data` holds the view in [`HtmlData`](super::data::HtmlData).

use serde::Serialize;

use crate::analysis::online::{AggregateQuantity, AggregateRow, AggregateTable, StepRow};
use crate::report::stream::summary::StreamedSummary;

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
    /// Its first and last step in the series.
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

/// The series of `steps` (in step order) in at most [`MAX_STEP_POINTS`] points, and the steps
/// per point.
pub fn downsample(steps: &[StepRow]) -> (Vec<StepPoint>, u64) {
    let bucket = steps.len().div_ceil(MAX_STEP_POINTS).max(1);
    let points = steps
        .chunks(bucket)
        .map(|chunk| {
            let (mut wall, mut gpu) = (Bucket::default(), Bucket::default());
            for s in chunk {
                wall.add(s.wall_time_ns);
                gpu.add(s.gpu_time_ns);
            }
            StepPoint {
                first_step: chunk[0].step,
                last_step: chunk[chunk.len() - 1].step,
                wall: wall.triple(),
                gpu: gpu.triple(),
            }
        })
        .collect();
    (points, bucket as u64)
}

fn windows(steps: &[StepRow]) -> Vec<WindowView> {
    let mut out: Vec<(WindowView, Bucket)> = Vec::new();
    for s in steps {
        match out.last_mut() {
            Some((w, b)) if w.window == s.window => {
                w.last_step = s.step;
                b.add(s.wall_time_ns);
            }
            _ => {
                let mut b = Bucket::default();
                b.add(s.wall_time_ns);
                let w = WindowView {
                    window: s.window,
                    first_step: s.step,
                    last_step: s.step,
                    mean_wall_ns: None,
                    slow: false,
                };
                out.push((w, b));
            }
        }
    }
    let mut means: Vec<f64> = out.iter().filter_map(|(_, b)| b.triple()[1]).collect();
    means.sort_by(f64::total_cmp);
    // The lower median, so that one slow window of two is marked against the other.
    let median = (means.len() >= 2).then(|| means[(means.len() - 1) / 2]);
    out.into_iter()
        .map(|(mut w, b)| {
            w.mean_wall_ns = b.triple()[1];
            w.slow = median.zip(w.mean_wall_ns).is_some_and(|(m, v)| v >= SLOW_WINDOW_FACTOR * m && v > m);
            w
        })
        .collect()
}

fn top(s: &StreamedSummary, table: AggregateTable, quantity: AggregateQuantity) -> Vec<AggregateRow> {
    let mut rows: Vec<AggregateRow> =
        s.aggregates.iter().filter(|a| a.table == table && a.quantity == quantity).cloned().collect();
    rows.sort_by(|a, b| b.summary.total_ns.cmp(&a.summary.total_ns).then_with(|| a.key.cmp(&b.key)));
    rows.truncate(MAX_AGGREGATE_ROWS);
    rows
}

impl StreamedView {
    /// The view of a streamed run's summary.
    pub fn of(s: &StreamedSummary) -> Self {
        let (series, bucket) = downsample(&s.steps_table);
        let mut slow: Vec<&StepRow> = s.steps_table.iter().filter(|r| r.wall_time_ns.is_some()).collect();
        slow.sort_by(|a, b| b.wall_time_ns.cmp(&a.wall_time_ns).then(a.step.cmp(&b.step)));
        let slow_steps = slow
            .into_iter()
            .take(SLOW_STEPS)
            .map(|r| SlowStep {
                step: r.step,
                path: r.path.clone(),
                wall_time_ns: r.wall_time_ns.unwrap_or(0),
                gpu_time_ns: r.gpu_time_ns,
            })
            .collect();
        StreamedView {
            why: s.why.clone(),
            steps: s.steps,
            step_group: s.step_group.clone(),
            steps_shown: s.steps_table.len() as u64,
            steps_left_out: s.steps_table_left_out,
            bucket,
            series,
            slow_steps,
            windows: windows(&s.steps_table),
            ranges: top(s, AggregateTable::Range, AggregateQuantity::GpuTimeNs),
            kernels: top(s, AggregateTable::Kernel, AggregateQuantity::DurationNs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            groups: Vec::new(),
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
        let (series, bucket) = downsample(&steps);
        assert_eq!(bucket, 5);
        assert_eq!(series.len(), 2_000);
        let spike = series.iter().find(|p| p.first_step <= 4_321 && 4_321 <= p.last_step).unwrap();
        assert_eq!(spike.wall[2], Some(9_000_000.0), "the slow step is the bucket's max");
        assert_eq!(spike.wall[0], Some(1_000_000.0));
        assert_eq!(spike.wall[1], Some((4.0 * 1e6 + 9e6) / 5.0));
        assert_eq!(series[3].wall[1], Some(1e6), "step 17 not measured: left out of its bucket's mean");
        let s = StreamedSummary { steps: 10_000, steps_table: steps, ..StreamedSummary::default() };
        let view = StreamedView::of(&s);
        assert_eq!(view.slow_steps[0].step, 4_321);
        assert_eq!(view.slow_steps.len(), SLOW_STEPS);
        assert!(view.slow_steps[1..].iter().all(|s| (7_000..8_000).contains(&s.step)), "{:?}", view.slow_steps);
        assert_eq!(view.windows.len(), 10);
        let slow: Vec<u64> = view.windows.iter().filter(|w| w.slow).map(|w| w.window).collect();
        assert_eq!(slow, [7]);
        assert_eq!((view.windows[7].first_step, view.windows[7].last_step), (7_000, 7_999));
    }

    #[test]
    fn no_steps_no_points() {
        let view = StreamedView::of(&StreamedSummary::default());
        assert!(view.series.is_empty() && view.windows.is_empty() && view.slow_steps.is_empty());
        assert_eq!(view.bucket, 1);
    }
}
