//! The summary's PC sampling lines: what was sampled and lost, then the top stall reasons of
//! the range groups (numbers in names folded, as the summary's table does) with the most
//! samples.

use std::collections::HashMap;

use super::group::fold_numbers;
use crate::analysis::pc_fold::{PcAttribution, PcReport, StallCounts};
use crate::model::session::ROOT_PATH;

/// Ranges whose top reasons the summary names.
pub const TOP_RANGES: usize = 3;
/// Reasons named per range.
pub const TOP_REASONS: usize = 3;

/// The lines: one with the samples, the interval and the losses; one per top range group
/// (instances and numbered names together) with its top reasons, or a note that it has too
/// few samples.
pub fn pc_lines(pc: &PcReport) -> Vec<String> {
    let every = match (pc.period_exponent, pc.period_cycles()) {
        (Some(e), Some(c)) => format!("every 2^{e} = {c} cycles"),
        _ => "at an unknown interval".to_owned(),
    };
    let attribution = match pc.attribution {
        PcAttribution::Exact => "ranges exact (correlation ids)",
        PcAttribution::ByKernelTime => "ranges by kernel GPU time",
        PcAttribution::Mixed => "ranges partly by kernel GPU time",
        PcAttribution::None => "no samples",
    };
    // A full hardware buffer loses samples CUPTI does not count: said where it is shown.
    let full = match pc.hardware_buffer_full {
        0 => "0".to_owned(),
        n => format!("{n} (samples lost, counts incomplete: see the warning)"),
    };
    let unattributed = if pc.rows_streamed {
        format!("not folded into ranges (rows streamed): {}", pc.unattributed_samples)
    } else {
        format!("not in any range: {}", pc.unattributed_samples)
    };
    let mut lines = vec![format!(
        "PC sampling: {} samples {every} | dropped: {} | hardware buffer full: {full} | {unattributed} | \
         {attribution} | stalls.csv, pc_samples.csv",
        pc.sampled, pc.dropped_samples
    )];
    let mut by_path: Vec<(String, StallCounts)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for r in pc.ranges.iter().filter(|r| r.path != ROOT_PATH) {
        let label = fold_numbers(&r.path).into_owned();
        match at.get(&label) {
            Some(&i) => add(&mut by_path[i].1, &r.counts),
            None => {
                at.insert(label.clone(), by_path.len());
                by_path.push((label, r.counts.clone()));
            }
        }
    }
    by_path.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then(a.0.cmp(&b.0)));
    for (path, c) in by_path.iter().take(TOP_RANGES) {
        let text = if c.few_samples() {
            format!("too few samples for shares (< {})", pc.min_samples)
        } else {
            c.top(TOP_REASONS)
                .iter()
                .map(|i| format!("{} {:.1}%", pc.reasons[*i].warp_state, c.share_pct(*i).unwrap_or(0.0)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!("  stalls in {path} ({} samples): {text}", c.samples));
    }
    lines
}

fn add(into: &mut StallCounts, c: &StallCounts) {
    into.samples += c.samples;
    for (a, b) in into.by_reason.iter_mut().zip(&c.by_reason) {
        *a += b;
    }
    for (a, b) in into.not_issued.iter_mut().zip(&c.not_issued) {
        *a += b;
    }
}
