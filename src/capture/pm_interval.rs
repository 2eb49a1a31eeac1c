//! `--pm-interval auto`: the shortest sampling interval this machine's decode keeps up with,
//! for the metrics chosen.
//!
//! Layer 3, beside [`crate::capture::pm_sampling`]. Before sampling starts, [`calibrate`]
//! samples the device for [`CALIBRATION_TIME`] at [`CALIBRATION_INTERVAL_NS`] with the run's
//! metrics on a sampler of its own, decodes and evaluates what it got, and times both; the
//! sampler is then disabled and the run's own is configured with [`choose_interval`]'s
//! answer. What it measured is kept with the samples (`PmCapture::interval_chosen_by`) and
//! shown in the summary, pm.csv and report.json.
//!
//! Why: CUPTI's decode of one sample costs what its raw records cost, and they grow with the
//! metrics: on an H100 about 35 µs per sample with the five default metrics and 4 µs with
//! the two DRAM throughput metrics (BENCHMARKS.md, "PM sampling decode rate on llm.c"). A
//! fixed default is too long for the second and too short for the first.

use std::time::{Duration, Instant};

use crate::checked::host::ProfilerHost;
use crate::checked::pm_sampling::{PmSampler, Trigger};
use crate::checked::Cupti;
use crate::error::{Error, Result};

/// The interval calibration samples at: long enough that its decode keeps up with any
/// metric set PM sampling can take.
pub const CALIBRATION_INTERVAL_NS: u64 = 100_000;
/// How long calibration samples.
pub const CALIBRATION_TIME: Duration = Duration::from_millis(50);
/// Fewer samples than this and calibration gives no answer.
pub const CALIBRATION_MIN_SAMPLES: usize = 100;
/// The interval is this many times the time a sample costs the busiest thread in calibration.
/// On llm.c (H100, validation/2026-11-25-pm-acceptance-h100.log) twice was not enough: the
/// default metrics calibrated at 30.2 µs per sample on the decode thread (18.0 µs decode,
/// 12.2 µs hand-off) and the 70 µs that gave lost 378 of 51 629 samples, because CUPTI's
/// decode of samples taken while kernels run costs more than of calibration's (34.5 µs at
/// 20 µs, BENCHMARKS.md). Three times gives 100 µs there (not yet run on a GPU with this
/// factor). The two DRAM metrics (5.6 µs per sample) get 20 µs either way, which lost no
/// sample in 20 steps of llm.c.
pub const SAFETY_FACTOR: u64 = 3;
/// Intervals are chosen in steps of this many ns.
pub const INTERVAL_STEP_NS: u64 = 10_000;

/// What calibration measured, per sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// Samples decoded.
    pub samples: usize,
    /// CUPTI's decode, ns per sample.
    pub decode_ns: u64,
    /// Reading the sample times and initializing the image, ns per sample.
    pub handoff_ns: u64,
    /// The host's evaluation on one thread, ns per sample.
    pub evaluate_ns: u64,
}

/// The interval for `c` with `threads` evaluation threads: [`SAFETY_FACTOR`] times the
/// busier of the decode thread (decode and hand-off) and one evaluation thread (its share of
/// the evaluation), rounded up to [`INTERVAL_STEP_NS`].
pub fn choose_interval(c: &Calibration, threads: usize) -> u64 {
    let decode_thread = c.decode_ns + c.handoff_ns;
    let eval_thread = c.evaluate_ns / threads.max(1) as u64;
    let per_sample = decode_thread.max(eval_thread).max(1);
    (per_sample * SAFETY_FACTOR).div_ceil(INTERVAL_STEP_NS).max(1) * INTERVAL_STEP_NS
}

/// How the interval was chosen, for the outputs: `auto: CUPTI decoded 480 calibration
/// samples at 34.5 µs each (+10.0 µs hand-off), evaluation 23.4 µs each on 4 thread(s)`.
pub fn describe(c: &Calibration, threads: usize, chosen_ns: u64) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    format!(
        "auto: {:.0} us, {SAFETY_FACTOR} x the busiest thread's time per sample; CUPTI decoded {} calibration samples \
         at {:.1} us each (+{:.1} us hand-off), evaluation {:.1} us each on {threads} thread(s)",
        us(chosen_ns),
        c.samples,
        us(c.decode_ns),
        us(c.handoff_ns),
        us(c.evaluate_ns)
    )
}

/// Samples device `device_index` for [`CALIBRATION_TIME`] with `config_image` (the run's
/// metrics, `metrics` their names) on a sampler of its own, then decodes and evaluates with
/// `host` and times each step. The sampler is disabled before it returns.
pub fn calibrate(
    cupti: &Cupti,
    device_index: usize,
    config_image: &[u8],
    metrics: &[&str],
    host: &ProfilerHost,
) -> Result<Calibration> {
    let mut sampler = PmSampler::enable(cupti, device_index)?;
    sampler.set_config(config_image.to_vec(), 32 << 20, Trigger::TimeNs(CALIBRATION_INTERVAL_NS))?;
    let expected = (CALIBRATION_TIME.as_nanos() as u64 / CALIBRATION_INTERVAL_NS) as u32;
    let mut image = sampler.create_counter_data(metrics, expected * 2)?;
    let mut spare = sampler.create_counter_data(metrics, expected * 2)?;
    sampler.start()?;
    std::thread::sleep(CALIBRATION_TIME);
    sampler.stop()?;
    let t0 = Instant::now();
    sampler.decode(&mut image)?;
    let decode = t0.elapsed();
    let t0 = Instant::now();
    let samples = image.info(cupti)?.completed;
    for index in 0..samples {
        sampler.sample_times(&image, index)?;
    }
    sampler.initialize_counter_data(&mut spare)?;
    let handoff = t0.elapsed();
    let t0 = Instant::now();
    for index in 0..samples {
        host.evaluate(image.bytes(), index, metrics)?;
    }
    let evaluate = t0.elapsed();
    sampler.shutdown()?;
    if samples < CALIBRATION_MIN_SAMPLES {
        return Err(Error::InvalidState(format!(
            "--pm-interval auto: calibration got {samples} PM sample(s) in {} ms at {} us, fewer than {}; give an \
             interval (e.g. --pm-interval 100us)",
            CALIBRATION_TIME.as_millis(),
            CALIBRATION_INTERVAL_NS / 1000,
            CALIBRATION_MIN_SAMPLES
        )));
    }
    let per = |d: Duration| (d.as_nanos() / samples as u128) as u64;
    Ok(Calibration { samples, decode_ns: per(decode), handoff_ns: per(handoff), evaluate_ns: per(evaluate) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-sample costs of llm.c on an H100 (BENCHMARKS.md) give the intervals that run
    /// kept every sample at.
    #[test]
    fn measured_costs_give_the_intervals_that_kept_up() {
        let dram = Calibration { samples: 480, decode_ns: 4_100, handoff_ns: 1_500, evaluate_ns: 5_100 };
        assert_eq!(choose_interval(&dram, 4), 20_000);
        let default = Calibration { samples: 480, decode_ns: 34_500, handoff_ns: 10_200, evaluate_ns: 23_400 };
        assert_eq!(choose_interval(&default, 4), 140_000);
        // The calibration of the llm.c run that lost samples at 2 x: 3 x gives 100 µs.
        let llmc = Calibration { samples: 504, decode_ns: 18_000, handoff_ns: 12_200, evaluate_ns: 13_100 };
        assert_eq!(choose_interval(&llmc, 4), 100_000);
        // On one thread the evaluation is the bound: 3 x 60 µs.
        let slow_host = Calibration { evaluate_ns: 60_000, ..default };
        assert_eq!(choose_interval(&slow_host, 1), 180_000);
        assert_eq!(choose_interval(&slow_host, 4), 140_000);
        // Never below one step.
        let free = Calibration { samples: 500, decode_ns: 0, handoff_ns: 0, evaluate_ns: 0 };
        assert_eq!(choose_interval(&free, 4), INTERVAL_STEP_NS);
        let text = describe(&default, 4, 140_000);
        assert!(text.starts_with("auto: 140 us, 3 x the busiest thread's time per sample"), "{text}");
        assert!(text.contains("480 calibration samples at 34.5 us each (+10.2 us hand-off)"), "{text}");
    }
}
