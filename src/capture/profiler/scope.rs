//! Which open range a kernel or transfer is attributed to ([`RangeScope`]).
//!
//! Imports nothing of the profiler's; `builder` and `state` import it, and `mod.rs`
//! re-exports it (`gmprof::RangeScope`).

use crate::error::{Error, Result};

/// Which open range a kernel or transfer is attributed to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RangeScope {
    /// The innermost open range of the launching thread; none means the `<root>` row.
    #[default]
    Thread,
    /// As `Thread`, but a thread with no open range falls back to the most recently pushed
    /// range still open on any thread. Use it when helper threads launch work on behalf of
    /// a thread that holds the ranges: PyTorch runs backward on its autograd thread, whose
    /// kernels otherwise all land in `<root>`. Likewise a range pushed by a thread with no
    /// open range of its own nests under that latest open range, so ranges the autograd
    /// thread pushes (module hooks, NVTX from `emit_nvtx`) land inside the training loop's
    /// step instead of at the top level.
    Process,
}

impl std::str::FromStr for RangeScope {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "thread" => Ok(RangeScope::Thread),
            "process" => Ok(RangeScope::Process),
            other => Err(Error::InvalidConfig(format!("unknown range scope '{other}': use thread or process"))),
        }
    }
}
