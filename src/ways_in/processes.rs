//! What each profiled process of a run left: found by scanning the output directory.
//!
//! Layer 3, read by `gmprof run` ([`crate::ways_in::launch::Outcome`]) after the program
//! ends. Every process that profiled writes its own directory ([`crate::ways_in::layout`]);
//! [`scan`] finds those holding `injection.json` or `report.json` under the output root and
//! [`ProcessOutputs::line`] gives each one line: rank, GPU, kernels, how its run ended and
//! where its outputs are. Processes that never created a CUDA context (a launcher such as
//! torchrun, data-loader workers) write nothing and are not listed.

use std::path::{Path, PathBuf};

use crate::model::RunEnd;
use crate::report::Report;
use crate::ways_in::injection_status::{InjectionStatus, STATUS_FILE};
use crate::ways_in::layout::RESULT_FILES;

/// This process's stderr as `device:inode` (defined in [`crate::ways_in::injection_status`]).
pub use crate::ways_in::injection_status::stderr_identity;

/// One process's directory and what it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessOutputs {
    /// The directory.
    pub dir: PathBuf,
    /// Its `injection.json` (absent for the C ABI, which writes only the report).
    pub status: Option<InjectionStatus>,
    /// From its `report.json`: the GPU's name.
    pub device_name: Option<String>,
    /// From its `report.json`: kernel rows.
    pub kernels: Option<u64>,
    /// How the run ended, from `report.json` or else `injection.json`.
    pub run_end: Option<RunEnd>,
    /// Why `report.json` could not be read, when it is there.
    pub report_error: Option<String>,
    /// Started idle (`gmprof run --on-demand`): no report of its own is expected, its
    /// captures are the outputs.
    pub idle_on_demand: bool,
}

impl ProcessOutputs {
    /// Reads what `dir` holds.
    pub fn read(dir: &Path) -> Self {
        let status = dir.join(STATUS_FILE).is_file().then(|| InjectionStatus::read(dir).ok()).flatten();
        let report_path = dir.join("report.json");
        let (report, report_error) = if report_path.is_file() {
            match Report::read_json(&report_path) {
                Ok(r) => (Some(r), None),
                Err(e) => (None, Some(e.to_string())),
            }
        } else {
            (None, None)
        };
        let run_end = report
            .as_ref()
            .and_then(|r| r.meta.run_end.clone())
            .or_else(|| status.as_ref().and_then(|s| s.run_end.clone()));
        ProcessOutputs {
            dir: dir.to_owned(),
            device_name: report.as_ref().and_then(|r| r.meta.device_name.clone()),
            kernels: report.as_ref().map(|r| r.meta.kernel_count),
            status,
            run_end,
            report_error,
            idle_on_demand: false,
        }
    }

    /// Whether the process wrote its outputs (the report, or a checkpoint of it).
    pub fn has_outputs(&self) -> bool {
        self.kernels.is_some() || self.status.as_ref().is_some_and(|s| s.outputs_written)
    }

    /// The process's rank, when a rank variable was set.
    pub fn rank(&self) -> Option<u32> {
        self.status.as_ref().and_then(|s| s.rank)
    }

    /// `rank 1 (pid 4242 on node7)`, `pid 4242 on node7`, or the directory's name.
    pub fn who(&self) -> String {
        let Some(s) = &self.status else {
            return self.dir.file_name().map_or_else(|| self.dir.display().to_string(), |n| n.to_string_lossy().into());
        };
        let host = s.host.as_deref().map(|h| format!(" on {h}")).unwrap_or_default();
        match s.rank {
            Some(rank) => format!("rank {rank} (pid {}{host})", s.pid),
            None => format!("pid {}{host}", s.pid),
        }
    }

    /// One line: who, GPU, kernels, run end, where the outputs are.
    pub fn line(&self) -> String {
        let end = self.run_end.as_ref().map_or_else(|| "run end unknown".to_owned(), RunEnd::describe);
        if self.idle_on_demand && self.kernels.is_none() {
            return format!(
                "{}: idle on demand (its captures are listed above), {end}: {}",
                self.who(),
                self.dir.display()
            );
        }
        let gpu = self.device_name.as_deref().unwrap_or("GPU unknown");
        let kernels = self.kernels.map_or_else(|| "no report".to_owned(), |k| format!("{k} kernels"));
        format!("{}: {gpu}, {kernels}, {end}: {}", self.who(), self.dir.display())
    }
}

/// The processes that left outputs under `root` (itself and its subdirectories), by rank,
/// then pid.
pub fn scan(root: &Path) -> Vec<ProcessOutputs> {
    let mut found: Vec<ProcessOutputs> = crate::report::merge::result_dirs(root, RESULT_FILES.as_slice())
        .iter()
        .map(|d| ProcessOutputs::read(d))
        .collect();
    found.sort_by_key(|p| (p.rank().is_none(), p.rank(), p.status.as_ref().map(|s| s.pid), p.dir.clone()));
    found
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A recorded report (the golden one), as a process `kernels` kernels on `gpu` wrote it.
    pub(crate) fn recorded_report(gpu: &str, kernels: u64, run_end: Option<RunEnd>) -> Report {
        let mut r = Report::from_json(include_str!("../../tests/golden/report.json")).unwrap();
        r.meta.device_name = Some(gpu.into());
        r.meta.kernel_count = kernels;
        r.meta.run_end = run_end;
        r
    }

    /// Writes `injection.json` (and a report unless `kernels` is `None`) as an injected
    /// process would.
    pub(crate) fn write_process(dir: &Path, pid: u32, rank: Option<u32>, kernels: Option<u64>) {
        std::fs::create_dir_all(dir).unwrap();
        let end = RunEnd::Finished { by: "process exit".into() };
        let status = InjectionStatus {
            pid,
            contexts_created: 1,
            profiled: kernels.is_some(),
            outputs_written: kernels.is_some(),
            host: Some("node7".into()),
            rank,
            rank_variable: rank.map(|_| "RANK".into()),
            run_end: Some(end.clone()),
            ..Default::default()
        };
        std::fs::write(dir.join(STATUS_FILE), serde_json::to_string_pretty(&status).unwrap()).unwrap();
        if let Some(k) = kernels {
            recorded_report("NVIDIA H200", k, Some(end)).write_json(dir.join("report.json")).unwrap();
        }
    }

    #[test]
    fn scan_lists_each_process_by_rank() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write_process(&root.join("node7-1"), 11, Some(1), Some(236));
        write_process(&root.join("node7-0"), 10, Some(0), Some(240));
        write_process(&root.join("node7-pid5"), 5, None, None);
        std::fs::create_dir_all(root.join("node7-pid6")).unwrap(); // a worker that wrote nothing
        let found = scan(root);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_eq!(
            found[0].line(),
            format!(
                "rank 0 (pid 10 on node7): NVIDIA H200, 240 kernels, finished (process exit): {}",
                root.join("node7-0").display()
            )
        );
        assert_eq!(found[1].rank(), Some(1));
        assert_eq!(found[1].kernels, Some(236));
        assert!(found[1].has_outputs() && !found[2].has_outputs());
        assert_eq!(
            found[2].line(),
            format!(
                "pid 5 on node7: GPU unknown, no report, finished (process exit): {}",
                root.join("node7-pid5").display()
            )
        );
        // A rank of `gmprof run --on-demand` that ended idle: its captures are its outputs.
        let mut idle = found[2].clone();
        idle.idle_on_demand = true;
        assert_eq!(
            idle.line(),
            format!(
                "pid 5 on node7: idle on demand (its captures are listed above), finished (process exit): {}",
                root.join("node7-pid5").display()
            )
        );
    }

    #[test]
    fn a_report_without_status_is_named_by_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("capi-run");
        std::fs::create_dir_all(&dir).unwrap();
        recorded_report("NVIDIA H100 80GB HBM3", 9, None).write_json(dir.join("report.json")).unwrap();
        std::fs::write(tmp.path().join("report.json"), "not json").unwrap();
        let found = scan(tmp.path());
        assert_eq!(found.len(), 2);
        let capi = found.iter().find(|p| p.dir == dir).unwrap();
        assert_eq!(capi.who(), "capi-run");
        assert!(capi.line().starts_with("capi-run: NVIDIA H100 80GB HBM3, 9 kernels, run end unknown: "));
        let broken = found.iter().find(|p| p.dir == tmp.path()).unwrap();
        assert!(broken.report_error.is_some() && !broken.has_outputs());
    }
}
