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
