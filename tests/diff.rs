//! `gmprof diff` on runs built from the recorded golden report: known answers for the rank
//! test's verdicts, the CI gate, one-sided rows, pooled processes, the comparability
//! warnings, and golden files for the table and the CSV.

#[path = "common/golden.rs"]
mod golden;

use std::path::Path;
use std::process::Command;

use gmprof::report::diff::{Diff, DiffOptions, Gate, Kind, Verdict, GPU_TIME};
use gmprof::report::merge::ProcessReport;
use gmprof::Report;
use golden::check_golden;
use serde_json::{json, Value};

/// A small deterministic generator (a 64-bit LCG): the runs' noise is the same in every test.
struct Noise(u64);

impl Noise {
    /// A factor in [1 − spread, 1 + spread].
    fn factor(&mut self, spread: f64) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let unit = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + spread * (2.0 * unit - 1.0)
    }
}

/// The shape of a training step: (path, parent index, name, mean kernel time in ns, kernels).
const STEP: [(&str, Option<usize>, &str, f64, u64); 8] = [
    ("train_step", None, "train_step", 0.0, 0),
    ("train_step/forward", Some(0), "forward", 0.0, 0),
    ("train_step/forward/attention", Some(1), "attention", 52_000.0, 3),
    ("train_step/forward/mlp", Some(1), "mlp", 81_000.0, 2),
    ("train_step/backward", Some(0), "backward", 0.0, 0),
    ("train_step/backward/attention", Some(4), "attention", 97_000.0, 5),
    ("train_step/backward/mlp", Some(4), "mlp", 150_000.0, 4),
    ("train_step/optimizer", Some(0), "optimizer", 40_000.0, 1),
];

/// How a run differs from the baseline.
#[derive(Clone, Copy)]
struct Variant {
    /// Factor on the kernel time of ranges whose path ends with this name.
    slow: Option<(&'static str, f64)>,
    /// Noise of each kernel's time, as a fraction.
    spread: f64,
    seed: u64,
    steps: u32,
    mode: &'static str,
    device: &'static str,
}

const BASE: Variant =
    Variant { slow: None, spread: 0.03, seed: 1, steps: 20, mode: "trace", device: "NVIDIA H100 80GB HBM3" };

/// A report of `v.steps` training steps (and one warm-up step 0 four times slower), from the
/// golden report's rows as templates: per-instance GPU times with noise, kernels in every leaf.
fn run(v: Variant) -> Report {
    let golden: Value = serde_json::from_str(include_str!("golden/report.json")).unwrap();
    let range_template = golden["ranges"][1].clone();
    let kernel_template = golden["kernels"][1].clone();
    let mut noise = Noise(v.seed);
    let mut ranges = Vec::new();
    let mut kernels = Vec::new();
    let mut slot = 0u64;
    let mut correlation = 1u64;
    let mut clock = 1_000_000u64;
    for step in 0..=v.steps {
        let first = slot;
        // Leaves first (their time is what their kernels took), then sums into parents.
        let mut times = [0u64; STEP.len()];
        let mut counts = [0u64; STEP.len()];
        let mut step_kernels = Vec::new();
        for (i, &(path, _, name, mean, n)) in STEP.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let factor = match v.slow {
                Some((which, f)) if name == which => f,
                _ => 1.0,
            } * if step == 0 { 4.0 } else { 1.0 };
            for k in 0..n {
                let duration = (mean / n as f64 * factor * noise.factor(v.spread)).round() as u64;
                times[i] += duration;
                counts[i] += 1;
                let pass = if path.contains("backward") { "bwd" } else { "fwd" };
                step_kernels.push((i, path, format!("{name}_{pass}_{k}"), duration));
            }
        }
        for i in (0..STEP.len()).rev() {
            if let Some(parent) = STEP[i].1 {
                times[parent] += times[i];
                counts[parent] += counts[i];
            }
        }
        for (i, &(path, parent, name, _, _)) in STEP.iter().enumerate() {
            let mut row = range_template.clone();
            row["range_id"] = json!({"slot": first + i as u64, "generation": 0});
            row["parent_id"] = match parent {
                Some(p) => json!({"slot": first + p as u64, "generation": 0}),
                None => Value::Null,
            };
            row["path"] = json!(path);
            row["name"] = json!(name);
            row["depth"] = json!(path.matches('/').count());
            row["instance"] = json!(step);
            row["kernel_count"] = json!(counts[i]);
            row["self_kernel_count"] = json!(if STEP[i].4 > 0 { counts[i] } else { 0 });
            row["gpu_time_ns"] = json!(times[i]);
            row["metrics"] = json!([Value::Null, Value::Null, Value::Null, Value::Null]);
            for derived in
                ["dram_read_bytes", "dram_write_bytes", "dram_read_gbps", "dram_write_gbps", "dram_total_gbps"]
            {
                row[derived] = Value::Null;
            }
            ranges.push(row);
        }
        for (i, path, name, duration) in step_kernels {
            let mut k = kernel_template.clone();
            k["range_id"] = json!({"slot": first + i as u64, "generation": 0});
            k["range_path"] = json!(path);
            k["correlation_id"] = json!(correlation);
            k["kernel_name"] = json!(name);
            k["mangled_name"] = json!(name);
            k["start_ns"] = json!(clock);
            k["end_ns"] = json!(clock + duration);
            k["duration_ns"] = json!(duration);
            k["metrics"] = json!([Value::Null, Value::Null, Value::Null, Value::Null]);
            correlation += 1;
            clock += duration + 1_000;
            kernels.push(k);
        }
        slot += STEP.len() as u64;
    }
    let mut report = golden.clone();
    report["ranges"] = Value::Array(ranges);
    report["kernels"] = Value::Array(kernels);
    report["transfers"] = json!([]);
    report["meta"]["mode"] = json!(v.mode);
    report["meta"]["device_name"] = json!(v.device);
    report["meta"]["kernel_count"] = json!(report["kernels"].as_array().unwrap().len());
    report["meta"]["dropped_activity_records"] = json!(0);
    report["meta"]["flagged_kernel_rows"] = json!(0);
    Report::from_json(&report.to_string()).unwrap()
}

fn process(label: &str, v: Variant) -> ProcessReport {
    ProcessReport { label: label.into(), dir: label.into(), report: run(v) }
}

fn diff(base: Variant, new: Variant, skip_first: u32) -> Diff {
    let options = DiffOptions { skip_first, ..DiffOptions::default() };
    Diff::of("base", &[process("base", base)], "new", &[process("new", new)], options)
}

fn time_row<'a>(d: &'a Diff, kind: Kind, name: &str) -> &'a gmprof::report::diff::DiffRow {
    d.rows
        .iter()
        .find(|r| r.kind == kind && r.name == name && r.quantity == GPU_TIME)
        .unwrap_or_else(|| panic!("no {name} row"))
}

#[test]
fn two_runs_of_the_same_configuration_show_no_change() {
    let d = diff(BASE, Variant { seed: 2, ..BASE }, 1);
    let marked: Vec<_> = d.changes().map(|r| (&r.name, &r.quantity, r.verdict)).collect();
    assert!(marked.is_empty(), "{marked:?}");
    // Every range group and kernel was tested on 20 instances a side.
    let ranges: Vec<_> = d.time_rows(Kind::Range).collect();
    assert_eq!(ranges.len(), STEP.len());
    assert!(ranges.iter().all(|r| r.verdict == Verdict::Noise && r.base_n == 20 && r.new_n == 20), "{ranges:?}");
    assert_eq!(d.time_rows(Kind::Kernel).count(), 15);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn a_slower_layer_marks_it_and_its_ancestors_and_nothing_else() {
    let d = diff(BASE, Variant { slow: Some(("mlp", 1.15)), seed: 2, ..BASE }, 1);
    let verdict = |name: &str| time_row(&d, Kind::Range, name).verdict;
    for slower in
        ["train_step", "train_step/forward", "train_step/forward/mlp", "train_step/backward", "train_step/backward/mlp"]
    {
        assert_eq!(verdict(slower), Verdict::Slower, "{slower}");
    }
    for same in ["train_step/forward/attention", "train_step/backward/attention", "train_step/optimizer"] {
        assert_eq!(verdict(same), Verdict::Noise, "{same}");
    }
    let mlp = time_row(&d, Kind::Range, "train_step/backward/mlp");
    let pct = mlp.change_pct.unwrap();
    assert!((pct - 15.0).abs() < 2.5, "{pct}");
    assert!(mlp.p_adjusted.unwrap() < 1e-6, "{mlp:?}");
    // The step is the largest impact and comes first; its impact is Σ of the mlp changes:
    // 20 steps × 15 % × (81 + 150) us ≈ 693 us per process.
    assert_eq!(d.rows[0].name, "train_step");
    let impact = d.rows[0].impact_ns.unwrap();
    assert!((impact - 693_000.0).abs() < 60_000.0, "{impact}");
    // Kernels: the six mlp kernels slower, the others not.
    for r in d.time_rows(Kind::Kernel) {
        let expected = if r.name.starts_with("mlp_") { Verdict::Slower } else { Verdict::Noise };
        assert_eq!(r.base_n, 20, "{}", r.name);
        assert_eq!(r.verdict, expected, "{}", r.name);
    }
    // Kernels per step did not change.
    let kernels = d.rows.iter().find(|r| r.name == "train_step" && r.quantity == "kernels").unwrap();
    assert_eq!((kernels.base_median, kernels.new_median, kernels.verdict), (Some(15.0), Some(15.0), Verdict::Noise));
}

#[test]
fn a_change_below_the_threshold_is_not_marked_even_when_certain() {
    // 1.5 % slower with no noise at all: the rank test is certain, the threshold is 2 %.
    let quiet = Variant { spread: 0.0, ..BASE };
    let d = diff(quiet, Variant { slow: Some(("mlp", 1.015)), ..quiet }, 1);
    let mlp = time_row(&d, Kind::Range, "train_step/forward/mlp");
    assert!(mlp.p_adjusted.unwrap() < 1e-6 && mlp.verdict == Verdict::Noise, "{mlp:?}");
    let options = DiffOptions { skip_first: 1, threshold_pct: 1.0, ..DiffOptions::default() };
    let d = Diff::of(
        "b",
        &[process("b", quiet)],
        "n",
        &[process("n", Variant { slow: Some(("mlp", 1.015)), ..quiet })],
        options,
    );
    assert_eq!(time_row(&d, Kind::Range, "train_step/forward/mlp").verdict, Verdict::Slower);
}

#[test]
fn a_time_change_too_small_for_the_total_is_not_marked() {
    // The optimizer (about 9.5 % of the step) 3 % slower, no noise: 0.29 % of the total.
    let quiet = Variant { spread: 0.0, ..BASE };
    let slower = Variant { slow: Some(("optimizer", 1.03)), ..quiet };
    let judge = |min_impact_pct: f64| {
        let options = DiffOptions { skip_first: 1, min_impact_pct, ..DiffOptions::default() };
        let d = Diff::of("b", &[process("b", quiet)], "n", &[process("n", slower)], options);
        let row = time_row(&d, Kind::Range, "train_step/optimizer").clone();
        (row.verdict, row.impact_pct.unwrap())
    };
    let (verdict, impact) = judge(0.1);
    assert_eq!(verdict, Verdict::Slower);
    assert!((impact - 0.286).abs() < 0.01, "{impact}");
    assert_eq!(judge(0.5).0, Verdict::Noise);
}

#[test]
fn warm_up_is_left_out_and_few_instances_are_not_judged() {
    // With the 4× slower step 0 kept, the base has 21 instances and the warm-up in them.
    let d = diff(BASE, Variant { seed: 2, ..BASE }, 0);
    assert_eq!(time_row(&d, Kind::Range, "train_step").base_n, 21);
    let d = diff(Variant { steps: 3, ..BASE }, Variant { steps: 3, slow: Some(("mlp", 2.0)), seed: 2, ..BASE }, 1);
    let mlp = time_row(&d, Kind::Range, "train_step/forward/mlp");
    assert_eq!((mlp.base_n, mlp.verdict, mlp.p_value), (3, Verdict::TooFew, None));
    assert!((mlp.change_pct.unwrap() - 100.0).abs() < 10.0);
}

#[test]
fn ranges_and_kernels_on_one_side_are_listed_apart() {
    let base = run(BASE);
    let mut new = run(Variant { seed: 2, ..BASE });
    for r in &mut new.ranges {
        r.path = r.path.replace("optimizer", "adamw");
    }
    for k in &mut new.kernels {
        k.kernel_name = k.kernel_name.as_ref().map(|n| n.replace("optimizer", "fused_adamw"));
    }
    let p = |label: &str, report: Report| ProcessReport { label: label.into(), dir: label.into(), report };
    let options = DiffOptions { skip_first: 1, ..DiffOptions::default() };
    let d = Diff::of("b", &[p("b", base)], "n", &[p("n", new)], options);
    let only =
        |v: Verdict| -> Vec<&str> { d.rows.iter().filter(|r| r.verdict == v).map(|r| r.name.as_str()).collect() };
    assert_eq!(only(Verdict::OnlyBase), ["train_step/optimizer", "optimizer_fwd_0"]);
    assert_eq!(only(Verdict::OnlyNew), ["train_step/adamw", "fused_adamw_fwd_0"]);
    let gone = time_row(&d, Kind::Range, "train_step/optimizer");
    assert_eq!((gone.base_count, gone.new_count, gone.new_n), (20.0, 0.0, 0));
    assert!(gone.impact_ns.unwrap() < -700_000.0, "{gone:?}"); // 20 × 40 us, less noise
}

#[test]
fn processes_are_pooled_and_counted_per_process() {
    let options = DiffOptions { skip_first: 1, ..DiffOptions::default() };
    let base = [process("r0", BASE), process("r1", Variant { seed: 3, ..BASE })];
    let new = [
        process("r0", Variant { seed: 4, slow: Some(("attention", 1.1)), ..BASE }),
        process("r1", Variant { seed: 5, slow: Some(("attention", 1.1)), ..BASE }),
    ];
    let d = Diff::of("b", &base, "n", &new, options);
    let attn = time_row(&d, Kind::Range, "train_step/backward/attention");
    assert_eq!((attn.base_n, attn.new_n, attn.base_count, attn.new_count), (40, 40, 20.0, 20.0));
    assert_eq!(attn.verdict, Verdict::Slower);
    assert_eq!(time_row(&d, Kind::Range, "train_step/optimizer").verdict, Verdict::Noise);
    assert_eq!(d.base.processes, ["r0", "r1"]);
}

#[test]
fn runs_that_differ_in_gpu_or_mode_are_called_not_comparable() {
    let d = diff(BASE, Variant { mode: "per_kernel", device: "NVIDIA H200", seed: 2, ..BASE }, 1);
    assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
    assert!(d.warnings[0].starts_with("different GPUs: NVIDIA H100 80GB HBM3 against NVIDIA H200"));
    assert!(d.warnings[1].starts_with("different modes: trace against per_kernel"));
    let mut partial = run(BASE);
    partial.meta.driver_version = Some("580.95.05".into());
    partial.meta.flagged_kernel_rows = 3;
    let mut other = run(Variant { seed: 2, ..BASE });
    other.meta.driver_version = Some("575.57.08".into());
    let p = |label: &str, report: Report| ProcessReport { label: label.into(), dir: label.into(), report };
    let d = Diff::of("b", &[p("b", partial)], "n", &[p("n", other)], DiffOptions::default());
    assert_eq!(
        d.warnings,
        [
            "different drivers: 580.95.05 against 575.57.08",
            "base b: 0 dropped activity records, 0 dropped counter ranges, 3 flagged kernel rows"
        ]
    );
}

#[test]
fn the_gate_trips_on_slower_ranges_beyond_noise_and_tolerance() {
    let d = diff(BASE, Variant { slow: Some(("mlp", 1.15)), seed: 2, ..BASE }, 1);
    let names = |gate: &Gate| -> Vec<String> { d.tripped(gate).map(|r| r.name.clone()).collect() };
    // The mlp ranges are 15 % slower, their parents 9 %, the step 8 %.
    assert_eq!(names(&Gate::slower(10.0)), ["train_step/backward/mlp", "train_step/forward/mlp"]);
    assert_eq!(
        names(&Gate::slower(5.0)),
        [
            "train_step",
            "train_step/backward",
            "train_step/backward/mlp",
            "train_step/forward",
            "train_step/forward/mlp"
        ]
    );
    assert!(names(&Gate::slower(20.0)).is_empty());
    assert!(names(&Gate { rise_is_bad: false, ..Gate::slower(1.0) }).is_empty(), "nothing got faster");
    let gate = Gate::parse("kernels=5", true).unwrap();
    assert_eq!((gate.quantity.as_str(), gate.rise_is_bad, gate.pct), ("kernels", true, 5.0));
    assert!(names(&gate).is_empty());
    assert!(Gate::parse("dram__bytes_read.sum", true).is_err());
    assert!(Gate::parse("=3", true).is_err());
    assert!(Gate::parse("x=-3", true).is_err());
}

#[test]
fn table_and_csv_match_their_golden_files() {
    let d = diff(BASE, Variant { slow: Some(("mlp", 1.15)), seed: 2, ..BASE }, 1);
    let table = gmprof::report::diff::table::DiffTable { diff: &d, top: Some(6) }.to_string();
    check_golden("diff_table.txt", &format!("{table}\n"));
    let mut csv = Vec::new();
    d.write_csv_to(&mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    // The CSV's header is the documented column list.
    let header = csv.lines().find(|l| !l.starts_with('#')).unwrap();
    let columns: Vec<String> = header.split(',').map(|c| c.trim_matches('"').to_owned()).collect();
    assert_eq!(columns, gmprof::report::diff::export::DIFF_COLUMNS);
    check_golden("diff.csv", &csv);
    // JSON round-trips (floats to their last digit or so).
    let back: Diff = serde_json::from_str(&d.to_json_string().unwrap()).unwrap();
    assert_eq!((&back.base, &back.new, &back.warnings, back.rows.len()), (&d.base, &d.new, &d.warnings, d.rows.len()));
    for (b, r) in back.rows.iter().zip(&d.rows) {
        assert_eq!((&b.name, &b.quantity, b.verdict, b.base_n), (&r.name, &r.quantity, r.verdict, r.base_n));
        assert!(b.change_pct.zip(r.change_pct).is_none_or(|(x, y)| (x - y).abs() < 1e-9));
    }
}

fn gmprof(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn write(dir: &Path, v: Variant) {
    run(v).write_all(dir).unwrap();
}

#[test]
fn the_command_prints_writes_and_gates() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, new) = (tmp.path().join("base"), tmp.path().join("new"));
    write(&base, BASE);
    // The new run has two ranks.
    write(&new.join("node-0"), Variant { slow: Some(("mlp", 1.15)), seed: 2, ..BASE });
    write(&new.join("node-1"), Variant { slow: Some(("mlp", 1.15)), seed: 3, ..BASE });
    let csv = tmp.path().join("diff.csv");
    let html = tmp.path().join("diff.html");
    let (code, stdout, stderr) = gmprof(&[
        "diff".as_ref(),
        base.as_os_str(),
        new.as_os_str(),
        "--skip-first".as_ref(),
        "1".as_ref(),
        "--csv".as_ref(),
        csv.as_os_str(),
        "--html".as_ref(),
        html.as_os_str(),
        "--fail-if-slower".as_ref(),
        "10".as_ref(),
    ]);
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(stdout.contains("(2 processes, NVIDIA H100 80GB HBM3, trace)"), "{stdout}");
    assert!(stdout.contains("warning: not comparable: different numbers of processes: 1 against 2"), "{stdout}");
    assert!(stderr.contains("gate tripped: 2 range(s) GPU time slower by more than 10 %"), "{stderr}");
    assert!(stderr.contains("gmprof:   train_step/backward/mlp (+1"), "{stderr}");
    assert!(std::fs::read_to_string(&csv).unwrap().contains("\"range\",\"train_step/forward/mlp\",\"gpu_time_ns\""));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<script type=\"application/json\" id=\"gmprof-data\">{\"base\":"),
        "the diff is the page's data"
    );

    // Within tolerance: exit 0.
    let (code, _, stderr) = gmprof(&[
        "diff".as_ref(),
        base.as_os_str(),
        new.as_os_str(),
        "--skip-first".as_ref(),
        "1".as_ref(),
        "--fail-if-slower".as_ref(),
        "25".as_ref(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("gate passed"), "{stderr}");

    // CSV to standard output, no table.
    let (code, stdout, _) =
        gmprof(&["diff".as_ref(), base.as_os_str(), base.as_os_str(), "--csv".as_ref(), "-".as_ref()]);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("# gmprof diff "), "{stdout}");

    // Mistakes get a clear error.
    let (code, _, stderr) = gmprof(&["diff".as_ref(), base.as_os_str(), tmp.path().join("nothing").as_os_str()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no such directory or report.json"), "{stderr}");
    let (code, _, stderr) = gmprof(&[
        "diff".as_ref(),
        base.as_os_str(),
        new.as_os_str(),
        "--fail-if-higher".as_ref(),
        "dram__bytes_read.sum=5".as_ref(),
    ]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("names a quantity neither run has"), "{stderr}");
    let (code, _, stderr) = gmprof(&["diff".as_ref(), base.as_os_str(), tmp.path().as_os_str()]);
    assert_eq!(code, Some(0), "a root of several runs is pooled: {stderr}");
}

/// A recorded run: `report.json` of torch_gpt.py under `gmprof run --mode trace` on an H100
/// (tests/data/diff/README.md), zstd-compressed.
fn recorded(name: &str) -> ProcessReport {
    use std::io::Read;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/diff").join(name);
    let bytes = std::fs::read(&path).unwrap();
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(&mut bytes.as_slice()).unwrap().read_to_string(&mut text).unwrap();
    ProcessReport { label: name.into(), dir: path, report: Report::from_json(&text).unwrap() }
}

#[test]
fn recorded_h100_runs_a_wider_mlp_marks_the_mlp_and_what_holds_it() {
    let base = recorded("torch_gpt_base.json.zst");
    let wide = recorded("torch_gpt_wide_mlp.json.zst");
    assert_eq!(base.report.meta.driver_version.as_deref(), Some("580.159.04"));
    let options = DiffOptions { skip_first: 1, ..DiffOptions::default() };
    let d = Diff::of("base", std::slice::from_ref(&base), "wide", &[wide], options);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    let mut marked: Vec<(&str, Verdict)> =
        d.time_rows(Kind::Range).filter(|r| r.verdict.is_change()).map(|r| (r.name.as_str(), r.verdict)).collect();
    marked.sort_by_key(|m| m.0);
    // Twice the MLP width: the MLPs forward and backward, the blocks and the model that hold
    // them, the step, and AdamW (the MLPs hold most of the parameters) are slower.
    let slower = [
        "step",
        "step/backward/GPT/h.#/mlp",
        "step/backward/GPT/h.#",
        "step/backward",
        "step/backward/GPT",
        "step/GPT/h.#/mlp",
        "step/GPT/h.#",
        "step/GPT",
        "step/AdamW.step",
    ];
    let mut expected: Vec<(&str, Verdict)> = slower.iter().map(|&s| (s, Verdict::Slower)).collect();
    expected.sort_by_key(|m| m.0);
    assert_eq!(marked, expected);
    assert_eq!(d.rows[0].name, "step", "the step has the largest impact");
    // Attention, layer norms, embeddings, the head: 29 instances a side, not marked.
    for same in [
        "step/GPT/h.#/attn",
        "step/backward/GPT/h.#/attn",
        "step/GPT/h.#/ln_#",
        "step/GPT/lm_head",
        "step/GPT/wte",
        "step/backward/GPT/wpe",
    ] {
        let r = time_row(&d, Kind::Range, same);
        assert_eq!((r.verdict, r.base_n >= 29), (Verdict::Noise, true), "{same}: {r:?}");
    }
    let mlp = time_row(&d, Kind::Range, "step/GPT/h.#/mlp");
    assert!(mlp.change_pct.unwrap() > 50.0, "{mlp:?}");
    // A run against itself: nothing marked, every p-value 1.
    let d = Diff::of("base", std::slice::from_ref(&base), "base", std::slice::from_ref(&base), options);
    assert_eq!(d.changes().count(), 0);
    assert!(d.rows.iter().filter_map(|r| r.p_adjusted).all(|p| p == 1.0));
}
