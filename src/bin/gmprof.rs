//! `gmprof`: the command-line face of the gmprof library.
//!
//! - `gmprof metrics [--filter WORD]` lists the metrics the GPU (or `--chip`) supports.
//! - `gmprof passes METRIC,...` prints how many replay passes a metric set needs.
//! - `gmprof check-trace FILE` checks a Chrome trace JSON file and exits 1 on any violation.
//!
//! Errors print as one readable message and exit with status 1; nothing panics.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gmprof::checked::{driver, target, Cupti};
use gmprof::metrics::MetricCatalog;
use gmprof::model::MetricKind;
use gmprof::trace_check::{check_trace_file, CheckOptions, DEFAULT_LAUNCH_LATENCY_ALLOWANCE_US};

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
    },
    /// Print how many replay passes a metric set needs.
    Passes {
        /// Comma-separated full metric names, e.g. dram__bytes_read.sum,gpu__time_duration.sum
        #[arg(value_delimiter = ',', required = true)]
        metrics: Vec<String>,
        #[command(flatten)]
        chip: ChipArgs,
    },
    /// Check a Chrome trace JSON file (gmprof's or another tool's) for well-formedness.
    CheckTrace {
        /// The trace file.
        file: PathBuf,
        /// How long after its range ended a kernel may start, in microseconds.
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
    let _api = target::ProfilerApi::initialize(cupti)?;
    target::chip_name(cupti, args.device)
}

fn kind_name(kind: MetricKind) -> &'static str {
    match kind {
        MetricKind::Counter => "counter",
        MetricKind::Ratio => "ratio",
        MetricKind::Throughput => "throughput",
    }
}

fn run(cli: Cli) -> gmprof::Result<()> {
    match cli.command {
        Command::Metrics { filter, full, chip } => {
            let cupti = Cupti::load()?;
            let chip = chip_name(&chip, &cupti)?;
            let catalog = MetricCatalog::for_chip(&cupti, &chip)?;
            let word = filter.unwrap_or_default();
            let rows: Vec<_> = catalog.filter(&word).collect();
            let width = rows.iter().map(|e| e.name.len()).max().unwrap_or(6).max(6);
            println!("# chip {chip}: {} of {} base metrics", rows.len(), catalog.entries().len());
            println!("{:<width$}  {:<10}  {:<14}  description", "metric", "type", "unit");
            for e in rows {
                println!("{:<width$}  {:<10}  {:<14}  {}", e.name, kind_name(e.kind), e.unit, e.description);
                if full {
                    for name in catalog.full_names(e) {
                        println!("    {name}");
                    }
                }
            }
            Ok(())
        }
        Command::Report { path, csv, stats } => {
            let file = if path.is_dir() { path.join("report.json") } else { path };
            let report = gmprof::Report::read_json(&file)?;
            if csv {
                report.write_csv_to(std::io::stdout().lock())?;
            } else {
                println!("{}", report.summary());
                if stats {
                    println!("{}", report.stats());
                }
            }
            Ok(())
        }
        Command::Passes { metrics, chip } => {
            let cupti = Cupti::load()?;
            let chip = chip_name(&chip, &cupti)?;
            let catalog = MetricCatalog::for_chip(&cupti, &chip)?;
            let names: Vec<&str> = metrics.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
            let passes = catalog.passes(&names)?;
            println!("{passes}");
            Ok(())
        }
        Command::CheckTrace { file, allowance_us } => {
            if !(allowance_us.is_finite() && allowance_us >= 0.0) {
                return Err(gmprof::Error::InvalidConfig(format!(
                    "--allowance-us must be a non-negative number of microseconds, not {allowance_us}"
                )));
            }
            let opts = CheckOptions { launch_latency_allowance_us: allowance_us };
            let report = check_trace_file(&file, &opts).map_err(|e| match e {
                gmprof::Error::Io { path, source } => {
                    gmprof::Error::InvalidConfig(format!("could not read {}: {source}", path.display()))
                }
                other => other,
            })?;
            if report.is_ok() {
                println!("{}: {} events, OK", file.display(), report.events);
                return Ok(());
            }
            for violation in &report.violations {
                println!("{}: {violation}", file.display());
            }
            Err(gmprof::Error::InvalidConfig(format!(
                "{}: {} violation(s) in {} events",
                file.display(),
                report.violations.len(),
                report.events
            )))
        }
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("GMPROF_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
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
