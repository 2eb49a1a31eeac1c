//! Benchmark of gmprof's own work per kernel launch in trace mode: what runs inside the
//! program's CUDA call, from the hub's routing to the launch record, with no GPU and no
//! CUPTI (a stand-in session, `gmprof::profiler::harness`).
//!
//! The launch-bound loop of BENCHMARKS.md costs gmprof more than the raw CUPTI floor; this
//! measures the part that is gmprof's code. `driver` is one `cuLaunchKernel` (an enter and
//! an exit callback, as cudarc launches); `runtime` is `cudaLaunchKernel` around it (four
//! callbacks, as `<<<>>>` and PyTorch launch). Launches run inside one open range, and the
//! session's records grow as in a real run (a fresh session every 200 000 launches).
//! `driver_timed` and `runtime_timed` are the same in a session that times API calls, as one
//! writing a Kineto `trace.json` does (`ProfilerBuilder::time_api_calls`): the exit callback
//! reaches the session, which stamps the call's return and files it under its lock.
//!
//! Run with `cargo bench --features bench-internals --bench launch_path`; criterion reports
//! the time per launch.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gmprof::profiler::harness::LaunchHarness;

const SESSION_LAUNCHES: u64 = 200_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("launch_path");
    group.throughput(Throughput::Elements(1));
    for (label, runtime, timed) in [
        ("driver", false, false),
        ("runtime", true, false),
        ("driver_timed", false, true),
        ("runtime_timed", true, true),
    ] {
        let session = || if timed { LaunchHarness::trace_timed() } else { LaunchHarness::trace() };
        let mut harness = session().expect("stand-in session");
        harness.push_range("step").expect("push");
        let mut launched = 0u64;
        group.bench_function(label, |b| {
            b.iter(|| {
                if launched == SESSION_LAUNCHES {
                    drop(std::mem::replace(&mut harness, session().expect("stand-in session")));
                    harness.push_range("step").expect("push");
                    launched = 0;
                }
                harness.launch(runtime);
                launched += 1;
            })
        });
        let (launches, aliases) = harness.recorded();
        assert_eq!(launches as u64, launched, "every launch is recorded once");
        assert_eq!(aliases as u64, if runtime { launched } else { 0 }, "one alias per runtime launch");
        assert_eq!(harness.stamped_calls() as u64, if timed { launched } else { 0 }, "a return stamp per timed launch");
        assert_eq!(harness.current_range().as_deref(), Some("step"));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
