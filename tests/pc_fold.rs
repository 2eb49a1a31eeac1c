//! PC sampling folded into stall reasons per range, kernel and instruction, on recorded-style
//! sample buffers (no GPU needed): attribution to nested ranges (exact by correlation id, and
//! shared by GPU time in continuous collection), too-few-samples ranges, samples of functions
//! never launched in the trace, and the formats of stalls.csv and pc_samples.csv (golden
//! files `tests/golden/stalls.csv` and `tests/golden/pc_samples.csv`; rewrite them with
//! `GMPROF_BLESS=1 cargo test --test pc_fold`).

use gmprof::analysis::pc_fold::{PcAttribution, MIN_SAMPLES};
use gmprof::correlate::Correlator;
use gmprof::model::pc::{PcCapture, PcRecord, PcSource, PcStallReason};
use gmprof::model::{MetricSet, ProfilingMode, ThreadId};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;

#[path = "common/golden.rs"]
mod golden;
#[path = "common/kernels.rs"]
mod kernels;
use golden::check_golden;
use kernels::launch_kernel;

const T0: u64 = 1_000_000_000;
const US: u64 = 1_000;

/// The stall reasons of GH100 by CUPTI's names (each with its `_not_issued` twin), in the
/// order and with the indices of a recorded-style list.
const GH100_STATES: [&str; 19] = [
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instructions",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
    "warpgroup_arrive",
];

fn reasons() -> Vec<PcStallReason> {
    let mut out = Vec::new();
    for (i, s) in GH100_STATES.iter().enumerate() {
        out.push(PcStallReason { index: 2 * i as u32, name: format!("smsp__pcsamp_warps_issue_stalled_{s}") });
        out.push(PcStallReason {
            index: 2 * i as u32 + 1,
            name: format!("smsp__pcsamp_warps_issue_stalled_{s}_not_issued"),
        });
    }
    out
}

/// CUPTI's index of state `s` (its `_not_issued` twin is the next one).
fn idx(s: &str) -> u32 {
    2 * GH100_STATES.iter().position(|x| *x == s).unwrap() as u32
}

fn rec(function: &str, pc: u64, corr: u32, stalls: &[(&str, u64, u64)]) -> PcRecord {
    let mut v = Vec::new();
    for (s, n, not_issued) in stalls {
        v.push((idx(s), *n));
        if *not_issued > 0 {
            v.push((idx(s) + 1, *not_issued));
        }
    }
    PcRecord { cubin_crc: 0xC0FFEE, function: function.into(), pc_offset: pc, correlation_id: corr, stalls: v }
}

/// A trace-mode session: `step` { `fwd` { k1 (300 µs) }, `bwd` { `inner` { k2 }, k1 (100 µs) },
/// `tiny` { k3 } }, with launches 1 to 4.
fn nested_report() -> Report {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let thread: ThreadId = 1;
    tree.push("step", thread, T0);
    tree.push("fwd", thread, T0 + US);
    launch_kernel(&tree, &mut correlator, thread, 1, "k1", T0 + 50 * US, T0 + 350 * US);
    tree.pop(thread, T0 + 2 * US).unwrap();
    tree.push("bwd", thread, T0 + 3 * US);
    tree.push("inner", thread, T0 + 4 * US);
    launch_kernel(&tree, &mut correlator, thread, 2, "k2", T0 + 400 * US, T0 + 900 * US);
    tree.pop(thread, T0 + 5 * US).unwrap();
    launch_kernel(&tree, &mut correlator, thread, 3, "k1", T0 + 900 * US, T0 + 1_000 * US);
    tree.pop(thread, T0 + 6 * US).unwrap();
    tree.push("tiny", thread, T0 + 7 * US);
    launch_kernel(&tree, &mut correlator, thread, 4, "k3", T0 + 1_000 * US, T0 + 1_002 * US);
    tree.pop(thread, T0 + 8 * US).unwrap();
    tree.pop(thread, T0 + 9 * US).unwrap();
    let info = CaptureInfo::new(ProfilingMode::Trace);
    let mut report = Report::analyze(info, &MetricSet::default(), &tree, correlator);
    report.meta.gmprof_version = "GOLDEN".into();
    report
}

/// Continuous collection (no correlation ids): k1 has 800 samples over two PCs, k2 400,
/// k3 40, and a function never launched in the trace 25.
fn continuous_capture() -> PcCapture {
    PcCapture {
        reasons: reasons(),
        period_exponent: Some(12),
        collection: "continuous".into(),
        records: vec![
            rec("k1", 0x80, 0, &[("long_scoreboard", 400, 380), ("selected", 100, 0), ("wait", 20, 5)]),
            rec("k1", 0x90, 0, &[("math_pipe_throttle", 200, 150), ("selected", 60, 0), ("not_selected", 20, 20)]),
            rec("k2", 0x100, 0, &[("barrier", 300, 300), ("selected", 100, 0)]),
            rec("k3", 0x20, 0, &[("short_scoreboard", 30, 30), ("selected", 10, 0)]),
            rec("gone", 0x10, 0, &[("misc", 25, 25)]),
        ],
        total_samples: 1_400,
        dropped_samples: 7,
        non_user_samples: 128,
        hardware_buffer_full: 0,
        drains: 3,
        sources: vec![PcSource {
            cubin_crc: 0xC0FFEE,
            function: "k1".into(),
            pc_offset: 0x80,
            file: "/src/train_gpt2.cu".into(),
            line: 412,
        }],
        instructions: vec![gmprof::model::pc::PcInstruction {
            cubin_crc: 0xC0FFEE,
            function: "k1".into(),
            pc_offset: 0x80,
            sass: "LDG.E.128 R4, desc[UR6][R2.64]".into(),
        }],
        errors: Vec::new(),
    }
}

fn range<'a>(pc: &'a gmprof::analysis::pc_fold::PcReport, path: &str) -> &'a gmprof::analysis::pc_fold::RangeStalls {
    pc.ranges.iter().find(|r| r.path == path).unwrap_or_else(|| panic!("no range {path}"))
}

fn col(pc: &gmprof::analysis::pc_fold::PcReport, state: &str) -> usize {
    pc.reasons.iter().position(|r| r.name.ends_with(&format!("stalled_{state}"))).unwrap()
}

#[test]
fn continuous_samples_are_shared_by_gpu_time_and_nested_ranges_add_up() {
    let mut report = nested_report();
    report.attach_pc(&continuous_capture());
    let pc = report.pc.as_ref().unwrap();
    assert_eq!(pc.attribution, PcAttribution::ByKernelTime);
    assert_eq!(pc.reasons.len(), 19, "one column per state; twins beside them");
    assert_eq!(pc.sampled, 800 + 400 + 40 + 25);
    assert_eq!(pc.unattributed_samples, 25);
    // k1 ran 300 µs in fwd and 100 µs in bwd: 3/4 and 1/4 of its samples, reason by reason.
    let fwd = range(pc, "step/fwd");
    assert_eq!(fwd.counts.samples, 600);
    assert_eq!(fwd.counts.by_reason[col(pc, "long_scoreboard")], 300);
    assert_eq!(fwd.counts.not_issued[col(pc, "long_scoreboard")], 285);
    assert_eq!(fwd.counts.by_reason[col(pc, "selected")], 120);
    let inner = range(pc, "step/bwd/inner");
    assert_eq!(inner.counts.samples, 400);
    let bwd = range(pc, "step/bwd");
    assert_eq!(bwd.counts.samples, 400 + 200, "inner's samples count in bwd too");
    let step = range(pc, "step");
    let tiny = range(pc, "step/tiny");
    assert_eq!(step.counts.samples, fwd.counts.samples + bwd.counts.samples + tiny.counts.samples);
    // Every kernel ran inside `step`: no root row, and `step` has every attributed sample.
    assert!(pc.ranges.iter().all(|r| r.path != gmprof::session::ROOT_PATH));
    assert_eq!(step.counts.samples, pc.sampled - pc.unattributed_samples);
    // Each range's samples equal the sum of its kernels' (the invariant the GPU script checks).
    let kernel_total: u64 = pc.kernels.iter().filter(|k| k.launches > 0).map(|k| k.counts.samples).sum();
    assert_eq!(step.counts.samples, kernel_total);
    for r in &pc.ranges {
        assert_eq!(r.counts.samples, r.counts.by_reason.iter().sum::<u64>(), "{}", r.path);
    }
    // Range by range: its samples are the sum over its own and its descendants' launches.
    for (i, r) in report.ranges.iter().enumerate() {
        let Some(row) = pc.ranges.iter().find(|x| x.range_index == i) else { continue };
        let inside = |mut at: Option<usize>| {
            while let Some(j) = at {
                if j == i {
                    return true;
                }
                at = report.ranges[j].parent_id.and_then(|p| report.ranges.iter().position(|x| x.range_id == Some(p)));
            }
            r.range_id.is_none()
        };
        let sum: u64 = pc.range_kernels.iter().filter(|g| inside(g.range_index)).map(|g| g.samples).sum();
        assert_eq!(row.counts.samples, sum, "{}", r.path);
    }
    let k1: u64 = pc.range_kernels.iter().filter(|g| g.function == "k1").map(|g| g.samples).sum();
    assert_eq!(k1, 800, "a function's shares add up to its samples");
    // Issued share: k2's inner range issued 100 of 400.
    assert_eq!(inner.counts.share_pct(col(pc, "selected")), Some(25.0));
}

#[test]
fn kernels_rank_by_samples_with_their_hottest_instructions_and_lines() {
    let mut report = nested_report();
    report.attach_pc(&continuous_capture());
    let pc = report.pc.as_ref().unwrap();
    let names: Vec<&str> = pc.kernels.iter().map(|k| k.function.as_str()).collect();
    assert_eq!(names, ["k1", "k2", "k3", "gone"]);
    let k1 = &pc.kernels[0];
    assert_eq!((k1.launches, k1.gpu_time_ns, k1.counts.samples), (2, Some(400 * US), 800));
    assert_eq!(k1.hot.iter().map(|p| p.pc_offset).collect::<Vec<_>>(), [0x80, 0x90]);
    assert_eq!((k1.hot[0].file.as_deref(), k1.hot[0].line), (Some("/src/train_gpt2.cu"), Some(412)));
    assert_eq!(k1.hot[1].file, None, "no line information: blank");
    assert_eq!(
        k1.counts.top(3).iter().map(|c| pc.reasons[*c].warp_state.as_str()).collect::<Vec<_>>(),
        ["Stall Long Scoreboard", "Stall Math Pipe Throttle", "Selected"]
    );
    assert_eq!(pc.kernels[3].launches, 0);
}

#[test]
fn a_range_with_too_few_samples_shows_counts_and_no_shares() {
    let mut report = nested_report();
    report.attach_pc(&continuous_capture());
    let pc = report.pc.as_ref().unwrap();
    let tiny = range(pc, "step/tiny");
    assert_eq!(tiny.counts.samples, 40);
    assert!(tiny.counts.samples < MIN_SAMPLES && tiny.counts.few_samples());
    assert_eq!(tiny.counts.share_pct(col(pc, "short_scoreboard")), None);
    let mut out = Vec::new();
    report.write_stalls_csv_to(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let line = text.lines().find(|l| l.starts_with("\"step/tiny\"") && l.contains("short_scoreboard\"")).unwrap();
    assert!(line.ends_with(",30,30,\"\""), "count kept, share blank: {line}");
    assert!(line.contains(",40,\"true\",\"\","), "few_samples and a blank issued share: {line}");
}

#[test]
fn correlation_ids_attribute_exactly_and_mixed_records_say_so() {
    let mut report = nested_report();
    let mut capture = continuous_capture();
    // Serialized collection: k1's samples split 50/50 between its launches 1 and 3, which
    // GPU-time sharing would have split 3:1.
    capture.collection = "kernel_serialized".into();
    capture.records = vec![
        rec("k1", 0x80, 1, &[("long_scoreboard", 200, 200)]),
        rec("k1", 0x80, 3, &[("long_scoreboard", 200, 200)]),
        rec("k2", 0x100, 2, &[("barrier", 150, 150)]),
    ];
    report.attach_pc(&capture);
    let pc = report.pc.as_ref().unwrap();
    assert_eq!(pc.attribution, PcAttribution::Exact);
    assert_eq!(range(pc, "step/fwd").counts.samples, 200);
    assert_eq!(range(pc, "step/bwd").counts.samples, 350);
    assert_eq!(pc.kernels[0].counts.samples, 400, "one kernel row per function over its launches");
    // One record without an id is shared by time.
    capture.records.push(rec("k1", 0x90, 0, &[("wait", 4, 0)]));
    let mut report = nested_report();
    report.attach_pc(&capture);
    let pc = report.pc.as_ref().unwrap();
    assert_eq!(pc.attribution, PcAttribution::Mixed);
    assert_eq!(range(pc, "step/fwd").counts.samples, 203);
}

#[test]
fn losses_become_warnings_and_no_samples_is_no_attribution() {
    let mut report = nested_report();
    let mut capture = continuous_capture();
    capture.hardware_buffer_full = 2;
    capture.errors.push("reading PC samples failed".into());
    report.attach_pc(&capture);
    let w = report.meta.warnings.join("\n");
    assert!(w.contains("dropped 7 of 1400 samples (0.50 %)"), "{w}");
    assert!(w.contains("2 drain(s) found the hardware buffer full: CUPTI discarded samples"), "{w}");
    assert!(w.contains("Sample counts are incomplete"), "{w}");
    let line = &gmprof::report::pc_summary::pc_lines(report.pc.as_ref().unwrap())[0];
    assert!(line.contains("hardware buffer full: 2 (samples lost, counts incomplete: see the warning)"), "{line}");
    assert!(w.contains("25 sample(s) are in functions with no launch"), "{w}");
    assert!(w.contains("PC sampling: reading PC samples failed"), "{w}");
    let mut report = nested_report();
    report.attach_pc(&PcCapture { reasons: reasons(), collection: "continuous".into(), ..Default::default() });
    let pc = report.pc.as_ref().unwrap();
    assert_eq!(pc.attribution, PcAttribution::None);
    assert!(pc.ranges.iter().all(|r| r.counts.samples == 0 && r.counts.few_samples()));
}

#[test]
fn stalls_and_pc_samples_csv_match_golden_and_json_round_trips() {
    let mut report = nested_report();
    report.attach_pc(&continuous_capture());
    let dir = tempfile::tempdir().unwrap();
    report.write_all(dir.path()).unwrap();
    let stalls = std::fs::read_to_string(dir.path().join("stalls.csv")).unwrap();
    check_golden("stalls.csv", &stalls);
    let pcs = std::fs::read_to_string(dir.path().join("pc_samples.csv")).unwrap();
    check_golden("pc_samples.csv", &pcs);
    let json = std::fs::read_to_string(dir.path().join("report.json")).unwrap();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.pc, report.pc);
    // A recorded capture reads back as it was written (GMPROF_PC_RECORD's format).
    let recorded = serde_json::to_string(&continuous_capture()).unwrap();
    assert_eq!(serde_json::from_str::<PcCapture>(&recorded).unwrap(), continuous_capture());
    // A report without PC sampling writes no pc section and no PC files.
    let plain = nested_report();
    assert!(!serde_json::to_string(&plain).unwrap().contains("\"pc\""));
    let dir = tempfile::tempdir().unwrap();
    plain.write_all(dir.path()).unwrap();
    assert!(!dir.path().join("stalls.csv").exists());
}

#[test]
fn the_summary_names_the_top_reasons_of_the_top_ranges() {
    let mut report = nested_report();
    report.attach_pc(&continuous_capture());
    let text = report.summary().to_string();
    check_golden("pc_summary.txt", &text);
    assert!(text.contains("PC sampling: 1265 samples every 2^12 = 4096 cycles | dropped: 7"), "{text}");
    assert!(
        text.contains(
            "stalls in step (1240 samples): Stall Long Scoreboard 32.3%, Stall Barrier 24.2%, Selected 21.8%"
        ),
        "{text}"
    );
    // `tiny` is not among the top three; a lone few-sample range says so instead of shares.
    let mut capture = continuous_capture();
    capture.records.retain(|r| r.function == "k3");
    let mut report = nested_report();
    report.attach_pc(&capture);
    let text = report.summary().to_string();
    assert!(text.contains("stalls in step (40 samples): too few samples for shares (< 100)"), "{text}");
}

#[test]
fn no_samples_while_kernels_ran_is_said() {
    let mut report = nested_report();
    report.attach_pc(&PcCapture { reasons: reasons(), collection: "continuous".into(), ..Default::default() });
    let w = report.meta.warnings.join("\n");
    assert!(w.contains("PC sampling recorded no samples although 4 kernel(s) ran"), "{w}");
}

#[test]
fn the_html_report_gets_a_stacked_bar_per_range_group_and_a_hot_spot_table() {
    let mut report = nested_report();
    report.attach_pc(&continuous_capture());
    let page = report.to_html(&gmprof::report::SummaryOptions::default()).unwrap();
    assert!(page.contains("id=\"pc-section\""));
    let view = gmprof::report::html::pc::pc_view(report.pc.as_ref().unwrap());
    assert_eq!(view.groups.iter().map(|g| g.label.as_str()).collect::<Vec<_>>()[..3], ["step", "step/bwd", "step/fwd"]);
    let tiny = view.groups.iter().find(|g| g.label == "step/tiny").unwrap();
    assert!(tiny.few && tiny.shares.iter().all(Option::is_none), "no bar for too few samples");
    let fwd = view.groups.iter().find(|g| g.label == "step/fwd").unwrap();
    assert_eq!(fwd.shares.iter().flatten().sum::<f64>().round(), 100.0);
    assert_eq!(view.kernels[0].name, "k1");
    assert_eq!(
        view.kernels[0].hot[0],
        "+0x80 `LDG.E.128 R4, desc[UR6][R2.64]` (520 samples, Stall Long Scoreboard) at /src/train_gpt2.cu:412"
    );
    // The report as JSON, for scripts/check-html.sh (`gmprof report FILE --html`).
    if let Ok(path) = std::env::var("GMPROF_PC_REPORT_JSON") {
        report.write_json(path).unwrap();
    }
}

#[test]
fn records_match_launches_by_mangled_or_demangled_name() {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let thread: ThreadId = 1;
    tree.push("step", thread, T0);
    launch_kernel(&tree, &mut correlator, thread, 1, "_Z2k4v", T0 + 10 * US, T0 + 20 * US);
    tree.pop(thread, T0 + 30 * US).unwrap();
    let mut report = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, correlator);
    assert_eq!(report.kernels[0].kernel_name.as_deref(), Some("k4()"));
    let mut capture = continuous_capture();
    capture.records = vec![rec("_Z2k4v", 0x10, 0, &[("wait", 150, 0)]), rec("k4()", 0x20, 0, &[("selected", 50, 0)])];
    report.attach_pc(&capture);
    let pc = report.pc.as_ref().unwrap();
    assert_eq!(pc.unattributed_samples, 0);
    assert_eq!(range(pc, "step").counts.samples, 200);
    assert!(pc.kernels.iter().all(|k| k.launches == 1 && k.kernel_name.as_deref() == Some("k4()")));
}

#[test]
fn the_summary_folds_numbered_range_names_into_one_group() {
    let mut tree = SessionTree::new();
    let mut correlator = Correlator::new();
    let thread: ThreadId = 1;
    for i in 0..3u32 {
        tree.push(&format!("Train step {i}"), thread, T0 + u64::from(i) * 1_000 * US);
        let start = T0 + u64::from(i) * 1_000 * US + 10 * US;
        launch_kernel(&tree, &mut correlator, thread, i + 1, "k1", start, start + 100 * US);
        tree.pop(thread, T0 + u64::from(i) * 1_000 * US + 500 * US).unwrap();
    }
    let mut report = Report::analyze(CaptureInfo::new(ProfilingMode::Trace), &MetricSet::default(), &tree, correlator);
    let mut capture = continuous_capture();
    capture.records = vec![rec("k1", 0x10, 0, &[("long_scoreboard", 240, 0), ("selected", 60, 0)])];
    report.attach_pc(&capture);
    let text = report.summary().to_string();
    assert!(
        text.contains("stalls in Train step # (300 samples): Stall Long Scoreboard 80.0%, Selected 20.0%"),
        "{text}"
    );
    // Each instance has its third of the samples (100: enough for shares) in stalls.csv.
    let pc = report.pc.as_ref().unwrap();
    assert!(pc.ranges.iter().all(|r| r.counts.samples == 100), "{:?}", pc.ranges);
}

#[path = "common/cdylib.rs"]
mod cdylib;
#[path = "common/gmprof_run.rs"]
mod gmprof_run;

/// `gmprof run --pc-sampling` picks trace mode when no mode is given, and refuses a counter
/// mode before the program starts (beside per_range CUPTI delivered no sample on an H100).
#[test]
fn gmprof_run_pc_sampling_picks_trace_and_refuses_counter_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = cdylib::cdylib();
    let run = |extra: &[&str]| {
        gmprof_run::gmprof_run(tmp.path(), &lib, extra, "echo mode=$GMPROF_MODE pc=$GMPROF_PC_SAMPLING")
    };
    let (code, stdout, stderr) = run(&["--pc-sampling"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "mode=trace pc=default");
    let (_, stdout, _) = run(&["--pc-sampling=cupti"]);
    assert_eq!(stdout.trim(), "mode=trace pc=cupti");
    for mode in ["per_range", "per_kernel", "kernel_replay"] {
        let (code, stdout, stderr) = run(&["--mode", mode, "--pc-sampling"]);
        assert_eq!(code, Some(1), "{mode}: {stderr}");
        assert!(stdout.is_empty(), "{mode}: the program did not start");
        assert!(
            stderr.contains(&format!("--pc-sampling runs beside --mode trace only: beside {mode} mode")),
            "{stderr}"
        );
        assert!(stderr.contains("Sample with --mode trace --pc-sampling"), "{stderr}");
    }
}

/// `gmprof run --pc-sampling --pm-sampling` is refused before the program starts (with both
/// on, CUPTI took no PC sample and crashed nanoGPT at its exit on an H200); `--pm-sampling 0`
/// is PM sampling off, so PC sampling runs.
#[test]
fn gmprof_run_refuses_pc_sampling_beside_pm_sampling() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = cdylib::cdylib();
    let run = |extra: &[&str]| gmprof_run::gmprof_run(tmp.path(), &lib, extra, "echo started");
    for pm in ["default", "dram"] {
        let (code, stdout, stderr) = run(&["--pc-sampling", "--pm-sampling", pm]);
        assert_eq!(code, Some(1), "{pm}: {stderr}");
        assert!(stdout.is_empty(), "{pm}: the program did not start");
        assert!(stderr.contains("--pc-sampling does not run beside --pm-sampling"), "{stderr}");
        assert!(stderr.contains("Run them as two runs"), "{stderr}");
    }
    let (code, stdout, stderr) = run(&["--pc-sampling", "--pm-sampling", "0"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "started");
}

/// The builder (and so the environment, the C ABI and Python) refuses PC sampling beside PM
/// sampling before it loads CUPTI or touches a GPU.
#[test]
fn the_builder_refuses_pc_sampling_beside_pm_sampling_before_anything_starts() {
    use gmprof::capture::pc_sampling::PcSamplingConfig;
    use gmprof::capture::pm_sampling::PmSamplingConfig;
    let pm = PmSamplingConfig::from_lookup(|name| {
        (name == gmprof::capture::pm_sampling::PM_SAMPLING_ENV).then(|| "default".to_owned())
    })
    .unwrap();
    assert!(pm.is_some());
    let e = gmprof::Profiler::builder()
        .mode(ProfilingMode::Trace)
        .pm_sampling(pm)
        .pc_sampling(PcSamplingConfig::from_value("default").unwrap())
        .build()
        .expect_err("refused");
    assert!(matches!(e, gmprof::Error::InvalidConfig(_)), "{e}");
    assert!(e.to_string().contains("--pc-sampling does not run beside --pm-sampling"), "{e}");
}

/// The builder (and so the C ABI, Python and the environment) refuses PC sampling beside a
/// counter mode before it loads CUPTI or touches a GPU.
#[test]
fn the_builder_refuses_pc_sampling_beside_a_counter_mode_before_anything_starts() {
    use gmprof::capture::pc_sampling::PcSamplingConfig;
    for mode in [ProfilingMode::PerRange, ProfilingMode::PerKernel, ProfilingMode::KernelReplay] {
        let e = gmprof::Profiler::builder()
            .mode(mode)
            .pc_sampling(PcSamplingConfig::from_value("default").unwrap())
            .build()
            .expect_err("refused");
        assert!(matches!(e, gmprof::Error::InvalidConfig(_)), "{e}");
        let text = e.to_string();
        assert!(text.contains(&format!("beside {} mode CUPTI samples no PCs", mode.as_str())), "{text}");
    }
}
