//! The names of the environment variables `gmprof run` sets and the injected library reads
//! (`GMPROF_*`): the names alone, no parsing.
//!
//! At the bottom of `ways_in`, importing nothing of it: imported by the modules that read
//! the variables ([`crate::ways_in::injection_config`], [`crate::ways_in::settings`],
//! [`crate::ways_in::probe_run`], `on_demand/config.rs`) and by those that set them
//! ([`crate::ways_in::launch`], `on_demand/run_options.rs`). The old paths re-export them:
//! [`crate::ways_in::injection::env`], [`crate::ways_in::on_demand::env`] and
//! [`crate::ways_in::launch::TORCH_STEPS_ENV`].

/// What the injected profiler reads ([`crate::ways_in::injection_config::InjectionConfig`]),
/// also as [`crate::ways_in::injection::env`].
pub mod injection {
    /// Profiling mode (`kernel_replay`, `trace`, ...).
    pub const MODE: &str = "GMPROF_MODE";
    /// Comma-separated metric names.
    pub const METRICS: &str = "GMPROF_METRICS";
    /// Output directory (default `gmprof-out`) or a per-process template (`out/%h-%p`);
    /// each process writes into its own directory of it, see [`crate::ways_in::layout`].
    pub const OUT: &str = "GMPROF_OUT";
    /// Comma-separated NVTX range names: only these ranges and ranges nested in them become
    /// gmprof ranges.
    pub const NVTX_INCLUDE: &str = "GMPROF_NVTX_INCLUDE";
    /// `thread` or `process` (default `process` when injected: frameworks launch from
    /// helper threads, like PyTorch's autograd thread).
    pub const RANGE_SCOPE: &str = "GMPROF_RANGE_SCOPE";
    /// `1` to synchronize before every range closes.
    pub const SYNC_ON_POP: &str = "GMPROF_SYNC_ON_POP";
    /// Seconds between checkpoints of the outputs while the program runs (default 30; `0`
    /// turns them off).
    pub const CHECKPOINT_SECS: &str = "GMPROF_CHECKPOINT_SECS";
    /// `0` to leave the program's signals alone (default: outputs are written before a
    /// terminating signal takes effect).
    pub const SIGNALS: &str = "GMPROF_SIGNALS";
    /// Seconds a terminating signal waits for the outputs to be written (default 120).
    pub const SIGNAL_TIMEOUT_SECS: &str = "GMPROF_SIGNAL_TIMEOUT_SECS";
    /// Whether a trace run streams its rows to part files once it passes [`ROW_LIMIT`]
    /// kernel launches (issue 42): on when unset, `0` keeps every row in memory (the
    /// whole-file outputs however long the run), `1` asks for it (a mode that cannot stream
    /// then says so at the start).
    pub const STREAM: &str = "GMPROF_STREAM";
    /// Kernel launches a streaming run keeps in memory and writes whole (default 200 000);
    /// past it every row is streamed and leaves memory.
    pub const ROW_LIMIT: &str = "GMPROF_ROW_LIMIT";
    /// Seconds between a streaming run's drains (default 1; fractions such as 0.5 too).
    pub const STREAM_SECS: &str = "GMPROF_STREAM_SECS";
    /// `0` to keep the allocator's free pages after each streamed drain (by default they are
    /// given back: glibc's `malloc_trim`, so the process's memory stays flat).
    pub const STREAM_TRIM: &str = "GMPROF_STREAM_TRIM";
    /// Drains between two such releases (default 8).
    pub const STREAM_TRIM_EVERY: &str = "GMPROF_STREAM_TRIM_EVERY";
    /// Which kernels of a streamed PM-sampling run get rows in `pm/`: `covered` (the
    /// default: those that fill at least half a sample window) or `all`.
    pub const PM_KERNEL_ROWS: &str = "GMPROF_PM_KERNEL_ROWS";
    /// The flight recorder's slow-step rule (`3x` the running median of step time, or a time
    /// such as `200ms`); setting it streams the run from its start (`--slow-step`).
    pub const SLOW_STEP: &str = "GMPROF_SLOW_STEP";
    /// The flight recorder's range-group jump rule (`3x` its running median, or `50ms` above
    /// it); setting it streams the run from its start (`--group-jump`).
    pub const GROUP_JUMP: &str = "GMPROF_GROUP_JUMP";
    /// Steps the flight recorder's ring holds: the trigger step and those before it
    /// (default 5).
    pub const FLIGHT_STEPS: &str = "GMPROF_FLIGHT_STEPS";
    /// Steps after the trigger step a window also holds (default 2).
    pub const FLIGHT_AFTER: &str = "GMPROF_FLIGHT_AFTER";
    /// Least steps between two windows' triggers (default 100).
    pub const FLIGHT_GAP: &str = "GMPROF_FLIGHT_GAP";
    /// Most windows a run writes (default 10).
    pub const FLIGHT_MAX: &str = "GMPROF_FLIGHT_MAX";
    /// Most rows the flight recorder holds at once (default 100 000).
    pub const FLIGHT_ROWS: &str = "GMPROF_FLIGHT_ROWS";
    /// A signal that asks the flight recorder for a window (`SIGUSR1`, `SIGUSR2`); alone it
    /// turns the recorder on with no rule (`--flight-signal`).
    pub const FLIGHT_SIGNAL: &str = "GMPROF_FLIGHT_SIGNAL";
    /// Kernels (kernel_replay, per_kernel) or ranges (per_range) per counter cycle: counters
    /// reach a checkpoint when their cycle ends, so this bounds what a SIGKILL loses.
    pub const RANGES_PER_CYCLE: &str = "GMPROF_RANGES_PER_CYCLE";
    /// Iteration replay: the name or glob (`Train step *`) of the repeating NVTX range whose
    /// instances run the replay passes; needs [`ITERATIONS`].
    pub const ITERATION_REPLAY: &str = "GMPROF_ITERATION_REPLAY";
    /// Iteration replay: how many instances of that range the program runs.
    pub const ITERATIONS: &str = "GMPROF_ITERATIONS";
    /// per_kernel in rotation (`--rotate N`, `--rotate auto`): each step measures the launches
    /// of one slot in N, so every launch position of a repeating step is measured once every N
    /// steps; `auto` picks N from the first steps (about 1.5 % of step time measured).
    pub const ROTATE: &str = "GMPROF_ROTATE";
    /// `1`: a rotation goes on measuring past a full counter image, cycling it mid-run (each
    /// cycle holds the program; off by default: measuring stops when the image is full).
    pub const ROTATE_CYCLES: &str = "GMPROF_ROTATE_CYCLES";
    /// The range (name or glob) whose instances a rotation numbers positions in (default:
    /// `GMPROF_STEP_RANGE`, then `--torch-steps`'s range, then the outermost open range).
    pub const ROTATE_STEP: &str = "GMPROF_ROTATE_STEP";
    /// Live metrics (`--metrics-port`): the port of the Prometheus endpoint (`/metrics`) each
    /// process serves; a process with `LOCAL_RANK` set serves on this port + `LOCAL_RANK`, so
    /// the ranks of one host each have their own. Setting it streams the run from its start.
    pub const METRICS_PORT: &str = "GMPROF_METRICS_PORT";
    /// The address the live metrics' endpoint listens on (`--metrics-bind`; default
    /// `127.0.0.1`, this host only: `0.0.0.0` for every interface).
    pub const METRICS_BIND: &str = "GMPROF_METRICS_BIND";
    /// Live metrics pushed over OTLP/HTTP (`--otlp`): the collector's endpoint
    /// (`http://HOST:4318`, to which `/v1/metrics` is added, or a full URL). Setting it
    /// streams the run from its start. `OTEL_EXPORTER_OTLP_*` are not read: they configure
    /// the program's own telemetry.
    pub const OTLP_ENDPOINT: &str = "GMPROF_OTLP_ENDPOINT";
    /// Seconds between two OTLP pushes (`--otlp-interval`, default 10; fractions allowed).
    pub const OTLP_INTERVAL: &str = "GMPROF_OTLP_INTERVAL";
    /// PM sampling: `default`, `1` or comma-separated metric names.
    pub const PM_SAMPLING: &str = crate::capture::pm_sampling::PM_SAMPLING_ENV;
    /// PM sampling interval: ns (`20000`, `20us`) or SYSCLK cycles (`30000cycles`).
    pub const PM_INTERVAL: &str = crate::capture::pm_sampling::PM_INTERVAL_ENV;
    /// PC sampling: `1`/`default` (CUPTI's interval) or an interval (N for 2^N cycles).
    pub const PC_SAMPLING: &str = crate::capture::pc_sampling::PC_SAMPLING_ENV;
    /// The form of `trace.json`: `chrome` (gmprof's, the default) or `kineto` (PyTorch's
    /// profiler's, which Holistic Trace Analysis reads) (`--trace-format`).
    pub const TRACE_FORMAT: &str = crate::report::kineto::TRACE_FORMAT_ENV;
}

/// What an on-demand injected gmprof reads ([`crate::ways_in::on_demand::OnDemandConfig`]),
/// also as [`crate::ways_in::on_demand::env`].
pub mod on_demand {
    /// `1`: start idle and capture on request.
    pub const ON_DEMAND: &str = "GMPROF_ON_DEMAND";
    /// The NVTX range (name or glob) whose instances are the steps.
    pub const STEP_RANGE: &str = "GMPROF_STEP_RANGE";
    /// `cudaProfilerApi` or `nvtx:NAME`: captures the program starts and stops itself.
    pub const CAPTURE_RANGE: &str = "GMPROF_CAPTURE_RANGE";
    /// `stop` (the first capture range only, the default), `repeat` or `repeat:N`.
    pub const CAPTURE_RANGE_END: &str = "GMPROF_CAPTURE_RANGE_END";
    /// The capture signal: `SIGUSR2` (the default with `GMPROF_ON_DEMAND=1`), `SIGUSR1`, a
    /// number, or `none`.
    pub const CAPTURE_SIGNAL: &str = "GMPROF_CAPTURE_SIGNAL";
    /// Steps a signal-triggered capture lasts (default 10 with a step range).
    pub const CAPTURE_STEPS: &str = "GMPROF_CAPTURE_STEPS";
    /// Seconds a signal-triggered capture lasts (default 10 without a step range).
    pub const CAPTURE_DURATION: &str = "GMPROF_CAPTURE_DURATION";
}

/// `gmprof run --torch-steps`: the step range's name, read by the Python bootstrap (and, as
/// the step range, by an on-demand injected gmprof unless `GMPROF_STEP_RANGE` names one).
pub const TORCH_STEPS_ENV: &str = "GMPROF_TORCH_STEPS";
