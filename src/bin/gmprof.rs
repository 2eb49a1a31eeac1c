//! `gmprof`: the command-line face of the gmprof library.
//!
//! - `gmprof metrics [--filter WORD]` lists the metrics the GPU (or `--chip`) supports.
//! - `gmprof passes METRIC,...` prints how many replay passes a metric set needs.
//! - `gmprof check-trace FILE` checks a Chrome trace JSON file and exits 1 on any violation.
//! - `gmprof run [OPTIONS] -- PROGRAM ARGS...` profiles an unmodified program through
//!   injection and prints the summary (and writes the HTML report with `--html`); it exits
//!   with the program's status.
//! - `gmprof report OUT` reprints the summary of saved outputs (`--html FILE` writes the
//!   HTML report, `--figures DIR` its charts as SVG, PNG and CSV); on a directory of several
//!   processes' outputs, the merged summary.
//! - `gmprof merge OUT` merges several processes' outputs, one at a time: one summary,
//!   merged.csv, stragglers.csv, trace-index.json and merged-trace.json (of at most 8).
//! - `gmprof capture TARGET --steps N` captures a running `gmprof run --on-demand` job: every
//!   process from the same step, into `OUT/capture-K/`.
//! - `gmprof diff BASE NEW` compares two runs, marks the changes beyond noise and, with
//!   `--fail-if-slower PCT` (or `--fail-if-higher`/`--fail-if-lower METRIC=PCT`), exits with
//!   status 3 when a range tripped the gate.
//!
//! Errors print as one readable message and exit with status 1; nothing panics, not even on a
//! standard output that the reader closed (`gmprof report OUT | head -1`: see `stdout.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

#[path = "gmprof/check_trace.rs"]
mod check_trace;
#[path = "gmprof/figures.rs"]
mod figures;
#[path = "gmprof/live.rs"]
mod live;
#[path = "gmprof/on_demand.rs"]
mod on_demand;
#[path = "gmprof/stdout.rs"]
mod stdout;
#[path = "gmprof/steps.rs"]
mod steps;
#[path = "gmprof/streamed.rs"]
mod streamed;

use clap::{Parser, Subcommand};
use gmprof::checked::{driver, target, Cupti};
use gmprof::launch::{LaunchOptions, LaunchPlan};
use gmprof::metrics::MetricCatalog;
use gmprof::model::{MetricKind, ProfilingMode};
use gmprof::report::merge;
use gmprof::report::summary::DEFAULT_TOP;
use gmprof::report::{GroupBy, SummaryOptions};
use gmprof::trace_check::DEFAULT_LAUNCH_LATENCY_ALLOWANCE_US;
use stdout::outln;

#[derive(Parser)]
#[command(name = "gmprof", version, about = "Per-range GPU hardware metrics through NVIDIA CUPTI")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct ChipArgs {
    /// Use this chip's metric tables (e.g. GH100) instead of asking the GPU; needs no GPU.
    #[arg(long)]
    chip: Option<String>,
    /// CUDA device ordinal whose chip to use.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// How the summary (and the HTML report) groups, trims and splits off warm-up.
#[derive(clap::Args)]
struct ViewArgs {
    /// Group range rows by name, path or instance; numbers in names fold into `#` (name,
    /// path).
    #[arg(long, default_value = "path")]
    group_by: GroupBy,
    /// Show the N groups with the largest share (0: all).
    #[arg(long, default_value_t = DEFAULT_TOP)]
    top: usize,
    /// Show the first K instances of each repeated range apart as warm-up; the steady-state
    /// statistics leave them out.
    #[arg(long, default_value_t = 0)]
    skip_first: u32,
    /// Also write the report as one self-contained HTML file (plots, sortable tables).
    #[arg(long)]
    html: Option<PathBuf>,
}

impl ViewArgs {
    fn options(&self) -> SummaryOptions {
        SummaryOptions { group_by: self.group_by, top: (self.top > 0).then_some(self.top), skip_first: self.skip_first }
    }
}

// The command line is parsed once; `Run` holds most options, and boxing it would only make
// the match below harder to read.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// List the metrics this GPU supports, with type, unit and description.
    Metrics {
        /// Only metrics whose name contains WORD (case-insensitive).
        #[arg(long, short)]
        filter: Option<String>,
        /// Also list each metric's full names (rollups and submetrics, e.g. `.sum`).
        #[arg(long)]
        full: bool,
        /// List what PM sampling can sample (`gmprof run --pm-sampling`), not the range
        /// profiler's metrics.
        #[arg(long = "pm-sampling")]
        pm_sampling: bool,
        #[command(flatten)]
        chip: ChipArgs,
    },
    /// Print the summary of saved outputs (a directory with report.json, or the file).
    Report {
        /// Output directory written by gmprof (or its report.json).
        path: std::path::PathBuf,
        /// Print the per-range rows as CSV instead of the summary.
        #[arg(long)]
        csv: bool,
        /// Also print the per-label statistics.
        #[arg(long)]
        stats: bool,
        /// Also write each chart of the HTML report as DIR/NAME.svg and NAME.png (drawn by the
        /// report's page in headless Chromium: GMPROF_CHROMIUM, else chromium on PATH), with
        /// its table as NAME.csv.
        #[arg(long, value_name = "DIR")]
        figures: Option<PathBuf>,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Print how many replay passes a metric set needs.
    Passes {
        /// Comma-separated full metric names, e.g. dram__bytes_read.sum,gpu__time_duration.sum
        #[arg(value_delimiter = ',', required = true)]
        metrics: Vec<String>,
        /// Count the passes of a PM sampling set (PM sampling takes only one-pass sets).
        #[arg(long = "pm-sampling")]
        pm_sampling: bool,
        #[command(flatten)]
        chip: ChipArgs,
    },
    /// Profile an unmodified CUDA program: NVTX ranges become gmprof ranges.
    ///
    /// Injects libgmprof.so through CUDA_INJECTION64_PATH and routes NVTX to CUPTI through
    /// NVTX_INJECTION64_PATH; prints the summary when the program ends and exits with its status.
    #[command(after_help = streamed::RUN_HELP)]
    Run {
        /// kernel_replay, per_kernel, per_range or trace (default: the library's).
        #[arg(long)]
        mode: Option<String>,
        /// Comma-separated full metric names.
        #[arg(long, value_delimiter = ',')]
        metrics: Vec<String>,
        /// Follow only NVTX ranges with this name and ranges nested in them (repeatable or
        /// comma-separated).
        #[arg(long = "nvtx-include", value_delimiter = ',')]
        nvtx_include: Vec<String>,
        /// Output directory. The program started writes into it; every other process that
        /// profiles, into its own subdirectory (`<host>-<rank>`, `<host>-pid<pid>`). A path with
        /// `%p` (pid), `%h` (host) or `%q{VAR}` (environment variable) is a per-process template.
        #[arg(short, long = "out", default_value = "gmprof-out")]
        out: PathBuf,
        /// How helper threads' kernels are attributed: process (default) or thread.
        #[arg(long)]
        range_scope: Option<String>,
        /// Synchronize before each range closes.
        #[arg(long)]
        sync_on_pop: bool,
        #[command(flatten)]
        stream: live::StreamArgs,
        /// libgmprof.so to inject (default: next to this executable, or $GMPROF_LIBRARY).
        #[arg(long = "lib")]
        library: Option<PathBuf>,
        /// Also print the per-label statistics.
        #[arg(long)]
        stats: bool,
        /// Iteration replay for multi-pass metric sets: the name or glob of the repeating
        /// NVTX range whose instances run the passes, e.g. "Train step *" (needs
        /// --iterations; mode per_kernel unless per_range is asked for).
        #[arg(long, requires = "iterations")]
        iteration_replay: Option<String>,
        /// How many instances of the --iteration-replay range the program runs; checked
        /// against the passes the metric set needs before the program starts.
        #[arg(long, requires = "iteration_replay")]
        iterations: Option<usize>,
        #[command(flatten)]
        rotation: steps::RotateArgs,
        /// Also sample PM counters at a fixed interval and fold them into every range and
        /// kernel (pm.csv; no replay): `default` (DRAM read/write bytes per second, SM active,
        /// tensor pipe active, GR active), `dram` (the two DRAM rates alone: they sustain
        /// 20us) or comma-separated PM-sampling metric names. An add-on to --mode trace.
        #[arg(long = "pm-sampling", value_name = "METRICS")]
        pm_sampling: Option<String>,
        /// PM sampling interval: ns (100000, 100us, 1ms; default 100us), SYSCLK cycles
        /// (30000cycles), or auto (the shortest the decode keeps up with for these metrics,
        /// measured before sampling starts).
        #[arg(long = "pm-interval", value_name = "NS", requires = "pm_sampling")]
        pm_interval: Option<String>,
        /// Also sample warp program counters and their stall reasons (CUPTI's PC sampling,
        /// kernels not serialized): stall reasons per range (stalls.csv), per kernel and per
        /// instruction (pc_samples.csv). INTERVAL: N for every 2^N cycles (5 to 31), a power of
        /// two of cycles (4096cycles) or cupti (CUPTI's choice); default 13. An add-on to --mode
        /// trace, which it picks when --mode is not given.
        #[arg(long = "pc-sampling", value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "default", require_equals = true)]
        pc_sampling: Option<String>,
        /// Probe kernels at load time (PTX probe engine): comma-separated built-in probes
        /// (block_sched, gmem_bytes, exec_count) or paths to TOML probe specs. Kernels with PTX
        /// (NVRTC, PTX or fatbin images, runtime kernels, Triton and Inductor caches) are
        /// probed; kernels without (cuBLAS, cuDNN, aten) are counted through CUPTI's SASS
        /// metrics for exec_count and gmem_bytes (--probe-sass); probe_kernels.csv says which
        /// path took each kernel, or why none did.
        #[arg(long)]
        probe: Option<String>,
        /// Probe only kernels whose mangled or demangled name matches this glob.
        #[arg(long, requires = "probe")]
        probe_kernels: Option<String>,
        /// Probe only while an NVTX range matching this glob is open.
        #[arg(long, requires = "probe")]
        probe_range: Option<String>,
        /// A directory searched for the .ptx of kernels loaded from cubins, e.g. Triton's cache
        /// ($TRITON_CACHE_DIR): the .ptx whose sibling .cubin is the loaded image is probed.
        #[arg(long, requires = "probe")]
        probe_ptx_dir: Option<PathBuf>,
        /// When CUPTI's SASS metrics count a kernel: `auto` (kernels without PTX), `always`
        /// (every selected kernel; the PTX probes are off) or `never`.
        #[arg(long, requires = "probe", value_parser = ["auto", "always", "never"])]
        probe_sass: Option<String>,
        /// Count at most N launches of each kernel through SASS metrics (the rest run patched
        /// but unflushed: no wait per launch, no per-launch counts). Default: every launch.
        #[arg(long, requires = "probe", value_name = "N")]
        probe_sass_launches: Option<u64>,
        /// MiB of GPU memory for the maps of kernels probed inside CUDA graphs (allocated
        /// before stream captures begin, kept to the end; default 256). 0: kernels launched
        /// while a stream captures are not probed.
        #[arg(long, requires = "probe", value_name = "MIB")]
        probe_graph_pool: Option<u64>,
        /// PyTorch, no code change: an NVTX range NAME (default `step`) from the end of each
        /// optimizer step to the end of the next, in every Python process of the run (a
        /// start-up file first on PYTHONPATH registers torch.optim's global step hook).
        #[arg(long = "torch-steps", value_name = "NAME", num_args = 0..=1, default_missing_value = "step")]
        torch_steps: Option<String>,
        /// Table formats: csv, parquet or csv,parquet (default). Each table (ranges, kernels,
        /// transfers, stats, pm, probes) is written as NAME.csv and/or NAME.parquet (typed
        /// columns, nulls where not measured, the CSV header lines as key-value metadata);
        /// report.json and trace.json are written either way.
        #[arg(long, value_name = "FORMATS", default_value = "csv,parquet")]
        format: gmprof::report::OutputFormats,
        #[command(flatten)]
        trace_format: check_trace::TraceFormatArgs,
        #[command(flatten)]
        on_demand: on_demand::OnDemandArgs,
        #[command(flatten)]
        view: ViewArgs,
        /// The program and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<std::ffi::OsString>,
    },
    /// Capture a job running under `gmprof run --on-demand`, without restarting it: every
    /// process of TARGET (the run's output directory, or a pid) from the same step, for N steps
    /// or S seconds, into OUT/capture-K/<process>/; then back to idle. One capture at a time.
    Capture(on_demand::CaptureArgs),
    /// One summary across the processes of a run (ranks, workers): per range path, the min,
    /// median and max of GPU time across processes and the slowest one; writes merged.csv
    /// and merged-trace.json (one Perfetto trace, processes side by side).
    ///
    /// Each process's directory is read on its own (its ranges.parquet, or report.json when it
    /// has no Parquet) and dropped before the next: memory does not grow with kernels, so
    /// hundreds of ranks merge in seconds. Also writes stragglers.csv (per step: each
    /// process's time, the slowest, min, median, max and spread) and trace-index.json (each
    /// process's own trace.json; merged-trace.json holds at most 8 processes).
    Merge {
        /// The output directory of the run: its subdirectories (and itself) hold report.json or
        /// ranges.parquet.
        dir: PathBuf,
        /// The path of the range whose instances are the steps (default: the first process's
        /// repeated range of least depth and most time), e.g. train_step.
        #[arg(long, value_name = "PATH")]
        step: Option<String>,
        /// Compare steps by GPU time (gpu, default) or by wall time (wall).
        #[arg(long, value_name = "gpu|wall", default_value = "gpu")]
        step_time: gmprof::report::stragglers::StepTime,
        /// The processes (directory labels, comma-separated, at most 8) whose timelines go into
        /// merged-trace.json (default: all up to 8; beyond, the slowest most often and the
        /// median).
        #[arg(long, value_name = "LABELS", value_delimiter = ',')]
        trace_ranks: Option<Vec<String>>,
        /// Fail (exit 1) when a process's outputs cannot be read. Without it such a process is
        /// left out, named on the summary's first line and above merged.csv's header.
        #[arg(long)]
        strict: bool,
    },
    /// Compare two runs (output directories, of one process or several): per range group and
    /// kernel, GPU time, kernels and every metric both collected, base against new, each
    /// change judged against the runs' own noise (Mann-Whitney U rank test over the steady
    /// instances, Holm-adjusted). Exits 3 when a --fail-if gate trips.
    Diff {
        /// The baseline run's output directory (or its report.json).
        base: PathBuf,
        /// The run to compare with it.
        new: PathBuf,
        /// Leave out the first K instances of each repeated range (and their kernels).
        #[arg(long, default_value_t = 0)]
        skip_first: u32,
        /// Rows of each kind in the table (0: all).
        #[arg(long, default_value_t = gmprof::report::diff::table::DEFAULT_TOP)]
        top: usize,
        /// Smallest change of the median, in percent, that is marked.
        #[arg(long, default_value_t = 2.0)]
        threshold: f64,
        /// Smallest impact of a GPU time change on the total, in percent of the base run's
        /// steady-state GPU time, that is marked (0: any).
        #[arg(long, default_value_t = 0.1)]
        min_impact: f64,
        /// Family-wise significance level of the rank tests.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// Group range rows by path (default) or name, numbers folded.
        #[arg(long, default_value = "path")]
        group_by: GroupBy,
        /// Write every row as CSV (`-` for standard output).
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Write the whole diff as JSON (`-` for standard output).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the diff as one self-contained HTML page with plots.
        #[arg(long)]
        html: Option<PathBuf>,
        /// CI gate: exit 3 when a range's GPU time is slower, beyond noise, by more than PCT %.
        #[arg(long, value_name = "PCT")]
        fail_if_slower: Option<f64>,
        /// CI gate on a metric: METRIC=PCT exits 3 when a range's METRIC rose beyond noise by
        /// more than PCT % (repeatable).
        #[arg(long, value_name = "METRIC=PCT")]
        fail_if_higher: Vec<String>,
        /// CI gate on a metric: METRIC=PCT exits 3 when a range's METRIC fell beyond noise by
        /// more than PCT % (repeatable).
        #[arg(long, value_name = "METRIC=PCT")]
        fail_if_lower: Vec<String>,
    },
    /// Check a Chrome trace JSON file (gmprof's or another tool's) for well-formedness.
    CheckTrace {
        /// The trace file.
        file: PathBuf,
        /// How long after its range ended a kernel may start, in microseconds (for kernels
        /// without args.launch_ts; with it, the launch call must lie inside the range).
        #[arg(long, default_value_t = DEFAULT_LAUNCH_LATENCY_ALLOWANCE_US)]
        allowance_us: f64,
    },
}

fn chip_name(args: &ChipArgs, cupti: &Cupti) -> gmprof::Result<String> {
    if let Some(chip) = &args.chip {
        return Ok(chip.clone());
    }
    // The chip name query needs the driver initialized and the profiler API up.
    let drv = driver::init()?;
    let count = driver::device_count(&drv)?;
    if count == 0 {
        return Err(gmprof::Error::InvalidState(
            "no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)".into(),
        ));
    }
    target::query_chip_name(cupti, args.device)
}

fn kind_name(kind: MetricKind) -> &'static str {
    match kind {
        MetricKind::Counter => "counter",
        MetricKind::Ratio => "ratio",
        MetricKind::Throughput => "throughput",
    }
}

/// Merges the processes under `dir`, writes merged.csv (and the others) and prints the summary.
fn print_merged(dir: &std::path::Path, options: &merge::MergeOptions) -> gmprof::Result<()> {
    let outcome = gmprof::report::merge_run::merge_dir_with(dir, options)?;
    outln!("{}", outcome.merged);
    let files: Vec<String> = outcome.files.iter().map(|f| f.display().to_string()).collect();
    eprintln!("gmprof: wrote {}", files.join(", "));
    eprintln!("gmprof: merged trace: {}", outcome.trace_note);
    Ok(())
}

fn print_report(
    path: &std::path::Path,
    csv: bool,
    stats: bool,
    view: &ViewArgs,
    figs: Option<&std::path::Path>,
) -> gmprof::Result<()> {
    // A directory of several processes' outputs (a distributed run) is merged; one with a
    // single process's outputs in a subdirectory is that process's report.
    if path.is_dir() && !path.join("report.json").is_file() {
        match merge::result_dirs(path, &["report.json"]).as_slice() {
            [] => {}
            [only] => return print_report(only, csv, stats, view, figs),
            _ if csv || figs.is_some() => {
                return Err(gmprof::Error::InvalidConfig(format!(
                    "{} holds several processes' reports: `gmprof merge {}` writes merged.csv; --csv and \
                     --figures read one process's directory",
                    path.display(),
                    path.display()
                )))
            }
            _ => return print_merged(path, &merge::MergeOptions::default()),
        }
    }
    let file = if path.is_dir() { path.join("report.json") } else { path.to_owned() };
    let report = streamed::read_report(path, &file, csv)?;
    if path.is_dir() {
        let others = merge::result_dirs(path, &["report.json"]).len().saturating_sub(1);
        if others > 0 {
            eprintln!(
                "gmprof: {} also holds {others} other process(es)' reports: `gmprof merge {}` for all of them",
                path.display(),
                path.display()
            );
        }
    }
    if csv {
        report.write_csv_to(stdout::Quiet)?;
    } else {
        outln!("{}", report.summary_with(&view.options()));
        if let Some(streamed) = &report.streamed {
            outln!("{}", gmprof::report::text::streamed::streamed_text(streamed));
        }
        if stats {
            outln!("{}", report.stats());
        }
    }
    // A partial directory (a checkpoint of a run that did not finish) says so.
    if let Some(end) = report.meta.run_end.as_ref().filter(|e| !e.is_complete()) {
        eprintln!("gmprof: {}: {}", file.display(), end.describe());
    }
    if let Some(html) = &view.html {
        streamed::write_html(&report, &file, html, &view.options())?;
        eprintln!("gmprof: wrote {}", html.display());
    }
    if let Some(dir) = figs {
        figures::write(&report, &file, dir, &view.options())?;
    }
    Ok(())
}

fn run(cli: Cli) -> gmprof::Result<ExitCode> {
    if let Command::Run {
        mode,
        metrics,
        nvtx_include,
        out,
        range_scope,
        sync_on_pop,
        stream,
        library,
        stats,
        iteration_replay,
        iterations,
        rotation,
        pm_sampling,
        pm_interval,
        pc_sampling,
        probe,
        probe_kernels,
        probe_range,
        probe_ptx_dir,
        probe_sass,
        probe_sass_launches,
        probe_graph_pool,
        torch_steps,
        format,
        trace_format,
        on_demand,
        view,
        program,
    } = cli.command
    {
        let mut on_demand = on_demand.options();
        on_demand.kineto_steps = trace_format.trace_format == gmprof::report::TraceFormat::Kineto;
        if probe.is_some() && on_demand.idle_start() {
            return Err(gmprof::Error::InvalidConfig(
                "--probe profiles from the program's start: it does not run beside --on-demand or --capture-range"
                    .into(),
            ));
        }
        if pc_sampling.is_some() && on_demand.idle_start() {
            return Err(gmprof::Error::InvalidConfig(
                "--pc-sampling samples from the program's start: it does not run beside --on-demand or \
                 --capture-range yet"
                    .into(),
            ));
        }
        let pm_on = pm_sampling
            .as_deref()
            .is_some_and(|m| !matches!(m.trim().to_ascii_lowercase().as_str(), "0" | "false" | "off" | "no"));
        if pc_sampling.is_some() && pm_on {
            return Err(gmprof::Error::InvalidConfig(gmprof::capture::pc_sampling::beside_pm_sampling_message()));
        }
        // PC sampling runs beside trace mode only (CUPTI samples no PCs while the range
        // profiler holds the counters); without --mode it picks trace.
        let mode = match (&pc_sampling, mode) {
            (Some(_), None) => Some("trace".to_owned()),
            (_, mode) => mode,
        };
        if let (Some(_), Some(m)) = (&pc_sampling, mode.as_deref()) {
            let parsed: ProfilingMode = m.parse()?;
            if parsed != ProfilingMode::Trace {
                return Err(gmprof::Error::InvalidConfig(gmprof::capture::pc_sampling::beside_counters_message(
                    parsed.as_str(),
                )));
            }
        }
        if let Some(list) = &probe {
            // Refuse an unknown probe or a bad spec before the program starts.
            gmprof::probe::parse_probe_list(list).map_err(|e| gmprof::Error::InvalidConfig(format!("--probe: {e}")))?;
        }
        let any_mode = std::env::var(gmprof::ways_in::probe_run::PROBE_SASS_ANY_MODE_ENV).as_deref() == Ok("1");
        if probe_sass.as_deref() == Some("always") && mode.as_deref() != Some("trace") && !any_mode {
            return Err(gmprof::Error::InvalidConfig(
                "--probe-sass always: CUPTI's SASS metrics run beside --mode trace only (beside a counter mode the \
                 counters measure CUPTI's patched kernels: 15-67x their time on an H200); add --mode trace"
                    .into(),
            ));
        }
        let iteration_replay = iteration_replay.zip(iterations);
        let mode = rotation.mode(mode, iteration_replay.is_some())?;
        if let Some((pattern, instances)) = &iteration_replay {
            steps::check_iteration_replay_up_front(mode.as_deref(), &metrics, pattern, *instances)?;
        }
        let mode = stream.mode(mode, on_demand.idle_start())?;
        let opts = LaunchOptions {
            mode,
            metrics,
            nvtx_include,
            output_dir: out,
            range_scope,
            synchronize_on_pop: sync_on_pop,
            library,
            iteration_replay,
            rotate: rotation.rotate,
            rotate_cycles: rotation.rotate_cycles,
            rotate_step: rotation.rotate_step,
            pm_sampling,
            pm_interval,
            pc_sampling,
            torch_steps,
            on_demand: on_demand.clone(),
            program,
        };
        let mut plan = LaunchPlan::new(&opts)?;
        use gmprof::ways_in::probe_run::{
            PROBE_ENV, PROBE_GRAPH_POOL_ENV, PROBE_KERNELS_ENV, PROBE_PTX_DIR_ENV, PROBE_RANGE_ENV, PROBE_SASS_ENV,
            PROBE_SASS_LAUNCHES_ENV,
        };
        let ptx_dir = probe_ptx_dir.map(|d| std::path::absolute(&d).unwrap_or(d).display().to_string());
        for (key, value) in [
            (PROBE_ENV, probe),
            (PROBE_KERNELS_ENV, probe_kernels),
            (PROBE_RANGE_ENV, probe_range),
            (PROBE_PTX_DIR_ENV, ptx_dir),
            (PROBE_SASS_ENV, probe_sass),
            (PROBE_SASS_LAUNCHES_ENV, probe_sass_launches.map(|n| n.to_string())),
            (PROBE_GRAPH_POOL_ENV, probe_graph_pool.map(|n| n.to_string())),
        ] {
            if let Some(v) = value {
                plan.env.push((key.into(), v.into()));
            }
        }
        plan.env.extend(stream.env());
        plan.env.push((gmprof::report::formats::FORMAT_ENV.into(), format.to_string().into()));
        plan.env.push(trace_format.env());
        let mut outcome = plan.run()?;
        if on_demand.idle_start() {
            // The captures are the outputs; the processes' own directories hold their status.
            on_demand::print_captures(&outcome.output_dir);
            outcome.processes.retain(|p| {
                !p.dir.components().any(|c| {
                    gmprof::ways_in::on_demand::captures::capture_number(&c.as_os_str().to_string_lossy()).is_some()
                })
            });
            for p in &mut outcome.processes {
                p.idle_on_demand = true;
            }
        }
        let profiled: Vec<_> = outcome.profiled().collect();
        if let [only] = profiled.as_slice() {
            outln!();
            if let Err(e) = print_report(&only.dir, false, stats, &view, None) {
                eprintln!("gmprof: could not read the outputs back: {e}");
            }
        } else if profiled.len() > 1 {
            outln!();
            if let Err(e) = print_merged(&outcome.output_dir, &merge::MergeOptions::default()) {
                eprintln!("gmprof: could not merge the outputs: {e}");
            }
        }
        for line in outcome.messages() {
            eprintln!("gmprof: {line}");
        }
        // The program's status, whatever was profiled (a launcher or a worker that created no
        // CUDA context is not an error); a program ended by a signal gives 128 + its number,
        // as a shell reports it.
        let code = match (outcome.exit.code(), std::os::unix::process::ExitStatusExt::signal(&outcome.exit)) {
            (Some(c), _) => c.clamp(0, 255) as u8,
            (None, Some(signal)) => (128 + signal).clamp(0, 255) as u8,
            (None, None) => 128,
        };
        return Ok(ExitCode::from(code));
    }
    if let Command::Diff { .. } = cli.command {
        return run_diff(cli.command);
    }
    if let Command::Capture(args) = cli.command {
        return on_demand::run_capture(args);
    }
    run_tool(cli).map(|()| ExitCode::SUCCESS)
}

/// The status `gmprof diff` exits with when a gate trips.
const GATE_TRIPPED: u8 = 3;

fn run_diff(command: Command) -> gmprof::Result<ExitCode> {
    use gmprof::report::diff::{Diff, DiffOptions, Gate};
    let Command::Diff {
        base,
        new,
        skip_first,
        top,
        threshold,
        min_impact,
        alpha,
        group_by,
        csv,
        json,
        html,
        fail_if_slower,
        fail_if_higher,
        fail_if_lower,
    } = command
    else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut gates = Vec::new();
    if let Some(pct) = fail_if_slower {
        if !(pct >= 0.0 && pct.is_finite()) {
            return Err(gmprof::Error::InvalidConfig(format!("--fail-if-slower {pct}: give a percentage >= 0")));
        }
        gates.push(Gate::slower(pct));
    }
    for text in &fail_if_higher {
        gates.push(Gate::parse(text, true)?);
    }
    for text in &fail_if_lower {
        gates.push(Gate::parse(text, false)?);
    }
    let options = DiffOptions { skip_first, threshold_pct: threshold, min_impact_pct: min_impact, alpha, group_by };
    let diff = Diff::read(&base, &new, options)?;
    for gate in &gates {
        let known = diff.rows.iter().any(|r| r.quantity == gate.quantity);
        if !known {
            return Err(gmprof::Error::InvalidConfig(format!(
                "the gate '{}' names a quantity neither run has for comparison: {}",
                gate.describe(),
                gate.quantity
            )));
        }
    }
    let to_stdout = |p: &Option<PathBuf>| p.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if !to_stdout(&csv) && !to_stdout(&json) {
        let table = gmprof::report::diff::table::DiffTable { diff: &diff, top: (top > 0).then_some(top) };
        outln!("{table}");
    }
    if let Some(path) = &csv {
        if to_stdout(&csv) {
            diff.write_csv_to(stdout::Quiet)?;
        } else {
            diff.write_csv(path)?;
            eprintln!("gmprof: wrote {}", path.display());
        }
    }
    if let Some(path) = &json {
        if to_stdout(&json) {
            outln!("{}", diff.to_json_string()?);
        } else {
            diff.write_json(path)?;
            eprintln!("gmprof: wrote {}", path.display());
        }
    }
    if let Some(path) = &html {
        diff.write_html(path)?;
        eprintln!("gmprof: wrote {}", path.display());
    }
    let mut tripped = false;
    for gate in &gates {
        let rows: Vec<_> = diff.tripped(gate).collect();
        if rows.is_empty() {
            eprintln!("gmprof: gate passed: no range {}", gate.describe());
            continue;
        }
        tripped = true;
        eprintln!("gmprof: gate tripped: {} range(s) {}:", rows.len(), gate.describe());
        for r in rows {
            eprintln!(
                "gmprof:   {} ({:+.1} %, p(adj) {:.2e})",
                r.name,
                r.change_pct.unwrap_or(f64::NAN),
                r.p_adjusted.unwrap_or(f64::NAN)
            );
        }
    }
    Ok(if tripped { ExitCode::from(GATE_TRIPPED) } else { ExitCode::SUCCESS })
}

fn run_tool(cli: Cli) -> gmprof::Result<()> {
    match cli.command {
        Command::Run { .. } | Command::Diff { .. } | Command::Capture(_) => Ok(()),
        Command::Metrics { filter, full, pm_sampling, chip } => {
            let cupti = Cupti::load()?;
            let chip = chip_name(&chip, &cupti)?;
            let catalog = if pm_sampling {
                MetricCatalog::for_pm_sampling(&cupti, &chip)?
            } else {
                MetricCatalog::for_chip(&cupti, &chip)?
            };
            let word = filter.unwrap_or_default();
            let rows: Vec<_> = catalog.filter(&word).collect();
            let width = rows.iter().map(|e| e.name.len()).max().unwrap_or(6).max(6);
            outln!("# chip {chip}: {} of {} base metrics", rows.len(), catalog.entries().len());
            outln!("{:<width$}  {:<10}  {:<14}  description", "metric", "type", "unit");
            for e in rows {
                outln!("{:<width$}  {:<10}  {:<14}  {}", e.name, kind_name(e.kind), e.unit, e.description);
                if full {
                    for name in catalog.full_names(e) {
                        outln!("    {name}");
                    }
                }
            }
            Ok(())
        }
        Command::Report { path, csv, stats, figures, view } => {
            print_report(&path, csv, stats, &view, figures.as_deref())
        }
        Command::Merge { dir, step, step_time, trace_ranks, strict } => {
            print_merged(&dir, &merge::MergeOptions { step, step_time, trace_ranks, strict })
        }
        Command::Passes { metrics, pm_sampling, chip } => {
            let cupti = Cupti::load()?;
            let chip = chip_name(&chip, &cupti)?;
            let catalog = if pm_sampling {
                MetricCatalog::for_pm_sampling(&cupti, &chip)?
            } else {
                MetricCatalog::for_chip(&cupti, &chip)?
            };
            let names: Vec<&str> = metrics.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
            let passes = catalog.passes(&names)?;
            outln!("{passes}");
            Ok(())
        }
        Command::CheckTrace { file, allowance_us } => check_trace::run(&file, allowance_us),
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("GMPROF_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    stdout::quiet_caught_decoder_panics();
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("gmprof: error: {e}");
            ExitCode::FAILURE
        }
        Err(payload) => {
            let e = gmprof::Error::from_panic("the gmprof command", payload.as_ref());
            eprintln!("gmprof: {e} (a bug in gmprof; please report it)");
            ExitCode::from(2)
        }
    }
}
