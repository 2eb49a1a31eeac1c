//! PC sampling folded again from sample buffers recorded on a GPU: llm.c's GPT-2 (d12, B=4,
//! T=1024, 3 steps, train_gpt2cu built with -lineinfo) under `gmprof run --mode trace
//! --pc-sampling` (continuous collection, CUPTI's interval 2^11) with `GMPROF_PC_RECORD`, on an
//! NVIDIA H100 (driver 580.159.04, CUDA 13.0, CUPTI 13.0.1), 2026-11-25
//! (`SECTIONS=record bash scripts/gpu/pc-sampling-validate.sh`;
//! validation/2026-11-25-pc-sampling-h100.log).
//!
//! tests/data/pc/ holds, zstd-compressed, the raw capture (19 507 PC records of 40 reasons) and
//! the run's report.json without its pc section and transfers (12 845 ranges, 16 685
//! kernels). The test folds the capture into that report with this build and checks:
//! - the numbers the GPU run printed (its summary lines, word for word);
//! - the invariants of the acceptance, range by range and kernel by kernel;
//! - each top kernel's top three stall shares against ncu's warp-state sampling of the same
//!   kernels (`ncu --metrics group:smsp__pcsamp_warp_stall_reasons`, the same day, same GPU),
//!   which no part of gmprof computed.
use std::collections::HashMap;

use gmprof::analysis::pc_fold::{PcAttribution, PcReport};
use gmprof::model::pc::PcCapture;
use gmprof::model::RangeId;
use gmprof::report::Report;

#[path = "common/recorded.rs"]
mod recorded;

fn unzstd(name: &str) -> String {
    recorded::unzstd("pc", name)
}

fn folded() -> Report {
    let mut report: Report = serde_json::from_str(&unzstd("h100_llmc_3steps_report.json.zst")).unwrap();
    let capture: PcCapture = serde_json::from_str(&unzstd("h100_llmc_3steps_pc_capture.json.zst")).unwrap();
    assert!(report.pc.is_none());
    report.attach_pc(&capture);
    report
}

fn pc(report: &Report) -> &PcReport {
    report.pc.as_ref().expect("a pc section")
}

#[test]
fn the_recorded_run_folds_to_what_the_gpu_run_printed() {
    let report = folded();
    let pc = pc(&report);
    assert_eq!((pc.collection.as_str(), pc.period_exponent), ("continuous", Some(11)));
    assert_eq!(pc.attribution, PcAttribution::ByKernelTime);
    assert_eq!((pc.total_samples, pc.sampled, pc.non_user_samples), (26_447_005, 25_116_733, 1_330_272));
    assert_eq!((pc.dropped_samples, pc.hardware_buffer_full, pc.drains, pc.unattributed_samples), (0, 0, 27, 0));
    // The summary lines `gmprof run` printed on the H100.
    let lines = gmprof::report::pc_summary::pc_lines(pc);
    assert_eq!(
        lines[..4],
        [
            "PC sampling: 25116733 samples every 2^11 = 2048 cycles | dropped: 0 | hardware buffer full: 0 | not in any \
             range: 0 | ranges by kernel GPU time | stalls.csv, pc_samples.csv",
            "  stalls in Train step # (25116733 samples): Stall Long Scoreboard 48.0%, Stall Wait 10.2%, Stall \
             Warpgroup Arrive 9.0%",
            "  stalls in Train step #/validation (17426194 samples): Stall Long Scoreboard 45.6%, Stall Warpgroup \
             Arrive 10.8%, Stall Wait 10.0%",
            "  stalls in Train step #/validation/gpt2_forward (15867539 samples): Stall Long Scoreboard 45.4%, Stall \
             Warpgroup Arrive 11.9%, Stall Wait 10.6%",
        ]
    );
}

#[test]
fn every_range_holds_the_samples_of_the_kernels_launched_in_it_and_below() {
    let report = folded();
    let pc = pc(&report);
    // Every range that launched kernels (a range without, InitOpt's memsets, can hold no
    // sample) and the root row.
    let launching = report.ranges.iter().filter(|r| r.range_id.is_some() && r.kernel_count > 0).count();
    assert_eq!((pc.ranges.len(), launching), (12_845, 12_844));
    // Kernels: the records' samples, every one.
    assert_eq!(pc.kernels.iter().map(|k| k.counts.samples).sum::<u64>(), pc.sampled);
    for k in &pc.kernels {
        assert_eq!(k.counts.by_reason.iter().sum::<u64>(), k.counts.samples, "{}", k.function);
        assert_eq!(
            pc.range_kernels.iter().filter(|rk| rk.function == k.function).map(|rk| rk.samples).sum::<u64>(),
            k.counts.samples,
            "{}: its per-range shares",
            k.function
        );
    }
    // Ranges: own launches' shares plus the descendants'.
    let index: HashMap<RangeId, usize> =
        report.ranges.iter().enumerate().filter_map(|(i, r)| Some((r.range_id?, i))).collect();
    let mut subtree = vec![0u64; report.ranges.len()];
    for rk in &pc.range_kernels {
        let mut at = rk.range_index;
        while let Some(i) = at {
            subtree[i] += rk.samples;
            at = report.ranges[i].parent_id.and_then(|p| index.get(&p).copied());
        }
    }
    let mut children = vec![0u64; report.ranges.len()];
    for row in pc.ranges.iter().filter(|r| r.path != "<root>") {
        let r = &report.ranges[row.range_index];
        assert_eq!(row.counts.samples, subtree[row.range_index], "{} #{}", row.path, row.instance);
        assert_eq!(row.counts.by_reason.iter().sum::<u64>(), row.counts.samples, "{}", row.path);
        if let Some(parent) = r.parent_id.and_then(|p| index.get(&p).copied()) {
            children[parent] += row.counts.samples;
        }
    }
    for row in pc.ranges.iter().filter(|r| r.path != "<root>") {
        assert!(row.counts.samples >= children[row.range_index], "{} #{}", row.path, row.instance);
    }
    let top: u64 = pc.ranges.iter().filter(|r| r.depth == 0 && r.path != "<root>").map(|r| r.counts.samples).sum();
    assert_eq!(top, pc.sampled - pc.unattributed_samples);
    // At 2^11 cycles every range of these 3 steps that launched a kernel has 100 samples or
    // more (the smallest, a single short kernel's leaf, still has its share of millions), so
    // all show shares; too-few-samples ranges are covered in tests/pc_fold.rs.
    assert_eq!(pc.min_samples, 100);
    assert!(pc.ranges.iter().all(|r| !r.counts.few_samples()));
    let smallest = pc.ranges.iter().map(|r| r.counts.samples).min().unwrap();
    assert!(smallest >= 100, "{smallest}");
}

/// ncu's shares (%) of the three states gmprof ranks first, per kernel, summed over the
/// launches ncu profiled (`validation/2026-11-25-pc-sampling-h100.log`, llm.c section).
const NCU_SHARES: [(&str, [(&str, f64); 3]); 8] = [
    ("softmax_forward_kernel5", [("Stall Long Scoreboard", 46.1), ("Stall Wait", 13.0), ("Stall Not Selected", 14.1)]),
    (
        "nvjet_sm90_tst_64x128_64x8_1x2_h_bz_NNN",
        [("Stall Long Scoreboard", 88.9), ("Stall Wait", 4.3), ("Selected", 2.5)],
    ),
    (
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
        [("Stall Long Scoreboard", 57.0), ("Stall Warpgroup Arrive", 11.9), ("Stall Wait", 8.4)],
    ),
    (
        "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT",
        [("Stall Warpgroup Arrive", 29.9), ("Stall Long Scoreboard", 28.4), ("Stall Wait", 11.7)],
    ),
    (
        "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT",
        [("Stall Warpgroup Arrive", 25.8), ("Stall Long Scoreboard", 18.9), ("Stall Barrier", 16.2)],
    ),
    (
        "_Z24fused_classifier_kernel5ILb1ELb0EE",
        [("Stall Long Scoreboard", 41.5), ("Stall Barrier", 22.5), ("Stall Not Selected", 13.7)],
    ),
    (
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
        [("Stall Long Scoreboard", 31.4), ("Stall Barrier", 21.8), ("Stall Warpgroup Arrive", 16.4)],
    ),
    (
        "nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN",
        [("Stall Warpgroup Arrive", 25.1), ("Stall Long Scoreboard", 24.0), ("Stall Barrier", 14.1)],
    ),
];

#[test]
fn top_kernels_stall_shares_agree_with_ncu_within_five_points() {
    let report = folded();
    let pc = pc(&report);
    let column = |state: &str| pc.reasons.iter().position(|r| r.warp_state == state).expect(state);
    let mut within = 0;
    for (name, states) in NCU_SHARES {
        let k = pc
            .kernels
            .iter()
            .find(|k| k.function == name || k.function.starts_with(name) || k.function.contains(name))
            .unwrap_or_else(|| panic!("{name} has samples"));
        assert!(k.counts.samples > 1_000_000, "{name}: {}", k.counts.samples);
        let worst = states
            .iter()
            .map(|(state, ncu)| {
                let share = 100.0 * k.counts.by_reason[column(state)] as f64 / k.counts.samples as f64;
                (share - ncu).abs()
            })
            .fold(0.0, f64::max);
        eprintln!("{name}: largest difference {worst:.1} pp");
        if worst <= 5.0 {
            within += 1;
        }
        // The one kernel outside 5 points (fused_classifier_kernel5, 2 launches profiled by ncu
        // of 43) is still within 8.
        assert!(worst <= 8.0, "{name}: {worst:.1} pp");
    }
    assert!(within >= 7, "{within} of 8 kernels within 5 pp of ncu");
}
