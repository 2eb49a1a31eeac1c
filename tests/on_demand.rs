//! `gmprof capture` end to end on the CPU: the real command against processes' control
//! sockets, each served by an on-demand service whose backend collects nothing (the seam the
//! GPU backend fills), the processes stepping on their own threads at their own pace.
//!
//! Checked: one capture of two ranks holds the same steps on both and numbers on (`capture-1`,
//! `capture-2`), never overwriting; `--status`; a refusal while a capture is armed; a socket
//! of another user refused with a message, by the server itself when a real other user
//! (`nobody`, run as root) connects with every file mode open to it; `gmprof run --on-demand`
//! with a program that never uses CUDA.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gmprof::capture::profiler::Teardown;
use gmprof::model::RunEnd;
use gmprof::ways_in::on_demand::backend::{CaptureBackend, LiveCapture, Written};
use gmprof::ways_in::on_demand::captures;
use gmprof::ways_in::on_demand::protocol::{CaptureSettings, CaptureState, Outcome, Span, StartAt};
use gmprof::ways_in::on_demand::server::{ControlSocket, CONTROL_DIR, SOCKET_NAME};
use gmprof::ways_in::on_demand::service::{ProcessInfo, Service, Trigger};
use gmprof::ways_in::on_demand::steps::StepRange;
use gmprof::ways_in::on_demand::OnDemandConfig;

/// Writes the ranges it was handed into `ranges.txt`: what a capture held.
struct Recorder;

struct Recording {
    dir: PathBuf,
    ranges: parking_lot::Mutex<Vec<String>>,
}

impl CaptureBackend for Recorder {
    fn arm(&self, _: bool) -> gmprof::Result<()> {
        Ok(())
    }
    fn start(&self, _: &CaptureSettings, dir: &Path) -> gmprof::Result<Arc<dyn LiveCapture>> {
        Ok(Arc::new(Recording { dir: dir.to_owned(), ranges: Default::default() }))
    }
    fn disarm(&self) {}
}

impl LiveCapture for Recording {
    fn push_range(&self, name: &str) -> gmprof::Result<()> {
        self.ranges.lock().push(name.to_owned());
        Ok(())
    }
    fn pop_range(&self) -> gmprof::Result<()> {
        Ok(())
    }
    fn seal(&self) {}
    fn checkpoint(&self, _: &str) -> gmprof::Result<()> {
        Ok(())
    }
    fn finish(&self, end: RunEnd, _: Teardown) -> gmprof::Result<Written> {
        let ranges = self.ranges.lock().clone();
        std::fs::write(self.dir.join("ranges.txt"), ranges.join("\n")).unwrap();
        Ok(Written { kernels: 0, ranges: ranges.len() as u64, run_end: Some(end) })
    }
}

fn config() -> OnDemandConfig {
    OnDemandConfig {
        on_demand: true,
        step_range: Some(StepRange::new("step").unwrap()),
        capture_range: None,
        range_captures: Some(1),
        signal: None,
        defaults: CaptureSettings { mode: Some("trace".into()), ..Default::default() },
        signal_span: Span::Steps(2),
        nvtx_include: Vec::new(),
    }
}

/// A rank of a run in `run`: its service behind its socket in `run/node7-<rank>`.
fn rank(run: &Path, rank: u32, owner: Option<u32>) -> Arc<Service> {
    let service = Service::new(config());
    let process = format!("node7-{rank}");
    service.attach(
        ProcessInfo {
            pid: 1000 + rank,
            host: "node7".into(),
            rank: Some(rank),
            process: process.clone(),
            run_dir: run.to_owned(),
        },
        Arc::new(Recorder),
    );
    let mut socket = ControlSocket::bind(&run.join(&process)).unwrap();
    if let Some(uid) = owner {
        socket = socket.with_owner(uid);
    }
    socket.serve(service.clone()).unwrap();
    service
}

/// Steps `service` on a thread of its own until `stop`: a step range with a forward inside.
fn train(service: Arc<Service>, stop: Arc<AtomicBool>, pause: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            service.on_push("step");
            service.on_push("forward");
            service.on_pop();
            service.on_pop();
            std::thread::sleep(pause);
        }
    })
}

fn gmprof(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn gmprof_capture_gives_every_rank_the_same_steps_and_numbers_on() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let ranks = [rank(&run, 0, None), rank(&run, 1, None)];
    let stop = Arc::new(AtomicBool::new(false));
    // Rank 1 steps 40 times before rank 0 starts, and then more slowly.
    for _ in 0..40 {
        ranks[1].on_push("step");
        ranks[1].on_pop();
    }
    let threads = [
        train(ranks[0].clone(), stop.clone(), Duration::from_millis(2)),
        train(ranks[1].clone(), stop.clone(), Duration::from_millis(3)),
    ];
    let dir = run.display().to_string();
    let (code, stdout, stderr) = gmprof(&["capture", &dir, "--status"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(stdout.starts_with("rank 0 (pid 1000 on node7): step range 'step', next step "), "{stdout}");
    for k in 1..=2 {
        let (code, _, stderr) = gmprof(&["capture", &dir, "--steps", "3", "--mode", "per_kernel", "--margin", "4"]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.contains(&format!("gmprof: capture {k}: 2 process(es), at step ")), "{stderr}");
        assert!(stderr.contains(&format!("read it with: gmprof merge {dir}/capture-{k}")), "{stderr}");
        let records: Vec<_> =
            (0..2).map(|r| captures::read_record(&run.join(format!("capture-{k}/node7-{r}"))).unwrap()).collect();
        assert_eq!(records[0].first_step, records[1].first_step, "{stderr}");
        for record in &records {
            assert_eq!(record.steps, 3);
            assert_eq!(record.settings.mode.as_deref(), Some("per_kernel"));
            assert_eq!(record.outcome, Outcome::Written { kernels: 0, ranges: 6 });
            let held = std::fs::read_to_string(record.dir.join("ranges.txt")).unwrap();
            assert_eq!(held, "step\nforward\nstep\nforward\nstep\nforward");
        }
    }
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn an_overlapping_capture_and_a_bad_request_are_refused_plainly() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let service = rank(&run, 0, None);
    service
        .request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(2), StartAt::AtStep(1000))
        .unwrap();
    let dir = run.display().to_string();
    let (code, _, stderr) = gmprof(&["capture", &dir, "--steps", "2"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(
            "gmprof: error: one capture at a time, and rank 0 (pid 1000 on node7): capture 1 waits for step 1000"
        ),
        "{stderr}"
    );
    let (code, _, stderr) = gmprof(&["capture", &dir]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("say how long: --steps N"), "{stderr}");
    let (code, _, stderr) = gmprof(&["capture", &dir, "--steps", "2", "--mode", "fastest"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("unknown mode 'fastest'"), "{stderr}");
    let (code, _, stderr) = gmprof(&["capture", tmp.path().join("nothing").to_str().unwrap(), "--steps", "2"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("neither a run directory nor a pid"), "{stderr}");
    assert_eq!(captures::scan(&run).len(), 1, "only the armed capture's directory");
}

#[test]
fn another_users_capture_is_refused_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    let _service = rank(&run, 0, Some(me + 1));
    let (code, _, stderr) = gmprof(&["capture", &run.display().to_string(), "--steps", "1"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(&format!("refused: this process belongs to uid {} and you are uid {me}", me + 1)),
        "{stderr}"
    );
    assert!(captures::scan(&run).is_empty(), "nothing reserved");
}

#[path = "common/cdylib.rs"]
mod common;
#[path = "common/gmprof_run.rs"]
mod gmprof_run;

#[test]
fn an_on_demand_run_of_a_program_without_cuda_says_no_capture_was_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = common::cdylib();
    let run = |extra: &[&str]| {
        gmprof_run::gmprof_run(
            tmp.path(),
            &lib,
            extra,
            "echo on_demand=$GMPROF_ON_DEMAND step=$GMPROF_STEP_RANGE lib=$GMPROF_LIBRARY",
        )
    };
    let (code, stdout, stderr) = run(&["--on-demand", "--torch-steps"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), format!("on_demand=1 step=step lib={}", std::path::absolute(&lib).unwrap().display()));
    assert!(stderr.contains("gmprof: no capture was taken"), "{stderr}");
    let (code, _, stderr) = run(&["--on-demand", "--probe", "gmem_bytes"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("--probe profiles from the program's start"), "{stderr}");
    let (code, _, stderr) = run(&["--capture-range", "nvtx"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("use cudaProfilerApi or nvtx:NAME"), "{stderr}");
}

/// The other user of the tests below: `nobody`, unprivileged and not this one.
const OTHER_UID: u32 = 65534;

/// A directory in `/tmp` for a test of another user, or `None` (with a `skipped:` line) where
/// the tests cannot start a process as that user: they do not run as root.
fn other_user_dir(test: &str) -> Option<tempfile::TempDir> {
    // SAFETY: geteuid cannot fail and has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        println!("skipped: {test}: the tests run as uid {euid}, not root, and cannot start gmprof as uid {OTHER_UID}");
        return None;
    }
    let others_enter = |d: &Path| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0);
    if !others_enter(Path::new("/tmp")) {
        println!("skipped: {test}: /tmp is closed to other users here");
        return None;
    }
    Some(tempfile::Builder::new().prefix("gmprof-other-user").tempdir_in("/tmp").unwrap())
}

/// The built `gmprof`, where the other user can run it: a link to it (or a copy) in `dir` when
/// a directory above it is closed to others.
fn gmprof_for_others(dir: &Path) -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gmprof"));
    let open = |p: &Path, bits: u32| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & bits == bits);
    if bin.ancestors().skip(1).all(|d| open(d, 0o001)) && open(&bin, 0o005) {
        return bin;
    }
    let copy = dir.join("gmprof");
    if copy.exists() {
        return copy;
    }
    if std::fs::hard_link(&bin, &copy).is_err() || !open(&copy, 0o005) {
        let _ = std::fs::remove_file(&copy);
        std::fs::copy(&bin, &copy).unwrap();
        chmod(&copy, 0o755);
    }
    copy
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `gmprof ARGS` run as `uid` (group too) from `/`, the binary linked into `tmp` if need be:
/// exit code, stdout, stderr; `None` (with a `skipped:` line) where the kernel does not let
/// this process switch to that user (a user namespace without it).
fn gmprof_as(uid: u32, tmp: &Path, args: &[&str]) -> Option<(Option<i32>, String, String)> {
    let out = match Command::new(gmprof_for_others(tmp))
        .args(args)
        .uid(uid)
        .gid(uid)
        .current_dir("/")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            println!("skipped: cannot start gmprof as uid {uid} here: {e}");
            return None;
        }
    };
    Some((out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into()))
}

/// A real other user (`nobody`, through setuid, not `with_owner`) runs `gmprof capture`
/// against a process of this test's user. Every file mode on the way is opened to it (the
/// socket 0666, its directory 0711, the run directory 0777 so that it could even reserve a
/// capture there): only the server's `SO_PEERCRED` check stands in its way, and it says no,
/// to `--status` and to a capture alike; nothing is written; the process serves its owner
/// afterwards.
#[test]
fn another_users_capture_is_refused_by_the_server_itself() {
    let Some(tmp) = other_user_dir("another_users_capture_is_refused_by_the_server_itself") else { return };
    let run = tmp.path().join("run");
    let service = rank(&run, 0, None);
    let control = run.join("node7-0").join(CONTROL_DIR);
    for (path, mode) in [
        (tmp.path().to_owned(), 0o711),
        (run.clone(), 0o777),
        (run.join("node7-0"), 0o755),
        (control.clone(), 0o711),
        (control.join(SOCKET_NAME), 0o666),
    ] {
        chmod(&path, mode);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let thread = train(service.clone(), stop.clone(), Duration::from_millis(2));
    // SAFETY: getuid cannot fail and has no preconditions.
    let me = unsafe { libc::getuid() };
    let refusal = format!("refused: this process belongs to uid {me} and you are uid {OTHER_UID}");
    let dir = run.display().to_string();
    let Some((code, stdout, stderr)) = gmprof_as(OTHER_UID, tmp.path(), &["capture", &dir, "--status"]) else { return };
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains(&refusal), "{stderr}");
    assert!(stdout.is_empty(), "no status for another user: {stdout}");
    let capture = ["capture", &dir, "--steps", "2", "--margin", "4", "--timeout", "60"];
    let (code, _, stderr) = gmprof_as(OTHER_UID, tmp.path(), &capture).unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&format!("gmprof: error: {}: {refusal}", control.join(SOCKET_NAME).display())), "{stderr}");
    assert!(stderr.contains(&format!("(run gmprof capture as uid {me})")), "{stderr}");
    assert!(captures::scan(&run).is_empty(), "nothing reserved or written: {:?}", captures::scan(&run));
    assert_eq!(service.state(), CaptureState::Idle);
    // The process goes on serving its owner.
    let (code, _, stderr) = gmprof(&capture);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&format!("read it with: gmprof report {dir}/capture-1")), "{stderr}");
    assert_eq!(captures::read_record(&run.join("capture-1/node7-0")).unwrap().steps, 2);
    stop.store(true, Ordering::Release);
    thread.join().unwrap();
}

/// Another user who cannot even reach the socket (its directory is 0700, as every process
/// makes it) is told whose run it is and what to do, whether it names the run directory, a
/// process directory or the socket, a run directory it cannot enter, a socket it sees but may
/// not open, or a pid.
#[test]
fn another_user_who_cannot_reach_the_socket_is_told_whose_run_it_is() {
    let Some(tmp) = other_user_dir("another_user_who_cannot_reach_the_socket_is_told_whose_run_it_is") else { return };
    let home = tmp.path().join("home");
    let run = home.join("run");
    let _service = rank(&run, 0, None);
    let control = run.join("node7-0").join(CONTROL_DIR);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode(&control), mode(&control.join(SOCKET_NAME))), (0o700, 0o600), "as the server made them");
    chmod(tmp.path(), 0o711);
    for dir in [&home, &run, &run.join("node7-0")] {
        chmod(dir, 0o755);
    }
    // SAFETY: getuid cannot fail and has no preconditions.
    let me = unsafe { libc::getuid() };
    let what_to_do = format!(
        "and you are uid {OTHER_UID}; only the user who started the run may capture it (run gmprof capture as uid {me})"
    );
    let closed = |dir: &Path, mode: u32| {
        format!("permission denied: {} belongs to uid {me} (mode {mode:04o}) {what_to_do}", dir.display())
    };
    let socket = control.join(SOCKET_NAME);
    let shown = |p: &Path| p.display().to_string();
    // (the home directory's mode, the socket directory's, the target, what gmprof says)
    let tries = [
        (0o755, 0o700, shown(&run), format!("{}: {}", shown(&run), closed(&control, 0o700))),
        (0o755, 0o700, shown(&run.join("node7-0")), format!("{}/node7-0: {}", shown(&run), closed(&control, 0o700))),
        (0o755, 0o700, shown(&socket), format!("{}: {}", shown(&socket), closed(&control, 0o700))),
        // The run directory itself out of reach (in a home directory of mode 0700).
        (0o700, 0o700, shown(&run), format!("{}: {}", shown(&run), closed(&home, 0o700))),
        // The socket seen but not to be opened.
        (0o755, 0o711, shown(&run), format!("could not reach {}: {}", shown(&socket), closed(&socket, 0o600))),
    ];
    for (home_mode, control_mode, target, expected) in tries {
        chmod(&home, home_mode);
        chmod(&control, control_mode);
        let Some((code, _, stderr)) = gmprof_as(OTHER_UID, tmp.path(), &["capture", &target, "--steps", "1"]) else {
            return;
        };
        assert_eq!(code, Some(1), "{target}: {stderr}");
        assert_eq!(stderr.trim_end(), format!("gmprof: error: {expected}"), "{target}");
    }
    let pid = std::process::id().to_string();
    let (code, _, stderr) = gmprof_as(OTHER_UID, tmp.path(), &["capture", &pid, "--steps", "1"]).unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.trim_end(), format!("gmprof: error: pid {pid} belongs to uid {me} {what_to_do}"));
    assert!(captures::scan(&run).is_empty());
}
