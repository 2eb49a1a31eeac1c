//! `stalls.csv` and `pc_samples.csv`: PC sampling's stall reasons per range and per
//! instruction.
//!
//! Both start with the usual `# ` metadata lines and PC sampling's own (interval, samples,
//! dropped samples, drains that found the hardware buffer full, how samples reached ranges,
//! the too-few threshold), then records written by serde through the `csv` crate.
//!
//! - `stalls.csv`: one record per (range row, reason column), every reason the chip reports,
//!   zeros included: the CUPTI name, ncu's warp-state label, the samples and the
//!   `_not_issued` samples, and the share, blank when the range has fewer than
//!   [`MIN_SAMPLES`](crate::analysis::pc_fold::MIN_SAMPLES) samples (`few_samples=true`).
//! - `pc_samples.csv`: one record per (function, instruction, reason) with samples: the
//!   CUPTI name (`_not_issued` twins as their own records), the source file and line where
//!   the cubin has line information, and the SASS text where `nvdisasm` was found (blank
//!   otherwise).

use std::io::Write;
use std::path::Path;

use ::csv::{QuoteStyle, WriterBuilder};
use serde::Serialize;

use crate::analysis::pc_fold::PcReport;
use crate::error::{Error, Result};
use crate::report::model::Report;

const WHAT: &str = "PC sampling CSV";

/// The file of per-range stall reasons.
pub const STALLS_CSV: &str = "stalls.csv";
/// The file of per-instruction samples.
pub const PC_SAMPLES_CSV: &str = "pc_samples.csv";
/// The title of `stalls.csv` (its first metadata line and its Parquet twin's table name).
pub const STALLS_TITLE: &str = "PC sampling stall reasons per range";
/// The title of `pc_samples.csv`.
pub const PC_SAMPLES_TITLE: &str = "PC sampling samples per instruction";

/// One record of `stalls.csv` (and `stalls.parquet`).
#[derive(Serialize)]
pub(crate) struct StallRecord<'a> {
    pub(crate) path: &'a str,
    pub(crate) instance: u32,
    pub(crate) depth: u32,
    pub(crate) range_samples: u64,
    pub(crate) few_samples: bool,
    pub(crate) issued_pct: Option<f64>,
    pub(crate) reason: &'a str,
    pub(crate) warp_state: &'a str,
    pub(crate) samples: u64,
    pub(crate) not_issued_samples: Option<u64>,
    pub(crate) share_pct: Option<f64>,
}

/// One record of `pc_samples.csv` (and `pc_samples.parquet`).
#[derive(Serialize)]
pub(crate) struct PcSampleRecord<'a> {
    pub(crate) kernel_name: Option<&'a str>,
    pub(crate) function: &'a str,
    pub(crate) cubin_crc: String,
    pub(crate) pc_offset: String,
    pub(crate) reason: &'a str,
    pub(crate) warp_state: &'a str,
    pub(crate) samples: u64,
    pub(crate) kernel_samples: u64,
    pub(crate) file: Option<&'a str>,
    pub(crate) line: Option<u32>,
    pub(crate) sass: Option<&'a str>,
}

/// The records of `stalls.csv`: every range row × every reason column.
pub(crate) fn stall_records(pc: &PcReport) -> Vec<StallRecord<'_>> {
    let selected = pc.reasons.iter().position(|r| r.warp_state == "Selected");
    let mut out = Vec::with_capacity(pc.ranges.len() * pc.reasons.len());
    for r in &pc.ranges {
        let c = &r.counts;
        for (i, reason) in pc.reasons.iter().enumerate() {
            out.push(StallRecord {
                path: &r.path,
                instance: r.instance,
                depth: r.depth,
                range_samples: c.samples,
                few_samples: c.few_samples(),
                issued_pct: selected.and_then(|s| c.share_pct(s)).map(round2),
                reason: &reason.name,
                warp_state: &reason.warp_state,
                samples: c.by_reason[i],
                not_issued_samples: reason.not_issued_name.as_ref().map(|_| c.not_issued[i]),
                share_pct: c.share_pct(i).map(round2),
            });
        }
    }
    out
}

/// The records of `pc_samples.csv`: every instruction × reason with samples.
pub(crate) fn pc_sample_records(pc: &PcReport) -> Vec<PcSampleRecord<'_>> {
    let kernels: std::collections::HashMap<&str, (Option<&str>, u64)> =
        pc.kernels.iter().map(|k| (k.function.as_str(), (k.kernel_name.as_deref(), k.counts.samples))).collect();
    let mut out = Vec::new();
    for p in &pc.pcs {
        let (kernel_name, kernel_samples) = kernels.get(p.function.as_str()).copied().unwrap_or((None, 0));
        for (i, reason) in pc.reasons.iter().enumerate() {
            let twin = reason.not_issued_name.as_deref().map(|n| (n, p.counts.not_issued[i]));
            for (name, samples) in std::iter::once((reason.name.as_str(), p.counts.by_reason[i])).chain(twin) {
                if samples == 0 {
                    continue;
                }
                out.push(PcSampleRecord {
                    kernel_name,
                    function: &p.function,
                    cubin_crc: format!("{:#x}", p.cubin_crc),
                    pc_offset: format!("{:#x}", p.pc_offset),
                    reason: name,
                    warp_state: &reason.warp_state,
                    samples,
                    kernel_samples,
                    file: p.file.as_deref(),
                    line: p.line,
                    sass: p.sass.as_deref(),
                });
            }
        }
    }
    out
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// The PC sampling lines of the metadata.
pub fn pc_metadata_lines(pc: &PcReport) -> Vec<String> {
    let interval = match (pc.period_exponent, pc.period_cycles()) {
        (Some(e), Some(c)) => format!("2^{e} = {c} cycles"),
        _ => "unknown".to_owned(),
    };
    vec![
        format!("pc_collection: {}", pc.collection),
        format!("pc_interval: {interval}"),
        format!("pc_total_samples: {}", pc.total_samples),
        format!("pc_sampled: {}", pc.sampled),
        format!("pc_dropped_samples: {}", pc.dropped_samples),
        format!("pc_non_user_samples: {}", pc.non_user_samples),
        format!("pc_hardware_buffer_full: {}", pc.hardware_buffer_full),
        format!("pc_drains: {}", pc.drains),
        format!("pc_unattributed_samples: {}", pc.unattributed_samples),
        format!(
            "pc_attribution: {}",
            match pc.attribution {
                crate::analysis::pc_fold::PcAttribution::Exact => "exact (correlation ids)",
                crate::analysis::pc_fold::PcAttribution::ByKernelTime =>
                    "by_kernel_time (a function's samples shared among its launches' ranges by GPU time)",
                crate::analysis::pc_fold::PcAttribution::Mixed => "mixed (correlation ids where CUPTI gave them)",
                crate::analysis::pc_fold::PcAttribution::None => "none (no samples)",
            }
        ),
        format!("pc_min_samples: {} (fewer: few_samples=true, no shares)", pc.min_samples),
    ]
}

fn err(e: impl ToString) -> Error {
    Error::Serialize { what: WHAT, message: e.to_string() }
}

impl Report {
    pub(crate) fn pc_or_error(&self) -> Result<&PcReport> {
        self.pc
            .as_ref()
            .ok_or_else(|| Error::InvalidState("the report has no PC sampling (enable it with --pc-sampling)".into()))
    }

    fn write_pc_header<W: Write>(&self, out: &mut W, title: &str, pc: &PcReport) -> Result<()> {
        self.write_metadata(out, title, WHAT)?;
        for line in pc_metadata_lines(pc) {
            writeln!(out, "# {line}").map_err(err)?;
        }
        Ok(())
    }

    /// Writes `stalls.csv` to `out`; an error when the report has no PC sampling.
    pub fn write_stalls_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        let pc = self.pc_or_error()?;
        self.write_pc_header(&mut out, STALLS_TITLE, pc)?;
        let mut w = WriterBuilder::new().quote_style(QuoteStyle::NonNumeric).from_writer(out);
        for record in stall_records(pc) {
            w.serialize(record).map_err(err)?;
        }
        w.flush().map_err(err)
    }

    /// Writes `stalls.csv` to a file.
    pub fn write_stalls_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::report::tables::csv::write_file(path.as_ref(), |out| self.write_stalls_csv_to(out))
    }

    /// Writes `pc_samples.csv` to `out`; an error when the report has no PC sampling.
    pub fn write_pc_samples_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        let pc = self.pc_or_error()?;
        self.write_pc_header(&mut out, PC_SAMPLES_TITLE, pc)?;
        let mut w = WriterBuilder::new().quote_style(QuoteStyle::NonNumeric).from_writer(out);
        for record in pc_sample_records(pc) {
            w.serialize(record).map_err(err)?;
        }
        w.flush().map_err(err)
    }

    /// Writes `pc_samples.csv` to a file.
    pub fn write_pc_samples_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::report::tables::csv::write_file(path.as_ref(), |out| self.write_pc_samples_csv_to(out))
    }
}
