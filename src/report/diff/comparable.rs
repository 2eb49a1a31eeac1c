//! Why two runs' numbers may differ for reasons of their own: the warnings of a diff.
//!
//! Layer 3 (the safe profiler), report output, under [`super`].

use super::model::SideInfo;
use crate::report::runs::merge::ProcessReport;

/// Why the two runs' numbers may differ for reasons of their own.
pub(super) fn comparability(base: &[ProcessReport], new: &[ProcessReport], b: &SideInfo, n: &SideInfo) -> Vec<String> {
    let mut out = Vec::new();
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".to_owned());
    if b.device_name != n.device_name {
        out.push(format!("different GPUs: {} against {}", show(&b.device_name), show(&n.device_name)));
    } else if b.chip != n.chip {
        out.push(format!("different chips: {} against {}", show(&b.chip), show(&n.chip)));
    }
    let peaks = |side: &[ProcessReport]| side.first().and_then(|p| p.report.meta.device_peaks);
    if let (Some(pb), Some(pn)) = (peaks(base), peaks(new)) {
        if pb.sm_clock_khz != pn.sm_clock_khz || pb.memory_clock_khz != pn.memory_clock_khz {
            out.push(format!(
                "different maximum clocks: SM {} against {} kHz, memory {} against {} kHz",
                opt(pb.sm_clock_khz),
                opt(pn.sm_clock_khz),
                opt(pb.memory_clock_khz),
                opt(pn.memory_clock_khz)
            ));
        }
    }
    let driver = |side: &[ProcessReport]| side.first().and_then(|p| p.report.meta.driver_version.clone());
    if let (Some(db), Some(dn)) = (driver(base), driver(new)) {
        if db != dn {
            out.push(format!("different drivers: {db} against {dn}"));
        }
    }
    if b.mode != n.mode {
        out.push(format!(
            "different modes: {} against {} (counter modes add their own cost to kernel times)",
            b.mode, n.mode
        ));
    }
    let source = |side: &[ProcessReport]| side.first().map(|p| p.report.meta.time_source);
    if source(base) != source(new) {
        out.push("different kernel time sources: times are measured differently".to_owned());
    }
    let only =
        |a: &[String], other: &[String]| -> Vec<String> { a.iter().filter(|m| !other.contains(m)).cloned().collect() };
    let (ob, on) = (only(&b.metrics, &n.metrics), only(&n.metrics, &b.metrics));
    if !ob.is_empty() || !on.is_empty() {
        let list = |v: &[String]| if v.is_empty() { "none".to_owned() } else { v.join(", ") };
        out.push(format!(
            "different metric sets: only the base has {}; only the new run has {} (not compared)",
            list(&ob),
            list(&on)
        ));
    }
    if base.len() != new.len() {
        out.push(format!(
            "different numbers of processes: {} against {} (values are pooled; counts are per process)",
            base.len(),
            new.len()
        ));
    }
    for (what, side) in [("base", base), ("new", new)] {
        for p in side {
            let m = &p.report.meta;
            if let Some(end) = m.run_end.as_ref().filter(|e| !e.is_complete()) {
                out.push(format!("{what} {} is partial: {}", p.label, end.describe()));
            }
            if m.dropped_activity_records > 0 || m.dropped_counter_ranges > 0 || m.flagged_kernel_rows > 0 {
                out.push(format!(
                    "{what} {}: {} dropped activity records, {} dropped counter ranges, {} flagged kernel rows",
                    p.label, m.dropped_activity_records, m.dropped_counter_ranges, m.flagged_kernel_rows
                ));
            }
        }
    }
    out
}

fn opt(v: Option<u32>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "unknown".to_owned())
}
