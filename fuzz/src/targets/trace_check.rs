//! `trace_check`: a `trace.json` as `gmprof check-trace` reads it
//! ([`check_trace_json`]: the Chrome trace's events, checked against the timeline's rules).

use gmprof::report::trace_check::{check_trace_json, CheckOptions};

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let report = check_trace_json(text, &CheckOptions::default());
    for violation in &report.violations {
        let _ = violation.to_string();
    }
}
