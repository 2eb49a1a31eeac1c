//! Several processes' outputs: finding them, and (`gmprof merge`) one summary across them.
//!
//! Layer 3, beside the other exporters. Each profiled process (a rank of a distributed
//! job, a worker) writes its own directory (`ways_in::layout` names it); [`result_dirs`]
//! finds them under an output root and [`ProcessReport::read_all`] reads their reports.
//! [`Merged::of`] puts them side by side: per range path, each process's total GPU time
//! (Σ over the path's instances), then the minimum, median and maximum across the
//! processes that measured it and the slowest process. A process that measured nothing
//! for a path, or has no such range, is blank, never 0, and is left out of the statistics.
//! [`Merged::write_csv`] writes `merged.csv`; [`Merged`]'s `Display` is the summary table;
//! [`crate::report::merge_trace`] puts the processes' timelines in one Perfetto trace.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::csv::{write_file, RecordWriter};
use crate::report::summary::{cell, format_duration_ns, BLANK};
use crate::report::Report;

/// The file `gmprof merge` writes into the output root.
pub const MERGED_CSV: &str = "merged.csv";

/// One process's report and its label (its directory, relative to the root).
#[derive(Clone, Debug)]
pub struct ProcessReport {
    /// The directory's path relative to the root (`node7-0`); for the root itself, its name.
    pub label: String,
    /// The directory.
    pub dir: PathBuf,
    /// Its report.
    pub report: Report,
}

impl ProcessReport {
    /// Reads every `report.json` under `root` (itself and its subdirectories).
    pub fn read_all(root: &Path) -> Result<Vec<ProcessReport>> {
        result_dirs(root, &["report.json"])
            .into_iter()
            .map(|dir| {
                let report = Report::read_json(dir.join("report.json"))?;
                let rel = dir.strip_prefix(root).unwrap_or(&dir);
                // The root's own process (the program `gmprof run` started) is named by the root.
                let label = if rel.as_os_str().is_empty() {
                    root.canonicalize()
                        .ok()
                        .and_then(|r| r.file_name().map(|n| n.to_string_lossy().into_owned()))
                        .unwrap_or_else(|| ".".to_owned())
                } else {
                    rel.display().to_string()
                };
                Ok(ProcessReport { label, dir, report })
            })
            .collect()
    }
}

/// One range path across processes.
#[derive(Clone, Debug, PartialEq)]
pub struct MergedRow {
    /// The range path.
    pub path: String,
    /// Per process (in [`Merged::processes`] order): Σ GPU time of the path's instances, ns;
    /// `None` when the process has no such range or measured no time for it.
    pub gpu_time_ns: Vec<Option<u64>>,
    /// Per process: instances of the path (0 when absent).
    pub instances: Vec<u64>,
    /// Smallest measured total.
    pub min_ns: Option<u64>,
    /// Median of the measured totals (the mean of the two middle ones for an even count).
    pub median_ns: Option<u64>,
    /// Largest measured total.
    pub max_ns: Option<u64>,
    /// The label of the (first) process with the largest total; `None` when every process
    /// that measured the path measured the same.
    pub slowest: Option<String>,
}

impl MergedRow {
    /// Processes that measured a time for the path.
    pub fn measured(&self) -> usize {
        self.gpu_time_ns.iter().flatten().count()
    }
}

/// Several processes' reports side by side.
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// Process labels, in column order.
    pub processes: Vec<String>,
    /// Each process's GPU (`None`: not recorded).
    pub devices: Vec<Option<String>>,
    /// One row per range path, in order of first appearance.
    pub rows: Vec<MergedRow>,
    /// What the reader must know: different modes, partial runs.
    pub warnings: Vec<String>,
}

impl Merged {
    /// Merges `processes`.
    pub fn of(processes: &[ProcessReport]) -> Merged {
        let mut paths: Vec<&str> = Vec::new();
        for p in processes {
            for row in &p.report.ranges {
                if !paths.contains(&row.path.as_str()) {
                    paths.push(&row.path);
                }
            }
        }
        let rows = paths
            .iter()
            .map(|&path| {
                let mut gpu_time_ns = Vec::with_capacity(processes.len());
                let mut instances = Vec::with_capacity(processes.len());
                for p in processes {
                    let rows: Vec<_> = p.report.ranges.iter().filter(|r| r.path == path).collect();
                    instances.push(rows.len() as u64);
                    let times: Vec<u64> = rows.iter().filter_map(|r| r.gpu_time_ns).collect();
                    gpu_time_ns.push((!times.is_empty()).then(|| times.iter().sum()));
                }
                let mut measured: Vec<(u64, usize)> =
                    gpu_time_ns.iter().enumerate().filter_map(|(i, t)| t.map(|t| (t, i))).collect();
                measured.sort();
                let n = measured.len();
                let median_ns = match n {
                    0 => None,
                    _ if n % 2 == 1 => Some(measured[n / 2].0),
                    _ => Some(((measured[n / 2 - 1].0 as u128 + measured[n / 2].0 as u128) / 2) as u64),
                };
                MergedRow {
                    path: path.to_owned(),
                    min_ns: measured.first().map(|m| m.0),
                    median_ns,
                    max_ns: measured.last().map(|m| m.0),
                    // The first process with the largest total; none when all are equal.
                    slowest: measured
                        .last()
                        .filter(|last| last.0 > measured[0].0)
                        .and_then(|last| measured.iter().find(|m| m.0 == last.0))
                        .map(|m| processes[m.1].label.clone()),
                    gpu_time_ns,
                    instances,
                }
            })
            .collect();
        let mut warnings = Vec::new();
        let modes: Vec<_> = processes.iter().map(|p| p.report.meta.mode).collect();
        if modes.windows(2).any(|w| w[0] != w[1]) {
            let list: Vec<String> =
                processes.iter().map(|p| format!("{}: {}", p.label, p.report.meta.mode.as_str())).collect();
            warnings.push(format!("the processes ran in different modes ({})", list.join(", ")));
        }
        for p in processes {
            if let Some(end) = p.report.meta.run_end.as_ref().filter(|e| !e.is_complete()) {
                warnings.push(format!("{}: {}", p.label, end.describe()));
            } else if let Some(line) = crate::report::summary::ending_line(&p.report) {
                // Finished with errors: the CUDA error and the kernels in flight.
                warnings.push(format!("{}: {line}", p.label));
            }
        }
        Merged {
            processes: processes.iter().map(|p| p.label.clone()).collect(),
            devices: processes.iter().map(|p| p.report.meta.device_name.clone()).collect(),
            rows,
            warnings,
        }
    }

    /// Writes `merged.csv`: path, processes with the path, processes that measured it, min,
    /// median, max (ns), the slowest process, then each process's total (ns); blank = not
    /// measured.
    pub fn write_csv_to<W: std::io::Write>(&self, out: W) -> Result<()> {
        let mut w = RecordWriter::new(out, "merged CSV");
        let fixed = ["path", "processes", "measured", "min_gpu_time_ns", "median_gpu_time_ns", "max_gpu_time_ns"];
        let per_process: Vec<String> = self.processes.iter().map(|p| format!("gpu_time_ns[{p}]")).collect();
        w.header(fixed.into_iter().chain(["slowest"]).chain(per_process.iter().map(String::as_str)))?;
        for row in &self.rows {
            w.text(&row.path)?;
            w.display(row.instances.iter().filter(|&&n| n > 0).count())?;
            w.display(row.measured())?;
            w.optional(row.min_ns)?;
            w.optional(row.median_ns)?;
            w.optional(row.max_ns)?;
            w.text(row.slowest.as_deref().unwrap_or(""))?;
            for t in &row.gpu_time_ns {
                w.optional(*t)?;
            }
            w.end_record()?;
        }
        w.finish()
    }

    /// Writes `merged.csv` to `path` (replaced whole).
    pub fn write_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_csv_to(out))
    }
}

impl fmt::Display for Merged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# {} process(es):", self.processes.len())?;
        for (label, device) in self.processes.iter().zip(&self.devices) {
            writeln!(f, "#   {}: {}", cell(label), device.as_deref().map_or(BLANK.to_owned(), cell))?;
        }
        for w in &self.warnings {
            writeln!(f, "# warning: {}", cell(w))?;
        }
        let ns = |t: Option<u64>| t.map_or_else(|| BLANK.to_owned(), |t| format_duration_ns(t as f64));
        let width = self.rows.iter().map(|r| cell(&r.path).chars().count()).max().unwrap_or(4).max(10);
        writeln!(
            f,
            "{:<width$}  {:>8}  {:>12}  {:>12}  {:>12}  slowest",
            "range path", "measured", "min GPU", "median GPU", "max GPU"
        )?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<width$}  {:>8}  {:>12}  {:>12}  {:>12}  {}",
                cell(&r.path),
                format!("{}/{}", r.measured(), self.processes.len()),
                ns(r.min_ns),
                ns(r.median_ns),
                ns(r.max_ns),
                r.slowest.as_deref().map_or(BLANK.to_owned(), cell)
            )?;
        }
        Ok(())
    }
}

/// Reads the processes under `root`, merges them and writes `root/merged.csv` and
/// `root/merged-trace.json` ([`crate::report::merge_trace`]).
pub fn merge_dir(root: &Path) -> Result<Merged> {
    let processes = ProcessReport::read_all(root)?;
    if processes.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{}: no report.json in it or in its subdirectories (to depth {SCAN_DEPTH})",
            root.display()
        )));
    }
    let merged = Merged::of(&processes);
    merged.write_csv(root.join(MERGED_CSV))?;
    crate::report::merge_trace::merged_trace(&processes).write(root.join(crate::report::merge_trace::MERGED_TRACE))?;
    Ok(merged)
}

/// How deep below the root process directories are looked for (`out/%h/%p` is two).
pub const SCAN_DEPTH: usize = 3;

/// `root` and its subdirectories (to [`SCAN_DEPTH`]) that hold any of `files`, sorted.
pub fn result_dirs(root: &Path, files: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, files: &[&str], out: &mut Vec<PathBuf>) {
        if files.iter().any(|f| dir.join(f).is_file()) {
            out.push(dir.to_owned());
        }
        if depth == 0 {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut subdirs: Vec<PathBuf> =
            entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir() && !p.is_symlink()).collect();
        subdirs.sort();
        for sub in subdirs {
            walk(&sub, depth - 1, files, out);
        }
    }
    let mut out = Vec::new();
    walk(root, SCAN_DEPTH, files, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The golden report as one rank wrote it, each range's GPU time scaled by `scale`.
    fn rank_report(scale: f64, gpu: &str) -> Report {
        let mut r = Report::from_json(include_str!("../../tests/golden/report.json")).unwrap();
        r.meta.device_name = Some(gpu.into());
        for row in &mut r.ranges {
            row.gpu_time_ns = row.gpu_time_ns.map(|t| (t as f64 * scale) as u64);
        }
        r
    }

    fn totals(r: &Report, path: &str) -> Option<u64> {
        let t: Vec<u64> = r.ranges.iter().filter(|x| x.path == path).filter_map(|x| x.gpu_time_ns).collect();
        (!t.is_empty()).then(|| t.iter().sum())
    }

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

    #[test]
    fn a_path_a_rank_did_not_measure_is_blank_and_left_out() {
        let mut a = rank_report(1.0, "A");
        let mut b = rank_report(2.0, "B");
        a.ranges.retain(|r| r.path != "data_loader");
        for r in b.ranges.iter_mut().filter(|r| r.path == "train_step/forward") {
            r.gpu_time_ns = None;
        }
        b.meta.mode = crate::model::ProfilingMode::Trace;
        let procs = [
            ProcessReport { label: "r0".into(), dir: "r0".into(), report: a.clone() },
            ProcessReport { label: "r1".into(), dir: "r1".into(), report: b.clone() },
        ];
        let m = Merged::of(&procs);
        let loader = m.rows.iter().find(|r| r.path == "data_loader").unwrap();
        assert_eq!(loader.instances, [0, 2]);
        assert_eq!(loader.gpu_time_ns[0], None);
        assert_eq!(loader.median_ns, totals(&b, "data_loader"));
        assert_eq!(loader.slowest, None, "measured by one process only");
        let fwd = m.rows.iter().find(|r| r.path == "train_step/forward").unwrap();
        assert_eq!(fwd.gpu_time_ns, [totals(&a, "train_step/forward"), None]);
        assert_eq!(fwd.slowest, None, "one measurement: nothing is slower");
        assert_eq!((fwd.min_ns, fwd.max_ns, fwd.measured()), (fwd.gpu_time_ns[0], fwd.gpu_time_ns[0], 1));
        assert!(m.warnings[0].contains("different modes") && m.warnings[0].contains("r1: trace"), "{:?}", m.warnings);
        let mut out = Vec::new();
        m.write_csv_to(&mut out).unwrap();
        let csv = String::from_utf8(out).unwrap();
        let line = csv.lines().find(|l| l.starts_with("\"train_step/forward\",")).unwrap();
        let t = fwd.gpu_time_ns[0].unwrap();
        assert_eq!(line, format!("\"train_step/forward\",2,1,{t},{t},{t},\"\",{t},\"\""), "blank, not 0");
        // Equal totals: no slowest; a tie at the top names the first.
        let c = ProcessReport { label: "r2".into(), dir: "r2".into(), report: b.clone() };
        let m = Merged::of(&[procs[0].clone(), procs[0].clone(), procs[1].clone(), c]);
        assert_eq!(m.rows.iter().find(|r| r.path == "<root>").unwrap().slowest.as_deref(), Some("r1"));
        let m = Merged::of(&[procs[0].clone(), procs[0].clone()]);
        assert!(m.rows.iter().all(|r| r.slowest.is_none()));
    }

    #[test]
    fn a_rank_whose_context_failed_is_named_with_its_error() {
        use crate::model::{CudaError, FailedStep, FinishStep, RunEnd};
        let mut failed = rank_report(1.0, "x");
        failed.meta.run_end = Some(RunEnd::Finished { by: "process exit".into() }.with_failures(
            Some(CudaError {
                code: 700,
                name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                message: "an illegal memory access was encountered".into(),
            }),
            vec![FailedStep { step: FinishStep::Synchronize, error: "cuCtxSynchronize failed".into() }],
        ));
        let procs = [
            ProcessReport { label: "r0".into(), dir: "r0".into(), report: rank_report(1.0, "x") },
            ProcessReport { label: "r1".into(), dir: "r1".into(), report: failed },
        ];
        let m = Merged::of(&procs);
        assert_eq!(
            m.warnings,
            ["r1: run ended with errors: finished (process exit), after CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal \
              memory access was encountered; failed while finishing: synchronize; the outputs hold what was collected"]
        );
    }

    #[test]
    fn merging_an_empty_directory_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let e = merge_dir(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("no report.json"), "{e}");
    }

    #[test]
    fn result_dirs_finds_the_root_and_nested_process_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert!(result_dirs(&root.join("missing"), &["report.json"]).is_empty());
        for (dir, file) in
            [("", "report.json"), ("h-1", "report.json"), ("h-0", "injection.json"), ("h/7", "report.json")]
        {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join(file), "{}").unwrap();
        }
        std::fs::create_dir_all(root.join("empty/a/b/c/d")).unwrap();
        std::fs::write(root.join("empty/a/b/c/d/report.json"), "{}").unwrap();
        let found = result_dirs(root, &["report.json", "injection.json"]);
        let rel: Vec<_> = found.iter().map(|p| p.strip_prefix(root).unwrap().to_owned()).collect();
        assert_eq!(rel, ["", "h/7", "h-0", "h-1"].map(PathBuf::from), "too deep is not looked at");
        assert_eq!(result_dirs(root, &["injection.json"]), [root.join("h-0")]);
    }
}
