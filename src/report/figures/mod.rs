//! Figures for a write-up (issue 45): each chart of the HTML report as an SVG file of its own,
//! with the table behind it as CSV, so that a figure can be redrawn.
//!
//! Layer 3 (the safe profiler), report output. The figures are drawn by gmprof, in Rust
//! ([`svg`]), from the tables the HTML report's charts plot ([`HtmlData`]); no browser is
//! needed, and no PNG is written (a browser can rasterize an SVG). The charts ([`charts`]):
//! GPU time per range group, the step breakdown of a streamed run, DRAM bandwidth against the
//! device's peak (range groups, kernels), the roofline and the stall mix per range group.
//! A chart whose data the report lacks is skipped, with the reason ([`Skipped`]). Every
//! figure has a title, axis names with units and a caption line with the run's facts (GPU,
//! mode, grouping, the gmprof version that wrote the report).
//!
//! May import the [`html`](crate::report::html) page's data, [`tables`](crate::report::tables)
//! (the file writer) and the [`Report`] model.

pub mod charts;
pub mod svg;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report::html::data::HtmlData;
use crate::report::model::Report;
use crate::report::tables::csv::write_file;
use crate::report::text::summary::SummaryOptions;

pub use self::charts::{Figure, Skipped};

/// The figures of one report: those drawn and those skipped.
#[derive(Clone, Debug)]
pub struct Figures {
    pub figures: Vec<Figure>,
    pub skipped: Vec<Skipped>,
}

impl Figures {
    /// The figures of the page data `data`.
    pub fn of(data: &HtmlData) -> Self {
        let (mut figures, mut skipped) = (Vec::new(), Vec::new());
        for made in charts::all(data) {
            match made {
                Ok(f) => figures.push(f),
                Err(s) => skipped.push(s),
            }
        }
        Figures { figures, skipped }
    }

    /// Writes `NAME.svg` and `NAME.csv` of each figure into `dir` (made when missing);
    /// returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut written = Vec::new();
        for f in &self.figures {
            for (ext, text) in [("svg", &f.svg), ("csv", &f.csv)] {
                let path = dir.join(format!("{}.{ext}", f.name));
                write_file(&path, |out| out.write_all(text.as_bytes()).map_err(|e| Error::io(&path, e)))?;
                written.push(path);
            }
        }
        Ok(written)
    }
}

impl Report {
    /// The report's figures, range groups made with `options`; a streamed run's steps are read
    /// from the parts in `dir` (the directory of its `report.json`), when given.
    pub fn figures(&self, dir: Option<&Path>, options: &SummaryOptions) -> Result<Figures> {
        let data = match dir.filter(|_| self.streamed.is_some()) {
            Some(dir) => HtmlData::of_in(self, dir, options)?,
            None => HtmlData::of(self, options),
        };
        Ok(Figures::of(&data))
    }
}
