//! The streamed outputs of a `gmprof_init` session (issue 42), as the injected library's:
//! on by default in trace mode (`GMPROF_STREAM=0` turns them off), past `GMPROF_ROW_LIMIT`
//! a `gmprof-stream` thread drains the session every `GMPROF_STREAM_SECS` into part files
//! beside report.json. Captures (`gmprof_capture_start`) do not stream.
//!
//! Layer 3, beside its parent's session functions; reads the settings of
//! [`crate::ways_in::settings`]. The flight recorder's rules (`GMPROF_SLOW_STEP`,
//! `GMPROF_GROUP_JUMP`) apply, and so do the live metrics (`GMPROF_METRICS_PORT`, `GMPROF_OTLP_ENDPOINT`,
//! [`crate::ways_in::live_metrics`]); `GMPROF_FLIGHT_SIGNAL` is the injected library's only.

use std::sync::{Arc, Weak};

use crate::capture::profiler::{Profiler, StreamConfig};
use crate::error::Result;
use crate::model::ProfilingMode;
use crate::report::stream::StreamSettings;
use crate::ways_in::live_metrics::LiveExport;
use crate::ways_in::outputs::{spawn_paced, Outputs};
use crate::ways_in::settings::StreamOptions;

/// The session's streaming settings from the environment (an error names the variable).
pub(super) fn options() -> Result<Option<StreamOptions>> {
    // The live metrics' settings are checked here too: a bad port fails the start.
    LiveExport::from_env()?;
    StreamOptions::from_lookup(|k| std::env::var(k).ok())
}

/// Streams `profiler`'s rows into `outputs`' directory past the row limit of `options`, with
/// the drain thread, which stops once `outputs` is gone (the session finished). A mode other
/// than trace streams only when asked (`GMPROF_STREAM=1`).
pub(super) fn start(profiler: &Profiler, outputs: &Arc<Outputs>, options: &StreamOptions) {
    let export = LiveExport::from_env().ok().flatten();
    let settings = StreamSettings {
        flight: options.flight.clone(),
        release_memory: options.release_memory,
        release_every: options.release_every,
        live: crate::ways_in::live_metrics::feed(export.as_ref(), profiler.device_id()),
        window_trace: outputs.trace_options().clone(),
        pm_kernel_rows: options.pm_kernel_rows,
        ..StreamSettings::default()
    };
    let config = StreamConfig { dir: outputs.dir().to_owned(), row_limit: options.row_limit, settings };
    if !options.asked && profiler.mode() != ProfilingMode::Trace {
        // On by default in trace mode only; the other modes stream when asked.
        return;
    }
    if let Err(e) = profiler.stream_into(config) {
        eprintln!("gmprof: streaming was asked for but {e}; the whole-file outputs are written");
        return;
    }
    let (weak, profiler): (Weak<Outputs>, Profiler) = (Arc::downgrade(outputs), profiler.clone());
    spawn_paced("gmprof-stream", options.every, move || {
        if weak.upgrade().is_none() {
            return false;
        }
        // A panic in a drain ends this thread, not the program; the finish ends the stream.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| profiler.stream_tick())) {
            Ok(Ok(progress)) => {
                tracing::trace!(?progress, "gmprof: streamed drain");
                true
            }
            // Finishing or finished (the session is not running): the finish drains the rest.
            Ok(Err(e)) => {
                tracing::debug!("gmprof: a streamed drain was skipped: {e}");
                weak.upgrade().is_some()
            }
            Err(_) => {
                tracing::warn!("gmprof: an internal error stopped the streamed drains; the finish writes the rest");
                false
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::profiler::harness::LaunchHarness;
    use crate::report::Report;
    use crate::ways_in::env_names::injection as env;

    fn options(vars: &[(&str, &str)]) -> Result<Option<StreamOptions>> {
        StreamOptions::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
    }

    /// A trace session set up from `vars` (as `gmprof_init` does) that launches 30 kernels
    /// in one range; its report, and whether it has kernel part files.
    fn thirty_kernels(vars: &[(&str, &str)]) -> (Report, bool) {
        let dir = tempfile::tempdir().unwrap();
        let outputs = Arc::new(Outputs::new(dir.path().to_owned()));
        let mut h = LaunchHarness::trace().unwrap();
        if let Some(options) = options(vars).unwrap() {
            start(&h.profiler(), &outputs, &options);
        }
        h.push_range("step").unwrap();
        let mut records = Vec::new();
        for k in 0..30u64 {
            let id = h.launch_kernel(false, c"gemm");
            records.push(h.kernel_record(id, "gemm", 1_000 + k * 1_000, 1_500 + k * 1_000));
        }
        h.pop_range().unwrap();
        h.deliver(records);
        let report = h.report();
        let parts = crate::report::tables::parquet::parts::part_files(&dir.path().join("kernels"))
            .map(|p| !p.is_empty())
            .unwrap_or(false);
        (report, parts)
    }

    #[test]
    fn a_trace_run_past_the_row_limit_streams_unless_gmprof_stream_is_0() {
        // GMPROF_STREAM unset: on by default.
        let (report, parts) = thirty_kernels(&[(env::ROW_LIMIT, "10")]);
        let streamed = report.streamed.as_ref().expect("streamed by default past the row limit");
        assert_eq!(streamed.kernels, 30);
        assert!(parts && report.kernels.is_empty());
        let text = crate::report::text::streamed::streamed_text(streamed);
        assert!(
            text.contains("more than 10 kernels (GMPROF_ROW_LIMIT)") && text.contains("GMPROF_STREAM=0 keeps"),
            "{text}"
        );
        // GMPROF_STREAM=0: every row kept, the whole-file report.
        let (report, parts) = thirty_kernels(&[(env::STREAM, "0"), (env::ROW_LIMIT, "10")]);
        assert!(report.streamed.is_none() && !parts);
        assert_eq!(report.kernels.len(), 30);
        // Below the limit: the whole-file report, as without streaming.
        let (report, parts) = thirty_kernels(&[]);
        assert!(report.streamed.is_none() && !parts);
        assert_eq!(report.kernels.len(), 30);
        // Any other value is an error that says what the values do.
        let e = options(&[(env::STREAM, "2")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_STREAM=2: use 0") && e.contains("or 1"), "{e}");
    }

    #[test]
    fn a_counter_mode_does_not_stream_by_default() {
        let dir = tempfile::tempdir().unwrap();
        let outputs = Arc::new(Outputs::new(dir.path().to_owned()));
        let h = LaunchHarness::new(ProfilingMode::PerRange).unwrap();
        let options = options(&[(env::ROW_LIMIT, "10")]).unwrap().unwrap();
        start(&h.profiler(), &outputs, &options);
        assert!(!h.profiler().is_streaming());
        let note = options.unstreamed_note(ProfilingMode::PerRange, 11, false).unwrap();
        assert!(note.contains("per_range mode streams only with GMPROF_STREAM=1"), "{note}");
    }
}
