//! `gmprof merge` and `gmprof report` on recorded outputs of several processes (ranks).

use std::path::Path;
use std::process::Command;

use gmprof::Report;

fn write_rank(root: &Path, dir: &str, scale: f64) {
    let mut r = Report::from_json(include_str!("golden/report.json")).unwrap();
    r.meta.device_name = Some("NVIDIA H200".into());
    for row in &mut r.ranges {
        row.gpu_time_ns = row.gpu_time_ns.map(|t| (t as f64 * scale) as u64);
    }
    r.write_all(root.join(dir)).unwrap();
}

fn gmprof(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn merge_and_report_read_a_directory_of_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write_rank(root, "node7-0", 1.0);
    write_rank(root, "node7-1", 3.0);

    let (ok, stdout, stderr) = gmprof(&["merge".as_ref(), root.as_os_str()]);
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("# 2 process(es):\n#   node7-0: NVIDIA H200\n#   node7-1: NVIDIA H200\n"), "{stdout}");
    let step = stdout.lines().find(|l| l.starts_with("train_step ")).unwrap();
    assert!(step.contains("2/2") && step.ends_with("node7-1"), "{step}");
    let csv = std::fs::read_to_string(root.join("merged.csv")).unwrap();
    assert!(csv.starts_with("\"path\",\"processes\",\"measured\",\"min_gpu_time_ns\""), "{csv}");
    assert!(stderr.contains("merged.csv") && stderr.contains("merged-trace.json"), "{stderr}");
    let trace = root.join("merged-trace.json");
    let (ok, stdout_check, stderr) = gmprof(&["check-trace".as_ref(), trace.as_os_str()]);
    assert!(ok && stdout_check.trim_end().ends_with("events, OK"), "{stdout_check}{stderr}");

    // `gmprof report` on the directory gives the same summary.
    let (ok, report_stdout, stderr) = gmprof(&["report".as_ref(), root.as_os_str()]);
    assert!(ok, "{stderr}");
    assert_eq!(report_stdout, stdout);
    let (ok, _, stderr) = gmprof(&["report".as_ref(), "--csv".as_ref(), root.as_os_str()]);
    assert!(!ok && stderr.contains("gmprof merge"), "{stderr}");
}

#[test]
fn report_on_a_directory_with_one_process_inside_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    write_rank(tmp.path(), "node7-pid42", 1.0);
    let (ok, single, stderr) = gmprof(&["report".as_ref(), tmp.path().join("node7-pid42").as_os_str()]);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = gmprof(&["report".as_ref(), tmp.path().as_os_str()]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, single);
    assert!(!stdout.contains("process(es)"), "{stdout}");
}

#[test]
fn the_programs_own_report_and_its_workers_merge_under_the_roots_name() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("out");
    write_rank(&root, "", 1.0);
    write_rank(&root, "node7-pid42", 2.0);
    let (ok, stdout, stderr) = gmprof(&["report".as_ref(), root.as_os_str()]);
    assert!(ok, "{stderr}");
    assert!(!stdout.contains("process(es)"), "the program's own report: {stdout}");
    assert!(stderr.contains("also holds 1 other process(es)' reports: `gmprof merge"), "{stderr}");
    let (ok, stdout, stderr) = gmprof(&["merge".as_ref(), root.as_os_str()]);
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("# 2 process(es):\n#   out: NVIDIA H200\n#   node7-pid42: NVIDIA H200\n"), "{stdout}");
}

#[test]
fn merge_of_a_directory_without_reports_fails_plainly() {
    let tmp = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = gmprof(&["merge".as_ref(), tmp.path().as_os_str()]);
    assert!(!ok && stderr.contains("no report.json or ranges.parquet in it or in its subdirectories"), "{stderr}");
}

#[path = "common/cdylib.rs"]
mod common;

/// `gmprof run` with a stand-in libcupti: the program runs, nothing initializes CUDA.
fn run(out: &Path, program: &[&str]) -> (Option<i32>, String, String) {
    let cupti = out.with_file_name("libcupti.so");
    std::fs::write(&cupti, b"").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_gmprof"))
        .env("GMPROF_CUPTI_LIB", &cupti)
        .arg("run")
        .arg("--lib")
        .arg(common::cdylib())
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(program)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into(),
        String::from_utf8_lossy(&output.stderr).into(),
    )
}

#[test]
fn run_exits_with_the_programs_status_and_refuses_earlier_results() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // No CUDA context anywhere is no error of gmprof's: the program's status comes back.
    let (code, stdout, stderr) = run(&out, &["sh", "-c", "echo launcher=$GMPROF_LAUNCHER_PID; exit 3"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stdout.trim().strip_prefix("launcher=").is_some_and(|pid| pid.parse::<u32>().is_ok()), "{stdout}");
    assert!(
        stderr.contains("no process created a CUDA context") && stderr.contains("exited with status 3"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&out, &["true"]);
    assert_eq!(code, Some(0), "{stderr}");
    // A rank directory of an earlier run: refused, the program is not started.
    write_rank(&out, "node7-0", 1.0);
    let marker = tmp.path().join("started");
    let (code, _, stderr) = run(&out, &["touch", marker.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("already holds the results of an earlier run") && stderr.contains("node7-0"), "{stderr}");
    assert!(!marker.exists(), "the program must not run");
}

/// `gmprof run --torch-steps`: the Python bootstrap is on the program's PYTHONPATH, first,
/// with the step range's name, for the program's whole run; it is gone afterwards.
#[test]
fn torch_steps_put_the_python_bootstrap_first_on_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let cupti = tmp.path().join("libcupti.so");
    std::fs::write(&cupti, b"").unwrap();
    let script = "dir=${PYTHONPATH%%:*}; echo \"rest=${PYTHONPATH#*:}\"; echo \"name=$GMPROF_TORCH_STEPS\"; \
                  echo \"dir=$dir\"; echo \"mode=$(stat -c %a \"$dir\")\"; \
                  grep -c register_optimizer_step_post_hook \"$dir/sitecustomize.py\"";
    for (args, name) in [(vec!["--torch-steps"], "step"), (vec!["--torch-steps", "Train step"], "Train step")] {
        let out = tmp.path().join(format!("out-{}", name.len()));
        let output = Command::new(env!("CARGO_BIN_EXE_gmprof"))
            .env("GMPROF_CUPTI_LIB", &cupti)
            .env("PYTHONPATH", "/user/site")
            .arg("run")
            .arg("--lib")
            .arg(common::cdylib())
            .arg("-o")
            .arg(&out)
            .args(&args)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        let field = |key: &str| stdout.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_default().to_owned();
        assert_eq!(field("rest="), "/user/site", "{stdout}");
        assert_eq!(field("name="), name, "{stdout}");
        // The bootstrap file registers torch.optim's step hook, and is removed after the run.
        assert!(stdout.lines().last().is_some_and(|l| l.trim().parse::<u32>().unwrap_or(0) >= 1), "{stdout}");
        // A private directory of its own, made for this run.
        assert_eq!(field("mode="), "700", "{stdout}");
        let dir = field("dir=");
        assert!(dir.contains("gmprof-torch-steps-"), "{stdout}");
        assert!(!Path::new(&dir).exists(), "{dir} left behind");
    }
    // An empty name is refused before the program starts.
    let output = Command::new(env!("CARGO_BIN_EXE_gmprof"))
        .env("GMPROF_CUPTI_LIB", &cupti)
        .args(["run", "--lib"])
        .arg(common::cdylib())
        .args(["--torch-steps", " ", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--torch-steps needs a range name"));
}
