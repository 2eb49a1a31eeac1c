//! In-kernel region timers on the CPU: recorded buffers (tests/data/device_timers/, dumped by
//! examples/c/device_timers.cu on a GPU) decoded, torn and overflowed ones included, and a
//! report with timers: the join, `regions.csv` (golden), `report.json` and the trace tracks.
//!
//! Rewrite the golden file with `GMPROF_BLESS=1 cargo test --test device_timers`.

use std::path::PathBuf;

use gmprof::correlate::Correlator;
use gmprof::device_timers::format::{encode, Kind, LaneMode, HEADER_WORDS, LANE_START};
use gmprof::device_timers::{Scope, TimedLaunch, TrackLayout};
use gmprof::model::{
    ClockPair, ClockSync, KernelActivity, MetricKind, MetricSet, MetricSpec, ProfilingMode, GPU_TIME_METRIC,
};
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

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const CLOCK_START: u64 = 1_700_000_000_000;
/// %globaltimer runs this far ahead of the CUPTI clock in the synthetic capture.
const GT_AHEAD: u64 = 7_000_123;

/// One range `step` with two kernels of 20 µs and 30 µs (trace mode, real times).
fn report() -> Report {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    tree.push("step", 1, CLOCK_START);
    for (id, (name, start, dur)) in
        [("_Z8pipelinePf", 10_000u64, 20_000u64), ("_Z4spinv", 40_000, 30_000)].iter().enumerate()
    {
        let id = id as u32 + 1;
        correlator.add_launch(launch_record(&tree, 1, id, id - 1));
        correlator.add_activity(KernelActivity {
            grid: [2, 1, 1],
            block: [128, 1, 1],
            registers_per_thread: 32,
            ..kernel_activity(id, name, CLOCK_START + start, CLOCK_START + start + dur)
        });
    }
    tree.pop(1, CLOCK_START + 80_000).unwrap();
    let mut info = CaptureInfo::new(ProfilingMode::Trace);
    info.clock = Some(ClockSync {
        start: ClockPair { cupti_ns: CLOCK_START, unix_ns: 1_750_000_000_000_000_000 },
        finish: ClockPair { cupti_ns: CLOCK_START + 90_000, unix_ns: 1_750_000_000_000_090_000 },
    });
    let metrics = MetricSet {
        metrics: vec![MetricSpec {
            name: GPU_TIME_METRIC.into(),
            kind: MetricKind::Counter,
            unit: "nsecond".into(),
            description: "time".into(),
        }],
    };
    let mut report = Report::analyze(info, &metrics, &tree, correlator);
    report.meta.gmprof_version = "GOLDEN".into();
    report
}

/// A launch on 2 blocks, SMs 4 and 9, starting `at` ns into kernel `id` (CUPTI clock).
fn launch(id: u32, kernel_start: u64, regions: &[(u16, u64, u64)]) -> TimedLaunch {
    launch_ahead(id, kernel_start, GT_AHEAD, regions)
}

/// [`launch`] with %globaltimer `ahead` ns ahead of the CUPTI clock.
fn launch_ahead(id: u32, kernel_start: u64, ahead: u64, regions: &[(u16, u64, u64)]) -> TimedLaunch {
    let lanes: Vec<_> = (0..2u32)
        .map(|b| {
            let t0 = CLOCK_START + kernel_start + ahead + 200 + 100 * u64::from(b);
            let sm = if b == 0 { 4 } else { 9 };
            let mut v = vec![(Kind::Lane, LANE_START, b, sm, t0)];
            for &(region, from, to) in regions {
                v.push((Kind::Begin, region, 64 * u32::from(region), sm, t0 + from));
                v.push((Kind::End, region, 0, sm, t0 + to));
            }
            v.push((Kind::Instant, 9, b, sm, t0 + 50));
            v
        })
        .collect();
    let words = encode(64, (2, 1, LaneMode::Block), (1, 1), &lanes);
    let names = ["", "load", "compute", "store"].map(String::from);
    TimedLaunch::from_words(&words, &names, Some(id)).unwrap()
}

fn with_timers() -> Report {
    let mut r = report();
    let mut spin = launch(2, 40_000, &[(1, 100, 25_000)]);
    spin.tracks = TrackLayout::Lane;
    spin.region_names = vec!["".into(), "spin".into()];
    r.attach_device_timers(vec![
        launch(1, 10_000, &[(1, 100, 1_100), (2, 1_200, 15_000), (3, 15_100, 16_000)]),
        spin,
        // Collected without a profiled launch: statistics, no track, a warning.
        launch(99, 0, &[(1, 10, 20)]),
    ]);
    r
}

#[test]
fn the_report_joins_launches_and_pins_regions_csv() {
    let r = with_timers();
    assert_eq!(r.device_timers[0].kernel_name.as_deref(), Some("pipeline(float*)"));
    assert_eq!(r.device_timers[0].range_path.as_deref(), Some("step"));
    assert_eq!(r.device_timers[2].kernel_name, None);
    assert!(r.meta.warnings.iter().any(|w| w.contains("1 launch(es) have no kernel row")), "{:?}", r.meta.warnings);
    let compute =
        r.device_regions.iter().find(|s| s.region == "compute" && s.scope == Scope::All).expect("compute row");
    assert_eq!(
        (compute.count, compute.total_ns, compute.p50_ns, compute.kernel.as_str()),
        (2, 27_600, 13_800, "pipeline(float*)")
    );
    let mut csv = Vec::new();
    r.write_regions_csv_to(&mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    // The metadata lines carry the run's time; pin the counts and the table.
    let table: String = csv
        .lines()
        .filter(|l| !l.starts_with("# ") || l.starts_with("# device timers"))
        .map(|l| format!("{l}\n"))
        .collect();
    check_golden("regions.csv", &table);
    let mut rdr = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(csv.as_bytes());
    let header: Vec<String> = rdr.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, gmprof::report::device_timers::REGIONS_COLUMNS);
    assert_eq!(rdr.records().count(), r.device_regions.len());
}

#[test]
fn report_json_round_trips_the_timers() {
    let r = with_timers();
    let back = Report::from_json(&r.to_json_string().unwrap()).unwrap();
    assert_eq!(back.device_timers, r.device_timers);
    assert_eq!(back.device_regions.len(), r.device_regions.len());
    // A report without timers has no such keys (older readers and goldens unchanged).
    let plain: Value = serde_json::from_str(&report().to_json_string().unwrap()).unwrap();
    assert!(plain.get("device_timers").is_none());
}

#[test]
fn region_tracks_sit_inside_their_kernel_and_pass_the_checker() {
    let r = with_timers();
    let text = serde_json::to_string(&r.to_chrome_trace()).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let info = &trace["otherData"]["device_timers"];
    assert_eq!(
        (info["launches"].as_u64(), info["placed"].as_u64(), info["unplaced"].as_u64()),
        (Some(3), Some(2), Some(1))
    );
    // Both launches' brackets allow offsets around -GT_AHEAD: one fitted offset.
    assert_eq!(info["clock"], "one offset for all launches");
    let offset = info["offset_ns"].as_i64().unwrap();
    let slack = info["slack_ns"].as_u64().unwrap() as i64;
    assert!((offset + GT_AHEAD as i64).abs() <= slack, "offset {offset} slack {slack}");
    let slice = |id: u64| {
        let k = events.iter().find(|e| e["cat"] == "kernel" && e["args"]["correlation_id"] == id).unwrap();
        (k["ts"].as_f64().unwrap(), k["ts"].as_f64().unwrap() + k["dur"].as_f64().unwrap())
    };
    let regions: Vec<&Value> = events.iter().filter(|e| e["cat"] == "device_region").collect();
    // Launch 1: 3 spans and 1 instant per block; launch 2: 1 span and 1 instant per block.
    assert_eq!(regions.len(), 2 * 4 + 2 * 2, "spans and instants of the placed launches");
    for e in &regions {
        let (a, b) = slice(e["args"]["correlation_id"].as_u64().unwrap());
        let (s, d) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap_or(0.0));
        assert!(s >= a - 1e-3 && s + d <= b + 1e-3, "{e} outside [{a}, {b}]");
    }
    // Per-SM tracks for the first launch, per-lane tracks for the second.
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .filter(|n| n.contains("device timers"))
        .collect();
    assert!(names.contains(&"SM 4 (device timers)") && names.contains(&"block 1 lane 0 (device timers)"), "{names:?}");
    // The spin region is 24.9 µs by %globaltimer.
    let spin = regions.iter().find(|e| e["name"] == "spin").unwrap();
    assert_eq!(spin["args"]["duration_ns"], 24_900);
}

#[test]
fn drifting_clocks_get_one_offset_per_run_and_stay_inside_their_kernels() {
    let mut r = report();
    // The clocks moved 50 µs apart between the two launches: no one offset fits both.
    r.attach_device_timers(vec![
        launch(1, 10_000, &[(1, 100, 19_000)]),
        launch_ahead(2, 40_000, GT_AHEAD + 50_000, &[(1, 100, 29_000)]),
    ]);
    let trace: Value = serde_json::from_str(&serde_json::to_string(&r.to_chrome_trace()).unwrap()).unwrap();
    let info = &trace["otherData"]["device_timers"];
    assert_eq!((info["clock"].as_str(), info["runs"].as_u64()), (Some("offsets fitted per run of launches"), Some(2)));
    assert!(info["offset_ns"].is_null());
    let events = trace["traceEvents"].as_array().unwrap();
    for e in events.iter().filter(|e| e["cat"] == "device_region" && e["ph"] == "X") {
        let id = &e["args"]["correlation_id"];
        let k = events.iter().find(|k| k["cat"] == "kernel" && &k["args"]["correlation_id"] == id).unwrap();
        let (a, b) = (k["ts"].as_f64().unwrap(), k["ts"].as_f64().unwrap() + k["dur"].as_f64().unwrap());
        let (s, d) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(s >= a && s + d <= b, "{e} outside [{a}, {b}]");
    }
}

#[test]
fn concurrent_blocks_on_one_sm_get_extra_tracks_not_partial_overlaps() {
    let mut r = report();
    // Four blocks on SM 3, each region starting 1 µs after the previous one began: overlaps.
    let lanes: Vec<_> = (0..4u32)
        .map(|b| {
            let t0 = CLOCK_START + 10_000 + GT_AHEAD + 100 + 1_000 * u64::from(b);
            vec![(Kind::Lane, LANE_START, b, 3, t0), (Kind::Begin, 1, 0, 3, t0 + 10), (Kind::End, 1, 0, 3, t0 + 5_000)]
        })
        .collect();
    r.attach_device_timers(vec![TimedLaunch::from_words(
        &encode(16, (4, 1, LaneMode::Block), (1, 1), &lanes),
        &[],
        Some(1),
    )
    .unwrap()]);
    let text = serde_json::to_string(&r.to_chrome_trace()).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let tids: std::collections::BTreeSet<u64> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "device_region")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(tids.len(), 4, "four overlapping regions need four tracks: {tids:?}");
}

#[test]
fn regions_past_the_tracks_of_an_sm_are_left_out_and_counted_not_overlapped() {
    let mut r = report();
    // 300 blocks on SM 3, each region starting 10 ns after the previous one began and
    // lasting 5 µs: 300 at once, one SM has 256 tracks.
    let lanes: Vec<_> = (0..300u32)
        .map(|b| {
            let t0 = CLOCK_START + 10_000 + GT_AHEAD + 100 + 10 * u64::from(b);
            vec![(Kind::Lane, LANE_START, b, 3, t0), (Kind::Begin, 1, 0, 3, t0 + 10), (Kind::End, 1, 0, 3, t0 + 5_000)]
        })
        .collect();
    let launch = TimedLaunch::from_words(&encode(1_200, (300, 1, LaneMode::Block), (1, 1), &lanes), &[], Some(1));
    r.attach_device_timers(vec![launch.unwrap()]);
    let trace = r.to_chrome_trace();
    let info = trace.other_data.device_timers.as_ref().expect("device timer info");
    assert_eq!(info.regions_left_out, 300 - 256);
    let regions: Vec<_> = trace.trace_events.iter().filter(|e| e.cat == Some("device_region")).collect();
    assert_eq!(regions.len(), 256);
    let tids: std::collections::BTreeSet<u64> = regions.iter().map(|e| e.tid).collect();
    assert_eq!(tids.len(), 256);
    let check = check_trace_json(&serde_json::to_string(&trace).unwrap(), &CheckOptions::default());
    assert!(check.is_ok(), "{:#?}", check.violations);
}

#[test]
fn a_buffer_full_of_stale_records_is_torn_not_trusted() {
    // A buffer reused without a reset: this launch rewrote lane 0's first record only.
    let old = encode(
        8,
        (1, 1, LaneMode::Block),
        (1, 1),
        &[vec![(Kind::Lane, LANE_START, 0, 1, 5_000), (Kind::Begin, 1, 0, 1, 5_010), (Kind::End, 1, 0, 1, 5_020)]],
    );
    let mut words = old.clone();
    words[HEADER_WORDS] = 9_001; // a new stamp over the old tag
    let t = TimedLaunch::from_words(&words, &[], None).unwrap();
    assert_eq!(t.torn, 1);
    assert_eq!(t.spans.spans.len(), 1, "the old begin/end still pair: only the torn start is left out");
    assert_eq!(t.spans.lanes.started, 0);
    assert!(!t.spans.lanes.each_once());
}

// ---- Buffers recorded on an H100 by examples/c/device_timers.cu (GMPROF_DT_DUMP) ----
// validation/2026-11-23-device-timers-h100.log is the run that wrote them (its 13:25 UTC
// section: the header with the stamp after a begin's work and before an end's): 132 SMs,
// 264 blocks of the spin kernel (1 µs, 10 µs, 1 ms; each end's payload is what the spin
// observed beyond that), the same kernel into a buffer with room for 3 of its 8 records per
// lane, and the producer/consumer kernel on 8 blocks.

const SMS: u16 = 132;

fn recorded(name: &str) -> Vec<u64> {
    let bytes = std::fs::read(root().join("tests/data/device_timers").join(name)).expect("recorded buffer");
    gmprof::device_timers::format::words_from_bytes(&bytes)
}

fn spin_names() -> Vec<String> {
    ["", "spin_1us", "spin_10us", "spin_1ms"].map(String::from).to_vec()
}

/// One line per (region, scope all): count, min, p50, p99, max.
fn summary(label: &str, t: &TimedLaunch) -> String {
    let mut out = format!(
        "{label}: lanes expected {} started {} finished {} | overflow {} torn {} stray {} | sms {}\n",
        t.spans.lanes.expected,
        t.spans.lanes.started,
        t.spans.lanes.finished,
        t.overflow(),
        t.torn,
        t.stray,
        t.spans.sms.len()
    );
    for s in gmprof::device_timers::region_stats(&[(label.to_owned(), t)]).iter().filter(|s| s.scope == Scope::All) {
        out += &format!(
            "  {} count {} min {} p50 {} p99 {} max {} payload_sum {}\n",
            s.region, s.count, s.min_ns, s.p50_ns, s.p99_ns, s.max_ns, s.payload_sum
        );
    }
    out
}

#[test]
fn recorded_spin_buffer_decodes_every_lane_once_with_its_spin_times() {
    let t = TimedLaunch::from_words(&recorded("spin.bin"), &spin_names(), None).unwrap();
    assert_eq!(t.header.lanes, Some(264));
    assert_eq!(t.header.lane_mode, Some(LaneMode::Block));
    assert!(t.spans.lanes.each_once(), "{:?}", t.spans.lanes);
    assert_eq!(t.spans.lanes.finished, 264);
    assert_eq!((t.overflow(), t.torn, t.stray, t.spans.unclosed_begins, t.spans.unmatched_ends), (0, 0, 0, 0, 0));
    assert!(t.spans.sms.iter().all(|&sm| sm < SMS), "{:?}", t.spans.sms);
    assert_eq!(t.spans.sms.len(), usize::from(SMS), "264 blocks over 132 SMs");
    for (region, target) in [(1u16, 1_000u64), (2, 10_000), (3, 1_000_000)] {
        let spans: Vec<_> = t.spans.spans.iter().filter(|s| s.region == region).collect();
        assert_eq!(spans.len(), 264);
        // The end payload is what the spin observed beyond its nominal time (its own first
        // to last %globaltimer read). The span holds the spin plus the markers' cost inside
        // it: never less, at most two 32 ns timer steps more; and it is within the issue's
        // 2 % or 100 ns of the nominal time too.
        for s in &spans {
            let observed = target + u64::from(s.end_payload);
            assert!((observed..=observed + 64).contains(&s.duration_ns()), "{s:?}");
            assert!((target..=target + 100).contains(&s.duration_ns()), "{s:?}");
            assert_eq!(s.duration_ns() % 32, 0, "the H100's timer steps by 32 ns");
        }
    }
    let golden = summary("spin", &t)
        + &summary("overflow", &TimedLaunch::from_words(&recorded("overflow.bin"), &spin_names(), None).unwrap())
        + &summary(
            "specialized",
            &TimedLaunch::from_words(
                &recorded("specialized.bin"),
                &["", "produce", "consume", "tile_ready"].map(String::from),
                None,
            )
            .unwrap(),
        );
    check_golden("device_timers_recorded.txt", &golden);
}

#[test]
fn recorded_overflowing_buffer_counts_what_did_not_fit() {
    let t = TimedLaunch::from_words(&recorded("overflow.bin"), &spin_names(), None).unwrap();
    // 8 records per lane, room for 3: the lane start, the 1 µs begin and end.
    assert_eq!(t.header.per_lane, Some(3));
    assert_eq!(t.overflow(), 5 * 264);
    assert!(t.spans.lanes.each_once());
    assert_eq!(t.spans.lanes.finished, 0, "the finish markers overflowed");
    assert_eq!(t.spans.spans.len(), 264);
    assert!(t.spans.spans.iter().all(|s| s.region == 1));
    let mut csv = Vec::new();
    let mut r = report();
    r.attach_device_timers(vec![t]);
    r.write_regions_csv_to(&mut csv).unwrap();
    assert!(String::from_utf8(csv).unwrap().contains("overflow_records=1320"));
}

#[test]
fn recorded_group_buffer_keeps_producer_and_consumer_apart() {
    let names = ["", "produce", "consume", "tile_ready"].map(String::from);
    let t = TimedLaunch::from_words(&recorded("specialized.bin"), &names, None).unwrap();
    assert_eq!(
        (t.header.lane_mode, t.header.lanes_per_block, t.header.lanes),
        (Some(LaneMode::Group), Some(2), Some(16))
    );
    assert!(t.spans.lanes.each_once() && t.spans.lanes.finished == 16, "{:?}", t.spans.lanes);
    let of =
        |region: u16, lane: u32| t.spans.spans.iter().filter(|s| s.region == region && s.lane_in_block == lane).count();
    assert_eq!((of(1, 0), of(2, 1), of(1, 1), of(2, 0)), (32, 32, 0, 0), "produce on group 0, consume on group 1");
    let mut tiles: Vec<u32> =
        t.spans.instants.iter().filter(|i| i.region == 3 && i.lane_in_block == 0).map(|i| i.payload).collect();
    tiles.sort_unstable();
    assert_eq!(tiles, (0..4).flat_map(|k| std::iter::repeat_n(k, 8)).collect::<Vec<u32>>());
    // Each consume of tile k starts after the producer's tile_ready for k in the same block.
    for c in t.spans.spans.iter().filter(|s| s.region == 2) {
        let ready = t.spans.instants.iter().find(|i| i.block == c.block && i.payload == c.begin_payload).unwrap();
        assert!(c.start_ns >= ready.ts_ns, "block {} tile {}", c.block, c.begin_payload);
    }
}

#[test]
fn recorded_buffer_with_torn_records_counts_them_and_keeps_the_rest() {
    let mut words = recorded("spin.bin");
    let per_lane = 8;
    // Lane 0: the 10 µs end's tag never landed. Lane 1: the 1 ms begin's stamp is from another
    // write. Lane 2: its start marker's tag is lost.
    words[HEADER_WORDS + 2 * 4 + 1] = 0;
    words[HEADER_WORDS + 2 * (per_lane + 5)] += 1;
    words[HEADER_WORDS + 2 * (2 * per_lane) + 1] = 0;
    let t = TimedLaunch::from_words(&words, &spin_names(), None).unwrap();
    assert_eq!(t.torn, 3);
    assert_eq!(t.spans.spans.len(), 3 * 264 - 2);
    assert_eq!((t.spans.unclosed_begins, t.spans.unmatched_ends), (1, 1));
    assert_eq!(t.spans.lanes.started, 263);
    assert!(!t.spans.lanes.each_once());
}
