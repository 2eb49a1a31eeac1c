//! The on-demand service on the CPU: a fake backend stands for CUPTI, NVTX pushes and pops
//! come from the test's threads as the program's would.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::backend::{CaptureBackend, LiveCapture, Written};
use super::captures;
use super::config::{CaptureRange, OnDemandConfig};
use super::protocol::{CaptureSettings, CaptureState, Outcome, Request, Span, StartAt};
use super::service::{ProcessInfo, Service, Trigger};
use super::steps::{aligned_start, StepRange};
use crate::capture::profiler::Teardown;
use crate::checked::callback::ProfilerApiCall;
use crate::error::{Error, Result};
use crate::model::RunEnd;

/// What the fake backend was asked to do, in order.
#[derive(Default)]
pub(crate) struct Log(Mutex<Vec<String>>);

impl Log {
    fn say(&self, line: String) {
        self.0.lock().push(line);
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.0.lock().clone()
    }
}

/// A backend that collects nothing and writes the ranges it was handed into `ranges.txt`.
pub(crate) struct FakeBackend {
    pub(crate) log: Arc<Log>,
    /// `start` fails with this message.
    pub(crate) fail_start: Mutex<Option<String>>,
}

struct FakeLive {
    log: Arc<Log>,
    dir: PathBuf,
    ranges: Mutex<Vec<String>>,
    sealed: AtomicBool,
}

impl CaptureBackend for FakeBackend {
    fn arm(&self, at_next_call: bool) -> Result<()> {
        self.log.say(format!("arm next_call={at_next_call}"));
        Ok(())
    }

    fn start(&self, settings: &CaptureSettings, dir: &Path) -> Result<Arc<dyn LiveCapture>> {
        if let Some(e) = self.fail_start.lock().clone() {
            return Err(Error::InvalidConfig(e));
        }
        self.log.say(format!("start {}", settings.mode.as_deref().unwrap_or("?")));
        Ok(Arc::new(FakeLive {
            log: Arc::clone(&self.log),
            dir: dir.to_owned(),
            ranges: Mutex::new(Vec::new()),
            sealed: AtomicBool::new(false),
        }))
    }

    fn disarm(&self) {
        self.log.say("disarm".into());
    }
}

impl LiveCapture for FakeLive {
    fn push_range(&self, name: &str) -> Result<()> {
        if self.sealed.load(Ordering::Acquire) {
            return Err(Error::InvalidState("sealed".into()));
        }
        self.ranges.lock().push(format!("+{name}"));
        Ok(())
    }

    fn pop_range(&self) -> Result<()> {
        if self.sealed.load(Ordering::Acquire) {
            return Err(Error::InvalidState("sealed".into()));
        }
        self.ranges.lock().push("-".into());
        Ok(())
    }

    fn seal(&self) {
        self.log.say("seal".into());
        self.sealed.store(true, Ordering::Release);
    }

    fn checkpoint(&self, reason: &str) -> Result<()> {
        self.log.say(format!("checkpoint {reason}"));
        std::fs::write(self.dir.join("ranges.txt"), self.ranges.lock().join(" ")).map_err(|e| Error::io(&self.dir, e))
    }

    fn first_step(&self, step: u64) {
        self.log.say(format!("first step {step}"));
    }

    fn finish(&self, end: RunEnd, teardown: Teardown) -> Result<Written> {
        self.log.say(format!("finish {} {teardown:?}", end.describe()));
        let ranges = self.ranges.lock().clone();
        std::fs::write(self.dir.join("ranges.txt"), ranges.join(" ")).map_err(|e| Error::io(&self.dir, e))?;
        Ok(Written {
            kernels: 0,
            ranges: ranges.iter().filter(|r| r.starts_with('+')).count() as u64,
            run_end: Some(end),
        })
    }
}

pub(crate) fn config(step: Option<&str>) -> OnDemandConfig {
    OnDemandConfig {
        on_demand: true,
        step_range: step.map(|s| StepRange::new(s).unwrap()),
        capture_range: None,
        range_captures: Some(1),
        signal: None,
        defaults: CaptureSettings { mode: Some("trace".into()), ..Default::default() },
        signal_span: Span::Steps(2),
        nvtx_include: Vec::new(),
    }
}

/// A service of process `name` in `run`, attached to a fake backend.
pub(crate) fn service(run: &Path, name: &str, config: OnDemandConfig) -> (Arc<Service>, Arc<FakeBackend>) {
    let service = Service::new(config);
    let backend = Arc::new(FakeBackend { log: Arc::default(), fail_start: Mutex::new(None) });
    let process =
        ProcessInfo { pid: 4242, host: "node7".into(), rank: None, process: name.into(), run_dir: run.to_owned() };
    service.attach(process, backend.clone());
    (service, backend)
}

/// One training step as `--torch-steps` marks it: the step range, a forward and a backward.
fn step(s: &Service) {
    s.on_push("step");
    s.on_push("forward");
    s.on_pop();
    s.on_push("backward");
    s.on_pop();
    s.on_pop();
}

pub(crate) fn wait_idle(s: &Service) {
    let t0 = Instant::now();
    while s.state() != CaptureState::Idle {
        assert!(t0.elapsed() < Duration::from_secs(10), "still {:?}", s.state());
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn ranges(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("ranges.txt")).unwrap()
}

#[test]
fn a_capture_starts_at_its_step_and_holds_exactly_its_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, backend) = service(tmp.path(), "node7-pid1", config(Some("step")));
    s.on_push("main"); // open before and after the capture: never the capture's
    for _ in 0..3 {
        step(&s);
    }
    assert_eq!(s.status().unwrap().next_step, 3);
    let id =
        s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(2), StartAt::AtStep(5)).unwrap();
    assert_eq!(id, 1);
    assert_eq!(s.state(), CaptureState::Armed { id: 1, start: StartAt::AtStep(5), span: Span::Steps(2) });
    step(&s);
    step(&s);
    assert!(matches!(s.state(), CaptureState::Armed { .. }), "steps 3 and 4 are before the start");
    step(&s); // step 5
    assert_eq!(s.state(), CaptureState::Running { id: 1, first_step: Some(5), steps_done: 1, span: Span::Steps(2) });
    step(&s); // step 6: the last
    wait_idle(&s);
    step(&s); // after the capture: nothing reaches it
    s.on_pop(); // main
    let dir = tmp.path().join("capture-1/node7-pid1");
    assert_eq!(ranges(&dir), "+step +forward - +backward - - +step +forward - +backward - -");
    let record = captures::read_record(&dir).unwrap();
    assert_eq!((record.first_step, record.steps), (Some(5), 2));
    assert_eq!(record.ended_by.as_deref(), Some("2 step(s)"));
    assert_eq!(record.trigger, "gmprof capture");
    assert_eq!(record.outcome, Outcome::Written { kernels: 0, ranges: 6 });
    assert_eq!(s.last().unwrap(), record);
    assert_eq!(
        backend.log.lines(),
        [
            "arm next_call=false",
            "start trace",
            "first step 5",
            "seal",
            "finish finished (capture end: 2 step(s)) Release",
            "disarm"
        ]
    );
}

#[test]
fn simulated_ranks_at_different_steps_capture_the_same_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let ranks: Vec<_> = (0..4).map(|r| service(tmp.path(), &format!("node7-{r}"), config(Some("step")))).collect();
    // Each rank has run a different number of steps when the client asks.
    for (r, (s, _)) in ranks.iter().enumerate() {
        for _ in 0..(10 + r % 3) {
            step(s);
        }
    }
    let next: Vec<u64> = ranks.iter().map(|(s, _)| s.status().unwrap().next_step).collect();
    assert_eq!(next, [10, 11, 12, 10]);
    let (id, _) = captures::reserve(tmp.path()).unwrap();
    let start = aligned_start(&next, 2).unwrap();
    for (s, _) in &ranks {
        s.request(Trigger::Client, Some(id), &CaptureSettings::default(), Span::Steps(3), StartAt::AtStep(start))
            .unwrap();
    }
    // Each rank runs on in its own thread, at its own pace.
    std::thread::scope(|scope| {
        for (s, _) in &ranks {
            scope.spawn(move || {
                for _ in 0..10 {
                    step(s);
                }
            });
        }
    });
    for (s, _) in &ranks {
        wait_idle(s);
    }
    for r in 0..4 {
        let record = captures::read_record(&tmp.path().join(format!("capture-{id}/node7-{r}"))).unwrap();
        assert_eq!((record.first_step, record.steps), (Some(start), 3), "rank {r}");
    }
}

#[test]
fn a_rank_past_the_start_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _) = service(tmp.path(), "node7-1", config(Some("step")));
    for _ in 0..8 {
        step(&s);
    }
    let e = s
        .request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(3), StartAt::AtStep(6))
        .unwrap_err();
    assert!(e.contains("began step 7 already, past the capture's start step 6"), "{e}");
    assert_eq!(s.state(), CaptureState::Idle);
    assert!(!tmp.path().join("capture-1/node7-1").exists(), "nothing claimed");
}

#[test]
fn overlapping_requests_are_refused_with_what_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _) = service(tmp.path(), "p", config(Some("step")));
    s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(2), StartAt::AtStep(0)).unwrap();
    let e =
        s.request(Trigger::Client, Some(2), &CaptureSettings::default(), Span::Steps(2), StartAt::Next).unwrap_err();
    assert!(e.starts_with("capture 1 waits for step 0 (2 step(s)); one capture at a time"), "{e}");
    step(&s);
    let e =
        s.request(Trigger::Signal("SIGUSR2".into()), None, &CaptureSettings::default(), Span::Steps(1), StartAt::Next);
    let e = e.unwrap_err();
    assert!(e.starts_with("capture 1 is running (since step 0, 1 of 2 step(s) done)"), "{e}");
    // Over the socket the refusal comes with the status.
    let r = s.handle(Request::Capture {
        id: 3,
        settings: CaptureSettings::default(),
        span: Span::Steps(1),
        start: StartAt::Next,
    });
    assert!(!r.ok && r.error.unwrap().contains("one capture at a time"));
    assert_eq!(r.status.unwrap().capture.id(), Some(1));
    step(&s);
    wait_idle(&s);
    assert!(!tmp.path().join("capture-2").exists() && !tmp.path().join("capture-3").exists());
}

#[test]
fn captures_number_on_and_never_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _) = service(tmp.path(), "p", config(Some("step")));
    for k in 1..=3 {
        s.on_signal("SIGUSR2");
        step(&s);
        step(&s);
        wait_idle(&s);
        let dir = tmp.path().join(format!("capture-{k}/p"));
        assert!(ranges(&dir).starts_with("+step"), "capture {k}");
        assert_eq!(captures::read_record(&dir).unwrap().trigger, "signal SIGUSR2");
    }
    // A client asking for a number this process already wrote is refused, and nothing is lost.
    let e =
        s.request(Trigger::Client, Some(2), &CaptureSettings::default(), Span::Steps(1), StartAt::Next).unwrap_err();
    assert!(e.contains("does not write over a capture"), "{e}");
    assert!(ranges(&tmp.path().join("capture-2/p")).starts_with("+step"));
}

#[test]
fn the_end_of_the_run_writes_the_capture_under_way() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, backend) = service(tmp.path(), "p", config(Some("step")));
    s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(100), StartAt::Next).unwrap();
    step(&s);
    s.on_push("step"); // the program is killed in the middle of a step
    s.on_push("forward");
    let signal = RunEnd::Signal { signal: 15, name: "SIGTERM".into() };
    s.end_of_run(&signal, Teardown::Skip);
    let dir = tmp.path().join("capture-1/p");
    let record = captures::read_record(&dir).unwrap();
    assert_eq!(record.steps, 1, "one whole step; the open one is in the outputs too");
    assert_eq!(record.ended_by.as_deref(), Some("signal 15 (SIGTERM)"));
    assert!(record.line().contains(", ended by signal 15 (SIGTERM): "), "{}", record.line());
    assert_eq!(ranges(&dir), "+step +forward - +backward - - +step +forward");
    assert!(backend
        .log
        .lines()
        .contains(&"finish ended by signal 15 (SIGTERM); outputs written first Skip".to_owned()));
    // Nothing starts afterwards.
    let e =
        s.request(Trigger::Client, Some(2), &CaptureSettings::default(), Span::Steps(1), StartAt::Next).unwrap_err();
    assert!(e.contains("the program is ending"), "{e}");

    // An armed capture is cancelled, and its empty directory goes.
    let (s, _) = service(tmp.path(), "q", config(Some("step")));
    s.request(Trigger::Client, Some(7), &CaptureSettings::default(), Span::Steps(1), StartAt::AtStep(50)).unwrap();
    s.end_of_run(&RunEnd::Finished { by: "process exit".into() }, Teardown::Skip);
    assert!(!tmp.path().join("capture-7/q").exists());
    match s.last().unwrap().outcome {
        Outcome::Cancelled { reason } => assert!(reason.contains("ended before it started"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_capture_being_written_is_waited_for_at_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _) = service(tmp.path(), "p", config(Some("step")));
    s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(1), StartAt::Next).unwrap();
    step(&s);
    s.end_of_run(&RunEnd::Finished { by: "process exit".into() }, Teardown::Skip);
    assert_eq!(s.state(), CaptureState::Idle, "the writer thread was joined");
    assert_eq!(captures::read_record(&tmp.path().join("capture-1/p")).unwrap().steps, 1);
}

#[test]
fn cancel_only_what_has_not_started() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, backend) = service(tmp.path(), "p", config(Some("step")));
    s.request(Trigger::Client, Some(4), &CaptureSettings::default(), Span::Steps(1), StartAt::AtStep(3)).unwrap();
    assert!(s.handle(Request::Cancel { id: 4 }).ok);
    assert_eq!(s.state(), CaptureState::Idle);
    assert!(!tmp.path().join("capture-4/p").exists());
    assert_eq!(backend.log.lines(), ["arm next_call=false", "disarm"]);
    s.request(Trigger::Client, Some(5), &CaptureSettings::default(), Span::Steps(2), StartAt::Next).unwrap();
    step(&s);
    let r = s.handle(Request::Cancel { id: 5 });
    assert!(!r.ok && r.error.unwrap().contains("too late to cancel"));
    step(&s);
    wait_idle(&s);
}

#[test]
fn without_a_step_range_counter_modes_start_at_the_next_cuda_call() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, backend) = service(tmp.path(), "p", config(None));
    let e =
        s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(2), StartAt::Next).unwrap_err();
    assert!(e.contains("needs a step range") && e.contains("--duration"), "{e}");
    let per_kernel = CaptureSettings { mode: Some("per_kernel".into()), ..Default::default() };
    s.request(Trigger::Client, Some(1), &per_kernel, Span::Seconds(0.05), StartAt::Next).unwrap();
    assert!(matches!(s.state(), CaptureState::Armed { .. }));
    s.on_next_call();
    assert!(matches!(s.state(), CaptureState::Running { .. }));
    wait_idle(&s);
    assert_eq!(backend.log.lines()[..2], ["arm next_call=true".to_owned(), "start per_kernel".to_owned()]);
    let record = captures::read_record(&tmp.path().join("capture-1/p")).unwrap();
    assert_eq!(record.ended_by.as_deref(), Some("duration (0.05 s)"));
    assert_eq!(record.first_step, None);
    // Trace mode starts at once, on the requesting thread.
    s.request(Trigger::Client, Some(2), &CaptureSettings::default(), Span::Seconds(0.05), StartAt::Next).unwrap();
    assert!(matches!(s.state(), CaptureState::Running { .. } | CaptureState::Finishing { .. } | CaptureState::Idle));
    wait_idle(&s);
    assert_eq!(captures::read_record(&tmp.path().join("capture-2/p")).unwrap().settings.mode.as_deref(), Some("trace"));
}

#[test]
fn a_duration_with_a_step_range_ends_with_the_step_running() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _) = service(tmp.path(), "p", config(Some("step")));
    s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Seconds(0.05), StartAt::Next).unwrap();
    s.on_push("step");
    std::thread::sleep(Duration::from_millis(80));
    assert!(matches!(s.state(), CaptureState::Running { .. }), "the step is still open");
    s.on_pop();
    wait_idle(&s);
    let record = captures::read_record(&tmp.path().join("capture-1/p")).unwrap();
    assert_eq!((record.first_step, record.steps), (Some(0), 1));
}

#[test]
fn a_start_that_fails_is_recorded_and_leaves_the_process_idle() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, backend) = service(tmp.path(), "p", config(None));
    *backend.fail_start.lock() = Some("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES".into());
    let e = s
        .request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Seconds(1.0), StartAt::Next)
        .unwrap_err();
    assert!(e.contains("capture 1 could not start: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), "{e}");
    assert_eq!(s.state(), CaptureState::Idle);
    let record = captures::read_record(&tmp.path().join("capture-1/p")).unwrap();
    assert!(matches!(record.outcome, Outcome::Failed { .. }));
    *backend.fail_start.lock() = None;
    assert_eq!(
        s.request(Trigger::Client, None, &CaptureSettings::default(), Span::Seconds(0.01), StartAt::Next),
        Ok(2)
    );
    wait_idle(&s);
}

#[test]
fn nvtx_capture_ranges_capture_their_range_and_stop_after_n() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = config(None);
    c.on_demand = false;
    c.capture_range = Some("nvtx:profile me".parse::<CaptureRange>().unwrap());
    c.range_captures = Some(2);
    let (s, _) = service(tmp.path(), "p", c);
    for _ in 0..3 {
        s.on_push("warmup");
        s.on_pop();
        s.on_push("profile me");
        s.on_push("inner");
        s.on_pop();
        s.on_pop();
        wait_idle(&s);
    }
    assert_eq!(ranges(&tmp.path().join("capture-1/p")), "+profile me +inner - -");
    assert_eq!(ranges(&tmp.path().join("capture-2/p")), "+profile me +inner - -");
    assert!(!tmp.path().join("capture-3").exists(), "repeat:2 captures two");
    let record = captures::read_record(&tmp.path().join("capture-2/p")).unwrap();
    assert_eq!(record.trigger, "nvtx range 'profile me'");
    assert_eq!(record.ended_by.as_deref(), Some("the end of nvtx range 'profile me'"));
}

#[test]
fn cuda_profiler_api_ranges_start_and_stop_captures() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = config(Some("step"));
    c.capture_range = Some(CaptureRange::CudaProfilerApi);
    c.range_captures = None;
    let (s, _) = service(tmp.path(), "p", c);
    step(&s);
    s.on_profiler_api(ProfilerApiCall::Stop); // nothing running: nothing happens
    for _ in 0..2 {
        s.on_profiler_api(ProfilerApiCall::Start);
        step(&s);
        step(&s);
        s.on_profiler_api(ProfilerApiCall::Stop);
        wait_idle(&s);
        step(&s);
    }
    for k in 1..=2 {
        let dir = tmp.path().join(format!("capture-{k}/p"));
        let record = captures::read_record(&dir).unwrap();
        assert_eq!(record.trigger, "cudaProfilerStart");
        assert_eq!(record.ended_by.as_deref(), Some("cudaProfilerStop"));
        assert_eq!(record.steps, 2, "capture {k}");
        assert_eq!(record.first_step, Some(1 + (k - 1) * 3), "the first step it holds");
        assert_eq!(ranges(&dir).matches("+step").count(), 2);
    }
}

#[test]
fn include_filters_ranges_outside_the_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = config(Some("step"));
    c.nvtx_include = vec!["forward".into()];
    let (s, _) = service(tmp.path(), "p", c);
    s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(1), StartAt::Next).unwrap();
    s.on_push("step"); // always followed: the capture counts steps
    s.on_push("backward"); // nested in a followed range
    s.on_pop();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Another thread, outside any step: only what --nvtx-include names.
            s.on_push("dataloader");
            s.on_pop();
            s.on_push("forward");
            s.on_push("attention");
            s.on_pop();
            s.on_pop();
        });
    });
    s.on_pop();
    wait_idle(&s);
    assert_eq!(ranges(&tmp.path().join("capture-1/p")), "+step +backward - +forward +attention - - -");
}

#[test]
fn the_api_captures_between_its_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _) = service(tmp.path(), "p", config(Some("step")));
    let (id, dir) = s.api_start(&CaptureSettings { mode: Some("per_range".into()), ..Default::default() }).unwrap();
    assert_eq!((id, dir), (1, tmp.path().join("capture-1/p")));
    let e = s.api_start(&CaptureSettings::default()).unwrap_err();
    assert!(e.contains("capture 1 is running"), "{e}");
    step(&s);
    let record = s.api_stop().unwrap();
    assert_eq!(record.settings.mode.as_deref(), Some("per_range"));
    assert_eq!(record.ended_by.as_deref(), Some("gmprof_capture_stop"));
    assert_eq!(s.state(), CaptureState::Idle);
    assert!(s.api_stop().unwrap_err().contains("no capture of gmprof_capture_start is running"));
}

#[test]
fn checkpoints_reach_the_capture_under_way_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, backend) = service(tmp.path(), "p", config(Some("step")));
    assert!(!s.checkpoint("periodic"));
    s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(3), StartAt::Next).unwrap();
    step(&s);
    assert!(s.checkpoint("periodic"));
    assert_eq!(ranges(&tmp.path().join("capture-1/p")), "+step +forward - +backward - -");
    assert!(backend.log.lines().contains(&"checkpoint periodic".to_owned()));
    s.end_of_run(&RunEnd::Finished { by: "process exit".into() }, Teardown::Skip);
}

#[test]
fn requests_before_the_first_context_are_refused() {
    let s = Service::new(config(Some("step")));
    s.on_push("step"); // steps are counted from the first NVTX call
    let e =
        s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(1), StartAt::Next).unwrap_err();
    assert!(e.contains("no CUDA context yet"), "{e}");
    let r = s.handle(Request::Status);
    assert!(!r.ok && r.status.is_none());
}

/// A step pushed on another thread while the request is being armed is never missed: the
/// capture starts exactly at the step asked for, or the request is refused.
#[test]
fn a_start_step_racing_with_the_program_is_kept_or_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..200u64 {
        let (s, _) = service(tmp.path(), &format!("p{round}"), config(Some("step")));
        let stop = Arc::new(AtomicBool::new(false));
        let pusher = {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    s.on_push("step");
                    s.on_pop();
                    std::thread::sleep(Duration::from_micros(20));
                }
            })
        };
        // Margins of 1 to 10 steps: the small ones race with the pusher.
        let start = s.status().unwrap().next_step + 1 + round % 10;
        let asked =
            s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(1), StartAt::AtStep(start));
        if asked.is_ok() {
            wait_idle(&s);
            let record = s.last().unwrap();
            assert_eq!(record.first_step, Some(start), "round {round}");
            accepted += 1;
        } else {
            refused += 1;
        }
        stop.store(true, Ordering::Release);
        pusher.join().unwrap();
    }
    assert!(accepted > 0, "{accepted} accepted, {refused} refused");
}

/// Live metrics of an on-demand run: the steps the service hears, idle or capturing, give
/// the step count and each step's wall time (push to pop of the step range).
#[test]
fn an_idle_run_exports_its_step_count_and_step_time_while_idle_and_capturing() {
    use crate::report::live::{Fam, LiveMetrics, ProcessLabels, SeriesKey, Value};
    let tmp = tempfile::tempdir().unwrap();
    let (s, _) = service(tmp.path(), "node7-pid1", config(Some("step")));
    step(&s); // before live metrics: not timed, not exported
    let live = Arc::new(LiveMetrics::new(&ProcessLabels::default()));
    s.export_steps(Arc::clone(&live));
    let slow = |s: &Service, ms: u64| {
        s.on_push("step");
        s.on_push("forward");
        std::thread::sleep(Duration::from_millis(ms));
        s.on_pop();
        s.on_pop();
    };
    slow(&s, 2);
    slow(&s, 2);
    // A capture of two steps in the middle: its steps are exported too.
    s.request(Trigger::Client, Some(1), &CaptureSettings::default(), Span::Steps(2), StartAt::AtStep(3)).unwrap();
    slow(&s, 2);
    slow(&s, 30);
    wait_idle(&s);
    slow(&s, 2);
    let d = SeriesKey::default();
    assert_eq!(live.store().get(Fam::Steps, &d), Some(Value::Count(5)));
    assert_eq!(live.store().get(Fam::LastStep, &d), Some(Value::Int(5)), "steps are numbered from the run's start");
    let Some(Value::Histogram(h)) = live.store().get(Fam::StepWall, &d) else { panic!("no step histogram") };
    assert_eq!(h.count, 5);
    // Wall times measured, not made up: at least the sleeps, the slow step in a bucket past 16 ms.
    assert!(h.sum >= 0.038, "{}", h.sum);
    assert!(h.counts[5..].iter().sum::<u64>() >= 1, "{:?}", h.counts);
    let Some(Value::Float(last)) = live.store().get(Fam::LastStepWall, &d) else { panic!("no last step time") };
    assert!((0.002..1.0).contains(&last), "{last}");
    let text = live.encode().unwrap();
    assert!(text.contains("gmprof_steps_total 5\n"), "{text}");
}
