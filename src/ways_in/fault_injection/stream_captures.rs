//! Programs that capture a CUDA stream (issue 43, "the program under gmprof never breaks"):
//! while the capture is in progress, the waits gmprof would make in the program's process
//! are left out, counted and said, and the capture ends as it does without gmprof.
//!
//! The scripted driver plays CUDA's global capture mode: a `cuCtxSynchronize` during the
//! capture fails and invalidates it, so the program's `cuStreamEndCapture` returns
//! `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` in its transcript. Each test also counts gmprof's
//! scripted calls, and each fails with its guard switched off.
//!
//! Imports `child` (the capture workloads), `run`.

use super::child::{Workload, CAPTURED_STREAM};
use super::run::{outputs_read_back, run, Run};

/// The calls gmprof made of `function`.
fn calls_of(run: &Run, function: &str) -> u32 {
    run.calls.iter().find(|(f, _)| f == function).map_or(0, |(_, n)| *n)
}

/// The program's transcript without the lines of gmprof's own API's results.
fn program_lines(run: &Run) -> Vec<&str> {
    run.transcript.iter().map(String::as_str).filter(|l| !l.starts_with("device timers")).collect()
}

#[test]
fn a_pop_inside_a_stream_capture_is_not_synchronized_and_one_outside_is() {
    let r = run(Workload::CaptureSyncOnPop, &[], false);
    let without = run(Workload::CaptureSyncOnPop, &[], true);
    assert!(r.exit.success(), "the program ended with {:?}\n{}", r.exit, r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let ended = format!("cuStreamEndCapture(stream {CAPTURED_STREAM:#x}) = CUDA_SUCCESS");
    assert!(without.transcript.contains(&ended), "{:?}", without.transcript);
    assert_eq!(program_lines(&r), program_lines(&without), "the capture ends as it does without gmprof");
    // The `step` range's pop (after the capture) and the finish synchronize; the `captured`
    // range's pop and the device timer read during the capture do not.
    assert_eq!(calls_of(&r, "cuCtxSynchronize"), 2, "{:?}", r.calls);
    let timers = r.transcript.iter().find(|l| l.starts_with("device timers")).expect("the timers' line");
    assert!(
        timers.contains(
            "Err(\"device timers: reading a buffer while a CUDA stream captures would invalidate the \
                         program's capture"
        ),
        "{timers}"
    );
    let dir = r.process_dir().expect("the process's directory");
    let report = outputs_read_back(dir);
    let said: Vec<&String> = report.meta.warnings.iter().filter(|w| w.contains("stream capture")).collect();
    assert_eq!(
        said,
        ["--sync-on-pop: 1 pop(s) inside a CUDA stream capture were not synchronized (a synchronize there \
          invalidates the program's capture, and the captured work had not run)"]
    );
    let paths: Vec<&str> = report.ranges.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["step", "step/captured"]);
}

#[test]
fn a_session_finishing_inside_a_stream_capture_does_not_synchronize() {
    // The program exits while its stream captures: gmprof's exit handler finishes the
    // session, and the synchronize before its last flush would invalidate the capture.
    let r = run(Workload::CaptureAtExit, &[], false);
    let without = run(Workload::CaptureAtExit, &[], true);
    assert!(r.exit.success(), "the program ended with {:?}\n{}", r.exit, r.stderr);
    assert_eq!(r.transcript, without.transcript);
    assert_eq!(calls_of(&r, "cuCtxSynchronize"), 0, "{:?}", r.calls);
    let dir = r.process_dir().expect("the process's directory");
    let report = outputs_read_back(dir);
    assert!(
        report.meta.warnings.iter().any(|w| w.starts_with(
            "the session finished inside a CUDA stream capture: the context was not synchronized before the last \
             activity flush"
        )),
        "{:?}",
        report.meta.warnings
    );
    assert_eq!(report.kernels.len(), 1, "the launch before the capture is a row");
}
