//! `positions.csv`: per_kernel in rotation, one row per launch position of each step template
//! ([`crate::analysis::rotation`]): its template and position, range group, kernel, grid and
//! block, how many launches it had and how many were measured, the step of its first
//! measurement, its mean kernel time, and the mean of each metric over its measurements
//! (blank where never measured). `# ` lines first: the report's metadata, then the rotation's N,
//! steps and templates.

use std::io::Write;
use std::path::Path;

use ::csv::{QuoteStyle, WriterBuilder};

use super::csv::write_file;
use crate::error::{Error, Result};
use crate::report::model::Report;

/// The file name.
pub const POSITIONS_CSV: &str = "positions.csv";

/// The columns before the metrics.
pub const POSITIONS_COLUMNS: [&str; 17] = [
    "template",
    "position",
    "range_group",
    "kernel_name",
    "grid_x",
    "grid_y",
    "grid_z",
    "grids",
    "block_x",
    "block_y",
    "block_z",
    "launches",
    "measured",
    "first_measured_step",
    "steps_in_template",
    "duration_ns",
    "template_step_path",
];

impl Report {
    /// Writes `positions.csv` (see the [module docs](self)) to `out`; nothing without rotation.
    pub fn write_positions_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        const WHAT: &str = "positions CSV";
        let Some(rotation) = &self.rotation else { return Ok(()) };
        let fail = |e: &dyn std::fmt::Display| Error::Serialize { what: WHAT, message: e.to_string() };
        self.write_metadata(&mut out, "launch positions", WHAT)?;
        for line in rotation.describe() {
            writeln!(out, "# {}", line.trim_start()).map_err(|e| fail(&e))?;
        }
        let mut w = WriterBuilder::new().quote_style(QuoteStyle::NonNumeric).from_writer(out);
        let names = self.metric_names();
        let mut header: Vec<&str> = POSITIONS_COLUMNS.to_vec();
        header.extend(names.iter().copied());
        w.write_record(&header).map_err(|e| fail(&e))?;
        let opt = |v: Option<String>| v.unwrap_or_default();
        for p in &rotation.positions {
            let template = rotation.templates.get(p.template as usize);
            let dims = |d: Option<[i32; 3]>, i: usize| opt(d.map(|d| d[i].to_string()));
            let mut record = vec![
                p.template.to_string(),
                p.position.to_string(),
                p.range_group.clone(),
                p.kernel_name.clone(),
                dims(p.grid, 0),
                dims(p.grid, 1),
                dims(p.grid, 2),
                p.grids.to_string(),
                dims(p.block, 0),
                dims(p.block, 1),
                dims(p.block, 2),
                p.launches.to_string(),
                p.measured.to_string(),
                opt(p.first_measured_step.map(|s| s.to_string())),
                opt(template.map(|t| t.steps.to_string())),
                opt(p.duration_ns.map(|d| format!("{d:.1}"))),
                opt(template.map(|t| t.step_path.clone())),
            ];
            record.extend(p.values.iter().map(|v| opt(v.map(|v| v.to_string()))));
            w.write_record(&record).map_err(|e| fail(&e))?;
        }
        w.flush().map_err(|e| fail(&e))
    }

    /// Writes `positions.csv` to a file.
    pub fn write_positions_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_positions_csv_to(out))
    }
}
