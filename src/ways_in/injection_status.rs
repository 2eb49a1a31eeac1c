//! `injection.json`: how an injected run went, written by each injected process into its
//! output directory and read back by `gmprof run` once the program has ended.
//!
//! Below both sides: imported by [`crate::ways_in::injection`] (which writes it) and by
//! [`crate::ways_in::processes`] and [`crate::ways_in::launch`] (which read it); it imports
//! nothing of `ways_in`. Also here, [`stderr_identity`]: where a process printed its error,
//! recorded by the writer and compared by the reader. The old paths re-export them:
//! [`crate::ways_in::injection::InjectionStatus`], [`crate::ways_in::injection::STATUS_FILE`]
//! and [`crate::ways_in::processes::stderr_identity`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::RunEnd;

/// The file in the output directory that records how an injected run went.
pub const STATUS_FILE: &str = "injection.json";

/// How an injected run went; written to [`STATUS_FILE`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InjectionStatus {
    /// The profiled process.
    pub pid: u32,
    /// Its command line.
    pub command: Vec<String>,
    /// The mode asked for.
    pub mode: Option<String>,
    /// CUDA contexts the program created.
    pub contexts_created: u64,
    /// Contexts gmprof did not profile (their profiler could not start, with why), with the
    /// kernel launches heard and the kernels that ran on each (none of them is in the
    /// outputs).
    #[serde(default)]
    pub unprofiled_contexts: Vec<crate::model::UnprofiledContext>,
    /// Whether a profiler ran on any of them.
    pub profiled: bool,
    /// Contexts profiled (one per GPU the process used, and contexts created later).
    #[serde(default)]
    pub contexts_profiled: u64,
    /// Why profiling did not start or failed to finish.
    pub error: Option<String>,
    /// What ended the session: `context destroyed`, `process exit`, or none.
    pub finished_by: Option<String>,
    /// Whether ranges.csv and the other outputs were written.
    pub outputs_written: bool,
    /// NVTX pushes heard (all threads).
    pub nvtx_pushes: u64,
    /// NVTX pushes that became gmprof ranges.
    pub nvtx_ranges_followed: u64,
    /// NVTX pops with no push on their thread.
    pub nvtx_unbalanced_pops: u64,
    /// What started gmprof: `first NVTX call` (NVTX ranges heard from the program's first
    /// NVTX call) or `CUDA initialization`.
    #[serde(default)]
    pub started_by: Option<String>,
    /// How the run ended, as the outputs record it (also in report.json).
    #[serde(default)]
    pub run_end: Option<RunEnd>,
    /// Checkpoints written while the program ran.
    #[serde(default)]
    pub checkpoints_written: u64,
    /// The host the process ran on.
    #[serde(default)]
    pub host: Option<String>,
    /// Its rank, when a rank variable was set.
    #[serde(default)]
    pub rank: Option<u32>,
    /// The variable the rank came from (`RANK`, `SLURM_PROCID`, ...).
    #[serde(default)]
    pub rank_variable: Option<String>,
    /// Where the process printed `error` as it happened: its stderr as `device:inode`
    /// ([`stderr_identity`]). `gmprof run` does not print the
    /// error again when its own stderr is the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_printed_to: Option<String>,
}

impl InjectionStatus {
    /// Reads `dir/injection.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(STATUS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| Error::InvalidState(format!("{}: {e}", path.display())))
    }

    /// Writes `dir/injection.json`.
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(STATUS_FILE);
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::InvalidState(format!("serializing {}: {e}", path.display())))?;
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))
    }
}

/// This process's stderr as `device:inode`: a process that printed an error there records
/// it in `injection.json`, and `gmprof run` does not print the error again when its own
/// stderr is the same file (a terminal or a pipe the two share). `None` when it cannot be
/// read.
pub fn stderr_identity() -> Option<String> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    Some(format!("{}:{}", meta.dev(), meta.ino()))
}
