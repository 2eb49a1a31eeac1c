//! Counter cycles: the range profiler's configuration, and the cycle of a counter data image
//! (stop, decode, evaluate, re-arm) that keeps host memory bounded however many kernels run.

use crate::capture::metrics::MetricCatalog;
use crate::checked::driver::Context;
use crate::checked::host::ProfilerHost;
use crate::checked::range_profiler::{CounterDataImage, RangeConfig, RangeMode, RangeProfiler, ReplayMode};
use crate::checked::target::{self, ProfilerApi};
use crate::checked::Cupti;
use crate::error::Result;
use crate::model::{CounterRange, MetricSet, ProfilingMode, GPU_TIME_METRIC};

use super::*;

/// The range profiler side of a counter mode.
pub(super) struct Counters {
    pub(super) range_profiler: Option<RangeProfiler>,
    pub(super) counter_data: CounterDataImage,
    pub(super) config_image: Vec<u8>,
    pub(super) config: RangeConfig,
    pub(super) host: ProfilerHost,
    pub(super) _api: ProfilerApi,
    pub(super) cycle: u32,
    pub(super) ordinal_in_cycle: u32,
    pub(super) dropped_ranges: u64,
    /// Auto ranges CUPTI numbered in earlier cycles (see `finish_cycle`).
    pub(super) auto_ranges_before_cycle: u64,
    /// Whether the range profiler is started (between `start` and `stop`).
    pub(super) running: bool,
    /// CUPTI user ranges open now.
    pub(super) user_depth: u32,
}

/// What `start_counters` sets up.
pub(super) struct CounterSetup {
    pub(super) counters: Counters,
    pub(super) metric_set: MetricSet,
    pub(super) names: Vec<String>,
    pub(super) passes: usize,
    pub(super) chip: String,
    pub(super) mode: ProfilingMode,
}

impl Profiler {
    /// Sets up the range profiler of a counter mode: metrics, configuration, counter image.
    pub(super) fn start_counters(
        cfg: &ProfilerBuilder,
        cupti: &Cupti,
        context: Context,
        device: i32,
    ) -> Result<CounterSetup> {
        tracing::debug!("gmprof: initializing the profiler API");
        let api = ProfilerApi::initialize(cupti)?;
        let chip = target::chip_name(cupti, device as usize)?;
        tracing::debug!(chip, "gmprof: chip");
        // Metrics: gpu__time_duration.sum first, then the user's, without duplicates.
        let mut names: Vec<String> = vec![GPU_TIME_METRIC.to_owned()];
        for m in &cfg.metrics {
            let m = m.trim();
            if !m.is_empty() && !names.iter().any(|n| n == m) {
                names.push(m.to_owned());
            }
        }
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let catalog = MetricCatalog::for_chip(cupti, &chip)?;
        let specs = catalog.validate(&name_refs)?;
        drop(catalog);
        let availability = target::counter_availability(cupti, context)?;
        tracing::debug!(bytes = availability.len(), "gmprof: counter availability");
        let mut host = ProfilerHost::new(cupti, &chip, Some(&availability))?;
        host.add_metrics(&name_refs)?;
        let config_image = host.config_image()?;
        let metric_passes = host.num_passes(&config_image)?;
        // Under user replay CUPTI measures one nesting level per pass of the metric set.
        let passes = match cfg.mode {
            Some(ProfilingMode::PerRange) => metric_passes * cfg.max_nesting_levels as usize,
            _ => metric_passes,
        };
        let mode = cfg.mode.unwrap_or(if passes <= 1 || cfg.iteration_replay.is_some() {
            ProfilingMode::PerKernel
        } else {
            ProfilingMode::KernelReplay
        });
        tracing::info!(passes, metrics = ?names, mode = mode.as_str(), "gmprof: metric set needs {passes} replay pass(es)");

        let range_profiler = RangeProfiler::enable(cupti, context)?;
        tracing::debug!("gmprof: range profiler enabled");
        let per_range = range_profiler
            .counter_data_size(&name_refs, 2, 2)?
            .saturating_sub(range_profiler.counter_data_size(&name_refs, 1, 1)?)
            .max(1);
        let ranges_per_cycle = (cfg.counter_image_budget / per_range).clamp(1, cfg.max_ranges_per_cycle);
        let mut counter_data =
            range_profiler.create_counter_data(&name_refs, ranges_per_cycle, ranges_per_cycle as u32)?;
        let (range, replay, num_nesting_levels) = match mode {
            ProfilingMode::PerRange => (RangeMode::User, ReplayMode::User, cfg.max_nesting_levels),
            ProfilingMode::PerKernel => (RangeMode::User, ReplayMode::User, 1),
            _ => (RangeMode::Auto, ReplayMode::Kernel, 1),
        };
        let config = RangeConfig {
            range,
            replay,
            max_ranges_per_pass: ranges_per_cycle,
            num_nesting_levels,
            min_nesting_level: 1,
            pass_index: 0,
            target_nesting_level: 1,
        };
        // SAFETY: both images move into `Counters`, whose heap buffers never reallocate and
        // outlive the range profiler (it is disabled before they drop).
        unsafe { range_profiler.set_config(&config_image, &mut counter_data, &config)? };
        tracing::debug!(ranges_per_cycle, image_bytes = counter_data.len(), "gmprof: counter image");
        Ok(CounterSetup {
            counters: Counters {
                range_profiler: Some(range_profiler),
                counter_data,
                config_image,
                config,
                host,
                _api: api,
                cycle: 0,
                ordinal_in_cycle: 0,
                dropped_ranges: 0,
                auto_ranges_before_cycle: 0,
                running: false,
                user_depth: 0,
            },
            metric_set: MetricSet { metrics: specs },
            names,
            passes,
            chip,
            mode,
        })
    }
}

impl Shared {
    /// Stops the profiler, evaluates the full image, re-initializes it and starts again.
    pub(super) fn cycle_counter_image(&self, counters: &mut Counters) -> Result<()> {
        self.finish_cycle(counters)?;
        self.rearm(counters)?;
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        rp.start()?;
        counters.running = true;
        Ok(())
    }

    /// Re-initializes the image and configuration for the next cycle.
    pub(super) fn rearm(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        rp.initialize_counter_data(&mut counters.counter_data)?;
        // SAFETY: the images live in `counters` and outlive the range profiler.
        unsafe { rp.set_config(&counters.config_image, &mut counters.counter_data, &counters.config)? };
        counters.cycle += 1;
        counters.ordinal_in_cycle = 0;
        Ok(())
    }

    /// Stops and decodes the current cycle and hands its counter ranges to the correlator.
    pub(super) fn finish_cycle(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        let stop = rp.stop()?;
        counters.running = false;
        if !stop.all_passes_submitted {
            self.state.lock().warnings.push(format!(
                "counter cycle {}: CUPTI reported pass {} without all passes submitted",
                counters.cycle, stop.pass_index
            ));
        }
        self.collect_cycle(counters)
    }

    /// Decodes the stopped cycle and hands its counter ranges to the correlator.
    pub(super) fn collect_cycle(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        counters.user_depth = 0;
        let dropped = rp.decode()?;
        if dropped > 0 {
            tracing::warn!("gmprof: CUPTI dropped {dropped} counter range(s) in cycle {}", counters.cycle);
            counters.dropped_ranges += dropped as u64;
        }
        let count = counters.counter_data.range_count(&self.cupti)?;
        let names: Vec<&str> = self.metric_names.iter().map(String::as_str).collect();
        let mut ranges = Vec::with_capacity(count);
        // CUPTI numbers auto ranges from the profiler's enable, not per image: after a cycle
        // of 1000 ranges the next image starts at "1000" (seen with CUPTI 13.0.1 on an H200).
        // Rebase the numbers to the cycle, so the correlator's check (name == ordinal) stays
        // a real check: a kernel CUPTI saw out of gmprof's order still shows as a mismatch.
        let base = counters.auto_ranges_before_cycle;
        for index in 0..count {
            let image = counters.counter_data.bytes();
            let raw_name = counters.host.range_name(image, index, "/")?;
            let name = match (counters.config.range, raw_name.parse::<u64>()) {
                (RangeMode::Auto, Ok(n)) if n >= base => (n - base).to_string(),
                // A nested user range is named by its path; gmprof's own name is the last part.
                (RangeMode::User, _) => raw_name.rsplit('/').next().unwrap_or_default().to_owned(),
                _ => raw_name,
            };
            let values = counters.host.evaluate(image, index, &names)?;
            ranges.push(CounterRange { cycle: counters.cycle, index: index as u32, name, values });
        }
        counters.auto_ranges_before_cycle += (count + dropped) as u64;
        self.state.lock().correlator.add_counter_ranges(counters.cycle, ranges);
        Ok(())
    }
}
