//! The call points, one test each (README, "A fault at every CUPTI and driver call"): the
//! point's call fails (once, or again when gmprof tries it again), and the test checks that
//! the program's calls returned what they return without gmprof, that every output was
//! written and reads back, that the failure is said on the first screen and in
//! report.json, and what the failure cost: nothing, a part of the data that the test names,
//! or the whole profile (gmprof does not start, and says why).
//!
//! Imports `child` (the workloads), `run`, `checks` and `reference` (the runs without a
//! fault).

use super::checks::{digest, program_unharmed_and_outputs_read_back, said_in_report, said_on_first_screen};
use super::child::{Workload, GEMM, LAUNCHES};
use super::reference::{clean, without_gmprof};
use super::run::run;
use crate::analysis::correlate::KernelStatus;
use crate::checked::scripted::Fault;
use crate::report::Report;

/// Which call of the function fails.
#[derive(Clone, Copy, Debug)]
enum Nth {
    /// The nth.
    Call(u32),
    /// The last one the run without a fault made.
    Last,
}

/// What the failure costs.
#[derive(Clone, Copy)]
enum Cost {
    /// Nothing: the outputs measure what the run without the fault measured ([`digest`]).
    Nothing,
    /// The profile: gmprof does not start on the program, which runs unprofiled;
    /// injection.json and the first screen say why.
    Profile,
    /// A part of the data, which the check names (given the report, and the report of the run
    /// without the fault).
    Part(fn(&Report, &Report)),
}

/// One call point.
struct Point {
    /// As README's table names it.
    name: &'static str,
    workload: Workload,
    function: &'static str,
    nth: Nth,
    /// Consecutive calls that fail: 2 fails the call gmprof tries again too.
    fails: u32,
    cost: Cost,
}

fn check(point: &Point) {
    let reference = clean(point.workload);
    let nth = match point.nth {
        Nth::Call(n) => n,
        Nth::Last => reference.calls_of(point.function),
    };
    assert!(
        reference.calls_of(point.function) >= nth,
        "{}: a run of {} makes {} call(s) of {}, not {nth}",
        point.name,
        point.workload.name(),
        reference.calls_of(point.function),
        point.function
    );
    let faults: Vec<Fault> = (0..point.fails).map(|i| Fault::new(point.function, nth + i)).collect();
    let label =
        format!("{} ({} call {nth}, failing {}×, {})", point.name, point.function, point.fails, point.workload.name());
    let r = run(point.workload, &faults, false);
    program_unharmed_and_outputs_read_back(&label, &r, without_gmprof(point.workload), &faults);
    assert!(
        said_on_first_screen(&r, point.function),
        "{label}: the failure is not said on the first screen:\n{}",
        r.first_screen().join("\n")
    );
    let report = r.report();
    match (point.cost, report) {
        (Cost::Profile, None) => {
            // A context whose profiler could not start: its launches are counted, not lost.
            let status = r.status().expect("injection.json");
            if status.contexts_created > 0 {
                let heard: u64 = status.unprofiled_contexts.iter().map(|c| c.launches).sum();
                assert_eq!(heard, LAUNCHES as u64, "{label}: {:?}", status.unprofiled_contexts);
            }
        }
        (Cost::Profile, Some(_)) => panic!("{label}: gmprof profiled the program"),
        (_, None) => panic!("{label}: no report:\n{}", r.stderr),
        (cost, Some(report)) => {
            assert!(
                said_in_report(&report, point.function),
                "{label}: not in report.json: {:#?}",
                report.meta.warnings
            );
            let clean_report = reference.report.as_ref().expect("the run without a fault wrote a report");
            match cost {
                Cost::Part(lost) => lost(&report, clean_report),
                _ => assert_eq!(digest(&report), digest(clean_report), "{label}: the outputs lost data"),
            }
        }
    }
}

/// The rows of `r` whose status is `status`.
fn rows_with(r: &Report, status: KernelStatus) -> usize {
    r.kernels.iter().filter(|k| k.status == status).count()
}

/// Every kernel row and range row of `r` has no counters.
fn no_counters(r: &Report) -> bool {
    r.kernels.iter().all(|k| k.metrics.iter().all(Option::is_none))
        && r.ranges.iter().all(|x| x.metrics.iter().all(Option::is_none))
}

/// The range rows of `r` with counters.
fn ranges_with_counters(r: &Report) -> usize {
    r.ranges.iter().filter(|x| x.metrics.iter().any(Option::is_some)).count()
}

fn first_step_has_no_counters(r: &Report, clean: &Report) {
    assert_eq!(ranges_with_counters(clean), 2, "the run without a fault measured both steps");
    assert_eq!(r.ranges[0].path, "step");
    assert!(r.ranges[0].metrics.iter().all(Option::is_none), "{:?}", r.ranges[0]);
    assert_eq!(r.ranges[2].metrics, clean.ranges[2].metrics, "the second step keeps its counters");
    assert!(r.ranges.iter().all(|x| !x.path.contains("step/step")), "the tree stays right: {:?}", r.ranges);
    assert!(r.meta.warnings.iter().any(|w| w.starts_with("range 'step' has no counters: ")), "{:?}", r.meta.warnings);
}

/// The cycle's three CUPTI ranges (the two steps and the nested range, which one nesting
/// level does not measure) are counted as dropped, and every counter is blank.
fn cycle_dropped(r: &Report, _: &Report) {
    assert!(no_counters(r), "the cycle's counters are left blank");
    assert_eq!(r.meta.dropped_counter_ranges, 3);
    assert!(
        r.meta.warnings.iter().any(|w| w.starts_with("counter cycle 0 cannot be trusted")),
        "{:?}",
        r.meta.warnings
    );
}

fn last_cycle_lost(r: &Report, _: &Report) {
    assert!(no_counters(r), "no counters");
    assert!(r.meta.dropped_counter_ranges >= 2, "counted: {}", r.meta.dropped_counter_ranges);
    assert!(crate::report::summary::ending_line(r).is_some(), "the run ended with errors");
}

fn first_cycle_lost(r: &Report, clean: &Report) {
    // Two kernels per cycle: the first cycle's two launches lost their counters, the three
    // launches after it (the later cycles) keep theirs.
    assert_eq!(r.meta.dropped_counter_ranges, 2);
    let blank: Vec<bool> = r.kernels.iter().map(|k| k.metrics.iter().all(Option::is_none)).collect();
    assert_eq!(blank, [true, true, false, false, false]);
    for (k, c) in r.kernels.iter().zip(&clean.kernels).skip(2) {
        assert_eq!(k.metrics, c.metrics);
    }
    assert!(
        !r.meta.warnings.iter().any(|w| w.starts_with("CUPTI dropped")),
        "not blamed on CUPTI: {:?}",
        r.meta.warnings
    );
}

/// The first range of the first cycle could not be evaluated: it is counted as dropped, and
/// the correlator flags the cycle's two rows (one range for two launches), keeping counters
/// only where the range's name confirms the position; the later cycles keep theirs.
fn one_range_lost(r: &Report, clean: &Report) {
    assert_eq!(r.meta.dropped_counter_ranges, 1);
    assert_eq!(rows_with(r, KernelStatus::CountMismatch), 2);
    assert!(r.kernels[0].metrics.iter().all(Option::is_none));
    for (k, c) in r.kernels.iter().zip(&clean.kernels).skip(1) {
        assert_eq!(k.metrics, c.metrics);
    }
}

/// The image's ranges could not be counted: the cycle's three CUPTI ranges are dropped.
/// The re-arm after the first cycle failed twice: the launch that came while the profiler
/// was stopped has no counters (counted as dropped); the next launch started it again, and
/// the launches from then on keep theirs.
fn one_launch_while_stopped(r: &Report, clean: &Report) {
    assert_eq!(r.meta.dropped_counter_ranges, 1);
    let blank: Vec<bool> = r.kernels.iter().map(|k| k.metrics.iter().all(Option::is_none)).collect();
    assert_eq!(blank, [false, false, true, false, false]);
    assert_eq!(rows_with(r, KernelStatus::Ok), LAUNCHES - 1);
    for (k, c) in r.kernels.iter().zip(&clean.kernels).filter(|(k, _)| k.status == KernelStatus::Ok) {
        assert_eq!(k.metrics, c.metrics);
    }
}

fn cycle_lost_in_evaluation(r: &Report, _: &Report) {
    assert!(no_counters(r));
    assert_eq!(r.meta.dropped_counter_ranges, 3);
}

fn records_after_the_failure_lost(r: &Report, clean: &Report) {
    let missing = rows_with(r, KernelStatus::MissingActivity);
    assert!(missing > 0 && missing < LAUNCHES, "{missing} rows missing activity");
    assert_eq!(rows_with(r, KernelStatus::Ok), LAUNCHES - missing);
    assert_eq!(r.kernels[0].duration_ns, clean.kernels[0].duration_ns, "the records before it are kept");
    assert!(r.meta.warnings.iter().any(|w| w.contains("could not be read to their end")), "{:?}", r.meta.warnings);
}

fn every_record_lost(r: &Report, _: &Report) {
    assert_eq!(rows_with(r, KernelStatus::MissingActivity), LAUNCHES);
    assert!(r.transfers.is_empty());
    assert!(crate::report::summary::ending_line(r).is_some_and(|l| l.contains("activity flush")));
}

fn no_pm_samples(r: &Report, clean: &Report) {
    assert!(r.pm.is_none() && clean.pm.is_some());
    assert_eq!(r.kernels.len(), clean.kernels.len(), "the rest is measured");
    assert!(r.meta.warnings.iter().any(|w| w.starts_with("PM sampling did not start")), "{:?}", r.meta.warnings);
}

fn no_pc_samples(r: &Report, clean: &Report) {
    assert!(r.pc.is_none() && clean.pc.is_some());
    assert_eq!(r.kernels.len(), clean.kernels.len(), "the rest is measured");
    assert!(r.meta.warnings.iter().any(|w| w.starts_with("PC sampling did not start")), "{:?}", r.meta.warnings);
}

fn no_source_lines(r: &Report, clean: &Report) {
    let lines = |r: &Report| r.pc.as_ref().map_or(0, |pc| pc.pcs.iter().filter(|p| p.line.is_some()).count());
    assert!(lines(clean) > 0, "the run without a fault has source lines");
    assert_eq!(lines(r), 0);
    let samples = |r: &Report| r.pc.as_ref().map(|pc| pc.total_samples);
    assert_eq!(samples(r), samples(clean), "the samples are all there");
}

fn one_launch_not_counted(r: &Report, clean: &Report) {
    let probed = |r: &Report| r.probes.iter().filter(|p| p.status == "probed").count();
    assert_eq!(probed(clean), LAUNCHES);
    assert_eq!(probed(r), LAUNCHES - 1);
    assert_eq!(r.kernels.len(), clean.kernels.len());
}

fn one_launch_not_stamped(r: &Report, clean: &Report) {
    assert_eq!(r.kernels.iter().filter(|k| k.launch_ns.is_none()).count(), 1);
    assert!(clean.kernels.iter().all(|k| k.launch_ns.is_some()));
    assert_eq!(digest(r), digest(clean), "nothing else is missing");
}

/// The points, in README's order; each is a test of its own.
macro_rules! points {
    ($($test:ident => $point:expr;)*) => {
        $(
            #[test]
            fn $test() {
                check(&$point);
            }
        )*
        /// Every point, with its test's name.
        const POINTS: &[(&str, Point)] = &[$((stringify!($test), $point)),*];
    };
}

const fn point(
    name: &'static str,
    workload: Workload,
    function: &'static str,
    nth: Nth,
    fails: u32,
    cost: Cost,
) -> Point {
    Point { name, workload, function, nth, fails, cost }
}

use Cost::{Nothing, Part, Profile};
use Nth::{Call, Last};
use Workload as W;

points! {
    subscribe => point("subscribe", W::Trace, "cuptiSubscribe", Call(1), 1, Profile);
    enable_callbacks => point("enable callbacks", W::Trace, "cuptiEnableCallback", Call(1), 1, Profile);
    enable_activity => point("enable activity records", W::Trace, "cuptiActivityEnable", Call(1), 1, Profile);
    configure => point("configure the range profiler", W::PerRange, "cuptiRangeProfilerSetConfig", Call(1), 1, Profile);
    range_push => point("range push", W::PerRange, "cuptiRangeProfilerPushRange", Call(1), 1, Nothing);
    range_push_twice => point("range push, failing again", W::PerRange, "cuptiRangeProfilerPushRange", Call(1), 2, Part(first_step_has_no_counters));
    range_pop => point("range pop", W::PerRange, "cuptiRangeProfilerPopRange", Call(1), 1, Nothing);
    range_pop_twice => point("range pop, failing again", W::PerRange, "cuptiRangeProfilerPopRange", Call(1), 2, Part(cycle_dropped));
    kernel_range_push => point("per-kernel range push", W::PerKernel, "cuptiRangeProfilerPushRange", Call(1), 1, Nothing);
    kernel_range_pop => point("per-kernel range pop", W::PerKernel, "cuptiRangeProfilerPopRange", Call(1), 1, Nothing);
    decode_last_cycle => point("decode, last cycle", W::PerRange, "cuptiRangeProfilerDecodeData", Call(1), 1, Nothing);
    decode_last_cycle_twice => point("decode, last cycle, failing again", W::PerRange, "cuptiRangeProfilerDecodeData", Call(1), 2, Part(last_cycle_lost));
    stop_last_cycle_twice => point("stop, last cycle, failing again", W::PerRange, "cuptiRangeProfilerStop", Call(1), 2, Part(last_cycle_lost));
    decode_mid_run => point("decode, mid-run cycle", W::KernelReplay, "cuptiRangeProfilerDecodeData", Call(1), 1, Nothing);
    decode_mid_run_twice => point("decode, mid-run cycle, failing again", W::KernelReplay, "cuptiRangeProfilerDecodeData", Call(1), 2, Part(first_cycle_lost));
    rearm_mid_run => point("re-arm, mid-run cycle", W::KernelReplay, "cuptiRangeProfilerSetConfig", Call(2), 1, Nothing);
    rearm_mid_run_twice => point("re-arm, mid-run cycle, failing again", W::KernelReplay, "cuptiRangeProfilerSetConfig", Call(2), 2, Part(one_launch_while_stopped));
    counter_data_count => point("counter data: ranges counted", W::PerRange, "cuptiRangeProfilerGetCounterDataInfo", Call(1), 1, Part(cycle_lost_in_evaluation));
    counter_data_evaluate => point("counter data: a range evaluated", W::KernelReplay, "cuptiProfilerHostEvaluateToGpuValues", Call(1), 1, Part(one_range_lost));
    activity_buffer => point("activity buffer completion", W::Trace, "cuptiActivityGetNextRecord", Call(3), 1, Part(records_after_the_failure_lost));
    activity_dropped_count => point("activity buffer: dropped-record count", W::Trace, "cuptiActivityGetNumDroppedRecords", Call(1), 1, Nothing);
    activity_flush => point("activity flush", W::Trace, "cuptiActivityFlushAll", Call(1), 1, Nothing);
    activity_flush_twice => point("activity flush, failing again", W::Trace, "cuptiActivityFlushAll", Call(1), 2, Part(every_record_lost));
    launch_stamp => point("launch timestamp", W::Trace, "cuptiGetTimestamp", Call(3), 1, Part(one_launch_not_stamped));
    pm_start => point("PM start", W::PmSampling, "cuptiPmSamplingStart", Call(1), 1, Part(no_pm_samples));
    pm_decode => point("PM decode", W::PmSampling, "cuptiPmSamplingDecodeData", Call(1), 1, Nothing);
    pm_stop => point("PM stop", W::PmSampling, "cuptiPmSamplingStop", Call(1), 1, Nothing);
    pc_enable => point("PC enable", W::PcSampling, "cuptiPCSamplingEnable", Call(1), 1, Part(no_pc_samples));
    pc_drain => point("PC drain", W::PcSampling, "cuptiPCSamplingGetData", Call(1), 1, Nothing);
    sass_flush => point("SASS metrics flush", W::SassMetrics, "cuptiSassMetricsFlushData", Call(1), 1, Nothing);
    sass_flush_twice => point("SASS metrics flush, failing again", W::SassMetrics, "cuptiSassMetricsFlushData", Call(1), 2, Part(one_launch_not_counted));
    sass_enable => point("SASS metrics collection", W::SassMetrics, "cuptiSassMetricsEnable", Call(1), 1, Part(one_launch_not_counted));
    module_load_callbacks => point("module-load callbacks", W::PcSampling, "cuptiEnableCallback", Last, 1, Part(no_source_lines));
    module_cubin => point("module-load callbacks: the cubin's CRC", W::PcSampling, "cuptiGetCubinCrc", Call(1), 1, Part(no_source_lines));
    context_destroy_current => point("context destroy: make current", W::Trace, "cuCtxSetCurrent", Call(1), 1, Nothing);
    context_destroy_sync => point("context destroy: synchronize", W::Trace, "cuCtxSynchronize", Call(1), 1, Nothing);
    exit_sync => point("process exit: synchronize", W::TraceToExit, "cuCtxSynchronize", Call(1), 1, Nothing);
    release => point("release after the report", W::Trace, "cuptiActivityDisable", Call(1), 1, Nothing);
}

/// README's table lists every point, by its name and its test.
#[test]
fn the_readme_table_lists_every_point() {
    let readme = include_str!("../../../README.md");
    for (test, p) in POINTS {
        let row = readme.lines().find(|l| l.starts_with(&format!("| {} |", p.name)));
        let row = row.unwrap_or_else(|| panic!("README has no row for the point '{}'", p.name));
        assert!(row.contains(&format!("`{}`", p.function)), "{row}: names no `{}`", p.function);
        assert!(row.contains(&format!("`{test}`")), "{row}: names no test `{test}`");
    }
    assert!(GEMM.starts_with("_Z"), "the workload's kernels are mangled as CUPTI gives them");
}
