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

use crate::error::{Error, Result};
use crate::ways_in::env_names::injection as env;

/// Default seconds between checkpoints.
pub const DEFAULT_CHECKPOINT_SECS: u64 = 30;
/// Default seconds a terminating signal waits for the outputs.
pub const DEFAULT_SIGNAL_TIMEOUT_SECS: u64 = 120;

/// Default kernel launches a streaming run keeps before it streams (`GMPROF_ROW_LIMIT`).
pub const DEFAULT_ROW_LIMIT: u64 = 200_000;
/// Default seconds between a streaming run's drains (`GMPROF_STREAM_SECS`).
pub const DEFAULT_STREAM_SECS: u64 = 2;

/// The streamed outputs (issue 42), from `GMPROF_STREAM`, `GMPROF_ROW_LIMIT` and
/// `GMPROF_STREAM_SECS`; `None` when `GMPROF_STREAM` is not on (the default for now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamOptions {
    /// Kernel launches kept (and written whole) before the run streams.
    pub row_limit: u64,
    /// Time between drains.
    pub every: Duration,
}

impl StreamOptions {
    /// Reads the settings through `lookup` (an environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if !parse_flag(env::STREAM, get(env::STREAM), false)? {
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
            every: Duration::from_secs(number(env::STREAM_SECS, DEFAULT_STREAM_SECS, "a whole number of seconds")?),
        }))
    }
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
    fn streaming_is_off_unless_asked_for_and_has_its_defaults() {
        assert_eq!(stream(&[]).unwrap(), None);
        assert_eq!(stream(&[(env::ROW_LIMIT, "10")]).unwrap(), None);
        let on = stream(&[(env::STREAM, "1")]).unwrap().unwrap();
        assert_eq!(on, StreamOptions { row_limit: 200_000, every: Duration::from_secs(2) });
        let set = stream(&[(env::STREAM, "yes"), (env::ROW_LIMIT, "1_000_000"), (env::STREAM_SECS, "5")]).unwrap();
        assert_eq!(set, Some(StreamOptions { row_limit: 1_000_000, every: Duration::from_secs(5) }));
        let e = stream(&[(env::STREAM, "1"), (env::ROW_LIMIT, "0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_ROW_LIMIT=0"), "{e}");
        assert!(stream(&[(env::STREAM, "maybe")]).is_err());
    }
}
