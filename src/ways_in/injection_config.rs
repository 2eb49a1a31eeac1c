//! What the injected profiler is told by the environment (`GMPROF_*`).
//!
//! Layer 3, for [`crate::ways_in::injection`] and [`crate::ways_in::on_demand`]'s injected
//! side, below both: [`InjectionConfig::from_env`] reads and checks every variable `gmprof run`
//! sets, with errors that name the variable. The names are in [`crate::ways_in::env_names`]
//! (re-exported here as [`mod@env`]), the checkpoint and signal settings in
//! [`crate::ways_in::settings`].

use std::path::PathBuf;

use crate::capture::pm_sampling::PmSamplingConfig;
use crate::capture::profiler::RangeScope;
use crate::error::{Error, Result};
use crate::model::ProfilingMode;
use crate::ways_in::settings::{parse_flag, EndSettings};

/// Environment variables the injected library reads (defined in [`crate::ways_in::env_names`]).
pub use crate::ways_in::env_names::injection as env;

pub use crate::ways_in::settings::{DEFAULT_CHECKPOINT_SECS, DEFAULT_SIGNAL_TIMEOUT_SECS};

/// What the injected profiler is told by the environment.
#[derive(Clone, Debug, PartialEq)]
pub struct InjectionConfig {
    /// The profiling mode (`None`: the library default).
    pub mode: Option<ProfilingMode>,
    /// The metrics (`None`: the library default).
    pub metrics: Option<Vec<String>>,
    /// Where outputs go.
    pub output_dir: PathBuf,
    /// NVTX range names to follow, with everything nested in them; empty follows all.
    pub nvtx_include: Vec<String>,
    /// How helper threads' kernels are attributed.
    pub range_scope: RangeScope,
    /// Synchronize before each pop.
    pub synchronize_on_pop: bool,
    /// Time between checkpoints of the outputs (`None`: none).
    pub checkpoint_every: Option<std::time::Duration>,
    /// Whether terminating signals write the outputs first.
    pub handle_signals: bool,
    /// How long a terminating signal waits for the outputs.
    pub signal_timeout: std::time::Duration,
    /// Counter ranges per cycle (`None`: the library default).
    pub ranges_per_cycle: Option<usize>,
    /// Iteration replay: range pattern and instance count.
    pub iteration_replay: Option<(String, usize)>,
    /// per_kernel in rotation: N or auto (`GMPROF_ROTATE`).
    pub rotate: Option<crate::capture::profiler::rotation::Every>,
    /// Whether the rotation cycles full counter images mid-run (`GMPROF_ROTATE_CYCLES`).
    pub rotation_cycles: bool,
    /// The range a rotation numbers positions in (`GMPROF_ROTATE_STEP`, else the step range).
    pub rotation_step: Option<String>,
    /// PM sampling (`GMPROF_PM_SAMPLING`, `GMPROF_PM_INTERVAL`), when asked for.
    pub pm_sampling: Option<PmSamplingConfig>,
    /// PC sampling (`GMPROF_PC_SAMPLING`, `GMPROF_PC_COLLECTION`, `GMPROF_PC_RECORD`), when
    /// asked for.
    pub pc_sampling: Option<crate::capture::pc_sampling::PcSamplingConfig>,
    /// Streamed outputs (`GMPROF_STREAM`, `GMPROF_ROW_LIMIT`, `GMPROF_STREAM_SECS`), when
    /// asked for.
    pub stream: Option<crate::ways_in::settings::StreamOptions>,
    /// Live metrics (`GMPROF_METRICS_PORT`, `GMPROF_METRICS_BIND`, `GMPROF_OTLP_ENDPOINT`,
    /// `GMPROF_OTLP_INTERVAL`), when asked for.
    pub metrics_export: Option<crate::ways_in::live_metrics::LiveExport>,
    /// Whether API calls are timed for the Kineto form of `trace.json`
    /// (`GMPROF_TRACE_FORMAT=kineto`; [`ProfilerBuilder::time_api_calls`]).
    ///
    /// [`ProfilerBuilder::time_api_calls`]: crate::capture::profiler::ProfilerBuilder::time_api_calls
    pub time_api_calls: bool,
}

impl InjectionConfig {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the configuration through `lookup` (the seam tests use).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let list = |v: String| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        let seconds = |key: &str, default: u64| -> Result<u64> {
            match get(key) {
                None => Ok(default),
                Some(v) => v.parse::<u64>().map_err(|_| {
                    Error::InvalidConfig(format!("{key}={v}: use a whole number of seconds (0 turns it off)"))
                }),
            }
        };
        let flag = |key: &str, default: bool| parse_flag(key, get(key), default);
        let ends = EndSettings::from_lookup(&lookup)?;
        Ok(InjectionConfig {
            mode: get(env::MODE).map(|m| m.parse()).transpose()?,
            metrics: get(env::METRICS).map(list),
            output_dir: PathBuf::from(get(env::OUT).unwrap_or_else(|| "gmprof-out".into())),
            nvtx_include: get(env::NVTX_INCLUDE).map(list).unwrap_or_default(),
            range_scope: get(env::RANGE_SCOPE).map(|s| s.parse()).transpose()?.unwrap_or(RangeScope::Process),
            synchronize_on_pop: flag(env::SYNC_ON_POP, false)?,
            checkpoint_every: ends.checkpoint_every,
            handle_signals: ends.handle_signals,
            signal_timeout: ends.signal_timeout,
            ranges_per_cycle: match seconds(env::RANGES_PER_CYCLE, 0)? {
                0 => None,
                n => Some(n as usize),
            },
            iteration_replay: iteration_replay(get(env::ITERATION_REPLAY), get(env::ITERATIONS))?,
            rotate: rotate(get(env::ROTATE))?,
            rotation_cycles: flag(env::ROTATE_CYCLES, false)?,
            rotation_step: get(env::ROTATE_STEP)
                .or_else(|| get(crate::ways_in::env_names::on_demand::STEP_RANGE))
                .or_else(|| get(crate::ways_in::env_names::TORCH_STEPS_ENV)),
            pm_sampling: PmSamplingConfig::from_lookup(&lookup)?,
            pc_sampling: crate::capture::pc_sampling::PcSamplingConfig::from_lookup(&lookup)?,
            stream: crate::ways_in::settings::StreamOptions::from_lookup(&lookup)?,
            metrics_export: crate::ways_in::live_metrics::LiveExport::from_lookup(&lookup)?,
            time_api_calls: crate::report::kineto::times_api_calls(&lookup),
        })
    }
}

/// `GMPROF_ROTATE`: `auto`, or a whole number of steps, at least 1.
fn rotate(value: Option<String>) -> Result<Option<crate::capture::profiler::rotation::Every>> {
    let Some(v) = value else { return Ok(None) };
    v.parse().map(Some).map_err(|e| {
        Error::InvalidConfig(format!(
            "{}={e} (the steps a rotation takes to measure every launch position once)",
            env::ROTATE
        ))
    })
}

/// The iteration-replay setting from its two variables: both or neither.
fn iteration_replay(pattern: Option<String>, iterations: Option<String>) -> Result<Option<(String, usize)>> {
    match (pattern, iterations) {
        (None, None) => Ok(None),
        (Some(pattern), Some(n)) => {
            let n = n.parse::<usize>().map_err(|_| {
                Error::InvalidConfig(format!("{}={n}: use the number of instances the program runs", env::ITERATIONS))
            })?;
            crate::capture::profiler::iteration_pattern(&pattern)?;
            Ok(Some((pattern, n)))
        }
        (Some(_), None) => Err(Error::InvalidConfig(format!(
            "{} needs {} (how many instances of the range the program runs)",
            env::ITERATION_REPLAY,
            env::ITERATIONS
        ))),
        (None, Some(_)) => Err(Error::InvalidConfig(format!("{} needs {}", env::ITERATIONS, env::ITERATION_REPLAY))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<InjectionConfig> {
        InjectionConfig::from_lookup(|k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn config_defaults_and_values() {
        let c = config(&[]).unwrap();
        assert_eq!(c.mode, None);
        assert_eq!(c.output_dir, PathBuf::from("gmprof-out"));
        assert_eq!(c.range_scope, RangeScope::Process);
        assert!(c.nvtx_include.is_empty() && !c.synchronize_on_pop);
        let c = config(&[
            (env::MODE, "trace"),
            (env::METRICS, "dram__bytes_read.sum, gpu__time_duration.sum"),
            (env::OUT, "/tmp/x"),
            (env::NVTX_INCLUDE, "step,eval"),
            (env::RANGE_SCOPE, "thread"),
            (env::SYNC_ON_POP, "1"),
        ])
        .unwrap();
        assert_eq!(c.mode, Some(ProfilingMode::Trace));
        assert_eq!(c.metrics.unwrap(), ["dram__bytes_read.sum", "gpu__time_duration.sum"]);
        assert_eq!(c.nvtx_include, ["step", "eval"]);
        assert_eq!(c.range_scope, RangeScope::Thread);
        assert!(c.synchronize_on_pop);
    }

    #[test]
    fn config_rejects_bad_values_with_the_variable() {
        let e = config(&[(env::MODE, "fast")]).unwrap_err().to_string();
        assert!(e.contains("unknown mode 'fast'"), "{e}");
        let e = config(&[(env::SYNC_ON_POP, "maybe")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_SYNC_ON_POP=maybe"), "{e}");
    }

    #[test]
    fn iteration_replay_needs_a_pattern_and_a_count() {
        assert_eq!(config(&[]).unwrap().iteration_replay, None);
        let c = config(&[(env::ITERATION_REPLAY, "Train step *"), (env::ITERATIONS, "50")]).unwrap();
        assert_eq!(c.iteration_replay, Some(("Train step *".to_owned(), 50)));
        let e = config(&[(env::ITERATION_REPLAY, "Train step *")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_ITERATION_REPLAY needs GMPROF_ITERATIONS"), "{e}");
        let e = config(&[(env::ITERATION_REPLAY, "step"), (env::ITERATIONS, "many")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_ITERATIONS=many"), "{e}");
        let e = config(&[(env::ITERATION_REPLAY, "step [0-"), (env::ITERATIONS, "8")]).unwrap_err().to_string();
        assert!(e.contains("pattern 'step [0-'"), "{e}");
    }
}
