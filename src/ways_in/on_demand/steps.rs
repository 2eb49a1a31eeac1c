//! Steps: which NVTX range marks them, how each process counts them, and the one start step
//! all ranks of a capture share.
//!
//! Layer 3, pure (no CUPTI). A step is an instance of the step range (`--step-range NAME`, a
//! name or glob, or the range `--torch-steps` opens after each optimizer step). Each process
//! numbers the pushes of that range from 0 as it hears them: in a data-parallel job every
//! rank runs the same steps, so the same number is the same step on every rank. The client
//! asks every process for its next step number and starts the capture at
//! [`aligned_start`]: the largest of them plus a margin, so the request reaches every process
//! before that step begins. A process already past it refuses ([`check_start`]) and the
//! capture is cancelled everywhere.

use crate::error::{Error, Result};

/// The margin `gmprof capture` adds by default: steps between the furthest process's next
/// step and the capture's first.
pub const DEFAULT_MARGIN: u64 = 2;

/// The step range: an NVTX range name or glob.
#[derive(Clone, Debug)]
pub struct StepRange {
    name: String,
    pattern: glob::Pattern,
}

impl PartialEq for StepRange {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl StepRange {
    /// The step range `name` (a glob such as `Train step *` takes numbered names).
    pub fn new(name: &str) -> Result<StepRange> {
        let name = name.trim();
        if name.is_empty() {
            return Err(Error::InvalidConfig("the step range's name is empty".into()));
        }
        let pattern =
            glob::Pattern::new(name).map_err(|e| Error::InvalidConfig(format!("step range pattern '{name}': {e}")))?;
        Ok(StepRange { name: name.to_owned(), pattern })
    }

    /// The name or glob as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether an NVTX range of this name is a step.
    pub fn matches(&self, range: &str) -> bool {
        range == self.name || self.pattern.matches(range)
    }
}

/// The first step of a capture of processes whose next steps are `next_steps`: the largest
/// plus `margin`. `None` for no process.
pub fn aligned_start(next_steps: &[u64], margin: u64) -> Option<u64> {
    next_steps.iter().max().map(|m| m.saturating_add(margin))
}

/// Whether a process whose next step is `next_step` can start at step `start`; the refusal
/// says why and what to do.
pub fn check_start(next_step: u64, start: u64) -> std::result::Result<(), String> {
    if next_step > start {
        return Err(format!(
            "this process began step {} already, past the capture's start step {start}: ask again \
             (a larger --margin gives the request more time to reach every process)",
            next_step - 1
        ));
    }
    Ok(())
}

/// One NVTX range open on a thread, as the on-demand service keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenRange {
    /// An instance of the step range.
    pub step: bool,
    /// It started the capture it was handed to (a `nvtx:NAME` capture range): its pop ends it.
    pub trigger: bool,
    /// The capture it was handed to as a range, if any.
    pub capture: Option<u64>,
    /// A step pushed while live metrics are exported: its number and when it was pushed
    /// (its pop gives the step's wall time).
    pub timed: Option<(u64, std::time::Instant)>,
}

/// A thread's open NVTX ranges: a pop is matched to its push, so a range pushed before a
/// capture started (or handed to an earlier one) is never popped in the running capture.
#[derive(Debug, Default)]
pub struct ThreadRanges {
    open: Vec<OpenRange>,
}

impl ThreadRanges {
    /// Records a push.
    pub fn push(&mut self, range: OpenRange) {
        self.open.push(range);
    }

    /// Records a pop: the range it closes, `None` when nothing was open on this thread.
    pub fn pop(&mut self) -> Option<OpenRange> {
        self.open.pop()
    }

    /// Whether a range handed to capture `id` is open on this thread: ranges nested in it go
    /// to the capture too (the `--nvtx-include` rule).
    pub fn inside(&self, id: u64) -> bool {
        self.open.iter().any(|r| r.capture == Some(id))
    }

    /// Ranges open on this thread.
    pub fn depth(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_ranges_match_names_and_globs() {
        let step = StepRange::new("step").unwrap();
        assert!(step.matches("step") && !step.matches("step 2") && !step.matches("Optimizer.step#AdamW.step"));
        let numbered = StepRange::new("Train step *").unwrap();
        assert!(numbered.matches("Train step 0") && numbered.matches("Train step 49"));
        assert!(!numbered.matches("Eval step 1"));
        assert_eq!(numbered.name(), "Train step *");
        // A name with glob characters still matches itself.
        let odd = StepRange::new("step[fwd]").unwrap();
        assert!(odd.matches("step[fwd]"));
        assert!(StepRange::new("  ").is_err());
        assert!(StepRange::new("step [0-").unwrap_err().to_string().contains("step range pattern"));
    }

    #[test]
    fn ranks_at_different_steps_start_together() {
        // Four simulated ranks, the slowest one step behind, the fastest two ahead.
        let next = [1234, 1233, 1235, 1235];
        let start = aligned_start(&next, DEFAULT_MARGIN).unwrap();
        assert_eq!(start, 1237);
        for n in next {
            assert!(check_start(n, start).is_ok(), "rank at {n}");
        }
        assert_eq!(aligned_start(&[], 2), None);
        assert_eq!(aligned_start(&[7], 0), Some(7), "margin 0: the next step of the furthest process");
        assert_eq!(aligned_start(&[u64::MAX], 2), Some(u64::MAX));
        // A rank that raced past the start before the request reached it refuses.
        let e = check_start(1238, start).unwrap_err();
        assert!(e.contains("began step 1237 already, past the capture's start step 1237"), "{e}");
        assert!(e.contains("--margin"), "{e}");
        assert!(check_start(1237, 1237).is_ok(), "its next push is the start");
    }

    #[test]
    fn pops_match_their_pushes() {
        let mut t = ThreadRanges::default();
        t.push(OpenRange { step: false, trigger: false, capture: None, timed: None }); // "main", before any capture
        t.push(OpenRange { step: true, trigger: false, capture: Some(3), timed: None });
        assert!(t.inside(3) && !t.inside(4));
        t.push(OpenRange { step: false, trigger: false, capture: Some(3), timed: None });
        assert_eq!(t.depth(), 3);
        assert_eq!(t.pop(), Some(OpenRange { step: false, trigger: false, capture: Some(3), timed: None }));
        assert!(t.pop().unwrap().step);
        assert!(!t.inside(3));
        assert_eq!(t.pop().unwrap().capture, None, "popped, but never handed to a capture");
        assert_eq!(t.pop(), None);
    }
}
