//! The C ABI of captures: `gmprof_capture_start` and `gmprof_capture_stop`.
//!
//! Layer 3, beside its parent's session functions. Under `gmprof run --on-demand` (or a
//! capture range) a capture is the injected service's next `capture-K`
//! ([`crate::ways_in::on_demand::api`]); elsewhere it is a session of its own, as
//! `gmprof_init`'s, written by `gmprof_capture_stop` to `OUT/capture-K/<process>/`. Either
//! way `gmprof_output_dir` names the capture's directory once it started.

use std::ffi::CString;

use super::{fail, finish_session, guarded, opt_str, start_session, Options, Status, FINISHING, OUTPUT_DIR, SESSION};
use crate::capture::profiler::Teardown;
use crate::model::RunEnd;
use crate::ways_in::on_demand::api;
use crate::ways_in::on_demand::protocol::{CaptureSettings, Outcome};

fn set_output_dir(dir: &std::path::Path) {
    *OUTPUT_DIR.lock() = CString::new(dir.as_os_str().as_encoded_bytes()).ok();
}

/// Starts a capture on the calling thread (`options`: its mode and metrics; NULL fields take
/// the run's, or the library's, defaults).
///
/// # Safety
/// `options` is NULL or points to a valid `gmprof_options` whose strings are NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn gmprof_capture_start(options: *const Options) -> Status {
    guarded("gmprof_capture_start", || {
        // SAFETY: the caller passes NULL or a valid options struct.
        let opts = unsafe { options.as_ref() };
        // SAFETY: its strings are NULL or NUL-terminated (the caller's guarantee).
        let mode = unsafe { opts.map_or(Ok(None), |o| opt_str(o.mode, "options.mode")) }?;
        // SAFETY: as above.
        let metrics = unsafe { opts.map_or(Ok(None), |o| opt_str(o.metrics, "options.metrics")) }?;
        // PM sampling comes through the environment, as for gmprof_init.
        let env = |key: &str| std::env::var(key).ok().filter(|v| !v.trim().is_empty());
        let settings = CaptureSettings {
            mode,
            metrics: metrics.map(|m| m.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()),
            pm_sampling: env(crate::capture::pm_sampling::PM_SAMPLING_ENV),
            pm_interval: env(crate::capture::pm_sampling::PM_INTERVAL_ENV),
        };
        match api::injected_start(&settings) {
            Some(started) => {
                let (_, dir) = started.map_err(fail)?;
                set_output_dir(&dir);
                Ok(())
            }
            // SAFETY: the caller's guarantee, passed on.
            None => unsafe { start_session(options, true) },
        }
    })
}

/// Ends the capture `gmprof_capture_start` started and writes its outputs.
#[no_mangle]
pub extern "C" fn gmprof_capture_stop() -> Status {
    guarded("gmprof_capture_stop", || {
        if let Some(stopped) = api::injected_stop() {
            let record = stopped.map_err(fail)?;
            return match record.outcome {
                Outcome::Written { .. } => Ok(()),
                Outcome::Failed { error } | Outcome::Cancelled { reason: error } => {
                    Err((Status::Io, format!("capture {} was not written: {error}", record.id)))
                }
            };
        }
        let _finishing = FINISHING.lock();
        let session = SESSION.lock().take().ok_or_else(|| {
            (Status::NotInitialized, "no capture is running: call gmprof_capture_start first".to_owned())
        })?;
        finish_session(session, RunEnd::Finished { by: "gmprof_capture_stop".into() }, Teardown::Release)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_without_a_start_says_so_and_bad_modes_are_refused() {
        assert_eq!(gmprof_capture_stop(), Status::NotInitialized);
        let opts = Options {
            mode: c"fastest".as_ptr(),
            metrics: std::ptr::null(),
            output_dir: std::ptr::null(),
            device: -1,
            synchronize_on_pop: 0,
        };
        // SAFETY: a valid options struct with NUL-terminated strings.
        assert_eq!(unsafe { gmprof_capture_start(&opts) }, Status::InvalidArgument);
    }
}
