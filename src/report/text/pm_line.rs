//! The summary's PM sampling line: samples, interval and how it was chosen, the sampler's
//! losses, kernels by confidence, and where the values are (`pm.csv`, or a streamed run's
//! `pm/` parts with the kernels it left out of them).
//!
//! Imports only the analysis's PM report and `format`; `summary` uses it.

use super::format::format_duration_ns;

/// The PM sampling line (issue 42): `streamed`: the kernels a streamed run left out of `pm/` and their share of the GPU time
/// (`None`: not streamed).
pub(crate) fn pm_line(pm: &crate::analysis::pm_fold::PmReport, streamed: Option<(u64, Option<f64>)>) -> String {
    let every = match pm.interval {
        Some(crate::model::pm::PmInterval::TimeNs(ns)) => format!("every {}", format_duration_ns(ns as f64)),
        Some(crate::model::pm::PmInterval::Cycles(c)) => format!("every {c} cycles"),
        None => "at an unknown interval".to_owned(),
    };
    let chosen = pm.interval_chosen_by.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
    // Kernels by the confidence of their first valued metric (pm.csv's `confidence`).
    let (mut high, mut medium, mut low) = (0, 0, 0);
    for row in pm.rows.iter().filter(|r| r.scope == crate::analysis::pm_fold::PmScope::Kernel) {
        match row.values.iter().flatten().next().and_then(|v| v.confidence) {
            Some(crate::analysis::pm_fold::PmConfidence::High) => high += 1,
            Some(crate::analysis::pm_fold::PmConfidence::Medium) => medium += 1,
            Some(crate::analysis::pm_fold::PmConfidence::Low) => low += 1,
            None => {}
        }
    }
    let kernels = if high + medium + low > 0 {
        format!("kernels by confidence: {high} high, {medium} medium, {low} low | ")
    } else {
        String::new()
    };
    let table = match streamed {
        Some((0, _)) => "per kernel in pm/, the samples in pm_samples/".to_owned(),
        Some((short, share)) => format!(
            "per kernel in pm/ for the kernels that fill at least half a sample window ({short} shorter kernel(s){} \
             left out: GMPROF_PM_KERNEL_ROWS=all keeps them), the samples in pm_samples/",
            share.map(|s| format!(", {:.1} % of the GPU time,", 100.0 * s)).unwrap_or_default()
        ),
        None => "per range and kernel in pm.csv".to_owned(),
    };
    format!(
        "PM sampling: {} samples {every}{chosen} | hardware-buffer overflows: {} | missing samples: {} | left out: {} | \
         {kernels}{table}",
        pm.sample_count, pm.hw_buffer_overflows, pm.missing_samples, pm.empty_samples
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streamed run's PM line names the kernels left out of `pm/`, their share of the GPU
    /// time and the setting that keeps them; a whole-file run's names pm.csv.
    #[test]
    fn the_pm_line_says_which_kernels_a_streamed_run_left_out_of_pm() {
        let pm = crate::analysis::pm_fold::PmReport {
            metrics: Vec::new(),
            interval: Some(crate::model::pm::PmInterval::TimeNs(230_000)),
            interval_chosen_by: None,
            sample_count: 2_190_583,
            hw_buffer_overflows: 0,
            counter_data_full: 0,
            missing_samples: 0,
            empty_samples: 1,
            alignment: crate::analysis::pm_fold::PmAlignment {
                offset_ns: 0,
                method: "same_clock".into(),
                residual: None,
            },
            min_samples: 5,
            rows: Vec::new(),
            samples: Vec::new(),
        };
        let line = pm_line(&pm, Some((12_504_491, Some(0.25))));
        assert!(
            line.contains(
                "per kernel in pm/ for the kernels that fill at least half a sample window (12504491 shorter \
                 kernel(s), 25.0 % of the GPU time, left out: GMPROF_PM_KERNEL_ROWS=all keeps them)"
            ),
            "{line}"
        );
        assert!(pm_line(&pm, Some((0, None))).ends_with("per kernel in pm/, the samples in pm_samples/"));
        assert!(pm_line(&pm, None).ends_with("per range and kernel in pm.csv"));
    }
}
