//! [`crate::report::devices::combine`] on sessions of two contexts of one process, driven through
//! the GPU-less capture harness the way the injection drives them: every range push goes to
//! each live profiler, launches and kernel records go to the context they ran on, and
//! correlation ids are numbered process-wide.

use super::harness::LaunchHarness;
use crate::model::RangeId;
use crate::report::devices::{combine, ContextReport};
use crate::report::Report;

/// Two sessions of one process on one time line.
struct Process {
    gpus: Vec<Option<LaunchHarness>>,
    clock: u64,
    correlation: u32,
}

impl Process {
    fn new(gpus: usize) -> Self {
        Process {
            gpus: (0..gpus).map(|_| Some(LaunchHarness::trace().unwrap())).collect(),
            clock: 1_000,
            correlation: 1,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1_000;
        self.clock
    }

    fn push(&mut self, name: &str) {
        let t = self.tick();
        for h in self.gpus.iter_mut().flatten() {
            h.set_clock(t - 1);
            h.push_range(name).unwrap();
        }
    }

    fn pop(&mut self) {
        let t = self.tick();
        for h in self.gpus.iter_mut().flatten() {
            h.set_clock(t - 1);
            h.pop_range().unwrap();
        }
    }

    /// A runtime launch on `gpu` of a kernel that runs `[start, start + duration)`.
    fn kernel(&mut self, gpu: usize, name: &str, start: u64, duration: u64) -> u32 {
        let h = self.gpus[gpu].as_mut().unwrap();
        h.set_next_correlation(self.correlation);
        let outer = h.launch_kernel(true, c"_Z6kernelPf");
        self.correlation = outer + 2;
        let record = h.kernel_record_on(gpu as u32, outer + 1, name, start, start + duration);
        h.deliver(vec![record]);
        outer
    }

    fn finish(&mut self, gpu: usize) -> ContextReport {
        let h = self.gpus[gpu].take().unwrap();
        let context_id = Some(h.context_id());
        ContextReport { device_id: gpu as u32, context_id, report: h.report() }
    }
}

fn row<'a>(report: &'a Report, path: &str, instance: u32) -> &'a crate::analysis::aggregate::RangeRow {
    report
        .ranges
        .iter()
        .find(|r| r.path == path && r.instance == instance)
        .unwrap_or_else(|| panic!("no row {path}#{instance}"))
}

fn on_device(report: &Report, id: Option<RangeId>, device: u32) -> Option<&crate::analysis::aggregate::RangeRow> {
    report.range_devices.iter().find(|d| d.row.range_id == id && d.device_id == device).map(|d| &d.row)
}

/// A two-stage pipeline: forward on GPU 0 then GPU 1, backward on both, overlapping.
#[test]
fn a_pipeline_over_two_gpus_is_one_report_with_each_devices_share() {
    let mut p = Process::new(2);
    for step in 0..2u64 {
        let base = 1_000_000 + step * 1_000_000;
        p.push("step");
        p.push("forward");
        p.kernel(0, "fwd0", base, 100_000);
        p.kernel(0, "fwd0b", base + 100_000, 50_000);
        p.kernel(1, "fwd1", base + 150_000, 200_000);
        p.pop();
        p.push("backward");
        // GPU 1's backward overlaps GPU 0's: the union is shorter than the sum.
        p.kernel(1, "bwd1", base + 400_000, 300_000);
        p.kernel(0, "bwd0", base + 500_000, 300_000);
        p.pop();
        p.pop();
    }
    let mut parts = vec![p.finish(0), p.finish(1)];
    // A process-wide count reaches both contexts' reports; a device's own warning one.
    for part in &mut parts {
        part.report.meta.warnings.push("2 activity buffer(s) were allocated while profiling".into());
    }
    parts[1].report.meta.warnings.push("1 NVTX pop(s) had no matching push".into());
    let report = combine(parts).unwrap();
    assert_eq!(
        report.meta.warnings,
        [
            "devices 0, 1: 2 activity buffer(s) were allocated while profiling",
            "device 1: 1 NVTX pop(s) had no matching push"
        ]
    );

    // Kernels of both devices, in launch order, each with its device.
    assert_eq!(report.kernels.len(), 10);
    assert_eq!(report.meta.kernel_count, 10);
    let per_device = |d| report.kernels.iter().filter(|k| k.device_id == Some(d)).count();
    assert_eq!((per_device(0), per_device(1)), (6, 4));
    assert!(report.kernels.windows(2).all(|w| w[0].correlation_id < w[1].correlation_id));
    // One row per range instance, process-wide.
    let paths: Vec<(&str, u32)> = report.ranges.iter().map(|r| (r.path.as_str(), r.instance)).collect();
    assert_eq!(
        paths,
        [
            ("step", 0),
            ("step/forward", 0),
            ("step/backward", 0),
            ("step", 1),
            ("step/forward", 1),
            ("step/backward", 1)
        ]
    );
    // Every kernel row's range is a row of the report, by the combined ids.
    for k in &report.kernels {
        let r = report.ranges.iter().find(|r| r.range_id == k.range_id).expect("kernel's range is a row");
        assert_eq!(r.path, k.range_path);
    }
    let step = row(&report, "step", 1);
    assert_eq!(step.kernel_count, 5);
    assert_eq!(step.gpu_time_ns, Some(100_000 + 50_000 + 200_000 + 300_000 + 300_000));
    // Busy: [0, 350k) then [400k, 800k) across both GPUs.
    assert_eq!(step.gpu_busy_ns, Some(350_000 + 400_000));
    let fwd = row(&report, "step/forward", 0);
    assert_eq!((fwd.kernel_count, fwd.self_kernel_count, fwd.gpu_time_ns), (3, 3, Some(350_000)));
    let back = row(&report, "step/backward", 0);
    assert_eq!(back.gpu_busy_ns, Some(400_000), "union of [400k,700k) and [500k,800k)");

    // Each device's share of each range.
    let f0 = on_device(&report, fwd.range_id, 0).unwrap();
    let f1 = on_device(&report, fwd.range_id, 1).unwrap();
    assert_eq!((f0.kernel_count, f0.gpu_time_ns), (2, Some(150_000)));
    assert_eq!((f1.kernel_count, f1.gpu_time_ns), (1, Some(200_000)));
    assert_eq!(f1.instance, 0);
    for r in &report.ranges {
        let shares: Vec<_> = report.range_devices.iter().filter(|d| d.row.range_id == r.range_id).collect();
        assert_eq!(shares.iter().map(|d| d.row.kernel_count).sum::<u64>(), r.kernel_count, "{}", r.path);
        let time: u64 = shares.iter().filter_map(|d| d.row.gpu_time_ns).sum();
        assert_eq!(Some(time), r.gpu_time_ns, "{}", r.path);
    }

    // The metadata and the summary say which GPUs and how much each.
    let devices: Vec<(u32, u64, Option<u64>)> =
        report.meta.devices.iter().map(|d| (d.device_id, d.kernel_count, d.gpu_time_ns)).collect();
    assert_eq!(devices, [(0, 6, Some(900_000)), (1, 4, Some(1_000_000))]);
    assert_eq!(report.meta.total_gpu_time_ns, Some(1_900_000));
    let text = report.summary().to_string();
    let second = text.lines().nth(1).unwrap();
    assert!(second.starts_with("GPUs: 2 profiled | device 0"), "{text}");
    assert!(second.contains("device 1") && second.contains("4 kernels"), "{text}");
    assert!(text.contains("GPU time by device"), "{text}");
    assert!(text.contains("0: 900.00 us, 1: 1.00 ms") || text.contains("0: 900"), "{text}");

    // range_devices.csv and its Parquet twin are written; a one-GPU report writes neither.
    let dir = tempfile::tempdir().unwrap();
    report.write_all(dir.path()).unwrap();
    let csv = std::fs::read_to_string(dir.path().join(crate::report::devices::RANGE_DEVICES_CSV)).unwrap();
    let body: Vec<&str> = csv.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(body[0].starts_with("\"device_id\",\"range_slot\""), "{}", body[0]);
    assert_eq!(body.len(), 1 + report.range_devices.len());
    assert!(dir.path().join("range_devices.parquet").exists());
    let back = Report::read_json(dir.path().join("report.json")).unwrap();
    assert_eq!(back.range_devices, report.range_devices);
    assert_eq!(back.meta.devices, report.meta.devices);
}

/// A context created in the middle of a step (the program's first `.to("cuda:1")`) adopts
/// the ranges open on the creating thread; its rows join the first context's instances.
#[test]
fn a_context_created_late_joins_the_open_ranges() {
    let mut p = Process::new(2);
    let late = p.gpus[1].take();
    p.push("step");
    p.kernel(0, "a", 1_000_000, 10_000);
    p.pop();
    p.push("step");
    p.push("forward");
    p.kernel(0, "a", 2_000_000, 10_000);
    // GPU 1's context is created now; its profiler adopts "step" and "forward".
    let mut h = late.unwrap();
    let t = p.tick();
    h.set_clock(t);
    h.push_range("step").unwrap();
    h.push_range("forward").unwrap();
    p.gpus[1] = Some(h);
    p.kernel(1, "b", 2_100_000, 20_000);
    p.pop();
    p.pop();
    p.push("step");
    p.kernel(1, "b", 3_000_000, 20_000);
    p.pop();
    let report = combine(vec![p.finish(0), p.finish(1)]).unwrap();
    let paths: Vec<(&str, u32, u64)> =
        report.ranges.iter().map(|r| (r.path.as_str(), r.instance, r.kernel_count)).collect();
    assert_eq!(paths, [("step", 0, 1), ("step", 1, 2), ("step/forward", 0, 2), ("step", 2, 1)]);
    let fwd = row(&report, "step/forward", 0);
    assert_eq!(on_device(&report, fwd.range_id, 1).unwrap().gpu_time_ns, Some(20_000));
    assert_eq!(report.kernels.iter().filter(|k| k.range_path == "step/forward").count(), 2);
}

/// Ranges only a later context saw (the first one was destroyed) are rows of their own,
/// numbered after the first context's instances.
#[test]
fn ranges_after_the_first_context_ended_are_kept() {
    let mut p = Process::new(2);
    p.push("step");
    p.kernel(0, "a", 1_000_000, 10_000);
    p.kernel(1, "b", 1_000_000, 10_000);
    p.pop();
    let first = p.finish(0);
    p.push("step");
    p.kernel(1, "b", 2_000_000, 30_000);
    p.pop();
    let report = combine(vec![first, p.finish(1)]).unwrap();
    let steps: Vec<(u32, u64, Option<u64>)> =
        report.ranges.iter().map(|r| (r.instance, r.kernel_count, r.gpu_time_ns)).collect();
    assert_eq!(steps, [(0, 2, Some(20_000)), (1, 1, Some(30_000))]);
    let ids: std::collections::HashSet<_> = report.ranges.iter().map(|r| r.range_id).collect();
    assert_eq!(ids.len(), 2, "the added row has an id of its own");
    let last = report.kernels.last().unwrap();
    assert_eq!(last.range_id, report.ranges[1].range_id);
}

/// One context: the report comes back as it was.
#[test]
fn one_context_is_unchanged() {
    let mut p = Process::new(1);
    p.push("step");
    p.kernel(0, "a", 1_000_000, 10_000);
    p.pop();
    let part = p.finish(0);
    let expected = part.report.clone();
    let report = combine(vec![part]).unwrap();
    assert_eq!(report, expected);
    assert!(report.range_devices.is_empty() && report.meta.devices.is_empty());
}
