//! A thread's NVTX range stack, as the injected profiler keeps it.
//!
//! Layer 3, for [`crate::ways_in::injection`]: which pushes become gmprof ranges (the
//! `GMPROF_NVTX_INCLUDE` filter), which ranges opened before the profiler started are
//! adopted when it starts, and which pops have no push.

/// A set of profilers (one bit per CUDA context's profiler slot, at most 64).
pub type ProfilerMask = u64;

/// One NVTX range open on a thread: whether the filter follows it, and which profilers it
/// was handed to.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OpenNvtxRange {
    name: String,
    followed: bool,
    sent_to: ProfilerMask,
}

/// A thread's NVTX range stack: it decides which pushes become gmprof ranges and keeps pops
/// matched to their pushes, so a filtered-out range never pops a gmprof range, and a
/// profiler that started after a push (a CUDA context created later) never gets its pop.
#[derive(Debug, Default)]
pub struct NvtxRangeStack {
    open: Vec<OpenNvtxRange>,
}

/// What to do with an NVTX pop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopAction {
    /// Pop the matching gmprof range on these profilers.
    Forward(ProfilerMask),
    /// The push was not forwarded; nothing to do.
    Ignore,
    /// A pop with no push on this thread.
    Unbalanced,
}

impl NvtxRangeStack {
    /// Whether a range named `name` opened now would be followed under `include`.
    pub fn admits(&self, name: &str, include: &[String]) -> bool {
        include.is_empty() || include.iter().any(|i| i == name) || self.open.iter().any(|r| r.followed)
    }

    /// Records a push; `live` holds the running profilers. Returns those to forward it to
    /// (none when the filter leaves it out); the caller reports failures back with
    /// [`Self::forward_failed`].
    pub fn push(&mut self, name: &str, live: ProfilerMask, include: &[String]) -> ProfilerMask {
        let followed = self.admits(name, include);
        let sent_to = if followed { live } else { 0 };
        self.open.push(OpenNvtxRange { name: name.to_owned(), followed, sent_to });
        sent_to
    }

    /// Marks the innermost range as not forwarded to `failed` (their gmprof push failed).
    pub fn forward_failed(&mut self, failed: ProfilerMask) {
        if let Some(top) = self.open.last_mut() {
            top.sent_to &= !failed;
        }
    }

    /// Records a pop.
    pub fn pop(&mut self) -> PopAction {
        match self.open.pop() {
            Some(r) if r.sent_to != 0 => PopAction::Forward(r.sent_to),
            Some(_) => PopAction::Ignore,
            None => PopAction::Unbalanced,
        }
    }

    /// Once profiler `slot` starts: the ranges already open that the filter follows and that
    /// it has not got (outermost first), marked as sent to it; push them in that order.
    pub fn adopt_open(&mut self, slot: u32, include: &[String]) -> Vec<String> {
        let bit = 1u64 << slot.min(63);
        let mut names = Vec::new();
        let mut inside = false;
        for r in &mut self.open {
            let follow = r.followed || include.is_empty() || inside || include.contains(&r.name);
            if follow {
                r.followed = true;
                if r.sent_to & bit == 0 {
                    r.sent_to |= bit;
                    names.push(r.name.clone());
                }
            }
            inside |= follow;
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
        assert_eq!(s.push("setup", 1, &include), 0);
        assert_eq!(s.push("step", 1, &include), 1);
        assert_eq!(s.push("forward", 1, &include), 1, "nested in a followed range");
        assert_eq!(s.pop(), PopAction::Forward(1));
        assert_eq!(s.pop(), PopAction::Forward(1));
        assert_eq!(s.push("other", 1, &include), 0);
        assert_eq!(s.pop(), PopAction::Ignore);
        assert_eq!(s.pop(), PopAction::Ignore, "setup was never forwarded");
        assert_eq!(s.pop(), PopAction::Unbalanced);
        assert_eq!(s.depth(), 0);
    }

    #[test]
    fn pushes_before_the_profiler_are_adopted_when_it_starts() {
        let mut s = NvtxRangeStack::default();
        assert_eq!(s.push("init", 0, &[]), 0);
        assert_eq!(s.push("load", 0, &[]), 0);
        assert_eq!(s.adopt_open(0, &[]), ["init", "load"]);
        assert_eq!(s.adopt_open(0, &[]), Vec::<String>::new(), "adopted once");
        assert_eq!(s.pop(), PopAction::Forward(1));
        assert_eq!(s.pop(), PopAction::Forward(1));

        let include = vec!["step".to_owned()];
        let mut s = NvtxRangeStack::default();
        s.push("setup", 0, &include);
        s.push("step", 0, &include);
        s.push("forward", 0, &include);
        assert_eq!(s.adopt_open(0, &include), ["step", "forward"]);
        assert_eq!(s.pop(), PopAction::Forward(1));
        assert_eq!(s.pop(), PopAction::Forward(1));
        assert_eq!(s.pop(), PopAction::Ignore);
    }

    #[test]
    fn a_range_pushed_before_cuda_is_adopted_and_its_pop_is_balanced() {
        // graph_steps.cu: nvtxRangePushA("setup") before the first CUDA call, heard now that
        // gmprof starts at the first NVTX call; the context is created inside it; the pop
        // comes once CUDA is up.
        let mut s = NvtxRangeStack::default();
        assert_eq!(s.push("setup", 0, &[]), 0, "no profiler yet");
        assert_eq!(s.adopt_open(0, &[]), ["setup"], "adopted when the first context is profiled");
        assert_eq!(s.pop(), PopAction::Forward(1), "popped as a gmprof range, not unbalanced");
        assert_eq!(s.push("step 0", 1, &[]), 1);
        assert_eq!(s.pop(), PopAction::Forward(1));
        assert_eq!(s.depth(), 0);
        // Started with CUDA, the push was never heard: the pop is the one left unbalanced.
        let mut late = NvtxRangeStack::default();
        assert_eq!(late.adopt_open(0, &[]), Vec::<String>::new());
        assert_eq!(late.pop(), PopAction::Unbalanced);
    }

    #[test]
    fn a_failed_forward_is_not_popped() {
        let mut s = NvtxRangeStack::default();
        assert_eq!(s.push("step", 1, &[]), 1);
        s.forward_failed(1);
        assert_eq!(s.pop(), PopAction::Ignore);
    }

    #[test]
    fn a_context_created_later_gets_the_open_ranges_and_only_their_pops() {
        // GPU 0 profiles from the start (slot 0); "step" and "forward" are open when the
        // program first touches GPU 1 (slot 1), whose profiler adopts them; "backward" goes
        // to both; "optimizer" was pushed and popped before GPU 1 existed.
        let mut s = NvtxRangeStack::default();
        assert_eq!(s.push("optimizer", 0b01, &[]), 0b01);
        assert_eq!(s.pop(), PopAction::Forward(0b01));
        assert_eq!(s.push("step", 0b01, &[]), 0b01);
        assert_eq!(s.push("forward", 0b01, &[]), 0b01);
        assert_eq!(s.adopt_open(1, &[]), ["step", "forward"]);
        assert_eq!(s.adopt_open(1, &[]), Vec::<String>::new(), "adopted once");
        assert_eq!(s.pop(), PopAction::Forward(0b11), "forward: both");
        assert_eq!(s.push("backward", 0b11, &[]), 0b11);
        s.forward_failed(0b10);
        assert_eq!(s.pop(), PopAction::Forward(0b01), "GPU 1's push failed: its pop is not sent");
        assert_eq!(s.pop(), PopAction::Forward(0b11));
        // With a filter, a later context adopts only the followed ranges.
        let include = vec!["step".to_owned()];
        let mut s = NvtxRangeStack::default();
        s.push("setup", 0b01, &include);
        s.push("step", 0b01, &include);
        assert_eq!(s.adopt_open(1, &include), ["step"]);
        assert_eq!(s.pop(), PopAction::Forward(0b11));
        assert_eq!(s.pop(), PopAction::Ignore);
    }
}
