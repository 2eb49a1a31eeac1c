//! The flight recorder on a recorded run (an H100: a 6-layer GPT under PyTorch, 30 steps, in
//! trace mode), its rows fed as a streamed run feeds them: the real steps, as they are, make
//! no window under `3x`; the same run with 200 ms of extra GPU work in one step makes one
//! window that holds that step, its neighbours and the extra kernel.

#[path = "common/recorded.rs"]
mod recorded;

use std::collections::HashMap;

use gmprof::aggregate::RangeRow;
use gmprof::analysis::online::{FlightRecorder, FlightSettings, FlightWindow, OnlineAggregates, StepRow, TriggerRule};
use gmprof::model::RangeId;
use gmprof::Report;

fn load() -> Report {
    serde_json::from_str(&recorded::unzstd("diff", "torch_gpt_base.json.zst")).expect("a recorded report.json")
}

/// Feeds `report`'s rows to an [`OnlineAggregates`] and a recorder as one drain does: the
/// kernel rows, then the ranges in the order they complete (children first), each with its
/// top-level range. Returns the windows and the step rows handed out.
fn feed(report: &Report, settings: FlightSettings) -> (Vec<FlightWindow>, Vec<StepRow>) {
    let parent: HashMap<RangeId, Option<RangeId>> =
        report.ranges.iter().filter_map(|r| Some((r.range_id?, r.parent_id))).collect();
    let top = |id: Option<RangeId>| {
        let mut id = id?;
        while let Some(Some(p)) = parent.get(&id) {
            id = *p;
        }
        Some(id)
    };
    let mut online = OnlineAggregates::default();
    let mut recorder = FlightRecorder::new(settings);
    for k in &report.kernels {
        online.add_kernel(k);
        recorder.kernel(k, top(k.range_id));
    }
    let mut ranges: Vec<&RangeRow> = report.ranges.iter().collect();
    ranges.sort_by_key(|r| (r.end_ns.unwrap_or(u64::MAX), std::cmp::Reverse(r.depth)));
    let mut steps = Vec::new();
    for r in ranges {
        let t = top(r.range_id);
        online.add_range(r, t);
        let made = online.take_steps();
        recorder.range(r, t, made);
        steps.extend(recorder.take_final_steps());
    }
    recorder.finish(None);
    steps.extend(recorder.take_final_steps());
    (recorder.take_windows(), steps)
}

#[test]
fn the_recorded_steps_make_no_window_and_one_slowed_step_makes_one() {
    let report = load();
    let (windows, steps) = feed(&report, FlightSettings::slow_step(TriggerRule::TimesMedian(3.0)));
    assert!(steps.len() >= 25, "{} steps", steps.len());
    assert!(windows.is_empty(), "{:?}", windows.iter().map(|w| &w.entry).collect::<Vec<_>>());
    assert!(steps.iter().all(|s| s.flight_window.is_none()));

    // Step 20 gets a 200 ms kernel of its own.
    let slow = &steps[20];
    let step_row = report
        .ranges
        .iter()
        .find(|r| r.depth == 0 && r.start_ns == slow.start_ns && r.path == slow.path)
        .expect("step 20's range")
        .clone();
    let mut slowed = report.clone();
    let mut extra = report.kernels.iter().find(|k| k.kernel_name.is_some()).expect("a kernel").clone();
    extra.range_id = step_row.range_id;
    extra.range_path.clone_from(&step_row.path);
    extra.kernel_name = Some("injected_spin".to_owned());
    extra.correlation_id = u32::MAX;
    extra.duration_ns = Some(200_000_000);
    slowed.kernels.push(extra);
    for r in slowed.ranges.iter_mut().filter(|r| r.range_id == step_row.range_id) {
        r.gpu_time_ns = r.gpu_time_ns.map(|t| t + 200_000_000);
        r.kernel_count += 1;
    }
    let (windows, steps) = feed(&slowed, FlightSettings::slow_step(TriggerRule::TimesMedian(3.0)));
    assert_eq!(windows.len(), 1);
    let w = &windows[0];
    assert_eq!((w.entry.trigger_step, w.entry.first_step, w.entry.last_step), (Some(20), Some(16), Some(22)));
    assert!(w.entry.triggers[0].starts_with("slow step: step 20 took"), "{:?}", w.entry.triggers);
    assert_eq!(w.detail.kernels.iter().filter(|k| k.kernel_name.as_deref() == Some("injected_spin")).count(), 1);
    // Every kernel of the window's steps is in it.
    let in_steps: u64 = w.steps.iter().map(|s| s.kernels).sum();
    assert_eq!(w.detail.kernels.iter().filter(|k| k.granularity.is_kernel_execution()).count() as u64, in_steps);
    let marked: Vec<u64> = steps.iter().filter(|s| s.flight_window == Some(0)).map(|s| s.step).collect();
    assert_eq!(marked, (16..=22).collect::<Vec<_>>());
}
