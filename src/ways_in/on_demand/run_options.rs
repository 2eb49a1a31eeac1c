//! `gmprof run`'s on-demand flags ([`RunOptions`]: `--on-demand`, `--step-range`,
//! `--capture-range` and the others), checked and turned into the injected library's
//! environment.
//!
//! The launcher's side of [`crate::ways_in::on_demand`]: imported by
//! [`crate::ways_in::launch`] (through the re-export `on_demand::RunOptions`) and by the
//! `gmprof` binary. Imports [`super::config`] (the parsers the injected side reads the same
//! variables with), [`super::protocol`], [`super::steps`] and [`crate::ways_in::env_names`].

use crate::error::{Error, Result};
use crate::ways_in::env_names::on_demand as env;
use crate::ways_in::on_demand::config::{parse_range_end, parse_signal, CaptureRange};
use crate::ways_in::on_demand::protocol::Span;
use crate::ways_in::on_demand::steps::StepRange;

/// What `gmprof run` was asked for on the on-demand side, turned into the injected library's
/// environment by [`RunOptions::env`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOptions {
    /// `--on-demand`.
    pub on_demand: bool,
    /// `--step-range`.
    pub step_range: Option<String>,
    /// `--capture-range`.
    pub capture_range: Option<String>,
    /// `--capture-range-end`.
    pub capture_range_end: Option<String>,
    /// `--capture-signal`.
    pub capture_signal: Option<String>,
    /// `--capture-steps`.
    pub capture_steps: Option<u64>,
    /// `--capture-duration`.
    pub capture_duration: Option<f64>,
    /// `--trace-format kineto`: `--step-range` also names the trace's `ProfilerStep#N`
    /// events, and needs no capture.
    pub kineto_steps: bool,
}

impl RunOptions {
    /// Whether the program starts idle (on demand or with a capture range).
    pub fn idle_start(&self) -> bool {
        self.on_demand || self.capture_range.is_some()
    }

    /// The variables for the injected library, every value checked first. `torch_steps` is
    /// `--torch-steps`'s range name, the step range unless `--step-range` names one.
    pub fn env(&self, torch_steps: Option<&str>) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        if self.step_range.is_some() && !self.idle_start() && !self.kineto_steps {
            return Err(Error::InvalidConfig(
                "--step-range needs --on-demand, --capture-range or --trace-format kineto (whose ProfilerStep#N \
                 events it names)"
                    .into(),
            ));
        }
        for (flag, set) in [
            ("--capture-signal", self.capture_signal.is_some()),
            ("--capture-steps", self.capture_steps.is_some()),
            ("--capture-duration", self.capture_duration.is_some()),
        ] {
            if set && !self.on_demand {
                return Err(Error::InvalidConfig(format!(
                    "{flag} needs --on-demand (it sets what the capture signal takes)"
                )));
            }
        }
        if self.capture_range_end.is_some() && self.capture_range.is_none() {
            return Err(Error::InvalidConfig("--capture-range-end needs --capture-range".into()));
        }
        if !self.idle_start() {
            if let Some(step) = self.step_range.as_deref().filter(|_| self.kineto_steps) {
                out.push((env::STEP_RANGE.into(), StepRange::new(step)?.name().into()));
            }
            return Ok(out);
        }
        if self.on_demand {
            out.push((env::ON_DEMAND.into(), "1".into()));
        }
        if let Some(range) = &self.capture_range {
            out.push((env::CAPTURE_RANGE.into(), range.parse::<CaptureRange>()?.describe()));
        }
        if let Some(end) = &self.capture_range_end {
            parse_range_end(end)?;
            out.push((env::CAPTURE_RANGE_END.into(), end.trim().into()));
        }
        let step = self.step_range.as_deref().or(torch_steps);
        if let Some(step) = step {
            out.push((env::STEP_RANGE.into(), StepRange::new(step)?.name().into()));
        }
        if let Some(signal) = &self.capture_signal {
            parse_signal(signal)?;
            out.push((env::CAPTURE_SIGNAL.into(), signal.trim().into()));
        }
        match (self.capture_steps, self.capture_duration) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidConfig("--capture-steps and --capture-duration: choose one".into()))
            }
            (Some(0), None) => return Err(Error::InvalidConfig("--capture-steps must be at least 1".into())),
            (Some(n), None) if step.is_none() => {
                return Err(Error::InvalidConfig(format!(
                    "--capture-steps {n} needs a step range: --step-range NAME or --torch-steps"
                )))
            }
            (Some(n), None) => out.push((env::CAPTURE_STEPS.into(), n.to_string())),
            (None, Some(s)) => {
                Span::Seconds(s).validate()?;
                out.push((env::CAPTURE_DURATION.into(), s.to_string()));
            }
            (None, None) => {}
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_options_become_the_environment() {
        let o = RunOptions {
            on_demand: true,
            capture_signal: Some("SIGUSR1".into()),
            capture_steps: Some(4),
            ..Default::default()
        };
        let env = o.env(Some("step")).unwrap();
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get(env::ON_DEMAND), Some("1"));
        assert_eq!(get(env::STEP_RANGE), Some("step"), "--torch-steps names the step range");
        assert_eq!(get(env::CAPTURE_SIGNAL), Some("SIGUSR1"));
        assert_eq!(get(env::CAPTURE_STEPS), Some("4"));
        assert!(RunOptions::default().env(None).unwrap().is_empty());
        let e = RunOptions { step_range: Some("s".into()), ..Default::default() }.env(None).unwrap_err();
        assert!(
            e.to_string().contains("--step-range needs --on-demand, --capture-range or --trace-format kineto"),
            "{e}"
        );
        // A Kineto trace's steps: the step range alone, no capture.
        let kineto = RunOptions { step_range: Some("Train step *".into()), kineto_steps: true, ..Default::default() };
        assert_eq!(kineto.env(None).unwrap(), [(env::STEP_RANGE.to_owned(), "Train step *".to_owned())]);
        let e = RunOptions { on_demand: true, capture_steps: Some(3), ..Default::default() }.env(None).unwrap_err();
        assert!(e.to_string().contains("needs a step range"), "{e}");
        let e = RunOptions { capture_range: Some("cuda".into()), ..Default::default() }.env(None).unwrap_err();
        assert!(e.to_string().contains("use cudaProfilerApi or nvtx:NAME"), "{e}");
        let e = RunOptions { on_demand: true, capture_range_end: Some("repeat".into()), ..Default::default() }
            .env(None)
            .unwrap_err();
        assert!(e.to_string().contains("--capture-range-end needs --capture-range"), "{e}");
        let range = RunOptions {
            capture_range: Some("cudaprofilerapi".into()),
            capture_range_end: Some("repeat".into()),
            ..Default::default()
        };
        let env = range.env(None).unwrap();
        assert!(env.contains(&(env::CAPTURE_RANGE.into(), "cudaProfilerApi".into())), "{env:?}");
        assert!(!env.iter().any(|(k, _)| k == env::ON_DEMAND));
    }
}
