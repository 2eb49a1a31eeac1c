//! gmprof's own time inside CUPTI's callbacks, measured only when `GMPROF_SELF_TIME=1`.
//!
//! Layer 2. The API-callback trampoline and the activity buffer callback time their bodies
//! (everything gmprof does there: routing, the session's launch bookkeeping, decoding a
//! buffer) into process-wide counters. A session takes a [`SelfTime`] snapshot when it
//! starts and reports the difference, so the launch overhead a benchmark sees can be split
//! into gmprof's own work and CUPTI's. Off by default: when off, a callback pays one relaxed
//! atomic load.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Instant;

use crate::model::SelfTime;

/// 0: not read yet, 1: off, 2: on.
static STATE: AtomicU8 = AtomicU8::new(0);
static API_CALLBACKS: AtomicU64 = AtomicU64::new(0);
static API_NS: AtomicU64 = AtomicU64::new(0);
static BUFFERS: AtomicU64 = AtomicU64::new(0);
static BUFFER_NS: AtomicU64 = AtomicU64::new(0);

/// The environment variable that turns the measurement on (`1`, `true` or `on`).
pub const ENV: &str = "GMPROF_SELF_TIME";

/// Whether the measurement is on (read from the environment once).
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var(ENV).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "on"));
            STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
        s => s == 2,
    }
}

/// A running measurement of one callback body; `None` when off.
pub(crate) fn start() -> Option<Instant> {
    enabled().then(Instant::now)
}

/// Adds an API callback's time.
pub(crate) fn api_done(started: Option<Instant>) {
    if let Some(t) = started {
        API_NS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        API_CALLBACKS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Adds an activity buffer's time.
pub(crate) fn buffer_done(started: Option<Instant>) {
    if let Some(t) = started {
        BUFFER_NS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        BUFFERS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The process-wide totals so far, `None` when the measurement is off.
pub fn snapshot() -> Option<SelfTime> {
    enabled().then(|| SelfTime {
        api_callbacks: API_CALLBACKS.load(Ordering::Relaxed),
        api_callback_ns: API_NS.load(Ordering::Relaxed),
        activity_buffers: BUFFERS.load(Ordering::Relaxed),
        activity_buffer_ns: BUFFER_NS.load(Ordering::Relaxed),
    })
}
