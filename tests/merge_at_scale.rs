//! `gmprof merge` of many ranks: each rank read on its own from `ranges.parquet` (or
//! `report.json`), the straggler table against known answers, the trace index, and the
//! errors on bad input. Synthetic ranks come from `tests/common/synthetic.rs` (the generator
//! of BENCHMARKS.md's 512-rank merge, here small).

#[path = "common/synthetic.rs"]
mod synthetic;

use std::path::Path;
use std::process::Command;

use gmprof::report::merge::MergeOptions;
use gmprof::report::merge_run::merge_dir_with;
use gmprof::report::merge_trace::{MERGED_TRACE, TRACE_INDEX};
use gmprof::report::stragglers::{StepTime, STRAGGLERS_CSV};
use gmprof::report::{OutputFormats, Report};
use synthetic::{label, step_ns, straggler, write_rank, Synthetic};

const SMALL: Synthetic = Synthetic { ranks: 12, kernels: 2_000, steps: 20 };

#[test]
fn stragglers_of_synthetic_ranks_are_the_known_ones() {
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..SMALL.ranks {
        write_rank(tmp.path(), rank, &SMALL);
    }
    let out = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap();
    let m = &out.merged;
    assert_eq!(m.processes, (0..SMALL.ranks).map(label).collect::<Vec<_>>());
    assert_eq!(m.kernels, vec![SMALL.kernels as u64; SMALL.ranks]);
    let steps = m.steps.as_ref().expect("train_step repeats");
    assert_eq!(steps.path, "train_step");
    assert_eq!(steps.rows.len(), SMALL.steps);
    for row in &steps.rows {
        let s = row.step as usize;
        let expected: Vec<Option<u64>> = (0..SMALL.ranks).map(|r| Some(step_ns(r, s, SMALL.ranks))).collect();
        assert_eq!(row.times, expected, "step {s}");
        assert_eq!(row.spread.slowest, Some(straggler(s, SMALL.ranks)), "step {s}: the straggler is known");
        let mut sorted: Vec<u64> = expected.iter().flatten().copied().collect();
        sorted.sort();
        assert_eq!(row.spread.min, sorted.first().copied());
        assert_eq!(row.spread.max, sorted.last().copied());
        assert_eq!(row.spread.median, Some((sorted[5] + sorted[6]) / 2), "12 ranks: mean of the middle two");
    }
    // The per-range spread: train_step's total per rank is the sum of its steps.
    let row = m.rows.iter().find(|r| r.path == "train_step").unwrap();
    for (rank, total) in row.gpu_time_ns.iter().enumerate() {
        let expected: u64 = (0..SMALL.steps).map(|s| step_ns(rank, s, SMALL.ranks)).sum();
        assert_eq!(*total, Some(expected));
    }
    assert_eq!(row.instances, vec![SMALL.steps as u64; SMALL.ranks]);
    // Per kernel name, each rank's launches and Σ duration, read from kernels.parquet.
    for rank in [0, 7] {
        let report = synthetic::rank_report(rank, &SMALL);
        for k in &m.kernel_rows {
            let mine: Vec<u64> = report
                .kernels
                .iter()
                .filter(|x| x.kernel_name.as_deref() == Some(k.path.as_str()))
                .filter_map(|x| x.duration_ns)
                .collect();
            assert_eq!(k.instances[rank], mine.len() as u64, "{} rank {rank}", k.path);
            assert_eq!(k.gpu_time_ns[rank], Some(mine.iter().sum()), "{} rank {rank}", k.path);
        }
        let launches: u64 = m.kernel_rows.iter().map(|k| k.instances[rank]).sum();
        assert_eq!(launches, SMALL.kernels as u64);
    }
    let kernels_csv = std::fs::read_to_string(tmp.path().join("merged_kernels.csv")).unwrap();
    assert!(kernels_csv.starts_with("\"kernel_name\",\"processes\",\"measured\","), "{kernels_csv}");
    assert_eq!(kernels_csv.lines().count(), 1 + m.kernel_rows.len());

    let csv = std::fs::read_to_string(tmp.path().join(STRAGGLERS_CSV)).unwrap();
    let first = csv.lines().nth(1).unwrap();
    assert!(first.starts_with("0,12,"), "{first}");
    assert!(first.contains(&format!("\"{}\"", label(straggler(0, SMALL.ranks)))), "{first}");
    // No report.json: the index lists every rank, no merged trace.
    assert!(!tmp.path().join(MERGED_TRACE).exists());
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join(TRACE_INDEX)).unwrap()).unwrap();
    assert_eq!(index["ranks"].as_array().unwrap().len(), SMALL.ranks);
    assert!(index["merged_trace"].is_null());
    let slowest_sum: u64 =
        index["ranks"].as_array().unwrap().iter().map(|r| r["steps_slowest"].as_u64().unwrap()).sum();
    assert_eq!(slowest_sum, SMALL.steps as u64, "each step has one straggler");
    assert!(
        out.trace_note.starts_with("no merged trace:") && out.trace_note.contains("have no report.json"),
        "{}",
        out.trace_note
    );
}

fn golden(scale: f64) -> Report {
    let mut r = Report::from_json(include_str!("golden/report.json")).unwrap();
    r.meta.device_name = Some("NVIDIA H200".into());
    for row in &mut r.ranges {
        row.gpu_time_ns = row.gpu_time_ns.map(|t| (t as f64 * scale) as u64);
    }
    r
}

#[test]
fn parquet_and_report_json_merge_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, scale) in [1.0, 1.7, 0.6].into_iter().enumerate() {
        golden(scale).write_all_as(tmp.path().join(format!("r{i}")), OutputFormats::default()).unwrap();
    }
    let from_parquet = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap().merged;
    for i in 0..3 {
        std::fs::remove_file(tmp.path().join(format!("r{i}/ranges.parquet"))).unwrap();
    }
    let from_json = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap();
    assert_eq!(from_parquet, from_json.merged);
    let steps = from_json.merged.steps.as_ref().unwrap();
    assert_eq!(steps.path, "train_step");
    assert!(steps.rows.iter().all(|r| r.spread.slowest == Some(1)), "the rank scaled 1.7 is slowest");
    // Three ranks with report.json: the merged trace holds all of them.
    assert!(tmp.path().join(MERGED_TRACE).is_file());
    assert_eq!(from_json.trace_note, "every process (3)");
}

#[test]
fn many_ranks_get_a_merged_trace_of_two_and_an_index() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..10 {
        // r03 is the slowest; r00..r09 scale up to 1.9 but r03 at 3.0.
        let scale = if i == 3 { 3.0 } else { 1.0 + i as f64 / 10.0 };
        golden(scale).write_all_as(tmp.path().join(format!("r{i:02}")), OutputFormats::PARQUET).unwrap();
    }
    let out = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap();
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join(MERGED_TRACE)).unwrap()).unwrap();
    let labels: Vec<&str> =
        trace["otherData"]["processes"].as_array().unwrap().iter().map(|p| p["label"].as_str().unwrap()).collect();
    assert_eq!(labels[0], "r03", "the slowest most often first");
    assert_eq!(labels.len(), 2);
    assert!(trace["otherData"]["selection"].as_str().unwrap().starts_with("2 of 10 processes: r03"));
    assert!(out.trace_note.contains("--trace-ranks"), "{}", out.trace_note);
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join(TRACE_INDEX)).unwrap()).unwrap();
    assert_eq!(index["ranks"][3]["trace"], "r03/trace.json");
    assert_eq!(index["ranks"][3]["in_merged_trace"], true);

    let chosen = MergeOptions { trace_ranks: Some(vec!["r01".into(), "r02".into()]), ..MergeOptions::default() };
    merge_dir_with(tmp.path(), &chosen).unwrap();
    let e = merge_dir_with(tmp.path(), &MergeOptions { trace_ranks: Some(vec!["r99".into()]), ..chosen.clone() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("no process 'r99'") && e.contains("r00, r01"), "{e}");
    let nine = MergeOptions { trace_ranks: Some((0..9).map(|i| format!("r{i:02}")).collect()), ..chosen };
    assert!(merge_dir_with(tmp.path(), &nine).unwrap_err().to_string().contains("at most 8"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    golden(1.0).write_all_as(tmp.path().join("a"), OutputFormats::default()).unwrap();
    let mut other = golden(1.0);
    other.meta.metrics.truncate(1);
    other.write_all_as(tmp.path().join("b"), OutputFormats::default()).unwrap();
    let e = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap_err().to_string();
    assert!(e.contains("b collected other metrics than a") && e.contains("--metrics"), "{e}");

    std::fs::remove_dir_all(tmp.path().join("b")).unwrap();
    let cut = tmp.path().join("c");
    golden(1.0).write_all_as(&cut, OutputFormats::PARQUET).unwrap();
    let bytes = std::fs::read(cut.join("ranges.parquet")).unwrap();
    std::fs::write(cut.join("ranges.parquet"), &bytes[..bytes.len() - 100]).unwrap();
    // A rank that cannot be read is left out and named (issue 43); --strict fails on it.
    let strict = MergeOptions { strict: true, ..MergeOptions::default() };
    let e = merge_dir_with(tmp.path(), &strict).unwrap_err().to_string();
    assert!(e.contains("c/ranges.parquet") && e.contains("not a readable Parquet file"), "{e}");
    let merged = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap().merged;
    assert_eq!(merged.processes, ["a"]);
    assert_eq!(merged.unreadable.len(), 1);
    let left_out = &merged.unreadable[0];
    assert!(left_out.starts_with("c: ") && left_out.contains("not a readable Parquet file"), "{left_out}");

    std::fs::write(cut.join("ranges.parquet"), b"not parquet").unwrap();
    assert!(merge_dir_with(tmp.path(), &strict).is_err());
    assert_eq!(merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap().merged.unreadable.len(), 1);
}

fn gmprof(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn the_command_line_prints_the_straggler_table() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Synthetic { ranks: 20, kernels: 400, steps: 6 };
    for rank in 0..s.ranks {
        write_rank(tmp.path(), rank, &s);
    }
    let root: &Path = tmp.path();
    let (ok, stdout, stderr) = gmprof(&["merge".as_ref(), root.as_os_str(), "--step-time".as_ref(), "gpu".as_ref()]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.starts_with("# 20 process(es):\n#   NVIDIA H100 80GB HBM3: 20 process(es), node000-0 .. node002-3\n"),
        "{stdout}"
    );
    assert!(stdout.contains("steps: 6 instance(s) of 'train_step' (GPU time;"), "{stdout}");
    let widest = stdout.lines().skip_while(|l| !l.trim_start().starts_with("step ")).nth(1).unwrap();
    let step: usize = widest.split_whitespace().next().unwrap().parse().unwrap();
    assert!(widest.ends_with(&label(straggler(step, s.ranks))), "{widest}");
    assert!(stderr.contains("stragglers.csv") && stderr.contains("trace-index.json"), "{stderr}");
    let (ok, stdout, _) = gmprof(&[
        "merge".as_ref(),
        root.as_os_str(),
        "--step".as_ref(),
        "train_step/forward".as_ref(),
        "--step-time".as_ref(),
        "wall".as_ref(),
    ]);
    assert!(ok && stdout.contains("instance(s) of 'train_step/forward' (wall time; --step)"), "{stdout}");
    let _ = StepTime::Wall;
}

/// Ranks whose tables another tool rewrote with Snappy (pyarrow's and DuckDB's default) merge
/// the same.
#[test]
fn snappy_tables_written_by_other_tools_merge_the_same() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    let tmp = tempfile::tempdir().unwrap();
    let s = Synthetic { ranks: 3, kernels: 300, steps: 3 };
    for rank in 0..s.ranks {
        write_rank(tmp.path(), rank, &s);
    }
    let before = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap().merged;
    for rank in 0..s.ranks {
        for table in ["ranges.parquet", "kernels.parquet"] {
            let path = tmp.path().join(label(rank)).join(table);
            let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
            let kv = builder.metadata().file_metadata().key_value_metadata().cloned();
            let schema = builder.schema().clone();
            let batches: Vec<_> = builder.build().unwrap().map(Result::unwrap).collect();
            let props =
                WriterProperties::builder().set_compression(Compression::SNAPPY).set_key_value_metadata(kv).build();
            let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, Some(props)).unwrap();
            for b in &batches {
                w.write(b).unwrap();
            }
            w.close().unwrap();
        }
    }
    let after = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap().merged;
    assert_eq!(before, after);
    assert_eq!(after.steps.unwrap().rows[1].spread.slowest, Some(straggler(1, s.ranks)));
}
