//! Where each profiled process writes: one directory per process, never an overwrite.
//!
//! Layer 3, shared by [`crate::ways_in::injection`] and [`crate::ways_in::capi`]. Every
//! process that profiles resolves its own directory from the configured output path
//! (`GMPROF_OUT`, `gmprof run -o`):
//!
//! - **A template** (the path holds `%`): expanded per process, as nsys does: `%p` the pid,
//!   `%h` the host name, `%q{VAR}` the value of environment variable `VAR` (empty when
//!   unset), `%%` a `%`. `gmprof run -o 'out/%h-%p'`.
//! - **A rank variable is set** (the first of [`RANK_VARIABLES`] that holds a whole number:
//!   `RANK` as torchrun sets it, then Open MPI's, Slurm's and PMI's, then `LOCAL_RANK`):
//!   `DIR/<host>-<rank>/`.
//! - **The program `gmprof run` started** (its parent is the launcher named by
//!   [`LAUNCHER_PID_ENV`]), or any process outside `gmprof run`: `DIR/` itself, today's
//!   simple layout for a single process. Should `DIR/` already hold results, the process
//!   falls back to its own subdirectory.
//! - **Any other process** (a worker a program spawned, a process a shell script started):
//!   `DIR/<host>-pid<pid>/`.
//!
//! A per-process directory is claimed by creating it: one that already exists is left alone
//! and `-1`, `-2`, ... is appended, so two processes, or two runs, never share one. The
//! naming is pure ([`expand_template`], [`detect_rank`], [`Target::resolve`]) and tested on
//! the CPU; [`Target::claim`] touches the file system.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Variables that name a process's rank, in the order they are read: torchrun's global
/// `RANK`, Open MPI's, Slurm's and PMI's (MPICH, Intel MPI) global ranks, then torchrun's
/// `LOCAL_RANK` (unique on one host only, so last).
pub const RANK_VARIABLES: [&str; 5] = ["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "LOCAL_RANK"];

/// Variables that give the number of ranks, read in the order of [`RANK_VARIABLES`]: torchrun's,
/// Open MPI's, Slurm's, PMI's.
pub const WORLD_SIZE_VARIABLES: [&str; 4] = ["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"];

/// Variables that give a process's rank on its host: torchrun's, Open MPI's, Slurm's.
pub const LOCAL_RANK_VARIABLES: [&str; 3] = ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"];

/// Set by `gmprof run` to its own pid: the process it starts (whose parent that is) writes
/// into the output directory itself.
pub const LAUNCHER_PID_ENV: &str = "GMPROF_LAUNCHER_PID";

/// Files whose presence marks a directory as holding a process's results.
pub const RESULT_FILES: [&str; 2] = ["report.json", "injection.json"];

/// A process's rank and the variable it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rank {
    /// The variable, one of [`RANK_VARIABLES`].
    pub variable: &'static str,
    /// Its value.
    pub value: u32,
}

/// What names a process's directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub parent_pid: u32,
    /// The rank, when a rank variable is set.
    pub rank: Option<Rank>,
}

impl ProcessIdentity {
    /// This process, its rank read through `lookup`.
    pub fn current(lookup: &dyn Fn(&str) -> Option<String>) -> Self {
        // SAFETY: getppid cannot fail and has no preconditions.
        let parent_pid = unsafe { libc::getppid() } as u32;
        ProcessIdentity { host: host_name(), pid: std::process::id(), parent_pid, rank: detect_rank(lookup) }
    }

    /// The default name of this process's own directory: `<host>-<rank>` or `<host>-pid<pid>`.
    pub fn dir_name(&self) -> String {
        match &self.rank {
            Some(rank) => format!("{}-{}", self.host, rank.value),
            None => format!("{}-pid{}", self.host, self.pid),
        }
    }
}

/// The host name, with characters that cannot be in a file name replaced (`localhost` when
/// it cannot be read).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = if rc == 0 { String::from_utf8_lossy(&buf[..end]).into_owned() } else { String::new() };
    let name: String = name.chars().map(|c| if c == '/' || c.is_control() { '_' } else { c }).collect();
    if name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

/// The first rank variable of [`RANK_VARIABLES`] that holds a whole number.
pub fn detect_rank(lookup: &dyn Fn(&str) -> Option<String>) -> Option<Rank> {
    RANK_VARIABLES.iter().find_map(|&variable| {
        let value = lookup(variable)?.trim().parse::<u32>().ok()?;
        Some(Rank { variable, value })
    })
}

/// The process's place in a distributed job, as the Kineto trace's `distributedInfo` records
/// it: its rank ([`detect_rank`]), the world size and the local rank (the first of
/// [`WORLD_SIZE_VARIABLES`] and of [`LOCAL_RANK_VARIABLES`] that holds a whole number).
/// `None` without a rank.
pub fn distributed_info(lookup: &dyn Fn(&str) -> Option<String>) -> Option<crate::report::kineto::DistributedInfo> {
    let first = |names: &[&str]| names.iter().find_map(|&name| lookup(name)?.trim().parse::<u32>().ok());
    let rank = detect_rank(lookup)?;
    Some(crate::report::kineto::DistributedInfo {
        rank: rank.value,
        world_size: first(&WORLD_SIZE_VARIABLES),
        local_rank: first(&LOCAL_RANK_VARIABLES),
        rank_variable: Some(rank.variable.to_owned()),
    })
}

/// Expands `%p`, `%h`, `%q{VAR}` and `%%` in `template`.
pub fn expand_template(
    template: &str,
    id: &ProcessIdentity,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String> {
    let bad = |why: &str| {
        Error::InvalidConfig(format!(
            "output template '{template}': {why} (use %p pid, %h host, %q{{VAR}} an environment variable, %% a %)"
        ))
    };
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('p') => out.push_str(&id.pid.to_string()),
            Some('h') => out.push_str(&id.host),
            Some('%') => out.push('%'),
            Some('q') => {
                if chars.next() != Some('{') {
                    return Err(bad("%q needs {VAR}"));
                }
                let mut name = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    name.push(c);
                }
                if !closed || name.is_empty() || name.contains('{') {
                    return Err(bad("%q{} needs a variable name and a closing }"));
                }
                out.push_str(&lookup(&name).unwrap_or_default());
            }
            Some(other) => return Err(bad(&format!("unknown %{other}"))),
            None => return Err(bad("a lone % at the end")),
        }
    }
    Ok(out)
}

/// The part of an output path before its first component holding a template `%`: where
/// `gmprof run` and `gmprof merge` look for the processes' directories.
pub fn template_root(path: &Path) -> PathBuf {
    let mut root = PathBuf::new();
    for part in path.components() {
        if part.as_os_str().to_string_lossy().contains('%') {
            break;
        }
        root.push(part);
    }
    if root.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        root
    }
}

/// Whether `dir` holds results ([`RESULT_FILES`]).
pub fn has_results(dir: &Path) -> bool {
    RESULT_FILES.iter().any(|f| dir.join(f).exists())
}

/// Where a process will write, before anything is created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The output directory itself; the process falls back to `fallback` (its own
    /// subdirectory) when the directory already holds results.
    Shared {
        /// The output directory.
        dir: PathBuf,
        /// This process's own subdirectory of it.
        fallback: PathBuf,
    },
    /// A directory of this process's own (created, with `-N` appended if it exists).
    Own(PathBuf),
}

impl Target {
    /// Decides where the process `id` writes, given the configured output path `out` and the
    /// pid of the `gmprof run` that started the job, if any.
    pub fn resolve(
        out: &Path,
        id: &ProcessIdentity,
        launcher_pid: Option<u32>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Target> {
        let text = out.to_string_lossy();
        if text.contains('%') {
            return Ok(Target::Own(PathBuf::from(expand_template(&text, id, lookup)?)));
        }
        let own = out.join(id.dir_name());
        if id.rank.is_some() {
            return Ok(Target::Own(own));
        }
        match launcher_pid {
            Some(launcher) if launcher != id.parent_pid => Ok(Target::Own(own)),
            _ => Ok(Target::Shared { dir: out.to_owned(), fallback: own }),
        }
    }

    /// Creates the directory and returns it: the shared directory unless it holds results,
    /// otherwise the first of `NAME`, `NAME-1`, `NAME-2`, ... that did not exist.
    pub fn claim(&self) -> Result<PathBuf> {
        let own = match self {
            Target::Shared { dir, fallback } => {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
                if !has_results(dir) {
                    return Ok(dir.clone());
                }
                fallback
            }
            Target::Own(own) => own,
        };
        if let Some(parent) = own.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let name = own.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for n in 0..10_000u32 {
            let candidate = if n == 0 { own.clone() } else { own.with_file_name(format!("{name}-{n}")) };
            match std::fs::create_dir(&candidate) {
                Ok(()) => return Ok(candidate),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&candidate, e)),
            }
        }
        Err(Error::InvalidState(format!("{} and 10000 numbered variants of it all exist", own.display())))
    }
}

/// Resolves and claims this process's directory for the output path `out` (environment
/// read through `lookup`).
pub fn claim_for_process(out: &Path, lookup: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf> {
    let id = ProcessIdentity::current(lookup);
    let launcher = lookup(LAUNCHER_PID_ENV).and_then(|v| v.trim().parse::<u32>().ok());
    Target::resolve(out, &id, launcher, lookup)?.claim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string())
    }

    fn id(rank: Option<u32>) -> ProcessIdentity {
        ProcessIdentity {
            host: "node7".into(),
            pid: 4242,
            parent_pid: 100,
            rank: rank.map(|value| Rank { variable: "RANK", value }),
        }
    }

    #[test]
    fn rank_comes_from_the_first_variable_holding_a_number() {
        assert_eq!(detect_rank(&env(&[])), None);
        assert_eq!(detect_rank(&env(&[("LOCAL_RANK", "1"), ("RANK", "3")])), Some(Rank { variable: "RANK", value: 3 }));
        assert_eq!(
            detect_rank(&env(&[("LOCAL_RANK", "1"), ("SLURM_PROCID", " 12 ")])),
            Some(Rank { variable: "SLURM_PROCID", value: 12 })
        );
        assert_eq!(
            detect_rank(&env(&[("RANK", ""), ("OMPI_COMM_WORLD_RANK", "x"), ("PMI_RANK", "5")])),
            Some(Rank { variable: "PMI_RANK", value: 5 }),
            "empty and non-numeric values are skipped"
        );
        assert_eq!(detect_rank(&env(&[("LOCAL_RANK", "0")])), Some(Rank { variable: "LOCAL_RANK", value: 0 }));
        let torchrun = distributed_info(&env(&[("RANK", "5"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1")])).unwrap();
        assert_eq!((torchrun.rank, torchrun.world_size, torchrun.local_rank), (5, Some(8), Some(1)));
        assert_eq!(torchrun.rank_variable.as_deref(), Some("RANK"));
        let slurm = distributed_info(&env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "x")])).unwrap();
        assert_eq!((slurm.rank, slurm.world_size, slurm.local_rank), (3, None, None));
        assert_eq!(distributed_info(&env(&[("WORLD_SIZE", "8")])), None);
    }

    #[test]
    fn templates_expand_like_nsys() {
        let lookup = env(&[("SLURM_JOB_ID", "991")]);
        assert_eq!(expand_template("out/%h-%p", &id(None), &lookup).unwrap(), "out/node7-4242");
        assert_eq!(expand_template("run-%q{SLURM_JOB_ID}/%p", &id(None), &lookup).unwrap(), "run-991/4242");
        assert_eq!(expand_template("x%q{UNSET}y", &id(None), &lookup).unwrap(), "xy");
        assert_eq!(expand_template("100%%", &id(None), &lookup).unwrap(), "100%");
        for (bad, why) in [("out/%r", "unknown %r"), ("out%", "lone %"), ("%qX", "%q needs"), ("%q{A", "closing")] {
            let e = expand_template(bad, &id(None), &lookup).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn template_root_is_the_path_before_the_first_template_part() {
        assert_eq!(template_root(Path::new("out/%h-%p")), PathBuf::from("out"));
        assert_eq!(template_root(Path::new("/a/b/%q{R}/x")), PathBuf::from("/a/b"));
        assert_eq!(template_root(Path::new("%p")), PathBuf::from("."));
        assert_eq!(template_root(Path::new("out")), PathBuf::from("out"));
    }

    #[test]
    fn targets_per_process() {
        let out = Path::new("/o");
        let none = env(&[]);
        let own = |s: &str| Target::Own(PathBuf::from(s));
        let shared = |fallback: &str| Target::Shared { dir: out.into(), fallback: fallback.into() };
        // A rank wins over everything but a template.
        assert_eq!(Target::resolve(out, &id(Some(1)), Some(100), &none).unwrap(), own("/o/node7-1"));
        assert_eq!(Target::resolve(out, &id(Some(1)), None, &none).unwrap(), own("/o/node7-1"));
        // The program gmprof run started, or any process outside gmprof run: the directory.
        assert_eq!(Target::resolve(out, &id(None), Some(100), &none).unwrap(), shared("/o/node7-pid4242"));
        assert_eq!(Target::resolve(out, &id(None), None, &none).unwrap(), shared("/o/node7-pid4242"));
        // A process that program started: its own.
        assert_eq!(Target::resolve(out, &id(None), Some(99), &none).unwrap(), own("/o/node7-pid4242"));
        // A template overrides.
        assert_eq!(Target::resolve(Path::new("t/%p"), &id(Some(3)), Some(100), &none).unwrap(), own("t/4242"));
        assert!(Target::resolve(Path::new("t/%z"), &id(None), None, &none).is_err());
    }

    #[test]
    fn claims_never_reuse_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        let fallback = dir.join("node7-pid4242");
        let shared = Target::Shared { dir: dir.clone(), fallback: fallback.clone() };
        assert_eq!(shared.claim().unwrap(), dir, "an empty directory is used as it is");
        std::fs::write(dir.join("report.json"), "{}").unwrap();
        assert_eq!(shared.claim().unwrap(), fallback, "results there: the process's own directory");
        assert_eq!(shared.claim().unwrap(), dir.join("node7-pid4242-1"));

        let rank = Target::Own(dir.join("node7-0"));
        assert_eq!(rank.claim().unwrap(), dir.join("node7-0"));
        assert_eq!(rank.claim().unwrap(), dir.join("node7-0-1"));
        assert_eq!(rank.claim().unwrap(), dir.join("node7-0-2"));
        assert!(dir.join("node7-0-2").is_dir());
        let nested = Target::Own(tmp.path().join("a/b/node7-3"));
        assert_eq!(nested.claim().unwrap(), tmp.path().join("a/b/node7-3"), "parents are created");
    }

    #[test]
    fn this_process_has_a_name() {
        let me = ProcessIdentity::current(&env(&[("RANK", "2")]));
        assert_eq!(me.pid, std::process::id());
        assert!(!me.host.is_empty() && !me.host.contains('/'));
        assert_eq!(me.dir_name(), format!("{}-2", me.host));
        assert_eq!(ProcessIdentity::current(&env(&[])).dir_name(), format!("{}-pid{}", me.host, me.pid));
    }
}
