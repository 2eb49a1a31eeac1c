//! The HTML report's rotation part (per_kernel in rotation, issue 44): one typical step of the
//! main template as its positions estimate it, per range group (GPU time, DRAM read and
//! written, DRAM GB/s, positions measured) and per kernel name (launches, measured, mean time
//! and DRAM bytes per launch), under the summary's rotation lines.

use serde::Serialize;

use crate::analysis::rotation::RotationReport;

/// Rows of each table at most.
pub const MAX_ROWS: usize = 200;

/// One range group of the typical step.
#[derive(Clone, Debug, Serialize)]
pub struct RotationGroupView {
    /// The group's path, numbers folded.
    pub path: String,
    /// Launch positions in it.
    pub positions: u32,
    /// Of them, measured at least once.
    pub measured: u32,
    /// One step's kernel time, ns.
    pub gpu_time_ns: Option<f64>,
    /// One step's DRAM bytes read and written (blank unless every position was measured).
    pub read_bytes: Option<f64>,
    /// Written.
    pub write_bytes: Option<f64>,
    /// (read + written) / GPU time, GB/s.
    pub dram_gbps: Option<f64>,
}

/// One kernel name over the run's measured launches.
#[derive(Clone, Debug, Serialize)]
pub struct RotationKernelView {
    /// Demangled name.
    pub name: String,
    /// Launches in steps.
    pub launches: u64,
    /// Of them, measured.
    pub measured: u64,
    /// Mean kernel time of its launches (activity records), ns.
    pub mean_ns: Option<f64>,
    /// Mean DRAM bytes read and written per measured launch.
    pub read_bytes: Option<f64>,
    /// Written.
    pub write_bytes: Option<f64>,
}

/// What the page shows of a rotation.
#[derive(Clone, Debug, Serialize)]
pub struct RotationView {
    /// The summary's rotation lines.
    pub note: String,
    /// The main template's groups, most GPU time first.
    pub groups: Vec<RotationGroupView>,
    /// Kernel names, most launches first.
    pub kernels: Vec<RotationKernelView>,
}

impl RotationView {
    /// The view of `rotation`, whose metric values follow `metric_names`.
    pub fn of(rotation: &RotationReport, metric_names: &[&str]) -> Self {
        let index = |name: &str| metric_names.iter().position(|n| *n == name);
        let (read, write) = (index("dram__bytes_read.sum"), index("dram__bytes_write.sum"));
        let value = |values: &[Option<f64>], i: Option<usize>| i.and_then(|i| values.get(i).copied().flatten());
        let main = rotation.templates.iter().max_by_key(|t| (t.steps, std::cmp::Reverse(t.template)));
        let mut groups: Vec<RotationGroupView> = rotation
            .groups
            .iter()
            .filter(|g| main.is_some_and(|t| t.template == g.template))
            .map(|g| {
                let (r, w) = (value(&g.values, read), value(&g.values, write));
                let total = match (r, w) {
                    (Some(r), Some(w)) => Some(r + w),
                    (Some(r), None) if write.is_none() => Some(r),
                    _ => None,
                };
                RotationGroupView {
                    path: g.path.clone(),
                    positions: g.positions,
                    measured: g.measured_positions,
                    gpu_time_ns: g.gpu_time_ns,
                    read_bytes: r,
                    write_bytes: w,
                    dram_gbps: total.zip(g.gpu_time_ns).filter(|(_, t)| *t > 0.0).map(|(b, t)| b / t),
                }
            })
            .collect();
        groups.sort_by(|a, b| b.gpu_time_ns.unwrap_or(0.0).total_cmp(&a.gpu_time_ns.unwrap_or(0.0)));
        groups.truncate(MAX_ROWS);
        let kernels = rotation
            .kernels
            .iter()
            .take(MAX_ROWS)
            .map(|k| RotationKernelView {
                name: k.kernel_name.clone(),
                launches: k.launches,
                measured: k.measured,
                mean_ns: k.duration_ns,
                read_bytes: value(&k.values, read),
                write_bytes: value(&k.values, write),
            })
            .collect();
        RotationView { note: rotation.describe().join("\n"), groups, kernels }
    }
}
