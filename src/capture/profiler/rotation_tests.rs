//! per_kernel in rotation (issue 44) through the GPU-less [`LaunchHarness`]: a training loop of
//! numbered steps with an evaluation step of another shape every fourth step. The launches
//! each step measures are its slot's; every position of each template is measured once per N
//! of its steps; unmeasured launches are rows of status `unmeasured` (not flagged), timed and
//! blank; the positions carry the scripted counters of their launches; the range groups'
//! one-step estimates equal the sums of their positions; the two shapes are two templates,
//! and the summary says how the second differs and how far it was covered.

use std::collections::HashMap;
use std::ffi::CStr;

use super::harness::{Faults, LaunchHarness};
use super::rotation::Every;
use crate::analysis::correlate::KernelStatus;
use crate::model::{ProfilingMode, RunEnd};
use crate::report::Report;

const TRAIN: [(&CStr, &str); 6] = [
    (c"embed", "embed"),
    (c"gemm", "gemm"),
    (c"softmax", "softmax"),
    (c"gemm", "gemm"),
    (c"norm", "norm"),
    (c"adam", "adam"),
];
const EVAL: [(&CStr, &str); 4] = [(c"embed", "embed"), (c"gemm", "gemm"), (c"argmax", "argmax"), (c"loss", "loss")];

/// The scripted counter value of the launch at `position` of a step of shape `eval`: the
/// same in every step, so a position's mean is known.
fn counter_value(eval: bool, position: usize) -> f64 {
    if eval {
        5_000.0 + position as f64
    } else {
        100.0 * (position as f64 + 1.0)
    }
}

/// `steps` training steps, every fourth one followed by an evaluation step; rotation `every`.
fn run(every: u32, steps: usize) -> (Report, HashMap<u32, (bool, usize)>) {
    let mut h = LaunchHarness::new(ProfilingMode::PerKernel).unwrap();
    h.rotate(Every::Steps(every), None);
    let mut at: HashMap<u32, (bool, usize)> = HashMap::new();
    let mut gpu_ns = 1_000_000u64;
    let mut records = Vec::new();
    let mut step = 0u32;
    let mut shape = |h: &mut LaunchHarness, name: String, eval: bool| {
        step += 1;
        h.push_range(&name).unwrap();
        h.push_range(if eval { "forward" } else { "fwd_bwd" }).unwrap();
        let kernels: &[(&'static CStr, &str)] = if eval { &EVAL } else { &TRAIN };
        for (p, (symbol, kernel)) in kernels.iter().enumerate() {
            let id = h.launch_kernel(false, symbol);
            at.insert(id, (eval, p));
            let mut record = h.kernel_record(id, kernel, gpu_ns, gpu_ns + 10_000 + 1_000 * p as u64);
            // `norm` sizes its grid by the data, as llm.c's wte_backward_kernel does.
            if let (crate::checked::activity::ActivityRecord::Kernel(k), "norm") = (&mut record, *kernel) {
                k.grid = [1000 + step as i32 % 5, 1, 1];
            }
            records.push(record);
            gpu_ns += 20_000;
        }
        h.pop_range().unwrap();
        h.pop_range().unwrap();
    };
    for s in 0..steps {
        shape(&mut h, format!("Train step {s}"), false);
        if s % 4 == 3 {
            shape(&mut h, format!("Eval step {}", s / 4), true);
        }
    }
    h.deliver(records);
    let values = at.clone();
    h.end_counter_cycle(|key| {
        let (eval, p) = values[&key.parse::<u32>().unwrap()];
        Some(counter_value(eval, p))
    });
    (h.finish(RunEnd::Finished { by: "test".into() }, Faults::default()).unwrap(), at)
}

#[test]
fn each_step_measures_its_slot_and_every_position_is_covered_in_n_steps() {
    let (report, at) = run(3, 24);
    let rotation = report.rotation.as_ref().expect("a rotation section");
    // 24 training steps of 6 launches, 6 evaluation steps of 4; B = ⌈6 / 3⌉ = 2 from the
    // second step, so the first two only watch. A training block is measured in the steps g
    // (over all 30) or j (over the training ones) of its slot: {embed, gemm} (shared with the
    // evaluation step, so counted over all steps) at g ≡ 0, 7 times; {softmax, gemm} at
    // j ≡ 1, 7 times; {norm, adam} at j ≡ 2, 8 times. Evaluation steps: each block twice.
    let measured: Vec<_> = report.kernels.iter().filter(|k| k.status == KernelStatus::Ok).collect();
    let unmeasured = report.kernels.iter().filter(|k| k.status == KernelStatus::Unmeasured).count();
    assert_eq!((measured.len(), unmeasured), (44 + 8, 168 - 52));
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{:?}", report.meta.warnings);
    assert!(report.meta.warnings.is_empty(), "{:?}", report.meta.warnings);
    assert_eq!(report.meta.counts.unmeasured, 116);
    // Measured rows carry their launch's counters, unmeasured rows none but their time.
    for k in &report.kernels {
        let (eval, p) = at[&k.correlation_id];
        match k.status {
            KernelStatus::Ok => assert_eq!(k.metrics[0], Some(counter_value(eval, p))),
            _ => assert_eq!(k.metrics[0], None),
        }
        assert!(k.duration_ns.is_some());
    }
    assert_eq!((rotation.run.every, rotation.steps, rotation.launches_outside_steps), (3, 30, 0));
    assert_eq!(rotation.templates.len(), 2);
    let (train, eval) = (&rotation.templates[0], &rotation.templates[1]);
    assert_eq!((train.step_path.as_str(), train.steps, train.positions), ("Train step #", 24, 6));
    assert_eq!((train.measured_positions, train.steps_to_cover), (6, Some(5)));
    assert_eq!((eval.step_path.as_str(), eval.steps, eval.positions), ("Eval step #", 6, 4));
    assert_eq!((eval.measured_positions, eval.steps_to_cover), (4, Some(2)));
    assert!(eval.differs.as_deref().unwrap().contains("4 launches against 6"), "{:?}", eval.differs);
    for p in &rotation.positions {
        let eval = p.template == 1;
        let (steps, times) = match (eval, p.position) {
            (true, _) => (6, 2),
            (false, 0..=3) => (24, 7),
            (false, _) => (24, 8),
        };
        assert_eq!((p.launches, p.measured), (steps, times), "{p:?}");
        assert_eq!(p.values[0], Some(counter_value(eval, p.position as usize)), "{p:?}");
        assert_eq!(p.duration_ns, Some(10_000.0 + 1_000.0 * f64::from(p.position)));
    }
    // One training step as its positions estimate it: the sum of the six.
    let step = rotation.groups.iter().find(|g| g.template == 0 && g.path == "Train step #").unwrap();
    assert_eq!((step.positions, step.measured_positions), (6, 6));
    assert_eq!(step.values[0], Some(2_100.0));
    // The grid that follows the data splits no template: one position, four grids (every fifth shape is an evaluation step).
    assert_eq!(train.varying_grid_positions, 1);
    let norm = rotation.positions.iter().find(|p| p.template == 0 && p.position == 4).unwrap();
    assert_eq!((norm.grids, norm.grid, norm.measured), (4, None, 8));
    assert_eq!(step.gpu_time_ns, Some(6.0 * 10_000.0 + 15_000.0));
    let inner = rotation.groups.iter().find(|g| g.template == 1 && g.path == "Eval step #/forward").unwrap();
    assert_eq!(inner.values[0], Some(4.0 * 5_000.0 + 6.0));
    // Range rows hold a slice of their launches' counters: blank, the groups stand for them.
    assert!(report.ranges.iter().all(|r| r.metrics.iter().all(Option::is_none)));
    let summary = report.summary().to_string();
    assert!(
        summary.contains("rotation 1/3: 30 step(s), 2 template(s); 52 launch(es) measured, 116 unmeasured"),
        "{summary}"
    );
    assert!(summary.contains("every position measured after 5 of its steps"), "{summary}");
    assert!(summary.contains("1 position(s) launch with a grid that changes from step to step"), "{summary}");
    assert!(summary.contains("norm at 4 (4 grids)"), "{summary}");
}

#[test]
fn a_run_shorter_than_the_rotation_says_how_much_was_covered() {
    let (report, _) = run(8, 5);
    let rotation = report.rotation.as_ref().unwrap();
    let train = &rotation.templates[0];
    // B = 1; training steps 2, 3 and 4 (steps 2, 3 and 5 of all) measure positions 2, 3, 4.
    assert_eq!((train.steps, train.measured_positions, train.steps_to_cover), (5, 3, None));
    // Never-measured positions are blank, never 0, and so is the group that holds them.
    let never: Vec<_> = rotation.positions.iter().filter(|p| p.template == 0 && p.measured == 0).collect();
    assert_eq!(never.iter().map(|p| p.position).collect::<Vec<_>>(), [0, 1, 5]);
    assert!(never[0].values.iter().all(Option::is_none));
    let step = rotation.groups.iter().find(|g| g.template == 0 && g.path == "Train step #").unwrap();
    assert_eq!((step.measured_positions, step.values[0]), (3, None));
    let summary = report.summary().to_string();
    assert!(
        summary.contains("3 of 6 positions measured (50.0 %): it ran 5 of the 8 steps a rotation takes"),
        "{summary}"
    );
}

#[test]
fn positions_csv_has_a_row_per_position_with_its_counters() {
    let (report, _) = run(3, 12);
    let dir = tempfile::tempdir().unwrap();
    report.write_all(dir.path()).unwrap();
    let text = std::fs::read_to_string(dir.path().join("positions.csv")).unwrap();
    let mut rows = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    assert_eq!(header.get(0), Some("template"));
    assert_eq!(header.get(header.len() - 1), Some(crate::model::GPU_TIME_METRIC));
    let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 6 + 4);
    let gemm = rows.iter().find(|r| r.get(0) == Some("0") && r.get(1) == Some("1")).unwrap();
    // Position 1 (block 0 of B = 2) is measured at steps 3, 6 and 12 of all 15 (9 is an
    // evaluation step).
    assert_eq!((gemm.get(3), gemm.get(11), gemm.get(12)), (Some("gemm"), Some("12"), Some("3")));
    assert_eq!((gemm.get(4), gemm.get(7)), (Some("1024"), Some("1")), "one grid, named");
    assert_eq!(gemm.get(header.len() - 1), Some("200"));
    // report.json keeps the section.
    let back: Report = serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(back.rotation, report.rotation);
}

/// The recorded rotation report `scripts/check-html.sh` renders in Chromium (CI): this test's
/// run, written when `GMPROF_BLESS=1`. Without it, the recorded file must still be such a run.
const RECORDED: &str = "tests/data/rotation/report.json";

#[test]
fn the_html_page_shows_one_typical_step_and_the_recorded_report_is_such_a_run() {
    let (report, _) = run(3, 24);
    let html = report.to_html(&crate::report::SummaryOptions::default()).unwrap();
    let start = html.find(r#"id="gmprof-data">"#).unwrap() + r#"id="gmprof-data">"#.len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
    let groups = data["rotation"]["groups"].as_array().unwrap();
    let step = groups.iter().find(|g| g["path"] == "Train step #").unwrap();
    assert_eq!((step["positions"].as_u64(), step["measured"].as_u64()), (Some(6), Some(6)));
    assert_eq!(step["gpu_time_ns"].as_f64(), Some(75_000.0));
    assert!(data["rotation"]["note"].as_str().unwrap().contains("rotation 1/3: 30 step(s), 2 template(s)"));
    let gemm = data["rotation"]["kernels"].as_array().unwrap().iter().find(|k| k["name"] == "gemm").unwrap();
    // gemm runs at positions 1 and 3 of 24 training steps and position 1 of 6 evaluation steps.
    assert_eq!(gemm["launches"].as_u64(), Some(54));
    assert!(html.contains(r#"id="rotation-section""#));

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(RECORDED);
    if std::env::var("GMPROF_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        report.write_json(&path).unwrap();
    }
    let recorded: Report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(recorded.rotation, report.rotation, "{RECORDED} is not this test's run: GMPROF_BLESS=1 rewrites it");
}

/// A streamed rotation: unmeasured launches leave the session as soon as their activity is in,
/// though the rotation's one counter cycle is decoded only at the end; the measured ones wait
/// for it and are written with their counters then. The report says there is no positions
/// table.
#[test]
fn a_streamed_rotation_drains_unmeasured_launches_without_waiting_for_the_cycle() {
    use super::state::StreamConfig;
    use super::stream::StreamProgress;
    use crate::analysis::online::OnlineSettings;
    use crate::report::stream::StreamSettings;
    use crate::report::tables::parquet::parts::{part_files, SegmentPolicy};
    use crate::report::tables::parquet::read;

    const STEPS: u32 = 60;
    let dir = tempfile::tempdir().unwrap();
    let mut h = LaunchHarness::new(ProfilingMode::PerKernel).unwrap();
    h.rotate(Every::Steps(4), None);
    let settings = StreamSettings {
        segment: SegmentPolicy { rows: 200, every: std::time::Duration::from_secs(3600), row_group: 64 },
        online: OnlineSettings::default(),
        flight: None,
        release_memory: true,
        release_every: crate::report::stream::DEFAULT_RELEASE_EVERY,
        live: None,
        window_trace: Default::default(),
        pm_kernel_rows: Default::default(),
    };
    h.profiler().stream_into(StreamConfig { dir: dir.path().to_owned(), row_limit: 50, settings }).unwrap();
    let mut gpu_ns = 1_000_000u64;
    let mut late = Vec::new();
    let mut most_held = 0;
    for s in 0..STEPS {
        h.push_range(&format!("Train step {s}")).unwrap();
        let mut records = Vec::new();
        for (symbol, kernel) in TRAIN {
            let id = h.launch_kernel(false, symbol);
            records.push(h.kernel_record(id, kernel, gpu_ns, gpu_ns + 10_000));
            gpu_ns += 20_000;
        }
        h.pop_range().unwrap();
        h.deliver(std::mem::replace(&mut late, records));
        if let StreamProgress::Streaming { launches_held, .. } = h.stream_step() {
            most_held = most_held.max(launches_held);
        }
    }
    h.deliver(late);
    // B = ⌈6 / 4⌉ = 2 from the second step; steps 2 to 59 measure 2 each, but the 15 whose
    // block is the 4th (positions 6 and 7, which no step has): 43 x 2.
    let measured_total = 86;
    // Held: the measured launches (waiting for the cycle) and a step or two in flight.
    assert!(most_held <= measured_total + 2 * 6, "held {most_held}");
    h.end_counter_cycle(|_| Some(7.0));
    let report = h.finish(RunEnd::Finished { by: "test".into() }, Faults::default()).unwrap();
    assert!(report.streamed.is_some(), "streamed: {most_held} held, {:?}", report.meta.warnings);
    assert!(report.rotation.is_none());
    assert!(report.meta.warnings.iter().any(|w| w.contains("the rows were streamed: the positions table")));
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{:?}", report.meta.warnings);
    let mut statuses: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for part in part_files(&dir.path().join("kernels")).unwrap() {
        for batch in read::batches(&part, &["status", crate::model::GPU_TIME_METRIC]).unwrap() {
            let b = batch.unwrap();
            for r in 0..b.len() {
                let e = statuses.entry(b.text(0, r).unwrap().unwrap().to_owned()).or_default();
                e.0 += 1;
                e.1 += u64::from(b.float(1, r).unwrap() == Some(7.0));
            }
        }
    }
    let all = u64::from(STEPS) * 6;
    assert_eq!(statuses.get("ok"), Some(&(measured_total, measured_total)), "{statuses:?}");
    assert_eq!(statuses.get("unmeasured"), Some(&(all - measured_total, 0)), "{statuses:?}");
}
