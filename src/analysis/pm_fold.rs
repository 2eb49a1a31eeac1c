//! Folding PM samples into ranges and kernels.
//!
//! A PM sample is a metric's average over `[start, end)`. Over an interval `[a, b)` (a
//! kernel's activity interval, or a range's GPU interval: the first start to the last end of
//! the kernels it launched, nested ranges included) [`fold`] weighs each sample by its overlap
//! `|[start, end) ∩ [a, b)|`:
//!
//! - `peak = max vᵢ` over the samples that overlap;
//! - `samples`: how many samples overlap, and `coverage = Σ overlapᵢ / (b − a)`;
//! - `edge_share`: the part of `Σ vᵢ·overlapᵢ` from samples that straddle `a` or `b`;
//! - and, on its own, `mean = Σ vᵢ·overlapᵢ / Σ overlapᵢ` and for a rate (`*.per_second`)
//!   `total = mean · (b − a)`.
//!
//! Overlap weighting assumes the metric was constant over each sample, so a sample straddling
//! an interval's edge gives it a share of its neighbour's rate. [`fold_report`] therefore takes
//! the mean and the total from [`super::pm_deconvolve`]: each sample's amount is attributed to
//! the kernels that ran during it (and to the idle time between kernels), a kernel's value is
//! its attributed amount over its duration, and a range's is the sum over its kernels (nested
//! ranges' included) over the range's GPU interval. On samples recorded on an H100, 2 ms ranges
//! came within 0.8 % of per_range's DRAM bytes at intervals of 20 to 200 µs, where overlap
//! weighting was off by up to 3 % and 30 % (`tests/pm_recorded.rs`).
//!
//! A value backed by fewer than [`MIN_SAMPLES`] samples is marked `few_samples`: the data
//! then say little about how the sample's amount splits between the kernels in it.
//!
//! Before folding, the samples are put on the activity clock ([`align`]): they already are
//! when they overlap the kernels in time; otherwise they are shifted by the offset that best
//! matches the GR-active metric (when sampled) to the time kernels ran.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{Granularity, KernelRow};
use crate::analysis::pm_deconvolve;
use crate::model::pm::{PmCapture, PmInterval, PmMetric, PmSample};
use crate::model::RangeId;

/// Fewer overlapping samples than this mark a value `few_samples`.
pub const MIN_SAMPLES: u32 = 5;

/// The metric whose samples align the sampler's clock to the activity clock.
pub const ALIGNMENT_METRIC: &str = "gr__cycles_active.avg.pct_of_peak_sustained_elapsed";

/// One metric folded over one interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PmValue {
    /// Time-weighted mean over the covered part of the interval.
    pub mean: f64,
    /// Largest sample value that overlaps the interval.
    pub peak: f64,
    /// For rates: `mean × duration`, the integrated amount (e.g. bytes); `None` otherwise.
    pub total: Option<f64>,
    /// Samples that overlap the interval.
    pub samples: u32,
    /// Fraction of the interval covered by samples (0 to 1).
    pub coverage: f64,
    /// Fewer than [`MIN_SAMPLES`] samples: the value is rough.
    pub few_samples: bool,
    /// Share of `mean × covered time` that comes from samples straddling the interval's
    /// edges (0 to 1; `None` when that product is 0). Such a sample's average also holds
    /// time outside the interval, so the error concentrates there: a large share next to a
    /// busier or idler neighbour means a rough value.
    #[serde(default)]
    pub edge_share: Option<f64>,
    /// Sample windows the interval fills: `Σ overlapᵢ / |windowᵢ|` over the samples that
    /// overlap it (a kernel half a window long has 0.5 however many windows it straddles).
    #[serde(default)]
    pub windows: f64,
    /// How far the value can be trusted ([`PmConfidence`]); `None` in reports written before.
    #[serde(default)]
    pub confidence: Option<PmConfidence>,
}

/// How far a kernel's or range's PM value can be trusted, from how much of the samples'
/// time is its own ([`PmValue::windows`]) and, for a kernel, how many windows the launches of
/// the same kernel (name, grid and block) fill together: the attribution first gives the
/// launches of a kernel one shared value, then moves each by its own samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PmConfidence {
    /// Under half a window of its own, and its kernel's launches fill fewer than
    /// [`GROUP_WINDOWS_MEDIUM`] windows: the value is mostly its neighbours' split.
    Low,
    /// At least half a window of its own, or a kernel whose launches fill
    /// [`GROUP_WINDOWS_MEDIUM`] windows or more together.
    Medium,
    /// At least [`OWN_WINDOWS_HIGH`] windows of its own.
    High,
}

/// Windows of its own from which a value is [`PmConfidence::High`].
pub const OWN_WINDOWS_HIGH: f64 = 2.0;
/// Windows that a kernel's launches fill together from which it is at least
/// [`PmConfidence::Medium`].
pub const GROUP_WINDOWS_MEDIUM: f64 = 10.0;

impl PmConfidence {
    /// The confidence of a value filling `own` windows, whose group (a kernel's launches;
    /// for a range, itself) fills `group`.
    pub fn of(own: f64, group: f64) -> PmConfidence {
        if own >= OWN_WINDOWS_HIGH {
            PmConfidence::High
        } else if own >= 0.5 || group >= GROUP_WINDOWS_MEDIUM {
            PmConfidence::Medium
        } else {
            PmConfidence::Low
        }
    }

    /// Its name in pm.csv.
    pub fn as_str(self) -> &'static str {
        match self {
            PmConfidence::Low => "low",
            PmConfidence::Medium => "medium",
            PmConfidence::High => "high",
        }
    }
}

/// The PM values of one range or kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PmRow {
    /// `range` or `kernel`.
    pub scope: PmScope,
    /// The range (of a range row), or the kernel's innermost range.
    pub range_id: Option<RangeId>,
    /// The range path (of the kernel's range for kernel rows).
    pub path: String,
    /// Instance of the path (range rows).
    pub instance: Option<u32>,
    /// Nesting depth (range rows).
    pub depth: Option<u32>,
    /// Kernel name (kernel rows).
    pub kernel_name: Option<String>,
    /// Correlation id (kernel rows).
    pub correlation_id: Option<u32>,
    /// Start of the folded interval, ns on the activity clock.
    pub start_ns: u64,
    /// End of the folded interval, ns.
    pub end_ns: u64,
    /// One entry per sampled metric; `None` when no sample overlaps.
    pub values: Vec<Option<PmValue>>,
}

/// Whether a [`PmRow`] is a range's or a kernel's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PmScope {
    /// A user range over its GPU interval.
    Range,
    /// A kernel over its activity interval.
    Kernel,
}

/// How the samples were put on the activity clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PmAlignment {
    /// Added to every sample timestamp, ns.
    pub offset_ns: i64,
    /// `same_clock` (samples and kernels overlap in time: one clock, no shift), `gr_active`
    /// (a sampler on another clock, put on the kernels' by fitting GR active to kernel busy
    /// time) or `none` (used as recorded).
    pub method: String,
    /// Mean squared mismatch of GR active (0..1) against kernel busy fraction at the chosen
    /// offset; `None` without a fit.
    pub residual: Option<f64>,
}

/// PM sampling's part of a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PmReport {
    /// The sampled metrics, in value order.
    pub metrics: Vec<PmMetric>,
    /// The configured interval.
    pub interval: Option<PmInterval>,
    /// How the interval was chosen when it was not given (`--pm-interval auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_chosen_by: Option<String>,
    /// Samples kept.
    pub sample_count: u64,
    /// Decodes that reported a hardware-buffer overflow.
    pub hw_buffer_overflows: u64,
    /// Decodes that filled the counter data image.
    pub counter_data_full: u64,
    /// Samples missing between kept ones.
    pub missing_samples: u64,
    /// Samples left out: zero-length, or longer than 4 intervals.
    pub empty_samples: u64,
    /// The clock alignment applied.
    pub alignment: PmAlignment,
    /// Values under this many samples are marked.
    pub min_samples: u32,
    /// Range rows (push order), then kernel rows (launch order).
    pub rows: Vec<PmRow>,
    /// The aligned samples, for the timeline and the HTML plot.
    pub samples: Vec<PmSample>,
}

impl PmReport {
    /// The capture this report was folded from, back on the sampler's clock: what
    /// [`fold_report`] takes to fold a written report again.
    pub fn to_capture(&self) -> PmCapture {
        PmCapture {
            metrics: self.metrics.clone(),
            interval: self.interval,
            samples: self
                .samples
                .iter()
                .map(|s| PmSample {
                    start_ns: shift(s.start_ns, -self.alignment.offset_ns),
                    end_ns: shift(s.end_ns, -self.alignment.offset_ns),
                    values: s.values.clone(),
                })
                .collect(),
            hw_buffer_overflows: self.hw_buffer_overflows,
            counter_data_full: self.counter_data_full,
            missing_samples: self.missing_samples,
            empty_samples: self.empty_samples,
            errors: Vec::new(),
            interval_chosen_by: self.interval_chosen_by.clone(),
        }
    }

    /// The warnings a reader must see: lost samples and decode errors.
    pub fn warnings(&self, errors: &[String]) -> Vec<String> {
        let mut w = Vec::new();
        if self.hw_buffer_overflows > 0 {
            w.push(format!(
                "PM sampling: the hardware buffer overflowed {} time(s); samples were lost (raise the interval or \
                 the buffer size)",
                self.hw_buffer_overflows
            ));
        }
        if self.counter_data_full > 0 {
            w.push(format!(
                "PM sampling: the counter data image filled {} time(s) before the hardware buffer was drained",
                self.counter_data_full
            ));
        }
        if self.missing_samples > 0 {
            w.push(format!(
                "PM sampling: {} sample(s) are missing between kept ones; the affected values have coverage below 1",
                self.missing_samples
            ));
        }
        for e in errors {
            w.push(format!("PM sampling: {e}"));
        }
        w
    }
}

/// Folds metric `metric` of `samples` (sorted by start) over `[a, b)`.
pub fn fold(samples: &[PmSample], metric: usize, is_rate: bool, a: u64, b: u64) -> Option<PmValue> {
    if b <= a {
        return None;
    }
    // The first sample that may overlap: samples are sorted and do not overlap each other.
    let first = samples.partition_point(|s| s.end_ns <= a);
    let (mut weighted, mut covered, mut peak, mut count) = (0.0f64, 0u64, f64::NEG_INFINITY, 0u32);
    let (mut edge, mut windows) = (0.0f64, 0.0f64);
    for s in &samples[first..] {
        if s.start_ns >= b {
            break;
        }
        let Some(v) = s.values.get(metric).copied().flatten() else { continue };
        let overlap = s.end_ns.min(b).saturating_sub(s.start_ns.max(a));
        if overlap == 0 {
            continue;
        }
        weighted += v * overlap as f64;
        if overlap < s.end_ns - s.start_ns {
            edge += v * overlap as f64;
        }
        covered += overlap;
        windows += overlap as f64 / (s.end_ns - s.start_ns) as f64;
        peak = peak.max(v);
        count += 1;
    }
    if covered == 0 {
        return None;
    }
    let mean = weighted / covered as f64;
    let duration = (b - a) as f64;
    Some(PmValue {
        mean,
        peak,
        total: is_rate.then_some(mean * duration * 1e-9),
        samples: count,
        coverage: covered as f64 / duration,
        few_samples: count < MIN_SAMPLES,
        edge_share: (weighted != 0.0).then(|| edge / weighted),
        windows,
        confidence: Some(PmConfidence::of(windows, windows)),
    })
}

/// Merged, sorted kernel intervals.
fn busy_intervals(kernels: &[KernelRow]) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = kernels
        .iter()
        .filter_map(|k| match (k.start_ns, k.end_ns) {
            (Some(s), Some(e)) if e > s => Some((s, e)),
            _ => None,
        })
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Time of `[a, b)` covered by `busy` (merged, sorted).
fn busy_time(busy: &[(u64, u64)], a: u64, b: u64) -> u64 {
    let first = busy.partition_point(|&(_, e)| e <= a);
    let mut t = 0;
    for &(s, e) in &busy[first..] {
        if s >= b {
            break;
        }
        t += e.min(b).saturating_sub(s.max(a));
    }
    t
}

fn shift(t: u64, offset: i64) -> u64 {
    (t as i128 + offset as i128).clamp(0, u64::MAX as i128) as u64
}

/// Mean squared mismatch of GR active (as a fraction) against the kernel-busy fraction of
/// each sample shifted by `offset`.
fn mismatch(samples: &[PmSample], stride: usize, metric: usize, busy: &[(u64, u64)], offset: i64) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for s in samples.iter().step_by(stride.max(1)) {
        let Some(v) = s.values.get(metric).copied().flatten() else { continue };
        let (a, b) = (shift(s.start_ns, offset), shift(s.end_ns, offset));
        if b <= a {
            continue;
        }
        let busy_fraction = busy_time(busy, a, b) as f64 / (b - a) as f64;
        let d = (v / 100.0).clamp(0.0, 1.0) - busy_fraction;
        sum += d * d;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}

/// The offset that puts the samples on the activity clock.
///
/// Samples that overlap the kernels in time are on the kernels' clock (`same_clock`, offset 0;
/// the residual below is reported at 0). Samples that do not overlap them at all come from a
/// sampler on another clock: with the GR-active metric sampled, the offset is the one with the
/// least mismatch between GR active and the fraction of each sample during which a kernel ran
/// (`gr_active`), searched over up to 2000 offsets that put each sample start on the first
/// kernel's start (on a run of more than 2000 samples these are several samples apart, and
/// the fit can miss: its residual is reported), then within ±8 sample widths of the best in steps of an eighth, then around
/// the best in steps eight times finer each round, down to 1/512 of a sample. Long runs are
/// scored on every k-th sample (at most 50 000, 5 000 in the first search). Otherwise the
/// samples are used as recorded (`none`).
pub fn align(capture: &PmCapture, kernels: &[KernelRow]) -> PmAlignment {
    let none = PmAlignment { offset_ns: 0, method: "none".into(), residual: None };
    let Some(metric) = capture.metrics.iter().position(|m| m.name == ALIGNMENT_METRIC) else { return none };
    let busy = busy_intervals(kernels);
    let (Some(first), Some(last)) = (capture.samples.first(), capture.samples.last()) else { return none };
    let (Some(&(busy_start, _)), Some(&(_, busy_end))) = (busy.first(), busy.last()) else { return none };
    if capture.samples.len() < 2 * MIN_SAMPLES as usize {
        return none;
    }
    let width = capture.samples.iter().map(|s| s.end_ns.saturating_sub(s.start_ns)).filter(|d| *d > 0).min();
    let Some(width) = width else { return none };
    // Every sample up to 50 000 of them is scored in the fine search (every k-th beyond),
    // every k-th of up to 5 000 in the coarse one: a long run stays fast to align.
    let fine_stride = capture.samples.len().div_ceil(50_000);
    let coarse_stride = capture.samples.len().div_ceil(5_000);
    let score = |offset: i64, stride: usize| mismatch(&capture.samples, stride, metric, &busy, offset);
    // Less mismatch wins; a tie keeps the offset closer to `center`.
    let pick = |best: Option<(f64, i64)>, offset: i64, center: i64, stride: usize| -> Option<(f64, i64)> {
        let Some(m) = score(offset, stride) else { return best };
        match best {
            Some((bm, bo))
                if !(m < bm - 1e-12 || ((m - bm).abs() <= 1e-12 && (offset - center).abs() < (bo - center).abs())) =>
            {
                best
            }
            _ => Some((m, offset)),
        }
    };
    let disjoint = last.end_ns <= busy_start || first.start_ns >= busy_end;
    let center = if disjoint {
        let stride = capture.samples.len().div_ceil(2000);
        let mut coarse = None;
        for s in capture.samples.iter().step_by(stride) {
            let offset = busy_start as i64 - s.start_ns as i64;
            coarse = pick(coarse, offset, offset, coarse_stride);
        }
        match coarse {
            Some((_, offset)) => offset,
            None => return none,
        }
    } else {
        // One clock: CUPTI stamps samples and kernels from the same GPU timer. On an H100 the
        // fit below came out at about 1/8 of a sample width at every interval (0.6 µs at 5 µs,
        // 12.5 µs at 100 µs), and folding at those offsets moved 2 ms ranges by up to 6 %
        // against per_range counters, while folding at 0 kept them within 0.8 % at intervals
        // of 5 to 200 µs (validation/2026-11-23-pm-sampling-h100-attribution.log). GR active
        // is not kernel busy time (it also counts launch work between kernels), so its best
        // fit is biased; it is only used to find a clock the kernels do not share.
        return PmAlignment { offset_ns: 0, method: "same_clock".into(), residual: score(0, fine_stride) };
    };
    let mut step = (width / 8).max(1) as i64;
    let mut best = None;
    for k in -64..=64i64 {
        best = pick(best, center + k * step, center, fine_stride);
    }
    // Then finer, around the best, down to 1/512 of a sample (at least 10 ns): the attribution
    // moves a window's amount between neighbours by the time the offset is off.
    let finest = (width as i64 / 512).max(10);
    while step > finest {
        let Some((_, around)) = best else { break };
        step = (step / 8).max(finest);
        for k in -8..=8i64 {
            best = pick(best, around + k * step, around, fine_stride);
        }
    }
    match best {
        Some((residual, offset_ns)) => PmAlignment { offset_ns, method: "gr_active".into(), residual: Some(residual) },
        None => none,
    }
}

/// Each range's GPU interval (the first start to the last end of its kernels) and the
/// kernels that are attribution elements in it (by index), nested ranges' kernels included:
/// one walk up the range tree per kernel.
type RangeSpans = (HashMap<RangeId, (u64, u64)>, HashMap<RangeId, Vec<usize>>);

fn range_intervals(ranges: &[RangeRow], kernels: &[KernelRow]) -> RangeSpans {
    let parent: HashMap<RangeId, Option<RangeId>> =
        ranges.iter().filter_map(|r| r.range_id.map(|id| (id, r.parent_id))).collect();
    let mut spans: HashMap<RangeId, (u64, u64)> = HashMap::new();
    let mut members: HashMap<RangeId, Vec<usize>> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        let (Some(s), Some(e), Some(mut id)) = (k.start_ns, k.end_ns, k.range_id) else { continue };
        if e <= s {
            continue;
        }
        let element = is_element(k);
        loop {
            let span = spans.entry(id).or_insert((s, e));
            span.0 = span.0.min(s);
            span.1 = span.1.max(e);
            if element {
                members.entry(id).or_default().push(i);
            }
            match parent.get(&id).copied().flatten() {
                Some(p) => id = p,
                None => break,
            }
        }
    }
    (spans, members)
}

/// A kernel's name, grid and block: launches with the same shape are one group.
type KernelShape<'a> = (Option<&'a str>, Option<[i32; 3]>, Option<[i32; 3]>);

/// Whether a kernel row is one element of the attribution: it ran on its own or as a graph
/// node (a whole-graph row of per_kernel mode spans its nodes, which are elements already).
fn is_element(k: &KernelRow) -> bool {
    k.granularity != Granularity::Graph && matches!((k.start_ns, k.end_ns), (Some(s), Some(e)) if e > s)
}

/// Each kernel's mean value of every metric, attributed by [`pm_deconvolve`]:
/// `result[m][k]` for metric `m` and kernel row `k` (`None` for rows that are not elements or
/// that no sample overlaps).
fn attribute(
    samples: &[PmSample],
    metrics: usize,
    kernels: &[KernelRow],
    busy: &[(u64, u64)],
) -> Vec<Vec<Option<f64>>> {
    let kept: Vec<&PmSample> = samples.iter().filter(|s| s.end_ns > s.start_ns).collect();
    let (Some(first), Some(last)) = (kept.first(), kept.last()) else {
        return vec![vec![None; kernels.len()]; metrics];
    };
    let times: Vec<(u64, u64)> = kept.iter().map(|s| (s.start_ns, s.end_ns)).collect();
    let values: Vec<Vec<Option<f64>>> =
        (0..metrics).map(|m| kept.iter().map(|s| s.values.get(m).copied().flatten()).collect()).collect();
    let index: Vec<usize> = (0..kernels.len()).filter(|&i| is_element(&kernels[i])).collect();
    let mut elements: Vec<Vec<(u64, u64)>> =
        index.iter().map(|&i| vec![(kernels[i].start_ns.unwrap_or(0), kernels[i].end_ns.unwrap_or(0))]).collect();
    // Launches of the same kernel (name and shape) form a group.
    let mut group_of: HashMap<KernelShape, usize> = HashMap::new();
    let mut groups: Vec<usize> = index
        .iter()
        .map(|&i| {
            let k = &kernels[i];
            let next = group_of.len();
            *group_of.entry((k.kernel_name.as_deref(), k.grid, k.block)).or_insert(next)
        })
        .collect();
    // The background: the idle time between kernels, one shared value, a group of its own.
    elements.push(pm_deconvolve::idle_between(busy, first.start_ns, last.end_ns));
    groups.push(group_of.len());
    pm_deconvolve::attribute_each(&times, &values, &elements, &groups)
        .into_iter()
        .map(|attributed| {
            let mut per_row = vec![None; kernels.len()];
            for (slot, &i) in index.iter().enumerate() {
                per_row[i] = attributed.values[slot];
            }
            per_row
        })
        .collect()
}

/// The amount (value·ns) attributed to the kernel rows `inside` together. Where some of them
/// got no value (no sample overlapped them), the others' amount is stretched over their time;
/// `None` when none got one.
fn members_amount(attributed: &[Option<f64>], kernels: &[KernelRow], inside: &[usize]) -> Option<f64> {
    let (mut amount, mut valued, mut all) = (0.0f64, 0u64, 0u64);
    for &k in inside {
        let d = kernels[k].end_ns.unwrap_or(0).saturating_sub(kernels[k].start_ns.unwrap_or(0));
        all += d;
        if let Some(v) = attributed[k] {
            amount += v * d as f64;
            valued += d;
        }
    }
    (valued > 0).then(|| amount * all as f64 / valued as f64)
}

/// Replaces a folded value's mean and total with the attributed amount `amount` (value·ns)
/// over `duration_ns`.
fn with_amount(mut v: PmValue, amount: f64, duration_ns: u64, is_rate: bool) -> PmValue {
    let d = duration_ns.max(1) as f64;
    v.mean = amount / d;
    v.total = is_rate.then_some(amount * 1e-9);
    v
}

/// Gives each kernel row's values their [`PmConfidence`] from their own windows and those of
/// all launches of the same kernel (name, grid and block), metric by metric.
fn kernel_confidence(rows: &mut [PmRow], shapes: &[Option<KernelShape>]) {
    let mut group: HashMap<(KernelShape, usize), f64> = HashMap::new();
    for (row, shape) in rows.iter().zip(shapes) {
        let Some(shape) = shape else { continue };
        for (m, v) in row.values.iter().enumerate() {
            if let Some(v) = v {
                *group.entry((*shape, m)).or_default() += v.windows;
            }
        }
    }
    for (row, shape) in rows.iter_mut().zip(shapes) {
        let Some(shape) = shape else { continue };
        for (m, v) in row.values.iter_mut().enumerate() {
            if let Some(v) = v {
                let together = group.get(&(*shape, m)).copied().unwrap_or(v.windows);
                v.confidence = Some(PmConfidence::of(v.windows, together));
            }
        }
    }
}

/// Aligns the capture's samples and folds them over every range and kernel.
///
/// Each value's samples, peak, coverage and edge share come from [`fold`] over the row's
/// interval. Its mean and total come from the amounts [`pm_deconvolve`] attributes to the
/// kernels: a kernel's own, a whole-graph row's (per_kernel mode) summed over its nodes, and a
/// range's summed over the kernels it launched (nested ranges included), each spread over the
/// row's GPU interval. Where some of a range's kernels got no value
/// (no sample overlapped them), the others' amount is stretched over their time.
pub fn fold_report(capture: &PmCapture, ranges: &[RangeRow], kernels: &[KernelRow]) -> PmReport {
    let alignment = align(capture, kernels);
    let mut samples: Vec<PmSample> = capture
        .samples
        .iter()
        .map(|s| PmSample {
            start_ns: shift(s.start_ns, alignment.offset_ns),
            end_ns: shift(s.end_ns, alignment.offset_ns),
            values: s.values.clone(),
        })
        .collect();
    samples.sort_by_key(|s| s.start_ns);
    let rates: Vec<bool> = capture.metrics.iter().map(PmMetric::is_rate).collect();
    let busy = busy_intervals(kernels);
    // attributed[m][k]: kernel k's mean of metric m.
    let attributed = attribute(&samples, rates.len(), kernels, &busy);
    let (spans, members) = range_intervals(ranges, kernels);
    let mut rows = Vec::new();
    // Each row's kernel shape (name, grid, block); `None` for ranges.
    let mut shapes: Vec<Option<KernelShape>> = Vec::new();
    for r in ranges {
        let Some(id) = r.range_id else { continue };
        let Some(&(a, b)) = spans.get(&id) else { continue };
        let inside = members.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        let values = rates
            .iter()
            .enumerate()
            .map(|(m, &rate)| {
                let folded = fold(&samples, m, rate, a, b)?;
                Some(match members_amount(&attributed[m], kernels, inside) {
                    Some(amount) => with_amount(folded, amount, b - a, rate),
                    None => folded,
                })
            })
            .collect();
        shapes.push(None);
        rows.push(PmRow {
            scope: PmScope::Range,
            range_id: Some(id),
            path: r.path.clone(),
            instance: Some(r.instance),
            depth: Some(r.depth),
            kernel_name: None,
            correlation_id: None,
            start_ns: a,
            end_ns: b,
            values,
        });
    }
    for (row, shape) in kernel_rows(&samples, &rates, kernels, &attributed).into_iter().flatten() {
        shapes.push(Some(shape));
        rows.push(row);
    }
    kernel_confidence(&mut rows, &shapes);
    PmReport {
        metrics: capture.metrics.clone(),
        interval: capture.interval,
        interval_chosen_by: capture.interval_chosen_by.clone(),
        sample_count: samples.len() as u64,
        hw_buffer_overflows: capture.hw_buffer_overflows,
        counter_data_full: capture.counter_data_full,
        missing_samples: capture.missing_samples,
        empty_samples: capture.empty_samples,
        alignment,
        min_samples: MIN_SAMPLES,
        rows,
        samples,
    }
}

/// Each kernel row's [`PmRow`] with its kernel shape (`None` for rows without an interval):
/// the fold of `samples` (aligned, sorted) over its interval, its mean and total from
/// `attributed` (`attributed[m][k]`, [`attribute`]). Confidence is not set here
/// ([`kernel_confidence`]).
fn kernel_rows<'k>(
    samples: &[PmSample],
    rates: &[bool],
    kernels: &'k [KernelRow],
    attributed: &[Vec<Option<f64>>],
) -> Vec<Option<(PmRow, KernelShape<'k>)>> {
    let mut out = Vec::with_capacity(kernels.len());
    // A whole-graph row of per_kernel mode holds what its nodes (same launch) were given.
    let mut graph_nodes: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        if k.granularity == Granularity::GraphNode && is_element(k) {
            graph_nodes.entry(k.correlation_id).or_default().push(i);
        }
    }
    for (i, k) in kernels.iter().enumerate() {
        let (Some(a), Some(b)) = (k.start_ns, k.end_ns) else {
            out.push(None);
            continue;
        };
        if b <= a {
            out.push(None);
            continue;
        }
        let nodes = match k.granularity {
            Granularity::Graph => graph_nodes.get(&k.correlation_id).map(Vec::as_slice),
            _ => None,
        };
        let values = rates
            .iter()
            .enumerate()
            .map(|(m, &rate)| {
                let folded = fold(samples, m, rate, a, b)?;
                let amount = match nodes {
                    Some(nodes) => members_amount(&attributed[m], kernels, nodes),
                    None => attributed[m][i].map(|v| v * (b - a) as f64),
                };
                Some(match amount {
                    Some(amount) => with_amount(folded, amount, b - a, rate),
                    None => folded,
                })
            })
            .collect();
        let shape = (k.kernel_name.as_deref(), k.grid, k.block);
        out.push(Some((
            PmRow {
                scope: PmScope::Kernel,
                range_id: k.range_id,
                path: k.range_path.clone(),
                instance: None,
                depth: None,
                kernel_name: k.kernel_name.clone(),
                correlation_id: Some(k.correlation_id),
                start_ns: a,
                end_ns: b,
                values,
            },
            shape,
        )));
    }
    out
}

/// The kernel rows of a streamed run (issue 42), folded a drain at a time: `samples` on the
/// kernels' clock (a streamed run takes them as recorded: `same_clock`), sorted, covering the
/// `kernels` of the drain; `context` are kernels written before (their rows are not
/// returned) that share those samples, so the attribution does not count their time as
/// idle. One entry per row of `kernels`, `None` for a row without an interval, as
/// [`fold_report`] gives no row for it. Each value's samples, peak, coverage, edge share and
/// windows are [`fold`]'s, as in a whole-run fold; its mean and total come from attributing
/// the samples to the kernels of the drain and its context, and its confidence from the
/// windows of the drain's launches of the same kernel: a whole-run fold attributes over
/// every launch of the run, so these differ from it a little.
pub fn fold_kernels(
    metrics: &[PmMetric],
    samples: &[PmSample],
    context: &[KernelRow],
    kernels: &[KernelRow],
) -> Vec<Option<PmRow>> {
    let all: Vec<KernelRow> = context.iter().chain(kernels).cloned().collect();
    let rates: Vec<bool> = metrics.iter().map(PmMetric::is_rate).collect();
    let busy = busy_intervals(&all);
    // The attribution takes the samples whose time is known: those that end by the last
    // kernel of the drain. A later sample may hold kernels not drained yet, whose time it
    // would count as idle.
    let known_to = kernels.iter().filter(|k| is_element(k)).filter_map(|k| k.end_ns).max().unwrap_or(0);
    let known = samples.partition_point(|s| s.end_ns <= known_to);
    let attributed = attribute(&samples[..known], rates.len(), &all, &busy);
    let folded = kernel_rows(samples, &rates, &all, &attributed);
    let mut rows = Vec::new();
    let mut shapes = Vec::new();
    let mut index = Vec::with_capacity(kernels.len());
    for entry in folded.into_iter().skip(context.len()) {
        match entry {
            Some((row, shape)) => {
                index.push(Some(rows.len()));
                rows.push(row);
                shapes.push(Some(shape));
            }
            None => index.push(None),
        }
    }
    kernel_confidence(&mut rows, &shapes);
    let mut rows: Vec<Option<PmRow>> = rows.into_iter().map(Some).collect();
    index.into_iter().map(|i| i.and_then(|i| rows[i].take())).collect()
}
