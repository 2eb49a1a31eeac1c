//! One process, two GPUs, recorded on two H100s (tests/data/devices/README.md): the reports
//! `gmprof run` wrote for scripts/multi/two_gpus.py, checked against torch.profiler's kernel
//! counts per device (recorded beside them) and against their own invariants; the format of
//! `range_devices.csv` pinned by a golden file.

#[path = "common/golden.rs"]
mod golden;

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use gmprof::model::RangeId;
use gmprof::Report;

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/devices").join(name)
}

fn recorded(name: &str) -> Report {
    let bytes = std::fs::read(data(name)).unwrap();
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(&mut bytes.as_slice()).unwrap().read_to_string(&mut text).unwrap();
    Report::from_json(&text).unwrap()
}

/// torch.profiler's kernels per device for the same program (two_gpus.py --count).
fn torch_counts(kind: &str) -> HashMap<u32, u64> {
    let text = std::fs::read_to_string(data(&format!("torch_profiler_{kind}.json"))).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["kernels_per_device"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.parse().unwrap(), n.as_u64().unwrap()))
        .collect()
}

fn kernels_per_device(report: &Report) -> HashMap<u32, u64> {
    let mut counts = HashMap::new();
    for k in report.kernels.iter().filter(|k| k.granularity.is_kernel_execution()) {
        *counts.entry(k.device_id.unwrap()).or_default() += 1;
    }
    counts
}

/// Every range's total is the sum of its rows on the devices; each kernel's range is a row.
fn check_invariants(label: &str, report: &Report) {
    assert_eq!(report.meta.flagged_kernel_rows, 0, "{label}");
    assert!(report.meta.unprofiled_contexts.is_empty(), "{label}");
    assert_eq!(report.meta.devices.len(), 2, "{label}");
    for r in &report.ranges {
        let shares: Vec<_> = report.range_devices.iter().filter(|d| d.row.range_id == r.range_id).collect();
        assert_eq!(shares.iter().map(|d| d.row.kernel_count).sum::<u64>(), r.kernel_count, "{label} {}", r.path);
        let time: Option<u64> = shares.iter().filter_map(|d| d.row.gpu_time_ns).reduce(|a, b| a + b);
        assert_eq!(time, r.gpu_time_ns, "{label} {}", r.path);
        if let Some(busy) = r.gpu_busy_ns {
            assert!(busy <= r.gpu_time_ns.unwrap(), "{label} {}: busy is a union", r.path);
        }
        assert!(shares.iter().all(|d| d.row.path == r.path && d.row.instance == r.instance), "{label}");
    }
    let ids: std::collections::HashSet<Option<RangeId>> = report.ranges.iter().map(|r| r.range_id).collect();
    assert!(report.kernels.iter().all(|k| ids.contains(&k.range_id)), "{label}: every kernel's range is a row");
    assert!(report.kernels.windows(2).all(|w| w[0].correlation_id <= w[1].correlation_id), "{label}: launch order");
    let per_device = kernels_per_device(report);
    for d in &report.meta.devices {
        assert_eq!(per_device[&d.device_id], d.kernel_count, "{label}");
    }
}

#[test]
fn a_pipeline_over_two_gpus_has_torch_profilers_kernels_on_each_device() {
    let report = recorded("pipeline_per_kernel.json.zst");
    assert_eq!(kernels_per_device(&report), torch_counts("pipeline"));
    check_invariants("pipeline per_kernel", &report);
    // Four steps, each with its three phases, all on both GPUs.
    let steps: Vec<_> = report.ranges.iter().filter(|r| r.path == "step").collect();
    assert_eq!(steps.len(), 4);
    for s in &steps {
        let devices: Vec<u32> =
            report.range_devices.iter().filter(|d| d.row.range_id == s.range_id).map(|d| d.device_id).collect();
        assert_eq!(devices, [0, 1]);
    }
    // Counters: a step's DRAM bytes are the sum over its kernels on both GPUs (each
    // kernel's own range user range in per_kernel), and over its device rows.
    let parent: HashMap<RangeId, Option<RangeId>> =
        report.ranges.iter().filter_map(|r| r.range_id.map(|id| (id, r.parent_id))).collect();
    let under = |mut at: Option<RangeId>, top: RangeId| {
        while let Some(id) = at {
            if id == top {
                return true;
            }
            at = parent.get(&id).copied().flatten();
        }
        false
    };
    let metric = report.meta.metrics.iter().position(|m| m.metric.name == "dram__bytes_read.sum").unwrap();
    for s in &steps {
        let id = s.range_id.unwrap();
        let from_kernels: f64 =
            report.kernels.iter().filter(|k| under(k.range_id, id)).filter_map(|k| k.metrics[metric]).sum();
        let total = s.metrics[metric].unwrap();
        assert!((total - from_kernels).abs() <= 1e-6 * total, "step {}: {total} vs {from_kernels}", s.instance);
        let from_devices: f64 = report
            .range_devices
            .iter()
            .filter(|d| d.row.range_id == s.range_id)
            .map(|d| d.row.metrics[metric].unwrap())
            .sum();
        assert!((total - from_devices).abs() <= 1e-6 * total);
    }
    let text = report.summary().to_string();
    let second = text.lines().nth(1).unwrap();
    assert!(second.starts_with("GPUs: 2 profiled | device 0 (NVIDIA H100 80GB HBM3): 212 kernels"), "{second}");
    assert!(second.contains("device 1 (NVIDIA H100 80GB HBM3): 244 kernels"), "{second}");
}

#[test]
fn data_parallel_in_per_range_has_torch_profilers_kernels_on_each_device() {
    let report = recorded("data_parallel_per_range.json.zst");
    assert_eq!(kernels_per_device(&report), torch_counts("data_parallel"));
    check_invariants("data_parallel per_range", &report);
    // Copies between the GPUs (the replicas' broadcast, the outputs' gather) are peer
    // copies, attributed to ranges.
    let peer: Vec<_> = report.transfers.iter().filter(|t| t.kind == gmprof::model::TransferKind::MemcpyPtoP).collect();
    assert!(!peer.is_empty());
    assert!(
        peer.iter().all(|t| t.range_path != gmprof::model::session::ROOT_PATH),
        "peer copies have their call's range"
    );
}

#[test]
fn a_gpu_first_used_in_the_third_step_joins_its_ranges() {
    let report = recorded("late_trace.json.zst");
    assert_eq!(kernels_per_device(&report), torch_counts("late"));
    check_invariants("late trace", &report);
    let steps: Vec<Vec<u32>> = report
        .ranges
        .iter()
        .filter(|r| r.path == "step")
        .map(|s| report.range_devices.iter().filter(|d| d.row.range_id == s.range_id).map(|d| d.device_id).collect())
        .collect();
    assert_eq!(steps, [vec![0], vec![0], vec![0, 1], vec![0, 1]], "GPU 1 from step 2 on, in the same rows");
}

#[test]
fn range_devices_csv_is_pinned() {
    let report = recorded("pipeline_per_kernel.json.zst");
    let mut out = Vec::new();
    report.write_range_devices_csv_to(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    // The header lines and the first step's rows.
    let head: Vec<&str> =
        text.lines().filter(|l| !l.starts_with("# clock") && !l.starts_with("# gmprof")).take(20).collect();
    golden::check_golden("range_devices_head.csv", &(head.join("\n") + "\n"));
}

#[test]
fn merge_and_report_read_processes_that_used_two_gpus() {
    // Two ranks, each a process that drove two GPUs.
    let report = recorded("pipeline_per_kernel.json.zst");
    let root = tempfile::tempdir().unwrap();
    for rank in ["vm-0", "vm-1"] {
        report.write_all(root.path().join(rank)).unwrap();
    }
    let gmprof = env!("CARGO_BIN_EXE_gmprof");
    let out = std::process::Command::new(gmprof).arg("merge").arg(root.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("#   vm-0: 2 GPUs: NVIDIA H100 80GB HBM3"), "{text}");
    let step = text.lines().find(|l| l.starts_with("step ")).unwrap();
    assert!(step.contains("2/2") && step.contains("15.913 ms"), "{step}");
    let out = std::process::Command::new(gmprof).arg("report").arg(root.path().join("vm-1")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().nth(1).unwrap().starts_with("GPUs: 2 profiled | device 0"), "{text}");
}
