//! Building a [`Report`]: analysis' rows and capture's facts assembled into one value
//! ([`Report::build`], [`Report::analyze`]), then the samplers' data folded in
//! ([`Report::attach_pm`], [`Report::attach_pc`]).
//!
//! The seam between `analysis` and `report`: analysis makes the rows and knows nothing of the
//! report; this file puts them into one. Above [`model`](crate::report::Report); nothing in
//! `report` names it.

use crate::analysis::aggregate::{aggregate, metric_rules, Aggregation};
use crate::analysis::blank_unmeasured_sass_metrics;
use crate::analysis::correlate::{Correlation, Correlator, TimeSource};
use crate::analysis::pm_check::PerRange;
use crate::analysis::{pc_fold, pm_fold};
use crate::model::pc::PcCapture;
use crate::model::pm::PmCapture;
use crate::model::session::SessionTree;
use crate::model::MetricSet;
use crate::report::model::{CaptureInfo, Report, ReportMeta};

impl Report {
    /// Assembles a report from correlated and aggregated rows.
    pub fn build(info: CaptureInfo, metrics: &MetricSet, correlation: Correlation, aggregation: Aggregation) -> Self {
        let Correlation { mut rows, counts, transfers, warnings: correlation_warnings, .. } = correlation;
        let mut ranges = aggregation.ranges;
        let mut warnings = info.warnings;
        warnings.extend(blank_unmeasured_sass_metrics(metrics, &mut rows, &mut ranges));
        // Those lost to failed calls are said by the warnings of the calls.
        let by_cupti = info.dropped_counter_ranges.saturating_sub(info.counter_ranges_lost);
        if by_cupti > 0 {
            warnings.push(format!(
                "CUPTI dropped {by_cupti} counter range(s): their kernels have no counters (raise the \
                 ranges per cycle or the counter image size)"
            ));
        }
        if info.dropped_activity_records > 0 {
            warnings.push(format!(
                "CUPTI dropped {} activity record(s): some kernels have no name or geometry \
                 (raise the activity buffer size)",
                info.dropped_activity_records
            ));
        }
        warnings.extend(correlation_warnings);
        warnings.extend(aggregation.warnings);

        let meta = ReportMeta {
            gmprof_version: env!("CARGO_PKG_VERSION").to_owned(),
            mode: info.mode,
            time_source: TimeSource::for_mode(info.mode),
            device_name: info.device_name,
            chip: info.chip,
            metrics: if aggregation.rules.len() == metrics.metrics.len() {
                aggregation.rules
            } else {
                metric_rules(metrics, info.mode)
            },
            derived_metrics: aggregation.derived,
            counter_cycles: counts.counter_cycles,
            kernel_count: rows.iter().filter(|r| r.granularity.is_kernel_execution()).count() as u64,
            total_gpu_time_ns: aggregation.total_gpu_time_ns,
            dropped_counter_ranges: info.dropped_counter_ranges,
            dropped_activity_records: info.dropped_activity_records,
            flagged_kernel_rows: counts.flagged_rows,
            orphan_counter_ranges: counts.orphan_counter_ranges,
            counts,
            warnings,
            started_unix_ns: info.started_unix_ns,
            finished_unix_ns: info.finished_unix_ns,
            clock: info.clock,
            clock_drift_ns: info.clock.map(|c| c.drift_ns()),
            run_end: info.run_end,
            device_peaks: info.device_peaks,
            profiler_pauses: info.profiler_pauses,
            self_time: info.self_time,
            driver_version: info.driver_version,
            unprofiled_contexts: info.unprofiled_contexts,
            devices: Vec::new(),
        };
        Report {
            meta,
            ranges,
            kernels: rows,
            transfers,
            pm: None,
            pc: None,
            device_timers: Vec::new(),
            device_regions: Vec::new(),
            probes: Vec::new(),
            range_devices: Vec::new(),
            streamed: None,
            rotation: None,
        }
    }

    /// Folds a session's PM samples into its ranges and kernels ([`pm_fold`]) and adds the
    /// sampler's losses and errors to the warnings.
    pub fn attach_pm(&mut self, capture: &PmCapture) {
        let pm = pm_fold::fold_report(capture, &self.ranges, &self.kernels);
        self.meta.warnings.extend(pm.warnings(&capture.errors));
        self.pm = Some(pm);
    }

    /// Folds a session's PC samples into stall reasons per range, kernel and instruction
    /// ([`pc_fold`]) and adds the sampler's losses and errors to the warnings.
    pub fn attach_pc(&mut self, capture: &PcCapture) {
        let mut pc = pc_fold::fold(capture, &self.ranges, &self.kernels);
        // A streamed run's rows are in its part files, not here: its samples cannot be folded.
        pc.rows_streamed = self.streamed.is_some();
        self.meta.warnings.extend(pc.warnings());
        if pc.total_samples == 0 && self.meta.kernel_count > 0 {
            // Never an empty stalls.csv without a word.
            self.meta.warnings.push(format!(
                "PC sampling recorded no samples although {} kernel(s) ran{}",
                self.meta.kernel_count,
                if self.meta.mode == crate::model::ProfilingMode::Trace {
                    String::new()
                } else {
                    format!(" (beside {} mode: CUPTI may not sample PCs while the range profiler holds the counters; use --mode trace)", self.meta.mode.as_str())
                }
            ));
        }
        self.pc = Some(pc);
    }

    /// Correlates, aggregates and assembles in one step: the whole analysis stage.
    pub fn analyze(info: CaptureInfo, metrics: &MetricSet, tree: &SessionTree, correlator: Correlator) -> Self {
        let correlation = correlator.finish(tree, metrics, info.mode);
        let aggregation = aggregate(tree, &correlation, metrics, info.mode);
        let rotation = info
            .rotation
            .clone()
            .map(|run| crate::analysis::rotation::analyze(run, tree, &correlation.rows, &aggregation.rules));
        let mut report = Report::build(info, metrics, correlation, aggregation);
        if rotation.is_some() {
            // Each range instance measured a slice of its launches: its sums would be a
            // slice's. The rotation's group estimates stand for them.
            for row in &mut report.ranges {
                row.metrics.iter_mut().for_each(|v| *v = None);
                row.dram_read_bytes = None;
                row.dram_write_bytes = None;
                row.dram_read_gbps = None;
                row.dram_write_gbps = None;
                row.dram_total_gbps = None;
            }
        }
        report.rotation = rotation;
        report
    }
}

/// What [`compare_with_per_range`](crate::analysis::pm_check::compare_with_per_range) reads of
/// a per_range report: its metric columns and its range rows.
impl<'a> From<&'a Report> for PerRange<'a> {
    fn from(report: &'a Report) -> Self {
        PerRange { metrics: &report.meta.metrics, ranges: &report.ranges }
    }
}
