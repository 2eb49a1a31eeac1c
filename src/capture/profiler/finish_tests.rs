//! Finishing a session whose CUDA context failed, on the CPU: the GPU-less harness runs the
//! launch callbacks as CUPTI makes them and the finish through scripted calls that fail as
//! a context failed by the program's own illegal instruction does (CUDA 13.0 on an H100:
//! `cuCtxSynchronize` returned 715 after nanoGPT's CUDA-graph step hit one).

use super::harness::{Faults, LaunchHarness};
use crate::analysis::correlate::{Granularity, KernelStatus};
use crate::checked::activity::ActivityRecord;
use crate::error::Error;
use crate::model::illegal_instruction;
use crate::model::{CudaError, FailedStep, FinishStep, ProfilingMode, RunEnd};
use crate::report::Report;

const SYNC_ERROR: &str = "cuCtxSynchronize failed with CUDA_ERROR_ILLEGAL_INSTRUCTION (715): an illegal instruction \
                          was encountered (while synchronizing the CUDA context)";

fn flush_failed() -> Error {
    Error::Cupti {
        api: "cuptiActivityFlushAll",
        code: 999,
        code_name: "CUPTI_ERROR_UNKNOWN".into(),
        description: "An unknown internal error has occurred.".into(),
        context: "flushing activity buffers".into(),
        hint: None,
    }
}

fn process_exit() -> RunEnd {
    RunEnd::Finished { by: "process exit".into() }
}

/// The activity record of a kernel that completed.
fn completed(harness: &LaunchHarness, correlation_id: u32, name: &str, start_ns: u64) -> ActivityRecord {
    harness.kernel_record(correlation_id, name, start_ns, start_ns + 12_000)
}

/// Step 0 runs two kernels to completion; step 1 launches a layer norm (completed, its
/// record still in CUPTI's buffer: the finish's flush brings it) and then the kernel that
/// hits the illegal instruction and one queued behind it; the program dies inside step 1,
/// which stays open. Returns the harness and the three ids of step 1.
fn training_run(mode: ProfilingMode) -> (LaunchHarness, [u32; 3]) {
    let mut h = LaunchHarness::new(mode).unwrap();
    h.push_range("step 0").unwrap();
    let a = h.launch_kernel(true, c"triton_poi_fused_add_0");
    let b = h.launch_kernel(true, c"triton_red_fused_sum_1");
    h.pop_range().unwrap();
    h.push_range("step 1").unwrap();
    let c = h.launch_kernel(true, c"_Z13layernorm_fwdPfPKfi");
    let faulted = h.launch_kernel(true, c"_Z18attention_fwd_bf16PKvS0_Pvi");
    let queued = h.launch_kernel(false, c"_Z13adamw_step_v2PfS_S_fi");
    h.deliver(vec![
        completed(&h, a, "triton_poi_fused_add_0", 1_000),
        completed(&h, b, "triton_red_fused_sum_1", 20_000),
    ]);
    (h, [c, faulted, queued])
}

/// The layer norm's record, which CUPTI still holds when finishing begins.
fn layernorm_record(h: &LaunchHarness, id: u32) -> ActivityRecord {
    completed(h, id, "_Z13layernorm_fwdPfPKfi", 40_000)
}

fn written(report: &Report) -> (tempfile::TempDir, Report) {
    let dir = tempfile::tempdir().unwrap();
    report.write_all(dir.path()).unwrap();
    let back = Report::read_json(dir.path().join("report.json")).unwrap();
    (dir, back)
}

#[test]
fn a_sticky_error_at_synchronize_writes_every_output_with_the_error_and_the_kernels_in_flight() {
    let (h, [layernorm, faulted, queued]) = training_run(ProfilingMode::Trace);
    let faults = Faults {
        synchronize: Some(illegal_instruction()),
        flushed_records: vec![layernorm_record(&h, layernorm)],
        ..Default::default()
    };
    let report = h.finish(process_exit(), faults).expect("finishing never fails on a failed context");

    let cuda = CudaError {
        code: 715,
        name: "CUDA_ERROR_ILLEGAL_INSTRUCTION".into(),
        message: "an illegal instruction was encountered".into(),
    };
    let expected_end = RunEnd::FinishedWithErrors {
        ended: Box::new(process_exit()),
        cuda_error: Some(cuda),
        failed_steps: vec![FailedStep { step: FinishStep::Synchronize, error: SYNC_ERROR.into() }],
    };
    assert_eq!(report.meta.run_end.as_ref(), Some(&expected_end));

    // Every launch is a row: the three that completed with their times, the two in flight
    // named by the launch callback, with no times.
    let statuses: Vec<(u32, KernelStatus)> = report.kernels.iter().map(|k| (k.correlation_id, k.status)).collect();
    assert_eq!(statuses.len(), 5, "{statuses:?}");
    assert!(statuses[..3].iter().all(|(_, s)| *s == KernelStatus::Ok), "{statuses:?}");
    assert_eq!(statuses[2].0, layernorm);
    assert_eq!(&statuses[3..], [(faulted, KernelStatus::NotCompleted), (queued, KernelStatus::NotCompleted)]);
    let in_flight = &report.kernels[3];
    assert_eq!(in_flight.kernel_name.as_deref(), Some("attention_fwd_bf16(void const*, void const*, void*, int)"));
    assert_eq!(in_flight.mangled_name.as_deref(), Some("_Z18attention_fwd_bf16PKvS0_Pvi"));
    assert_eq!(in_flight.range_path, "step 1");
    assert_eq!((in_flight.start_ns, in_flight.end_ns, in_flight.duration_ns), (None, None, None));
    assert_eq!(report.kernels[4].kernel_name.as_deref(), Some("adamw_step_v2(float*, float*, float*, float, int)"));
    assert_eq!(report.kernels[2].duration_ns, Some(12_000));
    assert_eq!(report.meta.counts.not_completed, 2);
    assert_eq!(report.meta.counts.missing_activity, 0);
    assert_eq!(report.meta.flagged_kernel_rows, 2);

    let warnings = report.meta.warnings.join("\n");
    assert!(warnings.contains(&format!("finishing: synchronize failed: {SYNC_ERROR}")), "{warnings}");
    assert!(
        warnings.contains(&format!(
            "2 launch(es) never completed: the CUDA context failed (CUDA_ERROR_ILLEGAL_INSTRUCTION (715): an illegal \
             instruction was encountered) before an activity record or counters came for them; their rows have \
             status not_completed and no times or metrics; the first was attention_fwd_bf16(void const*, void \
             const*, void*, int) (correlation id {faulted}, in step 1); the last: adamw_step_v2(float*, float*, \
             float*, float, int) (correlation id {queued}, in step 1)"
        )),
        "{warnings}"
    );

    // Every output is written, and report.json says how the run ended.
    let (dir, back) = written(&report);
    for file in crate::report::OUTPUT_FILES {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
    assert_eq!(back.meta.run_end, Some(expected_end));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(json["meta"]["run_end"]["kind"], "finished_with_errors");
    assert_eq!(json["meta"]["run_end"]["cuda_error"]["code"], 715);
    assert_eq!(json["meta"]["run_end"]["cuda_error"]["message"], "an illegal instruction was encountered");
    assert_eq!(json["meta"]["run_end"]["failed_steps"][0]["step"], "synchronize");
    assert_eq!(json["meta"]["counts"]["not_completed"], 2);
    // kernels.csv: the in-flight rows have their status and blank times.
    let csv = std::fs::read_to_string(dir.path().join("kernels.csv")).unwrap();
    let in_flight_line = csv.lines().find(|l| l.contains("attention_fwd_bf16")).expect("the faulted kernel's row");
    assert!(in_flight_line.contains("not_completed"), "{in_flight_line}");
    assert!(!in_flight_line.contains(",0,"), "a time not measured is blank, never 0: {in_flight_line}");

    // The summary's line, which an injected run also prints once on stderr.
    let summary = back.summary().to_string();
    let line = format!(
        "run ended with errors: finished (process exit), after CUDA_ERROR_ILLEGAL_INSTRUCTION (715): an illegal \
         instruction was encountered; failed while finishing: synchronize; the outputs hold what was collected | 2 \
         launch(es) never completed (kernels.csv status not_completed); the last: attention_fwd_bf16(void const*, \
         void const*, void*, int) (correlation id {faulted}), adamw_step_v2(float*, float*, float*, float, int) \
         (correlation id {queued})"
    );
    assert!(summary.lines().any(|l| l == line), "{summary}");
    assert_eq!(crate::report::summary::ending_line(&back).as_deref(), Some(line.as_str()));
}

#[test]
fn after_a_failed_synchronize_the_clock_and_the_flush_are_still_tried_and_what_arrived_is_kept() {
    let (h, [layernorm, faulted, queued]) = training_run(ProfilingMode::Trace);
    // The flush hands over the records CUPTI still held, then fails; the CUPTI clock cannot
    // be read either.
    let faults = Faults {
        synchronize: Some(illegal_instruction()),
        timestamp: Some(flush_failed()),
        activity_flush: Some(flush_failed()),
        flushed_records: vec![layernorm_record(&h, layernorm)],
    };
    let report = h.finish(process_exit(), faults).unwrap();
    let Some(RunEnd::FinishedWithErrors { cuda_error, failed_steps, .. }) = &report.meta.run_end else {
        panic!("{:?}", report.meta.run_end)
    };
    assert_eq!(cuda_error.as_ref().map(|e| e.code), Some(715));
    let steps: Vec<FinishStep> = failed_steps.iter().map(|s| s.step).collect();
    assert_eq!(steps, [FinishStep::Synchronize, FinishStep::Timestamp, FinishStep::ActivityFlush]);
    assert!(failed_steps[2].error.starts_with("cuptiActivityFlushAll failed with CUPTI_ERROR_UNKNOWN (999)"));
    // The record the flush delivered before failing is in the report; the two launches
    // without one never completed.
    let row = report.kernels.iter().find(|k| k.correlation_id == layernorm).unwrap();
    assert_eq!((row.status, row.duration_ns), (KernelStatus::Ok, Some(12_000)));
    assert_eq!(report.meta.counts.not_completed, 2);
    let ids: Vec<u32> =
        report.kernels.iter().filter(|k| k.status == KernelStatus::NotCompleted).map(|k| k.correlation_id).collect();
    assert_eq!(ids, [faulted, queued]);
    let warnings = report.meta.warnings.join("\n");
    assert!(warnings.contains("the activity flush failed too, so some of them may have completed"), "{warnings}");
    assert!(warnings.contains("the session's end time is the wall clock's"), "{warnings}");
    // The step left open when the program died is closed, with a warning.
    assert!(report.ranges.iter().any(|r| r.path == "step 1"), "{:?}", report.ranges);
    let (dir, back) = written(&report);
    assert!(dir.path().join("trace.json").is_file());
    assert_eq!(back.meta.run_end, report.meta.run_end);
    let summary = back.summary().to_string();
    assert!(summary.contains("failed while finishing: synchronize, timestamp, activity flush"), "{summary}");
}

#[test]
fn a_failed_flush_alone_is_recorded_and_launches_without_a_record_keep_missing_activity() {
    let (h, [layernorm, faulted, queued]) = training_run(ProfilingMode::Trace);
    let faults = Faults { activity_flush: Some(flush_failed()), ..Default::default() };
    let report = h.finish(process_exit(), faults).unwrap();
    let Some(end @ RunEnd::FinishedWithErrors { cuda_error: None, failed_steps, .. }) = &report.meta.run_end else {
        panic!("{:?}", report.meta.run_end)
    };
    assert_eq!(failed_steps[0].step, FinishStep::ActivityFlush);
    assert!(end.describe().starts_with("finished (process exit), with errors; failed while finishing: activity flush"));
    // The context did not fail: the records were lost in the flush, not the kernels.
    let missing: Vec<u32> =
        report.kernels.iter().filter(|k| k.status == KernelStatus::MissingActivity).map(|k| k.correlation_id).collect();
    assert_eq!(missing, [layernorm, faulted, queued]);
    assert_eq!(report.meta.counts.not_completed, 0);
    let (_dir, back) = written(&report);
    assert_eq!(back.meta.run_end, report.meta.run_end);
}

#[test]
fn a_cuda_graph_in_flight_in_kernel_replay_is_a_not_completed_graph_row() {
    // nanoGPT under torch.compile's reduce-overhead mode: the step is one graph launch.
    let mut h = LaunchHarness::new(ProfilingMode::KernelReplay).unwrap();
    h.push_range("step 0").unwrap();
    let warmup = h.launch_kernel(true, c"triton_poi_fused_embedding_0");
    let graph = h.launch_graph();
    h.deliver(vec![completed(&h, warmup, "triton_poi_fused_embedding_0", 5_000)]);
    let faults = Faults { synchronize: Some(illegal_instruction()), ..Default::default() };
    let report = h.finish(process_exit(), faults).unwrap();
    assert_eq!(report.kernels.len(), 2, "{:?}", report.kernels);
    // In kernel replay the kernel time comes from counters; without them (none stand in
    // here) it is blank, never 0, and the completed kernel says its counters are missing.
    assert_eq!(report.kernels[0].status, KernelStatus::MissingCounters);
    assert_eq!(report.kernels[0].duration_ns, None);
    let row = &report.kernels[1];
    assert_eq!(
        (row.correlation_id, row.status, row.granularity),
        (graph, KernelStatus::NotCompleted, Granularity::Graph)
    );
    assert_eq!((row.kernel_name.as_deref(), row.duration_ns), (None, None));
    let warnings = report.meta.warnings.join("\n");
    assert!(
        warnings.contains(&format!("it was a CUDA graph (cudaGraphLaunch) (correlation id {graph}, in step 0)")),
        "{warnings}"
    );
    let line = crate::report::summary::ending_line(&report).unwrap();
    assert!(line.ends_with(&format!("the last: a CUDA graph (correlation id {graph})")), "{line}");
}

#[test]
fn an_undecoded_last_cycle_is_counted_dropped_and_said() {
    use super::finish::undecoded_cycle_warning;
    assert_eq!(
        undecoded_cycle_warning(41, 1717, "launch(es)", FinishStep::CounterDecode),
        "counter cycle 41 could not be decoded: the counters of its 1717 launch(es) are dropped (counted in the \
         dropped counter ranges) and left blank; the cycles before it keep theirs"
    );
    assert!(undecoded_cycle_warning(0, 3, "range(s)", FinishStep::RangeProfilerStop)
        .starts_with("counter cycle 0 could not be stopped, so it was not decoded: the counters of its 3 range(s)"));
}

/// An on-demand capture ends at a step boundary on the program's thread (the seal) and is
/// finished on a thread of its own: launches between the two belong to the next step, not to
/// the capture, and are neither rows nor warnings.
#[test]
fn launches_after_the_seal_are_left_out_without_a_warning() {
    let mut h = LaunchHarness::trace().unwrap();
    h.push_range("step").unwrap();
    let inside = h.launch_kernel(true, c"_Z6insidev");
    h.pop_range().unwrap();
    h.seal();
    let after = h.launch_kernel(true, c"_Z5afterv");
    let driver_after = h.launch_kernel(false, c"_Z6after2v");
    h.deliver(vec![
        completed(&h, inside + 1, "_Z6insidev", 1_000),
        completed(&h, after + 1, "_Z5afterv", 20_000),
        completed(&h, driver_after, "_Z6after2v", 40_000),
    ]);
    let report = h.finish(RunEnd::Finished { by: "capture end: 1 step(s)".into() }, Faults::default()).unwrap();
    let kernels: Vec<(u32, Option<&str>)> =
        report.kernels.iter().map(|k| (k.correlation_id, k.mangled_name.as_deref())).collect();
    assert_eq!(kernels, [(inside, Some("_Z6insidev"))]);
    assert_eq!(report.meta.flagged_kernel_rows, 0);
    assert!(report.meta.warnings.is_empty(), "{:?}", report.meta.warnings);
    assert_eq!(report.ranges.iter().filter(|r| r.name == "step").count(), 1);
}

/// An on-demand capture starts in a running program. The record of a kernel the program ran
/// in the idle time before it can still be in CUPTI's buffer and arrive with the capture's
/// first flush (seen on an H100: one nll_loss kernel, 4 s before a per_kernel capture of
/// nanoGPT, under `<root>` as `unlaunched_activity`). It is not the capture's: left out
/// without a warning. A record that ended after the start and whose launch nobody heard is
/// still flagged.
#[test]
fn records_of_work_that_ended_before_the_start_are_left_out() {
    let start = 5_000_000_000;
    let mut h = LaunchHarness::started_at(ProfilingMode::Trace, start).unwrap();
    h.set_next_correlation(101_870);
    h.push_range("step").unwrap();
    let inside = h.launch_kernel(false, c"_Z6insidev");
    h.pop_range().unwrap();
    h.deliver(vec![
        completed(&h, 71_391, "_Z8nll_lossv", start - 4_300_000_000),
        completed(&h, inside, "_Z6insidev", start + 1_000),
        completed(&h, 200_000, "_Z7unheardv", start + 50_000),
    ]);
    let report = h.finish(RunEnd::Finished { by: "capture end: 1 step(s)".into() }, Faults::default()).unwrap();
    let kernels: Vec<(u32, Option<&str>, &str)> =
        report.kernels.iter().map(|k| (k.correlation_id, k.mangled_name.as_deref(), k.status.as_str())).collect();
    assert_eq!(kernels, [(inside, Some("_Z6insidev"), "ok"), (200_000, Some("_Z7unheardv"), "unlaunched_activity")]);
    assert_eq!(report.meta.flagged_kernel_rows, 1);
}
