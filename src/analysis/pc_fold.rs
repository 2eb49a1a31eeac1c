//! Folding PC samples into stall reasons per range, per kernel and per instruction.
//!
//! A PC sample is one warp of one SM sub-partition caught every 2^N cycles, with the reason
//! it was stalled (or `selected`: it issued). CUPTI counts two names per reason:
//! `smsp__pcsamp_warps_issue_stalled_X`, every sample in state X, and `..._X_not_issued`,
//! those of them whose cycle issued no instruction. A sample is in exactly one state, so the
//! states without `_not_issued` add up to the samples ([`StallCounts::samples`]); their
//! shares are what ncu's WarpStateStats section shows, under the labels of
//! [`warp_state_label`]. The `_not_issued` twins are kept beside them.
//!
//! Attribution ([`fold`]):
//!
//! - per kernel (function): exact, the records carry the function's name;
//! - per launch, hence per range: exact when a record has its launch's correlation id
//!   (kernel-serialized collection); in continuous collection CUPTI gives none (the header:
//!   "For continous mode of collection the correlationId will be set to 0"), so a function's
//!   samples are shared among the ranges its launches ran in, in proportion to their GPU
//!   time, reason by reason, by largest remainders (whole samples; ties to the earlier
//!   range). [`PcReport::attribution`] says which was used. A kernel whose stall mix differs
//!   between ranges is then shown with its average mix in each.
//! - a range's samples are those of the launches made inside it, nested ranges included
//!   (as PM sampling does): each range row's samples are the sum over its kernels', and the
//!   root row has every attributed sample. Samples of functions with no launch in the trace
//!   are [`PcReport::unattributed_samples`].
//!
//! Fewer than [`MIN_SAMPLES`] samples: no shares (`few_samples`), only counts.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{Granularity, KernelRow};
use crate::model::pc::{PcCapture, PcSource};
use crate::model::RangeId;

/// A range, kernel or instruction with fewer samples than this shows counts, no shares:
/// at 100 samples a 20 % share has a binomial standard error of 4 points.
pub const MIN_SAMPLES: u64 = 100;

/// Hottest instructions kept per kernel in [`KernelStalls::hot`].
pub const HOT_PCS_PER_KERNEL: usize = 10;

/// The prefix of CUPTI's stall reason names.
pub const REASON_PREFIX: &str = "smsp__pcsamp_warps_issue_stalled_";

/// The suffix of the reasons that count only samples whose cycle issued nothing.
pub const NOT_ISSUED_SUFFIX: &str = "_not_issued";

/// ncu's warp-state label (WarpStateStats) of a CUPTI stall reason name (with or without
/// `_not_issued`); a reason ncu has no label for gets `Stall ` and its own words.
pub fn warp_state_label(name: &str) -> String {
    let base = name.strip_suffix(NOT_ISSUED_SUFFIX).unwrap_or(name);
    let Some(short) = base.strip_prefix(REASON_PREFIX) else { return name.to_owned() };
    let label = match short {
        "selected" => "Selected",
        "barrier" => "Stall Barrier",
        "branch_resolving" => "Stall Branch Resolving",
        "dispatch_stall" => "Stall Dispatch Stall",
        "drain" => "Stall Drain",
        "imc_miss" => "Stall IMC Miss",
        "lg_throttle" => "Stall LG Throttle",
        "long_scoreboard" => "Stall Long Scoreboard",
        "math_pipe_throttle" => "Stall Math Pipe Throttle",
        "membar" => "Stall Membar",
        "mio_throttle" => "Stall MIO Throttle",
        "misc" => "Stall Misc",
        "no_instructions" => "Stall No Instruction",
        "not_selected" => "Stall Not Selected",
        "short_scoreboard" => "Stall Short Scoreboard",
        "sleeping" => "Stall Sleeping",
        "tex_throttle" => "Stall Tex Throttle",
        "wait" => "Stall Wait",
        other => {
            let words: Vec<String> = other
                .split('_')
                .filter(|w| !w.is_empty())
                .map(|w| {
                    let mut c = w.chars();
                    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
                })
                .collect();
            return format!("Stall {}", words.join(" "));
        }
    };
    label.to_owned()
}

/// A reason column: a state and its `_not_issued` twin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonColumn {
    /// CUPTI's name of the state.
    pub name: String,
    /// ncu's label.
    pub warp_state: String,
    /// CUPTI's name of its `_not_issued` twin, when the chip reports one.
    pub not_issued_name: Option<String>,
}

/// Samples by reason column.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallCounts {
    /// Σ of [`StallCounts::by_reason`].
    pub samples: u64,
    /// Samples per column of [`PcReport::reasons`].
    pub by_reason: Vec<u64>,
    /// `_not_issued` samples per column (0 where the chip has no twin).
    pub not_issued: Vec<u64>,
}

impl StallCounts {
    fn zero(columns: usize) -> Self {
        StallCounts { samples: 0, by_reason: vec![0; columns], not_issued: vec![0; columns] }
    }

    fn add(&mut self, other: &StallCounts) {
        self.samples += other.samples;
        for (a, b) in self.by_reason.iter_mut().zip(&other.by_reason) {
            *a += b;
        }
        for (a, b) in self.not_issued.iter_mut().zip(&other.not_issued) {
            *a += b;
        }
    }

    /// Too few samples for shares.
    pub fn few_samples(&self) -> bool {
        self.samples < MIN_SAMPLES
    }

    /// Column `i`'s share in %, `None` with too few samples.
    pub fn share_pct(&self, i: usize) -> Option<f64> {
        (!self.few_samples()).then(|| 100.0 * self.by_reason.get(i).copied().unwrap_or(0) as f64 / self.samples as f64)
    }

    /// The `n` columns with the most samples (ties: CUPTI's order), non-zero ones only.
    pub fn top(&self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.by_reason.len()).filter(|i| self.by_reason[*i] > 0).collect();
        order.sort_by(|a, b| self.by_reason[*b].cmp(&self.by_reason[*a]).then(a.cmp(b)));
        order.truncate(n);
        order
    }
}

/// One range row's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeStalls {
    /// Index of the row in the report's ranges.
    pub range_index: usize,
    /// The range's path.
    pub path: String,
    /// Its instance.
    pub instance: u32,
    /// Its depth.
    pub depth: u32,
    /// Samples of its launches, nested ranges included.
    pub counts: StallCounts,
}

/// One instruction's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcRow {
    /// The function's name as CUPTI gives it.
    pub function: String,
    /// CUPTI's CRC of the cubin.
    pub cubin_crc: u64,
    /// Offset of the instruction, bytes.
    pub pc_offset: u64,
    /// Samples.
    pub counts: StallCounts,
    /// Source file, where the cubin has line information.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
    /// The SASS instruction, where `nvdisasm` was found at the end of the run.
    #[serde(default)]
    pub sass: Option<String>,
}

/// One function's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelStalls {
    /// The function's name as CUPTI gives it (mangled for C++).
    pub function: String,
    /// The kernel's name as kernels.csv shows it (demangled), when it was launched in the trace.
    pub kernel_name: Option<String>,
    /// Launches in the trace.
    pub launches: u64,
    /// Σ of their GPU time, ns; `None` when none had one.
    pub gpu_time_ns: Option<u64>,
    /// Samples.
    pub counts: StallCounts,
    /// The hottest instructions, most samples first.
    pub hot: Vec<PcRow>,
}

/// The samples a range's own launches of one function got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeKernelSamples {
    /// Index of the innermost range in the report's ranges; `None`: launched outside every
    /// range (the root row's).
    pub range_index: Option<usize>,
    /// The function's name as CUPTI gives it.
    pub function: String,
    /// Samples.
    pub samples: u64,
}

/// How samples reached ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PcAttribution {
    /// Every record had its launch's correlation id.
    Exact,
    /// By each launch's share of its function's GPU time (continuous collection).
    ByKernelTime,
    /// Some records had correlation ids, the others were shared by GPU time.
    Mixed,
    /// No samples.
    None,
}

/// PC sampling folded into the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcReport {
    /// `continuous` or `kernel_serialized`.
    pub collection: String,
    /// Every 2^N cycles; `None` when not read.
    pub period_exponent: Option<u32>,
    /// How samples reached ranges.
    pub attribution: PcAttribution,
    /// Samples CUPTI counted (user and non-user kernels, dropped).
    pub total_samples: u64,
    /// Samples the hardware dropped.
    pub dropped_samples: u64,
    /// Samples in kernels CUPTI gives no records for.
    pub non_user_samples: u64,
    /// Drains that found the hardware buffer full (their PC data were lost).
    pub hardware_buffer_full: u64,
    /// Drains of CUPTI's buffer.
    pub drains: u64,
    /// Samples in PC records (Σ over the states).
    pub sampled: u64,
    /// Samples of functions with no launch in the trace.
    pub unattributed_samples: u64,
    /// The threshold below which no shares are shown.
    pub min_samples: u64,
    /// The reason columns, in CUPTI's order.
    pub reasons: Vec<ReasonColumn>,
    /// One entry per range row with samples or kernels.
    pub ranges: Vec<RangeStalls>,
    /// Functions, most samples first.
    pub kernels: Vec<KernelStalls>,
    /// The samples of each range's own launches of each function (launches in nested ranges
    /// are those ranges'): a range's samples are the sum over it and its descendants.
    #[serde(default)]
    pub range_kernels: Vec<RangeKernelSamples>,
    /// Every sampled instruction, by function (most samples first) then offset.
    pub pcs: Vec<PcRow>,
    /// The sampler's errors.
    pub errors: Vec<String>,
    /// The run streamed its rows to part files before the samples were folded (a long run,
    /// or live metrics): there were no range or kernel rows to fold into, so every sample is
    /// unattributed for that reason, not for lost launches ([`PcReport::warnings`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rows_streamed: bool,
}

impl PcReport {
    /// The period in cycles, when known.
    pub fn period_cycles(&self) -> Option<u64> {
        self.period_exponent.filter(|e| *e < 64).map(|e| 1u64 << e)
    }

    /// The warnings the report's metadata gets: losses and errors.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.dropped_samples > 0 {
            w.push(format!(
                "PC sampling: the hardware dropped {} of {} samples ({:.2} %)",
                self.dropped_samples,
                self.total_samples,
                100.0 * self.dropped_samples as f64 / self.total_samples.max(1) as f64
            ));
        }
        if self.hardware_buffer_full > 0 {
            w.push(format!(
                "PC sampling: {} drain(s) found the hardware buffer full: CUPTI discarded samples, how many it does \
                 not say (on llm.c's GPT-2 an overflow lost 24 % to 85 % of a run's samples). Sample counts are \
                 incomplete and ranges, whose samples are their kernels' shares, do not show where; the shares of \
                 the samples kept still hold. Use a longer interval (--pc-sampling=N with a larger N) or a larger \
                 hardware buffer (GMPROF_PC_HW_BUFFER_MB)",
                self.hardware_buffer_full
            ));
        }
        if self.unattributed_samples > 0 && self.rows_streamed {
            w.push(format!(
                "PC sampling: the run streamed its rows to part files (a long run, or live metrics), so its {} \
                 sample(s) are not folded into ranges or kernel rows: they are per function and instruction in \
                 pc_samples.csv; the live metrics (--metrics-port, --otlp) give each range group's stall reasons \
                 as the run goes",
                self.unattributed_samples
            ));
        } else if self.unattributed_samples > 0 {
            w.push(format!(
                "PC sampling: {} sample(s) are in functions with no launch in the trace (launched before the \
                 session, or their records were lost); they are in pc_samples.csv, not in any range",
                self.unattributed_samples
            ));
        }
        w.extend(self.errors.iter().map(|e| format!("PC sampling: {e}")));
        w
    }
}

/// Where each CUPTI index goes: (column, is the `_not_issued` twin).
fn columns(capture: &PcCapture) -> (Vec<ReasonColumn>, HashMap<u32, (usize, bool)>) {
    let mut cols: Vec<ReasonColumn> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for r in capture.reasons.iter().filter(|r| !r.name.ends_with(NOT_ISSUED_SUFFIX)) {
        by_name.insert(r.name.clone(), cols.len());
        cols.push(ReasonColumn { name: r.name.clone(), warp_state: warp_state_label(&r.name), not_issued_name: None });
    }
    let mut index = HashMap::new();
    for r in &capture.reasons {
        match r.name.strip_suffix(NOT_ISSUED_SUFFIX) {
            Some(base) => {
                let col = match by_name.get(base) {
                    Some(c) => *c,
                    None => {
                        // A twin without its state: a column of its own, never summed twice.
                        by_name.insert(base.to_owned(), cols.len());
                        cols.push(ReasonColumn {
                            name: base.to_owned(),
                            warp_state: warp_state_label(base),
                            not_issued_name: None,
                        });
                        cols.len() - 1
                    }
                };
                cols[col].not_issued_name = Some(r.name.clone());
                index.insert(r.index, (col, true));
            }
            None => {
                index.insert(r.index, (by_name[&r.name], false));
            }
        }
    }
    (cols, index)
}

fn counts_of(stalls: &[(u32, u64)], ncols: usize, index: &HashMap<u32, (usize, bool)>) -> StallCounts {
    let mut c = StallCounts::zero(ncols);
    for (reason, samples) in stalls {
        match index.get(reason) {
            Some((col, true)) => c.not_issued[*col] += samples,
            Some((col, false)) => {
                c.by_reason[*col] += samples;
                c.samples += samples;
            }
            None => {}
        }
    }
    c
}

/// Splits `total` over `weights` in proportion, in whole units, by largest remainders (ties
/// to the earlier entry). All-zero weights split evenly.
pub fn apportion(total: u64, weights: &[u64]) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let even;
    let w: &[u64] = if weights.iter().all(|w| *w == 0) {
        even = vec![1u64; weights.len()];
        &even
    } else {
        weights
    };
    let sum: u128 = w.iter().map(|x| *x as u128).sum();
    let mut out: Vec<u64> = Vec::with_capacity(w.len());
    let mut rem: Vec<(u128, usize)> = Vec::with_capacity(w.len());
    for (i, x) in w.iter().enumerate() {
        let exact = total as u128 * *x as u128;
        out.push((exact / sum) as u64);
        rem.push((exact % sum, i));
    }
    let left = total - out.iter().sum::<u64>();
    rem.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in rem.into_iter().take(left as usize) {
        out[i] += 1;
    }
    out
}

/// Folds `capture` into `ranges` and `kernels` (see the module doc).
pub fn fold(capture: &PcCapture, ranges: &[RangeRow], kernels: &[KernelRow]) -> PcReport {
    let (reasons, index) = columns(capture);
    let ncols = reasons.len();
    // Launches by function and by correlation id (graph totals are not launches of their own).
    let mut launches: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut by_corr: HashMap<u32, usize> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        if k.granularity == Granularity::Graph {
            continue;
        }
        // PC records name the function as CUPTI's activity records do (mangled); the
        // demangled name is a second key, in case a record has that one.
        let mangled = k.mangled_name.as_deref();
        let demangled = k.kernel_name.as_deref().filter(|d| Some(*d) != mangled);
        for f in mangled.into_iter().chain(demangled) {
            launches.entry(f).or_default().push(i);
        }
        by_corr.insert(k.correlation_id, i);
    }
    // Per instruction (over launches) and per function pools.
    let mut pcs: HashMap<(&str, u64, u64), StallCounts> = HashMap::new();
    let mut per_function: HashMap<&str, StallCounts> = HashMap::new();
    let mut pooled: HashMap<&str, StallCounts> = HashMap::new();
    // Samples per innermost range (None: the root), per function (for the order of ties).
    let mut per_group: HashMap<Option<RangeId>, StallCounts> = HashMap::new();
    // The same split by function: what each range's own launches of each kernel got.
    let mut per_range_kernel: HashMap<(Option<RangeId>, &str), u64> = HashMap::new();
    let (mut exact, mut shared) = (0u64, 0u64);
    let mut sampled = 0;
    for r in &capture.records {
        let c = counts_of(&r.stalls, ncols, &index);
        sampled += c.samples;
        pcs.entry((r.function.as_str(), r.cubin_crc, r.pc_offset)).or_insert_with(|| StallCounts::zero(ncols)).add(&c);
        per_function.entry(r.function.as_str()).or_insert_with(|| StallCounts::zero(ncols)).add(&c);
        let launch = (r.correlation_id != 0).then(|| by_corr.get(&r.correlation_id)).flatten();
        match launch {
            Some(&k) => {
                exact += c.samples;
                per_group.entry(kernels[k].range_id).or_insert_with(|| StallCounts::zero(ncols)).add(&c);
                *per_range_kernel.entry((kernels[k].range_id, r.function.as_str())).or_default() += c.samples;
            }
            None => {
                shared += c.samples;
                pooled.entry(r.function.as_str()).or_insert_with(|| StallCounts::zero(ncols)).add(&c);
            }
        }
    }
    // Pools: shared among the ranges the function's launches ran in, by GPU time.
    let mut unattributed = 0;
    let mut pooled_sorted: Vec<(&str, StallCounts)> = pooled.into_iter().collect();
    pooled_sorted.sort_by(|a, b| a.0.cmp(b.0));
    for (function, c) in pooled_sorted {
        let Some(ks) = launches.get(function) else {
            unattributed += c.samples;
            continue;
        };
        let mut groups: Vec<(Option<RangeId>, u64)> = Vec::new();
        for &k in ks {
            let w = kernels[k].duration_ns.unwrap_or(0);
            match groups.iter_mut().find(|(g, _)| *g == kernels[k].range_id) {
                Some((_, sum)) => *sum += w,
                None => groups.push((kernels[k].range_id, w)),
            }
        }
        let weights: Vec<u64> = groups.iter().map(|(_, w)| *w).collect();
        let mut parts: Vec<StallCounts> = vec![StallCounts::zero(ncols); groups.len()];
        for col in 0..ncols {
            for (p, n) in parts.iter_mut().zip(apportion(c.by_reason[col], &weights)) {
                p.by_reason[col] = n;
                p.samples += n;
            }
            for (p, n) in parts.iter_mut().zip(apportion(c.not_issued[col], &weights)) {
                p.not_issued[col] = n;
            }
        }
        for ((g, _), p) in groups.iter().zip(parts) {
            *per_range_kernel.entry((*g, function)).or_default() += p.samples;
            per_group.entry(*g).or_insert_with(|| StallCounts::zero(ncols)).add(&p);
        }
    }
    // Ranges: each group counts in its range and every enclosing one; the root row in all.
    let row_of: HashMap<RangeId, usize> =
        ranges.iter().enumerate().filter_map(|(i, r)| r.range_id.map(|id| (id, i))).collect();
    let mut range_counts: Vec<Option<StallCounts>> = vec![None; ranges.len()];
    let root = ranges.iter().position(|r| r.range_id.is_none());
    for (group, c) in &per_group {
        let mut at = group.and_then(|id| row_of.get(&id).copied());
        let mut guard = 0;
        while let Some(i) = at {
            range_counts[i].get_or_insert_with(|| StallCounts::zero(ncols)).add(c);
            at = ranges[i].parent_id.and_then(|p| row_of.get(&p).copied());
            guard += 1;
            if guard > ranges.len() {
                break;
            }
        }
        if let Some(r) = root {
            range_counts[r].get_or_insert_with(|| StallCounts::zero(ncols)).add(c);
        }
    }
    let mut range_kernels: Vec<RangeKernelSamples> = per_range_kernel
        .into_iter()
        .filter(|(_, samples)| *samples > 0)
        .map(|((range, function), samples)| RangeKernelSamples {
            range_index: range.and_then(|id| row_of.get(&id).copied()),
            function: function.to_owned(),
            samples,
        })
        .collect();
    range_kernels.sort_by(|a, b| a.range_index.cmp(&b.range_index).then_with(|| a.function.cmp(&b.function)));
    let range_rows = ranges
        .iter()
        .enumerate()
        .filter(|(i, r)| range_counts[*i].is_some() || r.kernel_count > 0)
        .map(|(i, r)| RangeStalls {
            range_index: i,
            path: r.path.clone(),
            instance: r.instance,
            depth: r.depth,
            counts: range_counts[i].clone().unwrap_or_else(|| StallCounts::zero(ncols)),
        })
        .collect();
    // Instructions with their source lines.
    let sources: HashMap<(&str, u64, u64), &PcSource> =
        capture.sources.iter().map(|s| ((s.function.as_str(), s.cubin_crc, s.pc_offset), s)).collect();
    let texts: HashMap<(&str, u64, u64), &str> = capture
        .instructions
        .iter()
        .map(|i| ((i.function.as_str(), i.cubin_crc, i.pc_offset), i.sass.as_str()))
        .collect();
    let mut pc_rows: Vec<PcRow> = pcs
        .into_iter()
        .map(|((function, crc, pc), counts)| {
            let src = sources.get(&(function, crc, pc));
            let sass = texts.get(&(function, crc, pc)).map(|s| (*s).to_owned());
            PcRow {
                function: function.to_owned(),
                cubin_crc: crc,
                pc_offset: pc,
                counts,
                file: src.map(|s| s.file.clone()),
                line: src.map(|s| s.line),
                sass,
            }
        })
        .collect();
    // Kernels.
    let mut kernel_rows: Vec<KernelStalls> = per_function
        .into_iter()
        .map(|(function, counts)| {
            let ks = launches.get(function).map(Vec::as_slice).unwrap_or(&[]);
            let times: Vec<u64> = ks.iter().filter_map(|k| kernels[*k].duration_ns).collect();
            KernelStalls {
                function: function.to_owned(),
                kernel_name: ks.first().and_then(|k| kernels[*k].kernel_name.clone()),
                launches: ks.len() as u64,
                gpu_time_ns: (!times.is_empty()).then(|| times.iter().sum()),
                counts,
                hot: Vec::new(),
            }
        })
        .collect();
    kernel_rows.sort_by(|a, b| b.counts.samples.cmp(&a.counts.samples).then_with(|| a.function.cmp(&b.function)));
    let rank: HashMap<String, usize> = kernel_rows.iter().enumerate().map(|(i, k)| (k.function.clone(), i)).collect();
    pc_rows.sort_by(|a, b| {
        rank[&a.function]
            .cmp(&rank[&b.function])
            .then(a.cubin_crc.cmp(&b.cubin_crc))
            .then(a.pc_offset.cmp(&b.pc_offset))
    });
    let mut by_function: HashMap<&str, Vec<&PcRow>> = HashMap::new();
    for p in &pc_rows {
        by_function.entry(p.function.as_str()).or_default().push(p);
    }
    for k in kernel_rows.iter_mut() {
        let mut hot = by_function.remove(k.function.as_str()).unwrap_or_default();
        hot.sort_by(|a, b| b.counts.samples.cmp(&a.counts.samples).then(a.pc_offset.cmp(&b.pc_offset)));
        k.hot = hot.into_iter().take(HOT_PCS_PER_KERNEL).cloned().collect();
    }
    let attribution = match (exact > 0, shared > 0) {
        (true, false) => PcAttribution::Exact,
        (false, true) => PcAttribution::ByKernelTime,
        (true, true) => PcAttribution::Mixed,
        (false, false) => PcAttribution::None,
    };
    PcReport {
        collection: capture.collection.clone(),
        period_exponent: capture.period_exponent,
        attribution,
        total_samples: capture.total_samples,
        dropped_samples: capture.dropped_samples,
        non_user_samples: capture.non_user_samples,
        hardware_buffer_full: capture.hardware_buffer_full,
        drains: capture.drains,
        sampled,
        unattributed_samples: unattributed,
        min_samples: MIN_SAMPLES,
        reasons,
        ranges: range_rows,
        kernels: kernel_rows,
        range_kernels,
        pcs: pc_rows,
        errors: capture.errors.clone(),
        rows_streamed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_ncu_and_unknown_reasons_get_their_own_words() {
        assert_eq!(warp_state_label("smsp__pcsamp_warps_issue_stalled_long_scoreboard"), "Stall Long Scoreboard");
        assert_eq!(warp_state_label("smsp__pcsamp_warps_issue_stalled_selected_not_issued"), "Selected");
        assert_eq!(warp_state_label("smsp__pcsamp_warps_issue_stalled_warpgroup_arrive"), "Stall Warpgroup Arrive");
        assert_eq!(warp_state_label("something_else"), "something_else");
    }

    #[test]
    fn apportioning_keeps_whole_samples_and_the_total() {
        assert_eq!(apportion(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(apportion(7, &[300, 100]), vec![5, 2]);
        assert_eq!(apportion(5, &[0, 0]), vec![3, 2]);
        assert_eq!(apportion(0, &[5, 9]), vec![0, 0]);
        assert_eq!(apportion(1_000_003, &[u64::MAX / 2, u64::MAX / 2]).iter().sum::<u64>(), 1_000_003);
        assert!(apportion(3, &[]).is_empty());
    }
}
