//! The command line over streamed outputs (issue 42): `tests/data/streamed/` holds two ranks
//! of a run streamed through the capture path (written by
//! `capture::profiler::stream_readers_tests::write_stream_fixture`; `rank1`'s kernels twice
//! as long as `rank0`'s). `gmprof report`, `merge` and `diff` read them: the summary from the
//! aggregates, `merged.csv` from the parts (equal to a recomputation from them), the diff
//! from the aggregates; a corrupt part is named, not fatal.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use gmprof::report::parquet::part_reader::read_parts;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/streamed")
}

/// A copy of the fixture (merge writes beside the ranks).
fn copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), tmp.path());
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn gmprof<S: AsRef<OsStr>>(args: &[S]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Σ gpu_time_ns per range path of a rank's `ranges/` parts.
fn range_totals(rank: &Path) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let read = read_parts(rank, "ranges", &["path", "gpu_time_ns"], |b| {
        for r in 0..b.len() {
            *out.entry(b.text(0, r)?.unwrap().to_owned()).or_default() += b.int(1, r)?.unwrap_or(0);
        }
        Ok(())
    })
    .unwrap();
    assert!(read.skipped.is_empty() && read.rows > 0, "{read:?}");
    out
}

#[test]
fn report_prints_the_streamed_summary_and_refuses_an_empty_csv() {
    let (code, out, err) = gmprof(&[OsStr::new("report"), fixture().join("rank0").as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("streamed: 144 kernels, 0 transfers, 72 range instances, 24 steps"), "{out}");
    assert!(out.contains("kernels by duration") && out.contains("layernorm"), "{out}");
    let (code, out, err) = gmprof(&[OsStr::new("report"), fixture().join("rank0").as_os_str(), OsStr::new("--csv")]);
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("a streamed run") && err.contains("part files") && err.contains("gmprof.load"), "{err}");
}

#[test]
fn merge_of_streamed_ranks_equals_a_recomputation_from_their_parts() {
    let tmp = copy();
    let (code, out, err) = gmprof(&[OsStr::new("merge"), tmp.path().as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("steps: 24 instance(s) of 'step'") && out.contains("slowest most often: rank1"), "{out}");
    let csv = std::fs::read_to_string(tmp.path().join("merged.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "\"path\",\"processes\",\"measured\",\"min_gpu_time_ns\",\"median_gpu_time_ns\",\"max_gpu_time_ns\",\"slowest\",\
         \"gpu_time_ns[rank0]\",\"gpu_time_ns[rank1]\""
    );
    let (r0, r1) = (range_totals(&tmp.path().join("rank0")), range_totals(&tmp.path().join("rank1")));
    let mut rows = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let path = cells[0].trim_matches('"');
        assert_eq!(cells[7].parse::<i64>().unwrap(), r0[path], "{line}");
        assert_eq!(cells[8].parse::<i64>().unwrap(), r1[path], "{line}");
        assert_eq!(r1[path], 2 * r0[path], "{line}");
        rows += 1;
    }
    assert_eq!(rows, r0.len());
    let stragglers = std::fs::read_to_string(tmp.path().join("stragglers.csv")).unwrap();
    assert_eq!(stragglers.lines().filter(|l| !l.starts_with('#')).count(), 1 + 24, "a header and a row per step");
}

#[test]
fn merge_names_a_corrupt_part_and_strict_fails_on_it() {
    let tmp = copy();
    let part = tmp.path().join("rank1/kernels/part-00000.parquet");
    std::fs::write(&part, b"PAR1 cut short").unwrap();
    let part = tmp.path().join("rank1/ranges/part-00000.parquet");
    let bytes = std::fs::read(&part).unwrap();
    std::fs::write(&part, &bytes[..100]).unwrap();
    let (code, out, err) = gmprof(&[OsStr::new("merge"), tmp.path().as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("rank1: left out, unreadable: ranges/part-00000.parquet"), "{out}");
    let (code, _, err) = gmprof(&[OsStr::new("merge"), tmp.path().as_os_str(), OsStr::new("--strict")]);
    assert_eq!(code, Some(1));
    assert!(err.contains("rank1: unreadable part files") && err.contains("ranges/part-00000.parquet"), "{err}");
}

#[test]
fn diff_of_streamed_runs_marks_the_slower_one() {
    let (r0, r1) = (fixture().join("rank0"), fixture().join("rank1"));
    let (code, out, err) =
        gmprof(&[OsStr::new("diff"), r0.as_os_str(), r1.as_os_str(), OsStr::new("--csv"), OsStr::new("-")]);
    assert_eq!(code, Some(0), "{err}");
    let header = out.lines().find(|l| !l.starts_with('#')).unwrap();
    let column = |name: &str| header.split(',').position(|c| c.trim_matches('"') == name).unwrap();
    let (name, verdict, pct) = (column("name"), column("verdict"), column("change_pct"));
    let rows: Vec<Vec<&str>> =
        out.lines().filter(|l| !l.starts_with('#')).skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 5, "2 range groups, 3 kernels: {out}");
    for r in &rows {
        assert_eq!(r[verdict].trim_matches('"'), "slower", "{r:?}");
        assert!((r[pct].parse::<f64>().unwrap() - 100.0).abs() < 1e-6, "{r:?}");
    }
    assert!(rows.iter().any(|r| r[name].trim_matches('"') == "step/layer #"), "{out}");
    // Gates work on it.
    let (code, _, err) =
        gmprof(&[OsStr::new("diff"), r0.as_os_str(), r1.as_os_str(), OsStr::new("--fail-if-slower"), OsStr::new("5")]);
    assert_eq!(code, Some(3), "{err}");
}

#[test]
fn report_html_draws_every_step_from_the_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("report.html");
    let (code, _, err) =
        gmprof(&[OsStr::new("report"), fixture().join("rank1").as_os_str(), OsStr::new("--html"), html.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("\"steps_shown\":24,\"steps_left_out\":0"), "every step drawn");
    assert!(page.contains("\"steps_source\":\"steps/\""));
    assert!(page.contains("id=\"streamed-section\""));
}

#[test]
fn a_streamed_process_killed_before_its_report_is_named_and_merged_from_its_parts() {
    let tmp = copy();
    std::fs::remove_file(tmp.path().join("rank1/report.json")).unwrap();
    // gmprof report folds its summary from the parts: the same counts and kernel table as
    // the report it would have written, and it says how it was read.
    let (code, killed, err) = gmprof(&[OsStr::new("report"), tmp.path().join("rank1").as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    let (code, whole, err) = gmprof(&[OsStr::new("report"), fixture().join("rank1").as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    let line = |o: &str| o.lines().find(|l| l.starts_with("streamed:")).map(str::to_owned);
    assert!(line(&whole).is_some(), "{whole}");
    assert_eq!(line(&killed), line(&whole), "{killed}");
    let kernel_table = |o: &str| -> Vec<String> {
        o.lines()
            .skip_while(|l| !l.contains("kernels by duration"))
            .take_while(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    assert!(kernel_table(&whole).len() > 2, "{whole}");
    assert_eq!(kernel_table(&killed), kernel_table(&whole));
    assert!(killed.contains("killed before its end"), "{killed}");
    let (code, _, err) = gmprof(&[OsStr::new("report"), tmp.path().join("rank1").as_os_str(), OsStr::new("--csv")]);
    assert_eq!(code, Some(1));
    assert!(err.contains("streamed part files but no report.json") && err.contains("gmprof.load"), "{err}");
    let (code, _, err) =
        gmprof(&[OsStr::new("diff"), tmp.path().join("rank0").as_os_str(), tmp.path().join("rank1").as_os_str()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("streamed part files but no report.json"), "{err}");
    // merge reads it from its parts, and says so; merged.csv is that of the complete ranks.
    let complete = copy();
    let (code, _, err) = gmprof(&[OsStr::new("merge"), complete.path().as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = gmprof(&[OsStr::new("merge"), tmp.path().as_os_str(), OsStr::new("--strict")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("rank1: streamed, then killed before its report: merged from its part files"), "{out}");
    let csv = |root: &Path| std::fs::read_to_string(root.join("merged.csv")).unwrap();
    assert_eq!(csv(tmp.path()), csv(complete.path()));
}
