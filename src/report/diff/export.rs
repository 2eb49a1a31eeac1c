//! A [`Diff`] as CSV (one record per [`DiffRow`](super::DiffRow)) and JSON (the whole diff), both through
//! serde.
//!
//! Layer 3 (the safe profiler), report output. The CSV starts with `# ` lines (both sides,
//! the method, the warnings), as gmprof's other tables do; blank cells are values that were
//! not measured or not tested, never 0. Every text field is quoted, for the reason
//! [`crate::report::tables::csv`] gives.

use std::io::Write;
use std::path::Path;

use ::csv::{QuoteStyle, WriterBuilder};

use super::model::Diff;
use crate::error::{Error, Result};
use crate::report::tables::csv::write_file;

/// The CSV's columns, in order (the fields of [`super::DiffRow`]).
pub const DIFF_COLUMNS: [&str; 18] = [
    "kind",
    "name",
    "quantity",
    "base_count",
    "new_count",
    "base_n",
    "new_n",
    "base_median",
    "new_median",
    "base_mean",
    "new_mean",
    "change",
    "change_pct",
    "p_value",
    "p_adjusted",
    "verdict",
    "impact_ns",
    "impact_pct",
];

fn one_line(text: &str) -> String {
    text.replace('\n', "\\n").replace('\r', "\\r")
}

impl Diff {
    /// The `# ` lines of the CSV.
    pub fn csv_metadata_lines(&self) -> Vec<String> {
        let side = |s: &super::model::SideInfo| {
            format!(
                "{} | processes {} | {} | chip {} | mode {} | metrics {}",
                s.path,
                s.processes.len(),
                s.device_name.as_deref().unwrap_or("unknown GPU"),
                s.chip.as_deref().unwrap_or("unknown"),
                s.mode,
                if s.metrics.is_empty() { "none".to_owned() } else { s.metrics.join(",") }
            )
        };
        let mut lines = vec![
            format!("gmprof diff {}", env!("CARGO_PKG_VERSION")),
            format!("base: {}", side(&self.base)),
            format!("new: {}", side(&self.new)),
            format!(
                "options: skip_first {} | threshold {} % | min impact {} % | alpha {} | group_by {}",
                self.options.skip_first,
                self.options.threshold_pct,
                self.options.min_impact_pct,
                self.options.alpha,
                self.options.group_by.as_str()
            ),
            format!("method: {}", self.method),
        ];
        lines.extend(self.warnings.iter().map(|w| format!("warning: not comparable: {w}")));
        lines.into_iter().map(|l| one_line(&l)).collect()
    }

    /// Writes the CSV to `out`.
    pub fn write_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        const WHAT: &str = "diff CSV";
        for line in self.csv_metadata_lines() {
            writeln!(out, "# {line}").map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })?;
        }
        let mut w = WriterBuilder::new().quote_style(QuoteStyle::NonNumeric).from_writer(out);
        for row in &self.rows {
            w.serialize(row).map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })?;
        }
        if self.rows.is_empty() {
            // serde writes the header with the first record; an empty diff still has one.
            w.write_record(DIFF_COLUMNS).map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })?;
        }
        w.flush().map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })
    }

    /// Writes the CSV to a file.
    pub fn write_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_csv_to(&mut *out))
    }

    /// The whole diff as pretty JSON.
    pub fn to_json_string(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::Serialize { what: "diff JSON", message: e.to_string() })
    }

    /// Writes [`Diff::to_json_string`] to a file.
    pub fn write_json(&self, path: impl AsRef<Path>) -> Result<()> {
        let text = self.to_json_string()?;
        write_file(path.as_ref(), |out| {
            out.write_all(text.as_bytes()).map_err(|e| Error::io(path.as_ref(), e))?;
            out.write_all(b"\n").map_err(|e| Error::io(path.as_ref(), e))
        })
    }
}
