//! The readers of streamed outputs (issue 42): runs streamed through the capture path (a
//! GPU-less [`LaunchHarness`] session, as `stream_tests` plays them) and the same runs
//! written whole, read back by `gmprof merge` and `gmprof diff`. A merge of streamed ranks
//! equals the merge of the same ranks written whole; a corrupt part is named and left out
//! (`--strict` fails on it); a diff of streamed runs finds the slower one from the
//! aggregates, against a streamed or a whole-file run.
//!
//! With `GMPROF_WRITE_STREAM_FIXTURE=DIR`, [`write_stream_fixture`] writes the small streamed
//! run that `tests/data/streamed/` holds for the Python tests and README's queries.

use std::ffi::CStr;
use std::path::Path;
use std::time::Duration;

use super::harness::LaunchHarness;
use super::state::StreamConfig;
use crate::analysis::online::OnlineSettings;
use crate::report::diff::{Diff, DiffOptions, Kind, Verdict, GPU_TIME};
use crate::report::runs::merge::MergeOptions;
use crate::report::runs::merge_run::merge_dir_with;
use crate::report::stream::StreamSettings;
use crate::report::tables::parquet::parts::{part_files, SegmentPolicy};
use crate::report::Report;

const NAMES: [(&CStr, &str); 3] = [(c"gemm", "gemm"), (c"softmax", "softmax"), (c"layernorm", "layernorm")];
const LAYERS: u64 = 2;
const KERNELS_PER_LAYER: u64 = 3;

// Assigned field by field so that settings added later keep their defaults here.
#[allow(clippy::field_reassign_with_default)]
fn config(dir: &Path, row_limit: u64) -> StreamConfig {
    let mut settings = StreamSettings::default();
    settings.segment = SegmentPolicy { rows: 100, every: Duration::from_secs(3600), row_group: 64 };
    settings.online = OnlineSettings { window_steps: 10, ..OnlineSettings::default() };
    StreamConfig { dir: dir.to_owned(), row_limit, settings }
}

/// A run of `steps` steps (`step` around two `layer N` ranges of three kernels), its kernels
/// `slow` times as long as the base's, into `dir`: streamed past a row limit of 50 when
/// `streamed`, else written whole.
fn run(dir: &Path, steps: u64, slow: u64, streamed: bool) -> Report {
    let report = play(dir, steps, slow, streamed);
    report.write_all(dir).unwrap();
    report
}

/// [`run`] without writing the report (a further CUDA context's streamed parts).
fn play(dir: &Path, steps: u64, slow: u64, streamed: bool) -> Report {
    let mut h = LaunchHarness::trace().unwrap();
    if streamed {
        h.profiler().stream_into(config(dir, 50)).unwrap();
    }
    let mut late = Vec::new();
    let mut gpu_ns = 1_000_000;
    for step in 0..steps {
        h.push_range("step").unwrap();
        let mut records = Vec::new();
        for layer in 0..LAYERS {
            h.push_range(&format!("layer {layer}")).unwrap();
            for k in 0..KERNELS_PER_LAYER {
                let (symbol, name) = NAMES[k as usize];
                let id = h.launch_kernel(false, symbol);
                let duration = (100 + (step + layer + k) % 5 * 10 + 200 * k) * slow;
                records.push(h.kernel_record(id, name, gpu_ns, gpu_ns + duration));
                gpu_ns += 10_000;
            }
            h.pop_range().unwrap();
        }
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if step % 4 == 3 {
            h.stream_step();
        }
    }
    h.deliver(late);
    let report = h.report();
    assert_eq!(report.streamed.is_some(), streamed);
    report
}

/// Ranks `r0`, `r1`, `r2` under `root`, r1 twice as slow.
fn ranks(root: &Path, streamed: bool) {
    for (r, slow) in [("r0", 1), ("r1", 2), ("r2", 1)] {
        run(&root.join(r), 40, slow, streamed);
    }
}

#[test]
fn a_merge_of_streamed_ranks_equals_the_merge_of_the_same_ranks_written_whole() {
    let (streamed, whole) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    ranks(streamed.path(), true);
    ranks(whole.path(), false);
    assert!(
        !streamed.path().join("r0/ranges.parquet").exists()
            && !part_files(&streamed.path().join("r0/ranges")).unwrap().is_empty()
    );
    let options = MergeOptions::default();
    let s = merge_dir_with(streamed.path(), &options).unwrap().merged;
    let w = merge_dir_with(whole.path(), &options).unwrap().merged;
    assert_eq!(s.processes, w.processes);
    assert_eq!(s.kernels, w.kernels);
    // Every range path with each rank's total and instances; a whole-file run also has its
    // root row, which a streamed run writes only when a kernel ran outside every range.
    let rows = |m: &crate::report::runs::merge::Merged| -> Vec<_> {
        m.rows
            .iter()
            .filter(|r| r.path != "<root>")
            .map(|r| (r.path.clone(), r.gpu_time_ns.clone(), r.instances.clone(), r.slowest.clone()))
            .collect()
    };
    let mut rs = rows(&s);
    let mut rw = rows(&w);
    rs.sort();
    rw.sort();
    assert_eq!(rs.len(), 1 + LAYERS as usize, "{rs:?}");
    assert_eq!(rs, rw);
    assert!(rs.iter().all(|r| r.3.as_deref() == Some("r1")), "r1 is the slowest: {rs:?}");
    let mut ks = s.kernel_rows.clone();
    let mut kw = w.kernel_rows.clone();
    ks.sort_by(|a, b| a.path.cmp(&b.path));
    kw.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(ks, kw);
    // The straggler table: one row per step, r1 the slowest of each.
    assert_eq!(s.steps, w.steps);
    let steps = s.steps.as_ref().expect("a straggler table");
    assert_eq!(steps.rows.len(), 40);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert!(s.rows.iter().all(|r| r.instances.iter().all(|&n| n > 0)), "every path's instances");
    // A deeper step range, by wall time: the rows the streamed ranks keep follow --step.
    let deeper = MergeOptions {
        step: Some("step/layer 1".into()),
        step_time: crate::report::runs::stragglers::StepTime::Wall,
        ..MergeOptions::default()
    };
    let (sd, wd) = (
        merge_dir_with(streamed.path(), &deeper).unwrap().merged,
        merge_dir_with(whole.path(), &deeper).unwrap().merged,
    );
    assert_eq!(sd.steps, wd.steps);
    assert_eq!(sd.steps.as_ref().map(|t| t.rows.len()), Some(40));
    // merged.csv: the same file.
    let csv = |root: &Path| std::fs::read_to_string(root.join("merged_kernels.csv")).unwrap();
    assert_eq!(csv(streamed.path()).lines().next(), csv(whole.path()).lines().next(), "same header");
}

#[test]
fn a_corrupt_part_of_a_streamed_rank_is_named_and_left_out_unless_strict() {
    let root = tempfile::tempdir().unwrap();
    ranks(root.path(), true);
    let parts = part_files(&root.path().join("r2/ranges")).unwrap();
    assert!(parts.len() >= 2, "{parts:?}");
    let bytes = std::fs::read(&parts[0]).unwrap();
    std::fs::write(&parts[0], &bytes[..bytes.len() / 3]).unwrap();
    let merged = merge_dir_with(root.path(), &MergeOptions::default()).unwrap().merged;
    assert_eq!(merged.processes, ["r0", "r1", "r2"], "the rank stays, without the part's rows");
    let warning =
        merged.warnings.iter().find(|w| w.starts_with("r2: left out, unreadable: ranges/part-00000.parquet: "));
    assert!(warning.is_some_and(|w| w.contains("not a readable Parquet file")), "{:?}", merged.warnings);
    let step = merged.rows.iter().find(|r| r.path == "step").unwrap();
    assert!(step.instances[2] < step.instances[0], "{:?}", step.instances);
    let strict = MergeOptions { strict: true, ..MergeOptions::default() };
    let e = merge_dir_with(root.path(), &strict).unwrap_err().to_string();
    assert!(e.contains("r2: unreadable part files") && e.contains("ranges/part-00000.parquet"), "{e}");
}

#[test]
fn a_streamed_rank_killed_before_its_report_is_merged_from_its_parts() {
    let (whole, killed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    ranks(whole.path(), true);
    ranks(killed.path(), true);
    // r1 killed: no report.json, and no whole-run aggregates (written at the end).
    std::fs::remove_file(killed.path().join("r1/report.json")).unwrap();
    std::fs::remove_dir_all(killed.path().join("r1/aggregates")).unwrap();
    // r2 killed after a checkpoint from before the limit: its whole-file tables (10 steps)
    // beside the parts (all 40).
    let r2 = killed.path().join("r2");
    std::fs::remove_dir_all(&r2).unwrap();
    play(&r2, 40, 1, true);
    run(&r2, 10, 1, false);
    assert!(r2.join("ranges.parquet").is_file() && r2.join("kernels/part-00000.parquet").is_file());
    let options = MergeOptions::default();
    let a = merge_dir_with(whole.path(), &options).unwrap().merged;
    let b = merge_dir_with(killed.path(), &options).unwrap().merged;
    assert_eq!(b.processes, ["r0", "r1", "r2"]);
    assert!(b.unreadable.is_empty(), "{:?}", b.unreadable);
    assert_eq!(a.kernels, b.kernels, "kernels counted from r1's parts");
    assert_eq!(a.rows, b.rows);
    let sorted = |m: &crate::report::runs::merge::Merged| {
        let mut k = m.kernel_rows.clone();
        k.sort_by(|x, y| x.path.cmp(&y.path));
        k
    };
    assert_eq!(sorted(&a), sorted(&b), "kernel totals folded from the parts = the aggregates'");
    assert_eq!(a.steps, b.steps);
    assert_eq!(b.warnings.len(), 2, "{:?}", b.warnings);
    assert!(b.warnings[0].starts_with("r1: streamed, then killed before its report"), "{:?}", b.warnings);
    assert!(b.warnings[1].starts_with("r2: streamed, then killed before its report"), "{:?}", b.warnings);
}

fn gpu_row<'a>(diff: &'a Diff, kind: Kind, name: &str) -> &'a crate::report::diff::DiffRow {
    diff.rows
        .iter()
        .find(|r| r.kind == kind && r.name == name && r.quantity == GPU_TIME)
        .unwrap_or_else(|| panic!("no row {name}: {:#?}", diff.rows))
}

#[test]
fn a_diff_of_streamed_runs_finds_the_slower_one_from_the_aggregates() {
    let root = tempfile::tempdir().unwrap();
    let (base, slow, same, whole) =
        (root.path().join("base"), root.path().join("slow"), root.path().join("same"), root.path().join("whole"));
    run(&base, 40, 1, true);
    run(&slow, 40, 2, true);
    run(&same, 40, 1, true);
    run(&whole, 40, 2, false);
    let options = DiffOptions::default();
    for new in [&slow, &whole] {
        let diff = Diff::read(&base, new, options).unwrap();
        for (kind, name) in [(Kind::Range, "step"), (Kind::Range, "step/layer #"), (Kind::Kernel, "gemm")] {
            let row = gpu_row(&diff, kind, name);
            assert_eq!(row.verdict, Verdict::Slower, "{} {name}: {row:?}", new.display());
            assert!(row.p_value.is_none(), "no rank test without the instances' values");
            assert_eq!(row.base_n, if kind == Kind::Range && name == "step" { 40 } else { 80 }, "{row:?}");
            let pct = row.change_pct.unwrap();
            assert!((pct - 100.0).abs() < 1e-9, "twice as long: {pct}");
        }
        assert!(diff.method.contains("aggregates"), "{}", diff.method);
        let one_side = diff.rows.iter().filter(|r| matches!(r.verdict, Verdict::OnlyBase | Verdict::OnlyNew));
        assert_eq!(one_side.count(), 0, "the same groups and kernels on both sides: {:#?}", diff.rows);
        assert_eq!(diff.rows.len(), 5, "GPU time only: {:#?}", diff.rows);
    }
    let diff = Diff::read(&base, &same, options).unwrap();
    assert!(diff.rows.iter().all(|r| !r.verdict.is_change()), "{:#?}", diff.rows);
    // Warm-up cannot be left out of a whole run's aggregates: said, not ignored.
    let diff = Diff::read(&base, &same, DiffOptions { skip_first: 2, ..options }).unwrap();
    assert!(diff.warnings.iter().any(|w| w.contains("--skip-first") && w.contains("streamed")), "{:?}", diff.warnings);
}

#[test]
fn a_further_contexts_parts_are_merged_and_diffed_with_the_first() {
    let root = tempfile::tempdir().unwrap();
    let (one, two) = (root.path().join("one"), root.path().join("two"));
    run(&one.join("r0"), 40, 1, true);
    run(&two.join("r0"), 40, 1, true);
    // A second context, 3x slower, streams into context-1/ (its report is the first's).
    play(&two.join("r0/context-1"), 40, 3, true);
    let merged = merge_dir_with(&two, &MergeOptions::default()).unwrap().merged;
    assert!(merged.unreadable.is_empty() && merged.warnings.is_empty(), "context-1 is r0's: {merged:?}");
    assert_eq!(merged.processes, ["r0"]);
    let gemm = merged.kernel_rows.iter().find(|k| k.path == "gemm").unwrap();
    let alone = merge_dir_with(&one, &MergeOptions::default()).unwrap().merged;
    let gemm_alone = alone.kernel_rows.iter().find(|k| k.path == "gemm").unwrap();
    assert_eq!(gemm.instances[0], 2 * gemm_alone.instances[0], "both contexts' launches");
    assert_eq!(gemm.gpu_time_ns[0], gemm_alone.gpu_time_ns[0].map(|t| 4 * t), "1x + 3x");
    let step = merged.rows.iter().find(|r| r.path == "step").unwrap();
    assert_eq!(step.instances[0], 80, "both contexts' step ranges");
    // diff: the second context's aggregates count too (its GPU time 3x: the mean doubles).
    let diff = Diff::read(&one.join("r0"), &two.join("r0"), DiffOptions::default()).unwrap();
    let row = gpu_row(&diff, Kind::Kernel, "gemm");
    assert_eq!((row.base_n, row.new_n), (80, 160));
    assert!((row.change_pct.unwrap() - 100.0).abs() < 1e-9, "{row:?}");
    assert_eq!(row.new_median, None, "two contexts' medians do not pool");
    assert_eq!(row.verdict, Verdict::Slower);
}

/// Writes the small streamed run of `tests/data/streamed/` into `GMPROF_WRITE_STREAM_FIXTURE`
/// (two ranks, `rank0` and `rank1`, the second 2x slower); without it, nothing.
#[test]
fn write_stream_fixture() {
    let Some(dir) = std::env::var_os("GMPROF_WRITE_STREAM_FIXTURE") else { return };
    let root = Path::new(&dir);
    for (rank, slow) in [("rank0", 1), ("rank1", 2)] {
        let d = root.join(rank);
        run(&d, 24, slow, true);
        // The fixture keeps what a reader needs: report.json and the parts.
        let _ = std::fs::remove_file(d.join("trace.json"));
    }
}
