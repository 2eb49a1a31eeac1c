//! What an on-demand injected gmprof is told by the environment ([`OnDemandConfig`]), and
//! the values its variables take: capture ranges ([`CaptureRange`]), how many of them
//! ([`parse_range_end`]) and the capture signal ([`parse_signal`]).
//!
//! Imported by the files of [`crate::ways_in::on_demand`] that need the configuration
//! ([`super::service`], [`super::injected`]) and by [`super::run_options`], which checks
//! `gmprof run`'s flags with the same parsers; re-exported by `on_demand/mod.rs`, so
//! `gmprof::ways_in::on_demand::OnDemandConfig` and the others keep their paths. Imports
//! below it only: [`super::protocol`], [`super::steps`], [`crate::ways_in::env_names`],
//! [`crate::ways_in::settings`] and [`crate::ways_in::signals`].

use std::ffi::c_int;

use crate::error::{Error, Result};
use crate::ways_in::env_names::on_demand as env;
use crate::ways_in::on_demand::protocol::{CaptureSettings, Span};
use crate::ways_in::on_demand::steps::StepRange;

/// Steps a signal-triggered capture lasts when nothing says otherwise.
pub const DEFAULT_CAPTURE_STEPS: u64 = 10;
/// Seconds it lasts without a step range.
pub const DEFAULT_CAPTURE_SECONDS: f64 = 10.0;

/// nsys-style capture ranges: the program says when.
#[derive(Clone, Debug, PartialEq)]
pub enum CaptureRange {
    /// From each `cudaProfilerStart` (`cuProfilerStart`) to the next `cudaProfilerStop`.
    CudaProfilerApi,
    /// Each instance of the NVTX range of this name (or glob), from its push to its pop.
    Nvtx(StepRange),
}

impl std::str::FromStr for CaptureRange {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("cudaProfilerApi") {
            return Ok(CaptureRange::CudaProfilerApi);
        }
        if let Some(name) = s.strip_prefix("nvtx:") {
            return StepRange::new(name).map(CaptureRange::Nvtx).map_err(|e| {
                Error::InvalidConfig(format!("--capture-range {s}: {e} (use nvtx:NAME with the range's name)"))
            });
        }
        Err(Error::InvalidConfig(format!("--capture-range {s}: use cudaProfilerApi or nvtx:NAME")))
    }
}

impl CaptureRange {
    /// As given on the command line.
    pub fn describe(&self) -> String {
        match self {
            CaptureRange::CudaProfilerApi => "cudaProfilerApi".into(),
            CaptureRange::Nvtx(range) => format!("nvtx:{}", range.name()),
        }
    }
}

/// How many capture ranges are captured: `Some(n)` at most n, `None` every one.
pub fn parse_range_end(text: &str) -> Result<Option<u64>> {
    match text.trim() {
        "stop" => Ok(Some(1)),
        "repeat" => Ok(None),
        other => match other.strip_prefix("repeat:").map(str::parse::<u64>) {
            Some(Ok(n)) if n > 0 => Ok(Some(n)),
            _ => Err(Error::InvalidConfig(format!(
                "--capture-range-end {other}: use stop (the first range only), repeat (every one) or repeat:N"
            ))),
        },
    }
}

/// A capture signal's number: `SIGUSR2`, `USR2`, `SIGUSR1`, `USR1` or a number. Signals that
/// end a run (gmprof writes its outputs on those), SIGKILL and SIGSTOP are refused.
pub fn parse_signal(text: &str) -> Result<Option<c_int>> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    let signal = match bare {
        "NONE" | "0" | "OFF" => return Ok(None),
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        n => match n.parse::<c_int>() {
            Ok(n) if (1..=libc::SIGRTMAX()).contains(&n) => n,
            _ => {
                return Err(Error::InvalidConfig(format!(
                    "--capture-signal {t}: use SIGUSR2, SIGUSR1, a signal number or none"
                )))
            }
        },
    };
    let taken = crate::ways_in::signals::HANDLED.contains(&signal)
        || matches!(signal, libc::SIGKILL | libc::SIGSTOP | libc::SIGCHLD | libc::SIGCONT | libc::SIGPIPE);
    if taken {
        return Err(Error::InvalidConfig(format!(
            "--capture-signal {t}: {} ends or controls the process (gmprof writes its outputs on the ending \
             signals); use SIGUSR2 or SIGUSR1",
            crate::ways_in::signals::name(signal)
        )));
    }
    Ok(Some(signal))
}

/// What an on-demand injected gmprof is told by the environment.
#[derive(Clone, Debug, PartialEq)]
pub struct OnDemandConfig {
    /// Requests are served (socket, signal); without it only a capture range captures.
    pub on_demand: bool,
    /// The step range.
    pub step_range: Option<StepRange>,
    /// The capture range.
    pub capture_range: Option<CaptureRange>,
    /// How many capture ranges to capture (`None`: every one).
    pub range_captures: Option<u64>,
    /// The capture signal.
    pub signal: Option<c_int>,
    /// What a capture collects unless its request says otherwise (mode default trace).
    pub defaults: CaptureSettings,
    /// How long a signal-triggered capture lasts.
    pub signal_span: Span,
    /// NVTX ranges followed inside a capture (`GMPROF_NVTX_INCLUDE`); empty: all.
    pub nvtx_include: Vec<String>,
}

impl OnDemandConfig {
    /// Reads the configuration through `lookup`: `None` when neither `GMPROF_ON_DEMAND` nor a
    /// capture range asks for an idle start.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Option<OnDemandConfig>> {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let on_demand = crate::ways_in::settings::parse_flag(env::ON_DEMAND, get(env::ON_DEMAND), false)?;
        let capture_range = get(env::CAPTURE_RANGE).map(|r| r.parse::<CaptureRange>()).transpose()?;
        if !on_demand && capture_range.is_none() {
            return Ok(None);
        }
        let step_name = get(env::STEP_RANGE).or_else(|| get(crate::ways_in::env_names::TORCH_STEPS_ENV));
        let step_range = step_name.as_deref().map(StepRange::new).transpose()?;
        let range_captures = get(env::CAPTURE_RANGE_END).map_or(Ok(Some(1)), |t| parse_range_end(&t))?;
        let signal = match get(env::CAPTURE_SIGNAL) {
            Some(text) => parse_signal(&text)?,
            None if on_demand => Some(libc::SIGUSR2),
            None => None,
        };
        let number = |key: &str| -> Result<Option<f64>> {
            get(key)
                .map(|v| {
                    v.parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() && *x > 0.0)
                        .ok_or_else(|| Error::InvalidConfig(format!("{key}={v}: use a positive number")))
                })
                .transpose()
        };
        let signal_span = match (number(env::CAPTURE_STEPS)?, number(env::CAPTURE_DURATION)?) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidConfig(format!(
                    "{} and {} are both set: a capture lasts steps or seconds",
                    env::CAPTURE_STEPS,
                    env::CAPTURE_DURATION
                )))
            }
            (Some(steps), None) if step_range.is_some() && steps.fract() == 0.0 => Span::Steps(steps as u64),
            (Some(steps), None) => {
                return Err(Error::InvalidConfig(format!(
                    "{}={steps}: a capture of steps needs whole steps and a step range (--step-range or \
                     --torch-steps); use --capture-duration",
                    env::CAPTURE_STEPS
                )))
            }
            (None, Some(seconds)) if Span::Seconds(seconds).validate().is_ok() => Span::Seconds(seconds),
            (None, Some(_)) => {
                return Err(Error::InvalidConfig(format!(
                    "{}={}: longer than a capture can last (seconds, up to about 1.8e19)",
                    env::CAPTURE_DURATION,
                    get(env::CAPTURE_DURATION).unwrap_or_default()
                )))
            }
            (None, None) if step_range.is_some() => Span::Steps(DEFAULT_CAPTURE_STEPS),
            (None, None) => Span::Seconds(DEFAULT_CAPTURE_SECONDS),
        };
        let list = |v: String| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        let defaults = CaptureSettings {
            mode: Some(get(crate::ways_in::env_names::injection::MODE).unwrap_or_else(|| "trace".into())),
            metrics: get(crate::ways_in::env_names::injection::METRICS).map(list),
            pm_sampling: get(crate::capture::pm_sampling::PM_SAMPLING_ENV),
            pm_interval: get(crate::capture::pm_sampling::PM_INTERVAL_ENV),
        };
        defaults.validate()?;
        Ok(Some(OnDemandConfig {
            on_demand,
            step_range,
            capture_range,
            range_captures,
            signal,
            defaults,
            signal_span,
            nvtx_include: get(crate::ways_in::env_names::injection::NVTX_INCLUDE).map(list).unwrap_or_default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<OnDemandConfig>> {
        let owned: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        OnDemandConfig::from_lookup(&move |k| owned.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn nothing_is_on_demand_unless_asked() {
        assert_eq!(config(&[]).unwrap(), None);
        assert_eq!(config(&[(env::STEP_RANGE, "step"), (env::ON_DEMAND, "0")]).unwrap(), None);
    }

    #[test]
    fn on_demand_defaults_to_trace_sigusr2_and_ten_steps() {
        let c = config(&[(env::ON_DEMAND, "1"), ("GMPROF_TORCH_STEPS", "step")]).unwrap().unwrap();
        assert!(c.on_demand && c.capture_range.is_none());
        assert_eq!(c.step_range.as_ref().map(StepRange::name), Some("step"));
        assert_eq!(c.signal, Some(libc::SIGUSR2));
        assert_eq!(c.defaults.mode.as_deref(), Some("trace"));
        assert_eq!(c.signal_span, Span::Steps(DEFAULT_CAPTURE_STEPS));
        let c = config(&[(env::ON_DEMAND, "1")]).unwrap().unwrap();
        assert_eq!(c.signal_span, Span::Seconds(DEFAULT_CAPTURE_SECONDS), "no step range: seconds");
        let c = config(&[
            (env::ON_DEMAND, "1"),
            (env::STEP_RANGE, "Train step *"),
            (env::CAPTURE_STEPS, "3"),
            (env::CAPTURE_SIGNAL, "usr1"),
            ("GMPROF_MODE", "per_kernel"),
            ("GMPROF_METRICS", "dram__bytes_read.sum, gpu__time_duration.sum"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.signal_span, Span::Steps(3));
        assert_eq!(c.signal, Some(libc::SIGUSR1));
        assert_eq!(c.defaults.mode.as_deref(), Some("per_kernel"));
        assert_eq!(c.defaults.metrics.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn capture_ranges_parse_like_nsys() {
        let c = config(&[(env::CAPTURE_RANGE, "cudaProfilerApi")]).unwrap().unwrap();
        assert!(!c.on_demand && c.signal.is_none(), "a capture range alone serves no requests");
        assert_eq!(c.capture_range, Some(CaptureRange::CudaProfilerApi));
        assert_eq!(c.range_captures, Some(1), "stop after the first, as nsys");
        let c = config(&[(env::CAPTURE_RANGE, "nvtx:train"), (env::CAPTURE_RANGE_END, "repeat:3")]).unwrap().unwrap();
        assert_eq!(c.capture_range.as_ref().map(CaptureRange::describe).as_deref(), Some("nvtx:train"));
        assert_eq!(c.range_captures, Some(3));
        assert_eq!(parse_range_end("repeat").unwrap(), None);
        for bad in ["repeat:0", "again", "repeat:x"] {
            assert!(parse_range_end(bad).unwrap_err().to_string().contains("stop (the first range only)"), "{bad}");
        }
        let e = "nvtx".parse::<CaptureRange>().unwrap_err().to_string();
        assert!(e.contains("use cudaProfilerApi or nvtx:NAME"), "{e}");
        assert!("nvtx:".parse::<CaptureRange>().unwrap_err().to_string().contains("nvtx:NAME"));
    }

    #[test]
    fn signals_that_end_the_run_are_refused() {
        assert_eq!(parse_signal("SIGUSR2").unwrap(), Some(libc::SIGUSR2));
        assert_eq!(parse_signal("usr1").unwrap(), Some(libc::SIGUSR1));
        assert_eq!(parse_signal("none").unwrap(), None);
        assert_eq!(parse_signal(&libc::SIGRTMIN().to_string()).unwrap(), Some(libc::SIGRTMIN()));
        for bad in ["SIGTERM", "2", "KILL", "9"] {
            let e = parse_signal(bad).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains("ends or controls the process") || e.contains("use SIGUSR2"), "{bad}: {e}");
        }
        assert!(parse_signal("SIGFOO").is_err());
        let e = config(&[(env::ON_DEMAND, "1"), (env::CAPTURE_STEPS, "3")]).unwrap_err().to_string();
        assert!(e.contains("needs whole steps and a step range"), "{e}");
        let e = config(&[(env::ON_DEMAND, "1"), (env::CAPTURE_DURATION, "-1")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_CAPTURE_DURATION=-1"), "{e}");
        let e = config(&[(env::ON_DEMAND, "1"), ("GMPROF_MODE", "fast")]).unwrap_err().to_string();
        assert!(e.contains("unknown mode 'fast'"), "{e}");
    }
}
