//! The parent side of a fault-injection run: `gmprof run`'s plan and environment for the
//! child, the child run to its end, then what `gmprof run` reads back and prints (the
//! processes' outputs, the summary, the end-of-run messages), and the outputs read back.
//!
//! Imports `child` (the workloads and the child's variables).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::child::{Workload, CHILD_ENV, FAULTS_ENV, LOG_ENV, WITHOUT_GMPROF_ENV};
use crate::checked::scripted::Fault;
use crate::report::Report;
use crate::ways_in::injection_status::InjectionStatus;
use crate::ways_in::launch::{LaunchOptions, LaunchPlan, Outcome};
use crate::ways_in::processes;

/// How long a child may take before the run counts as hung.
const HANG: Duration = Duration::from_secs(120);

/// The child's test, by its path in the unit test binary.
const CHILD_TEST: &str = "ways_in::fault_injection::child::child_process_entry";

/// One finished run.
pub(super) struct Run {
    pub(super) exit: ExitStatus,
    pub(super) stderr: String,
    /// What the program's calls returned.
    pub(super) transcript: Vec<String>,
    /// gmprof's scripted calls: function and number of calls.
    pub(super) calls: Vec<(String, u32)>,
    /// The faults that fired.
    pub(super) fired: Vec<Fault>,
    /// What `gmprof run` would read back.
    pub(super) outcome: Outcome,
    _dir: tempfile::TempDir,
}

/// Runs `workload` in a child process with `faults`, under gmprof unless `without_gmprof`.
pub(super) fn run(workload: Workload, faults: &[Fault], without_gmprof: bool) -> Run {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let exe = std::env::current_exe().expect("the test binary");
    let opts = LaunchOptions {
        mode: Some(workload.mode().to_owned()),
        output_dir: dir.path().join("out"),
        library: Some(exe.clone()),
        pm_sampling: (workload == Workload::PmSampling).then(|| "default".to_owned()),
        pc_sampling: (workload == Workload::PcSampling).then(|| "default".to_owned()),
        synchronize_on_pop: workload == Workload::CaptureSyncOnPop,
        program: vec![
            exe.clone().into(),
            "--exact".into(),
            CHILD_TEST.into(),
            "--nocapture".into(),
            "--test-threads=1".into(),
        ],
        ..Default::default()
    };
    let plan = LaunchPlan::with_cupti_candidates(&opts, &[exe.display().to_string()]).expect("gmprof run's plan");
    let mut command = Command::new(&exe);
    command.args(&plan.program[1..]);
    // Only the plan's settings: none of the test environment's own.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GMPROF_") {
            command.env_remove(key);
        }
    }
    // The child calls InitializeInjection itself, so nothing is preloaded or injected by path
    // (the "library" is this test binary).
    for (key, value) in plan.env.iter().filter(|(k, _)| k != "LD_PRELOAD" && k != "CUDA_INJECTION64_PATH") {
        command.env(key, value);
    }
    let faults_spec: Vec<String> = faults.iter().map(Fault::spec).collect();
    command
        .env(CHILD_ENV, workload.name())
        .env(FAULTS_ENV, faults_spec.join(";"))
        .env(LOG_ENV, dir.path())
        .env("GMPROF_CHECKPOINT_SECS", "0")
        .env("GMPROF_PM_EVAL_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if without_gmprof {
        command.env(WITHOUT_GMPROF_ENV, "1");
    }
    if workload == Workload::KernelReplay {
        // Two kernels per counter cycle: the range profiler stops, decodes and starts again
        // while the program runs.
        command.env("GMPROF_RANGES_PER_CYCLE", "2");
    }
    if workload == Workload::SassMetrics {
        command.env("GMPROF_PROBE", "exec_count").env("GMPROF_PROBE_SASS", "always");
    }
    let child = command.spawn().expect("start the child");
    let (exit, _stdout, stderr) = wait(child, workload, &faults_spec);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let lines = |text: String| text.lines().map(str::to_owned).collect::<Vec<_>>();
    let calls = lines(read("calls.txt"))
        .iter()
        .filter_map(|l| l.rsplit_once(' ').and_then(|(f, n)| Some((f.to_owned(), n.parse().ok()?))))
        .collect();
    let fired = lines(read("fired.txt")).iter().filter_map(|l| Fault::parse(l)).collect();
    let root = plan.output_root();
    let outcome = Outcome { exit, processes: processes::scan(&root), output_dir: root };
    Run { exit, stderr, transcript: lines(read("transcript.txt")), calls, fired, outcome, _dir: dir }
}

/// Waits for the child, killing it when it hangs; its status, stdout and stderr.
fn wait(mut child: std::process::Child, workload: Workload, faults: &[String]) -> (ExitStatus, String, String) {
    use std::io::Read;
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} with faults {faults:?}: the program hung for {HANG:?}", workload.name());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status, reader.join().unwrap_or_default(), err_reader.join().unwrap_or_default())
}

impl Run {
    /// The one process that left outputs or a status.
    pub(super) fn process_dir(&self) -> Option<&Path> {
        self.outcome.processes.first().map(|p| p.dir.as_path())
    }

    /// The process's report, when it wrote one.
    pub(super) fn report(&self) -> Option<Report> {
        let dir = self.process_dir()?;
        dir.join("report.json")
            .is_file()
            .then(|| Report::read_json(dir.join("report.json")).expect("report.json reads"))
    }

    /// The process's injection.json.
    pub(super) fn status(&self) -> Option<InjectionStatus> {
        InjectionStatus::read(self.process_dir()?).ok()
    }

    /// What the user sees when the program ends, as `gmprof run` shows it: gmprof's lines
    /// on the program's stderr, the summary's head (its lines above the range table) and
    /// `gmprof run`'s messages.
    pub(super) fn first_screen(&self) -> Vec<String> {
        let mut lines: Vec<String> =
            self.stderr.lines().filter(|l| l.starts_with("gmprof: ")).map(str::to_owned).collect();
        if let Some(report) = self.report() {
            let summary = report.summary().to_string();
            lines.extend(summary.lines().take_while(|l| !l.starts_with("range ")).map(str::to_owned));
        }
        lines.extend(self.outcome.messages().into_iter().map(|m| format!("gmprof: {m}")));
        lines
    }
}

/// The rows of a CSV file gmprof wrote (read with the `csv` crate), or why it does not read.
pub(super) fn csv_rows(path: &Path) -> Result<usize, String> {
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_path(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut n = 0;
    for record in reader.records() {
        record.map_err(|e| format!("{}: {e}", path.display()))?;
        n += 1;
    }
    Ok(n)
}

/// Checks that every output of `dir` reads back: report.json, the range, kernel and
/// transfer tables as CSV and as Parquet (their rows matching the report's), and
/// injection.json. Returns the report.
pub(super) fn outputs_read_back(dir: &Path) -> Report {
    let report = Report::read_json(dir.join("report.json")).expect("report.json reads");
    let tables =
        [("ranges", report.ranges.len()), ("kernels", report.kernels.len()), ("transfers", report.transfers.len())];
    for (table, rows) in tables {
        assert_eq!(csv_rows(&dir.join(format!("{table}.csv"))), Ok(rows), "{table}.csv");
        let parquet: PathBuf = dir.join(format!("{table}.parquet"));
        let read = crate::report::tables::parquet::read::row_count(&parquet);
        assert_eq!(read.map_err(|e| e.to_string()), Ok(rows as u64), "{}", parquet.display());
    }
    let ranks = crate::report::runs::rank_ranges::RankRanges::read(dir.parent().unwrap_or(dir), dir)
        .expect("ranges.parquet and kernels.parquet read as `gmprof merge` reads them");
    assert_eq!(ranks.ranges.len(), report.ranges.len(), "ranges.parquet's rows");
    let status = InjectionStatus::read(dir).expect("injection.json reads");
    assert!(status.outputs_written, "injection.json says the outputs were written: {status:?}");
    report
}
