//! One process's captures: when each starts and ends, one at a time.
//!
//! Layer 3. A [`Service`] hears the program's NVTX ranges ([`Service::on_push`],
//! [`Service::on_pop`], on the program's threads), its CUDA calls while a capture waits for
//! one ([`Service::on_next_call`]), its profiler-API calls, and requests (the socket, the
//! signal, the API). Its phases:
//!
//! ```text
//! Idle ──request──► Armed ──start step pushed / next CUDA call──► Starting ──► Running
//!  ▲                  │ cancel                                                   │ last step popped, duration,
//!  │                  ▼                                                          │ cudaProfilerStop, range popped
//!  └──────────────── Idle ◄──── outputs written (a thread of its own) ◄── Finishing ◄┘ (sealed on the program's thread)
//! ```
//!
//! A request while a capture is armed or running is refused, saying which and how far it is.
//! A capture starts on the thread that pushes its first step (counter modes need the
//! program's thread, with its context current) and is sealed on the thread that pops its last,
//! so it holds exactly its steps; it is finished and written on a thread of its own, outside
//! CUPTI's callbacks. At the end of the run ([`Service::end_of_run`]) a capture under way is
//! finished and written on the ending thread, as a run's outputs are; an armed one is
//! cancelled. The work that touches CUPTI is behind [`CaptureBackend`], so the CPU tests drive
//! all of this with a fake. The triggers a program pulls itself (the profiler API, the
//! capture signal, `gmprof_capture_start`) are in the `triggers` submodule; what it decides
//! and says apart from its state (a step that starts a capture, a run's end) is in `words`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::capture::profiler::Teardown;
use crate::error::Error;
use crate::model::{ProfilingMode, RunEnd};
use crate::report::live::LiveMetrics;
use crate::ways_in::on_demand::backend::{CaptureBackend, LiveCapture, Written};
use crate::ways_in::on_demand::captures;
use crate::ways_in::on_demand::config::{CaptureRange, OnDemandConfig};
use crate::ways_in::on_demand::protocol::{
    CaptureRecord, CaptureSettings, CaptureState, Outcome, ProcessStatus, Request, Response, Span, StartAt,
};
use crate::ways_in::on_demand::steps::{check_start, OpenRange, ThreadRanges};

/// Who the process is and where its captures go.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessInfo {
    /// Its pid.
    pub pid: u32,
    /// Its host.
    pub host: String,
    /// Its rank, when a rank variable is set.
    pub rank: Option<u32>,
    /// Its directory's name in each `capture-K`.
    pub process: String,
    /// The run's output directory.
    pub run_dir: PathBuf,
}

/// What started a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// `gmprof capture` over the socket.
    Client,
    /// The capture signal.
    Signal(String),
    /// `cudaProfilerStart`.
    ProfilerApi,
    /// An instance of the capture range's NVTX range.
    NvtxRange(String),
    /// `gmprof_capture_start` (C, Python) or the Rust API.
    Api,
}

impl Trigger {
    fn describe(&self) -> String {
        match self {
            Trigger::Client => "gmprof capture".into(),
            Trigger::Signal(name) => format!("signal {name}"),
            Trigger::ProfilerApi => "cudaProfilerStart".into(),
            Trigger::NvtxRange(name) => format!("nvtx range '{name}'"),
            Trigger::Api => "gmprof_capture_start".into(),
        }
    }
}

/// A capture asked for, not started.
#[derive(Clone, Debug)]
struct Pending {
    id: u64,
    trigger: Trigger,
    settings: CaptureSettings,
    span: Span,
    start: StartAt,
    dir: PathBuf,
}

/// A capture collecting.
struct Live {
    pending: Pending,
    capture: Arc<dyn LiveCapture>,
    first_step: Option<u64>,
    steps_done: u64,
    started_unix_ns: u64,
    /// A duration has passed: the next step popped ends it.
    end_at_step: bool,
}

enum Phase {
    Idle,
    Armed(Pending),
    /// Its backend is starting, outside the lock.
    Starting(u64),
    Running(Box<Live>),
    /// Sealed; the thread writing its outputs.
    Finishing(u64, Option<JoinHandle<()>>),
}

/// A process's on-demand captures.
pub struct Service {
    me: Weak<Service>,
    /// Tells this service's thread-local range stacks from another's (tests make several).
    uid: u64,
    config: OnDemandConfig,
    process: OnceLock<ProcessInfo>,
    backend: OnceLock<Arc<dyn CaptureBackend>>,
    /// Pushes of the step range heard: the number of the next step.
    next_step: AtomicU64,
    /// Whether the phase is not `Idle`: what an NVTX event checks before taking the lock.
    active: AtomicBool,
    phase: Mutex<Phase>,
    last: Mutex<Option<CaptureRecord>>,
    /// Captures the capture range started.
    range_captures: AtomicU64,
    /// The run is ending: nothing new starts.
    ended: AtomicBool,
    /// The live metrics the steps go to, when exported ([`Service::export_steps`]).
    live: OnceLock<Arc<LiveMetrics>>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("uid", &self.uid).field("config", &self.config).finish_non_exhaustive()
    }
}

mod triggers;
mod words;

use self::words::{ended_by_run, not_attached, starts_at};

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static RANGES: RefCell<(u64, ThreadRanges)> = RefCell::new((0, ThreadRanges::default()));
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

impl Service {
    /// A service for `config`, idle, with no process attached yet.
    pub fn new(config: OnDemandConfig) -> Arc<Service> {
        Arc::new_cyclic(|me| Service {
            me: me.clone(),
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            config,
            process: OnceLock::new(),
            backend: OnceLock::new(),
            next_step: AtomicU64::new(0),
            active: AtomicBool::new(false),
            phase: Mutex::new(Phase::Idle),
            last: Mutex::new(None),
            range_captures: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            live: OnceLock::new(),
        })
    }

    /// Attaches the process (once its first CUDA context exists) and its backend; requests are
    /// refused until then.
    pub fn attach(&self, process: ProcessInfo, backend: Arc<dyn CaptureBackend>) {
        let _ = self.process.set(process);
        let _ = self.backend.set(backend);
    }

    /// Exports the steps heard to `live` from now on (step count and wall time, whether
    /// idle or capturing): the live metrics of an on-demand run.
    pub fn export_steps(&self, live: Arc<LiveMetrics>) {
        let _ = self.live.set(live);
    }

    /// The configuration.
    pub fn config(&self) -> &OnDemandConfig {
        &self.config
    }

    /// The process, once attached.
    pub fn process(&self) -> Option<&ProcessInfo> {
        self.process.get()
    }

    fn with_ranges<R>(&self, f: impl FnOnce(&mut ThreadRanges) -> R) -> Option<R> {
        RANGES
            .try_with(|cell| {
                let mut cell = cell.borrow_mut();
                if cell.0 != self.uid {
                    *cell = (self.uid, ThreadRanges::default());
                }
                f(&mut cell.1)
            })
            .ok()
    }

    /// Where its capture stands.
    pub fn state(&self) -> CaptureState {
        state_of(&self.phase.lock())
    }

    /// The process's status; `None` before it is attached.
    pub fn status(&self) -> Option<ProcessStatus> {
        let process = self.process.get()?;
        Some(ProcessStatus {
            pid: process.pid,
            host: process.host.clone(),
            rank: process.rank,
            process: process.process.clone(),
            run_dir: process.run_dir.clone(),
            gmprof_version: env!("CARGO_PKG_VERSION").into(),
            step_range: self.config.step_range.as_ref().map(|s| s.name().to_owned()),
            next_step: self.next_step.load(Ordering::Acquire),
            defaults: self.config.defaults.clone(),
            capture: self.state(),
            last: self.last.lock().clone(),
        })
    }

    /// The last capture that ended.
    pub fn last(&self) -> Option<CaptureRecord> {
        self.last.lock().clone()
    }

    /// Serves one request of the socket.
    pub fn handle(&self, request: Request) -> Response {
        let result = match request {
            Request::Status => Ok(()),
            Request::Capture { id, settings, span, start } => {
                self.request(Trigger::Client, Some(id), &settings, span, start).map(|_| ())
            }
            Request::Cancel { id } => self.cancel(id, "cancelled by gmprof capture"),
        };
        match (result, self.status()) {
            (Ok(()), Some(status)) => Response::ok(status),
            (Ok(()), None) => Response::refused(not_attached(), None),
            (Err(e), status) => Response::refused(e, status),
        }
    }

    /// Asks for a capture: `id` (`None`: this process's next own number), `settings` over the
    /// run's defaults, lasting `span`, starting at `start`. Returns its number, or why not.
    pub fn request(
        &self,
        trigger: Trigger,
        id: Option<u64>,
        settings: &CaptureSettings,
        span: Span,
        start: StartAt,
    ) -> Result<u64, String> {
        if self.ended.load(Ordering::Acquire) {
            return Err("the program is ending; no capture starts now".into());
        }
        let (Some(process), Some(backend)) = (self.process.get(), self.backend.get()) else {
            return Err(not_attached());
        };
        let settings = settings.or(&self.config.defaults);
        settings.validate().map_err(|e| e.to_string())?;
        span.validate().map_err(|e| e.to_string())?;
        let step_range = self.config.step_range.as_ref();
        if step_range.is_none() {
            let why = match (span, start) {
                (Span::Steps(_), _) => Some("a capture of --steps"),
                (_, StartAt::AtStep(_)) => Some("a start at a step"),
                _ => None,
            };
            if let Some(why) = why {
                return Err(format!(
                    "{why} needs a step range, and this run has none (gmprof run --step-range NAME or \
                     --torch-steps): use --duration SECONDS"
                ));
            }
        }
        let trace = settings.profiling_mode().ok().flatten() == Some(ProfilingMode::Trace);
        let mut phase = self.phase.lock();
        if !matches!(*phase, Phase::Idle) {
            drop(phase);
            return Err(format!(
                "{}; one capture at a time: wait for it to end (gmprof capture DIR --status shows where it stands)",
                self.state().describe()
            ));
        }
        if let StartAt::AtStep(step) = start {
            check_start(self.next_step.load(Ordering::Acquire), step)?;
        }
        let id = id.unwrap_or_else(|| captures::own_next(&process.run_dir, &process.process));
        let dir = captures::claim(&process.run_dir, id, &process.process).map_err(|e| e.to_string())?;
        let pending = Pending { id, trigger, settings, span, start, dir };
        let now = step_range.is_none() && start == StartAt::Next && trace;
        if now {
            // Trace mode needs no program thread: it starts here.
            *phase = Phase::Starting(id);
            self.active.store(true, Ordering::Release);
            drop(phase);
            self.start(pending, None);
            return self.started_or_failed(id);
        }
        let at_next_call = step_range.is_none();
        let dir = pending.dir.clone();
        *phase = Phase::Armed(pending);
        self.active.store(true, Ordering::SeqCst);
        if let StartAt::AtStep(step) = start {
            // Armed first, then the step count read again (a pusher counts, then reads
            // `active`): either this read sees the push of `step` (refused here) or that push
            // saw the capture armed and starts it once the lock is free. Never missed.
            if let Err(e) = check_start(self.next_step.load(Ordering::SeqCst), step) {
                *phase = Phase::Idle;
                self.active.store(false, Ordering::SeqCst);
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        }
        drop(phase);
        // Outside the lock: it calls into CUPTI, which may be dispatching a callback of the
        // program's that waits for the lock.
        if let Err(e) = backend.arm(at_next_call) {
            let mut phase = self.phase.lock();
            if let Phase::Armed(p) = &*phase {
                if p.id == id {
                    let p = p.clone();
                    *phase = Phase::Idle;
                    self.active.store(false, Ordering::Release);
                    drop(phase);
                    backend.disarm();
                    self.record(&p, None, 0, None, None, Outcome::Failed { error: e.to_string() });
                }
            }
            return Err(format!("capture {id} could not be armed: {e}"));
        }
        Ok(id)
    }

    /// After a start on the requesting thread: the number, or the start's error.
    fn started_or_failed(&self, id: u64) -> Result<u64, String> {
        match self.last.lock().as_ref() {
            Some(CaptureRecord { id: last, outcome: Outcome::Failed { error }, .. }) if *last == id => {
                Err(format!("capture {id} could not start: {error}"))
            }
            _ => Ok(id),
        }
    }

    /// Cancels capture `id` if it has not started.
    pub fn cancel(&self, id: u64, reason: &str) -> Result<(), String> {
        let mut phase = self.phase.lock();
        match &*phase {
            Phase::Armed(p) if p.id == id => {
                let p = p.clone();
                *phase = Phase::Idle;
                self.active.store(false, Ordering::Release);
                drop(phase);
                if let Some(backend) = self.backend.get() {
                    backend.disarm();
                }
                // Nothing was written: the directory goes, and the record is the status's only.
                let _ = std::fs::remove_dir(&p.dir);
                *self.last.lock() =
                    Some(self.record_of(&p, None, 0, None, None, Outcome::Cancelled { reason: reason.to_owned() }));
                Ok(())
            }
            Phase::Idle => Ok(()),
            _ => {
                drop(phase);
                Err(format!("{}: too late to cancel", self.state().describe()))
            }
        }
    }

    /// An NVTX push on the calling thread.
    pub fn on_push(&self, name: &str) {
        let step = self.config.step_range.as_ref().is_some_and(|s| s.matches(name));
        // SeqCst with `active` below: see `request`.
        let index = step.then(|| self.next_step.fetch_add(1, Ordering::SeqCst));
        let trigger = match &self.config.capture_range {
            Some(CaptureRange::Nvtx(range)) => range.matches(name) && self.range_capture_left(),
            _ => false,
        };
        // With live metrics, a step's push is timed (its pop exports the step's wall time).
        let timed = index.filter(|_| self.live.get().is_some()).map(|i| (i, std::time::Instant::now()));
        let mut open = OpenRange { step, trigger: false, capture: None, timed };
        if !self.active.load(Ordering::SeqCst) && !trigger {
            self.with_ranges(|t| t.push(open));
            return;
        }
        let starting = {
            let mut phase = self.phase.lock();
            match &*phase {
                Phase::Armed(p) if step && starts_at(p.start, index) => {
                    let id = p.id;
                    let Phase::Armed(p) = std::mem::replace(&mut *phase, Phase::Starting(id)) else { unreachable!() };
                    Some(p)
                }
                Phase::Idle if trigger && !self.ended.load(Ordering::Acquire) => {
                    let pending = self.own_pending(Trigger::NvtxRange(name.to_owned()), Span::UntilStopped);
                    match pending {
                        Ok(p) => {
                            *phase = Phase::Starting(p.id);
                            self.active.store(true, Ordering::Release);
                            self.range_captures.fetch_add(1, Ordering::AcqRel);
                            open.trigger = true;
                            Some(p)
                        }
                        Err(e) => {
                            eprintln!("gmprof: nvtx range '{name}': no capture: {e}");
                            None
                        }
                    }
                }
                _ => None,
            }
        };
        if let Some(pending) = starting {
            self.start(pending, index);
        }
        let mut phase = self.phase.lock();
        if let Phase::Running(live) = &mut *phase {
            let id = live.pending.id;
            let inside = self.with_ranges(|t| t.inside(id)).unwrap_or(false);
            let include = &self.config.nvtx_include;
            // Steps always: the capture counts them (and `--nvtx-include` names what else).
            if open.trigger || step || inside || include.is_empty() || include.iter().any(|i| i == name) {
                match live.capture.push_range(name) {
                    Ok(()) => {
                        open.capture = Some(id);
                        // The first step it holds (a capture range may start between steps).
                        if live.first_step.is_none() {
                            live.first_step = index;
                            if let Some(step) = index {
                                live.capture.first_step(step);
                            }
                        }
                    }
                    Err(e) => tracing::warn!("gmprof: capture {id}: NVTX push '{name}': {e}"),
                }
            }
        } else {
            open.trigger = false;
        }
        drop(phase);
        self.with_ranges(|t| t.push(open));
    }

    /// An NVTX pop on the calling thread.
    pub fn on_pop(&self) {
        let Some(Some(open)) = self.with_ranges(ThreadRanges::pop) else { return };
        if let (Some((number, pushed)), Some(live)) = (open.timed, self.live.get()) {
            // Step time, idle or capturing: the live metrics' steps of an on-demand run.
            live.idle_step(number, Some(pushed.elapsed().as_nanos() as u64));
        }
        let Some(id) = open.capture else { return };
        let mut phase = self.phase.lock();
        let Phase::Running(live) = &mut *phase else { return };
        if live.pending.id != id {
            return;
        }
        if let Err(e) = live.capture.pop_range() {
            tracing::warn!("gmprof: capture {id}: NVTX pop: {e}");
        }
        if open.step {
            live.steps_done += 1;
        }
        let ended_by = if open.trigger {
            Some(match &live.pending.trigger {
                Trigger::NvtxRange(name) => format!("the end of nvtx range '{name}'"),
                other => other.describe(),
            })
        } else if open.step && matches!(live.pending.span, Span::Steps(n) if n == live.steps_done) {
            Some(live.pending.span.describe())
        } else if open.step && live.end_at_step {
            Some(format!("duration ({})", live.pending.span.describe()))
        } else {
            None
        };
        if let Some(ended_by) = ended_by {
            self.end_in_background(phase, ended_by);
        }
    }

    /// Inside a CUDA call of the profiled context, after [`CaptureBackend::arm`] asked for
    /// it: an armed capture with no step range starts here, on the program's thread.
    pub fn on_next_call(&self) {
        let pending = {
            let mut phase = self.phase.lock();
            match &*phase {
                Phase::Armed(p) if self.config.step_range.is_none() => {
                    let id = p.id;
                    let Phase::Armed(p) = std::mem::replace(&mut *phase, Phase::Starting(id)) else { unreachable!() };
                    Some(p)
                }
                _ => None,
            }
        };
        if let Some(p) = pending {
            self.start(p, None);
        }
    }

    /// A duration's end (the timer thread of capture `id`): with a step range the capture
    /// ends with the step running now; after twice the duration, or without a step range, at
    /// once.
    fn on_deadline(&self, id: u64, hard: bool) {
        let mut phase = self.phase.lock();
        let Phase::Running(live) = &mut *phase else { return };
        if live.pending.id != id {
            return;
        }
        if self.config.step_range.is_some() && live.first_step.is_some() && !hard {
            live.end_at_step = true;
            return;
        }
        let ended_by = format!("duration ({})", live.pending.span.describe());
        self.end_in_background(phase, ended_by);
    }

    /// Writes a checkpoint of the capture under way into its directory; true when there was
    /// one (the periodic checkpoint thread's tick).
    pub fn checkpoint(&self, reason: &str) -> bool {
        // Written outside the lock: the program's NVTX calls take it while a capture runs.
        let running = match &*self.phase.lock() {
            Phase::Running(live) => Some((live.pending.id, Arc::clone(&live.capture))),
            _ => None,
        };
        let Some((id, capture)) = running else { return false };
        if let Err(e) = capture.checkpoint(reason) {
            tracing::warn!("gmprof: capture {id}: checkpoint failed: {e}");
        }
        true
    }

    /// The end of the run (exit, signal, context destroyed): a capture under way is finished
    /// and written here, with `run_end`; one being written is waited for; an armed one is
    /// cancelled. Nothing starts afterwards.
    pub fn end_of_run(&self, run_end: &RunEnd, teardown: Teardown) {
        self.ended.store(true, Ordering::Release);
        let mut phase = self.phase.lock();
        match std::mem::replace(&mut *phase, Phase::Idle) {
            Phase::Idle => {}
            Phase::Armed(p) => {
                *phase = Phase::Armed(p.clone());
                drop(phase);
                let _ = self.cancel(p.id, &format!("the program ended before it started ({})", run_end.describe()));
            }
            Phase::Starting(id) => {
                *phase = Phase::Starting(id);
                tracing::warn!("gmprof: capture {id} was starting when the run ended");
            }
            Phase::Running(live) => {
                let id = live.pending.id;
                *phase = Phase::Finishing(id, None);
                drop(phase);
                live.capture.seal();
                self.finish(*live, run_end.clone(), ended_by_run(run_end), teardown);
            }
            Phase::Finishing(id, handle) => {
                *phase = Phase::Finishing(id, None);
                drop(phase);
                if let Some(handle) = handle {
                    let _ = handle.join();
                }
            }
        }
    }

    fn describe_locked(&self, phase: &Phase) -> String {
        state_of(phase).describe()
    }

    fn range_capture_left(&self) -> bool {
        self.config.range_captures.is_none_or(|n| self.range_captures.load(Ordering::Acquire) < n)
    }

    /// A capture this process starts by itself, with the run's defaults.
    fn own_pending(&self, trigger: Trigger, span: Span) -> Result<Pending, Error> {
        let process = self.process.get().ok_or_else(|| Error::InvalidState(not_attached()))?;
        let id = captures::own_next(&process.run_dir, &process.process);
        let dir = captures::claim(&process.run_dir, id, &process.process)?;
        Ok(Pending { id, trigger, settings: self.config.defaults.clone(), span, start: StartAt::Next, dir })
    }

    /// Starts `pending` on the calling thread (phase `Starting`): `Running`, or back to
    /// `Idle` with the failure recorded.
    fn start(&self, pending: Pending, first_step: Option<u64>) {
        let Some(backend) = self.backend.get() else { return };
        let started = backend.start(&pending.settings, &pending.dir);
        let mut phase = self.phase.lock();
        if !matches!(*phase, Phase::Starting(id) if id == pending.id) {
            return;
        }
        match started {
            Ok(capture) => {
                let at = first_step.map(|s| format!(" at step {s}")).unwrap_or_default();
                eprintln!(
                    "gmprof: capture {}{at}: {} ({}, {}) into {}",
                    pending.id,
                    pending.settings.mode.as_deref().unwrap_or("default mode"),
                    pending.span.describe(),
                    pending.trigger.describe(),
                    pending.dir.display()
                );
                if let Span::Seconds(seconds) = pending.span {
                    self.spawn_deadline(pending.id, seconds);
                }
                if let Some(step) = first_step {
                    capture.first_step(step);
                }
                *phase = Phase::Running(Box::new(Live {
                    pending,
                    capture,
                    first_step,
                    steps_done: 0,
                    started_unix_ns: unix_ns(),
                    end_at_step: false,
                }));
            }
            Err(e) => {
                *phase = Phase::Idle;
                self.active.store(false, Ordering::Release);
                drop(phase);
                backend.disarm();
                eprintln!("gmprof: capture {} could not start: {e}", pending.id);
                self.record(&pending, first_step, 0, None, None, Outcome::Failed { error: e.to_string() });
            }
        }
    }

    fn spawn_deadline(&self, id: u64, seconds: f64) {
        let me = self.me.clone();
        // A span is validated before a capture starts (`Span::validate`), so this holds.
        let Ok(wait) = Duration::try_from_secs_f64(seconds) else {
            eprintln!("gmprof: capture {id}: no timer waits {seconds} s; it ends with the run");
            return;
        };
        let spawned = std::thread::Builder::new().name(format!("gmprof-capture-{id}-timer")).spawn(move || {
            std::thread::sleep(wait);
            let Some(service) = me.upgrade() else { return };
            service.on_deadline(id, false);
            drop(service);
            std::thread::sleep(wait);
            if let Some(service) = me.upgrade() {
                service.on_deadline(id, true);
            }
        });
        if let Err(e) = spawned {
            eprintln!("gmprof: capture {id}: no timer for its duration ({e}); it ends with the run");
        }
    }

    /// Seals the running capture (on the calling thread: the window closes now) and writes
    /// it on a thread of its own.
    fn end_in_background(&self, mut phase: parking_lot::MutexGuard<'_, Phase>, ended_by: String) {
        let Phase::Running(live) = &*phase else { return };
        let id = live.pending.id;
        let Phase::Running(live) = std::mem::replace(&mut *phase, Phase::Finishing(id, None)) else { unreachable!() };
        live.capture.seal();
        let me = self.me.clone();
        let end = RunEnd::Finished { by: format!("capture end: {ended_by}") };
        let spawned = std::thread::Builder::new().name(format!("gmprof-capture-{id}")).spawn(move || {
            if let Some(service) = me.upgrade() {
                service.finish(*live, end, ended_by, Teardown::Release);
            }
        });
        match spawned {
            Ok(handle) => {
                if let Phase::Finishing(_, slot) = &mut *phase {
                    *slot = Some(handle);
                }
            }
            Err(e) => {
                // Finished by the run's end instead; nothing is lost.
                eprintln!("gmprof: capture {id}: could not start a thread to write it ({e})");
            }
        }
    }

    /// Finishes `live`, writes its record and goes back to idle.
    fn finish(&self, live: Live, end: RunEnd, ended_by: String, teardown: Teardown) {
        let Live { pending, capture, first_step, steps_done, started_unix_ns, .. } = live;
        let result: Result<Written, Error> = capture.finish(end, teardown);
        let outcome = match result {
            Ok(w) => Outcome::Written { kernels: w.kernels, ranges: w.ranges },
            Err(e) => Outcome::Failed { error: e.to_string() },
        };
        let record = self.record_of(&pending, first_step, steps_done, Some(ended_by), Some(started_unix_ns), outcome);
        write_record(&record);
        eprintln!("gmprof: {}", record.line());
        if let Some(backend) = self.backend.get() {
            if teardown == Teardown::Release {
                backend.disarm();
            }
        }
        // Idle before the record is published: whoever sees the capture ended may ask for the
        // next one at once.
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Finishing(id, _) if id == pending.id) {
            *phase = Phase::Idle;
            self.active.store(false, Ordering::Release);
        }
        *self.last.lock() = Some(record);
    }

    fn record_of(
        &self,
        p: &Pending,
        first_step: Option<u64>,
        steps: u64,
        ended_by: Option<String>,
        started_unix_ns: Option<u64>,
        outcome: Outcome,
    ) -> CaptureRecord {
        CaptureRecord {
            id: p.id,
            dir: p.dir.clone(),
            trigger: p.trigger.describe(),
            settings: p.settings.clone(),
            span: p.span,
            step_range: self.config.step_range.as_ref().map(|s| s.name().to_owned()),
            first_step,
            steps,
            ended_by,
            started_unix_ns,
            ended_unix_ns: started_unix_ns.map(|_| unix_ns()),
            outcome,
        }
    }

    /// Writes `capture.json` and makes it the last capture.
    fn record(
        &self,
        p: &Pending,
        first_step: Option<u64>,
        steps: u64,
        ended_by: Option<String>,
        started_unix_ns: Option<u64>,
        outcome: Outcome,
    ) -> CaptureRecord {
        let record = self.record_of(p, first_step, steps, ended_by, started_unix_ns, outcome);
        write_record(&record);
        *self.last.lock() = Some(record.clone());
        record
    }
}

/// Writes `capture.json`; a failure is said, and the capture's line still goes out.
fn write_record(record: &CaptureRecord) {
    if let Err(e) = captures::write_record(record) {
        eprintln!("gmprof: capture {}: could not write {}: {e}", record.id, captures::RECORD_FILE);
    }
}

/// What the protocol says of `phase`.
fn state_of(phase: &Phase) -> CaptureState {
    match phase {
        Phase::Idle => CaptureState::Idle,
        Phase::Armed(p) => CaptureState::Armed { id: p.id, start: p.start, span: p.span },
        Phase::Starting(id) => CaptureState::Starting { id: *id },
        Phase::Running(live) => CaptureState::Running {
            id: live.pending.id,
            first_step: live.first_step,
            steps_done: live.steps_done,
            span: live.pending.span,
        },
        Phase::Finishing(id, _) => CaptureState::Finishing { id: *id },
    }
}
