//! The child process of a fault-injection run: the scripted libraries installed with the
//! run's fault, gmprof injected as the CUDA driver injects it (`InitializeInjection`), and
//! the made-up program of the run's workload. It writes its transcript, and at its exit
//! (after gmprof's exit handler has finished and written) every call gmprof made and the
//! faults that fired.
//!
//! Imports nothing of the folder; `run` starts it (by its test name).

use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::checked::scripted::{self, Fault, Program};

/// The workload the child runs (its [`Workload::name`]); unset: not a child.
pub(super) const CHILD_ENV: &str = "GMPROF_FAULT_TEST_WORKLOAD";
/// The faults, `;`-separated [`Fault::spec`]s.
pub(super) const FAULTS_ENV: &str = "GMPROF_FAULT_TEST_FAULTS";
/// `1`: run the program without gmprof (the transcript every run must repeat).
pub(super) const WITHOUT_GMPROF_ENV: &str = "GMPROF_FAULT_TEST_WITHOUT_GMPROF";
/// Where the child writes `transcript.txt`, `calls.txt` and `fired.txt`.
pub(super) const LOG_ENV: &str = "GMPROF_FAULT_TEST_LOG";

/// What the made-up program does, and how gmprof is asked to profile it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Workload {
    /// Trace mode; the program destroys its context at the end.
    Trace,
    /// Trace mode; the program exits with its context alive (gmprof's exit handler ends it).
    TraceToExit,
    /// per_range: CUPTI user ranges for the NVTX ranges.
    PerRange,
    /// per_kernel: a CUPTI user range around each launch.
    PerKernel,
    /// kernel_replay with two kernels per counter cycle (decodes while the program runs).
    KernelReplay,
    /// Trace mode with PM sampling.
    PmSampling,
    /// Trace mode with PC sampling.
    PcSampling,
    /// Trace mode with the exec_count probe counted through CUPTI's SASS metrics.
    SassMetrics,
    /// Trace mode with `--sync-on-pop`; the program captures a stream around a range and
    /// reads a device timer buffer during the capture ([`captured_program`]).
    CaptureSyncOnPop,
    /// Trace mode; the program exits while its stream captures.
    CaptureAtExit,
}

impl Workload {
    pub(super) const ALL: [Workload; 8] = [
        Workload::Trace,
        Workload::TraceToExit,
        Workload::PerRange,
        Workload::PerKernel,
        Workload::KernelReplay,
        Workload::PmSampling,
        Workload::PcSampling,
        Workload::SassMetrics,
    ];

    /// The workloads of programs that capture a stream (`stream_captures`): not swept.
    pub(super) const CAPTURES: [Workload; 2] = [Workload::CaptureSyncOnPop, Workload::CaptureAtExit];

    pub(super) fn name(self) -> &'static str {
        match self {
            Workload::Trace => "trace",
            Workload::TraceToExit => "trace-to-exit",
            Workload::PerRange => "per_range",
            Workload::PerKernel => "per_kernel",
            Workload::KernelReplay => "kernel_replay",
            Workload::PmSampling => "pm-sampling",
            Workload::PcSampling => "pc-sampling",
            Workload::SassMetrics => "sass-metrics",
            Workload::CaptureSyncOnPop => "capture-sync-on-pop",
            Workload::CaptureAtExit => "capture-at-exit",
        }
    }

    /// Its place in [`Workload::ALL`].
    pub(super) fn index(self) -> usize {
        Workload::ALL.iter().position(|w| *w == self).unwrap_or(0)
    }

    fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().chain(Workload::CAPTURES).find(|w| w.name() == name)
    }

    /// The mode `gmprof run --mode` names.
    pub(super) fn mode(self) -> &'static str {
        match self {
            Workload::PerRange => "per_range",
            Workload::PerKernel => "per_kernel",
            Workload::KernelReplay => "kernel_replay",
            _ => "trace",
        }
    }

    /// Whether the program ends by destroying its context (else by exiting with it).
    fn destroys_context(self) -> bool {
        !matches!(self, Workload::TraceToExit | Workload::CaptureAtExit)
    }
}

/// The kernels of the made-up program's module (mangled, as CUPTI names them).
pub(super) const GEMM: &str = "_Z4gemmPKfPfi";
/// See [`GEMM`].
pub(super) const REDUCE: &str = "_Z6reducePfi";
/// Kernel launches the program makes.
pub(super) const LAUNCHES: usize = 5;

/// How both made-up programs begin: CUDA and a context, the module, a `step` range and its
/// first launch.
fn first_launch() -> Program {
    let mut p = Program::new();
    p.init();
    p.create_context();
    p.load_module(&[GEMM, REDUCE]);
    p.push("step");
    p.launch(GEMM, 4, 1);
    p
}

/// The made-up program: two `step` ranges around five launches and a memcpy, a nested
/// `inner` range in the first.
fn program(workload: Workload) -> Program {
    let mut p = first_launch();
    p.memcpy(4096);
    p.push("inner");
    p.launch(REDUCE, 8, 2);
    p.pop();
    p.launch(GEMM, 2, 3);
    p.pop();
    p.push("step");
    p.launch(GEMM, 4, 4);
    p.launch(REDUCE, 8, 5);
    p.pop();
    p.synchronize();
    if workload.destroys_context() {
        p.destroy_context();
    }
    p
}

/// The stream the capture workloads capture.
pub(super) const CAPTURED_STREAM: usize = 0x5eed;

/// The made-up program of the capture workloads: a `step` range around a launch, a stream
/// capture holding a `captured` range, a launch and the `step` range's pop after the
/// capture ended. Under gmprof (`injected`), a device timer buffer is read during the
/// capture, and what gmprof's API returned goes into the transcript. [`Workload::CaptureAtExit`]
/// exits during the capture instead.
fn captured_program(workload: Workload, injected: bool) -> Program {
    let mut p = first_launch();
    p.begin_capture(CAPTURED_STREAM);
    if workload == Workload::CaptureAtExit {
        return p;
    }
    p.push("captured");
    p.pop();
    if injected {
        // SAFETY: refused before any driver call while the stream captures (what the test
        // checks); the scripted driver has no copy that could read the address.
        let read = unsafe { crate::ways_in::device_timers::read_device_buffer(0x7000_0000, 64) };
        p.note(format!("device timers during the capture: {:?}", read.map_err(|e| e.to_string())));
    }
    p.end_capture(CAPTURED_STREAM);
    p.launch(REDUCE, 8, 2);
    p.pop();
    p.synchronize();
    p.destroy_context();
    p
}

static LOG: OnceLock<PathBuf> = OnceLock::new();

/// Writes every scripted call and the faults that fired, at the process's exit: after
/// gmprof's own exit handler (registered later, so run earlier) has finished.
extern "C" fn write_calls() {
    let _ = std::panic::catch_unwind(|| {
        let Some(dir) = LOG.get() else { return };
        let calls: Vec<String> = scripted::calls().iter().map(|(f, n)| format!("{f} {n}")).collect();
        let fired: Vec<String> = scripted::fired().iter().map(Fault::spec).collect();
        let _ = std::fs::write(dir.join("calls.txt"), calls.join("\n"));
        let _ = std::fs::write(dir.join("fired.txt"), fired.join("\n"));
    });
}

extern "C" {
    fn atexit(callback: extern "C" fn()) -> c_int;
}

/// The child's side; does nothing as an ordinary test.
#[test]
fn child_process_entry() {
    let Ok(name) = std::env::var(CHILD_ENV) else { return };
    let workload = Workload::from_name(&name).expect("a known workload");
    let faults: Vec<Fault> = std::env::var(FAULTS_ENV)
        .unwrap_or_default()
        .split(';')
        .filter(|s| !s.is_empty())
        .map(|s| Fault::parse(s).expect("a fault spec"))
        .collect();
    let log = PathBuf::from(std::env::var(LOG_ENV).expect("a log directory"));
    scripted::install(faults).expect("the scripted libraries install before anything loads CUPTI");
    LOG.set(log.clone()).expect("set once");
    // SAFETY: `write_calls` is a plain function that never unwinds.
    assert_eq!(unsafe { atexit(write_calls) }, 0);
    let injected = std::env::var_os(WITHOUT_GMPROF_ENV).is_none();
    if injected {
        // As the CUDA driver does at cuInit when CUDA_INJECTION64_PATH names libgmprof.so.
        let started = crate::ways_in::inject_entry::InitializeInjection();
        std::fs::write(log.join("started.txt"), started.to_string()).expect("write started.txt");
    }
    let p =
        if Workload::CAPTURES.contains(&workload) { captured_program(workload, injected) } else { program(workload) };
    std::fs::write(log.join("transcript.txt"), p.transcript().join("\n")).expect("write the transcript");
}
