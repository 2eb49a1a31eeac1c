//! What `gmprof merge` reads of one process (a rank): its report's metadata, per range row
//! the path, depth, instance, GPU time and wall time, and per kernel name the launches and
//! total kernel time; nothing else.
//!
//! Layer 3, input of [`crate::report::runs::merge`]. A directory with `ranges.parquet` is read
//! from its Parquet files alone: those columns of `ranges.parquet` with the file's
//! `gmprof.meta` key-value metadata, and `kernel_name` and `duration_ns` of
//! `kernels.parquet`, one row group at a time, folded into one total per kernel name. That
//! is what keeps a merge of hundreds of ranks in bounded memory ([`crate::report::runs::merge`]).
//! A directory with only `report.json` (a run written before Parquet, or with `--format
//! csv`) is read whole and dropped once its totals are taken. A streamed run's directory
//! (`report.json` with a `streamed` section, issue 42) is read from its part files: the range
//! rows of `ranges/` and the kernel totals of the whole run's aggregates
//! ([`RankRanges::of_streamed`]).

use std::path::{Path, PathBuf};

use crate::analysis::online::{AggregateQuantity, AggregateTable, NO_NAME};
use crate::error::{Error, Result};
use crate::report::model::{Report, ReportMeta};
use crate::report::tables::parquet::part_reader::{read_parts, whole_run_aggregates};
use crate::report::tables::parquet::read;
use crate::report::tables::parquet::tables::{KERNELS_PARQUET, RANGES_PARQUET};

/// The files a process directory is recognised by (either is enough).
pub const RANK_FILES: [&str; 2] = ["report.json", RANGES_PARQUET];

pub use crate::model::StepTime;

/// One range row's times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeTimes {
    /// The range path.
    pub path: String,
    /// Nesting depth (0 = the root row).
    pub depth: u32,
    /// The instance of the path.
    pub instance: u32,
    /// GPU time, ns (`None`: not measured).
    pub gpu_time_ns: Option<u64>,
    /// Wall time, ns (`None`: not measured).
    pub wall_time_ns: Option<u64>,
}

/// One range path's totals in one process: its rows folded as they were read (a streamed
/// process, whose range rows are not held; see [`RankRanges::folded`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathTotal {
    /// The range path.
    pub path: String,
    /// Nesting depth of its first row.
    pub depth: u32,
    /// Its rows (instances).
    pub instances: u64,
    /// Σ GPU time of the rows with one, ns (`None`: none had one).
    pub gpu_time_ns: Option<u64>,
    /// Σ wall time of the rows with one, ns (`None`: none had one).
    pub wall_time_ns: Option<u64>,
}

/// Folds range rows into [`PathTotal`]s, in order of first row.
#[derive(Default)]
struct PathFold {
    totals: Vec<PathTotal>,
    index: std::collections::HashMap<String, usize>,
}

impl PathFold {
    fn add(&mut self, path: &str, depth: u32, gpu: Option<u64>, wall: Option<u64>) {
        let i = match self.index.get(path) {
            Some(&i) => i,
            None => {
                let i = self.totals.len();
                self.totals.push(PathTotal {
                    path: path.to_owned(),
                    depth,
                    instances: 0,
                    gpu_time_ns: None,
                    wall_time_ns: None,
                });
                self.index.insert(path.to_owned(), i);
                i
            }
        };
        let t = &mut self.totals[i];
        t.instances += 1;
        let add = |sum: &mut Option<u64>, v: Option<u64>| {
            if let Some(v) = v {
                *sum = Some(sum.unwrap_or(0).saturating_add(v));
            }
        };
        add(&mut t.gpu_time_ns, gpu);
        add(&mut t.wall_time_ns, wall);
    }
}

/// The step path [`choose_step_path`](crate::report::runs::stragglers::choose_step_path)
/// picks, from folded paths: the repeated path of least depth (the root row left out) and,
/// among those, of most total `time`.
pub fn choose_folded(folded: &[PathTotal], time: StepTime) -> Option<String> {
    folded
        .iter()
        .filter(|p| p.path != crate::model::session::ROOT_PATH && p.instances >= 2)
        .min_by(|a, b| {
            let total = |p: &PathTotal| match time {
                StepTime::Gpu => p.gpu_time_ns,
                StepTime::Wall => p.wall_time_ns,
            };
            a.depth.cmp(&b.depth).then(total(b).unwrap_or(0).cmp(&total(a).unwrap_or(0)))
        })
        .map(|p| p.path.clone())
}

/// One kernel name's launches and time in one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTotal {
    /// The demangled name (`None`: the name was not recorded).
    pub name: Option<String>,
    /// Kernel rows with the name.
    pub launches: u64,
    /// Σ `duration_ns` of those with a duration (`None`: none had one).
    pub duration_ns: Option<u64>,
}

/// Folds kernel rows into [`KernelTotal`]s, in order of first appearance.
#[derive(Default)]
struct KernelFold {
    totals: Vec<KernelTotal>,
    named: std::collections::HashMap<String, usize>,
    unnamed: Option<usize>,
}

impl KernelFold {
    fn add(&mut self, name: Option<&str>, duration_ns: Option<u64>) {
        self.add_many(name, 1, duration_ns);
    }

    /// Adds `launches` rows of `name` whose durations sum to `duration_ns`.
    fn add_many(&mut self, name: Option<&str>, launches: u64, duration_ns: Option<u64>) {
        // Looked up by &str: no allocation per row, only per new name.
        let known = match name {
            Some(n) => self.named.get(n).copied(),
            None => self.unnamed,
        };
        let i = match known {
            Some(i) => i,
            None => {
                let i = self.totals.len();
                self.totals.push(KernelTotal { name: name.map(str::to_owned), launches: 0, duration_ns: None });
                match name {
                    Some(n) => {
                        self.named.insert(n.to_owned(), i);
                    }
                    None => self.unnamed = Some(i),
                }
                i
            }
        };
        let t = &mut self.totals[i];
        t.launches += launches;
        if let Some(d) = duration_ns {
            t.duration_ns = Some(t.duration_ns.unwrap_or(0).saturating_add(d));
        }
    }
}

/// One process's range times, kernel totals and metadata.
#[derive(Clone, Debug)]
pub struct RankRanges {
    /// The directory's path relative to the root (`node7-0`); for the root itself, its name.
    pub label: String,
    /// The directory.
    pub dir: PathBuf,
    /// The report's metadata.
    pub meta: ReportMeta,
    /// Its range rows, in the report's order; for a streamed process (when
    /// [`RankRanges::folded`] is set), only the step path's.
    pub ranges: Vec<RangeTimes>,
    /// A streamed process's range rows folded per path as they were read, so that a run of
    /// any length merges in memory bounded by its paths and steps; `None` when `ranges`
    /// holds every row.
    pub folded: Option<Vec<PathTotal>>,
    /// Per kernel name, in order of first launch; `None` when the directory has
    /// `ranges.parquet` but no `kernels.parquet`.
    pub kernels: Option<Vec<KernelTotal>>,
    /// The file read: `ranges.parquet` or `report.json`.
    pub source: &'static str,
    /// The line saying the run ended with errors, when it did.
    pub ending: Option<String>,
    /// What could not be read and was left out (a streamed run's corrupt part files, each
    /// `TABLE/part-NNNNN.parquet: why`).
    pub left_out: Vec<String>,
}

impl RankRanges {
    /// Takes the range times of `report`.
    pub fn of_report(label: String, dir: PathBuf, report: &Report) -> Self {
        RankRanges {
            label,
            dir,
            meta: report.meta.clone(),
            ranges: report
                .ranges
                .iter()
                .map(|r| RangeTimes {
                    path: r.path.clone(),
                    depth: r.depth,
                    instance: r.instance,
                    gpu_time_ns: r.gpu_time_ns,
                    wall_time_ns: r.wall_time_ns,
                })
                .collect(),
            kernels: Some({
                let mut fold = KernelFold::default();
                for k in &report.kernels {
                    fold.add(k.kernel_name.as_deref(), k.duration_ns);
                }
                fold.totals
            }),
            source: "report.json",
            ending: crate::report::text::summary::ending_line(report),
            left_out: Vec::new(),
            folded: None,
        }
    }

    /// Takes the range times of a streamed run ([`Report::streamed`]) from its part files:
    /// every range instance of `ranges/` (and of each further CUDA context's
    /// `context-N/ranges/`), and the kernel totals of the whole run's aggregates
    /// (`report.json`'s for the first context, `context-N/aggregates/`'s whole-run rows for
    /// the others), which count and sum exactly what the kernel parts hold. Corrupt parts are
    /// left out and named in [`RankRanges::left_out`].
    ///
    /// The range rows are folded per path as they are read ([`RankRanges::folded`]); only
    /// the rows of the step path are kept: `step`, or the one
    /// [`choose_folded`] picks by `time`.
    pub fn of_streamed(
        label: String,
        dir: PathBuf,
        report: &Report,
        step: Option<&str>,
        time: StepTime,
    ) -> Result<Self> {
        let mut rank = Self::of_report(label, dir.clone(), report);
        rank.source = "ranges/ parts";
        let mut fold = KernelFold::default();
        let mut add_kernel = |key: &str, count: u64, missing: u64, total: Option<u64>| {
            let name = (key != NO_NAME).then_some(key);
            fold.add_many(name, count + missing, total);
        };
        for a in report.streamed.iter().flat_map(|s| &s.aggregates) {
            if a.table == AggregateTable::Kernel && a.quantity == AggregateQuantity::DurationNs {
                add_kernel(&a.key, a.summary.count, a.summary.missing, a.summary.total_ns);
            }
        }
        let contexts: Vec<PathBuf> = std::iter::once(dir.clone()).chain(context_dirs(&dir)?).collect();
        let (folded, steps, skipped) = read_range_parts(&contexts, step, time)?;
        (rank.folded, rank.ranges) = (Some(folded), steps);
        rank.left_out.extend(skipped);
        for (n, context) in contexts.iter().enumerate() {
            let context_name = context.file_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
            let prefix = |s: &String| format!("{context_name}/{s}");
            if n == 0 {
                continue;
            }
            let (aggregates, skipped) = whole_run_aggregates(context)?;
            for a in aggregates {
                if a.table == AggregateTable::Kernel && a.quantity == AggregateQuantity::DurationNs {
                    add_kernel(&a.key, a.summary.count, a.summary.missing, a.summary.total_ns);
                }
            }
            rank.left_out.extend(skipped.iter().map(prefix));
        }
        rank.kernels = Some(fold.totals);
        Ok(rank)
    }

    /// Takes the range times of a streamed process killed after the row limit: its part
    /// files, and no `report.json` or only a checkpoint's from before the limit (whose `meta`
    /// is given; without one, what the parts' metadata says). Range rows come from `ranges/`,
    /// kernel totals are folded from `kernels/` (the whole run's aggregates were never
    /// written), each further context's too; the rows of the segments open when it was
    /// killed are lost, which [`RankRanges::ending`] says.
    pub fn of_killed(
        label: String,
        dir: PathBuf,
        meta: Option<ReportMeta>,
        step: Option<&str>,
        time: StepTime,
    ) -> Result<Self> {
        let mut meta = match meta {
            Some(m) => m,
            None => parts_meta(&dir)?,
        };
        let contexts: Vec<PathBuf> = std::iter::once(dir.clone()).chain(context_dirs(&dir)?).collect();
        let (folded, ranges, mut left_out) = read_range_parts(&contexts, step, time)?;
        let mut fold = KernelFold::default();
        let int = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        for (n, context) in contexts.iter().enumerate() {
            let read = read_parts(context, "kernels", &["kernel_name", "duration_ns"], |b| {
                for row in 0..b.len() {
                    fold.add(b.text(0, row)?, int(b.int(1, row)?));
                }
                Ok(())
            })?;
            let context_name = context.file_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
            left_out
                .extend(read.skipped.iter().map(|s| if n == 0 { s.clone() } else { format!("{context_name}/{s}") }));
        }
        meta.kernel_count = fold.totals.iter().map(|k| k.launches).sum();
        meta.total_gpu_time_ns = fold.totals.iter().filter_map(|k| k.duration_ns).reduce(u64::saturating_add);
        // Its end is this: killed, read from its parts (a checkpoint's own end is older).
        meta.run_end = None;
        Ok(RankRanges {
            label,
            dir,
            meta,
            ranges,
            kernels: Some(fold.totals),
            source: "part files",
            ending: Some(
                "streamed, then killed before its report: merged from its part files (the rows of the segments \
                 open when it was killed are lost)"
                    .to_owned(),
            ),
            left_out,
            folded: Some(folded),
        })
    }

    /// Reads the process directory `dir` (labelled relative to `root`): `ranges.parquet` when
    /// it has one, else `report.json`; a streamed run's part files ([`RankRanges::of_streamed`],
    /// or [`RankRanges::of_killed`] for one killed after the row limit).
    pub fn read(root: &Path, dir: &Path) -> Result<Self> {
        Self::read_with(root, dir, None, StepTime::Gpu)
    }

    /// [`RankRanges::read`], keeping of a streamed process's range rows those of the step
    /// path: `step`, or the one [`choose_folded`] picks by `time` (see
    /// [`RankRanges::of_streamed`]).
    pub fn read_with(root: &Path, dir: &Path, step: Option<&str>, time: StepTime) -> Result<Self> {
        let label = label(root, dir);
        let parquet = dir.join(RANGES_PARQUET);
        let parts = STREAMED_MARKERS.iter().any(|m| dir.join(m).is_file());
        if !parquet.is_file() {
            if parts && !dir.join("report.json").is_file() {
                return Self::of_killed(label, dir.to_owned(), None, step, time);
            }
            let report = Report::read_json(dir.join("report.json"))?;
            if report.streamed.is_some() {
                return Self::of_streamed(label, dir.to_owned(), &report, step, time);
            }
            if parts {
                return Self::of_killed(label, dir.to_owned(), Some(report.meta), step, time);
            }
            return Ok(Self::of_report(label, dir.to_owned(), &report));
        }
        if parts {
            // A checkpoint's tables from before the limit beside the parts, which hold every row.
            return Self::of_killed(label, dir.to_owned(), Some(read::report_meta(&parquet)?), step, time);
        }
        let meta = read::report_meta(&parquet)?;
        let mut ranges = Vec::new();
        let int = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        for batch in read::batches(&parquet, &["path", "depth", "instance", "gpu_time_ns", "wall_time_ns"])? {
            let b = batch?;
            for row in 0..b.len() {
                let path = b
                    .text(0, row)?
                    .ok_or_else(|| Error::InvalidConfig(format!("{}: row {row} has no path", parquet.display())))?;
                ranges.push(RangeTimes {
                    path: path.to_owned(),
                    depth: int(b.int(1, row)?).unwrap_or(0) as u32,
                    instance: int(b.int(2, row)?).unwrap_or(0) as u32,
                    gpu_time_ns: int(b.int(3, row)?),
                    wall_time_ns: int(b.int(4, row)?),
                });
            }
        }
        let kernel_file = dir.join(KERNELS_PARQUET);
        let kernels = if kernel_file.is_file() {
            let mut fold = KernelFold::default();
            for batch in read::batches(&kernel_file, &["kernel_name", "duration_ns"])? {
                let b = batch?;
                for row in 0..b.len() {
                    fold.add(b.text(0, row)?, int(b.int(1, row)?));
                }
            }
            Some(fold.totals)
        } else {
            None
        };
        // Without the kernel rows, the failed-run line names no kernel in flight.
        let shell = Report {
            meta: meta.clone(),
            ranges: Vec::new(),
            kernels: Vec::new(),
            transfers: Vec::new(),
            pm: None,
            pc: None,
            device_timers: Vec::new(),
            device_regions: Vec::new(),
            probes: Vec::new(),
            range_devices: Vec::new(),
            streamed: None,
            rotation: None,
        };
        let ending = crate::report::text::summary::ending_line(&shell);
        Ok(RankRanges {
            label,
            dir: dir.to_owned(),
            meta,
            ranges,
            kernels,
            source: RANGES_PARQUET,
            ending,
            left_out: Vec::new(),
            folded: None,
        })
    }
}

/// The range rows of the `ranges/` parts of `contexts` (a process's directory, then its
/// further contexts'): folded per path, the rows of the step path (`step`, or the one
/// [`choose_folded`] picks by `time`), and the parts left out (a further context's named
/// with its directory). Two passes over the parts, so that no other row is held.
fn read_range_parts(
    contexts: &[PathBuf],
    step: Option<&str>,
    time: StepTime,
) -> Result<(Vec<PathTotal>, Vec<RangeTimes>, Vec<String>)> {
    let int = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    let mut fold = PathFold::default();
    let mut left_out = Vec::new();
    for (n, context) in contexts.iter().enumerate() {
        let columns = ["path", "depth", "gpu_time_ns", "wall_time_ns"];
        let read = read_parts(context, "ranges", &columns, |b| {
            for row in 0..b.len() {
                let Some(path) = b.text(0, row)? else { continue };
                let depth = int(b.int(1, row)?).unwrap_or(0) as u32;
                fold.add(path, depth, int(b.int(2, row)?), int(b.int(3, row)?));
            }
            Ok(())
        })?;
        let name = context.file_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        left_out.extend(read.skipped.iter().map(|s| if n == 0 { s.clone() } else { format!("{name}/{s}") }));
    }
    let folded = fold.totals;
    let step = step.map(str::to_owned).or_else(|| choose_folded(&folded, time));
    let mut rows = Vec::new();
    if let Some(step) = step.filter(|s| folded.iter().any(|p| &p.path == s)) {
        for context in contexts {
            let columns = ["path", "depth", "instance", "gpu_time_ns", "wall_time_ns"];
            read_parts(context, "ranges", &columns, |b| {
                for row in 0..b.len() {
                    if b.text(0, row)? != Some(step.as_str()) {
                        continue;
                    }
                    rows.push(RangeTimes {
                        path: step.clone(),
                        depth: int(b.int(1, row)?).unwrap_or(0) as u32,
                        instance: int(b.int(2, row)?).unwrap_or(0) as u32,
                        gpu_time_ns: int(b.int(3, row)?),
                        wall_time_ns: int(b.int(4, row)?),
                    });
                }
                Ok(())
            })?;
        }
    }
    Ok((folded, rows, left_out))
}

/// A report's metadata from what a streamed run's part files say of it (`gmprof.meta`: the
/// mode, metric names and version known when it started); the rest is unknown (blank) or 0.
pub(crate) fn parts_meta(dir: &Path) -> Result<ReportMeta> {
    let first = STREAMED_MARKERS.iter().map(|m| dir.join(m)).find(|p| p.is_file());
    let first = first.ok_or_else(|| Error::InvalidConfig(format!("{}: no streamed part file", dir.display())))?;
    let kv = read::key_values(&first)?;
    let part: serde_json::Value = kv
        .get(crate::report::tables::parquet::KEY_META)
        .and_then(|m| serde_json::from_str(m).ok())
        .ok_or_else(|| Error::InvalidConfig(format!("{}: no gmprof.meta: not a gmprof part file", first.display())))?;
    let counts = serde_json::to_value(crate::analysis::correlate::CorrelationCounts::default())
        .map_err(|e| Error::Serialize { what: "report metadata", message: e.to_string() })?;
    let meta = serde_json::json!({
        "gmprof_version": part.get("gmprof_version").cloned().unwrap_or_default(),
        "mode": part.get("mode").cloned().unwrap_or_default(),
        "time_source": "activity",
        "device_name": null,
        "chip": null,
        "metrics": [],
        "derived_metrics": [],
        "counter_cycles": 0,
        "kernel_count": 0,
        "total_gpu_time_ns": null,
        "dropped_counter_ranges": 0,
        "dropped_activity_records": 0,
        "flagged_kernel_rows": 0,
        "orphan_counter_ranges": 0,
        "counts": counts,
        "warnings": [],
        "started_unix_ns": null,
        "finished_unix_ns": null,
    });
    serde_json::from_value(meta)
        .map_err(|e| Error::InvalidConfig(format!("{}: its gmprof.meta is not a streamed run's: {e}", first.display())))
}

/// Files that mark a directory with streamed part files (its first kernel or range part).
pub const STREAMED_MARKERS: [&str; 2] = ["kernels/part-00000.parquet", "ranges/part-00000.parquet"];

/// Whether `dir` holds a streamed run's part files but no `report.json` (a process killed
/// before its end): not a further CUDA context's directory (`context-N/`, which belongs to
/// its process).
pub fn streamed_without_report(dir: &Path) -> bool {
    let context = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("context-"))
        .is_some_and(|n| n.parse::<u32>().is_ok());
    !context && !dir.join("report.json").is_file() && STREAMED_MARKERS.iter().any(|m| dir.join(m).is_file())
}

/// What to say of a directory [`streamed_without_report`] found.
pub const STREAMED_WITHOUT_REPORT: &str = "streamed part files but no report.json (a process killed before its end): \
     gmprof merge and gmprof.load read its parts alone, and DuckDB or Polars query them (README, \"Streamed \
     outputs\")";

/// The directories of a process's further CUDA contexts (`context-1/`, `context-2/`, ...,
/// where a streamed run's second and later contexts write their parts), in number order.
pub fn context_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("context-")?.parse().ok()?;
            e.path().is_dir().then(|| (n, e.path()))
        })
        .collect();
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// `dir`'s label under `root`: its relative path, or the root's own name for the root.
pub fn label(root: &Path, dir: &Path) -> String {
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    if rel.as_os_str().is_empty() {
        // The root's own process (the program `gmprof run` started) is named by the root.
        root.canonicalize()
            .ok()
            .and_then(|r| r.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| ".".to_owned())
    } else {
        rel.display().to_string()
    }
}
