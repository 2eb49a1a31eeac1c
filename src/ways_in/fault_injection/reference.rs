//! The runs without a fault, made once per test process for each workload: with gmprof (the
//! calls a run makes, and the outputs a fault's run is compared with) and without it (what
//! the program's calls return).
//!
//! Imports `child` and `run`.

use std::sync::OnceLock;

use super::child::Workload;
use super::run::{run, Run};
use crate::report::Report;

/// What is kept of a run without a fault (its directory is gone).
pub(super) struct Reference {
    /// What the program's calls returned.
    pub(super) transcript: Vec<String>,
    /// gmprof's calls: function and number of calls, in the order of first calls.
    pub(super) calls: Vec<(String, u32)>,
    /// The report, when gmprof profiled.
    pub(super) report: Option<Report>,
}

impl Reference {
    fn of(run: &Run) -> Reference {
        Reference { transcript: run.transcript.clone(), calls: run.calls.clone(), report: run.report() }
    }

    /// The calls gmprof made of `function`.
    pub(super) fn calls_of(&self, function: &str) -> u32 {
        self.calls.iter().find(|(f, _)| f == function).map_or(0, |(_, n)| *n)
    }
}

static CLEAN: [OnceLock<Reference>; Workload::ALL.len()] = [const { OnceLock::new() }; Workload::ALL.len()];
static WITHOUT: [OnceLock<Reference>; Workload::ALL.len()] = [const { OnceLock::new() }; Workload::ALL.len()];

/// `workload` under gmprof with no fault: it must profile the program without a warning.
pub(super) fn clean(workload: Workload) -> &'static Reference {
    CLEAN[workload.index()].get_or_init(|| {
        let r = run(workload, &[], false);
        assert!(r.exit.success(), "{}: the program ended with {:?}\n{}", workload.name(), r.exit, r.stderr);
        let reference = Reference::of(&r);
        let report =
            reference.report.as_ref().unwrap_or_else(|| panic!("{}: no report\n{}", workload.name(), r.stderr));
        assert_eq!(report.kernels.len(), super::child::LAUNCHES, "{}: every launch is a row", workload.name());
        assert!(
            report.meta.warnings.iter().all(|w| crate::error::failed_calls(w).is_empty()),
            "{:?}",
            report.meta.warnings
        );
        assert!(!reference.calls.is_empty(), "{}: gmprof made no scripted call", workload.name());
        reference
    })
}

/// `workload` without gmprof: what the program's calls return.
pub(super) fn without_gmprof(workload: Workload) -> &'static Reference {
    WITHOUT[workload.index()].get_or_init(|| {
        let r = run(workload, &[], true);
        assert!(r.exit.success(), "{}: the program ended with {:?}\n{}", workload.name(), r.exit, r.stderr);
        assert!(r.calls.is_empty(), "{}: without gmprof, nothing calls CUPTI: {:?}", workload.name(), r.calls);
        Reference::of(&r)
    })
}
