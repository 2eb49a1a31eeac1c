//! `trace.json` in the Kineto form (`--trace-format kineto`), for Holistic Trace Analysis:
//! pinned by a golden file, checked by `gmprof check-trace`, and the two-rank traces of
//! `tests/data/hta/` (which `scripts/check/hta_check.py` runs HTA on) kept what the scripted
//! run writes (`GMPROF_BLESS=1` rewrites them).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use gmprof::report::kineto::{to_kineto_json, TraceFormat, TraceOptions};
use gmprof::report::OutputFormats;
use gmprof::trace_check::{check_trace_json, CheckOptions, Rule};
use serde_json::Value;

#[path = "common/golden.rs"]
mod golden;
#[path = "common/hta_run.rs"]
mod hta_run;
use hta_run::{rank_options, rank_report, ALL_REDUCE, COMPUTE_STREAM, LAUNCH_CALL_NS, NCCL_STREAM, TRANSFER_CALL_NS};

fn events(trace: &Value) -> &Vec<Value> {
    trace["traceEvents"].as_array().expect("traceEvents")
}

fn of_cat<'a>(trace: &'a Value, cat: &str) -> Vec<&'a Value> {
    events(trace).iter().filter(|e| e["cat"] == cat).collect()
}

fn kineto_text(rank: u32, steps: u32) -> String {
    to_kineto_json(&rank_report(rank, steps).to_kineto_trace(&rank_options(rank))).expect("serialize")
}

#[test]
fn golden_kineto_trace_of_one_step_passes_check_trace() {
    let text = kineto_text(0, 1);
    golden::check_golden("kineto_trace.json", &text);
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:?}", check.violations);
    assert_eq!(check.events, events(&serde_json::from_str(&text).unwrap()).len());
}

#[test]
fn the_trace_holds_what_hta_reads() {
    let report = rank_report(1, 3);
    let text = to_kineto_json(&report.to_kineto_trace(&rank_options(1))).unwrap();
    // HTA finds a file's rank with `"rank":\s+(\d+)`: the first match is distributedInfo's.
    let at = text.find("\"rank\": ").expect("a spaced rank");
    assert!(text[..at].contains("\"distributedInfo\": {") && text[at..].starts_with("\"rank\": 1,"), "{}", &text[..at]);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let info = &trace["distributedInfo"];
    assert_eq!(
        (info["rank"].as_u64(), info["world_size"].as_u64(), info["local_rank"].as_u64()),
        (Some(1), Some(2), Some(1))
    );
    assert_eq!(trace["schemaVersion"], 1);
    let device = &trace["deviceProperties"][0];
    assert_eq!(device["id"], 1);
    assert_eq!(device["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(
        (device["computeMajor"].as_u64(), device["computeMinor"].as_u64(), device["numSms"].as_u64()),
        (Some(9), Some(0), Some(132))
    );
    // Not measured, so not written (Kineto's totalGlobalMem, ...).
    assert!(device.get("totalGlobalMem").is_none());
    let origin = trace["otherData"]["origin_unix_ns"].as_u64().unwrap();
    assert_eq!(trace["baseTimeNanoseconds"].as_u64(), Some(origin));

    // 3 steps × (2 layers × 3 forward + 2 × 4 backward + the optimizer's) kernels, 2 of them
    // NCCL's per step; a memcpy and a memset per step; 4 ranges per step.
    let kernels = of_cat(&trace, "kernel");
    assert_eq!(kernels.len(), 45);
    let nccl: Vec<_> = kernels.iter().filter(|k| k["name"] == ALL_REDUCE).collect();
    assert_eq!(nccl.len(), 6);
    assert!(nccl.iter().all(|k| k["args"]["stream"] == NCCL_STREAM && k["tid"] == NCCL_STREAM));
    assert_eq!(of_cat(&trace, "gpu_memcpy").len(), 3);
    assert_eq!(of_cat(&trace, "gpu_memset").len(), 3);
    assert!(of_cat(&trace, "gpu_memcpy").iter().all(|m| m["name"] == "Memcpy HtoD" && m["args"]["bytes"] == 4 << 20));
    assert!(of_cat(&trace, "gpu_memset")
        .iter()
        .all(|m| m["name"] == "Memset" && m["args"]["stream"] == COMPUTE_STREAM));
    let annotations = of_cat(&trace, "user_annotation");
    assert_eq!(annotations.len(), 15, "12 ranges and 3 ProfilerStep#N");
    assert!(annotations.iter().all(|a| a["pid"] == 31_401 && a["tid"] == 40_101 && a["args"]["External id"].is_u64()));
    let ids: std::collections::BTreeSet<u64> =
        annotations.iter().map(|a| a["args"]["External id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), 15, "each annotation its own External id");

    // Kineto's arg names on every kernel; the GPU's pid is its ordinal.
    for k in &kernels {
        let args = &k["args"];
        assert_eq!((k["pid"].as_u64(), args["device"].as_u64()), (Some(1), Some(1)), "{k}");
        assert_eq!(args["stream"], k["tid"]);
        for key in ["correlation", "grid", "block", "registers per thread", "shared memory", "External id", "launch_ts"]
        {
            assert!(!args[key].is_null(), "{key} missing: {k}");
        }
        assert!(args.get("queued").is_none(), "not measured: {k}");
    }
    // Each kernel's launch: a cudaLaunchKernel event of the same correlation id, on the
    // launching thread, from its stamp to its return, before the kernel, and a flow from it
    // to the kernel; each memcpy's and memset's call likewise.
    let runtime: HashMap<u64, &Value> =
        of_cat(&trace, "cuda_runtime").into_iter().map(|r| (r["args"]["correlation"].as_u64().unwrap(), r)).collect();
    assert_eq!(runtime.len(), 45 + 6);
    let call_us = LAUNCH_CALL_NS as f64 / 1000.0;
    for k in &kernels {
        let launch = runtime[&k["args"]["correlation"].as_u64().unwrap()];
        assert_eq!(launch["name"], "cudaLaunchKernel");
        assert_eq!((launch["tid"].as_u64(), launch["dur"].as_f64()), (Some(40_101), Some(call_us)));
        assert_eq!(launch["ts"], k["args"]["launch_ts"]);
        assert!(launch["ts"].as_f64().unwrap() + call_us < k["ts"].as_f64().unwrap());
        assert_eq!(launch["args"]["External id"], k["args"]["External id"]);
    }
    for (cat, api) in [("gpu_memcpy", "cudaMemcpyAsync"), ("gpu_memset", "cudaMemsetAsync")] {
        for copy in of_cat(&trace, cat) {
            let call = runtime[&copy["args"]["correlation"].as_u64().unwrap()];
            assert_eq!(
                (call["name"].as_str(), call["dur"].as_f64()),
                (Some(api), Some(TRANSFER_CALL_NS as f64 / 1000.0))
            );
            assert!(call["ts"].as_f64() < copy["ts"].as_f64());
        }
    }
    let flows = of_cat(&trace, "ac2g");
    assert_eq!(flows.iter().filter(|f| f["ph"] == "s").count(), 51);
    assert_eq!(flows.iter().filter(|f| f["ph"] == "f" && f["bp"] == "e").count(), 51);
    // The train_step instances are PyTorch's profiler steps, on the same thread and span.
    let steps: Vec<&&Value> =
        annotations.iter().filter(|a| a["name"].as_str().unwrap().starts_with("ProfilerStep#")).collect();
    let train_steps: Vec<&&Value> = annotations.iter().filter(|a| a["name"] == "train_step").collect();
    assert_eq!(
        steps.iter().map(|s| s["name"].as_str().unwrap()).collect::<Vec<_>>(),
        ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    );
    for (step, range) in steps.iter().zip(&train_steps) {
        assert_eq!((&step["ts"], &step["dur"], &step["tid"]), (&range["ts"], &range["dur"], &range["tid"]));
        assert_eq!(step["args"]["step_range_id"], range["args"]["range_id"]);
    }
    let info = &trace["otherData"]["steps"];
    assert_eq!(
        (info["range"].as_str(), info["steps"].as_u64(), info["left_out"].as_u64()),
        (Some("train_step"), Some(3), Some(0))
    );
    // GPU spans of the ranges: on the stream's track, without args.stream (HTA counts every
    // event with one as GPU work).
    let gpu_annotations = of_cat(&trace, "gpu_user_annotation");
    assert_eq!(gpu_annotations.len(), 15, "train_step, forward, backward (2 streams), optimizer per step");
    assert!(gpu_annotations.iter().all(|a| a["args"].get("stream").is_none() && a["pid"] == 1));
    let note = trace["otherData"]["note"].as_str().unwrap();
    assert!(note.contains("dur is the call's duration") && !note.contains("no ProfilerStep"), "{note}");

    // The kernels' time per name is the report's, to the nanosecond.
    let mut in_trace: BTreeMap<String, f64> = BTreeMap::new();
    for k in &kernels {
        *in_trace.entry(k["name"].as_str().unwrap().into()).or_default() += k["dur"].as_f64().unwrap();
    }
    let mut in_report: BTreeMap<String, f64> = BTreeMap::new();
    for k in &report.kernels {
        *in_report.entry(k.kernel_name.clone().unwrap()).or_default() += k.duration_ns.unwrap() as f64 / 1000.0;
    }
    assert_eq!(in_trace.keys().collect::<Vec<_>>(), in_report.keys().collect::<Vec<_>>());
    for (name, us) in &in_trace {
        assert!((us - in_report[name]).abs() < 1e-6, "{name}: {us} µs in the trace, {} in the report", in_report[name]);
    }
    assert_eq!(in_report[ALL_REDUCE], 6.0 * 243.9);
    // An all-reduce runs beside the next layer's backward GEMMs.
    let span = |e: &Value| (e["ts"].as_f64().unwrap(), e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap());
    let overlapped = nccl.iter().filter(|n| {
        let (a, b) = span(n);
        kernels.iter().any(|k| k["tid"] == COMPUTE_STREAM && span(k).0 < b && span(k).1 > a)
    });
    assert_eq!(overlapped.count(), 3, "the first layer's all-reduce of each step overlaps compute");
}

/// The step range named (`GMPROF_STEP_RANGE`, `--torch-steps`) and an on-demand capture's
/// first step number the `ProfilerStep#N` events.
#[test]
fn the_named_step_range_and_the_first_step_make_the_profiler_steps() {
    let report = rank_report(0, 3);
    let steps_of = |options: &TraceOptions| {
        let trace: Value = serde_json::from_str(&to_kineto_json(&report.to_kineto_trace(options)).unwrap()).unwrap();
        let steps: Vec<(String, f64)> = of_cat(&trace, "user_annotation")
            .iter()
            .filter(|a| a["name"].as_str().unwrap().starts_with("ProfilerStep#"))
            .map(|a| (a["name"].as_str().unwrap().to_owned(), a["dur"].as_f64().unwrap()))
            .collect();
        (steps, trace["otherData"].clone())
    };
    let (steps, other) = steps_of(&rank_options(0).with_steps(Some("backward".into()), Some(1236)));
    let names: Vec<&str> = steps.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names, ["ProfilerStep#1236", "ProfilerStep#1237", "ProfilerStep#1238"]);
    let backward: Vec<f64> = report
        .ranges
        .iter()
        .filter(|r| r.name == "backward")
        .map(|r| r.wall_time_ns.unwrap() as f64 / 1000.0)
        .collect();
    assert_eq!(steps.iter().map(|s| s.1).collect::<Vec<_>>(), backward, "each step spans its backward range");
    assert_eq!(other["steps"]["chosen_by"], "the step range 'backward'");
    assert!(other["steps"]["numbered_by"].as_str().unwrap().contains("first step, 1236"));
    // A step range no range matches: no steps, and the note says so.
    let (steps, other) = steps_of(&rank_options(0).with_steps(Some("Train step *".into()), None));
    assert!(steps.is_empty() && other.get("steps").is_none());
    assert!(other["note"].as_str().unwrap().contains("no ProfilerStep#N events"));
}

fn gmprof(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn check_trace_reads_kineto_ranges_and_catches_a_launch_outside_its_range() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node0-0");
    rank_report(0, 2).write_all_traced(&dir, OutputFormats::CSV, &rank_options(0)).unwrap();
    let path = dir.join("trace.json");
    let (ok, stdout, stderr) = gmprof(&["check-trace".as_ref(), path.as_os_str()]);
    assert!(ok && stdout.trim_end().ends_with("events, OK"), "{stdout}{stderr}");

    // The first kernel's launch moved past the end of its range (a user_annotation), just
    // before the kernel starts (the GPU runs behind: its range ended long before).
    let mut trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let first = trace["traceEvents"].as_array_mut().unwrap().iter_mut().find(|e| e["cat"] == "kernel").unwrap();
    first["args"]["launch_ts"] = Value::from(first["ts"].as_f64().unwrap() - 0.5);
    let check = check_trace_json(&trace.to_string(), &CheckOptions::default());
    assert_eq!((check.count(Rule::KernelOutsideRange), check.violations.len()), (1, 1), "{:?}", check.violations);
    assert!(check.violations[0].message.contains("after its range ended"), "{}", check.violations[0]);
}

#[test]
fn an_unknown_trace_format_is_refused_before_the_program_starts() {
    let (ok, _, stderr) =
        gmprof(&["run".as_ref(), "--trace-format".as_ref(), "xml".as_ref(), "--".as_ref(), "true".as_ref()]);
    assert!(!ok && stderr.contains("unknown trace format 'xml': use chrome"), "{stderr}");
    assert_eq!(
        TraceFormat::from_lookup(|k| (k == "GMPROF_TRACE_FORMAT").then(|| "kineto".into())).unwrap(),
        TraceFormat::Kineto
    );
    // The default form stays gmprof's own trace.
    let tmp = tempfile::tempdir().unwrap();
    rank_report(0, 1).write_all_traced(tmp.path(), OutputFormats::CSV, &TraceOptions::default()).unwrap();
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("trace.json")).unwrap()).unwrap();
    assert!(trace.get("distributedInfo").is_none() && of_cat(&trace, "range").len() == 4, "gmprof's own trace");
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hta")
}

/// Asserts that `dir/name` equals the fixture's `rank/name`; `GMPROF_BLESS=1` rewrites it.
fn check_fixture(dir: &Path, rank: &str, name: &str) {
    let actual = std::fs::read_to_string(dir.join(name)).unwrap();
    let path = fixture_dir().join(rank).join(name);
    if std::env::var("GMPROF_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        expected == actual,
        "{} differs from what the scripted run writes (GMPROF_BLESS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn the_two_rank_fixture_is_what_the_scripted_run_writes() {
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..hta_run::WORLD_SIZE {
        let name = format!("rank{rank}");
        let dir = tmp.path().join(&name);
        rank_report(rank, 3).write_all_traced(&dir, OutputFormats::CSV, &rank_options(rank)).unwrap();
        for file in ["trace.json", "kernels.csv", "transfers.csv", "report.json"] {
            check_fixture(&dir, &name, file);
        }
        let text = std::fs::read_to_string(dir.join("trace.json")).unwrap();
        assert!(check_trace_json(&text, &CheckOptions::default()).is_ok());
    }
}

/// The trace-mode run recorded on two H100s (tests/data/devices/late_trace.json.zst: a
/// pipeline over two GPUs of one process, real kernel names, timestamps, memcpys and peer
/// copies) in the Kineto form, as rank 0 of 1. With `GMPROF_HTA_RECORDED_DIR` set it is
/// written there (the traces and tables `scripts/check/hta_check.py` reads; `.ci/run`).
#[test]
fn a_recorded_h100_run_in_the_kineto_form_passes_check_trace() {
    use std::io::Read;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/devices/late_trace.json.zst");
    let bytes = std::fs::read(&path).unwrap();
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(&mut bytes.as_slice()).unwrap().read_to_string(&mut text).unwrap();
    let report = gmprof::Report::from_json(&text).unwrap();
    let options = TraceOptions::kineto(
        Some(52_817),
        Some(gmprof::report::kineto::DistributedInfo {
            rank: 0,
            world_size: Some(1),
            local_rank: Some(0),
            rank_variable: None,
        }),
    );
    let kineto = to_kineto_json(&report.to_kineto_trace(&options)).unwrap();
    let check = check_trace_json(&kineto, &CheckOptions::default());
    assert!(check.is_ok(), "{:?}", &check.violations[..check.violations.len().min(5)]);
    let trace: Value = serde_json::from_str(&kineto).unwrap();
    // Both GPUs, each its own pid; every timed kernel row is a kernel event.
    let devices: Vec<u64> =
        trace["deviceProperties"].as_array().unwrap().iter().map(|d| d["id"].as_u64().unwrap()).collect();
    assert_eq!(devices, [0, 1]);
    let timed = report.kernels.iter().filter(|k| k.start_ns.is_some() && k.stream_id.is_some()).count();
    assert_eq!(of_cat(&trace, "kernel").len(), timed);
    assert!(of_cat(&trace, "gpu_memcpy").iter().any(|m| m["name"] == "Memcpy PtoP"));
    assert_eq!(of_cat(&trace, "cuda_runtime").len(), of_cat(&trace, "kernel").len());
    // Recorded before gmprof kept a launch's CUDA function and timed calls: named as then,
    // at the instant of the call.
    assert!(of_cat(&trace, "cuda_runtime").iter().all(|c| c["name"] == "kernel launch" && c["dur"] == 0.0));
    if let Ok(dir) = std::env::var("GMPROF_HTA_RECORDED_DIR") {
        let dir = Path::new(&dir).join("rank0");
        report.write_all_traced(&dir, OutputFormats::CSV, &options).unwrap();
        assert!(dir.join("trace.json").is_file() && dir.join("kernels.csv").is_file());
    }
}

/// A counter-mode report (kernel replay: kernel positions synthetic, no launch instants on
/// the kernels' clock) in the Kineto form: no launch events, the note says why.
#[test]
fn a_kernel_replay_report_in_the_kineto_form_has_synthetic_kernels_and_no_launches() {
    let report = gmprof::Report::from_json(include_str!("golden/report.json")).unwrap();
    let text = to_kineto_json(&report.to_kineto_trace(&TraceOptions::kineto(Some(7), None))).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:?}", check.violations);
    let trace: Value = serde_json::from_str(&text).unwrap();
    assert!(trace.get("distributedInfo").is_none(), "no rank, no distributedInfo");
    let kernels = of_cat(&trace, "kernel");
    assert_eq!(kernels.len(), report.kernels.iter().filter(|k| k.device_id.is_some() && k.stream_id.is_some()).count());
    assert!(kernels.iter().all(|k| k["args"].get("launch_ts").is_none()));
    assert!(of_cat(&trace, "cuda_runtime").is_empty() && of_cat(&trace, "ac2g").is_empty());
    let note = trace["otherData"]["note"].as_str().unwrap();
    assert!(
        note.starts_with("mode kernel_replay: kernel durations come from") && note.contains("cuda_runtime"),
        "{note}"
    );
    // Its repeated ranges are no steps: HTA would keep no kernel without their launches.
    assert!(report.ranges.iter().filter(|r| r.name == "train_step").count() >= 2);
    let steps = of_cat(&trace, "user_annotation")
        .iter()
        .filter(|a| a["name"].as_str().unwrap().starts_with("ProfilerStep"))
        .count();
    assert_eq!(steps, 0);
    assert!(note.contains("kernel positions are synthetic and launches have no events"), "{note}");
}

/// The report of one rank of a recorded torchrun DDP job: nanoGPT's train.py, 2 ranks, NCCL,
/// 8 iterations, `gmprof run --torch-steps --mode trace --trace-format kineto` on two H200s,
/// launch calls timed (scripts/gpu/ecosystem-validate.sh, section kineto, call 5;
/// validation/2026-11-27-ecosystem.md).
fn recorded_ddp_rank(rank: u32) -> gmprof::Report {
    use std::io::Read;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/ddp_nanogpt/rank{rank}.json.zst"));
    let bytes = std::fs::read(&path).unwrap();
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(&mut bytes.as_slice()).unwrap().read_to_string(&mut text).unwrap();
    gmprof::Report::from_json(&text).unwrap()
}

/// Both ranks of the recorded DDP job in the Kineto form: `check-trace` passes, every timed
/// kernel (NCCL's all-reduce kernels among them) and memcpy/memset is one event, each rank's
/// distributedInfo says its rank of 2. With GMPROF_HTA_DDP_DIR set, writes rank0/ and rank1/
/// (trace.json, kernels.csv, transfers.csv) there for scripts/check/hta_check.py, which
/// `.ci/run` runs on them with `--expect-comm`.
#[test]
fn a_recorded_torchrun_ddp_job_in_the_kineto_form_has_both_ranks_and_their_nccl_kernels() {
    for rank in 0..2u32 {
        let report = recorded_ddp_rank(rank);
        let options = TraceOptions::kineto(
            Some(800 + rank),
            Some(gmprof::report::kineto::DistributedInfo {
                rank,
                world_size: Some(2),
                local_rank: Some(rank),
                rank_variable: None,
            }),
        );
        let kineto = to_kineto_json(&report.to_kineto_trace(&options)).unwrap();
        let check = check_trace_json(&kineto, &CheckOptions::default());
        assert!(check.is_ok(), "rank {rank}: {:?}", &check.violations[..check.violations.len().min(5)]);
        let trace: Value = serde_json::from_str(&kineto).unwrap();
        assert_eq!(trace["distributedInfo"]["rank"], rank);
        assert_eq!(trace["distributedInfo"]["world_size"], 2);
        let timed = report.kernels.iter().filter(|k| k.start_ns.is_some() && k.stream_id.is_some()).count();
        let kernels = of_cat(&trace, "kernel");
        assert_eq!(kernels.len(), timed, "rank {rank}");
        let nccl = kernels.iter().filter(|k| k["name"].as_str().unwrap().starts_with("ncclDevKernel")).count();
        let nccl_rows = report
            .kernels
            .iter()
            .filter(|k| k.kernel_name.as_deref().is_some_and(|n| n.starts_with("ncclDevKernel")))
            .count();
        assert!(nccl > 0 && nccl == nccl_rows, "rank {rank}: {nccl} NCCL kernel events, {nccl_rows} rows");
        // The step range's 9 instances are ProfilerStep#0..8; every launch call is named and
        // timed (the recording stamped each call's return).
        let events = trace["traceEvents"].as_array().unwrap();
        let steps: Vec<&str> =
            events.iter().filter_map(|e| e["name"].as_str()).filter(|n| n.starts_with("ProfilerStep#")).collect();
        assert_eq!(steps, (0..9).map(|n| format!("ProfilerStep#{n}")).collect::<Vec<_>>(), "rank {rank}");
        let launches = of_cat(&trace, "cuda_runtime");
        assert!(!launches.is_empty(), "rank {rank}");
        assert!(
            launches.iter().all(|l| l["dur"].as_f64().unwrap() > 0.0 && l["name"] != "kernel launch"),
            "rank {rank}: a launch call without its name or duration"
        );
        if let Ok(dir) = std::env::var("GMPROF_HTA_DDP_DIR") {
            let dir = Path::new(&dir).join(format!("rank{rank}"));
            report.write_all_traced(&dir, OutputFormats::CSV, &options).unwrap();
            assert!(dir.join("trace.json").is_file() && dir.join("kernels.csv").is_file());
        }
    }
}
