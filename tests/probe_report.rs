//! Probe results in the report: probed launches joined to their kernel rows (kernels.csv's
//! probe columns with the kernel's variant, golden), probe_launches.csv and probes.csv with
//! ranges and variants, the blocks placed
//! on the CUPTI clock by the device timers' fit, and block_sched's blocks on the timeline
//! inside their kernel's slice.
//!
//! Rewrite the golden file with `GMPROF_BLESS=1 cargo test --test probe_report`.

use gmprof::correlate::Correlator;
use gmprof::device_timers::{BlockRun, TimedLaunch};
use gmprof::model::{KernelActivity, LaunchApi, LaunchRecord, MetricSet, ProfilingMode};
use gmprof::report::probes::{write_probe_csvs, ProbeTotal, ProbedLaunch};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;
use gmprof::trace_check::{check_trace_json, CheckOptions};
use serde_json::Value;

#[path = "common/golden.rs"]
mod golden;
#[path = "common/kernels.rs"]
mod kernels;
use golden::check_golden;
use kernels::{kernel_activity, launch_record};

const T0: u64 = 1_700_000_000_000;
/// %globaltimer runs this far ahead of the CUPTI clock.
const AHEAD: u64 = 5_000_321;

/// Kernels (trace mode): 1 `vector_add` 20 µs and 2 `triton_k` 30 µs in range `step`, 3
/// `vector_add` 10 µs at the root.
fn report() -> Report {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    tree.push("step", 1, T0);
    let kernels = [("vector_add", 10_000u64, 20_000u64), ("triton_k", 40_000, 30_000), ("vector_add", 100_000, 10_000)];
    for (i, (name, start, dur)) in kernels.iter().enumerate() {
        let id = i as u32 + 1;
        if id == 3 {
            tree.pop(1, T0 + 80_000).unwrap();
        }
        correlator.add_launch(LaunchRecord {
            api: LaunchApi::Driver,
            api_name: "cuLaunchKernel".into(),
            ..launch_record(&tree, 1, id, id - 1)
        });
        correlator.add_activity(KernelActivity {
            grid: [4, 1, 1],
            block: [128, 1, 1],
            ..kernel_activity(id, name, T0 + start, T0 + start + dur)
        });
    }
    let mut r = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, correlator);
    r.meta.gmprof_version = "GOLDEN".into();
    r
}

/// Four blocks, two per SM (3 and 8), from `from` to `to` ns after the kernel's start at
/// `kernel_start` (CUPTI clock), stamped on %globaltimer.
fn blocks(kernel_start: u64, from: u64, to: u64) -> Vec<BlockRun> {
    (0..4u32)
        .map(|b| BlockRun {
            block: b,
            sm: if b % 2 == 0 { 3 } else { 8 },
            start_ns: T0 + kernel_start + AHEAD + from + u64::from(b / 2) * 10,
            end_ns: T0 + kernel_start + AHEAD + to - u64::from(b / 2) * 10,
            entries: 1,
        })
        .collect()
}

fn probed(id: u32, runs: &[BlockRun], bytes: u64) -> ProbedLaunch {
    let total = |probe: &str, field: &str, total, records| ProbeTotal {
        probe: probe.into(),
        field: field.into(),
        total,
        records,
    };
    ProbedLaunch {
        correlation_id: id,
        kernel: "vector_add".into(),
        blocks: 4,
        threads: 128,
        status: "probed".into(),
        blocks_once: Some(4),
        blocks_missing: Some(0),
        blocks_repeated: Some(0),
        first_block_start_ns: runs.iter().map(|r| r.start_ns).min(),
        last_block_end_ns: runs.iter().map(|r| r.end_ns).max(),
        readback_us: 12.5,
        totals: vec![total("block_sched", "entries", 4, 4), total("gmem_bytes", "ld_bytes", bytes, 16)],
        variant: Some(1),
        ..ProbedLaunch::default()
    }
}

fn with_probes() -> (Report, Vec<TimedLaunch>) {
    let mut r = report();
    let one = blocks(10_000, 300, 19_500);
    // Blocks spanning 10.5 µs of a 10 µs kernel: no offset puts them inside.
    let three = blocks(100_000, 0, 10_500);
    let refused = ProbedLaunch {
        correlation_id: 2,
        kernel: "triton_k".into(),
        blocks: 4,
        threads: 128,
        status: "not probed: the kernel requires .reqntid 256x1x1 and the launch's block is 128x1x1".into(),
        // The second variant of its name in probe_kernels.csv.
        variant: Some(2),
        ..ProbedLaunch::default()
    };
    let mut orphan = probed(99, &one, 8);
    orphan.kernel = "not profiled".into();
    r.attach_probes(vec![probed(1, &one, 1024), refused, probed(3, &three, 512), orphan]);
    let timeline = vec![
        TimedLaunch::from_blocks(Some(1), "vector_add", "block (probe block_sched)", 4, &one),
        TimedLaunch::from_blocks(Some(3), "vector_add", "block (probe block_sched)", 4, &three),
    ];
    (r, timeline)
}

#[test]
fn probed_launches_join_their_kernel_rows_and_ranges() {
    let (r, _) = with_probes();
    let by_id = |id| r.probes.iter().find(|l| l.correlation_id == id).unwrap();
    assert_eq!(by_id(1).range_path.as_deref(), Some("step"));
    assert_eq!(by_id(2).range_path.as_deref(), Some("step"));
    assert_eq!(by_id(3).range_path.as_deref(), Some("<root>"));
    assert_eq!(by_id(99).range_path, None);
    assert!(
        r.meta.warnings.iter().any(|w| w.contains("1 probed launch(es) have no kernel row")),
        "{:?}",
        r.meta.warnings
    );
    let mut csv = Vec::new();
    r.write_kernels_csv_to(&mut csv).unwrap();
    check_golden("kernels_probes.csv", &String::from_utf8(csv).unwrap());
    // Without probes kernels.csv has no probe columns.
    let mut plain = Vec::new();
    report().write_kernels_csv_to(&mut plain).unwrap();
    assert!(!String::from_utf8(plain).unwrap().contains("probe"));
}

#[test]
fn blocks_are_placed_with_the_device_timers_clock_fit() {
    let (r, _) = with_probes();
    let by_id = |id| r.probes.iter().find(|l| l.correlation_id == id).unwrap();
    let one = by_id(1);
    assert_eq!(one.blocks_inside_kernel, Some(true));
    // The offset CUPTI − %globaltimer is −AHEAD, within the fit's slack.
    let (offset, slack) = (one.clock_offset_ns.unwrap(), one.clock_slack_ns.unwrap() as i64);
    assert!((offset + AHEAD as i64).abs() <= slack, "offset {offset} slack {slack}");
    // Launch 1's bracket allows offsets −AHEAD − 300 ..= −AHEAD + 500: 800 ns of slack.
    assert_eq!(slack, 800);
    // Launch 3's blocks span longer than its kernel: no offset fits it (0 launches agree),
    // not inside.
    let three = by_id(3);
    assert_eq!((three.blocks_inside_kernel, three.clock_run_launches), (Some(false), Some(0)));
    assert_eq!(one.clock_run_launches, Some(1));
    assert!(r.meta.warnings.iter().any(|w| w.contains("blocks of 1 launch(es) span longer")), "{:?}", r.meta.warnings);
    // No blocks, or no kernel row: nothing to place.
    assert_eq!((by_id(2).blocks_inside_kernel, by_id(99).blocks_inside_kernel), (None, None));
}

#[test]
fn probe_csvs_carry_ranges_and_placement() {
    let (r, _) = with_probes();
    let dir = tempfile::tempdir().unwrap();
    write_probe_csvs(dir.path(), &r.probes).unwrap();
    let launches = std::fs::read_to_string(dir.path().join("probe_launches.csv")).unwrap();
    let mut lines = launches.lines();
    assert_eq!(
        lines.next().unwrap(),
        "correlation_id,kernel,range_path,blocks,threads,status,blocks_once,blocks_missing,blocks_repeated,\
         first_block_start_ns,last_block_end_ns,blocks_inside_kernel,clock_offset_ns,clock_slack_ns,\
         clock_run_launches,readback_us,variant,source,graph_launches"
    );
    let first = lines.next().unwrap();
    assert!(first.starts_with("1,vector_add,step,4,128,probed,4,0,0,"), "{first}");
    assert!(first.ends_with(",true,-5000221,800,1,12.5,1,,"), "{first}");
    let second = lines.next().unwrap();
    assert!(second.starts_with("2,triton_k,step,4,128,not probed: the kernel requires .reqntid"), "{second}");
    assert!(second.ends_with(",2,,"), "{second}");
    // Per range: the probed launches' totals, the launch without a kernel row left out.
    let ranges = std::fs::read_to_string(dir.path().join("probe_ranges.csv")).unwrap();
    let rows: Vec<&str> = ranges.lines().collect();
    assert_eq!(rows[0], "range_path,probe,field,source,total,launches");
    assert!(rows.contains(&"step,gmem_bytes,ld_bytes,,1024,1"), "{ranges}");
    assert!(!ranges.contains(",8,"), "the launch without a kernel row has no range: {ranges}");
    let totals = std::fs::read_to_string(dir.path().join("probes.csv")).unwrap();
    assert_eq!(
        totals.lines().take(3).collect::<Vec<_>>(),
        vec![
            "correlation_id,kernel,range_path,probe,field,total,records",
            "1,vector_add,step,block_sched,entries,4,4",
            "1,vector_add,step,gmem_bytes,ld_bytes,1024,16"
        ]
    );
    assert!(totals.contains("\n99,not profiled,,gmem_bytes,ld_bytes,8,16\n"), "{totals}");
    // report.json keeps them.
    let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.probes, r.probes);
}

#[test]
fn block_sched_blocks_sit_inside_their_kernel_slice_on_the_timeline() {
    let (mut r, timeline) = with_probes();
    assert!(timeline[0].spans.lanes.each_once());
    r.attach_device_timers(timeline);
    let text = serde_json::to_string(&r.to_chrome_trace()).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let blocks: Vec<&Value> =
        events.iter().filter(|e| e["cat"] == "device_region" && e["args"]["correlation_id"] == 1).collect();
    assert_eq!(blocks.len(), 4);
    let k = events.iter().find(|e| e["cat"] == "kernel" && e["args"]["correlation_id"] == 1).unwrap();
    let (a, b) = (k["ts"].as_f64().unwrap(), k["ts"].as_f64().unwrap() + k["dur"].as_f64().unwrap());
    for e in &blocks {
        assert_eq!(e["name"], "block (probe block_sched)");
        let (s, d) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(s >= a - 1e-3 && s + d <= b + 1e-3, "{e} outside [{a}, {b}]");
    }
    let sms: Vec<u64> = blocks.iter().map(|e| e["args"]["sm"].as_u64().unwrap()).collect();
    assert_eq!(sms.iter().filter(|&&s| s == 3).count(), 2);
    // The blocks' region statistics (regions.csv) are per kernel and SM.
    assert!(r.device_regions.iter().any(|s| s.kernel == "vector_add" && s.region == "block (probe block_sched)"));
}

#[test]
fn a_block_that_never_ran_or_ran_twice_fails_the_lane_check() {
    let mut runs = blocks(0, 0, 100);
    runs[1].entries = 0;
    runs[2].entries = 2;
    let t = TimedLaunch::from_blocks(Some(1), "k", "block", 4, &runs);
    assert_eq!((t.spans.lanes.started, t.spans.lanes.repeated), (3, 1));
    assert!(!t.spans.lanes.each_once());
    assert_eq!(t.spans.spans.len(), 3);
}

#[test]
fn range_totals_sum_nested_ranges_per_source() {
    use gmprof::report::probes::range_totals;
    let launch = |id: u32, path: &str, source: &str, total: u64| ProbedLaunch {
        correlation_id: id,
        kernel: "k".into(),
        range_path: Some(path.into()),
        status: "probed".into(),
        source: Some(source.into()),
        totals: vec![ProbeTotal { probe: "exec_count".into(), field: "instructions".into(), total, records: 9 }],
        ..Default::default()
    };
    let rows = range_totals(&[
        launch(1, "step/forward", "sass-metrics", 100),
        launch(2, "step/forward/attn", "sass-metrics", 10),
        launch(3, "step/backward", "sass-metrics", 200),
        launch(4, "step/backward", "ptx-probe", 7),
    ]);
    let get = |path: &str, source: &str| {
        rows.iter().find(|r| r.range_path == path && r.source == source).map(|r| (r.total, r.launches))
    };
    assert_eq!(get("step", "sass-metrics"), Some((310, 3)));
    assert_eq!(get("step", "ptx-probe"), Some((7, 1)));
    assert_eq!(get("step/forward", "sass-metrics"), Some((110, 2)));
    assert_eq!(get("step/forward/attn", "sass-metrics"), Some((10, 1)));
    assert_eq!(get("step/backward", "sass-metrics"), Some((200, 1)));
    assert_eq!(rows.len(), 6);
    // A field whose launches' totals sum past u64 (block_sched's `end_ns`: %globaltimer
    // values, 1.7e18 each) has no range total; it overflowed before.
    let times = |id: u32, path: &str| ProbedLaunch {
        totals: vec![ProbeTotal {
            probe: "block_sched".into(),
            field: "end_ns".into(),
            total: 1_795_439_539_570_973_741,
            records: 1,
        }],
        ..launch(id, path, "ptx-probe", 0)
    };
    let launches: Vec<ProbedLaunch> = (0..11).map(|i| times(i, "step")).collect();
    assert!(range_totals(&launches).is_empty());
    let rows = range_totals(&launches[..10]);
    assert_eq!(rows.iter().map(|r| (r.total, r.launches)).collect::<Vec<_>>(), [(17_954_395_395_709_737_410, 10)]);
}
