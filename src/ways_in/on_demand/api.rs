//! Captures the program starts and stops itself: the library's, C's and Python's
//! `capture`.
//!
//! Layer 3. [`start_capture`] and [`stop_capture`] bracket a capture on the calling thread:
//! - under `gmprof run --on-demand` (or a capture range) they drive the injected service: the
//!   capture is the run's next `capture-K`, like one `gmprof capture` asked for;
//! - elsewhere they run a profiler of their own (the process-wide one of [`crate::init`]) and
//!   write it to `OUT/capture-K/<process>/`, numbered as the run's captures are.
//!
//! The C ABI (`gmprof_capture_start`, `gmprof_capture_stop`) and Python's `gmprof.capture`
//! come through the same service when injected; outside, the C ABI starts its own session
//! ([`crate::ways_in::capi`]).

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::capture::profiler::Profiler;
use crate::error::{Error, Result};
use crate::ways_in::layout::ProcessIdentity;
use crate::ways_in::on_demand::captures;
use crate::ways_in::on_demand::protocol::{CaptureRecord, CaptureSettings};
use crate::ways_in::outputs::Outputs;

/// The directory of the capture [`start_capture`] runs outside an injected run.
static OWN: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Starts a capture through the injected service of this process, if there is one:
/// `None` when the process does not run under `gmprof run --on-demand` or a capture range.
pub fn injected_start(settings: &CaptureSettings) -> Option<Result<(u64, PathBuf)>> {
    let service = crate::ways_in::on_demand::injected::service()?;
    Some(service.api_start(settings).map_err(Error::InvalidState))
}

/// Ends the capture [`injected_start`] started and writes it; `None` when not injected.
pub fn injected_stop() -> Option<Result<CaptureRecord>> {
    let service = crate::ways_in::on_demand::injected::service()?;
    Some(service.api_stop().map_err(Error::InvalidState))
}

/// Claims this process's directory of its next own capture of `output_dir`:
/// `output_dir/capture-K/<process>` (see [`captures::own_next`]).
pub fn claim_own(output_dir: &Path) -> Result<(u64, PathBuf)> {
    let lookup = |k: &str| std::env::var(k).ok();
    let process = ProcessIdentity::current(&lookup).dir_name();
    let id = captures::own_next(output_dir, &process);
    Ok((id, captures::claim(output_dir, id, &process)?))
}

/// A profiler built from `settings` (unset fields: the library's defaults).
pub fn builder(settings: &CaptureSettings) -> Result<crate::capture::profiler::ProfilerBuilder> {
    settings.validate()?;
    let mut builder = Profiler::builder()
        .range_scope(crate::capture::profiler::RangeScope::Process)
        .time_api_calls(crate::report::kineto::times_api_calls(&|k: &str| std::env::var(k).ok()))
        .pm_sampling(crate::ways_in::on_demand::backend::pm_sampling(settings)?);
    if let Some(mode) = settings.profiling_mode()? {
        builder = builder.mode(mode);
    }
    if let Some(metrics) = &settings.metrics {
        builder = builder.metrics(metrics.iter().map(|m| m.trim()).filter(|m| !m.is_empty()).map(String::from));
    }
    Ok(builder)
}

/// Starts a capture on the calling thread: the injected service's when there is one, else the
/// process-wide profiler ([`crate::push_range`] and friends), written by [`stop_capture`] into
/// `output_dir/capture-K/<process>/`. Returns `K`.
pub fn start_capture(settings: &CaptureSettings, output_dir: &Path) -> Result<u64> {
    if let Some(started) = injected_start(settings) {
        return started.map(|(id, _)| id);
    }
    let mut own = OWN.lock();
    if own.is_some() || crate::ways_in::global::is_initialized() {
        return Err(Error::InvalidState("a capture (or gmprof::init) is running; stop it first".into()));
    }
    let builder = builder(settings)?;
    let (id, dir) = claim_own(output_dir)?;
    if let Err(e) = crate::ways_in::global::init(builder) {
        let _ = std::fs::remove_dir(&dir);
        return Err(e);
    }
    *own = Some(dir);
    Ok(id)
}

/// Ends the capture [`start_capture`] started, writes it and returns its directory.
pub fn stop_capture() -> Result<PathBuf> {
    if let Some(stopped) = injected_stop() {
        return stopped.map(|record| record.dir);
    }
    let dir =
        OWN.lock().take().ok_or_else(|| Error::InvalidState("no capture is running: start_capture first".into()))?;
    let report = crate::ways_in::global::finish()?;
    Outputs::new(dir.clone()).write_final(&report)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_gpu_a_capture_fails_cleanly_and_claims_nothing_it_keeps() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(stop_capture().unwrap_err().to_string().contains("no capture is running"));
        let bad = CaptureSettings { mode: Some("fastest".into()), ..Default::default() };
        assert!(start_capture(&bad, tmp.path()).unwrap_err().to_string().contains("unknown mode"));
        match start_capture(&CaptureSettings { mode: Some("trace".into()), ..Default::default() }, tmp.path()) {
            // A GPU machine: the capture runs and is written where it said.
            Ok(id) => {
                let dir = stop_capture().unwrap();
                assert_eq!(dir.parent().unwrap(), captures::capture_dir(tmp.path(), id));
                assert!(dir.join("report.json").is_file());
            }
            // No GPU here: the profiler cannot start, and the claimed directory is given back.
            Err(_) => {
                assert!(captures::scan(tmp.path()).iter().all(|(_, d)| std::fs::read_dir(d).unwrap().next().is_none()))
            }
        }
    }

    #[test]
    fn own_captures_are_numbered_per_process() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, dir_a) = claim_own(tmp.path()).unwrap();
        let (b, dir_b) = claim_own(tmp.path()).unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(dir_a.parent().unwrap(), tmp.path().join("capture-1"));
        assert_eq!(dir_a.file_name(), dir_b.file_name());
    }
}
