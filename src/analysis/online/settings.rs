//! What the online aggregates keep: [`OnlineSettings`].
//!
//! A leaf of `online`: `steps` and `aggregates` read it.

/// Settings of the online aggregates and the steps table. Every bound on their memory is one
/// of these, never the run's length.
#[derive(Clone, Debug)]
pub struct OnlineSettings {
    /// Steps per aggregates window (default 1 000).
    pub window_steps: u64,
    /// The step range: a glob on the exact or folded path of a top-level range (`step`,
    /// `Train step *`, `Train step #`); `None` takes the first top-level range group that
    /// repeats.
    pub step_range: Option<glob::Pattern>,
    /// Distinct keys per table (range groups, kernel names); keys past it are counted in one
    /// [`OTHER_KEY`] row (default 4 096).
    pub max_groups: usize,
    /// How many levels below the step a step row's range groups go (default 2).
    pub step_detail_depth: u32,
}

/// The key that rows past [`OnlineSettings::max_groups`] distinct keys fold into.
pub const OTHER_KEY: &str = "<other>";

/// Default steps per window.
pub const DEFAULT_WINDOW_STEPS: u64 = 1000;

impl Default for OnlineSettings {
    fn default() -> Self {
        Self { window_steps: DEFAULT_WINDOW_STEPS, step_range: None, max_groups: 4096, step_detail_depth: 2 }
    }
}
