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

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::csv::{write_file, RecordWriter};
use crate::report::rank_ranges::RankRanges;
use crate::report::stragglers::{Spread, StepAccumulator, StepTable, StepTime};
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
        result_dirs(root, &["report.json"]).into_iter().map(|dir| Self::read(root, &dir)).collect()
    }

    /// Reads `dir/report.json`, labelled relative to `root`.
    pub fn read(root: &Path, dir: &Path) -> Result<ProcessReport> {
        let report = Report::read_json(dir.join("report.json"))?;
        Ok(ProcessReport { label: crate::report::rank_ranges::label(root, dir), dir: dir.to_owned(), report })
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
    /// Each process's kernel rows.
    pub kernels: Vec<u64>,
    /// One row per range path, in order of first appearance.
    pub rows: Vec<MergedRow>,
    /// The straggler table: per step, each process's time, the slowest and the spread
    /// (`None` when no range repeats).
    pub steps: Option<StepTable>,
    /// What the reader must know: different modes, partial runs.
    pub warnings: Vec<String>,
}

/// What `gmprof merge` is asked for beyond the defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MergeOptions {
    /// The step range's path (`None`: chosen from the first rank, see [`crate::report::stragglers`]).
    pub step: Option<String>,
    /// Which time of a step is compared.
    pub step_time: StepTime,
    /// The ranks whose timelines go into `merged-trace.json` (`None`: see
    /// [`crate::report::merge_trace::trace_ranks`]).
    pub trace_ranks: Option<Vec<String>>,
}

/// Builds a [`Merged`] one process at a time: it keeps, per range path and process, one
/// total and one instance count, and per step and process one time, never a process's rows.
#[derive(Clone, Debug)]
pub struct MergeBuilder {
    processes: Vec<String>,
    devices: Vec<Option<String>>,
    modes: Vec<crate::model::ProfilingMode>,
    kernels: Vec<u64>,
    warnings: Vec<String>,
    paths: Vec<String>,
    index: HashMap<String, usize>,
    totals: Vec<Vec<Option<u64>>>,
    instances: Vec<Vec<u64>>,
    metrics: Option<(String, Vec<String>)>,
    steps: StepAccumulator,
}

impl MergeBuilder {
    /// An empty merge.
    pub fn new(options: &MergeOptions) -> Self {
        Self {
            processes: Vec::new(),
            devices: Vec::new(),
            modes: Vec::new(),
            kernels: Vec::new(),
            warnings: Vec::new(),
            paths: Vec::new(),
            index: HashMap::new(),
            totals: Vec::new(),
            instances: Vec::new(),
            metrics: None,
            steps: StepAccumulator::new(options.step.clone(), options.step_time),
        }
    }

    /// Adds one process; an error when its metric set differs from the first process's
    /// (the directories are then not the ranks of one run).
    pub fn add(&mut self, rank: &RankRanges) -> Result<()> {
        let names: Vec<String> = rank.meta.metrics.iter().map(|m| m.metric.name.clone()).collect();
        match &self.metrics {
            None => self.metrics = Some((rank.label.clone(), names)),
            Some((first, theirs)) if *theirs != names => {
                return Err(Error::InvalidConfig(format!(
                    "{} collected other metrics than {first} ({} against {}): merge the ranks of one run \
                     (the same --metrics), or merge the two runs' directories apart",
                    rank.label,
                    list(&names),
                    list(theirs)
                )))
            }
            Some(_) => {}
        }
        let n = self.processes.len();
        let mut mine: HashMap<usize, (Option<u64>, u64)> = HashMap::new();
        for r in &rank.ranges {
            let i = match self.index.get(r.path.as_str()) {
                Some(&i) => i,
                None => {
                    self.paths.push(r.path.clone());
                    self.index.insert(r.path.clone(), self.paths.len() - 1);
                    self.totals.push(vec![None; n]);
                    self.instances.push(vec![0; n]);
                    self.paths.len() - 1
                }
            };
            let slot = mine.entry(i).or_insert((None, 0));
            slot.1 += 1;
            if let Some(t) = r.gpu_time_ns {
                slot.0 = Some(slot.0.unwrap_or(0).saturating_add(t));
            }
        }
        for (i, (totals, instances)) in self.totals.iter_mut().zip(&mut self.instances).enumerate() {
            let (total, count) = mine.get(&i).copied().unwrap_or((None, 0));
            totals.push(total);
            instances.push(count);
        }
        self.steps.add(rank);
        if let Some(end) = rank.meta.run_end.as_ref().filter(|e| !e.is_complete()) {
            self.warnings.push(format!("{}: {}", rank.label, end.describe()));
        } else if let Some(line) = &rank.ending {
            // Finished with errors: the CUDA error and the kernels in flight.
            self.warnings.push(format!("{}: {line}", rank.label));
        }
        self.processes.push(rank.label.clone());
        self.devices.push(rank.meta.device_name.clone());
        self.modes.push(rank.meta.mode);
        self.kernels.push(rank.meta.kernel_count);
        Ok(())
    }

    /// The merge.
    pub fn finish(self) -> Merged {
        let rows = self
            .paths
            .into_iter()
            .zip(self.totals)
            .zip(self.instances)
            .map(|((path, gpu_time_ns), instances)| {
                let s = Spread::of(&gpu_time_ns);
                MergedRow {
                    path,
                    min_ns: s.min,
                    median_ns: s.median,
                    max_ns: s.max,
                    slowest: s.slowest.map(|i| self.processes[i].clone()),
                    gpu_time_ns,
                    instances,
                }
            })
            .collect();
        let mut warnings = Vec::new();
        if self.modes.windows(2).any(|w| w[0] != w[1]) {
            let list: Vec<String> =
                self.processes.iter().zip(&self.modes).map(|(p, m)| format!("{p}: {}", m.as_str())).collect();
            warnings.push(format!("the processes ran in different modes ({})", list.join(", ")));
        }
        warnings.extend(self.warnings);
        Merged {
            processes: self.processes,
            devices: self.devices,
            kernels: self.kernels,
            rows,
            steps: self.steps.finish(),
            warnings,
        }
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    }
}

impl Merged {
    /// Merges `processes` (reports already read).
    pub fn of(processes: &[ProcessReport], options: &MergeOptions) -> Result<Merged> {
        let mut builder = MergeBuilder::new(options);
        for p in processes {
            builder.add(&RankRanges::of_report(p.label.clone(), p.dir.clone(), &p.report))?;
        }
        Ok(builder.finish())
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
        if self.processes.len() <= LISTED_PROCESSES {
            for (label, device) in self.processes.iter().zip(&self.devices) {
                writeln!(f, "#   {}: {}", cell(label), device.as_deref().map_or(BLANK.to_owned(), cell))?;
            }
        } else {
            // Hundreds of ranks: one line per GPU model, with the first and last label.
            let mut models: Vec<(Option<&str>, Vec<&str>)> = Vec::new();
            for (label, device) in self.processes.iter().zip(&self.devices) {
                match models.iter_mut().find(|m| m.0 == device.as_deref()) {
                    Some(m) => m.1.push(label),
                    None => models.push((device.as_deref(), vec![label])),
                }
            }
            for (device, labels) in models {
                writeln!(
                    f,
                    "#   {}: {} process(es), {} .. {}",
                    device.map_or(BLANK.to_owned(), cell),
                    labels.len(),
                    cell(labels[0]),
                    cell(labels[labels.len() - 1])
                )?;
            }
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
        match &self.steps {
            Some(steps) => write!(f, "\n{steps}")?,
            None => {
                writeln!(f, "\nsteps: no range repeats in the first process: `gmprof merge --step PATH` names one")?
            }
        }
        Ok(())
    }
}

/// Up to this many processes, the summary lists each with its GPU.
pub const LISTED_PROCESSES: usize = 16;

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
pub(crate) mod tests {
    use super::*;

    /// The golden report as one rank wrote it, each range's GPU time scaled by `scale`.
    pub(crate) fn rank_report(scale: f64, gpu: &str) -> Report {
        let mut r = Report::from_json(include_str!("../../tests/golden/report.json")).unwrap();
        r.meta.device_name = Some(gpu.into());
        for row in &mut r.ranges {
            row.gpu_time_ns = row.gpu_time_ns.map(|t| (t as f64 * scale) as u64);
        }
        r
    }

    pub(crate) fn totals(r: &Report, path: &str) -> Option<u64> {
        let t: Vec<u64> = r.ranges.iter().filter(|x| x.path == path).filter_map(|x| x.gpu_time_ns).collect();
        (!t.is_empty()).then(|| t.iter().sum())
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
        let m = Merged::of(&procs, &MergeOptions::default()).unwrap();
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
        let m =
            Merged::of(&[procs[0].clone(), procs[0].clone(), procs[1].clone(), c], &MergeOptions::default()).unwrap();
        assert_eq!(m.rows.iter().find(|r| r.path == "<root>").unwrap().slowest.as_deref(), Some("r1"));
        let m = Merged::of(&[procs[0].clone(), procs[0].clone()], &MergeOptions::default()).unwrap();
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
        let m = Merged::of(&procs, &MergeOptions::default()).unwrap();
        assert_eq!(
            m.warnings,
            ["r1: run ended with errors: finished (process exit), after CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal \
              memory access was encountered; failed while finishing: synchronize; the outputs hold what was collected"]
        );
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
