//! How runs end, on the CPU: signals handled in a real child process, checkpoints never
//! overwriting the final outputs, and a partial directory that `gmprof report` reads.

use std::process::Command;
use std::time::Duration;

use gmprof::analysis::correlate::{Correlator, KernelStatus};
use gmprof::model::session::SessionTree;
use gmprof::model::{
    CounterRange, CudaError, FailedStep, FinishStep, KernelActivity, LaunchApi, LaunchRecord, MetricKind, MetricSet,
    ProfilingMode, RunEnd, GPU_TIME_METRIC,
};
use gmprof::report::{CaptureInfo, Report};
use gmprof::ways_in::outputs::Outputs;
use gmprof::ways_in::signals::{self, Request};

#[path = "common/kernels.rs"]
mod kernels;
#[path = "common/metrics.rs"]
mod metrics;

const CHILD_ENV: &str = "GMPROF_RUN_END_TEST_CHILD";

/// Runs this test binary again as a child in `scenario`; returns its status and what its
/// signal thread recorded.
fn child(scenario: &str) -> (std::process::ExitStatus, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, scenario)
        .env("GMPROF_TEST_DIR", dir.path())
        .output()
        .unwrap();
    let recorded = std::fs::read_to_string(dir.path().join("requests")).unwrap_or_default();
    let program = std::fs::read_to_string(dir.path().join("program")).unwrap_or_default();
    (out.status, recorded, program)
}

/// The child's side. Does nothing when run as an ordinary test.
#[test]
fn child_process_entry() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else { return };
    let dir = std::path::PathBuf::from(std::env::var("GMPROF_TEST_DIR").unwrap());
    static PROGRAM_FILE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PROGRAM_FILE.set(dir.join("program")).unwrap();
    extern "C" fn program_handler(signal: libc::c_int) {
        // Not async-signal-safe, but enough for a test: the program's handler ran.
        let _ = std::fs::write(PROGRAM_FILE.get().unwrap(), format!("handled {signal}"));
    }
    // SAFETY: installing plain dispositions in a test child.
    unsafe {
        match scenario.as_str() {
            "program-handler" => {
                libc::signal(libc::SIGTERM, program_handler as *const () as libc::sighandler_t);
            }
            "ignored" => {
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
            }
            _ => {}
        }
    }
    let requests = dir.join("requests");
    signals::install(Duration::from_secs(10), move |request| {
        // Stands for finishing the profiler and writing the outputs: slow on purpose, so a
        // process that did not wait for it would not have written the file.
        std::thread::sleep(Duration::from_millis(300));
        let text = match request {
            Request::Final(s) => format!("final {s}"),
            Request::Checkpoint(s) => format!("checkpoint {s}"),
        };
        std::fs::write(&requests, text).unwrap();
    })
    .unwrap();
    // SAFETY: raising signals at this process in a test child.
    unsafe {
        match scenario.as_str() {
            "default" => {
                // A training loop goes on after SIGTERM until gmprof has written and sends
                // the signal again; it must never reach its own exit below.
                libc::raise(libc::SIGTERM);
                std::thread::sleep(Duration::from_secs(5));
            }
            "program-handler" => {
                libc::raise(libc::SIGTERM);
                std::thread::sleep(Duration::from_millis(1000));
            }
            "ignored" => {
                libc::raise(libc::SIGHUP);
            }
            "abort" => libc::abort(),
            other => panic!("unknown scenario {other}"),
        }
    }
    std::process::exit(3);
}

#[test]
fn a_default_signal_writes_first_then_ends_the_process_by_that_signal() {
    use std::os::unix::process::ExitStatusExt;
    let (status, recorded, _) = child("default");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert_eq!(recorded, "final 15");
}

#[test]
fn abort_writes_first_then_aborts() {
    use std::os::unix::process::ExitStatusExt;
    let (status, recorded, _) = child("abort");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    assert_eq!(recorded, "final 6");
}

#[test]
fn the_programs_own_handler_still_runs_and_the_program_goes_on() {
    let (status, recorded, program) = child("program-handler");
    assert_eq!(status.code(), Some(3), "the program went on to its own exit: {status:?}");
    assert_eq!(program, "handled 15");
    assert_eq!(recorded, "checkpoint 15");
}

#[test]
fn an_ignored_signal_stays_ignored() {
    let (status, recorded, _) = child("ignored");
    assert_eq!(status.code(), Some(3), "{status:?}");
    assert_eq!(recorded, "", "gmprof installed nothing for an ignored signal");
}

fn report(run_end: RunEnd, kernels: u32) -> Report {
    let mut tree = SessionTree::new();
    let step = tree.push("step", 1, 0);
    tree.pop(1, 10).unwrap();
    let mut correlator = Correlator::new();
    for id in 0..kernels {
        correlator.add_launch(LaunchRecord {
            correlation_id: id,
            thread: 1,
            range: Some(step),
            cycle: 0,
            ordinal: id,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: None,
            unmeasured: false,
        });
    }
    let mut info = CaptureInfo::new(ProfilingMode::Trace);
    info.run_end = Some(run_end);
    Report::analyze(info, &MetricSet::default(), &tree, correlator)
}

#[test]
fn a_checkpoint_never_overwrites_the_final_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let outputs = Outputs::new(dir.path().to_owned());
    let partial = report(RunEnd::Checkpoint { reason: "periodic".into(), pending_kernels: 4 }, 1);
    assert!(outputs.write_checkpoint_report(&partial).unwrap());
    let done = report(RunEnd::Finished { by: "finish".into() }, 5);
    outputs.write_final(&done).unwrap();
    assert!(!outputs.write_checkpoint_report(&partial).unwrap(), "a checkpoint after the end writes nothing");
    let back = Report::read_json(dir.path().join("report.json")).unwrap();
    assert_eq!(back.meta.run_end, Some(RunEnd::Finished { by: "finish".into() }));
    assert_eq!(back.kernels.len(), 5);
    assert_eq!(outputs.checkpoints(), 1);
}

#[test]
fn gmprof_report_reads_a_partial_directory_and_says_it_is_partial() {
    let dir = tempfile::tempdir().unwrap();
    let partial = report(RunEnd::Checkpoint { reason: "periodic".into(), pending_kernels: 2 }, 3);
    partial.write_all(dir.path()).unwrap();
    // What a SIGKILL during a later checkpoint leaves: a stray temporary file beside the set.
    std::fs::write(dir.path().join(".report.json.tmp-12345"), "{ torn").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).arg("report").arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("step") && stdout.contains("3 kernels"), "{stdout}");
    assert!(stderr.contains("partial: last checkpoint (periodic)") && stderr.contains("2 kernel(s)"), "{stderr}");
}

#[test]
fn run_end_is_tagged_json() {
    let end = RunEnd::Signal { signal: 15, name: "SIGTERM".into() };
    let text = serde_json::to_string(&end).unwrap();
    assert_eq!(text, r#"{"kind":"signal","signal":15,"name":"SIGTERM"}"#);
    assert_eq!(serde_json::from_str::<RunEnd>(&text).unwrap(), end);
    assert!(end.is_complete());
    assert!(!RunEnd::Checkpoint { reason: "periodic".into(), pending_kernels: 0 }.is_complete());
}

#[test]
fn checkpoints_back_off_when_they_grow_expensive() {
    use gmprof::ways_in::outputs::next_wait;
    let every = Duration::from_secs(30);
    assert_eq!(next_wait(every, Duration::from_millis(200)), every);
    // A 1 000 000-kernel checkpoint took 6.7 s here (examples/checkpoint_memory.rs).
    assert_eq!(next_wait(every, Duration::from_millis(6700)), Duration::from_secs(67));
}

#[test]
fn streamed_drains_keep_their_cadence_however_long_they_take() {
    use gmprof::ways_in::outputs::{next_drain_wait, MIN_DRAIN_WAIT};
    let every = Duration::from_secs(2);
    assert_eq!(next_drain_wait(every, Duration::from_millis(300)), Duration::from_millis(1700));
    // A drain longer than the interval is followed by the next at once: waiting longer would
    // leave more for it.
    assert_eq!(next_drain_wait(every, Duration::from_millis(2500)), MIN_DRAIN_WAIT);
    assert_eq!(next_drain_wait(every, Duration::from_secs(60)), MIN_DRAIN_WAIT);
}

#[test]
fn end_settings_are_read_one_way_for_injection_and_the_c_abi() {
    use gmprof::ways_in::outputs::EndSettings;
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string())
    };
    let defaults = EndSettings::from_lookup(env(&[])).unwrap();
    assert_eq!(defaults.checkpoint_every, Some(Duration::from_secs(30)));
    assert!(defaults.handle_signals);
    assert_eq!(defaults.signal_timeout, Duration::from_secs(120));
    let off = EndSettings::from_lookup(env(&[("GMPROF_SIGNALS", "false"), ("GMPROF_CHECKPOINT_SECS", "0")])).unwrap();
    assert!(!off.handle_signals && off.checkpoint_every.is_none());
    let bad = EndSettings::from_lookup(env(&[("GMPROF_SIGNAL_TIMEOUT_SECS", "soon")])).unwrap_err().to_string();
    assert!(bad.contains("GMPROF_SIGNAL_TIMEOUT_SECS=soon"), "{bad}");
    // The injected library reads the same values.
    let config = gmprof::injection::InjectionConfig::from_lookup(env(&[("GMPROF_SIGNALS", "false")])).unwrap();
    assert!(!config.handle_signals);
}

/// Kernel replay, two counter cycles of two launches each; the program's illegal
/// instruction failed the context in cycle 1, whose image could then not be decoded.
#[test]
fn counters_decoded_before_the_context_failed_keep_their_values_and_the_undecoded_cycle_is_dropped_and_blank() {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let launch = |tree: &SessionTree, id: u32, cycle: u32, ordinal: u32| LaunchRecord {
        cycle,
        ..kernels::launch_record(tree, 1, id, ordinal)
    };
    // Kernel replay collapses activity timestamps (start == end).
    let activity = |id: u32, name: &str, at: u64| KernelActivity {
        grid: [528, 1, 1],
        block: [256, 1, 1],
        ..kernels::kernel_activity(id, name, at, at)
    };
    tree.push("step 0", 1, 0);
    correlator.add_launch(launch(&tree, 1, 0, 0));
    correlator.add_launch(launch(&tree, 2, 0, 1));
    tree.pop(1, 100).unwrap();
    tree.push("step 1", 1, 200);
    correlator.add_launch(launch(&tree, 3, 1, 0));
    correlator.add_launch(launch(&tree, 4, 1, 1));
    correlator.add_activity(activity(1, "_Z13layernorm_fwdPfPKfi", 10));
    correlator.add_activity(activity(2, "_Z11gemm_kernelPKfS0_Pf", 40));
    correlator.add_activity(activity(3, "_Z13layernorm_fwdPfPKfi", 210));
    // Cycle 0 was decoded while the program ran; cycle 1 never was.
    let range = |index: u32, time: f64, bytes: f64| CounterRange {
        cycle: 0,
        index,
        name: index.to_string(),
        values: vec![time, bytes],
    };
    correlator.add_counter_ranges(0, vec![range(0, 12_000.0, 4_194_304.0), range(1, 8_000.0, 1_048_576.0)]);
    let cuda = CudaError {
        code: 715,
        name: "CUDA_ERROR_ILLEGAL_INSTRUCTION".into(),
        message: "an illegal instruction was encountered".into(),
    };
    correlator.context_failed(cuda.describe(), vec![(4, "_Z18attention_fwd_bf16PKvS0_Pvi".into())]);
    let metrics = MetricSet {
        metrics: vec![
            metrics::spec(GPU_TIME_METRIC, MetricKind::Counter, "nsecond"),
            metrics::spec("dram__bytes_read.sum", MetricKind::Counter, "byte"),
        ],
    };
    let mut info = CaptureInfo::new(ProfilingMode::KernelReplay);
    info.dropped_counter_ranges = 2;
    info.run_end = Some(RunEnd::Finished { by: "process exit".into() }.with_failures(
        Some(cuda),
        vec![FailedStep {
            step: FinishStep::CounterDecode,
            error: "cuptiRangeProfilerDecodeData failed with CUPTI_ERROR_UNKNOWN (999): An unknown internal error \
                    has occurred. (while decoding the counter data image)"
                .into(),
        }],
    ));
    let report = Report::analyze(info, &metrics, &tree, correlator);

    let rows: Vec<(u32, KernelStatus, Option<u64>, Option<f64>)> =
        report.kernels.iter().map(|k| (k.correlation_id, k.status, k.duration_ns, k.metrics[1])).collect();
    assert_eq!(
        rows,
        [
            (1, KernelStatus::Ok, Some(12_000), Some(4_194_304.0)),
            (2, KernelStatus::Ok, Some(8_000), Some(1_048_576.0)),
            // Completed (its record came) but its counters were in the undecoded image.
            (3, KernelStatus::MissingCounters, None, None),
            // Neither a record nor counters: in flight when the context failed.
            (4, KernelStatus::NotCompleted, None, None),
        ]
    );
    assert_eq!(
        report.kernels[3].kernel_name.as_deref(),
        Some("attention_fwd_bf16(void const*, void const*, void*, int)")
    );
    let step = |path: &str| report.ranges.iter().find(|r| r.path == path).unwrap();
    assert_eq!(step("step 0").gpu_time_ns, Some(20_000));
    assert_eq!(step("step 1").gpu_time_ns, None, "no kernel of step 1 has a measured time");
    assert_eq!(report.meta.dropped_counter_ranges, 2);

    let dir = tempfile::tempdir().unwrap();
    Outputs::new(dir.path().to_owned()).write_final(&report).unwrap();
    let back = Report::read_json(dir.path().join("report.json")).unwrap();
    assert_eq!(back.meta.run_end, report.meta.run_end);
    let summary = back.summary().to_string();
    assert!(summary.contains("dropped counter ranges: 2 |"), "{summary}");
    assert!(
        summary.contains(
            "run ended with errors: finished (process exit), after CUDA_ERROR_ILLEGAL_INSTRUCTION (715): an illegal \
             instruction was encountered; failed while finishing: counter decode"
        ),
        "{summary}"
    );
    assert!(summary.contains("1 launch(es) never completed"), "{summary}");
}
