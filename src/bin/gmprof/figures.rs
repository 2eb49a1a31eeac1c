//! `gmprof report OUT --figures DIR`: each chart of the HTML report as `DIR/NAME.svg` with its
//! table as `DIR/NAME.csv` ([`gmprof::report::figures`]), and which charts were skipped and why.

use std::path::Path;

use gmprof::report::SummaryOptions;
use gmprof::{Report, Result};

/// Writes the figures of `report`, read from `file` (a streamed run's steps come from the
/// parts beside it), into `dir`, and says on standard error what was written and skipped.
pub fn write(report: &Report, file: &Path, dir: &Path, options: &SummaryOptions) -> Result<()> {
    let figures = report.figures(file.parent(), options)?;
    let written = figures.write(dir)?;
    let names: Vec<&str> = figures.figures.iter().map(|f| f.name).collect();
    eprintln!(
        "gmprof: wrote {} figure(s) to {} ({} files: NAME.svg and NAME.csv): {}",
        names.len(),
        dir.display(),
        written.len(),
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    );
    for s in &figures.skipped {
        eprintln!("gmprof: figure {} skipped: {}", s.name, s.why);
    }
    Ok(())
}
