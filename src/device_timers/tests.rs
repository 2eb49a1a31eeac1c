use super::clock::{Bracket, DeviceClock};
use super::format::{self, decode, encode, tag_word, Kind, LaneMode, HEADER_WORDS, LANE_FINISH, LANE_START};
use super::model::TimedLaunch;
use super::stats::{self, region_stats, Scope};

fn lane(block: u32, sm: u16, t0: u64, body: &[(Kind, u16, u32, u64)]) -> Vec<(Kind, u16, u32, u16, u64)> {
    let mut v = vec![(Kind::Lane, LANE_START, block, sm, t0)];
    v.extend(body.iter().map(|&(k, r, p, t)| (k, r, p, sm, t)));
    v
}

#[test]
fn a_written_buffer_decodes_to_its_records() {
    let lanes = vec![
        lane(0, 3, 1_000, &[(Kind::Begin, 1, 64, 1_010), (Kind::End, 1, 0, 1_110), (Kind::Instant, 7, 9, 1_200)]),
        lane(1, 5, 2_000, &[(Kind::Begin, 2, 0, 2_000), (Kind::End, 2, 0, 2_500)]),
    ];
    let words = encode(16, (2, 1, LaneMode::Block), (1, 1), &lanes);
    let d = decode(&words).unwrap();
    assert_eq!(d.header.per_lane, Some(8));
    assert_eq!(d.header.lanes, Some(2));
    assert_eq!(d.header.lane_mode, Some(LaneMode::Block));
    assert_eq!((d.torn, d.stray, d.header.overflow), (0, 0, 0));
    assert_eq!(d.records.len(), 7);
    let r = d.records[1];
    assert_eq!((r.lane, r.block, r.kind, r.region, r.payload, r.sm, r.ts_ns), (0, 0, Kind::Begin, 1, 64, 3, 1_010));
    assert_eq!(d.records[4].block, 1);
    let t = TimedLaunch::from_decoded(&d, &["none".into(), "load".into()], Some(7));
    assert_eq!(t.spans.spans.len(), 2);
    assert_eq!(t.spans.spans[0].duration_ns(), 100);
    assert_eq!(t.spans.spans[1].duration_ns(), 500);
    assert_eq!(t.spans.instants[0].payload, 9);
    assert!(t.spans.lanes.each_once());
    assert_eq!(t.spans.sms, vec![3, 5]);
    assert_eq!((t.first_ns, t.last_ns), (Some(1_000), Some(2_500)));
    assert_eq!(t.region_name(1), "load");
    assert_eq!(t.region_name(2), "region_2");
}

#[test]
fn timestamps_past_32_bits_do_not_wrap() {
    let t0 = 1_763_000_000_000_000_000u64; // a Unix-epoch-like globaltimer
    let dur = 6_000_000_000u64; // longer than 2^32 ns
    let lanes = vec![lane(0, 0, t0, &[(Kind::Begin, 0, 0, t0), (Kind::End, 0, 0, t0 + dur)])];
    let t = TimedLaunch::from_words(&encode(4, (1, 1, LaneMode::Block), (1, 1), &lanes), &[], None).unwrap();
    assert_eq!(t.spans.spans[0].duration_ns(), dur);
}

#[test]
fn torn_records_are_counted_and_left_out() {
    let lanes = vec![lane(0, 1, 100, &[(Kind::Begin, 1, 0, 110), (Kind::End, 1, 0, 150), (Kind::Instant, 2, 0, 160)])];
    let mut words = encode(8, (1, 1, LaneMode::Block), (1, 1), &lanes);
    // The end record's tag word never landed; the instant's tag is from another stamp.
    words[HEADER_WORDS + 2 * 2 + 1] = 0;
    words[HEADER_WORDS + 2 * 3 + 1] = tag_word(161, Kind::Instant, 2, 0, 1);
    let d = decode(&words).unwrap();
    assert_eq!(d.torn, 2);
    assert_eq!(d.records.len(), 2);
    let t = TimedLaunch::from_decoded(&d, &[], None);
    assert_eq!((t.spans.spans.len(), t.spans.unclosed_begins), (0, 1));
}

#[test]
fn overflow_is_the_device_count_and_full_lanes_keep_their_records() {
    let body: Vec<_> = (0..10).map(|i| (Kind::Instant, 3, i, 200 + u64::from(i))).collect();
    let lanes = vec![lane(0, 0, 100, &body), lane(1, 0, 100, &[])];
    let words = encode(8, (2, 1, LaneMode::Block), (1, 1), &lanes);
    let d = decode(&words).unwrap();
    assert_eq!(d.header.per_lane, Some(4));
    assert_eq!(d.header.overflow, 7, "11 records into a lane of 4");
    assert_eq!(d.records.iter().filter(|r| r.lane == 0).count(), 4);
}

#[test]
fn records_after_a_gap_are_stray() {
    let mut words = encode(8, (1, 1, LaneMode::Block), (1, 1), &[lane(0, 0, 100, &[])]);
    words[HEADER_WORDS + 2 * 5] = 500;
    words[HEADER_WORDS + 2 * 5 + 1] = tag_word(500, Kind::Instant, 1, 0, 0);
    assert_eq!(decode(&words).unwrap().stray, 1);
}

#[test]
fn sampled_lanes_map_back_to_their_blocks_and_warps() {
    // 5 blocks of 4 warps, every 2nd block and every 2nd warp: 3 × 2 recording lanes.
    let mut lanes = Vec::new();
    for b in [0u32, 2, 4] {
        for _w in [0u32, 2] {
            lanes.push(lane(b, 0, 10, &[(Kind::Begin, 0, 0, 20), (Kind::End, 0, 0, 30)]));
        }
    }
    let d = decode(&encode(60, (5, 4, LaneMode::Warp), (2, 2), &lanes)).unwrap();
    let places: Vec<(u32, u32)> =
        d.records.iter().filter(|r| r.kind == Kind::Lane).map(|r| (r.block, r.lane_in_block)).collect();
    assert_eq!(places, vec![(0, 0), (0, 2), (2, 0), (2, 2), (4, 0), (4, 2)]);
    let t = TimedLaunch::from_decoded(&d, &[], None);
    assert!(t.spans.lanes.each_once(), "{:?}", t.spans.lanes);
}

#[test]
fn a_repeated_or_misplaced_lane_fails_the_check() {
    let lanes = vec![lane(0, 0, 10, &[(Kind::Lane, LANE_START, 0, 11)]), lane(7, 0, 10, &[])];
    let t = TimedLaunch::from_words(&encode(8, (2, 1, LaneMode::Block), (1, 1), &lanes), &[], None).unwrap();
    assert_eq!((t.spans.lanes.repeated, t.spans.lanes.misplaced), (1, 1));
    assert!(!t.spans.lanes.each_once());
}

#[test]
fn nested_and_recurring_regions_pair_innermost_first() {
    let body = [
        (Kind::Begin, 1, 0, 100),
        (Kind::Begin, 2, 0, 110),
        (Kind::End, 2, 0, 120),
        (Kind::Begin, 2, 0, 130),
        (Kind::End, 2, 0, 150),
        (Kind::End, 1, 0, 200),
        (Kind::End, 3, 0, 210),
        (Kind::Lane, LANE_FINISH, 0, 220),
    ];
    let t = TimedLaunch::from_words(&encode(16, (1, 1, LaneMode::Block), (1, 1), &[lane(0, 0, 90, &body)]), &[], None)
        .unwrap();
    let got: Vec<(u16, u64, u32)> = t.spans.spans.iter().map(|s| (s.region, s.duration_ns(), s.depth)).collect();
    assert_eq!(got, vec![(1, 100, 0), (2, 10, 1), (2, 20, 1)]);
    assert_eq!((t.spans.unmatched_ends, t.spans.unclosed_begins, t.spans.lanes.finished), (1, 0, 1));
}

#[test]
fn stats_have_known_values() {
    // Region 0: durations 1..=100 ns on SM (i % 2), lane-in-block (i % 3), across 100 blocks.
    let lanes: Vec<_> = (0..100u32)
        .map(|i| {
            let t = 1_000 * u64::from(i + 1); // a stamp of 0 would read as empty
            lane(i, (i % 2) as u16, t, &[(Kind::Begin, 0, 2, t), (Kind::End, 0, 0, t + u64::from(i) + 1)])
        })
        .collect();
    let t =
        TimedLaunch::from_words(&encode(400, (100, 1, LaneMode::Block), (1, 1), &lanes), &["k".into()], None).unwrap();
    let rows = region_stats(&[("kern".to_owned(), &t)]);
    let all = rows.iter().find(|r| r.scope == Scope::All).unwrap();
    assert_eq!((all.count, all.total_ns, all.min_ns, all.max_ns, all.p50_ns, all.p99_ns), (100, 5050, 1, 100, 50, 99));
    assert_eq!(all.mean_ns, 50.5);
    assert_eq!(all.payload_sum, 200);
    assert_eq!(all.region, "k");
    // SM 1 holds the odd blocks: durations 2, 4, ..., 100.
    let sm1 = rows.iter().find(|r| r.scope == Scope::Sm && r.key == Some(1)).unwrap();
    assert_eq!((sm1.count, sm1.total_ns, sm1.min_ns, sm1.p50_ns, sm1.max_ns), (50, 2550, 2, 50, 100));
    let lanes: Vec<_> = rows.iter().filter(|r| r.scope == Scope::Lane).collect();
    assert_eq!(lanes.len(), 1, "one lane per block");
    assert_eq!(stats::nearest_rank(&[7], 99), Some(7));
    assert_eq!(stats::nearest_rank(&[], 50), None);
}

#[test]
fn brackets_agree_on_one_offset() {
    // globaltimer = cupti + 5_000 exactly; records start 300 ns after each kernel starts.
    let b = |start: u64, dur: u64| Bracket {
        kernel_start_ns: start,
        kernel_end_ns: start + dur,
        first_ns: start + 5_000 + 300,
        last_ns: start + 5_000 + dur - 200,
    };
    let clock = DeviceClock::fit(&[b(10_000, 2_000), b(50_000, 9_000)]).unwrap();
    // Every launch allows offsets [-5300, -4800]: the middle is -5050, slack 500.
    assert_eq!((clock.offset_ns, clock.slack_ns, clock.launches), (-5_050, 500, 2));
    assert_eq!(clock.to_cupti_ns(15_300), 10_250);
    let tight = Bracket { kernel_start_ns: 0, kernel_end_ns: 100, first_ns: 1_000, last_ns: 1_050 };
    let far = Bracket { kernel_start_ns: 0, kernel_end_ns: 100, first_ns: 9_000, last_ns: 9_050 };
    assert_eq!(DeviceClock::fit(&[tight, far]), None, "disjoint brackets");
    let wide = Bracket { kernel_start_ns: 0, kernel_end_ns: 10, first_ns: 1_000, last_ns: 1_100 };
    assert_eq!(DeviceClock::single(&wide).offset_ns, -1_000, "records longer than the kernel: start aligned");
}

#[test]
fn not_a_buffer_is_an_error_that_says_why() {
    let err = decode(&[0u64; 8]).unwrap_err().to_string();
    assert!(err.contains("magic"), "{err}");
    let mut words = encode(2, (1, 1, LaneMode::Block), (1, 1), &[]);
    words[0] = (words[0] & !(0xFFFF << 32)) | (2 << 32);
    assert!(decode(&words).unwrap_err().to_string().contains("version 2"));
    assert!(decode(&[1, 2]).is_err());
}

#[test]
fn a_buffer_the_device_found_misaligned_is_an_error_with_its_overflow() {
    // What gmprof_dt_init does with a base that is 8- but not 16-byte aligned: the layout is
    // written, word 6 flags it, and every marker is counted instead of stored.
    let mut words = encode(16, (2, 1, LaneMode::Block), (1, 1), &[]);
    words[6] = format::FLAG_MISALIGNED;
    words[2] = 10;
    let err = decode(&words).unwrap_err().to_string();
    assert!(err.contains("not 16-byte aligned") && err.contains("10 counted as overflow"), "{err}");
    words[6] = 0;
    assert_eq!(decode(&words).unwrap().header.overflow, 10);
}

#[test]
fn the_device_tag_arithmetic_matches_the_decoders_check() {
    // gmprof_device.cuh builds the tag before the stamp (0x5A in the check bits) and XORs
    // the stamp's low 7 bits in after it; the decoder checks (ts ^ 0x5A) & 0x7F.
    let base = |kind: u64, region: u64, payload: u64, sm: u64| {
        payload | (region << 32) | (kind << 44) | (sm << 46) | (0x5A << 56) | (1 << 63)
    };
    for ts in [0u64, 1, 0x5A, 0x7F, 0x80, 0xDEAD_BEEF, u64::MAX, 1_700_000_000_123_456_789] {
        let device = base(1, 4095, 0xFFFF_FFFF, 1023) ^ ((ts << 56) & 0x7F00_0000_0000_0000);
        assert_eq!(device, format::tag_word(ts, Kind::End, 4095, u32::MAX, 1023), "ts {ts:#x}");
        let words = encode(1, (1, 1, LaneMode::Block), (1, 1), &[vec![(Kind::Begin, 7, 3, 5, ts.max(1))]]);
        assert_eq!(decode(&words).unwrap().records.len(), 1);
    }
}

#[test]
fn a_buffer_no_block_initialized_has_no_layout() {
    let mut words = vec![0u64; HEADER_WORDS + 8];
    let [w0, w1] = format::host_header(4);
    words[0] = w0;
    words[1] = w1;
    let t = TimedLaunch::from_words(&words, &[], None).unwrap();
    assert_eq!((t.header.lanes, t.header.blocks, t.spans.lanes.expected), (None, None, 0));
}

#[test]
fn a_corrupt_lane_count_is_bounded_by_the_buffer() {
    let mut words = encode(4, (2, 1, LaneMode::Block), (1, 1), &[lane(0, 0, 10, &[]), lane(1, 0, 20, &[])]);
    words[5] = 2 | (u64::from(u32::MAX) << 32); // 2 records per lane, 4 billion lanes
    let d = decode(&words).unwrap();
    assert_eq!(d.records.len(), 2);
    assert_eq!(d.stray, 0);
}

#[test]
fn drifting_clocks_are_fitted_in_runs() {
    // Brackets of three launches of an H100 run (offsets CUPTI - globaltimer, ns): an
    // overflowing launch with few records, then two complete ones.
    let at = |start: u64, lo: i128, hi: i128| {
        // kernel [start, start + 2_000_000]; first/last records give offsets lo and hi.
        let end = start + 2_000_000;
        Bracket {
            kernel_start_ns: start,
            kernel_end_ns: end,
            first_ns: (start as i128 - lo) as u64,
            last_ns: (end as i128 - hi) as u64,
        }
    };
    let recorded = [
        at(10_000_000, 10_150_758, 11_162_746),
        at(20_000_000, 10_150_850, 10_152_054),
        at(30_000_000, 10_150_749, 10_151_965),
    ];
    let clocks = DeviceClock::fit_runs(&recorded);
    assert!(clocks.iter().all(|c| c.launches == 3 && c.offset_ns == 10_151_407 && c.slack_ns == 1_115), "{clocks:?}");
    // The same offset drifting by 2 µs per launch: runs of launches that still agree.
    let drift: Vec<Bracket> =
        (0..6i128).map(|k| at(10_000_000 * (k as u64 + 1), 1_000 + 2_000 * k, 2_500 + 2_000 * k)).collect();
    let clocks = DeviceClock::fit_runs(&drift);
    assert_eq!(clocks.iter().map(|c| c.offset_ns).collect::<Vec<_>>(), [1_750, 3_750, 5_750, 7_750, 9_750, 11_750]);
    assert!(clocks.iter().all(|c| c.launches == 1));
    let slow: Vec<Bracket> =
        (0..6i128).map(|k| at(10_000_000 * (k as u64 + 1), 1_000 + 500 * k, 3_000 + 500 * k)).collect();
    let runs: std::collections::BTreeSet<i64> = DeviceClock::fit_runs(&slow).iter().map(|c| c.offset_ns).collect();
    assert_eq!(runs.len(), 2, "launches 0-4 share [3000, 3000], launch 5 starts a run: {runs:?}");
}
