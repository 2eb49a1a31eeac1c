//! `gmprof`: the command-line face of the gmprof library.
//!
//! - `gmprof metrics [--filter WORD]` lists the metrics the GPU (or `--chip`) supports.
//! - `gmprof passes METRIC,...` prints how many replay passes a metric set needs.
//!
//! Errors print as one readable message and exit with status 1; nothing panics.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gmprof::checked::{driver, target, Cupti};
use gmprof::metrics::MetricCatalog;
use gmprof::model::MetricKind;

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
    /// Print how many replay passes a metric set needs.
    Passes {
        /// Comma-separated full metric names, e.g. dram__bytes_read.sum,gpu__time_duration.sum
        #[arg(value_delimiter = ',', required = true)]
        metrics: Vec<String>,
        #[command(flatten)]
        chip: ChipArgs,
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
        Command::Passes { metrics, chip } => {
            let cupti = Cupti::load()?;
            let chip = chip_name(&chip, &cupti)?;
            let catalog = MetricCatalog::for_chip(&cupti, &chip)?;
            let names: Vec<&str> = metrics.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
            let passes = catalog.passes(&names)?;
            println!("{passes}");
            Ok(())
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
