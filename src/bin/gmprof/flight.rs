//! The flight recorder's side of the `gmprof` command: `gmprof run --slow-step`,
//! `--group-jump` and `--flight-signal`, checked before the program starts and passed to
//! the injected library as `GMPROF_SLOW_STEP`, `GMPROF_GROUP_JUMP` and
//! `GMPROF_FLIGHT_SIGNAL`. The work is the library's (`gmprof::analysis::online::flight`).

use std::ffi::OsString;

use gmprof::analysis::online::{SlowStepRule, TriggerRule};
use gmprof::injection::env;
use gmprof::model::ProfilingMode;

/// `gmprof run`'s flight-recorder options.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FlightArgs {
    /// Flight recorder: write `window-N/` (every row of the steps around it, and why) when
    /// a step is slow: `3x` (3 × the running median of the steps' GPU time) or a time
    /// (`200ms`); `wall:3x` judges wall time instead. Trace mode; the run streams from its
    /// start (README, "Flight recorder").
    #[arg(long = "slow-step", value_name = "RULE", value_parser = slow_step_rule)]
    pub slow_step: Option<String>,
    /// Flight recorder: a window when a range group's GPU time in a step jumps: `3x` its
    /// running median, or a time above it (`50ms`).
    #[arg(long = "group-jump", value_name = "RULE", value_parser = trigger_rule)]
    pub group_jump: Option<String>,
    /// Flight recorder: a window when the program gets this signal (SIGUSR1 or SIGUSR2:
    /// `kill -USR1 PID`); alone it turns the recorder on with no rule.
    #[arg(long = "flight-signal", value_name = "SIGNAL", value_parser = flight_signal)]
    pub flight_signal: Option<String>,
}

impl FlightArgs {
    /// Whether any option asks for the flight recorder.
    pub fn on(&self) -> bool {
        self.slow_step.is_some() || self.group_jump.is_some() || self.flight_signal.is_some()
    }

    /// The run's mode with a flight recorder: trace, which the streamed outputs need, when
    /// none is given; another mode asked for is an error, and so is a run that starts idle
    /// (`idle_start`: --on-demand, --capture-range), whose captures do not stream. Without a
    /// flight recorder, `mode` as it is.
    pub fn mode(&self, mode: Option<String>, idle_start: bool) -> gmprof::Result<Option<String>> {
        if !self.on() {
            return Ok(mode);
        }
        if idle_start {
            return Err(gmprof::Error::InvalidConfig(
                "--slow-step, --group-jump and --flight-signal profile the whole run: they do not run beside \
                 --on-demand or --capture-range (captures do not stream)"
                    .into(),
            ));
        }
        match mode.as_deref().map(str::parse::<ProfilingMode>).transpose()? {
            None => Ok(Some(ProfilingMode::Trace.as_str().to_owned())),
            Some(ProfilingMode::Trace) => Ok(mode),
            Some(other) => Err(gmprof::Error::InvalidConfig(format!(
                "--slow-step, --group-jump and --flight-signal need --mode trace (the flight recorder rides on the \
                 streamed outputs, trace only for now), not {}",
                other.as_str()
            ))),
        }
    }

    /// The environment variables they set.
    pub fn env(&self) -> Vec<(String, OsString)> {
        [
            (env::SLOW_STEP, &self.slow_step),
            (env::GROUP_JUMP, &self.group_jump),
            (env::FLIGHT_SIGNAL, &self.flight_signal),
        ]
        .into_iter()
        .filter_map(|(key, value)| value.as_ref().map(|v| (key.to_owned(), v.into())))
        .collect()
    }
}

/// The slow-step rule (`3x`, `wall:200ms`), checked before the program starts.
fn slow_step_rule(text: &str) -> Result<String, String> {
    text.parse::<SlowStepRule>().map(|_| text.trim().to_owned())
}

/// A flight-recorder rule (`3x`, `200ms`), checked before the program starts.
fn trigger_rule(text: &str) -> Result<String, String> {
    text.parse::<TriggerRule>().map(|_| text.trim().to_owned())
}

/// The flight recorder's signal (`SIGUSR1`, `SIGUSR2`), checked before the program starts.
fn flight_signal(text: &str) -> Result<String, String> {
    gmprof::ways_in::settings::parse_flight_signal(text).map(|_| text.trim().to_owned()).map_err(|e| e.to_string())
}
