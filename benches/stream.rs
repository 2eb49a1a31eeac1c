//! The streamed outputs' CPU benchmark (issue 42): a training run of 10 M kernels (by
//! default) replayed through the seam a running session drains through: the session's
//! correlator and range tree as capture fills them, then every few steps
//! `StreamPipeline::drain` (complete records out, joined, range instances completed, online
//! aggregates and the steps table, Parquet part files written). No GPU, no CUPTI.
//!
//! It prints the kernels per second of the drains (correlate → aggregate → writers; the
//! synthetic records' making is timed apart), the process's resident memory sampled at every
//! drain (min and max after the first 10 % of the run, to show it flat), and the bytes per
//! kernel on disk.
//!
//! Run with `cargo bench --bench stream`; `GMPROF_BENCH_KERNELS=1000000` for a shorter run,
//! `GMPROF_BENCH_OUT=DIR` to keep the part files (default: a temporary directory),
//! `GMPROF_BENCH_DRAIN_STEPS=N` to drain every N steps (default 25),
//! `GMPROF_BENCH_LIVE=1` to feed live metrics too (and encode them once per drain).

#[path = "../tests/common/stream_session.rs"]
mod stream_session;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use gmprof::correlate::Correlator;
use gmprof::model::{MetricSet, ProfilingMode};
use gmprof::report::stream::{StreamMeta, StreamPipeline, StreamSettings, StreamWriter};
use gmprof::session::SessionTree;
use stream_session::{Player, Shape};

/// The system allocator, counting the bytes live: heap growth apart from what the allocator
/// keeps (RSS that grows while the live bytes stay flat is the allocator's, not gmprof's).
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed to `System` unchanged; the counter only adds and subtracts
// the sizes of the blocks `System` handed out and took back.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc` and `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes live now.
fn live() -> u64 {
    LIVE.load(Ordering::Relaxed).max(0) as u64
}

/// CPU time of the calling thread: the drains' own time, whatever else the machine runs.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for clock_gettime to fill; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Resident memory now, bytes (Linux; 0 elsewhere).
fn rss() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .unwrap_or(0);
    pages * 4096
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        total += if path.is_dir() { dir_bytes(&path) } else { entry.metadata().map_or(0, |m| m.len()) };
    }
    total
}

fn main() {
    let kernels: u64 = std::env::var("GMPROF_BENCH_KERNELS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000_000);
    // llm.c's GPT-2 shape: about 400 kernels per step in 12 layers.
    // GMPROF_BENCH_SHAPE=llmc-ranges: llm.c's GPT-2 as an H200 run measured it (about 500
    // kernels and 400 ranges per step: 24 layer ranges, fwd and bwd, each with 16 function
    // ranges); the default has 12 layer ranges and no ranges inside them.
    let ranges = std::env::var("GMPROF_BENCH_SHAPE").is_ok_and(|v| v == "llmc-ranges");
    let shape = if ranges {
        Shape { steps: 0, layers: 24, kernels_per_layer: 21, ops_per_layer: 16 }
    } else {
        Shape { steps: 0, layers: 12, kernels_per_layer: 33, ops_per_layer: 0 }
    };
    let shape = Shape { steps: kernels.div_ceil(shape.kernels_per_step()), ..shape };
    let temp = tempfile::tempdir().expect("a temporary directory");
    let out = std::env::var_os("GMPROF_BENCH_OUT").map_or_else(|| temp.path().to_owned(), Into::into);
    let metrics = MetricSet::default();
    let mode = ProfilingMode::Trace;
    // GMPROF_BENCH_LIVE=1: the drains also feed live metrics (issue 45), encoded once per
    // drain as a scrape would be (on the drains' thread here, so its time counts in theirs).
    let live_metrics = std::env::var("GMPROF_BENCH_LIVE")
        .is_ok_and(|v| v == "1")
        .then(|| gmprof::report::live::LiveMetrics::new(&gmprof::report::live::ProcessLabels::default()));
    let feed = live_metrics.as_ref().map(|l| l.feed(Some(0)));
    let settings = StreamSettings { live: feed, ..StreamSettings::default() };
    let writer = StreamWriter::create(&out, &StreamMeta::new(mode, Vec::new()), settings).expect("streamed tables");
    let pipeline = StreamPipeline::new(writer, &metrics, mode);
    let (mut tree, mut correlator) = (SessionTree::new(), Correlator::new());
    let mut player = Player::new(shape);

    // A drain every 25 steps: about 10 000 kernels, a tenth of a second of a fast run.
    // GMPROF_BENCH_DRAIN_STEPS=127: llm.c's drains on an H200 (2 s of 14 ms steps).
    let drain_every: u64 =
        std::env::var("GMPROF_BENCH_DRAIN_STEPS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(25);
    // What the injected library's stream thread does after each drain (on by default there).
    let trim = std::env::var("GMPROF_BENCH_TRIM").map_or(true, |v| v != "0");
    let (mut making, mut draining, mut draining_cpu) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut taking = Duration::ZERO;
    // The longest single hold of the session's lock: the take, or one batch of removals (the
    // profiler removes at most 4 096 completed ranges a hold, `REMOVALS_PER_HOLD`).
    let (mut longest_take, mut longest_removal) = (Duration::ZERO, Duration::ZERO);
    let mut samples: Vec<(u64, u64, u64)> = Vec::new();
    let started = Instant::now();
    for step in 0..shape.steps {
        let t = Instant::now();
        player.step(&mut tree, &mut correlator, step);
        making += t.elapsed();
        if step % drain_every == drain_every - 1 {
            let (t, cpu) = (Instant::now(), thread_cpu());
            {
                // The two halves apart: what a running program's launches would wait for.
                let handle = pipeline.handle();
                let mut guard = handle.lock();
                let core = guard.as_mut().expect("streaming");
                let t = Instant::now();
                let input = core.take(&mut correlator, &mut tree, None, None);
                taking += t.elapsed();
                longest_take = longest_take.max(t.elapsed());
                core.process(input, &metrics, Instant::now()).expect("drain");
                loop {
                    let t = Instant::now();
                    let (removed, more) = core.remove_completed_up_to(&mut tree, 4096);
                    taking += t.elapsed();
                    longest_removal = longest_removal.max(t.elapsed());
                    // Freed with the session let go, as the profiler does.
                    drop(removed);
                    if !more {
                        break;
                    }
                }
            }
            if trim {
                gmprof::report::stream::release_free_memory();
            }
            if let Some(metrics) = &live_metrics {
                std::hint::black_box(metrics.encode().expect("encoded"));
            }
            draining += t.elapsed();
            draining_cpu += thread_cpu() - cpu;
            samples.push((player.launched, rss(), live()));
        }
    }
    player.flush(&mut correlator);
    let (t, cpu) = (Instant::now(), thread_cpu());
    let end = pipeline.finish(correlator, &mut tree, &metrics, player.now(), None, None).expect("finish");
    let finish = t.elapsed();
    draining += finish;
    draining_cpu += thread_cpu() - cpu;
    let wall = started.elapsed();

    let heard = player.launched;
    assert_eq!(end.counts.kernel_rows, heard, "every kernel streamed");
    assert_eq!(end.written.table("kernels").map(|p| p.rows), Some(heard));
    assert_eq!(end.written.steps, shape.steps);
    let steady: Vec<u64> = samples.iter().filter(|(k, _, _)| *k >= heard / 10).map(|(_, r, _)| *r).collect();
    let (lo, hi) = (steady.iter().min().copied().unwrap_or(0), steady.iter().max().copied().unwrap_or(0));
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let bytes = dir_bytes(&out);
    println!(
        "stream bench: {heard} kernels, {} steps, {} drains, {} kernel parts",
        shape.steps,
        samples.len(),
        end.written.table("kernels").map_or(0, |p| p.parts)
    );
    println!(
        "  drains (correlate -> aggregate -> writers): {:.2} s = {:.2} M kernels/s; finish {:.0} ms",
        draining.as_secs_f64(),
        heard as f64 / draining.as_secs_f64() / 1e6,
        finish.as_secs_f64() * 1e3
    );
    println!(
        "  the drains' CPU time (one thread): {:.2} s = {:.2} M kernels/s per core",
        draining_cpu.as_secs_f64(),
        heard as f64 / draining_cpu.as_secs_f64() / 1e6
    );
    println!("  making the records: {:.2} s; wall {:.2} s", making.as_secs_f64(), wall.as_secs_f64());
    println!(
        "  under the session's lock (take, remove completed ranges): {:.2} s = {:.1} % of the drains, {:.1} ms a drain",
        taking.as_secs_f64(),
        100.0 * taking.as_secs_f64() / draining.as_secs_f64(),
        taking.as_secs_f64() * 1e3 / samples.len().max(1) as f64
    );
    println!(
        "  longest single hold: take {:.1} ms, a batch of at most 4 096 removals {:.1} ms",
        longest_take.as_secs_f64() * 1e3,
        longest_removal.as_secs_f64() * 1e3
    );
    println!(
        "  RSS after the first 10 %: min {:.1} MiB, max {:.1} MiB (first sample {:.1} MiB, last {:.1} MiB)",
        mib(lo),
        mib(hi),
        mib(samples.first().map_or(0, |s| s.1)),
        mib(samples.last().map_or(0, |s| s.1))
    );
    println!(
        "  on disk: {:.1} MiB, {:.1} bytes per kernel (all streamed tables)",
        mib(bytes),
        bytes as f64 / heard as f64
    );
    for (i, (k, r, l)) in samples.iter().enumerate() {
        if i % (samples.len() / 10).max(1) == 0 {
            println!("    at {k:>9} kernels: RSS {:.1} MiB, heap live {:.1} MiB", mib(*r), mib(*l));
        }
    }
}
