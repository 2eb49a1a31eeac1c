//! `gmprof check-trace FILE`: a trace's well-formedness, one line per broken rule
//! (`gmprof::trace_check`), and `gmprof run --trace-format`.

use std::path::Path;

use gmprof::trace_check::{check_trace_file, CheckOptions};

use crate::stdout::outln;

/// `gmprof run --trace-format`: the form of each process's `trace.json`.
#[derive(clap::Args, Clone, Debug)]
pub struct TraceFormatArgs {
    /// The form of trace.json: chrome (gmprof's own Chrome trace, the default) or kineto (the
    /// form PyTorch's profiler writes: kernels, memcpys, launches and ranges as Kineto names
    /// them, the rank in distributedInfo; for Holistic Trace Analysis). Sets
    /// GMPROF_TRACE_FORMAT for the profiled processes.
    #[arg(long = "trace-format", value_name = "FORMAT", default_value = "chrome")]
    pub trace_format: gmprof::report::TraceFormat,
}

impl TraceFormatArgs {
    /// The variable the profiled processes read.
    pub fn env(&self) -> (String, std::ffi::OsString) {
        (gmprof::report::kineto::TRACE_FORMAT_ENV.into(), self.trace_format.to_string().into())
    }
}

/// Checks `file`; an error names every violation's count.
pub fn run(file: &Path, allowance_us: f64) -> gmprof::Result<()> {
    if !(allowance_us.is_finite() && allowance_us >= 0.0) {
        return Err(gmprof::Error::InvalidConfig(format!(
            "--allowance-us must be a non-negative number of microseconds, not {allowance_us}"
        )));
    }
    let opts = CheckOptions { launch_latency_allowance_us: allowance_us };
    let report = check_trace_file(file, &opts).map_err(|e| match e {
        gmprof::Error::Io { path, source } => {
            gmprof::Error::InvalidConfig(format!("could not read {}: {source}", path.display()))
        }
        other => other,
    })?;
    if report.is_ok() {
        outln!("{}: {} events, OK", file.display(), report.events);
        return Ok(());
    }
    for violation in &report.violations {
        outln!("{}: {violation}", file.display());
    }
    Err(gmprof::Error::InvalidConfig(format!(
        "{}: {} violation(s) in {} events",
        file.display(),
        report.violations.len(),
        report.events
    )))
}
