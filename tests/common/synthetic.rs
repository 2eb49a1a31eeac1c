//! Synthetic rank directories for `gmprof merge` at scale: reproducible (no randomness but a
//! hash of rank and step), with a known straggler per step.
//!
//! Shared by `tests/merge_at_scale.rs` (small) and `examples/synthetic_ranks.rs` (512 ranks of
//! 200 000 kernels for BENCHMARKS.md). Each rank is the golden report's shape, grown: a
//! `<root>` row, then per step `train_step` with `train_step/forward` and
//! `train_step/backward` inside, and kernels split evenly over the steps, half forward, half
//! backward. Step `s` of rank `r` takes `BASE_STEP_NS` × (1 + up to 2 % of noise), and the
//! rank [`straggler`]`(s)` takes 15 % more: it is the slowest of that step by construction.
//! A rank's directory holds what a run with `--format parquet` writes of the two tables the
//! merge reads: `ranges.parquet` and `kernels.parquet`.

#![allow(dead_code)]

use std::path::Path;

use gmprof::analysis::aggregate::RangeRow;
use gmprof::analysis::correlate::KernelRow;
use gmprof::model::RangeId;
use gmprof::report::Report;

/// A step's GPU time before noise, ns.
pub const BASE_STEP_NS: u64 = 2_000_000;

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Synthetic {
    /// Ranks (directories).
    pub ranks: usize,
    /// Kernel rows per rank.
    pub kernels: usize,
    /// Steps per rank.
    pub steps: usize,
}

/// The rank slowest at step `step`.
pub fn straggler(step: usize, ranks: usize) -> usize {
    (step * 7 + 3) % ranks
}

/// Rank `rank`'s directory name: sorted names are rank order.
pub fn label(rank: usize) -> String {
    format!("node{:03}-{}", rank / 8, rank % 8)
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: a fixed, well-spread hash.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Rank `rank`'s GPU time of step `step`, ns.
pub fn step_ns(rank: usize, step: usize, ranks: usize) -> u64 {
    let noise = mix(((rank as u64) << 32) | step as u64) % (BASE_STEP_NS / 50);
    let t = BASE_STEP_NS + noise;
    if straggler(step, ranks) == rank {
        t + t * 15 / 100
    } else {
        t
    }
}

const NAMES: [(&str, &str); 6] = [
    ("void gemm<128>(float const*, float const*, float*, int)", "_Z4gemmILi128EEvPKfS1_Pfi"),
    ("layernorm_forward_kernel3", "_Z25layernorm_forward_kernel3"),
    ("softmax_forward_kernel5", "_Z23softmax_forward_kernel5"),
    ("gelu_backward_kernel", "_Z20gelu_backward_kernel"),
    ("matmul_backward_bias_kernel7", "_Z28matmul_backward_bias_kernel7"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
];

/// Rank `rank`'s report.
pub fn rank_report(rank: usize, s: &Synthetic) -> Report {
    let mut r = Report::from_json(include_str!("../golden/report.json")).unwrap();
    r.meta.device_name = Some("NVIDIA H100 80GB HBM3".into());
    r.meta.warnings.clear();
    r.transfers.clear();
    let kernel_template: KernelRow = r.kernels[1].clone();
    let range_template: RangeRow = r.ranges[1].clone();
    let mut root = r.ranges[0].clone();
    let per_step = (s.kernels / s.steps.max(1)).max(2);
    let mut kernels = Vec::with_capacity(s.kernels);
    let mut ranges = Vec::with_capacity(1 + 3 * s.steps);
    let mut clock = 1_000_000u64;
    let mut slot = 1u32;
    for step in 0..s.steps {
        let total = step_ns(rank, step, s.ranks);
        let n = if step + 1 == s.steps { s.kernels.saturating_sub(per_step * step).max(2) } else { per_step };
        let step_start = clock;
        let mut part_ns = [0u64; 2];
        let mut part_kernels = [0u64; 2];
        let ids = [slot, slot + 1, slot + 2];
        slot += 3;
        for k in 0..n {
            let part = usize::from(k >= n / 2);
            let d = total / n as u64 + u64::from((k as u64) < total % n as u64);
            let (name, mangled) = NAMES[(k * 5 + step) % NAMES.len()];
            let mut row = kernel_template.clone();
            row.correlation_id = kernels.len() as u32 + 1;
            row.ordinal = Some(kernels.len() as u32);
            row.range_id = Some(RangeId { slot: ids[1 + part], generation: 0 });
            row.range_path = if part == 0 { "train_step/forward" } else { "train_step/backward" }.to_owned();
            row.kernel_name = Some(name.to_owned());
            row.mangled_name = Some(mangled.to_owned());
            row.launch_ns = Some(clock.saturating_sub(5_000));
            row.start_ns = Some(clock);
            row.end_ns = Some(clock + d);
            row.duration_ns = Some(d);
            row.range_duration_ns = Some(d);
            row.metrics = vec![Some(d as f64), Some((d * 4) as f64), Some((d * 2) as f64), Some((k % 100) as f64)];
            clock += d + 500;
            part_ns[part] += d;
            part_kernels[part] += 1;
            kernels.push(row);
        }
        let range = |id: u32, path: &str, name: &str, depth: u32, gpu: u64, count: u64, start: u64, end: u64| {
            let mut row = range_template.clone();
            row.range_id = Some(RangeId { slot: id, generation: 0 });
            row.path = path.to_owned();
            row.name = name.to_owned();
            row.depth = depth;
            row.instance = step as u32;
            row.kernel_count = count;
            row.self_kernel_count = if depth == 0 { 0 } else { count };
            row.gpu_time_ns = Some(gpu);
            row.wall_time_ns = Some(end - start);
            row.start_ns = Some(start);
            row.end_ns = Some(end);
            row.transfer_count = 0;
            row.transfer_bytes = 0;
            row.memset_bytes = 0;
            row.untimed_transfer_count = 0;
            row.metrics = vec![Some(gpu as f64), Some((gpu * 4) as f64), Some((gpu * 2) as f64), Some(50.0)];
            row
        };
        let mid = step_start + (clock - step_start) / 2;
        ranges.push(range(ids[0], "train_step", "train_step", 0, total, n as u64, step_start, clock));
        ranges.push(range(ids[1], "train_step/forward", "forward", 1, part_ns[0], part_kernels[0], step_start, mid));
        ranges.push(range(ids[2], "train_step/backward", "backward", 1, part_ns[1], part_kernels[1], mid, clock));
        clock += 20_000;
    }
    root.gpu_time_ns = Some(ranges.iter().filter(|r| r.depth == 0).filter_map(|r| r.gpu_time_ns).sum());
    root.kernel_count = kernels.len() as u64;
    ranges.insert(0, root);
    r.meta.kernel_count = kernels.len() as u64;
    r.meta.flagged_kernel_rows = 0;
    r.meta.total_gpu_time_ns = Some(kernels.iter().filter_map(|k| k.duration_ns).sum());
    r.ranges = ranges;
    r.kernels = kernels;
    r
}

/// Writes rank `rank`'s `ranges.parquet` and `kernels.parquet` under `root`.
pub fn write_rank(root: &Path, rank: usize, s: &Synthetic) {
    let dir = root.join(label(rank));
    std::fs::create_dir_all(&dir).unwrap();
    let report = rank_report(rank, s);
    report.write_ranges_parquet(dir.join("ranges.parquet")).unwrap();
    report.write_kernels_parquet(dir.join("kernels.parquet")).unwrap();
}
