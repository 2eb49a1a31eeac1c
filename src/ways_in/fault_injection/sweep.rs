//! Every CUPTI and driver function gmprof calls in a run, failing at its first call and at
//! its last, in turn, in each workload: the points of README's table, and every call besides them. A
//! failure must leave the program's calls as they return without gmprof and every output
//! readable, and it must either cost nothing (the outputs measure what the run without it
//! measured, [`digest`]) or be said on the first screen and in report.json (or in
//! injection.json, when gmprof could not start).
//!
//! Imports `child`, `run`, `checks` and `reference`.

use super::checks::{digest, program_unharmed_and_outputs_read_back, said_in_report, said_on_first_screen};
use super::child::Workload;
use super::reference::{clean, without_gmprof};
use super::run::run;
use crate::checked::scripted::Fault;

/// Runs the sweep over `workload`; panics listing every call whose failure broke a rule.
fn sweep(workload: Workload) {
    let reference = clean(workload);
    let without = without_gmprof(workload);
    let clean_digest = digest(reference.report.as_ref().expect("a report"));
    let mut broken = Vec::new();
    let calls = reference.calls.iter().flat_map(|(f, n)| std::iter::once((f, 1)).chain((*n > 1).then_some((f, *n))));
    for (function, nth) in calls {
        let fault = Fault::new(function, nth);
        let label = format!("{function} (call {nth}, {})", workload.name());
        let r = run(workload, std::slice::from_ref(&fault), false);
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            program_unharmed_and_outputs_read_back(&label, &r, without, std::slice::from_ref(&fault));
        }));
        if let Err(e) = checked {
            broken.push(crate::error::panic_message(e.as_ref()));
            continue;
        }
        let report = r.report();
        let harmless = report.as_ref().is_some_and(|rep| digest(rep) == clean_digest);
        let said =
            said_on_first_screen(&r, function) && report.as_ref().is_none_or(|rep| said_in_report(rep, function));
        if !harmless && !said {
            let lost: Vec<String> = report
                .as_ref()
                .map_or_else(Vec::new, |rep| digest(rep).into_iter().filter(|d| !clean_digest.contains(d)).collect());
            broken.push(format!(
                "{label}: cost data without saying so on the first screen and in report.json\n  differs: {lost:?}\n  \
                 screen: {:?}",
                r.first_screen()
            ));
        }
    }
    assert!(broken.is_empty(), "{} call(s) of {}:\n{}", broken.len(), workload.name(), broken.join("\n"));
}

#[test]
fn every_call_of_a_trace_run() {
    sweep(Workload::Trace);
}

#[test]
fn every_call_of_a_trace_run_ending_at_exit() {
    sweep(Workload::TraceToExit);
}

#[test]
fn every_call_of_a_per_range_run() {
    sweep(Workload::PerRange);
}

#[test]
fn every_call_of_a_per_kernel_run() {
    sweep(Workload::PerKernel);
}

#[test]
fn every_call_of_a_kernel_replay_run() {
    sweep(Workload::KernelReplay);
}

#[test]
fn every_call_of_a_pm_sampling_run() {
    sweep(Workload::PmSampling);
}

#[test]
fn every_call_of_a_pc_sampling_run() {
    sweep(Workload::PcSampling);
}

#[test]
fn every_call_of_a_sass_metrics_run() {
    sweep(Workload::SassMetrics);
}
