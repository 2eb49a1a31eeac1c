//! The lines that say something went wrong, for the summary's head and the injected run's
//! stderr: how the run ended when finishing met errors ([`ending_line`]), and which CUPTI
//! and driver calls failed while profiling ([`failed_calls_line`]).
//!
//! Imports `format` (cells) and the report's model; `summary` re-exports both lines.

use super::format::cell;
use crate::analysis::correlate::{Granularity, KernelRow, KernelStatus};
use crate::model::RunEnd;
use crate::report::model::Report;

/// How many of the launches that never completed the ending line names.
const NOT_COMPLETED_NAMED: usize = 3;

/// "run ended with errors: finished (process exit), after CUDA_ERROR_ILLEGAL_INSTRUCTION
/// (715): ...; 2 launch(es) never completed (status not_completed), the last: ...", when
/// finishing met errors. The summary shows it; an injected run prints it when it finishes.
pub fn ending_line(report: &Report) -> Option<String> {
    let end = report.meta.run_end.as_ref().filter(|e| matches!(e, RunEnd::FinishedWithErrors { .. }))?;
    let mut line = format!("run ended with errors: {}", end.describe());
    let not_completed: Vec<&KernelRow> =
        report.kernels.iter().filter(|k| k.status == KernelStatus::NotCompleted).collect();
    if !not_completed.is_empty() {
        let from = not_completed.len().saturating_sub(NOT_COMPLETED_NAMED);
        let named: Vec<String> = not_completed[from..]
            .iter()
            .map(|k| {
                let what = match (&k.kernel_name, k.granularity) {
                    (Some(name), _) => cell(name),
                    (None, Granularity::Graph) => "a CUDA graph".to_owned(),
                    (None, _) => "a kernel, name not kept".to_owned(),
                };
                format!("{what} (correlation id {})", k.correlation_id)
            })
            .collect();
        line.push_str(&format!(
            " | {} launch(es) never completed (kernels.csv status not_completed); the last: {}",
            not_completed.len(),
            named.join(", ")
        ));
    }
    Some(line)
}

/// Failed calls the line names at most (the rest are counted).
const CALLS_NAMED: usize = 4;

/// "CUPTI/driver calls failed: cuptiRangeProfilerPopRange (CUPTI_ERROR_UNKNOWN), ... | what
/// each cost: report.json's warnings (2)", when a warning of the report carries the error of
/// a CUPTI or driver call that failed while profiling (any call: a range push, a counter
/// decode, an activity buffer, a sampler's drain, a release after the report was built).
/// Each distinct function and code once, in the warnings' order (one failure may be said by
/// several warnings: what it cost each output). The summary shows it; an injected run
/// prints it when it finishes.
pub fn failed_calls_line(report: &Report) -> Option<String> {
    let mut calls: Vec<(&str, &str)> = Vec::new();
    let mut warnings = 0;
    for w in &report.meta.warnings {
        let found = crate::error::failed_calls(w);
        if !found.is_empty() {
            warnings += 1;
        }
        for call in found {
            if !calls.contains(&call) {
                calls.push(call);
            }
        }
    }
    if calls.is_empty() {
        return None;
    }
    let mut named: Vec<String> = calls.iter().take(CALLS_NAMED).map(|(api, code)| format!("{api} ({code})")).collect();
    if calls.len() > CALLS_NAMED {
        named.push(format!("{} more", calls.len() - CALLS_NAMED));
    }
    Some(format!(
        "CUPTI/driver calls failed: {} | what each cost: report.json's warnings ({warnings})",
        named.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_calls_are_named_once_each_with_their_code() {
        let mut report = Report::from_json(include_str!("../../../tests/golden/report.json")).unwrap();
        assert_eq!(failed_calls_line(&report), None, "the golden report's warnings name no failed call");
        let push = "range 'step' (instance 0) has no counters: cuptiRangeProfilerPushRange failed with \
                    CUPTI_ERROR_UNKNOWN (999): unknown (while pushing a CUPTI range)";
        let flush = "finishing: activity flush failed: cuptiActivityFlushAll failed with CUPTI_ERROR_UNKNOWN (999): \
                     unknown (while flushing activity buffers)";
        report.meta.warnings.extend([push.to_owned(), flush.to_owned(), push.replace("'step'", "'eval'")]);
        assert_eq!(
            failed_calls_line(&report).unwrap(),
            "CUPTI/driver calls failed: cuptiRangeProfilerPushRange (CUPTI_ERROR_UNKNOWN), cuptiActivityFlushAll \
             (CUPTI_ERROR_UNKNOWN) | what each cost: report.json's warnings (3)"
        );
        let summary = report.summary().to_string();
        let head: Vec<&str> = summary.lines().take_while(|l| !l.starts_with("range ")).collect();
        assert!(
            head.iter().any(|l| l.starts_with("CUPTI/driver calls failed: cuptiRangeProfilerPushRange")),
            "{summary}"
        );
    }
}
