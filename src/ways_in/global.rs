//! Process-wide ranges for code that cannot pass a [`Profiler`] around, as with NVTX.
//!
//! [`init`] installs one global profiler; [`push_range`] and [`pop_range`] use it from any
//! thread; [`finish`] takes it down and returns its report. Without [`init`], the range
//! calls return [`Error::InvalidState`] and record nothing.

use parking_lot::Mutex;

use crate::capture::profiler::{Profiler, ProfilerBuilder};
use crate::error::{Error, Result};
use crate::report::Report;

static GLOBAL: Mutex<Option<Profiler>> = Mutex::new(None);

fn global() -> Result<Profiler> {
    GLOBAL.lock().clone().ok_or_else(|| Error::InvalidState("no global profiler: call gmprof::init first".into()))
}

/// Builds the global profiler. Fails if one is already running.
pub fn init(builder: ProfilerBuilder) -> Result<()> {
    let mut slot = GLOBAL.lock();
    if slot.is_some() {
        return Err(Error::InvalidState("a global profiler is already running; call gmprof::finish first".into()));
    }
    *slot = Some(builder.build()?);
    Ok(())
}

/// Opens a range on the calling thread in the global profiler.
pub fn push_range(name: &str) -> Result<()> {
    global()?.push_range(name)
}

/// Closes the calling thread's innermost range in the global profiler.
pub fn pop_range() -> Result<()> {
    global()?.pop_range()
}

/// Finishes the global profiler and returns its report.
pub fn finish() -> Result<Report> {
    let profiler = GLOBAL
        .lock()
        .take()
        .ok_or_else(|| Error::InvalidState("no global profiler: call gmprof::init first".into()))?;
    profiler.finish()
}

/// True while a global profiler is installed.
pub fn is_initialized() -> bool {
    GLOBAL.lock().is_some()
}
