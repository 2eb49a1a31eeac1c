//! `gmprof report` over a streamed run's directory (issue 42): what it refuses and says (a
//! process killed before its report, `--csv` of a report without rows), and its HTML page
//! drawn from the part files beside `report.json`.

use std::path::Path;

use gmprof::report::killed::report_from_parts;
use gmprof::report::rank_ranges::{streamed_without_report, STREAMED_WITHOUT_REPORT};
use gmprof::report::SummaryOptions;
use gmprof::{Error, Report, Result};

/// What `gmprof run --help` says of the streamed outputs (after the options).
pub const RUN_HELP: &str = "\
Long runs (trace mode, the default): past GMPROF_ROW_LIMIT kernel launches per GPU (default
200000) the rows are streamed to Parquet part files beside report.json (kernels/, ranges/,
steps/, aggregates/ ...) every GMPROF_STREAM_SECS (default 1) and leave memory; report.json
then holds the whole run's aggregates, and no per-row CSV or report.json rows are written.
Below the limit the outputs are the whole-file ones (per-row CSV, report.json with every row).
GMPROF_STREAM=0 keeps every row in memory and writes the whole-file outputs however long the
run. per_range and per_kernel stream only with GMPROF_STREAM=1; past the limit without
it, and in kernel_replay, a note says every row was kept.";

/// Reads the report of `path` (`file`: its `report.json`, or itself). A directory of
/// streamed part files without `report.json` (a process killed before its end) is folded
/// from its parts ([`report_from_parts`]); `--csv` (`csv`) of it, or of any streamed report,
/// which holds no rows, is an error saying what reads them: an empty table would look like a
/// run of none.
pub fn read_report(path: &Path, file: &Path, csv: bool) -> Result<Report> {
    if path.is_dir() && streamed_without_report(path) {
        if csv {
            return Err(Error::InvalidConfig(format!("{}: {STREAMED_WITHOUT_REPORT}", path.display())));
        }
        return report_from_parts(path);
    }
    let report = Report::read_json(file)?;
    if csv && report.streamed.is_some() {
        return Err(Error::InvalidConfig(format!(
            "{}: a streamed run (past GMPROF_ROW_LIMIT): its rows are in Parquet part files beside report.json \
             (ranges/, kernels/, steps/, aggregates/ ...), not in a table --csv can print; query them with DuckDB \
             or Polars (README, \"Streamed outputs\"), or load them with gmprof.load",
            file.display()
        )));
    }
    Ok(report)
}

/// Writes the HTML page of `report`, read from `file`: a streamed run's steps come from its
/// part files beside it (every step), any other run's from the report.
pub fn write_html(report: &Report, file: &Path, html: &Path, options: &SummaryOptions) -> Result<()> {
    match file.parent().filter(|_| report.streamed.is_some()) {
        Some(dir) => report.write_html_in(dir, html, options),
        None => report.write_html(html, options),
    }
}
