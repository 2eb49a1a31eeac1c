//! Every `gmprof` subcommand handles a standard output that its reader closed quietly, as
//! ripgrep does: no panic, no "Broken pipe" on standard error, and the exit status it has with
//! an open standard output (`gmprof report OUT | head -1` panicked in 4 of 5 tries before).

#[path = "common/cdylib.rs"]
mod common;

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::cdylib;

fn gmprof() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gmprof"));
    // The host side of libcupti where CI has it (`passes --chip` needs no GPU), else none.
    cmd.env("GMPROF_CUPTI_LIB", std::env::var_os("GMPROF_TEST_CUPTI_LIB").unwrap_or("/nonexistent/libcupti.so".into()))
        .env("GMPROF_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1");
    cmd
}

/// A pipe whose reading end is already closed: every write to the other end fails with EPIPE.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe(2)");
    // SAFETY: pipe(2) returned two new descriptors that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

fn run(args: &[&str], stdout: Stdio) -> Output {
    gmprof().args(args).stdout(stdout).stderr(Stdio::piped()).output().expect("run gmprof")
}

/// Runs `args` with standard output open, then closed, and checks the closed run.
fn check(args: &[&str]) {
    let open = run(args, Stdio::piped());
    let closed = run(args, closed_pipe());
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert!(!stderr.contains("panicked"), "{args:?} panicked on a closed stdout: {stderr}");
    assert!(!stderr.to_lowercase().contains("broken pipe"), "{args:?} said so: {stderr}");
    assert_eq!(
        closed.status.code(),
        open.status.code(),
        "{args:?}: another exit status with stdout closed; open: {}, closed: {stderr}",
        String::from_utf8_lossy(&open.stderr)
    );
}

fn golden() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden")
}

#[test]
fn report_diff_merge_and_check_trace_with_stdout_closed() {
    let trace = format!("{}/trace.json", golden());
    check(&["report", golden()]);
    check(&["report", golden(), "--stats"]);
    check(&["diff", golden(), golden()]);
    check(&["diff", golden(), golden(), "--json", "-"]);
    check(&["report", golden(), "--csv"]);
    check(&["diff", golden(), golden(), "--csv", "-"]);
    check(&["check-trace", &trace]);
    // merge: three ranks of the golden tables; it still writes its files.
    let ranks = tempfile::tempdir().unwrap();
    for r in ["node0-0", "node0-1", "node1-0"] {
        let dir = ranks.path().join(r);
        std::fs::create_dir(&dir).unwrap();
        for f in ["ranges.parquet", "kernels.parquet"] {
            std::fs::copy(Path::new(golden()).join(f), dir.join(f)).unwrap();
        }
    }
    let dir = ranks.path().to_str().unwrap();
    let closed = run(&["merge", dir, "--step", "train_step"], closed_pipe());
    assert_eq!(closed.status.code(), Some(0), "{}", String::from_utf8_lossy(&closed.stderr));
    assert!(ranks.path().join("merged.csv").is_file(), "merge with stdout closed wrote no merged.csv");
    check(&["merge", dir, "--step", "train_step"]);
}

#[test]
fn commands_that_need_a_gpu_or_a_job_fail_as_usual_with_stdout_closed() {
    check(&["metrics", "--filter", "dram"]);
    check(&["passes", "--chip", "GH100", "dram__bytes_read.sum"]);
    check(&["capture", "--status", "/nonexistent/run"]);
    check(&["--help"]);
    check(&["report", "--help"]);
    check(&["--version"]);
}

#[test]
fn run_with_stdout_closed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("libcupti.so"), b"").unwrap();
    let lib = cdylib();
    let out = dir.path().join("out");
    let args = ["run", "--lib", lib.to_str().unwrap(), "-o", out.to_str().unwrap(), "--", "sh", "-c", "exit 3"];
    let cupti = dir.path().join("libcupti.so");
    let open = gmprof().env("GMPROF_CUPTI_LIB", &cupti).args(args).output().unwrap();
    let closed = gmprof().env("GMPROF_CUPTI_LIB", &cupti).args(args).stdout(closed_pipe()).output().unwrap();
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert!(!stderr.contains("panicked") && !stderr.to_lowercase().contains("broken pipe"), "{stderr}");
    assert_eq!(open.status.code(), Some(3), "{}", String::from_utf8_lossy(&open.stderr));
    assert_eq!(closed.status.code(), Some(3), "the program's status with stdout closed: {stderr}");
}

/// The case as a user meets it: a shell pipeline into `head -1`, many times (the reader
/// leaves at a different moment each time).
#[test]
fn report_into_head_in_a_shell() {
    if Command::new("bash").arg("-c").arg("command -v head").output().map(|o| !o.status.success()).unwrap_or(true) {
        println!("skipped: no bash or head here");
        return;
    }
    for _ in 0..10 {
        let out = Command::new("bash")
            .arg("-c")
            .arg(r#""$0" report "$1" | head -1 >/dev/null; echo "${PIPESTATUS[0]}""#)
            .arg(env!("CARGO_BIN_EXE_gmprof"))
            .arg(golden())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "gmprof report | head -1 said: {stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    }
}
