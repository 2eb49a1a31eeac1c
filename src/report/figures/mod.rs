//! Figures for a write-up (issue 45): each chart of the HTML report as SVG and PNG files of its
//! own, with the table behind it as CSV, so that a figure can be redrawn.
//!
//! Layer 3 (the safe profiler), report output. The charts: GPU time per range group, the step
//! breakdown of a streamed run, DRAM bandwidth against the device's peak (range groups,
//! kernels), the roofline and the stall mix per range group. Every figure has a title, axis
//! names with units and a caption line with the run's facts (GPU, mode, grouping, the gmprof
//! version that wrote the report). A chart whose data the report lacks is skipped, with the
//! reason ([`Skipped`]).
//!
//! Two ways to draw them:
//! - [`Report::figures_in_browser`]: the HTML report's own page, opened as `#figures` in
//!   headless Chromium ([`browser`]), draws each chart alone with the same chart code as the
//!   interactive page and hands out SVG (ECharts' SVG renderer) and PNG ([`page`]);
//! - [`Report::figures`]: gmprof draws an SVG of each in Rust ([`svg`]), with no browser and no
//!   PNG (what `gmprof report --figures` writes when no browser is found).
//!
//! Both write the same tables ([`charts`], from the page's data [`HtmlData`]); the browser's
//! figures must be exactly those that have a table, or the run is an error naming the figure.
//!
//! May import the [`html`](crate::report::html) page and its data,
//! [`tables`](crate::report::tables) (the file writer) and the [`Report`] model.

pub mod browser;
pub mod charts;
pub mod page;
pub mod svg;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::report::html::data::HtmlData;
use crate::report::html::report_page;
use crate::report::model::Report;
use crate::report::tables::csv::write_file;
use crate::report::text::summary::SummaryOptions;

pub use self::charts::{Figure, Skipped};

/// Who drew the figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrawnBy {
    /// gmprof, in Rust ([`svg`]): SVG only.
    Gmprof,
    /// The HTML report's page in this browser: SVG and PNG.
    Page(PathBuf),
}

/// The figures of one report: those drawn and those skipped.
#[derive(Clone, Debug)]
pub struct Figures {
    pub figures: Vec<Figure>,
    pub skipped: Vec<Skipped>,
    pub drawn_by: DrawnBy,
    /// The browser's console lines while the page drew (none when all is well).
    pub console: Vec<String>,
}

impl Figures {
    /// The figures of the page data `data`, drawn by gmprof.
    pub fn of(data: &HtmlData) -> Self {
        let (mut figures, mut skipped) = (Vec::new(), Vec::new());
        for made in charts::all(data) {
            match made {
                Ok(f) => figures.push(f),
                Err(s) => skipped.push(s),
            }
        }
        Figures { figures, skipped, drawn_by: DrawnBy::Gmprof, console: Vec::new() }
    }

    /// The figures of `data` drawn by its page (`report.html#figures`) in `browser`, with
    /// gmprof's tables; the browser is killed after `timeout`.
    pub fn in_browser(data: &HtmlData, browser: &Path, timeout: Duration) -> Result<Self> {
        let tables = Figures::of(data);
        let tmp = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let html = tmp.path().join("report.html");
        let text = report_page(data)?;
        write_file(&html, |out| out.write_all(text.as_bytes()).map_err(|e| Error::io(&html, e)))?;
        let dump = browser::dump_dom(browser, &html, "figures", timeout)?;
        let drawn = page::read(&dump)?;
        Self::matched(tables, drawn, browser, dump.console)
    }

    /// gmprof's tables `tables` with the page's drawings `drawn`: each figure with a table must
    /// be drawn, and none without.
    fn matched(tables: Figures, mut drawn: page::PageFigures, browser: &Path, console: Vec<String>) -> Result<Self> {
        let mut figures = Vec::new();
        for mut f in tables.figures {
            let Some(at) = drawn.figures.iter().position(|d| d.name == f.name) else {
                let why = match drawn.skipped.iter().find(|s| s.0 == f.name) {
                    Some((_, why)) => format!("it says: {why}"),
                    None => "it neither drew nor skipped it".to_owned(),
                };
                return Err(Error::InvalidState(format!(
                    "the HTML report's page drew no chart {} although its table has {} row(s) ({why}); this is a bug \
                     in gmprof: please report it with the report.json. GMPROF_CHROMIUM=none writes the figures gmprof \
                     draws itself (SVG, no PNG)",
                    f.name,
                    f.csv.lines().count().saturating_sub(1)
                )));
            };
            let d = drawn.figures.remove(at);
            (f.title, f.svg, f.png) = (d.title, d.svg, Some(d.png));
            figures.push(f);
        }
        if let Some(extra) = drawn.figures.first() {
            let why = tables.skipped.iter().find(|s| s.name == extra.name).map_or("", |s| s.why.as_str());
            return Err(Error::InvalidState(format!(
                "the HTML report's page drew a chart {} that gmprof has no table for ({why}); this is a bug in gmprof: \
                 please report it with the report.json",
                extra.name
            )));
        }
        Ok(Figures { figures, skipped: tables.skipped, drawn_by: DrawnBy::Page(browser.to_owned()), console })
    }

    /// Writes `NAME.svg`, `NAME.png` (when drawn) and `NAME.csv` of each figure into `dir`
    /// (made when missing); returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut written = Vec::new();
        for f in &self.figures {
            let files = [("svg", Some(f.svg.as_bytes())), ("png", f.png.as_deref()), ("csv", Some(f.csv.as_bytes()))];
            for (ext, bytes) in files {
                let Some(bytes) = bytes else { continue };
                let path = dir.join(format!("{}.{ext}", f.name));
                write_file(&path, |out| out.write_all(bytes).map_err(|e| Error::io(&path, e)))?;
                written.push(path);
            }
        }
        Ok(written)
    }
}

impl Report {
    /// The page data of the figures: range groups made with `options`; a streamed run's steps
    /// are read from the parts in `dir` (the directory of its `report.json`), when given.
    fn figure_data(&self, dir: Option<&Path>, options: &SummaryOptions) -> Result<HtmlData> {
        match dir.filter(|_| self.streamed.is_some()) {
            Some(dir) => HtmlData::of_in(self, dir, options),
            None => Ok(HtmlData::of(self, options)),
        }
    }

    /// The report's figures as gmprof draws them (SVG, no PNG; no browser needed); range
    /// groups made with `options`, a streamed run's steps read from the parts in `dir`.
    pub fn figures(&self, dir: Option<&Path>, options: &SummaryOptions) -> Result<Figures> {
        Ok(Figures::of(&self.figure_data(dir, options)?))
    }

    /// The report's figures as its HTML page draws them in headless `browser` (SVG and PNG),
    /// with the tables of [`Report::figures`]; the browser is killed after `timeout`
    /// ([`browser::TIMEOUT`] for the command).
    pub fn figures_in_browser(
        &self,
        dir: Option<&Path>,
        options: &SummaryOptions,
        browser: &Path,
        timeout: Duration,
    ) -> Result<Figures> {
        Figures::in_browser(&self.figure_data(dir, options)?, browser, timeout)
    }
}
