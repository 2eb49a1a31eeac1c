//! Attributing PM samples to the kernels that ran during them.
//!
//! A PM sample holds a metric's average over its window. When a window holds parts of several
//! kernels, or a kernel and idle time, its amount (value × window) belongs to them in some
//! unknown split. Weighting by overlap alone (what [`super::pm_fold::fold`] does) assumes the
//! metric was constant over the window, so an interval whose edge windows hold a busier or idler
//! neighbour takes that neighbour's rate: measured on an H100 with 100 µs samples, 2 ms
//! training-step ranges came out 8 to 13 % high.
//!
//! Here every kernel `k` gets a mean value `r_k` over its activity interval, and the idle time
//! between kernels one shared background value `r_0`, such that every window's amount is
//! explained by the elements that overlap it:
//!
//! ```text
//! A_i = v_i · |window_i|  ≈  Σ_k r_k · |window_i ∩ element_k|
//! ```
//!
//! The `r_k ≥ 0` are found with Richardson–Lucy (expectation-maximization) iterations,
//! starting from the overlap-weighted means:
//!
//! ```text
//! r_k ← r_k · Σ_i o_ik · A_i / (Σ_j r_j o_ij)  /  Σ_i o_ik
//! ```
//!
//! Each step keeps every window's amount (nothing is created or lost) and moves it towards the
//! elements whose other windows say they are busy: a window straddling a 2 TB/s kernel and a
//! 300 GB/s one is split by what the windows around each of them show. Where the data cannot
//! tell (two kernels that only ever share one window), the split stays the overlap-weighted one.
//! A kernel that no window overlaps gets no value.

/// Iterations at most; they stop earlier once no value moves by more than [`TOLERANCE`].
pub const MAX_ITERATIONS: usize = 500;

/// Relative change under which the iterations stop.
pub const TOLERANCE: f64 = 1e-7;

/// Iterations for each launch on its own, after its kernel's launches were given one value
/// together ([`deconvolve_grouped`]). One step scales a launch's group value by the
/// overlap-weighted ratio of the amounts its windows measured to the amounts the group values
/// predict there. Iterating on to convergence fits each launch to its few windows alone, and
/// a kernel whose rate is not constant over its run (a GEMM's prologue and epilogue) then
/// takes its neighbours' amounts: on an H100, llm.c's GPT-2 at 20 µs against ncu's per-kernel
/// DRAM read bytes (validation/2026-11-26-pm-attribution-h100.log), converged launches had a
/// p90 error of 15.3 % over kernels of 50 µs or more, one step 11.1 %, two steps 13.3 %, the
/// group value alone 15.2 % (its median 5.0 %, against 2.4 % for one step); on nanoGPT's
/// GPT-2 small (PyTorch) converged 12.8 %, one step 10.2 %, the group value alone 14.1 %.
pub const LAUNCH_STEPS: usize = 1;

/// One window: `[start, end)` and the metric's amount over it (value × width, in value·ns).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// The sample's value (an average over the window).
    pub value: f64,
}

/// The result of [`deconvolve`].
#[derive(Clone, Debug, PartialEq)]
pub struct Attribution {
    /// Each element's mean value over its intervals (`None` when no window overlaps it).
    pub values: Vec<Option<f64>>,
    /// Iterations run.
    pub iterations: usize,
}

/// Overlap of `[a, b)` with `[c, d)`.
fn overlap(a: u64, b: u64, c: u64, d: u64) -> u64 {
    b.min(d).saturating_sub(a.max(c))
}

/// Attributes the windows' amounts to `elements`, each a set of `[start, end)` intervals
/// (a kernel has one; the background has many). `windows` must be sorted by start and must not
/// overlap each other. Values below 0 are taken as 0.
pub fn deconvolve(windows: &[Window], elements: &[Vec<(u64, u64)>]) -> Attribution {
    let (times, values) = split(windows);
    Overlaps::new(&times, elements).solve(&times, &values, None)
}

/// [`deconvolve`], in two stages when `groups` puts elements together (`groups[k]` is element
/// `k`'s group; elements of a group are launches of the same kernel): first one value per group,
/// iterated to convergence, then [`LAUNCH_STEPS`] step for each element on its own, starting
/// from its group's value. Repeated kernels (every training step launches the same ones) are
/// seen at many phases of the windows, so their group's value is well determined even where
/// one launch shares its windows with others; the second stage then scales each launch by what
/// its own windows measured against what the group values predict there.
pub fn deconvolve_grouped(windows: &[Window], elements: &[Vec<(u64, u64)>], groups: &[usize]) -> Attribution {
    let (times, values) = split(windows);
    attribute_each(&times, &[values], elements, groups).pop().expect("one metric")
}

/// [`deconvolve_grouped`] for several metrics sampled in the same windows: `values[m][i]` is
/// metric `m` in window `i` (`None`: not measured there; that window then explains nothing of
/// that metric). The overlaps of windows and elements are computed once for all metrics.
pub fn attribute_each(
    times: &[(u64, u64)],
    values: &[Vec<Option<f64>>],
    elements: &[Vec<(u64, u64)>],
    groups: &[usize],
) -> Vec<Attribution> {
    let overlaps = Overlaps::new(times, elements);
    let pooled = overlaps.pooled(groups);
    values
        .iter()
        .map(|v| {
            let first = pooled.solve(times, v, None);
            let start: Vec<f64> = groups.iter().map(|&g| first.values[g].unwrap_or(0.0)).collect();
            let mut second = overlaps.solve_n(times, v, Some(&start), LAUNCH_STEPS);
            second.iterations += first.iterations;
            second
        })
        .collect()
}

fn split(windows: &[Window]) -> (Vec<(u64, u64)>, Vec<Option<f64>>) {
    (windows.iter().map(|w| (w.start, w.end)).collect(), windows.iter().map(|w| Some(w.value)).collect())
}

/// The sparse overlap matrix: by element, (window index, overlap in ns), by window index.
struct Overlaps {
    columns: Vec<Vec<(usize, f64)>>,
}

impl Overlaps {
    fn new(times: &[(u64, u64)], elements: &[Vec<(u64, u64)>]) -> Overlaps {
        let columns = elements
            .iter()
            .map(|intervals| {
                let mut column: Vec<(usize, f64)> = Vec::new();
                for &(a, b) in intervals {
                    if b <= a {
                        continue;
                    }
                    let first = times.partition_point(|w| w.1 <= a);
                    for (i, &(ws, we)) in times.iter().enumerate().skip(first) {
                        if ws >= b {
                            break;
                        }
                        let o = overlap(a, b, ws, we);
                        if o > 0 {
                            column.push((i, o as f64));
                        }
                    }
                }
                merge_by_window(column)
            })
            .collect();
        Overlaps { columns }
    }

    /// The overlaps of each group: its elements' columns summed.
    fn pooled(&self, groups: &[usize]) -> Overlaps {
        let count = groups.iter().copied().max().map_or(0, |g| g + 1);
        let mut columns: Vec<Vec<(usize, f64)>> = vec![Vec::new(); count];
        for (column, &g) in self.columns.iter().zip(groups) {
            columns[g].extend_from_slice(column);
        }
        Overlaps { columns: columns.into_iter().map(merge_by_window).collect() }
    }

    /// Richardson–Lucy iterations for one metric, from `start` or from the overlap-weighted
    /// means.
    fn solve(&self, times: &[(u64, u64)], values: &[Option<f64>], start: Option<&[f64]>) -> Attribution {
        self.solve_n(times, values, start, MAX_ITERATIONS)
    }
    /// [`Overlaps::solve`] with at most `max` iterations.
    fn solve_n(&self, times: &[(u64, u64)], values: &[Option<f64>], start: Option<&[f64]>, max: usize) -> Attribution {
        let value = |i: usize| values[i].map(|v| v.max(0.0));
        let amount: Vec<f64> =
            times.iter().enumerate().map(|(i, &(a, b))| value(i).unwrap_or(0.0) * (b - a) as f64).collect();
        let measured = |c: &[(usize, f64)]| -> Vec<(usize, f64)> {
            c.iter().copied().filter(|&(i, _)| values[i].is_some()).collect()
        };
        let columns: Vec<Vec<(usize, f64)>> = self.columns.iter().map(|c| measured(c)).collect();
        let covered: Vec<f64> = columns.iter().map(|c| c.iter().map(|&(_, o)| o).sum()).collect();
        // Start from the given values, or from the overlap-weighted mean of the windows each
        // element touches. A value of 0 would stay 0: start such elements just above it.
        let floor = (0..times.len()).filter_map(value).fold(0.0f64, f64::max) * 1e-9;
        let mut rates: Vec<f64> = columns
            .iter()
            .zip(&covered)
            .map(
                |(c, &t)| {
                    if t > 0.0 {
                        c.iter().map(|&(i, o)| value(i).unwrap_or(0.0) * o).sum::<f64>() / t
                    } else {
                        0.0
                    }
                },
            )
            .collect();
        if let Some(start) = start {
            for ((r, &t), &s) in rates.iter_mut().zip(&covered).zip(start) {
                if t > 0.0 {
                    *r = s.max(floor);
                }
            }
        }
        let mut predicted = vec![0.0f64; times.len()];
        let mut iterations = 0;
        while iterations < max {
            iterations += 1;
            predicted.iter_mut().for_each(|p| *p = 0.0);
            for (column, &r) in columns.iter().zip(&rates) {
                for &(i, o) in column {
                    predicted[i] += r * o;
                }
            }
            let mut moved = 0.0f64;
            for ((column, rate), &t) in columns.iter().zip(rates.iter_mut()).zip(&covered) {
                if t == 0.0 || *rate == 0.0 {
                    continue;
                }
                let factor: f64 = column
                    .iter()
                    .map(|&(i, o)| if predicted[i] > 0.0 { o * amount[i] / predicted[i] } else { 0.0 })
                    .sum::<f64>()
                    / t;
                let next = *rate * factor;
                moved = moved.max((next - *rate).abs() / rate.abs().max(f64::MIN_POSITIVE));
                *rate = next;
            }
            if moved < TOLERANCE {
                break;
            }
        }
        let values = rates.iter().zip(&covered).map(|(&r, &t)| (t > 0.0).then_some(r)).collect();
        Attribution { values, iterations }
    }
}

/// Sorts a column by window and sums the entries of each window.
fn merge_by_window(mut column: Vec<(usize, f64)>) -> Vec<(usize, f64)> {
    column.sort_unstable_by_key(|&(i, _)| i);
    let mut merged: Vec<(usize, f64)> = Vec::with_capacity(column.len());
    for (i, o) in column {
        match merged.last_mut() {
            Some(last) if last.0 == i => last.1 += o,
            _ => merged.push((i, o)),
        }
    }
    merged
}

/// The idle time of `[from, to)` between the merged busy intervals `busy` (sorted).
pub fn idle_between(busy: &[(u64, u64)], from: u64, to: u64) -> Vec<(u64, u64)> {
    let mut gaps = Vec::new();
    let mut cursor = from;
    for &(s, e) in busy {
        if e <= cursor {
            continue;
        }
        if s >= to {
            break;
        }
        if s > cursor {
            gaps.push((cursor, s));
        }
        cursor = cursor.max(e);
    }
    if cursor < to {
        gaps.push((cursor, to));
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// Windows of `width` from 0 over a piecewise-constant signal.
    fn sample(signal: &[(u64, u64, f64)], width: u64, count: u64) -> Vec<Window> {
        (0..count)
            .map(|i| {
                let (a, b) = (i * width, (i + 1) * width);
                let amount: f64 = signal.iter().map(|&(s, e, v)| v * overlap(a, b, s, e) as f64).sum();
                Window { start: a, end: b, value: amount / width as f64 }
            })
            .collect()
    }

    #[test]
    fn adjacent_kernels_of_different_rates_are_recovered() {
        // k1 at 10 for 150 µs, k2 at 1 for 150 µs, then idle; 100 µs windows.
        let signal = [(0, 150 * US, 10.0), (150 * US, 300 * US, 1.0)];
        let windows = sample(&signal, 100 * US, 5);
        let busy = [(0, 300 * US)];
        let elements = vec![vec![(0, 150 * US)], vec![(150 * US, 300 * US)], idle_between(&busy, 0, 500 * US)];
        let a = deconvolve(&windows, &elements);
        let v: Vec<f64> = a.values.iter().map(|v| v.unwrap()).collect();
        assert!((v[0] - 10.0).abs() < 1e-3, "{v:?}");
        assert!((v[1] - 1.0).abs() < 1e-3, "{v:?}");
        assert!(v[2].abs() < 1e-3, "{v:?}");
        // The overlap-weighted start was 7 and 2.5: the middle window's 5.5 split by time.
    }

    #[test]
    fn amounts_are_conserved() {
        // Concurrent kernels and a background, with noise-free windows: Σ r·o = Σ A.
        let signal = [(10 * US, 90 * US, 4.0), (30 * US, 60 * US, 2.0), (120 * US, 130 * US, 7.0)];
        let windows = sample(&signal, 25 * US, 8);
        let elements =
            vec![vec![(10 * US, 90 * US)], vec![(30 * US, 60 * US)], vec![(120 * US, 130 * US)], vec![(0, 10 * US)]];
        let a = deconvolve(&windows, &elements);
        let total: f64 = windows.iter().map(|w| w.value * (w.end - w.start) as f64).sum();
        let explained: f64 = elements
            .iter()
            .zip(&a.values)
            .map(|(e, v)| v.unwrap_or(0.0) * e.iter().map(|&(s, t)| (t - s) as f64).sum::<f64>())
            .sum();
        assert!((explained - total).abs() / total < 1e-6, "{explained} vs {total}");
    }

    #[test]
    fn an_element_no_window_covers_has_no_value() {
        let windows = vec![Window { start: 0, end: 10, value: 1.0 }];
        let a = deconvolve(&windows, &[vec![(0, 10)], vec![(20, 30)]]);
        assert_eq!(a.values[1], None);
        assert!((a.values[0].unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn metrics_share_the_overlaps_and_an_unmeasured_window_explains_nothing() {
        // k1 at 10 for 150 µs, k2 at 1 for 150 µs, 100 µs windows; metric 1 is the same signal
        // ×2 with its first window unmeasured: k1 is then known from its second window alone.
        let signal = [(0, 150 * US, 10.0), (150 * US, 300 * US, 1.0)];
        let windows = sample(&signal, 100 * US, 4);
        let times: Vec<(u64, u64)> = windows.iter().map(|w| (w.start, w.end)).collect();
        let m0: Vec<Option<f64>> = windows.iter().map(|w| Some(w.value)).collect();
        let mut m1: Vec<Option<f64>> = windows.iter().map(|w| Some(2.0 * w.value)).collect();
        m1[0] = None;
        let busy = [(0, 300 * US)];
        let elements = vec![vec![(0, 150 * US)], vec![(150 * US, 300 * US)], idle_between(&busy, 0, 400 * US)];
        let out = attribute_each(&times, &[m0, m1], &elements, &[0, 1, 2]);
        assert!((out[0].values[0].unwrap() - 10.0).abs() < 1e-3, "{:?}", out[0]);
        assert!((out[0].values[1].unwrap() - 1.0).abs() < 1e-3, "{:?}", out[0]);
        assert!((out[1].values[0].unwrap() - 20.0).abs() < 1e-3, "{:?}", out[1]);
        assert!((out[1].values[1].unwrap() - 2.0).abs() < 1e-3, "{:?}", out[1]);
        // An element whose only windows are unmeasured has no value for that metric.
        let mut m2: Vec<Option<f64>> = windows.iter().map(|w| Some(w.value)).collect();
        m2[0] = None;
        let out = attribute_each(&times, &[m2], &[vec![(0, 50 * US)]], &[0]);
        assert_eq!(out[0].values[0], None);
    }

    #[test]
    fn idle_time_is_the_complement_of_busy_time() {
        let busy = [(10, 20), (30, 40)];
        assert_eq!(idle_between(&busy, 0, 50), vec![(0, 10), (20, 30), (40, 50)]);
        assert_eq!(idle_between(&busy, 15, 35), vec![(20, 30)]);
        assert_eq!(idle_between(&[], 5, 9), vec![(5, 9)]);
    }
}
