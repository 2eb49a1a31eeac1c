//! The HTML report's PC sampling part: a stacked bar of stall reasons per range group and a
//! hot-spot table of the kernels with the most samples.

use std::collections::HashMap;

use serde::Serialize;

use crate::analysis::pc_fold::{PcReport, StallCounts};
use crate::model::session::ROOT_PATH;
use crate::report::text::group::fold_numbers;

/// Range groups drawn at most.
pub const MAX_GROUPS: usize = 25;
/// Kernels in the hot-spot table at most.
pub const MAX_KERNELS: usize = 10;
/// Instructions listed per kernel.
pub const PCS_PER_KERNEL: usize = 3;

/// One range group's bar.
#[derive(Clone, Debug, Serialize)]
pub struct PcGroupView {
    /// The path with numbers folded.
    pub label: String,
    /// Samples of its instances.
    pub samples: u64,
    /// Too few samples for shares: drawn without a bar.
    pub few: bool,
    /// Share of each reason, %; `None` with too few samples.
    pub shares: Vec<Option<f64>>,
}

/// One kernel's row of the hot-spot table.
#[derive(Clone, Debug, Serialize)]
pub struct PcKernelView {
    /// The kernel's name (demangled when it was launched in the trace).
    pub name: String,
    /// Samples.
    pub samples: u64,
    /// Its top reasons with shares, or a too-few note.
    pub reasons: String,
    /// Its hottest instructions: `+0x1a0 (412 samples, Stall Long Scoreboard) at file:line`.
    pub hot: Vec<String>,
}

/// What the page draws of PC sampling.
#[derive(Clone, Debug, Serialize)]
pub struct PcView {
    /// What was sampled and lost.
    pub note: String,
    /// ncu's warp-state labels, one per reason column.
    pub reasons: Vec<String>,
    /// Range groups, most samples first.
    pub groups: Vec<PcGroupView>,
    /// Kernels, most samples first.
    pub kernels: Vec<PcKernelView>,
}

fn top_text(pc: &PcReport, c: &StallCounts, n: usize) -> String {
    if c.few_samples() {
        return format!("too few samples for shares (< {})", pc.min_samples);
    }
    c.top(n)
        .iter()
        .map(|i| format!("{} {:.1}%", pc.reasons[*i].warp_state, c.share_pct(*i).unwrap_or(0.0)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The view of `pc`.
pub fn pc_view(pc: &PcReport) -> PcView {
    let mut groups: Vec<(String, StallCounts)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for r in pc.ranges.iter().filter(|r| r.path != ROOT_PATH) {
        let label = fold_numbers(&r.path).into_owned();
        let i = *at.entry(label.clone()).or_insert_with(|| {
            groups.push((
                label,
                StallCounts { samples: 0, by_reason: vec![0; pc.reasons.len()], not_issued: Vec::new() },
            ));
            groups.len() - 1
        });
        let g = &mut groups[i].1;
        g.samples += r.counts.samples;
        for (a, b) in g.by_reason.iter_mut().zip(&r.counts.by_reason) {
            *a += b;
        }
    }
    groups.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then(a.0.cmp(&b.0)));
    groups.truncate(MAX_GROUPS);
    let kernels = pc
        .kernels
        .iter()
        .take(MAX_KERNELS)
        .map(|k| PcKernelView {
            name: k.kernel_name.clone().unwrap_or_else(|| k.function.clone()),
            samples: k.counts.samples,
            reasons: top_text(pc, &k.counts, 3),
            hot: k
                .hot
                .iter()
                .take(PCS_PER_KERNEL)
                .map(|p| {
                    let top = p.counts.top(1).first().map(|i| pc.reasons[*i].warp_state.clone()).unwrap_or_default();
                    let at = match (&p.file, p.line) {
                        (Some(f), Some(l)) => format!(" at {f}:{l}"),
                        _ => String::new(),
                    };
                    let sass = p.sass.as_ref().map(|s| format!(" `{s}`")).unwrap_or_default();
                    format!("+{:#x}{sass} ({} samples, {top}){at}", p.pc_offset, p.counts.samples)
                })
                .collect(),
        })
        .collect();
    let every = pc.period_cycles().map_or_else(|| "an unknown interval".to_owned(), |c| format!("{c} cycles"));
    let note = format!(
        "{} warp samples, one every {every} per SM sub-partition; {} dropped by the hardware, {} drain(s) found the \
         hardware buffer full, {} in functions with no launch in the trace. Groups with fewer than {} samples show no \
         bar. Shares per range group are of its samples, as ncu's warp-state sampling shows them; per-instance rows \
         are in stalls.csv and every instruction in pc_samples.csv.",
        pc.sampled, pc.dropped_samples, pc.hardware_buffer_full, pc.unattributed_samples, pc.min_samples
    );
    PcView {
        note,
        reasons: pc.reasons.iter().map(|r| r.warp_state.clone()).collect(),
        groups: groups
            .into_iter()
            .map(|(label, c)| PcGroupView {
                label,
                samples: c.samples,
                few: c.few_samples(),
                shares: (0..c.by_reason.len()).map(|i| c.share_pct(i)).collect(),
            })
            .collect(),
        kernels,
    }
}
