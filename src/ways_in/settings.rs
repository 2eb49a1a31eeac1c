//! Settings read from the environment that more than one way in reads alike: a yes/no
//! variable (`parse_flag`) and how a run's end is handled ([`EndSettings`]: checkpoints and
//! terminating signals, with their defaults).
//!
//! At the bottom of `ways_in`, beside [`crate::ways_in::env_names`] (the only `ways_in` module
//! it imports): imported by [`crate::ways_in::injection_config`] (the injected library), the
//! C ABI ([`crate::ways_in::capi`]) and [`crate::ways_in::on_demand`]'s configuration. The old
//! paths re-export what moved here: [`crate::ways_in::outputs::EndSettings`] and
//! [`crate::ways_in::injection::DEFAULT_CHECKPOINT_SECS`] (`DEFAULT_SIGNAL_TIMEOUT_SECS` too).

use std::time::Duration;

use crate::analysis::online::{FlightSettings, SlowStepRule, TriggerRule};
use crate::error::{Error, Result};
use crate::ways_in::env_names::injection as env;

/// Default seconds between checkpoints.
pub const DEFAULT_CHECKPOINT_SECS: u64 = 30;
/// Default seconds a terminating signal waits for the outputs.
pub const DEFAULT_SIGNAL_TIMEOUT_SECS: u64 = 120;

/// Default kernel launches a streaming run keeps before it streams (`GMPROF_ROW_LIMIT`).
pub const DEFAULT_ROW_LIMIT: u64 = 200_000;
/// Default time between a streaming run's drains (`GMPROF_STREAM_SECS`): each drain holds
/// the session's lock (the program's launches wait) for a time that grows with the records
/// since the last one, and its rows are in memory until it writes them.
pub const DEFAULT_STREAM_EVERY: Duration = Duration::from_secs(1);
/// The shortest and longest `GMPROF_STREAM_SECS` takes, in seconds.
pub const STREAM_SECS_RANGE: (f64, f64) = (0.05, 3600.0);

/// The most steps `GMPROF_FLIGHT_STEPS` and `GMPROF_FLIGHT_AFTER` take.
pub const MAX_FLIGHT_STEPS: u64 = 1_000;
/// The most windows `GMPROF_FLIGHT_MAX` takes.
pub const MAX_FLIGHT_WINDOWS: u64 = 1_000;

/// The streamed outputs (issue 42), from `GMPROF_STREAM`, `GMPROF_ROW_LIMIT` and
/// `GMPROF_STREAM_SECS`, and the flight recorder, from `GMPROF_SLOW_STEP`,
/// `GMPROF_GROUP_JUMP` and `GMPROF_FLIGHT_*`. On by default (trace mode streams past the
/// row limit); `None` only with `GMPROF_STREAM=0` (every row kept, the whole-file outputs).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamOptions {
    /// Kernel launches kept (and written whole) before the run streams.
    pub row_limit: u64,
    /// Time between drains.
    pub every: Duration,
    /// Whether each drain gives the allocator's free pages back (`GMPROF_STREAM_TRIM`,
    /// on unless `0`).
    pub release_memory: bool,
    /// Drains between two such releases (`GMPROF_STREAM_TRIM_EVERY`, default 8).
    pub release_every: u64,
    /// Which kernels get rows in `pm/` when the run samples PM (`GMPROF_PM_KERNEL_ROWS`).
    pub pm_kernel_rows: crate::report::stream::PmKernelRows,
    /// The flight recorder, when a rule or a signal asks for one (the run then streams from
    /// its start).
    pub flight: Option<FlightSettings>,
    /// The signal that asks the flight recorder for a window (`GMPROF_FLIGHT_SIGNAL`).
    pub flight_signal: Option<std::ffi::c_int>,
    /// Whether streaming was asked for (`GMPROF_STREAM=1`, a flight recorder, live metrics) rather than
    /// on by default: a mode that cannot stream then says so when the run starts, and
    /// otherwise only when it passes the row limit.
    pub asked: bool,
}

impl StreamOptions {
    /// Reads the settings through `lookup` (an environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let flight_signal = get(env::FLIGHT_SIGNAL).map(|v| parse_flight_signal(&v)).transpose()?;
        let flight = flight_settings(&get, flight_signal.is_some())?;
        let stream = parse_stream(get(env::STREAM))?;
        let live = get(env::METRICS_PORT).is_some() || get(env::OTLP_ENDPOINT).is_some();
        if stream == Some(false) && live {
            return Err(Error::InvalidConfig(format!(
                "{}=0 turns the streamed outputs off, and the live metrics ({} or {}) are computed by their \
                 drains: unset one of them",
                env::STREAM,
                env::METRICS_PORT,
                env::OTLP_ENDPOINT
            )));
        }
        if stream == Some(false) {
            if flight.is_some() {
                return Err(Error::InvalidConfig(format!(
                    "{}=0 turns the streamed outputs off, and the flight recorder ({} or {}) needs them: unset \
                     one of them",
                    env::STREAM,
                    env::SLOW_STEP,
                    env::GROUP_JUMP
                )));
            }
            return Ok(None);
        }
        let number = |key: &str, default: u64, what: &str| -> Result<u64> {
            match get(key).map(|v| v.replace('_', "")) {
                None => Ok(default),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(Error::InvalidConfig(format!("{key}={v}: use {what} above 0"))),
                },
            }
        };
        Ok(Some(StreamOptions {
            row_limit: number(env::ROW_LIMIT, DEFAULT_ROW_LIMIT, "a number of kernel launches")?,
            every: match get(env::STREAM_SECS) {
                None => DEFAULT_STREAM_EVERY,
                Some(v) => match v.trim().parse::<f64>() {
                    Ok(secs) if (STREAM_SECS_RANGE.0..=STREAM_SECS_RANGE.1).contains(&secs) => {
                        Duration::from_secs_f64(secs)
                    }
                    _ => {
                        return Err(Error::InvalidConfig(format!(
                            "{}={v}: use the seconds between drains, from {} to {} (e.g. 0.5; default 1)",
                            env::STREAM_SECS,
                            STREAM_SECS_RANGE.0,
                            STREAM_SECS_RANGE.1
                        )))
                    }
                },
            },
            release_memory: match get(env::STREAM_TRIM).as_deref() {
                None | Some("1") => true,
                Some("0") => false,
                Some(v) => {
                    return Err(Error::InvalidConfig(format!(
                        "{}={v}: use 1 (give the allocator's free pages back after each drain, the default) or 0",
                        env::STREAM_TRIM
                    )))
                }
            },
            release_every: number(
                env::STREAM_TRIM_EVERY,
                crate::report::stream::DEFAULT_RELEASE_EVERY,
                "a number of drains",
            )?,
            pm_kernel_rows: match get(env::PM_KERNEL_ROWS) {
                None => crate::report::stream::PmKernelRows::default(),
                Some(v) => crate::report::stream::PmKernelRows::parse(&v).ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "{}={v}: use covered (rows for the kernels that fill at least half a PM sample window, the \
                         default) or all (a row for every kernel)",
                        env::PM_KERNEL_ROWS
                    ))
                })?,
            },
            asked: flight.is_some() || stream == Some(true) || live,
            flight,
            flight_signal,
        }))
    }
}

impl StreamOptions {
    /// The one-line note of a run in a mode that does not stream (`mode`), once it passed
    /// the row limit with `kernels` launches: it kept every row in memory. `None` below the
    /// limit, and for a run whose rows were streamed (`streamed`).
    pub fn unstreamed_note(&self, mode: crate::model::ProfilingMode, kernels: u64, streamed: bool) -> Option<String> {
        use crate::model::ProfilingMode;
        (!streamed && mode != ProfilingMode::Trace && kernels > self.row_limit).then(|| {
            let how = match mode {
                ProfilingMode::PerRange | ProfilingMode::PerKernel => format!("streams only with {}=1", env::STREAM),
                _ => "does not stream".to_owned(),
            };
            format!(
                "{kernels} kernels, past the row limit of {} ({}): {} mode {how}, so the run kept every row in memory \
                 and wrote the whole-file outputs",
                self.row_limit,
                env::ROW_LIMIT,
                mode.as_str()
            )
        })
    }
}

/// `GMPROF_STREAM`: unset is on (the default), `0` off, `1` on as asked; anything else an
/// error that says what each value does.
fn parse_stream(value: Option<String>) -> Result<Option<bool>> {
    match value.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("0") | Some("false") | Some("no") | Some("off") => Ok(Some(false)),
        Some("1") | Some("true") | Some("yes") | Some("on") => Ok(Some(true)),
        Some(_) => Err(Error::InvalidConfig(format!(
            "{}={}: use 0 (keep every row in memory and write the whole-file outputs) or 1 (stream rows to part \
             files past {}, the default when unset)",
            env::STREAM,
            value.unwrap_or_default(),
            env::ROW_LIMIT
        ))),
    }
}

/// `GMPROF_FLIGHT_SIGNAL`'s value (`--flight-signal`): `SIGUSR1` or `SIGUSR2` (`USR1`,
/// `usr2`, ...).
pub fn parse_flight_signal(value: &str) -> Result<std::ffi::c_int> {
    let upper = value.trim().to_ascii_uppercase();
    match upper.strip_prefix("SIG").unwrap_or(&upper) {
        "USR1" => Ok(libc::SIGUSR1),
        "USR2" => Ok(libc::SIGUSR2),
        _ => Err(Error::InvalidConfig(format!(
            "{}={value}: use SIGUSR1 or SIGUSR2 (the ending signals already write a window)",
            env::FLIGHT_SIGNAL
        ))),
    }
}

/// The flight recorder's settings, when `GMPROF_SLOW_STEP` or `GMPROF_GROUP_JUMP` sets a
/// rule or a signal asks for windows (`signal`); `GMPROF_FLIGHT_*` without either is an
/// error (they would do nothing).
fn flight_settings(get: &dyn Fn(&str) -> Option<String>, signal: bool) -> Result<Option<FlightSettings>> {
    let key = env::SLOW_STEP;
    let slow_step = get(key)
        .map(|v| v.parse::<SlowStepRule>().map_err(|e| Error::InvalidConfig(format!("{key}={v}: {e}"))))
        .transpose()?;
    let key = env::GROUP_JUMP;
    let group_jump = get(key)
        .map(|v| v.parse::<TriggerRule>().map_err(|e| Error::InvalidConfig(format!("{key}={v}: {e}"))))
        .transpose()?;
    let bounds = [env::FLIGHT_STEPS, env::FLIGHT_AFTER, env::FLIGHT_GAP, env::FLIGHT_MAX, env::FLIGHT_ROWS];
    if slow_step.is_none() && group_jump.is_none() && !signal {
        if let Some(key) = bounds.into_iter().find(|k| get(k).is_some()) {
            return Err(Error::InvalidConfig(format!(
                "{key} is set but no flight-recorder rule is: set {} (`3x`, `200ms`), {} or {}",
                env::SLOW_STEP,
                env::GROUP_JUMP,
                env::FLIGHT_SIGNAL
            )));
        }
        return Ok(None);
    }
    // Steps and windows are bounded too: each step of a window is a step row kept, each
    // window a directory written.
    let number = |key: &str, default: u64, least: u64, most: u64| -> Result<u64> {
        match get(key).map(|v| v.replace('_', "")) {
            None => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if (least..=most).contains(&n) => Ok(n),
                _ if most == u64::MAX => {
                    Err(Error::InvalidConfig(format!("{key}={v}: use a whole number of at least {least}")))
                }
                _ => Err(Error::InvalidConfig(format!("{key}={v}: use a whole number from {least} to {most}"))),
            },
        }
    };
    let d = FlightSettings::default();
    let small = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(Some(FlightSettings {
        slow_step,
        group_jump,
        ring_steps: small(number(env::FLIGHT_STEPS, d.ring_steps.into(), 1, MAX_FLIGHT_STEPS)?),
        after_steps: small(number(env::FLIGHT_AFTER, d.after_steps.into(), 0, MAX_FLIGHT_STEPS)?),
        min_gap_steps: number(env::FLIGHT_GAP, d.min_gap_steps, 0, u64::MAX)?,
        max_windows: small(number(env::FLIGHT_MAX, d.max_windows.into(), 1, MAX_FLIGHT_WINDOWS)?),
        max_rows: usize::try_from(number(env::FLIGHT_ROWS, d.max_rows as u64, 1, u64::MAX)?).unwrap_or(usize::MAX),
    }))
}

/// A yes/no setting: `1`, `true`, `yes` or `0`, `false`, `no`; `default` when unset.
pub(crate) fn parse_flag(key: &str, value: Option<String>, default: bool) -> Result<bool> {
    match value.as_deref() {
        None => Ok(default),
        Some("0") | Some("false") | Some("no") => Ok(false),
        Some("1") | Some("true") | Some("yes") => Ok(true),
        Some(other) => Err(Error::InvalidConfig(format!("{key}={other}: use 1 or 0"))),
    }
}

/// How checkpoints and signals are set up, from `GMPROF_CHECKPOINT_SECS`, `GMPROF_SIGNALS` and
/// `GMPROF_SIGNAL_TIMEOUT_SECS`: read the same way by the injected library and the C ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndSettings {
    /// Time between checkpoints (`None`: no checkpoints).
    pub checkpoint_every: Option<Duration>,
    /// Whether terminating signals write the outputs first.
    pub handle_signals: bool,
    /// How long a terminating signal waits for the outputs.
    pub signal_timeout: Duration,
}

impl EndSettings {
    /// Reads the settings through `lookup` (an environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let seconds = |key: &str, default: u64| -> Result<u64> {
            get(key).map_or(Ok(default), |v| {
                v.parse::<u64>().map_err(|_| {
                    Error::InvalidConfig(format!("{key}={v}: use a whole number of seconds (0 turns it off)"))
                })
            })
        };
        let checkpoint = seconds(env::CHECKPOINT_SECS, DEFAULT_CHECKPOINT_SECS)?;
        Ok(EndSettings {
            checkpoint_every: (checkpoint > 0).then(|| Duration::from_secs(checkpoint)),
            handle_signals: parse_flag(env::SIGNALS, get(env::SIGNALS), true)?,
            signal_timeout: Duration::from_secs(seconds(env::SIGNAL_TIMEOUT_SECS, DEFAULT_SIGNAL_TIMEOUT_SECS)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(vars: &[(&str, &str)]) -> Result<Option<StreamOptions>> {
        StreamOptions::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn streaming_is_on_by_default_off_with_0_and_has_its_defaults() {
        let default = StreamOptions {
            row_limit: 200_000,
            every: Duration::from_secs(1),
            flight: None,
            flight_signal: None,
            release_memory: true,
            release_every: 8,
            pm_kernel_rows: crate::report::stream::PmKernelRows::Covered,
            asked: false,
        };
        assert_eq!(stream(&[]).unwrap(), Some(default.clone()));
        assert_eq!(
            stream(&[(env::PM_KERNEL_ROWS, "all")]).unwrap(),
            Some(StreamOptions { pm_kernel_rows: crate::report::stream::PmKernelRows::All, ..default.clone() })
        );
        assert_eq!(
            stream(&[(env::STREAM_TRIM_EVERY, "1")]).unwrap(),
            Some(StreamOptions { release_every: 1, ..default.clone() })
        );
        let e = stream(&[(env::STREAM_TRIM_EVERY, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_STREAM_TRIM_EVERY=0: use a number of drains above 0"), "{e}");
        let e = stream(&[(env::PM_KERNEL_ROWS, "some")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_PM_KERNEL_ROWS=some: use covered"), "{e}");
        assert_eq!(
            stream(&[(env::ROW_LIMIT, "10")]).unwrap(),
            Some(StreamOptions { row_limit: 10, ..default.clone() })
        );
        for off in ["0", "false", "no", "off", "OFF"] {
            assert_eq!(stream(&[(env::STREAM, off), (env::ROW_LIMIT, "10")]).unwrap(), None, "{off}");
        }
        let on = stream(&[(env::STREAM, "1")]).unwrap().unwrap();
        assert_eq!(on, StreamOptions { asked: true, ..default.clone() });
        let set = stream(&[(env::STREAM, "yes"), (env::ROW_LIMIT, "1_000_000"), (env::STREAM_SECS, "5")]).unwrap();
        let every = Duration::from_secs(5);
        assert_eq!(set, Some(StreamOptions { row_limit: 1_000_000, every, asked: true, ..default.clone() }));
        let kept = stream(&[(env::STREAM_TRIM, "0")]).unwrap();
        assert_eq!(kept, Some(StreamOptions { release_memory: false, ..default.clone() }));
        let half = stream(&[(env::STREAM_SECS, "0.5")]).unwrap();
        assert_eq!(half, Some(StreamOptions { every: Duration::from_millis(500), ..default.clone() }));
        for bad in ["0", "0.01", "-1", "two", "7200", "NaN"] {
            let e = stream(&[(env::STREAM_SECS, bad)]).unwrap_err().to_string();
            assert!(e.contains(&format!("GMPROF_STREAM_SECS={bad}: use the seconds between drains, from 0.05")), "{e}");
        }
        let e = stream(&[(env::STREAM_TRIM, "yes")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_STREAM_TRIM=yes: use 1"), "{e}");
        let e = stream(&[(env::STREAM, "1"), (env::ROW_LIMIT, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_ROW_LIMIT=0"), "{e}");
        let e = stream(&[(env::ROW_LIMIT, "many")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_ROW_LIMIT=many"), "{e}");
        use crate::model::ProfilingMode;
        let limit = StreamOptions { row_limit: 10, ..default.clone() };
        assert_eq!(limit.unstreamed_note(ProfilingMode::PerRange, 10, false), None);
        assert_eq!(limit.unstreamed_note(ProfilingMode::Trace, 11, false), None);
        assert_eq!(limit.unstreamed_note(ProfilingMode::PerRange, 11, true), None);
        let note = limit.unstreamed_note(ProfilingMode::PerRange, 11, false).unwrap();
        assert!(note.starts_with("11 kernels, past the row limit of 10 (GMPROF_ROW_LIMIT): per_range mode"), "{note}");
        let note = limit.unstreamed_note(ProfilingMode::KernelReplay, 11, false).unwrap();
        assert!(note.contains("kernel_replay mode does not stream, so the run kept every row"), "{note}");
        // Live metrics ask for streaming (any mode that streams), and need it.
        let live = stream(&[(env::METRICS_PORT, "9400")]).unwrap().unwrap();
        assert_eq!(live, StreamOptions { asked: true, ..default.clone() });
        let e = stream(&[(env::METRICS_PORT, "9400"), (env::STREAM, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_STREAM=0 turns the streamed outputs off, and the live metrics"), "{e}");
        let otlp = stream(&[(env::OTLP_ENDPOINT, "http://c:4318")]).unwrap().unwrap();
        assert_eq!(otlp, StreamOptions { asked: true, ..default.clone() });
        let e = stream(&[(env::OTLP_ENDPOINT, "http://c:4318"), (env::STREAM, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_OTLP_ENDPOINT) are computed by their drains"), "{e}");
        let e = stream(&[(env::STREAM, "maybe")]).unwrap_err().to_string();
        assert!(
            e.contains("GMPROF_STREAM=maybe: use 0 (keep every row") && e.contains("the default when unset"),
            "{e}"
        );
    }

    #[test]
    fn a_flight_recorder_rule_streams_the_run_and_bad_settings_say_what_to_write() {
        let on = stream(&[(env::SLOW_STEP, "3x")]).unwrap().unwrap();
        let flight = on.flight.unwrap();
        assert_eq!(flight.slow_step.map(|s| s.rule), Some(TriggerRule::TimesMedian(3.0)));
        let wall = stream(&[(env::SLOW_STEP, "wall:3x")]).unwrap().unwrap().flight.unwrap().slow_step.unwrap();
        assert_eq!(wall.time, crate::analysis::online::StepTime::Wall);
        assert_eq!(flight, FlightSettings::slow_step(TriggerRule::TimesMedian(3.0)));
        let set = stream(&[
            (env::GROUP_JUMP, "50ms"),
            (env::FLIGHT_STEPS, "8"),
            (env::FLIGHT_AFTER, "0"),
            (env::FLIGHT_GAP, "1_000"),
            (env::FLIGHT_MAX, "3"),
        ])
        .unwrap()
        .unwrap()
        .flight
        .unwrap();
        assert_eq!(set.group_jump, Some(TriggerRule::AboveNs(50_000_000)));
        assert_eq!((set.ring_steps, set.after_steps, set.min_gap_steps, set.max_windows), (8, 0, 1_000, 3));
        let e = stream(&[(env::SLOW_STEP, "3")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_SLOW_STEP=3") && e.contains("no unit") && e.contains("200ms"), "{e}");
        let e = stream(&[(env::SLOW_STEP, "3x"), (env::STREAM, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_STREAM=0") && e.contains("unset"), "{e}");
        let e = stream(&[(env::FLIGHT_STEPS, "8")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_FLIGHT_STEPS is set but no flight-recorder rule is"), "{e}");
        // A signal alone: a recorder with no rule, windows when asked.
        let asked = stream(&[(env::FLIGHT_SIGNAL, "usr1")]).unwrap().unwrap();
        assert_eq!(asked.flight_signal, Some(libc::SIGUSR1));
        let flight = asked.flight.unwrap();
        assert!(flight.slow_step.is_none() && flight.describe().starts_with("asked for only"), "{flight:?}");
        let e = stream(&[(env::FLIGHT_SIGNAL, "SIGTERM")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_FLIGHT_SIGNAL=SIGTERM: use SIGUSR1 or SIGUSR2"), "{e}");
        let e = stream(&[(env::SLOW_STEP, "3x"), (env::FLIGHT_STEPS, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_FLIGHT_STEPS=0: use a whole number from 1 to 1000"), "{e}");
        let e = stream(&[(env::SLOW_STEP, "3x"), (env::FLIGHT_AFTER, "5000")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_FLIGHT_AFTER=5000: use a whole number from 0 to 1000"), "{e}");
        let e = stream(&[(env::SLOW_STEP, "3x"), (env::FLIGHT_ROWS, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_FLIGHT_ROWS=0: use a whole number of at least 1"), "{e}");
    }
}
