//! Configuration: [`ProfilerBuilder`], [`RangeScope`] and the mode names.

use crate::capture::pc_sampling::PcSamplingConfig;
use crate::capture::pm_sampling::PmSamplingConfig;
use crate::checked::driver::Context;
use crate::error::{Error, Result};
use crate::model::ProfilingMode;

use super::scope::RangeScope;
use super::state::Profiler;

/// Default host memory for the counter data images (two with background evaluation).
pub const DEFAULT_COUNTER_IMAGE_BUDGET: usize = 256 << 20;
/// Default upper bound of ranges per counter cycle. Every cycle stops and restarts CUPTI's
/// range profiler, which holds the launching thread for about 11 to 17 ms (H200, CUPTI
/// 13.0; see BENCHMARKS.md). Images for tens of thousands of ranges made every session very
/// slow to set up or finish in the same measurements, so the default stays at 2000.
pub const DEFAULT_MAX_RANGES_PER_CYCLE: usize = 2000;

/// Configures and builds a [`Profiler`].
#[derive(Clone, Debug)]
#[must_use]
pub struct ProfilerBuilder {
    pub(super) metrics: Vec<String>,
    pub(super) mode: Option<ProfilingMode>,
    pub(super) device: Option<usize>,
    pub(super) context: Option<Context>,
    pub(super) flush_on_range_boundaries: Option<bool>,
    pub(super) synchronize_on_pop: bool,
    pub(super) range_scope: RangeScope,
    pub(super) counter_image_budget: usize,
    pub(super) max_ranges_per_cycle: usize,
    pub(super) max_nesting_levels: u16,
    pub(super) iteration_replay: Option<(String, usize)>,
    pub(super) background_evaluation: bool,
    pub(super) pm_sampling: Option<PmSamplingConfig>,
    pub(super) pc_sampling: Option<PcSamplingConfig>,
    pub(super) optional_samplers: bool,
    pub(super) rotate: Option<super::rotation::Every>,
    pub(super) rotation_cycles: bool,
    pub(super) rotation_step: Option<String>,
    pub(super) time_api_calls: bool,
}

/// The metrics a builder collects unless told otherwise (`gpu__time_duration.sum` is always
/// added).
pub const DEFAULT_METRICS: [&str; 2] = ["dram__bytes_read.sum", "dram__bytes_write.sum"];

/// Parses an iteration-replay range pattern: an exact range name, or a glob (`*` any text,
/// `?` one character, `[0-9]` a class) that matches numbered names such as
/// `Train step *`.
pub fn iteration_pattern(pattern: &str) -> Result<glob::Pattern> {
    if pattern.trim().is_empty() {
        return Err(Error::InvalidConfig("the iteration-replay range pattern is empty".into()));
    }
    glob::Pattern::new(pattern)
        .map_err(|e| Error::InvalidConfig(format!("iteration-replay range pattern '{pattern}': {e}")))
}

/// The up-front check of iteration replay, shared by [`ProfilerBuilder::build`] and
/// `gmprof run`: the mode must replay by user range, and the program must run at least as
/// many instances of the range as the metric set needs passes.
pub fn check_iteration_replay(mode: ProfilingMode, passes: usize, pattern: &str, instances: usize) -> Result<()> {
    iteration_pattern(pattern)?;
    if !matches!(mode, ProfilingMode::PerKernel | ProfilingMode::PerRange) {
        return Err(Error::InvalidConfig(format!(
            "iteration replay needs the per_kernel or per_range mode, not {}",
            mode.as_str()
        )));
    }
    if passes > instances {
        return Err(Error::InvalidConfig(format!(
            "the metric set needs {passes} replay passes, but the program runs only {instances} \
             instance(s) of '{pattern}': run at least {passes}, use fewer metrics, or use kernel_replay"
        )));
    }
    Ok(())
}

/// Default nesting levels CUPTI collects in [`ProfilingMode::PerRange`]: the outermost
/// only, since under user replay each level needs its own passes.
pub const DEFAULT_MAX_NESTING_LEVELS: u16 = 1;

impl Default for ProfilerBuilder {
    fn default() -> Self {
        ProfilerBuilder {
            metrics: DEFAULT_METRICS.iter().map(|m| (*m).to_owned()).collect(),
            mode: None,
            device: None,
            context: None,
            flush_on_range_boundaries: None,
            synchronize_on_pop: false,
            range_scope: RangeScope::Thread,
            counter_image_budget: DEFAULT_COUNTER_IMAGE_BUDGET,
            max_ranges_per_cycle: DEFAULT_MAX_RANGES_PER_CYCLE,
            max_nesting_levels: DEFAULT_MAX_NESTING_LEVELS,
            iteration_replay: None,
            background_evaluation: true,
            pm_sampling: None,
            pc_sampling: None,
            optional_samplers: false,
            rotate: None,
            rotation_cycles: false,
            rotation_step: None,
            time_api_calls: false,
        }
    }
}

impl ProfilerBuilder {
    /// Also samples PM counters at a fixed interval (CUPTI's PM sampling: no replay) and
    /// folds them into every range and kernel ([`crate::analysis::pm_fold`]): the report
    /// gets a `pm` section and `pm.csv`. An add-on to [`ProfilingMode::Trace`]; beside a
    /// counter mode it starts only if CUPTI lets both hold the device's counters, else
    /// [`ProfilerBuilder::build`] fails saying so. `None` turns it off.
    pub fn pm_sampling(mut self, config: Option<PmSamplingConfig>) -> Self {
        self.pm_sampling = config;
        self
    }

    /// Also samples warp program counters with their stall reasons (CUPTI's PC sampling,
    /// continuous collection: kernels are not serialized) and folds them into stall reasons
    /// per range, kernel and instruction ([`crate::analysis::pc_fold`]): the report gets a
    /// `pc` section, `stalls.csv` and `pc_samples.csv`. An add-on to [`ProfilingMode::Trace`],
    /// which it picks when no [`ProfilerBuilder::mode`] is set; beside a counter mode
    /// [`ProfilerBuilder::build`] fails at once saying why (CUPTI samples no PCs while the range
    /// profiler holds the counters). `None` turns it off.
    pub fn pc_sampling(mut self, config: Option<PcSamplingConfig>) -> Self {
        self.pc_sampling = config;
        self
    }

    /// Whether a PM or PC sampler that fails to start (a CUPTI call failed) is left out, the
    /// rest of the session going on and a warning of the report saying why, instead of
    /// failing [`ProfilerBuilder::build`] (default: it fails). A configuration the sampler
    /// refuses (metrics the chip cannot sample, PM sampling beside a counter mode) fails the
    /// build either way. `gmprof run` sets it: a program profiled by injection is measured
    /// even when a sampler cannot run.
    pub fn optional_samplers(mut self, on: bool) -> Self {
        self.optional_samplers = on;
        self
    }

    /// The metrics to collect (full names, e.g. `dram__bytes_read.sum`).
    /// `gpu__time_duration.sum` is always added: kernel time in kernel_replay, and the
    /// counter window that weighs ratio metrics in every counter mode, come from it.
    pub fn metrics<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.metrics = names.into_iter().map(Into::into).collect();
        self
    }

    /// How counters are collected. Default: [`ProfilingMode::PerKernel`] when the metric
    /// set fits in one pass (no replay needed: near-native speed), else
    /// [`ProfilingMode::KernelReplay`] (CUPTI replays each kernel itself; choose PerKernel or
    /// PerRange explicitly and use [`Profiler::replay`] for the faster user replay).
    pub fn mode(mut self, mode: ProfilingMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Profile this CUDA device's primary context when no context is current (default 0).
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = Some(ordinal);
        self
    }

    /// Profile this context, current or not (injection attaches to each new context).
    pub(crate) fn context(mut self, context: Context) -> Self {
        self.context = Some(context);
        self
    }

    /// Flush activity buffers at every push and pop, so a range's records are in hand when
    /// it closes. Off, records arrive when CUPTI's buffers fill or at finish. The report is
    /// the same either way, since rows are joined by correlation id, not by arrival.
    ///
    /// A flush costs about 0.4 ms (measured on an H200, see BENCHMARKS.md): noise next to
    /// kernel replay's ~12 ms per kernel, so it defaults on in `KernelReplay`, but many
    /// kernels' worth in `Trace`, where it defaults off.
    pub fn flush_on_range_boundaries(mut self, on: bool) -> Self {
        self.flush_on_range_boundaries = Some(on);
        self
    }

    /// Wait for the GPU before closing each range (off by default).
    ///
    /// Ranges are taken on the CPU, and CUDA launches are asynchronous: without a
    /// synchronization a range can close long before its kernels run (an unsynchronized
    /// training loop ran 90 ms ahead of the GPU on an H200), so its wall time says nothing
    /// about its GPU work and its kernels fall outside it on a timeline. With this on, each
    /// pop first synchronizes the calling thread's context, so every kernel a range launched
    /// ends inside it; the price is the lost CPU/GPU overlap at every pop.
    pub fn synchronize_on_pop(mut self, on: bool) -> Self {
        self.synchronize_on_pop = on;
        self
    }

    /// How kernels and transfers are attributed to ranges (default [`RangeScope::Thread`]).
    pub fn range_scope(mut self, scope: RangeScope) -> Self {
        self.range_scope = scope;
        self
    }

    /// Host memory allowed for the counter data images (two with background evaluation, one
    /// without); bounds the ranges per cycle.
    pub fn counter_image_budget(mut self, bytes: usize) -> Self {
        self.counter_image_budget = bytes;
        self
    }

    /// Range nesting levels measured in [`ProfilingMode::PerRange`] (default 1, the
    /// outermost ranges). CUPTI collects one nesting level per replay pass, so `L` levels
    /// multiply the passes by `L` ([`Profiler::passes`]): with `L > 1`, run the work through
    /// [`Profiler::replay`]. Ranges deeper than `L` get no counters of their own (their
    /// kernels still count in the enclosing measured range).
    pub fn max_nesting_levels(mut self, levels: u16) -> Self {
        self.max_nesting_levels = levels.max(1);
        self
    }

    /// Iteration replay for multi-pass metric sets in the user-replay modes: pass `p` is
    /// collected during the `p`-th instance of the range named `range` (e.g. `train_step`),
    /// so a training loop provides the passes itself, with no closure. `range` may be a
    /// glob ([`iteration_pattern`]): `Train step *` takes `Train step 0`, `Train step 1`, ...
    /// as the instances; within a round their differing names are not a replay mismatch. `instances` is how
    /// many instances the program will run: when the set needs more passes than that,
    /// [`ProfilerBuilder::build`] fails and says how many passes are needed.
    ///
    /// The first instance of each round of P is what the report shows; the next P - 1
    /// instances are its replay passes (their ranges and kernels are not rows), matched to
    /// it by range path and kernel position; differences are flagged as in
    /// [`Profiler::replay`]. Kernels outside the named range get no counters.
    pub fn iteration_replay(mut self, range: impl Into<String>, instances: usize) -> Self {
        self.iteration_replay = Some((range.into(), instances));
        self
    }

    /// Whether full counter images are evaluated on a background thread (the default). When a
    /// counter cycle is full, the next launch stops the range profiler, decodes the image and
    /// starts again; evaluating the image's ranges (most of a cycle's cost) then runs on a
    /// gmprof thread while the program goes on, with at most two images in memory. With
    /// `false` the launching thread waits for each evaluation and one image is used: less
    /// memory and no extra thread, but a stall at every cycle.
    pub fn background_evaluation(mut self, on: bool) -> Self {
        self.background_evaluation = on;
        self
    }

    /// per_kernel counters in rotation across steps: in each step only the launches whose
    /// position falls in that step's slot open a per-kernel CUPTI range, so every position of
    /// a repeating step is measured once every `every` steps, and the other launches run as in
    /// trace mode (timed, unmeasured, not serialized; status `unmeasured`). Steps are the
    /// outermost ranges, or those [`ProfilerBuilder::rotation_step`] names. 1 measures every
    /// launch; [`Every::Auto`](super::rotation::Every::Auto) picks N from the first steps so
    /// that measured launches cost about 1.5 % of step time; `None` turns rotation off. Needs
    /// [`ProfilingMode::PerKernel`] and a one-pass metric set; [`ProfilerBuilder::build`] fails
    /// saying why otherwise. Measuring stops when the counter image is full
    /// ([`ProfilerBuilder::max_ranges_per_cycle`] measured launches), so no counter cycle ever
    /// holds the program mid-run, unless [`ProfilerBuilder::rotation_cycles`] asks for them.
    pub fn rotate(mut self, every: Option<super::rotation::Every>) -> Self {
        self.rotate = every;
        self
    }

    /// Whether a rotation goes on measuring past a full counter image, cycling it mid-run:
    /// each cycle holds the launching thread (tens of ms; `profiler_pauses`). Default off:
    /// measuring stops when the image is full and it is decoded at the end.
    pub fn rotation_cycles(mut self, on: bool) -> Self {
        self.rotation_cycles = on;
        self
    }

    /// The step range a rotation numbers positions in: a name or glob (`Train step *`,
    /// `step`); the outermost open range whose name matches it. Default: the outermost open
    /// range.
    pub fn rotation_step(mut self, glob: Option<String>) -> Self {
        self.rotation_step = glob;
        self
    }

    /// Whether each launch, memcpy and memset call is stamped on the CUPTI clock when it
    /// returns, and each memcpy and memset call when it is made (a launch's entry is stamped
    /// in every session: [`LaunchRecord::launch_ns`](crate::model::LaunchRecord::launch_ns)).
    /// The rows then carry them ([`KernelRow::launch_end_ns`], [`TransferRow::call_ns`]), and
    /// the Kineto form of `trace.json` gives each call its duration. Off by default: it costs
    /// every launch an exit callback routed to the session, a timestamp and a lock, and every
    /// memcpy and memset a second timestamp. `gmprof run --trace-format kineto` turns it on.
    ///
    /// [`KernelRow::launch_end_ns`]: crate::analysis::correlate::KernelRow::launch_end_ns
    /// [`TransferRow::call_ns`]: crate::analysis::correlate::TransferRow::call_ns
    pub fn time_api_calls(mut self, on: bool) -> Self {
        self.time_api_calls = on;
        self
    }

    /// Upper bound on counter ranges per cycle (the image is cycled when full).
    pub fn max_ranges_per_cycle(mut self, n: usize) -> Self {
        self.max_ranges_per_cycle = n.max(1);
        self
    }

    /// Attaches to the GPU and starts profiling.
    pub fn build(self) -> Result<Profiler> {
        Profiler::start(self)
    }
}

impl std::str::FromStr for ProfilingMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "kernel_replay" | "kernel" => Ok(ProfilingMode::KernelReplay),
            "per_kernel" => Ok(ProfilingMode::PerKernel),
            "per_range" | "range" => Ok(ProfilingMode::PerRange),
            "trace" => Ok(ProfilingMode::Trace),
            other => Err(Error::InvalidConfig(format!(
                "unknown mode '{other}': use kernel_replay, per_kernel, per_range or trace"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iteration_patterns_match_numbered_ranges() {
        let p = iteration_pattern("Train step *").unwrap();
        assert!(p.matches("Train step 0") && p.matches("Train step 49"));
        assert!(!p.matches("Eval step 3") && !p.matches("Train step"));
        let exact = iteration_pattern("train_step").unwrap();
        assert!(exact.matches("train_step") && !exact.matches("train_step 2"));
        assert!(iteration_pattern(" ").is_err());
        assert!(iteration_pattern("step [0-").is_err());
    }

    #[test]
    fn iteration_replay_is_checked_up_front() {
        assert!(check_iteration_replay(ProfilingMode::PerKernel, 8, "Train step *", 8).is_ok());
        assert!(check_iteration_replay(ProfilingMode::PerRange, 1, "step", 1).is_ok());
        let e = check_iteration_replay(ProfilingMode::PerKernel, 8, "Train step *", 5).unwrap_err().to_string();
        assert!(e.contains("needs 8 replay passes") && e.contains("only 5 instance(s) of 'Train step *'"), "{e}");
        let e = check_iteration_replay(ProfilingMode::KernelReplay, 8, "step", 50).unwrap_err().to_string();
        assert!(e.contains("per_kernel or per_range mode, not kernel_replay"), "{e}");
    }
    #[test]
    fn no_profiler_starts_while_a_stream_captures() {
        // Starting turns on CUPTI's collection (allocations, waits), which would invalidate
        // the program's capture; nothing is loaded or called before the refusal.
        crate::capture::stream_capture::capturing_on_this_thread(true);
        let started = Profiler::builder().mode(ProfilingMode::Trace).build();
        crate::capture::stream_capture::capturing_on_this_thread(false);
        let Err(e) = started else { panic!("a profiler started during a stream capture") };
        let e = e.to_string();
        assert!(e.starts_with("a CUDA stream of the program is capturing"), "{e}");
    }
}
