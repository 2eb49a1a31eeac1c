//! The process-wide list of collected launches: [`submit`] adds one, [`collected`] copies
//! them (for checkpoints), [`take_all`] empties it when the outputs are written.
//!
//! Imports only `model` ([`TimedLaunch`]); `mod.rs` re-exports its functions, through which
//! the host API in `ways_in::device_timers`, the probes and the report's writers call them.

use parking_lot::Mutex;

use super::model::TimedLaunch;

static COLLECTED: Mutex<Vec<TimedLaunch>> = Mutex::new(Vec::new());

/// Hands a collected launch to the process's next report.
pub fn submit(launch: TimedLaunch) {
    COLLECTED.lock().push(launch);
}

/// A copy of every launch submitted and not yet taken (for checkpoints).
pub fn collected() -> Vec<TimedLaunch> {
    COLLECTED.lock().clone()
}

/// Every launch submitted since the last call, in submission order.
pub fn take_all() -> Vec<TimedLaunch> {
    std::mem::take(&mut *COLLECTED.lock())
}
