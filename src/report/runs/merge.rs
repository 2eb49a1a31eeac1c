//! Several processes' outputs: finding them, and (`gmprof merge`) one summary across them.
//!
//! Layer 3, beside the other exporters. Each profiled process (a rank of a distributed
//! job, a worker) writes its own directory (`ways_in::layout` names it); [`result_dirs`]
//! finds them under an output root. A [`MergeBuilder`] takes them one at a time
//! ([`RankRanges`]: range times and kernel totals, not rows) and puts them side by side: per
//! range path, each process's total GPU time (Σ over the path's instances), then the
//! minimum, median and maximum across the processes that measured it and the slowest
//! process; the same per kernel name; and per step the straggler table
//! ([`crate::report::runs::stragglers`]). A process that measured nothing for a path, or has no
//! such range, is blank, never 0, and is left out of the statistics. [`Merged::write_csv`]
//! writes `merged.csv`, [`Merged::write_kernels_csv`] `merged_kernels.csv`; [`Merged`]'s
//! `Display` is the summary table. [`Merged::of`] merges reports already read
//! ([`ProcessReport::read_all`], as `gmprof diff` reads them); `gmprof merge` itself is
//! `crate::report::runs::merge_run`, which streams.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::runs::rank_ranges::RankRanges;
use crate::report::runs::stragglers::{Spread, StepAccumulator, StepTable, StepTime};
use crate::report::tables::csv::{write_file, RecordWriter};
use crate::report::text::format::{cell, format_duration_ns, BLANK};

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
        Ok(ProcessReport { label: crate::report::runs::rank_ranges::label(root, dir), dir: dir.to_owned(), report })
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
    /// One row per kernel name (in [`MergedRow::path`]; blank for kernels whose name was not
    /// recorded), in order of first appearance: per process, the Σ of its kernels' durations
    /// and (in [`MergedRow::instances`]) its launches.
    pub kernel_rows: Vec<MergedRow>,
    /// The straggler table: per step, each process's time, the slowest and the spread
    /// (`None` when no range repeats).
    pub steps: Option<StepTable>,
    /// What the reader must know: different modes, partial runs.
    pub warnings: Vec<String>,
    /// Processes left out because their outputs could not be read: `label: why`.
    pub unreadable: Vec<String>,
}

/// What `gmprof merge` is asked for beyond the defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MergeOptions {
    /// The step range's path (`None`: chosen from the first rank, see
    /// [`stragglers`](super::stragglers)).
    pub step: Option<String>,
    /// Which time of a step is compared.
    pub step_time: StepTime,
    /// The ranks whose timelines go into `merged-trace.json` (`None`: see
    /// [`crate::report::runs::merge_trace::trace_ranks`]).
    pub trace_ranks: Option<Vec<String>>,
    /// Fail on a process whose outputs cannot be read, instead of leaving it out.
    pub strict: bool,
}

/// Per key (a range path, a kernel name) and process: one total and one count.
#[derive(Clone, Debug, Default)]
struct Across {
    keys: Vec<String>,
    index: HashMap<String, usize>,
    totals: Vec<Vec<Option<u64>>>,
    counts: Vec<Vec<u64>>,
}

impl Across {
    /// Adds process number `n` (the processes before it already added): `items` are its
    /// (key, count, total) rows, several per key summed; keys it lacks are blank for it.
    fn add<'a>(&mut self, n: usize, items: impl IntoIterator<Item = (&'a str, u64, Option<u64>)>) {
        let mut mine: HashMap<usize, (Option<u64>, u64)> = HashMap::new();
        for (key, count, total) in items {
            let i = match self.index.get(key) {
                Some(&i) => i,
                None => {
                    self.keys.push(key.to_owned());
                    self.index.insert(key.to_owned(), self.keys.len() - 1);
                    self.totals.push(vec![None; n]);
                    self.counts.push(vec![0; n]);
                    self.keys.len() - 1
                }
            };
            let slot = mine.entry(i).or_insert((None, 0));
            slot.1 += count;
            if let Some(t) = total {
                slot.0 = Some(slot.0.unwrap_or(0).saturating_add(t));
            }
        }
        for (i, (totals, counts)) in self.totals.iter_mut().zip(&mut self.counts).enumerate() {
            let (total, count) = mine.get(&i).copied().unwrap_or((None, 0));
            totals.push(total);
            counts.push(count);
        }
    }

    fn finish(self, processes: &[String]) -> Vec<MergedRow> {
        self.keys
            .into_iter()
            .zip(self.totals)
            .zip(self.counts)
            .map(|((path, gpu_time_ns), instances)| {
                let s = Spread::of(&gpu_time_ns);
                MergedRow {
                    path,
                    min_ns: s.min,
                    median_ns: s.median,
                    max_ns: s.max,
                    slowest: s.slowest.map(|i| processes[i].clone()),
                    gpu_time_ns,
                    instances,
                }
            })
            .collect()
    }
}

/// Builds a [`Merged`] one process at a time: it keeps, per range path, kernel name and
/// process, one total and one count, and per step and process one time, never a process's
/// rows.
#[derive(Clone, Debug)]
pub struct MergeBuilder {
    processes: Vec<String>,
    devices: Vec<Option<String>>,
    modes: Vec<crate::model::ProfilingMode>,
    kernels: Vec<u64>,
    warnings: Vec<String>,
    paths: Across,
    kernel_names: Across,
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
            paths: Across::default(),
            kernel_names: Across::default(),
            metrics: None,
            steps: StepAccumulator::new(options.step.clone(), options.step_time),
        }
    }

    /// The step range's path, once given (`--step`) or chosen from the first process: what
    /// [`RankRanges::read_with`] keeps the rows of.
    pub fn step_path(&self) -> Option<&str> {
        self.steps.path()
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
        match &rank.folded {
            Some(folded) => self.paths.add(n, folded.iter().map(|p| (p.path.as_str(), p.instances, p.gpu_time_ns))),
            None => self.paths.add(n, rank.ranges.iter().map(|r| (r.path.as_str(), 1, r.gpu_time_ns))),
        }
        let kernels = rank.kernels.iter().flatten();
        self.kernel_names.add(n, kernels.map(|k| (k.name.as_deref().unwrap_or(""), k.launches, k.duration_ns)));
        self.steps.add(rank);
        if let Some(end) = rank.meta.run_end.as_ref().filter(|e| !e.is_complete()) {
            self.warnings.push(format!("{}: {}", rank.label, end.describe()));
        } else if let Some(line) = &rank.ending {
            // Finished with errors: the CUDA error and the kernels in flight.
            self.warnings.push(format!("{}: {line}", rank.label));
        }
        for part in &rank.left_out {
            self.warnings.push(format!("{}: left out, unreadable: {part}", rank.label));
        }
        if rank.kernels.is_none() {
            self.warnings.push(format!(
                "{}: no {} beside its ranges.parquet: its kernels are blank in merged_kernels.csv",
                rank.label,
                crate::report::tables::parquet::tables::KERNELS_PARQUET
            ));
        }
        self.processes.push(rank.label.clone());
        // A process that profiled several GPUs says how many.
        self.devices.push(match rank.meta.devices.len() {
            0 | 1 => rank.meta.device_name.clone(),
            n => rank.meta.device_name.as_ref().map(|d| format!("{n} GPUs: {d}")),
        });
        self.modes.push(rank.meta.mode);
        self.kernels.push(rank.meta.kernel_count);
        Ok(())
    }

    /// The merge.
    pub fn finish(self) -> Merged {
        let rows = self.paths.finish(&self.processes);
        let kernel_rows = self.kernel_names.finish(&self.processes);
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
            kernel_rows,
            steps: self.steps.finish(),
            warnings,
            unreadable: Vec::new(),
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
    pub fn write_csv_to<W: std::io::Write>(&self, mut out: W) -> Result<()> {
        // Processes left out are named above the header (the file of a complete merge starts
        // with the header, as before).
        for u in &self.unreadable {
            writeln!(out, "# left out, unreadable: {u}").map_err(|e| Error::io(MERGED_CSV, e))?;
        }
        write_rows(out, "path", "processes", &self.processes, &self.rows)
    }

    /// Writes `merged.csv` to `path` (replaced whole).
    pub fn write_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_csv_to(out))
    }

    /// Writes `merged_kernels.csv`: kernel name (blank: not recorded), processes that launched
    /// it, processes that measured a duration, min, median, max of each process's Σ duration
    /// (ns), the slowest process, then each process's Σ duration (ns) and launches.
    pub fn write_kernels_csv_to<W: std::io::Write>(&self, out: W) -> Result<()> {
        write_rows(out, "kernel_name", "launches", &self.processes, &self.kernel_rows)
    }

    /// Writes `merged_kernels.csv` to `path` (replaced whole).
    pub fn write_kernels_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_kernels_csv_to(out))
    }
}

/// The file `gmprof merge` writes the per-kernel-name spread to.
pub const MERGED_KERNELS_CSV: &str = "merged_kernels.csv";

fn write_rows<W: std::io::Write>(
    out: W,
    key: &str,
    counts: &str,
    processes: &[String],
    rows: &[MergedRow],
) -> Result<()> {
    let mut w = RecordWriter::new(out, "merged CSV");
    let fixed = [key, "processes", "measured", "min_gpu_time_ns", "median_gpu_time_ns", "max_gpu_time_ns"];
    let mut per_process: Vec<String> = processes.iter().map(|p| format!("gpu_time_ns[{p}]")).collect();
    if counts == "launches" {
        per_process.extend(processes.iter().map(|p| format!("launches[{p}]")));
    }
    w.header(fixed.into_iter().chain(["slowest"]).chain(per_process.iter().map(String::as_str)))?;
    for row in rows {
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
        if counts == "launches" {
            for n in &row.instances {
                w.display(n)?;
            }
        }
        w.end_record()?;
    }
    w.finish()
}

impl fmt::Display for Merged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.unreadable.is_empty() {
            writeln!(
                f,
                "# {} process(es) left out, their outputs unreadable: {} (gmprof merge --strict fails on them)",
                self.unreadable.len(),
                self.unreadable.join("; ")
            )?;
        }
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
        let line = |f: &mut fmt::Formatter<'_>, name: &str, width: usize, r: &MergedRow| {
            writeln!(
                f,
                "{:<width$}  {:>8}  {:>12}  {:>12}  {:>12}  {}",
                name,
                format!("{}/{}", r.measured(), self.processes.len()),
                ns(r.min_ns),
                ns(r.median_ns),
                ns(r.max_ns),
                r.slowest.as_deref().map_or(BLANK.to_owned(), cell)
            )
        };
        for r in &self.rows {
            line(f, &cell(&r.path), width, r)?;
        }
        if self.processes.len() > 1 && !self.kernel_rows.is_empty() {
            let mut rows: Vec<&MergedRow> = self.kernel_rows.iter().filter(|r| r.measured() > 1).collect();
            let spread = |r: &MergedRow| r.max_ns.zip(r.min_ns).map(|(hi, lo)| hi - lo);
            rows.sort_by_key(|r| std::cmp::Reverse(spread(r)));
            let kwidth = rows.iter().take(SUMMARY_KERNELS).map(|r| cell(&r.path).chars().count()).max().unwrap_or(6);
            let kwidth = kwidth.clamp(6, 60);
            writeln!(
                f,
                "\n{:<kwidth$}  {:>8}  {:>12}  {:>12}  {:>12}  slowest (kernels of widest spread, {} of {})",
                "kernel",
                "measured",
                "min GPU",
                "median GPU",
                "max GPU",
                rows.len().min(SUMMARY_KERNELS),
                self.kernel_rows.len()
            )?;
            for r in rows.into_iter().take(SUMMARY_KERNELS) {
                let name: String = if r.path.is_empty() { BLANK.to_owned() } else { cell(&r.path) };
                let name: String = if name.chars().count() > kwidth {
                    name.chars().take(kwidth - 1).chain(['…']).collect()
                } else {
                    name
                };
                line(f, &name, kwidth, r)?;
            }
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

/// Kernel names the summary shows: those of widest spread across processes.
pub const SUMMARY_KERNELS: usize = 10;

/// Up to this many processes, the summary lists each with its GPU.
pub const LISTED_PROCESSES: usize = 16;

/// How deep below the root process directories are looked for (`out/%h/%p` is two).
pub const SCAN_DEPTH: usize = 3;

/// Whether `dir` is named as a flight-recorder window (`window-N`).
pub fn is_flight_window(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("window-"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `root` and its subdirectories (to [`SCAN_DEPTH`]) that hold any of `files`, sorted; a
/// process directory's flight-recorder windows (`window-N/`) are not among them.
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
        // A process's flight-recorder windows (`window-N/`, each with a report.json of its
        // steps) belong to it: they are not processes of their own.
        let process = files.iter().any(|f| dir.join(f).is_file()) || dir.join("steps").is_dir();
        subdirs.retain(|sub| !(process && is_flight_window(sub)));
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
        let mut r = Report::from_json(include_str!("../../../tests/golden/report.json")).unwrap();
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
    fn a_process_flight_windows_are_not_processes() {
        let root = tempfile::tempdir().unwrap();
        for d in ["rank0", "rank0/window-0", "rank0/window-12", "rank1", "lone/window-3"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
            std::fs::write(root.path().join(d).join("report.json"), "{}").unwrap();
        }
        let found: Vec<String> = result_dirs(root.path(), &["report.json"])
            .iter()
            .map(|p| p.strip_prefix(root.path()).unwrap().display().to_string())
            .collect();
        // `lone/` holds no report: its window-3 is found (nothing else claims it).
        assert_eq!(found, vec!["lone/window-3", "rank0", "rank1"]);
        assert!(is_flight_window(Path::new("out/window-7")) && !is_flight_window(Path::new("out/window-x")));
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
