//! The checks of a fault's run: the program unharmed and the outputs read back, the failure
//! said on the first screen and in report.json, and what a run measured ([`digest`]), to
//! compare with the run without the fault.
//!
//! Imports `run` and `reference`; `points` and `sweep` import it.

use super::reference::Reference;
use super::run::{outputs_read_back, Run};
use crate::checked::scripted::Fault;
use crate::report::Report;

/// What a run measured, without the times that depend on when gmprof read its clock: every
/// kernel row (name, status, range, GPU time, counters), range row (path, kernels,
/// counters), the transfers, the samplers' totals and source lines, the probes, and the loss
/// counters. Two runs measured the same when their digests are equal.
pub(super) fn digest(r: &Report) -> Vec<String> {
    let mut out = vec![format!(
        "dropped counter ranges {}, dropped activity records {}, flagged rows {}, transfers {} ({} B)",
        r.meta.dropped_counter_ranges,
        r.meta.dropped_activity_records,
        r.meta.flagged_kernel_rows,
        r.transfers.len(),
        r.transfers.iter().map(|t| t.bytes).sum::<u64>()
    )];
    for k in &r.kernels {
        out.push(format!(
            "kernel {:?} {:?} {} {:?} {:?}",
            k.kernel_name, k.status, k.range_path, k.duration_ns, k.metrics
        ));
    }
    for range in &r.ranges {
        out.push(format!("range {} {} {:?} {:?}", range.path, range.kernel_count, range.gpu_time_ns, range.metrics));
    }
    if let Some(pm) = &r.pm {
        out.push(format!("pm {} samples, {} missing", pm.sample_count, pm.missing_samples));
    }
    if let Some(pc) = &r.pc {
        out.push(format!("pc {} samples, {} dropped", pc.total_samples, pc.dropped_samples));
        out.extend(pc.pcs.iter().map(|p| format!("pc {} {:#x} {:?}:{:?}", p.function, p.pc_offset, p.file, p.line)));
    }
    out.extend(
        r.probes.iter().map(|p| format!("probe {} {} {}", p.kernel, p.status, p.source.as_deref().unwrap_or(""))),
    );
    out
}

/// Whether `text` names `function`'s failure: the function's name with the scripted code.
pub(super) fn names_failure(text: &str, function: &str) -> bool {
    crate::error::failed_calls(text).iter().any(|(api, _)| *api == function)
}

/// The checks every fault must pass, whatever it cost (`label` names the run in failures):
/// the program's calls returned what they return without gmprof, the fault fired, and
/// gmprof wrote what it could (every output reads back when it wrote a report; otherwise
/// its status, naming the failure).
pub(super) fn program_unharmed_and_outputs_read_back(label: &str, run: &Run, without: &Reference, faults: &[Fault]) {
    assert!(run.exit.success(), "{label}: the program ended with {:?}\n{}", run.exit, run.stderr);
    assert_eq!(run.transcript, without.transcript, "{label}: the program's calls returned other results");
    assert!(!run.transcript.is_empty(), "{label}: the program wrote no transcript");
    assert_eq!(run.fired, faults, "{label}: the faults did not all fire (calls: {:?})", run.calls);
    assert!(!run.stderr.contains("panicked"), "{label}: a panic:\n{}", run.stderr);
    let dir = run.process_dir().unwrap_or_else(|| panic!("{label}: no process directory\n{}", run.stderr));
    if dir.join("report.json").is_file() {
        outputs_read_back(dir);
    } else {
        let status = run.status().unwrap_or_else(|| panic!("{label}: no report and no injection.json"));
        let error = status.error.unwrap_or_default();
        let function = faults.first().map_or("", |f| f.function.as_str());
        assert!(names_failure(&error, function), "{label}: injection.json's error does not name it: {error}");
    }
}

/// Whether the run said `function`'s failure on its first screen: a line with the error (as
/// a stderr line gives it) or naming the function (as the summary's failed-calls line does).
pub(super) fn said_on_first_screen(run: &Run, function: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let names = |line: &str| {
        line.match_indices(function).any(|(at, _)| {
            let before = line[..at].chars().next_back().is_none_or(|c| !word(c));
            let after = line[at + function.len()..].chars().next().is_none_or(|c| !word(c));
            before && after
        })
    };
    run.first_screen().iter().any(|l| names_failure(l, function) || (l.contains("failed") && names(l)))
}

/// Whether the report says `function`'s failure in its warnings or its run end.
pub(super) fn said_in_report(report: &Report, function: &str) -> bool {
    let end = report.meta.run_end.as_ref().map(|e| format!("{e:?}")).unwrap_or_default();
    report.meta.warnings.iter().any(|w| names_failure(w, function)) || names_failure(&end, function)
}
