//! `gmprof report OUT --figures DIR`: each chart of the HTML report as `DIR/NAME.svg` and
//! `DIR/NAME.png`, drawn by the report's own page in headless Chromium, with its table as
//! `DIR/NAME.csv` ([`gmprof::report::figures`]), and which charts were skipped and why. With no
//! browser (none found, or `GMPROF_CHROMIUM=none`) the SVGs are the ones gmprof draws itself,
//! there is no PNG, and the command says so and how to get them.

use std::path::Path;

use gmprof::report::figures::browser::{self, Browser};
use gmprof::report::figures::DrawnBy;
use gmprof::report::SummaryOptions;
use gmprof::{Report, Result};

/// Writes the figures of `report`, read from `file` (a streamed run's steps come from the
/// parts beside it), into `dir`, and says on standard error what was written and skipped.
pub fn write(report: &Report, file: &Path, dir: &Path, options: &SummaryOptions) -> Result<()> {
    let found = browser::find()?;
    let figures = match &found {
        Browser::At(chromium) => report.figures_in_browser(file.parent(), options, chromium, browser::TIMEOUT)?,
        Browser::Off | Browser::Missing => report.figures(file.parent(), options)?,
    };
    let written = figures.write(dir)?;
    let names: Vec<&str> = figures.figures.iter().map(|f| f.name).collect();
    let (files, by) = match &figures.drawn_by {
        DrawnBy::Page(chromium) => (
            "NAME.svg, NAME.png and NAME.csv".to_owned(),
            format!("drawn by the HTML report's page in {}", chromium.display()),
        ),
        DrawnBy::Gmprof => ("NAME.svg and NAME.csv, no PNG".to_owned(), "SVG drawn by gmprof".to_owned()),
    };
    eprintln!(
        "gmprof: wrote {} figure(s) to {} ({} files: {files}; {by}): {}",
        names.len(),
        dir.display(),
        written.len(),
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    );
    for s in &figures.skipped {
        eprintln!("gmprof: figure {} skipped: {}", s.name, s.why);
    }
    for line in &figures.console {
        eprintln!("gmprof: warning: the browser's console while drawing the figures: {line}");
    }
    match found {
        Browser::Missing => eprintln!(
            "gmprof: no browser found ({} unset; none of {} on PATH): the SVGs are gmprof's own drawing and no PNG \
             was written. For the figures as the HTML report draws them, as SVG and PNG: {}.",
            browser::ENV,
            browser::NAMES.join(", "),
            browser::HOW
        ),
        Browser::Off => {
            eprintln!("gmprof: {}=none: the SVGs are gmprof's own drawing and no PNG was written", browser::ENV)
        }
        Browser::At(_) => {}
    }
    Ok(())
}
