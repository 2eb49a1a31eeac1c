//! Which time of a step is meant: its GPU time (the sum of its kernels' durations) or its
//! wall time (push to pop). Shared by the flight recorder's slow-step rule
//! (`analysis::online`) and the merge's straggler table (`report::runs`).

use crate::error::{Error, Result};

/// Which time of a step is compared or judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StepTime {
    /// Σ of the step's kernel durations (the default): extra GPU work shows, and nothing the
    /// host does (gmprof's own drains, which hold the session lock, included) does.
    #[default]
    Gpu,
    /// Pop − push of the step range: host stalls show too (a data loader, a synchronize),
    /// and so do gmprof's drains.
    Wall,
}

impl StepTime {
    /// `gpu` or `wall`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepTime::Gpu => "gpu",
            StepTime::Wall => "wall",
        }
    }
}

impl std::str::FromStr for StepTime {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gpu" => Ok(StepTime::Gpu),
            "wall" => Ok(StepTime::Wall),
            other => Err(Error::InvalidConfig(format!("step time '{other}': use gpu or wall"))),
        }
    }
}
