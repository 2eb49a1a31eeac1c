//! The decode thread through a scripted sampler: pipelined evaluation on several threads,
//! recovery after overflows and failures, and what a session's end accounts for.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::checked::pm_sampling::{DecodeStop, Decoded};

/// One scripted decode: what it reports and the (start, end) of the samples it completes;
/// an error instead when `Err`.
type Drain = std::result::Result<(Decoded, Vec<(u64, u64)>), &'static str>;

/// A sampler whose decodes, starts and stops follow a script. Its image holds each
/// completed sample's start time as eight bytes, which [`StartEvaluator`] gives back as the
/// sample's value: a value that arrives with the wrong sample shows.
#[derive(Default)]
struct Scripted {
    drains: VecDeque<Drain>,
    spares: usize,
    stops: VecDeque<std::result::Result<(), &'static str>>,
    image: Vec<(u64, u64)>,
    /// Samples an image holds; 0 hands every image over after its first decode.
    capacity: usize,
    log: Arc<Mutex<Vec<String>>>,
}

fn fail(what: &'static str) -> Error {
    Error::InvalidState(what.into())
}

impl PmSource for Scripted {
    fn decode(&mut self) -> Result<Decoded> {
        self.log.lock().push("decode".into());
        match self
            .drains
            .pop_front()
            .unwrap_or(Ok((Decoded { stop: DecodeStop::EndOfRecords, overflow: false }, Vec::new())))
        {
            Ok((decoded, samples)) => {
                self.image.extend(samples);
                Ok(decoded)
            }
            Err(e) => Err(fail(e)),
        }
    }
    fn completed(&self) -> Result<usize> {
        Ok(self.image.len())
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn grow(&mut self) {
        self.log.lock().push("grow".into());
        self.capacity *= 2;
    }
    fn sample_times(&self, index: usize) -> Result<(u64, u64)> {
        Ok(self.image[index])
    }
    fn take_image(&mut self) -> Result<Vec<u8>> {
        self.log.lock().push(if self.spares > 0 { "reuse" } else { "new image" }.into());
        self.spares = self.spares.saturating_sub(1);
        let bytes = self.image.iter().flat_map(|(start, _)| start.to_le_bytes()).collect();
        self.image.clear();
        Ok(bytes)
    }
    fn give_back(&mut self, _image: Vec<u8>) {
        self.spares += 1;
    }
    fn reset_image(&mut self) -> Result<()> {
        self.log.lock().push("reset".into());
        self.image.clear();
        Ok(())
    }
    fn stop(&mut self) -> Result<()> {
        self.log.lock().push("stop".into());
        self.stops.pop_front().unwrap_or(Ok(())).map_err(fail)
    }
    fn now(&self) -> Option<u64> {
        None
    }
}

/// Gives a sample's start time back as its value; a start of 13 cannot be evaluated.
struct StartEvaluator;

impl SampleEvaluator for StartEvaluator {
    fn evaluate(&mut self, image: &[u8], index: usize) -> Result<Vec<f64>> {
        let bytes: [u8; 8] = image[index * 8..index * 8 + 8].try_into().unwrap();
        let start = u64::from_le_bytes(bytes);
        if start == 13 {
            return Err(fail("CUPTI_ERROR_INVALID_PARAMETER"));
        }
        Ok(vec![start as f64])
    }
}

const DONE: Decoded = Decoded { stop: DecodeStop::EndOfRecords, overflow: false };
const FULL: Decoded = Decoded { stop: DecodeStop::CounterDataFull, overflow: false };
const OVERFLOW: Decoded = Decoded { stop: DecodeStop::Other, overflow: true };

/// `n` samples of 20 µs from `from` (ns).
fn samples(from: u64, n: u64) -> Vec<(u64, u64)> {
    (0..n).map(|i| (from + i * 20_000, from + (i + 1) * 20_000)).collect()
}

fn decoder(source: Scripted, threads: usize) -> (Decoder<Scripted>, Arc<Mutex<PmCapture>>) {
    let capture = Arc::new(Mutex::new(PmCapture::default()));
    let evaluators: Vec<Box<dyn SampleEvaluator>> = (0..threads).map(|_| Box::new(StartEvaluator) as _).collect();
    (Decoder::new(source, evaluators, Arc::clone(&capture), Some(20_000)).unwrap(), capture)
}

fn starts(capture: &PmCapture) -> Vec<u64> {
    capture.samples.iter().map(|s| s.start_ns).collect()
}

#[test]
fn samples_are_evaluated_on_the_pool_and_kept_in_time_order() {
    // Three drains, the second filling the image twice; 3 threads share each batch.
    let source = Scripted {
        drains: VecDeque::from([
            Ok((DONE, samples(1_000_000, 7))),
            Ok((FULL, samples(1_140_000, 5))),
            Ok((DONE, samples(1_240_000, 4))),
            Ok((DONE, samples(1_320_000, 6))),
        ]),
        ..Default::default()
    };
    let (mut d, capture) = decoder(source, 3);
    assert_eq!(d.step(false), None);
    // The first batch may still be on the pool: a checkpoint sees what was kept.
    assert!(capture.lock().samples.len() <= 7);
    assert_eq!(d.step(false), None);
    assert_eq!(d.step(true), None);
    let (_, timing) = d.finish();
    let capture = capture.lock();
    let want: Vec<u64> = (0..22).map(|i| 1_000_000 + i * 20_000).collect();
    assert_eq!(starts(&capture), want);
    // Each value is its own sample's.
    assert!(capture.samples.iter().all(|s| s.values == vec![Some(s.start_ns as f64)]));
    assert_eq!((capture.missing_samples, capture.counter_data_full, capture.errors.len()), (0, 1, 0));
    assert_eq!((timing.samples, timing.drains, timing.threads), (22, 3, 3));
}

#[test]
fn an_overflow_is_counted_and_sampling_goes_on() {
    // The sampler overwrote its oldest records: the samples lost are the gap.
    let source = Scripted {
        drains: VecDeque::from([Ok((DONE, samples(1_000_000, 3))), Ok((OVERFLOW, samples(2_000_000, 4)))]),
        ..Default::default()
    };
    let log = Arc::clone(&source.log);
    let (mut d, capture) = decoder(source, 2);
    assert_eq!(d.step(false), None);
    assert_eq!(d.step(false), None, "an overflow is not an error");
    assert_eq!(d.step(true), None);
    d.finish();
    // Sampling is never stopped before the end; the first image evaluated is reused.
    assert_eq!(*log.lock(), ["decode", "new image", "decode", "new image", "stop", "decode"]);
    let capture = capture.lock();
    assert_eq!(starts(&capture).len(), 7, "the samples before and after the overflow are kept");
    assert_eq!(capture.hw_buffer_overflows, 1);
    assert_eq!(capture.missing_samples, (2_000_000 - 1_060_000) / 20_000);
    assert!(capture.errors.is_empty(), "{:?}", capture.errors);
}

#[test]
fn evaluated_images_are_used_again() {
    let source = Scripted {
        drains: (0..5).map(|i| Ok((DONE, samples(1_000_000 + i * 100_000, 5)))).collect(),
        ..Default::default()
    };
    let log = Arc::clone(&source.log);
    let (mut d, capture) = decoder(source, 2);
    for _ in 0..5 {
        d.step(false);
    }
    d.step(true);
    d.finish();
    let log = log.lock();
    // Each drain keeps the batch before it: from the third image on, one comes back.
    assert_eq!(log.iter().filter(|l| *l == "new image").count(), 2, "{log:?}");
    assert_eq!(log.iter().filter(|l| *l == "reuse").count(), 3, "{log:?}");
    assert_eq!(capture.lock().samples.len(), 25);
}

#[test]
fn a_failed_decode_is_said_and_decoding_goes_on() {
    let source = Scripted {
        drains: VecDeque::from([
            Ok((DONE, samples(1_000_000, 2))),
            Err("CUPTI_ERROR_UNKNOWN"),
            Ok((DONE, samples(1_040_000, 3))),
        ]),
        ..Default::default()
    };
    let (mut d, capture) = decoder(source, 1);
    for last in [false, false, false, true] {
        assert_eq!(d.step(last), None);
    }
    d.finish();
    let capture = capture.lock();
    assert_eq!(starts(&capture).len(), 5);
    assert_eq!(capture.errors, ["decoding: CUPTI_ERROR_UNKNOWN (decoding goes on)"]);
}

#[test]
fn failures_in_a_row_stop_decoding_and_what_was_kept_is_returned() {
    let source = Scripted {
        drains: VecDeque::from([
            Ok((DONE, samples(1_000_000, 4))),
            Err("CUPTI_ERROR_UNKNOWN"),
            Err("CUPTI_ERROR_UNKNOWN"),
            Err("CUPTI_ERROR_UNKNOWN"),
            Ok((DONE, samples(2_000_000, 4))),
        ]),
        ..Default::default()
    };
    let log = Arc::clone(&source.log);
    let (mut d, capture) = decoder(source, 2);
    for _ in 0..5 {
        assert_eq!(d.step(false), None);
    }
    // The sampler was stopped when decoding gave up: the end asks nothing more of it and
    // is not an error of the run.
    assert_eq!(d.step(true), None);
    d.finish();
    assert_eq!(log.lock().iter().filter(|l| *l == "decode").count(), 4, "{:?}", log.lock());
    assert_eq!(log.lock().last().map(String::as_str), Some("stop"));
    let capture = capture.lock();
    assert_eq!(starts(&capture).len(), 4);
    assert!(capture.errors[2].contains("3 failures in a row: decoding stopped"), "{:?}", capture.errors);
}

#[test]
fn a_failed_final_stop_is_the_finish_error_and_the_samples_are_kept() {
    let source = Scripted {
        drains: VecDeque::from([Ok((DONE, samples(1_000_000, 3))), Ok((DONE, samples(1_060_000, 2)))]),
        stops: VecDeque::from([Err("CUPTI_ERROR_NOT_INITIALIZED")]),
        ..Default::default()
    };
    let (mut d, capture) = decoder(source, 2);
    assert_eq!(d.step(false), None);
    assert_eq!(d.step(true).as_deref(), Some("CUPTI_ERROR_NOT_INITIALIZED"));
    d.finish();
    assert_eq!(starts(&capture.lock()).len(), 5);
}

#[test]
fn samples_that_cannot_be_evaluated_are_counted_and_left_out() {
    let mut bad = samples(1_000_000, 3);
    bad.insert(1, (13, 20_013));
    let source = Scripted { drains: VecDeque::from([Ok((DONE, bad))]), ..Default::default() };
    let (mut d, capture) = decoder(source, 2);
    d.step(true);
    d.finish();
    let capture = capture.lock();
    assert_eq!(starts(&capture), [1_000_000, 1_020_000, 1_040_000]);
    assert_eq!(capture.errors, ["1 sample(s) could not be evaluated and are left out: CUPTI_ERROR_INVALID_PARAMETER"]);
}

#[test]
fn samples_never_recorded_at_the_end_are_missing_and_a_slow_decode_is_said() {
    // 10 s at 20 µs, sampling dead after an overflow at 0.7 s; the decode thread took 40 µs
    // per sample (numbers of an H100 run).
    let mut capture = PmCapture { hw_buffer_overflows: 2, ..Default::default() };
    let timing = DrainTiming {
        drains: 4,
        decode: Duration::from_millis(810),
        handoff: Duration::from_millis(590),
        samples: 35_000,
        longest: Duration::from_millis(1190),
        threads: 1,
        ..Default::default()
    };
    let t0 = 1_000_000_000u64;
    account_for_the_end(&mut capture, Some(t0 + 700_000_000), Some(t0 + 10_000_000_000), Some(20_000), &timing);
    assert_eq!(capture.missing_samples, 465_000);
    assert!(capture.errors[0].contains("no samples for the last 9300.0 ms"), "{:?}", capture.errors);
    assert!(capture.errors[0].contains("after the hardware buffer overflowed"), "{:?}", capture.errors);
    assert!(
        capture.errors[1].contains("decoding took 40.0 us per sample, longer than the 20.0 us interval"),
        "{:?}",
        capture.errors
    );
    assert!(capture.errors[1].contains("an interval of 60 us or more keeps up"), "{:?}", capture.errors);
    // Evaluation as the bound: 4 threads at 100 µs per sample each.
    let mut capture = PmCapture::default();
    let slow_pool = DrainTiming {
        decode: Duration::from_millis(350),
        handoff: Duration::ZERO,
        evaluate: Duration::from_millis(14_000),
        threads: 4,
        ..timing
    };
    account_for_the_end(&mut capture, None, None, Some(20_000), &slow_pool);
    assert!(
        capture.errors[0].starts_with("evaluating took 100.0 us per sample on each of 4 thread(s)"),
        "{:?}",
        capture.errors
    );
    // A run that kept up: nothing to say.
    let mut capture = PmCapture::default();
    let timing =
        DrainTiming { samples: 105_000, decode: Duration::from_millis(5325), handoff: Duration::ZERO, ..timing };
    account_for_the_end(&mut capture, Some(t0 + 9_999_950_000), Some(t0 + 10_000_000_000), Some(100_000), &timing);
    assert_eq!((capture.missing_samples, capture.errors.len()), (0, 0), "{:?}", capture.errors);
}

#[test]
fn samples_are_kept_and_gaps_counted() {
    let mut capture = PmCapture::default();
    let mut keeper = SampleKeeper { interval_ns: Some(20_000), last_end: None };
    // The over-long first sample CUPTI returns (951 ms), then a zero-length one.
    keeper.keep(&mut capture, 1_000, 951_001_000, vec![1.0]);
    keeper.keep(&mut capture, 951_001_000, 951_001_000, vec![1.0]);
    keeper.keep(&mut capture, 951_001_000, 951_021_000, vec![2.0]);
    keeper.keep(&mut capture, 951_021_000, 951_041_001, vec![f64::NAN]);
    // Three intervals lost.
    keeper.keep(&mut capture, 951_101_000, 951_121_000, vec![3.0]);
    assert_eq!(capture.empty_samples, 2);
    assert_eq!(capture.missing_samples, 3);
    assert_eq!(capture.samples.len(), 3);
    assert_eq!(capture.samples[1].values, vec![None], "NaN is not a value");
}

#[test]
fn a_drain_that_is_behind_returns_to_look_at_the_stop_request() {
    // The sampler keeps the image full forever (it samples faster than CUPTI decodes).
    let source = Scripted {
        drains: (0..50).map(|i| Ok((FULL, samples(1_000_000 + i * 100_000, 5)))).collect(),
        ..Default::default()
    };
    let log = Arc::clone(&source.log);
    let (mut d, capture) = decoder(source, 2);
    d.step(false);
    let decodes = |log: &Arc<Mutex<Vec<String>>>| log.lock().iter().filter(|l| *l == "decode").count();
    assert_eq!(decodes(&log), MAX_IMAGES_PER_DRAIN as usize);
    // The last drain decodes what is left (the script's 46 full images, then its end).
    d.step(true);
    d.finish();
    assert_eq!(decodes(&log), 51);
    assert_eq!(capture.lock().samples.len(), 250);
}

#[test]
fn images_are_handed_over_half_full_and_the_rest_at_the_stop() {
    // An image of 10 samples: drains of 3 are held until it is half full (6), then handed
    // over; the last 3 go with the stop.
    let source = Scripted {
        drains: (0..3).map(|i| Ok((DONE, samples(1_000_000 + i * 60_000, 3)))).collect(),
        capacity: 10,
        ..Default::default()
    };
    let log = Arc::clone(&source.log);
    let (mut d, capture) = decoder(source, 2);
    assert_eq!(d.step(false), None);
    assert_eq!(*log.lock(), ["decode"], "3 of 10: held");
    assert_eq!(d.step(false), None);
    assert_eq!(*log.lock(), ["decode", "decode", "new image"], "6 of 10: handed over");
    assert_eq!(d.step(true), None);
    let (_, timing) = d.finish();
    assert_eq!(*log.lock(), ["decode", "decode", "new image", "stop", "decode", "new image"]);
    let capture = capture.lock();
    let want: Vec<u64> = (0..9).map(|i| 1_000_000 + i * 20_000).collect();
    assert_eq!(starts(&capture), want);
    assert!(capture.samples.iter().all(|s| s.values == vec![Some(s.start_ns as f64)]));
    assert_eq!((timing.samples, timing.images, capture.missing_samples), (9, 2, 0));
}

#[test]
fn a_full_image_is_counted_handed_over_and_the_next_images_grow() {
    let source = Scripted {
        drains: VecDeque::from([
            Ok((DONE, samples(1_000_000, 2))),
            Ok((FULL, samples(1_040_000, 2))),
            Ok((DONE, samples(1_080_000, 1))),
        ]),
        capacity: 4,
        ..Default::default()
    };
    let log = Arc::clone(&source.log);
    let (mut d, capture) = decoder(source, 1);
    assert_eq!(d.step(false), None);
    assert_eq!(d.step(false), None);
    assert_eq!(d.step(true), None);
    d.finish();
    // 2 of 4 is half full already; the full decode grows the source before its image goes;
    // 1 of 8 is held until the stop.
    assert_eq!(
        *log.lock(),
        ["decode", "new image", "decode", "grow", "new image", "decode", "stop", "decode", "reuse"]
    );
    let capture = capture.lock();
    assert_eq!(starts(&capture).len(), 5);
    assert_eq!((capture.counter_data_full, capture.missing_samples), (1, 0));
}

#[test]
fn samples_held_in_the_image_survive_a_failed_decode() {
    let source = Scripted {
        drains: VecDeque::from([
            Ok((DONE, samples(1_000_000, 2))),
            Err("CUPTI_ERROR_UNKNOWN"),
            Ok((DONE, samples(1_040_000, 2))),
        ]),
        capacity: 100,
        ..Default::default()
    };
    let log = Arc::clone(&source.log);
    let (mut d, capture) = decoder(source, 1);
    for last in [false, false, false, true] {
        assert_eq!(d.step(last), None);
    }
    d.finish();
    // The failed decode hands the 2 held samples over with their image, instead of a reset.
    assert!(!log.lock().iter().any(|l| l == "reset"), "{:?}", log.lock());
    let capture = capture.lock();
    let want: Vec<u64> = (0..4).map(|i| 1_000_000 + i * 20_000).collect();
    assert_eq!(starts(&capture), want);
    assert_eq!(capture.errors, ["decoding: CUPTI_ERROR_UNKNOWN (decoding goes on)"]);
}
