//! What the on-demand [`Service`](super::Service) decides and says in the protocol's terms,
//! apart from its state: whether a step push starts an armed capture, how a capture cut by the
//! run's end records its end, and the refusal of a process with no CUDA context yet. Pure
//! functions; they do no I/O and take no lock.
//!
//! Imports the protocol's and the model's types only (not the service).

use crate::model::RunEnd;
use crate::ways_in::on_demand::protocol::StartAt;

/// Whether a step push numbered `index` starts a capture armed to start at `start`.
pub(super) fn starts_at(start: StartAt, index: Option<u64>) -> bool {
    match (start, index) {
        (StartAt::AtStep(s), Some(i)) => i >= s,
        (StartAt::Next, Some(_)) => true,
        (_, None) => false,
    }
}

pub(super) fn not_attached() -> String {
    "this process has no CUDA context yet (gmprof attaches at its first): try again once it uses the GPU".into()
}

/// What a capture cut by the run's end records as its end, to follow "ended by":
/// `signal 15 (SIGTERM)`, `the run's end (process exit)`.
pub(super) fn ended_by_run(run_end: &RunEnd) -> String {
    match run_end {
        RunEnd::Signal { signal, name } => format!("signal {signal} ({name})"),
        RunEnd::Finished { by } => format!("the run's end ({by})"),
        other => format!("the run's end: {}", other.describe()),
    }
}
