//! `gmprof capture TARGET`: one capture of every process of a run, from another shell.
//!
//! Layer 3, the client side of [`super::server`]. TARGET is the run's output directory (every
//! process's socket below it: the main process's, each rank's `<host>-<rank>/`, each worker's)
//! or a pid (the process that registered it, or the on-demand processes among its
//! descendants: `gmprof run`'s or torchrun's pid works). [`capture`]:
//! 1. asks every process for its status; all must be idle, and with `--steps` have a step
//!    range;
//! 2. reserves `DIR/capture-K` ([`super::captures::reserve`]);
//! 3. starts every process at the same step: the furthest process's next step plus
//!    `--margin` ([`super::steps::aligned_start`]); a process that refuses (past that step
//!    already, or busy) cancels the capture everywhere;
//! 4. waits until every process has written its directory, and returns their records.
//!
//! A user who may not reach a run (another user's: its `0700` socket directories, a run or home
//! directory closed to others, a pid of another user) is told whose it is and to run `gmprof
//! capture` as that user ([`server::permission_denied`]), not that there is no run.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::ways_in::on_demand::captures;
use crate::ways_in::on_demand::protocol::{
    CaptureRecord, CaptureSettings, CaptureState, Outcome, ProcessStatus, Request, Response, Span, StartAt,
};
use crate::ways_in::on_demand::server::{self, CONTROL_DIR, SOCKET_NAME};
use crate::ways_in::on_demand::steps::aligned_start;

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the client looks whether the capture has ended.
const POLL: Duration = Duration::from_millis(100);

/// What `gmprof capture` was asked for.
#[derive(Clone, Debug)]
pub struct CaptureOptions {
    /// The run directory or a pid.
    pub target: String,
    /// What to collect (unset fields: the run's defaults).
    pub settings: CaptureSettings,
    /// How long.
    pub span: Span,
    /// Steps between the furthest process's next step and the start.
    pub margin: u64,
    /// Start at this step instead.
    pub at_step: Option<u64>,
    /// How long to wait for the start and the end together.
    pub timeout: Duration,
}

/// A process of the run: its socket and what it said.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Its socket.
    pub socket: PathBuf,
    /// Its status.
    pub status: ProcessStatus,
}

/// The sockets under a run directory (itself and subdirectories to depth 3; `capture-K`
/// directories are outputs, not processes).
pub fn sockets_under(run_dir: &Path) -> Vec<PathBuf> {
    walk_run(run_dir).0
}

/// The sockets under a run directory, and the paths on the way this user may not look at
/// (another user's run: its `0700` socket directories).
fn walk_run(run_dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    fn denied(path: &Path, e: std::io::Error, closed: &mut Vec<PathBuf>) {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            closed.push(path.to_owned());
        }
    }
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>, closed: &mut Vec<PathBuf>) {
        let socket = dir.join(CONTROL_DIR).join(SOCKET_NAME);
        if socket.exists() {
            out.push(socket);
        } else if let Err(e) = std::fs::symlink_metadata(&socket) {
            denied(&socket, e, closed);
        }
        if depth == 0 {
            return;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => return denied(dir, e, closed),
        };
        let mut subdirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name != CONTROL_DIR && captures::capture_number(&name).is_none()
            })
            .map(|e| e.path())
            .collect();
        subdirs.sort();
        for sub in subdirs {
            walk(&sub, depth - 1, out, closed);
        }
    }
    let (mut out, mut closed) = (Vec::new(), Vec::new());
    walk(run_dir, 3, &mut out, &mut closed);
    (out, closed)
}

/// The children of `pid` (all its threads'), from `/proc`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(text.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The sockets of `pid`: its own if it registered one, else those of its descendants.
pub fn sockets_of_pid(pid: u32) -> Vec<PathBuf> {
    if let Some(socket) = server::registered(pid) {
        return vec![socket];
    }
    let mut found = Vec::new();
    let mut queue = children(pid);
    let mut seen = 0;
    while let Some(p) = queue.pop() {
        seen += 1;
        if seen > 10_000 {
            break;
        }
        match server::registered(p) {
            Some(socket) => found.push(socket),
            None => queue.extend(children(p)),
        }
    }
    found.sort();
    found
}

/// The sockets TARGET names; the error says what was looked for.
pub fn resolve(target: &str) -> Result<Vec<PathBuf>> {
    let path = Path::new(target);
    if path.is_dir() {
        let (found, closed) = walk_run(path);
        if let (true, Some(closed)) = (found.is_empty(), closed.first()) {
            return Err(Error::InvalidConfig(format!("{target}: {}", server::permission_denied(closed))));
        }
        if found.is_empty() {
            return Err(Error::InvalidConfig(format!(
                "{target} holds no gmprof control socket ({CONTROL_DIR}/{SOCKET_NAME} in it or a process directory below \
                 it): is it the -o directory of a running `gmprof run --on-demand`, and has the program created its \
                 CUDA context yet?"
            )));
        }
        return Ok(found);
    }
    if let Ok(pid) = target.parse::<u32>() {
        let found = sockets_of_pid(pid);
        if found.is_empty() {
            let me = server::own_uid();
            return Err(Error::InvalidConfig(match std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid()) {
                Ok(owner) if owner != me => format!(
                    "pid {pid} belongs to uid {owner} and you are uid {me}; only the user who started the run may \
                     capture it (run gmprof capture as uid {owner})"
                ),
                Ok(_) => format!(
                    "pid {pid} has no gmprof on-demand process (itself or below it): is it running under \
                     `gmprof run --on-demand`, as this user, with a CUDA context yet? Or give the run directory"
                ),
                Err(_) => format!("there is no process {pid}"),
            }));
        }
        return Ok(found);
    }
    if let Err(e) = std::fs::symlink_metadata(path) {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            return Err(Error::InvalidConfig(format!("{target}: {}", server::permission_denied(path))));
        }
    }
    Err(Error::InvalidConfig(format!("{target} is neither a run directory nor a pid")))
}

/// Every process's status; processes that ended are left out with a note, and none left is
/// an error.
pub fn statuses(sockets: &[PathBuf], notes: &mut Vec<String>) -> Result<Vec<Endpoint>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for socket in sockets {
        match server::ask(socket, &Request::Status, REQUEST_TIMEOUT) {
            Ok(Response { ok: true, status: Some(status), .. }) => {
                out.push(Endpoint { socket: socket.clone(), status })
            }
            Ok(Response { error, .. }) => {
                errors.push(format!("{}: {}", socket.display(), error.unwrap_or_else(|| "no status".into())))
            }
            Err(e) if e.to_string().contains("the process has ended") => notes.push(e.to_string()),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if let Some(first) = errors.first() {
        return Err(Error::InvalidState(if errors.len() == 1 { first.clone() } else { errors.join("; ") }));
    }
    if out.is_empty() {
        return Err(Error::InvalidState(format!(
            "no process of the target is running ({})",
            notes.last().cloned().unwrap_or_default()
        )));
    }
    out.sort_by_key(|e| (e.status.rank.is_none(), e.status.rank, e.status.pid));
    Ok(out)
}

/// What a capture of several processes gave.
#[derive(Debug)]
pub struct CaptureResult {
    /// The capture's number.
    pub id: u64,
    /// `DIR/capture-K`.
    pub dir: PathBuf,
    /// Its first step, when it started at one.
    pub start: Option<u64>,
    /// Each process's record, by rank.
    pub records: Vec<(ProcessStatus, CaptureRecord)>,
    /// Things to tell the user (processes that had ended).
    pub notes: Vec<String>,
}

impl CaptureResult {
    /// Whether every process wrote its outputs.
    pub fn all_written(&self) -> bool {
        self.records.iter().all(|(_, r)| matches!(r.outcome, Outcome::Written { .. }))
    }

    /// One line per process, then how to read the capture.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> =
            self.records.iter().map(|(status, record)| format!("{}: {}", status.who(), record.line())).collect();
        let how = if self.records.len() > 1 { "gmprof merge" } else { "gmprof report" };
        lines.push(format!("capture {}: read it with: {how} {}", self.id, self.dir.display()));
        lines
    }
}

/// Runs one capture of every process `options.target` names.
pub fn capture(options: &CaptureOptions, progress: &mut dyn FnMut(&str)) -> Result<CaptureResult> {
    options.settings.validate()?;
    options.span.validate()?;
    let sockets = resolve(&options.target)?;
    let mut notes = Vec::new();
    let endpoints = statuses(&sockets, &mut notes)?;
    let busy: Vec<String> = endpoints
        .iter()
        .filter(|e| e.status.capture != CaptureState::Idle)
        .map(|e| format!("{}: {}", e.status.who(), e.status.capture.describe()))
        .collect();
    if !busy.is_empty() {
        return Err(Error::InvalidState(format!(
            "one capture at a time, and {}: wait for it to end (gmprof capture {} --status)",
            busy.join("; "),
            options.target
        )));
    }
    let run_dirs: std::collections::BTreeSet<&Path> = endpoints.iter().map(|e| e.status.run_dir.as_path()).collect();
    let [run_dir] = run_dirs.into_iter().collect::<Vec<_>>()[..] else {
        return Err(Error::InvalidState(
            "the processes write into different run directories: capture one run at a time (give its directory)".into(),
        ));
    };
    let step_ranges: std::collections::BTreeSet<Option<&str>> =
        endpoints.iter().map(|e| e.status.step_range.as_deref()).collect();
    let start = match step_ranges.into_iter().collect::<Vec<_>>()[..] {
        [Some(_)] => {
            let next: Vec<u64> = endpoints.iter().map(|e| e.status.next_step).collect();
            StartAt::AtStep(options.at_step.or_else(|| aligned_start(&next, options.margin)).unwrap_or(0))
        }
        [None] => {
            if matches!(options.span, Span::Steps(_)) || options.at_step.is_some() {
                return Err(Error::InvalidConfig(
                    "the run has no step range (gmprof run --step-range NAME or --torch-steps): use --duration SECONDS"
                        .into(),
                ));
            }
            StartAt::Next
        }
        _ => return Err(Error::InvalidState("the processes have different step ranges".into())),
    };
    let (id, dir) = captures::reserve(run_dir)?;
    let started = Instant::now();
    let mut asked = Vec::new();
    let mut refusals = Vec::new();
    for endpoint in &endpoints {
        let request = Request::Capture { id, settings: options.settings.clone(), span: options.span, start };
        match server::ask(&endpoint.socket, &request, REQUEST_TIMEOUT) {
            Ok(Response { ok: true, .. }) => asked.push(endpoint),
            Ok(Response { error, .. }) => {
                refusals.push(format!("{}: {}", endpoint.status.who(), error.unwrap_or_default()))
            }
            Err(e) => refusals.push(format!("{}: {e}", endpoint.status.who())),
        }
    }
    if !refusals.is_empty() {
        for endpoint in asked {
            let _ = server::ask(&endpoint.socket, &Request::Cancel { id }, REQUEST_TIMEOUT);
        }
        let _ = std::fs::remove_dir(&dir);
        return Err(Error::InvalidState(format!("capture {id} refused, and cancelled: {}", refusals.join("; "))));
    }
    let at = match start {
        StartAt::AtStep(s) => format!("at step {s}"),
        StartAt::Next => "now".into(),
    };
    progress(&format!(
        "capture {id}: {} process(es), {at}, {}, into {}",
        endpoints.len(),
        options.span.describe(),
        dir.display()
    ));
    let mut records: Vec<Option<(ProcessStatus, CaptureRecord)>> = vec![None; endpoints.len()];
    loop {
        for (slot, endpoint) in records.iter_mut().zip(&endpoints) {
            if slot.is_some() {
                continue;
            }
            match server::ask(&endpoint.socket, &Request::Status, REQUEST_TIMEOUT) {
                Ok(Response { status: Some(status), .. }) => {
                    if let Some(last) = status.last.clone().filter(|l| l.id == id) {
                        *slot = Some((status, last));
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    // The process ended while capturing: its end wrote what it had.
                    let record =
                        captures::read_record(&captures::capture_dir(run_dir, id).join(&endpoint.status.process))
                            .unwrap_or_else(|_| CaptureRecord {
                                id,
                                dir: captures::capture_dir(run_dir, id).join(&endpoint.status.process),
                                trigger: "gmprof capture".into(),
                                settings: options.settings.clone(),
                                span: options.span,
                                step_range: endpoint.status.step_range.clone(),
                                first_step: None,
                                steps: 0,
                                ended_by: None,
                                started_unix_ns: None,
                                ended_unix_ns: None,
                                outcome: Outcome::Failed { error: e.to_string() },
                            });
                    *slot = Some((endpoint.status.clone(), record));
                }
            }
        }
        if records.iter().all(Option::is_some) {
            break;
        }
        if started.elapsed() > options.timeout {
            let waiting: Vec<String> = records
                .iter()
                .zip(&endpoints)
                .filter(|(r, _)| r.is_none())
                .map(|(_, e)| {
                    let _ = server::ask(&e.socket, &Request::Cancel { id }, REQUEST_TIMEOUT);
                    e.status.who()
                })
                .collect();
            return Err(Error::InvalidState(format!(
                "capture {id}: gave up after {} s waiting for {} (a capture that had not started is cancelled; one \
                 under way goes on and writes {})",
                options.timeout.as_secs(),
                waiting.join(", "),
                dir.display()
            )));
        }
        std::thread::sleep(POLL);
    }
    let records: Vec<(ProcessStatus, CaptureRecord)> = records.into_iter().flatten().collect();
    let start = match start {
        StartAt::AtStep(s) => Some(s),
        StartAt::Next => None,
    };
    Ok(CaptureResult { id, dir, start, records, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ways_in::on_demand::server::ControlSocket;
    use crate::ways_in::on_demand::service_tests::{config, service, wait_idle};
    use std::sync::Arc;

    fn options(target: &Path, span: Span) -> CaptureOptions {
        CaptureOptions {
            target: target.display().to_string(),
            settings: CaptureSettings::default(),
            span,
            margin: 2,
            at_step: None,
            timeout: Duration::from_secs(20),
        }
    }

    fn step(s: &crate::ways_in::on_demand::service::Service) {
        s.on_push("step");
        s.on_push("forward");
        s.on_pop();
        s.on_pop();
    }

    #[test]
    fn a_run_directory_lists_every_process_socket_but_not_captures() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path();
        for dir in [run.to_owned(), run.join("node7-0"), run.join("node7-1"), run.join("capture-1/node7-0")] {
            let control = dir.join(CONTROL_DIR);
            std::fs::create_dir_all(&control).unwrap();
            std::fs::write(control.join(SOCKET_NAME), "").unwrap();
        }
        let found = sockets_under(run);
        assert_eq!(
            found,
            [run.to_owned(), run.join("node7-0"), run.join("node7-1")].map(|d| d.join(CONTROL_DIR).join(SOCKET_NAME))
        );
        assert_eq!(resolve(&run.join("node7-1").display().to_string()).unwrap().len(), 1, "one rank's directory");
        let empty = tempfile::tempdir().unwrap();
        let e = resolve(&empty.path().display().to_string()).unwrap_err().to_string();
        assert!(e.contains("holds no gmprof control socket"), "{e}");
        let e = resolve("not-a-dir-or-pid").unwrap_err().to_string();
        assert!(e.contains("neither a run directory nor a pid"), "{e}");
        let e = resolve(&(u32::MAX - 3).to_string()).unwrap_err().to_string();
        assert!(e.contains("there is no process"), "{e}");
    }

    #[test]
    fn a_pid_names_its_own_socket_or_its_descendants() {
        let tmp = tempfile::tempdir().unwrap();
        // A child process stands for a rank that registered its socket.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let socket = tmp.path().join("rank-socket");
        let links = server::register(child.id(), &socket);
        if !links.is_empty() {
            assert_eq!(sockets_of_pid(child.id()), std::slice::from_ref(&socket));
            // This test's own pid registered nothing: its descendant's socket is found.
            assert_eq!(sockets_of_pid(std::process::id()), std::slice::from_ref(&socket));
            assert_eq!(resolve(&std::process::id().to_string()).unwrap(), [socket]);
            server::unregister(&links);
        }
        let _ = child.kill();
        let _ = child.wait();
        let e = resolve(&child.id().to_string()).unwrap_err().to_string();
        assert!(e.contains("there is no process") || e.contains("has no gmprof on-demand process"), "{e}");
    }

    /// Two ranks of one run, each a service behind a real socket, stepping on their own
    /// threads at different paces: one `gmprof capture DIR --steps 3` gives both the same
    /// steps, in `capture-1/<rank>/`; a second gives `capture-2`.
    #[test]
    fn the_client_captures_every_rank_at_the_same_steps() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().to_owned();
        let ranks: Vec<_> = (0..2)
            .map(|r| {
                let (s, _) = service(&run, &format!("node7-{r}"), config(Some("step")));
                let socket = ControlSocket::bind(&run.join(format!("node7-{r}"))).unwrap();
                socket.serve(s.clone()).unwrap();
                s
            })
            .collect();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads: Vec<_> = ranks
            .iter()
            .enumerate()
            .map(|(r, s)| {
                let (s, stop) = (Arc::clone(s), Arc::clone(&stop));
                std::thread::spawn(move || {
                    // Rank 1 starts 5 steps ahead.
                    for _ in 0..(r * 5) {
                        step(&s);
                    }
                    while !stop.load(std::sync::atomic::Ordering::Acquire) {
                        step(&s);
                        std::thread::sleep(Duration::from_millis(2 + r as u64));
                    }
                })
            })
            .collect();
        // The ranks step every 2-3 ms: a margin of 50 steps (over 100 ms) lets the request
        // reach both on a loaded 2-core machine, where 2 steps did not (CI, 2026-11-25).
        let opts = CaptureOptions { margin: 50, ..options(&run, Span::Steps(3)) };
        for k in 1..=2u64 {
            let result = capture(&opts, &mut |_| {}).unwrap();
            assert_eq!(result.id, k);
            assert!(result.all_written(), "{:?}", result.lines());
            let firsts: Vec<_> = result.records.iter().map(|(_, r)| (r.first_step, r.steps)).collect();
            assert_eq!(firsts, [(result.start, 3), (result.start, 3)], "{:?}", result.lines());
            for r in 0..2 {
                assert!(run.join(format!("capture-{k}/node7-{r}/capture.json")).is_file());
            }
            assert!(result.lines().last().unwrap().starts_with(&format!("capture {k}: read it with: gmprof merge ")));
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_busy_process_or_a_missing_step_range_is_refused_before_anything_starts() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().to_owned();
        let (s, _) = service(&run, "node7-pid1", config(Some("step")));
        ControlSocket::bind(&run).unwrap().serve(s.clone()).unwrap();
        s.request(
            crate::ways_in::on_demand::service::Trigger::Signal("SIGUSR2".into()),
            None,
            &CaptureSettings::default(),
            Span::Steps(1),
            StartAt::AtStep(100),
        )
        .unwrap();
        let e = capture(&options(&run, Span::Steps(2)), &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("one capture at a time") && e.contains("capture 1 waits for step 100"), "{e}");
        s.cancel(1, "test").unwrap();
        wait_idle(&s);

        let (none, _) = service(&run.join("other"), "p", config(None));
        ControlSocket::bind(&run.join("other")).unwrap().serve(none.clone()).unwrap();
        let e = capture(&options(&run.join("other"), Span::Steps(2)), &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("has no step range") && e.contains("--duration"), "{e}");
        let result = capture(&options(&run.join("other"), Span::Seconds(0.05)), &mut |_| {}).unwrap();
        assert!(result.all_written() && result.start.is_none());
    }

    #[test]
    fn a_refusal_cancels_the_capture_everywhere() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().to_owned();
        let (a, _) = service(&run, "node7-0", config(Some("step")));
        let (b, _) = service(&run, "node7-1", config(Some("step")));
        ControlSocket::bind(&run.join("node7-0")).unwrap().serve(a.clone()).unwrap();
        ControlSocket::bind(&run.join("node7-1")).unwrap().serve(b.clone()).unwrap();
        // An earlier capture of rank 1 alone: the client reserves capture 2.
        std::fs::create_dir_all(run.join("capture-1/node7-1")).unwrap();
        let mut o = options(&run, Span::Steps(1));
        o.at_step = Some(0);
        // next_step 0 everywhere: start 0 is fine; rank 1 is pushed past it first.
        step(&b);
        let e = capture(&o, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("refused, and cancelled") && e.contains("past the capture's start step 0"), "{e}");
        assert_eq!(a.state(), CaptureState::Idle, "rank 0 was armed, then cancelled");
        assert!(!run.join("capture-2").exists(), "the empty reservation is removed");
    }
}
