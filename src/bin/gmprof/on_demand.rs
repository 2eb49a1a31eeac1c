//! The on-demand side of the `gmprof` command: `gmprof run --on-demand` (and its capture
//! ranges) and `gmprof capture TARGET`. The work is the library's
//! (`gmprof::ways_in::on_demand`); this is the command line.

use std::process::ExitCode;
use std::time::Duration;

use gmprof::ways_in::on_demand::client::{self, CaptureOptions};
use gmprof::ways_in::on_demand::protocol::{CaptureSettings, Span};
use gmprof::ways_in::on_demand::steps::DEFAULT_MARGIN;
use gmprof::ways_in::on_demand::{captures, RunOptions};

use crate::stdout::outln;

/// `gmprof run`'s on-demand options.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OnDemandArgs {
    /// Start the program idle: gmprof injected, nothing collected (no activity, no counters,
    /// no launch callbacks) until a capture is asked for: `gmprof capture OUT --steps N` from
    /// another shell, or the capture signal. Each capture is written to OUT/capture-K/. --mode,
    /// --metrics and --pm-sampling set what a capture collects unless it says (default trace).
    #[arg(long)]
    pub on_demand: bool,
    /// The NVTX range whose instances are the steps a capture starts and ends at, and, with
    /// --trace-format kineto, the trace's ProfilerStep#N events (name or glob; --torch-steps's
    /// range by default).
    #[arg(long, value_name = "NAME")]
    pub step_range: Option<String>,
    /// nsys-style capture range, the program starting idle: cudaProfilerApi (from each
    /// cudaProfilerStart to the next cudaProfilerStop) or nvtx:NAME (each instance of the NVTX
    /// range NAME, from its push to its pop).
    #[arg(long, value_name = "RANGE")]
    pub capture_range: Option<String>,
    /// How many capture ranges are captured: stop (the first, default), repeat (every one) or
    /// repeat:N.
    #[arg(long, value_name = "END", requires = "capture_range")]
    pub capture_range_end: Option<String>,
    /// The signal that starts a capture of an --on-demand run (SIGUSR2 by default; SIGUSR1, a
    /// number, or none).
    #[arg(long, value_name = "SIGNAL")]
    pub capture_signal: Option<String>,
    /// Steps a capture of the signal lasts (default 10; needs a step range).
    #[arg(long, value_name = "N")]
    pub capture_steps: Option<u64>,
    /// Seconds a capture of the signal lasts (default 10 without a step range).
    #[arg(long, value_name = "SECONDS", conflicts_with = "capture_steps")]
    pub capture_duration: Option<f64>,
}

impl OnDemandArgs {
    /// The library's options.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            on_demand: self.on_demand,
            step_range: self.step_range.clone(),
            capture_range: self.capture_range.clone(),
            capture_range_end: self.capture_range_end.clone(),
            capture_signal: self.capture_signal.clone(),
            capture_steps: self.capture_steps,
            capture_duration: self.capture_duration,
            kineto_steps: false,
        }
    }
}

/// `gmprof capture`'s arguments.
#[derive(clap::Args)]
pub struct CaptureArgs {
    /// The run: its output directory (every process below it: ranks, workers) or a pid
    /// (`gmprof run`'s, torchrun's or a rank's).
    target: String,
    /// Capture N whole steps, from the same step on every process.
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    steps: Option<u64>,
    /// Capture this many seconds (with a step range: to the end of the step running then).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// kernel_replay, per_kernel, per_range or trace (default: the run's --mode, else trace).
    #[arg(long)]
    mode: Option<String>,
    /// Comma-separated full metric names (default: the run's).
    #[arg(long, value_delimiter = ',')]
    metrics: Vec<String>,
    /// PM sampling in the capture: `default` or PM-sampling metric names (with --mode trace).
    #[arg(long = "pm-sampling", value_name = "METRICS")]
    pm_sampling: Option<String>,
    /// PM sampling interval (100us, 1ms, 30000cycles, or auto).
    #[arg(long = "pm-interval", value_name = "NS", requires = "pm_sampling")]
    pm_interval: Option<String>,
    /// Steps between the furthest process's next step and the capture's first (raise it for
    /// very short steps or many processes).
    #[arg(long, default_value_t = DEFAULT_MARGIN)]
    margin: u64,
    /// Start at this step (each process numbers the step range's instances from 0).
    #[arg(long, value_name = "STEP")]
    at_step: Option<u64>,
    /// Give up after this many seconds without the capture written (one not started yet is
    /// cancelled).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    /// Print each process's state (step, capture under way, last capture) and exit.
    #[arg(long, conflicts_with_all = ["steps", "duration"])]
    status: bool,
}

/// Runs `gmprof capture`: 0 when every process wrote its capture.
pub fn run_capture(args: CaptureArgs) -> gmprof::Result<ExitCode> {
    if args.status {
        let mut notes = Vec::new();
        let endpoints = client::statuses(&client::resolve(&args.target)?, &mut notes)?;
        for e in &endpoints {
            outln!("{}", e.status.line());
        }
        for note in notes {
            eprintln!("gmprof: {note}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let span = match (args.steps, args.duration) {
        (Some(n), None) => Span::Steps(n),
        (None, Some(s)) => Span::Seconds(s),
        _ => {
            return Err(gmprof::Error::InvalidConfig(
                "say how long: --steps N (with a step range) or --duration SECONDS (or --status)".into(),
            ))
        }
    };
    let options = CaptureOptions {
        target: args.target,
        settings: CaptureSettings {
            mode: args.mode,
            metrics: (!args.metrics.is_empty()).then_some(args.metrics),
            pm_sampling: args.pm_sampling,
            pm_interval: args.pm_interval,
        },
        span,
        margin: args.margin,
        at_step: args.at_step,
        timeout: Duration::from_secs(args.timeout),
    };
    let result = client::capture(&options, &mut |line| eprintln!("gmprof: {line}"))?;
    for note in &result.notes {
        eprintln!("gmprof: {note}");
    }
    for line in result.lines() {
        eprintln!("gmprof: {line}");
    }
    Ok(if result.all_written() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What `gmprof run` prints at the end of an idle-start run: the captures taken.
pub fn print_captures(run_dir: &std::path::Path) {
    for line in captures::run_lines(run_dir) {
        eprintln!("gmprof: {line}");
    }
}
