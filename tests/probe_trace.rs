//! probe_trace.json (`gmprof run --probe block_sched`): every launch's blocks on one clock
//! (trace.json's CUPTI clock, placed by the device timers' fit), each inside its kernel's
//! slice, blocks resident together on one SM on lanes of that SM, and the file accepted by
//! `gmprof check-trace`.
//!
//! The session is H100-like: %globaltimer counts Unix ns while CUPTI's clock counts from
//! another epoch; three launches, two of them concurrent on two streams, four blocks
//! resident at once per SM, and a second wave of blocks.

use gmprof::correlate::Correlator;
use gmprof::device_timers::{BlockRun, TimedLaunch};
use gmprof::model::{KernelActivity, MetricSet, ProfilingMode};
use gmprof::report::probe_trace::{globaltimer_probe_trace, ProbeArgs, ProbeEvent, ProbeTrace, BLOCK_SCHED_REGION};
use gmprof::report::probes::ProbedLaunch;
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;
use gmprof::trace_check::{check_trace_file, check_trace_json, CheckOptions, Rule};
use serde_json::Value;

#[path = "common/kernels.rs"]
mod kernels;
use kernels::{kernel_activity, launch_record};

/// The CUPTI clock at the push of range `step` (ns).
const T0: u64 = 1_234_567_890_000;
/// %globaltimer at that instant: Unix ns (November 2025), another epoch than CUPTI's.
const GT0: u64 = 1_763_912_345_678_901_234;

/// %globaltimer of the instant `rel` ns after `T0`.
fn gt(rel: u64) -> u64 {
    GT0 + rel
}

/// (correlation id, kernel, stream, start, end): ns after T0. Launches 2 and 3 run at once.
const KERNELS: [(u32, &str, u32, u64, u64); 3] = [
    (1, "layernorm_forward_kernel3", 7, 10_000, 40_000),
    (2, "matmul_forward_kernel4", 7, 41_000, 91_000),
    (3, "softmax_forward_kernel5", 13, 60_000, 80_000),
];

/// A block on SM `sm` from `start` to `end` ns after T0, stamped on %globaltimer.
fn run(block: u32, sm: u16, start: u64, end: u64) -> BlockRun {
    BlockRun { block, sm, start_ns: gt(start), end_ns: gt(end), entries: 1 }
}

/// Each launch's blocks, on SMs 0 and 1 (block b on SM b % 2).
fn blocks(id: u32) -> Vec<BlockRun> {
    match id {
        // Four resident per SM, each starting 300 ns after the one before and ending 100 ns
        // after it: partial overlaps. Block 0 starts with the kernel.
        1 => (0..8)
            .map(|b| {
                let slot = u64::from(b / 2);
                run(b, (b % 2) as u16, 10_000 + slot * 300, 39_500 + slot * 100)
            })
            .collect(),
        // Two waves of four per SM; each block of the second wave starts when its
        // predecessor in the first ends.
        2 => (0..16)
            .map(|b| {
                let (wave, slot) = (u64::from(b / 2) / 4, u64::from(b / 2) % 4);
                let start = if wave == 0 { 41_500 } else { 65_000 } + slot * 250;
                let end = if wave == 0 { 65_000 } else { 90_000 } + slot * 250;
                run(b, (b % 2) as u16, start, end)
            })
            .collect(),
        // Two per SM among launch 2's blocks; block 3 ends with the kernel.
        3 => (0..4)
            .map(|b| {
                let k = u64::from(b / 2);
                run(b, (b % 2) as u16, 60_400 + k * 100, 79_900 + k * 100)
            })
            .collect(),
        // A launch this session did not profile.
        _ => vec![run(0, 5, 200_000, 201_000)],
    }
}

fn timed(id: u32, kernel: &str) -> TimedLaunch {
    let runs = blocks(id);
    TimedLaunch::from_blocks(Some(id), kernel, BLOCK_SCHED_REGION, runs.len() as u32, &runs)
}

fn probed(id: u32, kernel: &str) -> ProbedLaunch {
    let runs = blocks(id);
    ProbedLaunch {
        correlation_id: id,
        kernel: kernel.into(),
        blocks: runs.len() as u64,
        threads: 256,
        status: "probed".into(),
        blocks_once: Some(runs.len() as u64),
        blocks_missing: Some(0),
        blocks_repeated: Some(0),
        first_block_start_ns: runs.iter().map(|r| r.start_ns).min(),
        last_block_end_ns: runs.iter().map(|r| r.end_ns).max(),
        ..ProbedLaunch::default()
    }
}

/// The probe launches: the three kernels' and launch 99's.
fn launches() -> Vec<(u32, &'static str)> {
    KERNELS.iter().map(|k| (k.0, k.1)).chain([(99, "not_profiled")]).collect()
}

/// A trace-mode report of the three kernels (range `step` from T0 to T0 + 95 µs) with the
/// probe launches joined as `gmprof run` joins them.
fn report() -> Report {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    tree.push("step", 1, T0);
    for &(id, name, stream, start, end) in &KERNELS {
        correlator.add_launch(launch_record(&tree, 1, id, id - 1));
        correlator.add_activity(KernelActivity {
            grid: [blocks(id).len() as i32, 1, 1],
            block: [256, 1, 1],
            stream_id: stream,
            ..kernel_activity(id, name, T0 + start, T0 + end)
        });
    }
    tree.pop(1, T0 + 95_000).unwrap();
    let mut r = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, correlator);
    r.attach_probes(launches().into_iter().map(|(id, k)| probed(id, k)).collect());
    r.attach_device_timers(launches().into_iter().map(|(id, k)| timed(id, k)).collect());
    r
}

fn checked(trace: &ProbeTrace) -> Value {
    let text = serde_json::to_string(trace).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);
    serde_json::from_str(&text).unwrap()
}

fn id_of(e: &ProbeEvent) -> Option<u32> {
    match e.args {
        ProbeArgs::Block { correlation_id, .. } | ProbeArgs::Kernel { correlation_id, .. } => correlation_id,
    }
}

fn is_block(e: &ProbeEvent) -> bool {
    matches!(e.args, ProbeArgs::Block { .. })
}

/// Launch `id`'s block events.
fn blocks_of(t: &ProbeTrace, id: u32) -> Vec<&ProbeEvent> {
    t.trace_events.iter().filter(|e| is_block(e) && id_of(e) == Some(id)).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn every_block_is_on_the_cupti_clock_inside_its_kernel_and_check_trace_accepts_the_file() {
    let r = report();
    let t = r.to_probe_trace();
    checked(&t);
    let info = &t.other_data;
    assert_eq!((info.clock, info.origin_ns), ("cupti", T0));
    // Launch 99 has no kernel row: no place on the CUPTI clock.
    assert_eq!((info.launches, info.launches_not_placed, info.blocks), (4, 1, 28));
    assert!(blocks_of(&t, 99).is_empty());
    // The kernels, at their activity times, with the offset the fit found: exactly
    // CUPTI − globaltimer (launch 1's first block starts with its kernel and launch 3's last
    // ends with its kernel, so one offset only fits all three).
    for &(id, name, stream, start, end) in &KERNELS {
        let k: Vec<&ProbeEvent> = t.trace_events.iter().filter(|e| !is_block(e) && id_of(e) == Some(id)).collect();
        assert_eq!(k.len(), 1);
        assert_eq!((k[0].name.as_str(), k[0].tid.clone()), (name, format!("stream {stream}")));
        assert!(close(k[0].ts, start as f64 / 1000.0) && close(k[0].dur, (end - start) as f64 / 1000.0), "{:?}", k[0]);
        let ProbeArgs::Kernel { clock_offset_ns, clock_slack_ns, clock_run_launches, .. } = k[0].args else {
            panic!("{:?}", k[0])
        };
        assert_eq!((clock_offset_ns, clock_slack_ns, clock_run_launches), (T0 as i64 - GT0 as i64, 0, 3));
        // Every block at its %globaltimer stamp moved to the CUPTI clock, inside the kernel.
        let ours = blocks_of(&t, id);
        assert_eq!(ours.len(), blocks(id).len());
        for e in ours {
            let ProbeArgs::Block { block, .. } = e.args else { panic!("{e:?}") };
            let b = blocks(id)[block as usize];
            assert_eq!(e.name, format!("{name} block {block}"));
            assert_eq!(e.pid, "gmprof probes: blocks per SM");
            assert!(close(e.ts, (b.start_ns - GT0) as f64 / 1000.0), "{e:?} {b:?}");
            assert!(close(e.dur, (b.end_ns - b.start_ns) as f64 / 1000.0), "{e:?}");
            assert!(e.ts >= start as f64 / 1000.0 - 1e-9 && e.ts + e.dur <= end as f64 / 1000.0 + 1e-9, "{e:?}");
        }
    }
}

#[test]
fn blocks_are_where_trace_json_draws_them() {
    let r = report();
    let t = r.to_probe_trace();
    let main: Value = serde_json::to_value(r.to_chrome_trace()).unwrap();
    assert_eq!(main["otherData"]["origin_cupti_ns"], T0);
    assert_eq!(main["otherData"]["device_timers"]["offset_ns"], T0 as i64 - GT0 as i64);
    let regions: Vec<&Value> =
        main["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == BLOCK_SCHED_REGION).collect();
    assert_eq!(regions.len(), 28);
    for region in regions {
        let (id, block) =
            (region["args"]["correlation_id"].as_u64().unwrap(), region["args"]["block"].as_u64().unwrap());
        let e = t
            .trace_events
            .iter()
            .find(|e| matches!(e.args, ProbeArgs::Block { correlation_id: Some(c), block: b } if u64::from(c) == id && u64::from(b) == block))
            .unwrap();
        assert_eq!((e.ts, e.dur), (region["ts"].as_f64().unwrap(), region["dur"].as_f64().unwrap()), "{e:?} {region}");
    }
}

#[test]
fn launches_are_ordered_like_their_kernels() {
    // Each launch's blocks used to start at ts 0 (a per-launch origin). Now launch 2's blocks
    // all start after launch 1's have ended, as launch 2's kernel starts after launch 1's,
    // and launch 3's start 19 µs into launch 2's.
    let t = report().to_probe_trace();
    let first = |id| blocks_of(&t, id).iter().map(|e| e.ts).fold(f64::INFINITY, f64::min);
    let last_end = |id| blocks_of(&t, id).iter().map(|e| e.ts + e.dur).fold(0.0, f64::max);
    assert!(close(first(1), 10.0) && close(last_end(1), 39.8), "{} {}", first(1), last_end(1));
    assert!(close(first(2), 41.5) && close(last_end(2), 90.75), "{} {}", first(2), last_end(2));
    assert!(close(first(3), 60.4) && close(last_end(3), 80.0), "{} {}", first(3), last_end(3));
    assert!(first(2) > last_end(1) && first(3) > first(2));
}

#[test]
fn blocks_resident_together_take_lanes_of_their_sm() {
    let t = report().to_probe_trace();
    let tid = |id: u32, block: u32| {
        t.trace_events
            .iter()
            .find(|e| matches!(e.args, ProbeArgs::Block { correlation_id: Some(c), block: b } if c == id && b == block))
            .map(|e| e.tid.clone())
            .unwrap()
    };
    // Launch 1 on SM 0: blocks 0, 2, 4, 6 overlap without nesting, one lane each.
    assert_eq!(tid(1, 0), "SM 000");
    assert_eq!(tid(1, 2), "SM 000 · overlapped");
    assert_eq!(tid(1, 6), "SM 000 · overlapped 3");
    // Launch 2's second wave reuses the lanes its first wave leaves; launch 3's blocks,
    // resident among them, take two more.
    assert_eq!((tid(2, 0), tid(2, 8)), ("SM 000".to_owned(), "SM 000".to_owned()));
    assert_eq!(tid(2, 15), "SM 001 · overlapped 3");
    assert_eq!((tid(3, 0), tid(3, 3)), ("SM 000 · overlapped 4".to_owned(), "SM 001 · overlapped 5".to_owned()));
    // Per SM: 3 of launch 1, 3 + 3 of launch 2 and 2 of launch 3 left lane 0.
    assert_eq!(t.other_data.overlap_lane_events, 22);

    // The same blocks on one track per SM, as before: check-trace rejects them.
    let mut flat = t.clone();
    for e in &mut flat.trace_events {
        e.tid = e.tid.split(" · ").next().unwrap().to_owned();
    }
    flat.trace_events.sort_by(|a, b| a.tid.cmp(&b.tid).then(a.ts.total_cmp(&b.ts)));
    let check = check_trace_json(&serde_json::to_string(&flat).unwrap(), &CheckOptions::default());
    assert!(check.count(Rule::PartialOverlap) > 0, "{:#?}", check.violations);
}

#[test]
fn without_a_report_every_launch_shares_one_globaltimer_clock() {
    let launches: Vec<TimedLaunch> = launches().into_iter().map(|(id, k)| timed(id, k)).collect();
    let t = globaltimer_probe_trace(&launches);
    checked(&t);
    let info = &t.other_data;
    assert_eq!((info.clock, info.origin_ns, info.launches, info.blocks), ("globaltimer", gt(10_000), 4, 29));
    assert_eq!(info.overlap_lane_events, 22);
    assert!(t.trace_events.iter().all(is_block), "no kernel slices without CUPTI times");
    let first = |id| blocks_of(&t, id).iter().map(|e| e.ts).fold(f64::INFINITY, f64::min);
    // µs after launch 1's first block, on %globaltimer.
    assert!(close(first(1), 0.0) && close(first(2), 31.5) && close(first(3), 50.4) && close(first(99), 190.0));
}

#[test]
fn write_all_writes_the_probe_trace_beside_trace_json() {
    let r = report();
    let dir = tempfile::tempdir().unwrap();
    r.write_all(dir.path()).unwrap();
    let path = dir.path().join("probe_trace.json");
    let check = check_trace_file(&path, &CheckOptions::default()).unwrap();
    assert!(check.is_ok(), "{:#?}", check.violations);
    assert_eq!(check.events, 28 + 3);
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(back["otherData"]["origin_ns"], T0);
    let block =
        back["traceEvents"].as_array().unwrap().iter().find(|e| e["name"] == "matmul_forward_kernel4 block 9").unwrap();
    assert_eq!(block["tid"], "SM 001");
    assert_eq!(block["args"], serde_json::json!({"correlation_id": 2, "block": 9}));
    // A session that probed nothing writes none.
    let plain = tempfile::tempdir().unwrap();
    let mut r = r;
    r.probes.clear();
    r.write_all(plain.path()).unwrap();
    assert!(!plain.path().join("probe_trace.json").exists());
}
