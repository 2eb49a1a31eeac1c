//! `gmprof run`: profile an unmodified program through injection.
//!
//! Layer 3, the launcher side of [`crate::ways_in::injection`]. [`LaunchPlan::new`] finds
//! libgmprof.so and libcupti and builds the child's environment: `CUDA_INJECTION64_PATH`
//! (the driver loads gmprof), `NVTX_INJECTION64_PATH` (libgmprof.so too: NVTX loads gmprof
//! on the program's first NVTX call, so it hears ranges pushed before CUDA starts, and gmprof
//! hands NVTX on to libcupti), `GMPROF_CUPTI_LIB` (that libcupti) and the `GMPROF_*`
//! configuration. [`LaunchPlan::run`] clears stale
//! outputs, runs the program and reads back `injection.json`; [`Outcome::messages`] turns
//! what happened (no CUDA context, a start failure, a failing program) into plain words.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::checked::library::cupti_candidates;
use crate::error::{Error, Result};
use crate::ways_in::env_names::injection as env;
use crate::ways_in::layout::{self, LAUNCHER_PID_ENV};
use crate::ways_in::processes::{self, ProcessOutputs};

/// `LD_PRELOAD` with libgmprof.so first, before what the environment preloads already.
fn preload(library: &Path, existing: Option<OsString>) -> OsString {
    let mut value = OsString::from(library);
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// Environment variable naming libgmprof.so explicitly (also read by the Python module).
pub const LIBRARY_ENV: &str = "GMPROF_LIBRARY";

/// `gmprof run --torch-steps`: the step range's name, read by the Python bootstrap (defined in
/// [`crate::ways_in::env_names`]).
pub use crate::ways_in::env_names::TORCH_STEPS_ENV;

/// The Python start-up file of `--torch-steps` (python/gmprof/_bootstrap/sitecustomize.py):
/// written into a directory put first on the program's `PYTHONPATH`, it opens an NVTX range
/// per optimizer step interval in every Python process of the run.
pub const TORCH_STEPS_BOOTSTRAP: &str = include_str!("../../python/gmprof/_bootstrap/sitecustomize.py");

/// What `gmprof run` was asked for.
#[derive(Clone, Debug, Default)]
pub struct LaunchOptions {
    /// Mode name, passed through as `GMPROF_MODE`.
    pub mode: Option<String>,
    /// Metrics, passed as `GMPROF_METRICS`.
    pub metrics: Vec<String>,
    /// NVTX ranges to follow, passed as `GMPROF_NVTX_INCLUDE`.
    pub nvtx_include: Vec<String>,
    /// Output directory.
    pub output_dir: PathBuf,
    /// `thread` or `process`.
    pub range_scope: Option<String>,
    /// Synchronize before each pop.
    pub synchronize_on_pop: bool,
    /// libgmprof.so to inject (default: found next to the running executable).
    pub library: Option<PathBuf>,
    /// Iteration replay: range pattern and how many instances the program runs, passed as
    /// `GMPROF_ITERATION_REPLAY` and `GMPROF_ITERATIONS`.
    pub iteration_replay: Option<(String, usize)>,
    /// per_kernel in rotation over N steps (`auto` or a number), passed as `GMPROF_ROTATE`.
    pub rotate: Option<String>,
    /// Cycle full counter images mid-run, passed as `GMPROF_ROTATE_CYCLES`.
    pub rotate_cycles: bool,
    /// The rotation's step range, passed as `GMPROF_ROTATE_STEP`.
    pub rotate_step: Option<String>,
    /// PM sampling metrics (`default` or names), passed as `GMPROF_PM_SAMPLING`.
    pub pm_sampling: Option<String>,
    /// PM sampling interval, passed as `GMPROF_PM_INTERVAL`.
    pub pm_interval: Option<String>,
    /// PC sampling: `default` or an interval (N for every 2^N cycles), passed as
    /// `GMPROF_PC_SAMPLING`.
    pub pc_sampling: Option<String>,
    /// `--torch-steps`: the name of the NVTX range opened per optimizer step interval in the
    /// program's Python processes ([`TORCH_STEPS_BOOTSTRAP`]).
    pub torch_steps: Option<String>,
    /// On-demand capture: start idle (`--on-demand`, `--capture-range`) and what captures take
    /// ([`crate::ways_in::on_demand::RunOptions`]).
    pub on_demand: crate::ways_in::on_demand::RunOptions,
    /// The program and its arguments.
    pub program: Vec<OsString>,
}

/// The resolved launch: libraries and environment.
#[derive(Clone, Debug)]
pub struct LaunchPlan {
    /// libgmprof.so, absolute.
    pub library: PathBuf,
    /// libcupti, absolute.
    pub cupti: PathBuf,
    /// The output directory, absolute.
    pub output_dir: PathBuf,
    /// Variables set for the child.
    pub env: Vec<(String, OsString)>,
    /// `--torch-steps`: the step range's name. [`LaunchPlan::run`] writes the Python bootstrap
    /// into a new private temporary directory, puts it first on the child's `PYTHONPATH` and
    /// removes it when the program has ended.
    pub torch_steps: Option<String>,
    /// The program and its arguments.
    pub program: Vec<OsString>,
}

/// What came of a run.
#[derive(Debug)]
pub struct Outcome {
    /// The program's exit status.
    pub exit: ExitStatus,
    /// The processes that left outputs or a status, by rank then pid.
    pub processes: Vec<ProcessOutputs>,
    /// Where they were looked for: the output directory (or a template's root).
    pub output_dir: PathBuf,
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| Error::io(path, e))
}

/// Candidates for libgmprof.so: `explicit`, else `$GMPROF_LIBRARY`, else next to `exe`, in
/// `exe/../lib`, and in the `gmprof` Python package of each `exe/../lib/python3*/site-packages`
/// (where the wheel puts it; pip puts the binary in the environment's `bin/`).
pub fn library_candidates(explicit: Option<&Path>, exe: Option<&Path>) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.to_owned()];
    }
    if let Some(p) = std::env::var_os(LIBRARY_ENV) {
        return vec![PathBuf::from(p)];
    }
    let mut out = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        out.push(dir.join("libgmprof.so"));
        out.push(dir.join("../lib/libgmprof.so"));
        let pattern = dir.join("../lib/python3*/site-packages/gmprof/libgmprof.so");
        let mut wheel: Vec<PathBuf> =
            glob::glob(&pattern.to_string_lossy()).map(|paths| paths.flatten().collect()).unwrap_or_default();
        wheel.sort();
        out.extend(wheel);
    }
    out
}

fn first_existing(candidates: &[PathBuf], what: &str, hint: &str) -> Result<PathBuf> {
    candidates.iter().find(|p| p.is_file()).map(|p| absolute(p)).transpose()?.ok_or_else(|| {
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        Error::InvalidConfig(format!("could not find {what} (tried: {}); {hint}", tried.join(", ")))
    })
}

impl LaunchPlan {
    /// Resolves libraries and builds the environment; touches nothing.
    pub fn new(opts: &LaunchOptions) -> Result<LaunchPlan> {
        Self::with_cupti_candidates(opts, &cupti_candidates())
    }

    /// As [`LaunchPlan::new`], looking for libcupti among `cupti_candidates`.
    pub fn with_cupti_candidates(opts: &LaunchOptions, cupti_candidates: &[String]) -> Result<LaunchPlan> {
        if opts.program.is_empty() {
            return Err(Error::InvalidConfig("no program given: gmprof run [OPTIONS] -- PROGRAM [ARGS...]".into()));
        }
        if let Some(mode) = &opts.mode {
            mode.parse::<crate::model::ProfilingMode>()?;
        }
        if let Some(scope) = &opts.range_scope {
            scope.parse::<crate::capture::profiler::RangeScope>()?;
        }
        let exe = std::env::current_exe().ok();
        let library = first_existing(
            &library_candidates(opts.library.as_deref(), exe.as_deref()),
            "libgmprof.so",
            "build it with `cargo build --release` (it lands next to the gmprof binary) or pass --lib",
        )?;
        // Only paths can be injected, so the loader's bare names are skipped.
        let cupti_paths: Vec<PathBuf> =
            cupti_candidates.iter().filter(|c| c.contains('/')).map(PathBuf::from).collect();
        let cupti = first_existing(
            &cupti_paths,
            "libcupti.so",
            "install the CUDA toolkit (12.6+), set CUDA_HOME, or set GMPROF_CUPTI_LIB to libcupti.so",
        )?;
        let output_dir = absolute(&opts.output_dir)?;
        let mut env: Vec<(String, OsString)> = vec![
            ("CUDA_INJECTION64_PATH".into(), library.clone().into()),
            // NVTX loads gmprof on the program's first NVTX call, which may come before CUDA
            // is initialized; gmprof starts there and hands NVTX on to libcupti
            // (crate::ways_in::inject_entry).
            ("NVTX_INJECTION64_PATH".into(), library.clone().into()),
            // Preloaded, so that a process ending through `_exit` (a forked multiprocessing
            // worker) still writes its outputs (crate::ways_in::immediate_exit).
            ("LD_PRELOAD".into(), preload(&library, std::env::var_os("LD_PRELOAD"))),
            // The libcupti the injected library loads, and hands NVTX to.
            (crate::checked::library::CUPTI_LIB_ENV.into(), cupti.clone().into()),
            (env::OUT.into(), output_dir.clone().into()),
            // The program started here writes into the output directory itself; the
            // processes it starts, each into its own (crate::ways_in::layout).
            (LAUNCHER_PID_ENV.into(), std::process::id().to_string().into()),
        ];
        if let Some(mode) = &opts.mode {
            env.push((env::MODE.into(), mode.into()));
        }
        if !opts.metrics.is_empty() {
            env.push((env::METRICS.into(), opts.metrics.join(",").into()));
        }
        if !opts.nvtx_include.is_empty() {
            env.push((env::NVTX_INCLUDE.into(), opts.nvtx_include.join(",").into()));
        }
        if let Some(scope) = &opts.range_scope {
            env.push((env::RANGE_SCOPE.into(), scope.into()));
        }
        if opts.synchronize_on_pop {
            env.push((env::SYNC_ON_POP.into(), "1".into()));
        }
        if let Some((pattern, instances)) = &opts.iteration_replay {
            crate::capture::profiler::iteration_pattern(pattern)?;
            env.push((env::ITERATION_REPLAY.into(), pattern.into()));
            env.push((env::ITERATIONS.into(), instances.to_string().into()));
        }
        if let Some(n) = &opts.rotate {
            n.parse::<crate::capture::profiler::rotation::Every>()
                .map_err(|e| Error::InvalidConfig(format!("--rotate {e}")))?;
            env.push((env::ROTATE.into(), n.into()));
        }
        if opts.rotate_cycles {
            env.push((env::ROTATE_CYCLES.into(), "1".into()));
        }
        if let Some(step) = &opts.rotate_step {
            crate::capture::profiler::iteration_pattern(step)?;
            env.push((env::ROTATE_STEP.into(), step.into()));
        }
        if let Some(interval) = &opts.pm_interval {
            if opts.pm_sampling.is_none() {
                return Err(Error::InvalidConfig("--pm-interval needs --pm-sampling".into()));
            }
            crate::capture::pm_sampling::parse_interval_setting(interval)?;
            env.push((env::PM_INTERVAL.into(), interval.into()));
        }
        if let Some(metrics) = &opts.pm_sampling {
            env.push((env::PM_SAMPLING.into(), metrics.into()));
        }
        if let Some(value) = &opts.pc_sampling {
            // Refuse a bad interval before the program starts.
            crate::capture::pc_sampling::PcSamplingConfig::from_value(value)?;
            env.push((env::PC_SAMPLING.into(), value.into()));
        }
        let torch_steps = match opts.torch_steps.as_deref().map(str::trim) {
            Some("") => return Err(Error::InvalidConfig("--torch-steps needs a range name (default: step)".into())),
            Some(name) => {
                env.push((TORCH_STEPS_ENV.into(), name.into()));
                Some(name.to_owned())
            }
            None => None,
        };
        for (key, value) in opts.on_demand.env(torch_steps.as_deref())? {
            env.push((key, value.into()));
        }
        if opts.on_demand.idle_start() {
            // The program's own gmprof (Python's `gmprof.capture`, the C ABI) must be the
            // injected library, whose idle service it drives.
            env.push((LIBRARY_ENV.into(), library.clone().into()));
        }
        Ok(LaunchPlan { library, cupti, output_dir, env, torch_steps, program: opts.program.clone() })
    }

    /// Where the processes' directories are: the output directory, or the part of a
    /// template before its first `%`.
    pub fn output_root(&self) -> PathBuf {
        layout::template_root(&self.output_dir)
    }

    /// Refuses an output directory that holds results of an earlier run, in it or in a
    /// subdirectory: gmprof never writes over results.
    pub fn check_fresh_output(&self) -> Result<()> {
        let root = self.output_root();
        if let Some(found) = crate::report::merge::result_dirs(&root, layout::RESULT_FILES.as_slice()).first() {
            return Err(Error::InvalidConfig(format!(
                "{} already holds the results of an earlier run (in {}); gmprof does not write over results: \
                 remove them or choose another -o",
                root.display(),
                found.display()
            )));
        }
        Ok(())
    }

    /// Runs the program to its end and reads what the injected library left.
    ///
    /// SIGTERM, SIGINT and SIGHUP sent to `gmprof run` (by `timeout`, a scheduler, `kill`)
    /// are passed on to the program, which writes its outputs and ends; the terminal's own
    /// Ctrl-C already reaches the program and is not sent twice. If `gmprof run` itself is
    /// killed, the program gets SIGTERM (`PR_SET_PDEATHSIG`), so it still writes its outputs.
    pub fn run(&self) -> Result<Outcome> {
        self.check_fresh_output()?;
        let (program, args) = self.program.split_first().ok_or_else(|| Error::InvalidConfig("no program".into()))?;
        let mut command = Command::new(program);
        command.args(args).envs(self.env.iter().map(|(k, v)| (k, v)));
        // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
        // which is async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
                Ok(())
            });
        }
        let _bootstrap = match &self.torch_steps {
            Some(_) => {
                let bootstrap = PythonBootstrap::write()?;
                let mut path = OsString::from(&bootstrap.0);
                if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
                    path.push(":");
                    path.push(old);
                }
                command.env("PYTHONPATH", path);
                Some(bootstrap)
            }
            None => None,
        };
        let mut child = command
            .spawn()
            .map_err(|e| Error::InvalidConfig(format!("could not start {}: {e}", Path::new(program).display())))?;
        forward_signals_to(child.id());
        let exit = child.wait().map_err(|e| Error::InvalidState(format!("waiting for the program: {e}")))?;
        CHILD.store(0, Ordering::Release);
        restore_default_signals();
        let root = self.output_root();
        Ok(Outcome { exit, processes: processes::scan(&root), output_dir: root })
    }
}

/// The `--torch-steps` bootstrap directory, removed when dropped (the program has ended).
struct PythonBootstrap(PathBuf);

impl PythonBootstrap {
    /// A new directory under the temporary directory, readable by this user only (never one
    /// that already exists: another user could have placed it), holding the bootstrap.
    fn write() -> Result<PythonBootstrap> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let mut attempt = 0u32;
        let dir = loop {
            let dir = base.join(format!("gmprof-torch-steps-{}-{stamp:x}-{attempt}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
                Err(e) => return Err(Error::io(&dir, e)),
            }
        };
        let guard = PythonBootstrap(dir);
        let file = guard.0.join("sitecustomize.py");
        std::fs::write(&file, TORCH_STEPS_BOOTSTRAP).map_err(|e| Error::io(&file, e))?;
        Ok(guard)
    }
}

impl Drop for PythonBootstrap {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Puts back the default action of the signals [`forward_signals_to`] took, once the program
/// has ended: a SIGTERM to `gmprof run` while it prints the summary ends it as usual.
fn restore_default_signals() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: SIG_DFL is always a valid disposition.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

/// The program `gmprof run` waits for (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);

/// Passes SIGTERM, SIGINT and SIGHUP that another process sent to `gmprof run` on to `pid`.
fn forward_signals_to(pid: u32) {
    CHILD.store(pid as i32, Ordering::Release);
    extern "C" fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut std::ffi::c_void) {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let code = unsafe { info.as_ref() }.map_or(0, |i| i.si_code);
        // SI_KERNEL: the terminal sent it to the whole foreground group, the program too.
        let child = CHILD.load(Ordering::Acquire);
        if code != libc::SI_KERNEL && child > 0 {
            // SAFETY: kill(2) is async-signal-safe.
            unsafe { libc::kill(child, signal) };
        }
    }
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with the handler, flags and an empty mask is valid;
        // `forward` has the SA_SIGINFO signature and never unwinds.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = forward as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

impl Outcome {
    /// True when any process wrote outputs.
    pub fn has_outputs(&self) -> bool {
        self.processes.iter().any(ProcessOutputs::has_outputs)
    }

    /// The processes that wrote outputs.
    pub fn profiled(&self) -> impl Iterator<Item = &ProcessOutputs> {
        self.processes.iter().filter(|p| p.has_outputs())
    }

    /// What to tell the user, one line each: one line per profiled process, then what went
    /// wrong. Processes that created no CUDA context wrote nothing and are not errors.
    pub fn messages(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.processes.is_empty() {
            out.push(format!(
                "no process created a CUDA context with gmprof injected (nothing under {}): the program used \
                 no GPU, exited before CUDA started, or was killed before it could write",
                self.output_dir.display()
            ));
        }
        let several = self.processes.len() > 1;
        let own_stderr = processes::stderr_identity();
        for p in &self.processes {
            let who = if several { format!("{}: ", p.who()) } else { String::new() };
            if p.has_outputs() || several {
                out.push(p.line());
            }
            if let Some(s) = &p.status {
                if s.contexts_created == 0 && s.error.is_none() {
                    out.push(format!("{who}the program never created a CUDA context, so there was nothing to profile"));
                }
                // The process printed its error on this same stderr already: once is enough
                // (with several processes, the per-process line says whose it was).
                let shown = s.error_printed_to.is_some() && s.error_printed_to == own_stderr && !several;
                if let Some(e) = s.error.as_ref().filter(|_| !shown) {
                    out.push(format!("{who}{e}"));
                }
                if p.has_outputs() {
                    out.push(format!(
                        "{who}{} NVTX range(s) followed of {} pushed",
                        s.nvtx_ranges_followed, s.nvtx_pushes
                    ));
                    if s.nvtx_pushes == 0 {
                        out.push(format!(
                            "{who}no NVTX range reached gmprof: all kernels are in the <root> row (annotate with \
                             nvtxRangePushA/Pop or torch.cuda.nvtx.range_push/pop)"
                        ));
                    }
                }
            }
            if let Some(e) = &p.report_error {
                out.push(format!("{who}could not read its report: {e}"));
            }
        }
        if self.profiled().count() > 1 {
            out.push(format!("merged summary above; again with: gmprof merge {}", self.output_dir.display()));
        }
        if !self.exit.success() {
            let how = match (self.exit.code(), self.exit.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(signal)) => format!("was ended by {}", crate::ways_in::signals::name(signal)),
                (None, None) => format!("was killed ({})", self.exit),
            };
            let kept = if self.has_outputs() { "; what was collected is in the outputs" } else { "" };
            out.push(format!("the program {how}{kept}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libgmprof_is_preloaded_before_what_was_preloaded() {
        let lib = Path::new("/opt/gmprof/libgmprof.so");
        assert_eq!(preload(lib, None), OsString::from("/opt/gmprof/libgmprof.so"));
        assert_eq!(preload(lib, Some("".into())), OsString::from("/opt/gmprof/libgmprof.so"));
        assert_eq!(
            preload(lib, Some("libjemalloc.so".into())),
            OsString::from("/opt/gmprof/libgmprof.so:libjemalloc.so")
        );
    }
    use crate::ways_in::injection::InjectionStatus;
    use std::os::unix::process::ExitStatusExt;

    fn opts(dir: &Path) -> LaunchOptions {
        let lib = dir.join("libgmprof.so");
        std::fs::write(&lib, b"").unwrap();
        LaunchOptions {
            mode: Some("trace".into()),
            metrics: vec!["dram__bytes_read.sum".into(), "gpu__time_duration.sum".into()],
            nvtx_include: vec!["step".into()],
            output_dir: dir.join("out"),
            range_scope: None,
            synchronize_on_pop: true,
            library: Some(lib),
            iteration_replay: Some(("Train step *".into(), 50)),
            rotate: None,
            rotate_cycles: false,
            rotate_step: None,
            pm_sampling: Some("default".into()),
            pm_interval: Some("10us".into()),
            pc_sampling: Some("12".into()),
            torch_steps: None,
            on_demand: Default::default(),
            program: vec!["python3".into(), "train.py".into()],
        }
    }

    #[test]
    fn plan_sets_injection_and_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let cupti = dir.path().join("libcupti.so");
        std::fs::write(&cupti, b"").unwrap();
        let candidates = [dir.path().join("none/libcupti.so"), cupti.clone()].map(|p| p.display().to_string());
        let plan = LaunchPlan::with_cupti_candidates(&opts(dir.path()), &candidates).unwrap();
        let get = |k: &str| plan.env.iter().find(|(key, _)| key == k).map(|(_, v)| v.to_string_lossy().into_owned());
        assert_eq!(get("CUDA_INJECTION64_PATH").unwrap(), dir.path().join("libgmprof.so").display().to_string());
        assert_eq!(get("NVTX_INJECTION64_PATH").unwrap(), dir.path().join("libgmprof.so").display().to_string());
        assert!(get("LD_PRELOAD").unwrap().starts_with(&dir.path().join("libgmprof.so").display().to_string()));
        assert_eq!(get("GMPROF_CUPTI_LIB").unwrap(), cupti.display().to_string());
        assert_eq!(get("GMPROF_MODE").unwrap(), "trace");
        assert_eq!(get("GMPROF_METRICS").unwrap(), "dram__bytes_read.sum,gpu__time_duration.sum");
        assert_eq!(get("GMPROF_NVTX_INCLUDE").unwrap(), "step");
        assert_eq!(get("GMPROF_SYNC_ON_POP").unwrap(), "1");
        assert_eq!(get("GMPROF_OUT").unwrap(), dir.path().join("out").display().to_string());
        assert!(get("GMPROF_RANGE_SCOPE").is_none());
        assert_eq!(get("GMPROF_ITERATION_REPLAY").unwrap(), "Train step *");
        assert_eq!(get("GMPROF_ITERATIONS").unwrap(), "50");
        assert_eq!(get("GMPROF_PM_SAMPLING").unwrap(), "default");
        assert_eq!(get("GMPROF_PM_INTERVAL").unwrap(), "10us");
        assert_eq!(get("GMPROF_PC_SAMPLING").unwrap(), "12");
    }

    #[test]
    fn an_on_demand_plan_starts_idle_with_the_torch_steps_as_its_steps() {
        let dir = tempfile::tempdir().unwrap();
        let cupti = dir.path().join("libcupti.so");
        std::fs::write(&cupti, b"").unwrap();
        let mut o = opts(dir.path());
        o.torch_steps = Some("step".into());
        o.on_demand.on_demand = true;
        let plan = LaunchPlan::with_cupti_candidates(&o, &[cupti.display().to_string()]).unwrap();
        let get = |k: &str| plan.env.iter().find(|(key, _)| key == k).map(|(_, v)| v.to_string_lossy().into_owned());
        assert_eq!(get("GMPROF_ON_DEMAND").as_deref(), Some("1"));
        assert_eq!(get("GMPROF_STEP_RANGE").as_deref(), Some("step"));
        assert_eq!(get(LIBRARY_ENV), get("CUDA_INJECTION64_PATH"), "the program's gmprof is the injected one");
        o.on_demand = crate::ways_in::on_demand::RunOptions { capture_steps: Some(3), ..Default::default() };
        let e = LaunchPlan::with_cupti_candidates(&o, &[cupti.display().to_string()]).unwrap_err().to_string();
        assert!(e.contains("--capture-steps needs --on-demand"), "{e}");
    }

    #[test]
    fn plan_rejects_bad_input_before_running_anything() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.mode = Some("fastest".into());
        assert!(LaunchPlan::new(&o).unwrap_err().to_string().contains("unknown mode 'fastest'"));
        let mut o = opts(dir.path());
        o.program.clear();
        assert!(LaunchPlan::new(&o).unwrap_err().to_string().contains("no program given"));
        let mut o = opts(dir.path());
        o.library = Some(dir.path().join("missing/libgmprof.so"));
        let e = LaunchPlan::new(&o).unwrap_err().to_string();
        assert!(e.contains("could not find libgmprof.so") && e.contains("missing/libgmprof.so"), "{e}");
        let e = LaunchPlan::with_cupti_candidates(
            &opts(dir.path()),
            &["/nowhere/libcupti.so".into(), "libcupti.so".into()],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("could not find libcupti.so (tried: /nowhere/libcupti.so)"), "{e}");
    }

    #[test]
    fn earlier_results_are_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let cupti = dir.path().join("libcupti.so");
        std::fs::write(&cupti, b"").unwrap();
        let candidates = [cupti.display().to_string()];
        let mut o = opts(dir.path());
        let plan = LaunchPlan::with_cupti_candidates(&o, &candidates).unwrap();
        let launcher = plan.env.iter().find(|(k, _)| k == LAUNCHER_PID_ENV).unwrap();
        assert_eq!(launcher.1, OsString::from(std::process::id().to_string()));
        plan.check_fresh_output().unwrap();
        let rank_dir = dir.path().join("out/node-1");
        std::fs::create_dir_all(&rank_dir).unwrap();
        std::fs::write(rank_dir.join("ranges.csv"), "").unwrap();
        plan.check_fresh_output().expect("no report.json or injection.json: not results");
        std::fs::write(rank_dir.join("injection.json"), "{}").unwrap();
        let e = plan.check_fresh_output().unwrap_err().to_string();
        assert!(e.contains("already holds the results") && e.contains("node-1"), "{e}");
        // A template looks under the part before its first %.
        o.output_dir = dir.path().join("out/%h-%p");
        let plan = LaunchPlan::with_cupti_candidates(&o, &candidates).unwrap();
        assert_eq!(plan.output_root(), dir.path().join("out"));
        assert!(plan.check_fresh_output().is_err());
    }

    #[test]
    fn library_is_looked_for_next_to_the_executable() {
        let c = library_candidates(None, Some(Path::new("/opt/gmprof/bin/gmprof")));
        if std::env::var_os(LIBRARY_ENV).is_none() {
            assert_eq!(
                c,
                [PathBuf::from("/opt/gmprof/bin/libgmprof.so"), PathBuf::from("/opt/gmprof/bin/../lib/libgmprof.so")]
            );
        }
        assert_eq!(library_candidates(Some(Path::new("/x.so")), None), [PathBuf::from("/x.so")]);
    }

    #[test]
    fn library_is_found_in_the_wheel_package_of_a_venv() {
        let tmp = tempfile::tempdir().unwrap();
        let pkg = tmp.path().join("venv/lib/python3.12/site-packages/gmprof");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::create_dir_all(tmp.path().join("venv/bin")).unwrap();
        std::fs::write(pkg.join("libgmprof.so"), b"").unwrap();
        let exe = tmp.path().join("venv/bin/gmprof");
        if std::env::var_os(LIBRARY_ENV).is_none() {
            let c = library_candidates(None, Some(&exe));
            assert_eq!(c.len(), 3, "{c:?}");
            let found = first_existing(&c, "libgmprof.so", "").unwrap();
            assert_eq!(found.canonicalize().unwrap(), pkg.join("libgmprof.so").canonicalize().unwrap());
        }
    }

    fn outcome(code: i32, status: Option<InjectionStatus>) -> Outcome {
        let processes = status
            .map(|status| ProcessOutputs {
                dir: PathBuf::from("/o"),
                status: Some(status),
                device_name: None,
                kernels: None,
                run_end: None,
                report_error: None,
                idle_on_demand: false,
            })
            .into_iter()
            .collect();
        Outcome { exit: ExitStatus::from_raw(code << 8), processes, output_dir: PathBuf::from("/o") }
    }

    #[test]
    fn messages_explain_what_happened() {
        let m = outcome(0, None).messages();
        assert!(m[0].contains("no process created a CUDA context") && m[0].contains("/o"), "{m:?}");

        let none =
            InjectionStatus { contexts_created: 0, finished_by: Some("process exit".into()), ..Default::default() };
        let m = outcome(0, Some(none)).messages();
        assert_eq!(m, ["the program never created a CUDA context, so there was nothing to profile"]);

        let crashed = InjectionStatus {
            pid: 9,
            contexts_created: 1,
            profiled: true,
            outputs_written: true,
            nvtx_pushes: 40,
            nvtx_ranges_followed: 40,
            ..Default::default()
        };
        let m = outcome(3, Some(crashed)).messages();
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(m[0], "pid 9: GPU unknown, no report, run end unknown: /o");
        assert_eq!(m[1], "40 NVTX range(s) followed of 40 pushed");
        assert_eq!(m[2], "the program exited with status 3; what was collected is in the outputs");

        let failed = InjectionStatus {
            contexts_created: 1,
            error: Some("could not start profiling the first CUDA context: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES".into()),
            ..Default::default()
        };
        let m = outcome(0, Some(failed.clone())).messages();
        assert_eq!(m, ["could not start profiling the first CUDA context: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"]);
        // Printed by the process on the stderr gmprof run shares: not again.
        let shown = processes::stderr_identity().expect("the test's stderr");
        let printed = InjectionStatus { error_printed_to: Some(shown), ..failed.clone() };
        assert_eq!(outcome(1, Some(printed)).messages(), ["the program exited with status 1"]);
        // Printed to another file (the program redirected its stderr): gmprof run says it.
        let elsewhere = InjectionStatus { error_printed_to: Some("0:1".into()), ..failed };
        let m = outcome(1, Some(elsewhere)).messages();
        assert_eq!(m[0], "could not start profiling the first CUDA context: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");

        let killed = Outcome { exit: ExitStatus::from_raw(9), processes: Vec::new(), output_dir: PathBuf::from("/o") };
        assert_eq!(killed.messages().last().unwrap(), "the program was ended by SIGKILL");
    }

    #[test]
    fn a_distributed_run_gives_one_line_per_rank_and_no_error_for_the_launcher() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // torchrun (no CUDA context) wrote nothing; two ranks wrote their outputs.
        crate::ways_in::processes::tests::write_process(&root.join("node7-0"), 10, Some(0), Some(240));
        crate::ways_in::processes::tests::write_process(&root.join("node7-1"), 11, Some(1), Some(236));
        let outcome =
            Outcome { exit: ExitStatus::from_raw(0), processes: processes::scan(root), output_dir: root.to_owned() };
        assert!(outcome.has_outputs());
        let m = outcome.messages();
        assert_eq!(m.len(), 7, "{m:#?}");
        assert_eq!(
            m[0],
            format!(
                "rank 0 (pid 10 on node7): NVIDIA H200, 240 kernels, finished (process exit): {}",
                root.join("node7-0").display()
            )
        );
        assert_eq!(m[1], "rank 0 (pid 10 on node7): 0 NVTX range(s) followed of 0 pushed");
        assert!(m[3].starts_with("rank 1 (pid 11 on node7): NVIDIA H200, 236 kernels"), "{}", m[3]);
        assert_eq!(m[6], format!("merged summary above; again with: gmprof merge {}", root.display()));
        assert!(!m.iter().any(|l| l.contains("never created") || l.contains("exited with")), "{m:#?}");
    }
}
