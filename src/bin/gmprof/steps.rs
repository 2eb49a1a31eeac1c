//! How `gmprof run` spreads counters over a program's steps: per_kernel in rotation
//! (`--rotate`: the flags, and the mode they pick or refuse) and iteration replay's pass check
//! (`--iteration-replay`, before the program starts).

use gmprof::checked::Cupti;
use gmprof::metrics::MetricCatalog;
use gmprof::model::{ProfilingMode, GPU_TIME_METRIC};
use gmprof::profiler::{check_iteration_replay, DEFAULT_METRICS};

use crate::{chip_name, ChipArgs};

/// The rotation flags of `gmprof run`.
#[derive(clap::Args, Clone, Debug)]
pub struct RotateArgs {
    /// per_kernel counters in rotation: each step measures one block of consecutive launch
    /// positions, the others run as in trace mode, so every launch position of a repeating
    /// step is measured once every N measuring steps. `auto` (the default) sizes the blocks
    /// and picks how often a step measures from the first steps, so that measuring costs
    /// about 1.5 % of step time. Picks --mode per_kernel; steps are the outermost ranges, or
    /// --rotate-step's (--torch-steps gives PyTorch programs theirs).
    #[arg(long, value_name = "N|auto", num_args = 0..=1, default_missing_value = "auto")]
    pub rotate: Option<String>,
    /// Go on measuring past a full counter image, cycling it mid-run (each cycle holds the
    /// program for tens of ms). Default: measuring stops when the image is full.
    #[arg(long, requires = "rotate")]
    pub rotate_cycles: bool,
    /// The range (name or glob, e.g. "Train step *") whose instances a rotation numbers
    /// launch positions in (default: --torch-steps's range, else the outermost open range).
    #[arg(long, value_name = "NAME", requires = "rotate")]
    pub rotate_step: Option<String>,
}

impl RotateArgs {
    /// The mode to run: per_kernel when rotating and none was asked for; a rotation beside
    /// another mode, or beside iteration replay, is refused with the reason.
    pub fn mode(&self, mode: Option<String>, iteration_replay: bool) -> gmprof::Result<Option<String>> {
        let Some(every) = &self.rotate else { return Ok(mode) };
        every
            .parse::<gmprof::profiler::rotation::Every>()
            .map_err(|e| gmprof::Error::InvalidConfig(format!("--rotate {e}")))?;
        if iteration_replay {
            return Err(gmprof::Error::InvalidConfig(
                "--rotate and --iteration-replay both pick which step measures what: use one of them".into(),
            ));
        }
        match mode {
            None => Ok(Some("per_kernel".to_owned())),
            Some(m) if m.parse::<gmprof::ProfilingMode>()? == gmprof::ProfilingMode::PerKernel => Ok(Some(m)),
            Some(m) => Err(gmprof::Error::InvalidConfig(format!(
                "--rotate measures per_kernel counters in rotation, not --mode {m}: leave --mode out or use per_kernel"
            ))),
        }
    }
}

/// `gmprof run --iteration-replay`: the library's pass check, before the program starts, so
/// a long run is not spent unprofiled.
pub fn check_iteration_replay_up_front(
    mode: Option<&str>,
    metrics: &[String],
    pattern: &str,
    instances: usize,
) -> gmprof::Result<()> {
    let mode: ProfilingMode = mode.map(str::parse).transpose()?.unwrap_or(ProfilingMode::PerKernel);
    if !matches!(mode, ProfilingMode::PerKernel | ProfilingMode::PerRange) {
        return check_iteration_replay(mode, 0, pattern, instances);
    }
    let cupti = Cupti::load()?;
    let chip = chip_name(&ChipArgs { chip: None, device: 0 }, &cupti)?;
    let catalog = MetricCatalog::for_chip(&cupti, &chip)?;
    let mut names: Vec<&str> = vec![GPU_TIME_METRIC];
    let asked: Vec<&str> = if metrics.is_empty() {
        DEFAULT_METRICS.to_vec()
    } else {
        metrics.iter().map(|m| m.trim()).filter(|m| !m.is_empty()).collect()
    };
    for m in asked {
        if !names.contains(&m) {
            names.push(m);
        }
    }
    let passes = catalog.passes(&names)?;
    check_iteration_replay(mode, passes, pattern, instances)?;
    eprintln!("gmprof: iteration replay: {passes} pass(es) over {instances} instance(s) of '{pattern}'");
    Ok(())
}
