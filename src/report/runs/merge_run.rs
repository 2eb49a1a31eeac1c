//! `gmprof merge`: the processes under an output root read one at a time, merged, and the
//! merge's files written.
//!
//! Layer 3. [`merge_dir_with`] finds the process directories ([`result_dirs`]), reads each
//! one's range times ([`RankRanges::read`]: `ranges.parquet`'s few columns, or `report.json`
//! when there is no Parquet) and folds it into a [`MergeBuilder`] before the next is read,
//! so memory grows with range paths × processes and steps × processes (the numbers the
//! merged tables hold), never with kernels: 512 ranks of 200 000 kernels each merge in
//! seconds (BENCHMARKS.md). Then `merged.csv` (per range path, the spread across
//! processes), `merged_kernels.csv` (the same per kernel name), `stragglers.csv`
//! ([`stragglers`](super::stragglers)), `trace-index.json` and `merged-trace.json` of a few
//! ranks ([`merge_trace`](super::merge_trace)).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::runs::merge::{
    result_dirs, MergeBuilder, MergeOptions, Merged, MERGED_CSV, MERGED_KERNELS_CSV, SCAN_DEPTH,
};
use crate::report::runs::rank_ranges::{label, streamed_without_report, RankRanges, RANK_FILES, STREAMED_MARKERS};
use crate::report::runs::stragglers::STRAGGLERS_CSV;

/// What `gmprof merge` wrote.
#[derive(Clone, Debug)]
pub struct MergeOutcome {
    /// The merge.
    pub merged: Merged,
    /// The files written, in order.
    pub files: Vec<PathBuf>,
    /// What the merged trace holds, or why there is none.
    pub trace_note: String,
}

/// Merges the processes under `root` with the default options; see [`merge_dir_with`].
pub fn merge_dir(root: &Path) -> Result<Merged> {
    merge_dir_with(root, &MergeOptions::default()).map(|o| o.merged)
}

/// Reads the processes under `root` one at a time (each process's `ranges.parquet` and
/// `kernels.parquet`, or its `report.json` when it has no Parquet; dropped before the next is
/// read), merges them and writes `root/merged.csv`, `root/merged_kernels.csv`,
/// `root/stragglers.csv` (when a range repeats), `root/trace-index.json`
/// and `root/merged-trace.json` of a few ranks ([`crate::report::runs::merge_trace`]).
pub fn merge_dir_with(root: &Path, options: &MergeOptions) -> Result<MergeOutcome> {
    // With the processes that streamed and were killed before their report (part files only).
    let mut dirs = result_dirs(root, &RANK_FILES);
    dirs.extend(result_dirs(root, &STREAMED_MARKERS).into_iter().filter(|d| streamed_without_report(d)));
    dirs.sort();
    if dirs.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{}: no report.json or ranges.parquet in it or in its subdirectories (to depth {SCAN_DEPTH}): \
             point gmprof merge at the output directory of a run (gmprof run --out)",
            root.display()
        )));
    }
    let mut builder = MergeBuilder::new(options);
    let mut unreadable = Vec::new();
    let mut read = Vec::new();
    for dir in &dirs {
        // One bad process does not sink the merge (unless --strict): it is left out and named.
        match RankRanges::read_with(root, dir, builder.step_path(), options.step_time) {
            Ok(rank) if options.strict && !rank.left_out.is_empty() => {
                return Err(Error::InvalidConfig(format!(
                    "{}: unreadable part files (without --strict they are left out and named): {}",
                    rank.label,
                    rank.left_out.join("; ")
                )))
            }
            Ok(rank) => {
                builder.add(&rank)?;
                read.push(dir.clone());
            }
            Err(e) if !options.strict => unreadable.push(format!("{}: {e}", label(root, dir))),
            Err(e) => return Err(e),
        }
    }
    if read.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{}: no process's outputs could be read: {}",
            root.display(),
            unreadable.join("; ")
        )));
    }
    let dirs = read;
    let mut merged = builder.finish();
    merged.unreadable = unreadable;
    let mut files = vec![root.join(MERGED_CSV), root.join(MERGED_KERNELS_CSV)];
    merged.write_csv(&files[0])?;
    merged.write_kernels_csv(&files[1])?;
    if let Some(steps) = &merged.steps {
        files.push(root.join(STRAGGLERS_CSV));
        steps.write_csv(root.join(STRAGGLERS_CSV))?;
    }
    let (index, trace_note) = crate::report::runs::merge_trace::write_traces(root, &dirs, &merged, options)?;
    files.extend(index);
    Ok(MergeOutcome { merged, files, trace_note })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::runs::merge::tests::{rank_report, totals};

    #[test]
    fn merge_gives_min_median_max_and_the_slowest_rank() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for (dir, scale) in [("node7-0", 1.0), ("node7-1", 1.5), ("node8-2", 0.5)] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            rank_report(scale, "NVIDIA H200").write_json(root.join(dir).join("report.json")).unwrap();
        }
        let merged = merge_dir(root).unwrap();
        assert_eq!(merged.processes, ["node7-0", "node7-1", "node8-2"]);
        let base = rank_report(1.0, "x");
        let step = totals(&base, "train_step").expect("the golden report times train_step");
        let row = merged.rows.iter().find(|r| r.path == "train_step").unwrap();
        assert_eq!(row.instances, [2, 2, 2]);
        let scaled = |scale: f64| totals(&rank_report(scale, "x"), "train_step");
        assert_eq!(row.gpu_time_ns, [Some(step), scaled(1.5), scaled(0.5)]);
        assert_eq!(row.min_ns, row.gpu_time_ns[2]);
        assert_eq!(row.median_ns, Some(step));
        assert_eq!(row.max_ns, row.gpu_time_ns[1]);
        assert!(row.max_ns.unwrap() > step && row.min_ns.unwrap() < step);
        assert_eq!(row.slowest.as_deref(), Some("node7-1"));
        // Paths keep the order of the first report.
        let first: Vec<&str> = merged.rows.iter().map(|r| r.path.as_str()).collect();
        let mut expected: Vec<&str> = Vec::new();
        for r in &base.ranges {
            if !expected.contains(&r.path.as_str()) {
                expected.push(&r.path);
            }
        }
        assert_eq!(first, expected);

        let csv = std::fs::read_to_string(root.join(MERGED_CSV)).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "\"path\",\"processes\",\"measured\",\"min_gpu_time_ns\",\"median_gpu_time_ns\",\"max_gpu_time_ns\",\"slowest\",\"gpu_time_ns[node7-0]\",\"gpu_time_ns[node7-1]\",\"gpu_time_ns[node8-2]\""
        );
        let step_line = csv.lines().find(|l| l.starts_with("\"train_step\",")).unwrap();
        let (lo, hi) = (row.min_ns.unwrap(), row.max_ns.unwrap());
        assert_eq!(step_line, format!("\"train_step\",3,3,{lo},{step},{hi},\"node7-1\",{step},{hi},{lo}"));
        let text = merged.to_string();
        assert!(text.contains("#   node7-1: NVIDIA H200"), "{text}");
        assert!(
            text.lines().any(|l| l.starts_with("train_step ") && l.contains("3/3") && l.ends_with("node7-1")),
            "{text}"
        );
    }

    /// Three ranks of the golden Parquet tables, one of them with its ranges.parquet cut in half.
    fn ranks_with_one_truncated() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        for r in ["node0-0", "node0-1", "node1-0"] {
            let dir = tmp.path().join(r);
            std::fs::create_dir(&dir).unwrap();
            for f in ["ranges.parquet", "kernels.parquet"] {
                std::fs::copy(golden.join(f), dir.join(f)).unwrap();
            }
        }
        let cut = tmp.path().join("node0-1/ranges.parquet");
        let bytes = std::fs::read(&cut).unwrap();
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        tmp
    }

    #[test]
    fn an_unreadable_rank_is_left_out_and_named_unless_strict() {
        let tmp = ranks_with_one_truncated();
        let root = tmp.path();
        let outcome = merge_dir_with(root, &MergeOptions::default()).unwrap();
        let merged = &outcome.merged;
        assert_eq!(merged.processes, ["node0-0", "node1-0"]);
        assert_eq!(merged.unreadable.len(), 1, "{:?}", merged.unreadable);
        assert!(merged.unreadable[0].starts_with("node0-1: "), "{:?}", merged.unreadable);
        assert!(merged.unreadable[0].contains("ranges.parquet"), "{:?}", merged.unreadable);
        let text = merged.to_string();
        let first = text.lines().next().unwrap();
        assert!(first.starts_with("# 1 process(es) left out, their outputs unreadable: node0-1: "), "{first}");
        let csv = std::fs::read_to_string(root.join(MERGED_CSV)).unwrap();
        let mut lines = csv.lines();
        assert!(lines.next().unwrap().starts_with("# left out, unreadable: node0-1: "), "{csv}");
        assert!(lines.next().unwrap().starts_with("\"path\",\"processes\""), "{csv}");
        assert!(csv.contains("gpu_time_ns[node1-0]") && !csv.contains("gpu_time_ns[node0-1]"), "{csv}");

        let strict = MergeOptions { strict: true, ..MergeOptions::default() };
        let e = merge_dir_with(root, &strict).unwrap_err().to_string();
        assert!(e.contains("node0-1") && e.contains("ranges.parquet"), "{e}");
    }

    #[test]
    fn a_merge_whose_every_rank_is_unreadable_fails_and_names_them() {
        let tmp = ranks_with_one_truncated();
        for r in ["node0-0", "node1-0"] {
            std::fs::write(tmp.path().join(r).join("ranges.parquet"), b"PAR1").unwrap();
        }
        let e = merge_dir_with(tmp.path(), &MergeOptions::default()).unwrap_err().to_string();
        assert!(e.contains("no process's outputs could be read"), "{e}");
        assert!(["node0-0", "node0-1", "node1-0"].iter().all(|r| e.contains(r)), "{e}");
    }

    #[test]
    fn merging_an_empty_directory_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let e = merge_dir(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("no report.json or ranges.parquet"), "{e}");
    }
}
