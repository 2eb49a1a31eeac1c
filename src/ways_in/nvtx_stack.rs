//! A thread's NVTX range stack, as the injected profiler keeps it.
//!
//! Layer 3, for [`crate::ways_in::injection`]: which pushes become gmprof ranges (the
//! `GMPROF_NVTX_INCLUDE` filter), which ranges opened before the profiler started are
//! adopted when it starts, and which pops have no push.

/// One NVTX range open on a thread, and whether it was handed to gmprof.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OpenNvtxRange {
    name: String,
    forwarded: bool,
}

/// A thread's NVTX range stack: it decides which pushes become gmprof ranges and keeps pops
/// matched to their pushes, so a filtered-out range never pops a gmprof range.
#[derive(Debug, Default)]
pub struct NvtxRangeStack {
    open: Vec<OpenNvtxRange>,
}

/// What to do with an NVTX pop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopAction {
    /// Pop the matching gmprof range.
    Forward,
    /// The push was not forwarded; nothing to do.
    Ignore,
    /// A pop with no push on this thread.
    Unbalanced,
}

impl NvtxRangeStack {
    /// Whether a range named `name` opened now would be followed under `include`.
    pub fn admits(&self, name: &str, include: &[String]) -> bool {
        include.is_empty() || include.iter().any(|i| i == name) || self.open.iter().any(|r| r.forwarded)
    }

    /// Records a push. With `live` (a profiler is running) and a name the filter admits,
    /// returns true: the caller forwards it, and reports back with [`Self::forward_failed`]
    /// if that failed.
    pub fn push(&mut self, name: &str, live: bool, include: &[String]) -> bool {
        let forwarded = live && self.admits(name, include);
        self.open.push(OpenNvtxRange { name: name.to_owned(), forwarded });
        forwarded
    }

    /// Marks the innermost range as not forwarded (its gmprof push failed).
    pub fn forward_failed(&mut self) {
        if let Some(top) = self.open.last_mut() {
            top.forwarded = false;
        }
    }

    /// Records a pop.
    pub fn pop(&mut self) -> PopAction {
        match self.open.pop() {
            Some(r) if r.forwarded => PopAction::Forward,
            Some(_) => PopAction::Ignore,
            None => PopAction::Unbalanced,
        }
    }

    /// Once a profiler starts: marks the ranges already open that the filter admits as
    /// forwarded (outermost first) and returns their names, to be pushed in that order.
    pub fn adopt_open(&mut self, include: &[String]) -> Vec<String> {
        let mut names = Vec::new();
        let mut inside = false;
        for r in &mut self.open {
            if !r.forwarded && (include.is_empty() || inside || include.contains(&r.name)) {
                r.forwarded = true;
                names.push(r.name.clone());
            }
            inside |= r.forwarded;
        }
        names
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
    fn filter_follows_named_ranges_and_their_children_only() {
        let include = vec!["step".to_owned()];
        let mut s = NvtxRangeStack::default();
        assert!(!s.push("setup", true, &include));
        assert!(s.push("step", true, &include));
        assert!(s.push("forward", true, &include), "nested in a followed range");
        assert_eq!(s.pop(), PopAction::Forward);
        assert_eq!(s.pop(), PopAction::Forward);
        assert!(!s.push("other", true, &include));
        assert_eq!(s.pop(), PopAction::Ignore);
        assert_eq!(s.pop(), PopAction::Ignore, "setup was never forwarded");
        assert_eq!(s.pop(), PopAction::Unbalanced);
        assert_eq!(s.depth(), 0);
    }

    #[test]
    fn pushes_before_the_profiler_are_adopted_when_it_starts() {
        let mut s = NvtxRangeStack::default();
        assert!(!s.push("init", false, &[]));
        assert!(!s.push("load", false, &[]));
        assert_eq!(s.adopt_open(&[]), ["init", "load"]);
        assert_eq!(s.adopt_open(&[]), Vec::<String>::new(), "adopted once");
        assert_eq!(s.pop(), PopAction::Forward);
        assert_eq!(s.pop(), PopAction::Forward);

        let include = vec!["step".to_owned()];
        let mut s = NvtxRangeStack::default();
        s.push("setup", false, &include);
        s.push("step", false, &include);
        s.push("forward", false, &include);
        assert_eq!(s.adopt_open(&include), ["step", "forward"]);
        assert_eq!(s.pop(), PopAction::Forward);
        assert_eq!(s.pop(), PopAction::Forward);
        assert_eq!(s.pop(), PopAction::Ignore);
    }

    #[test]
    fn a_range_pushed_before_cuda_is_adopted_and_its_pop_is_balanced() {
        // graph_steps.cu: nvtxRangePushA("setup") before the first CUDA call, heard now that
        // gmprof starts at the first NVTX call; the context is created inside it; the pop
        // comes once CUDA is up.
        let mut s = NvtxRangeStack::default();
        assert!(!s.push("setup", false, &[]), "no profiler yet");
        assert_eq!(s.adopt_open(&[]), ["setup"], "adopted when the first context is profiled");
        assert_eq!(s.pop(), PopAction::Forward, "popped as a gmprof range, not unbalanced");
        assert!(s.push("step 0", true, &[]));
        assert_eq!(s.pop(), PopAction::Forward);
        assert_eq!(s.depth(), 0);
        // Started with CUDA, the push was never heard: the pop is the one left unbalanced.
        let mut late = NvtxRangeStack::default();
        assert_eq!(late.adopt_open(&[]), Vec::<String>::new());
        assert_eq!(late.pop(), PopAction::Unbalanced);
    }

    #[test]
    fn a_failed_forward_is_not_popped() {
        let mut s = NvtxRangeStack::default();
        assert!(s.push("step", true, &[]));
        s.forward_failed();
        assert_eq!(s.pop(), PopAction::Ignore);
    }
}
