//! The HTML report: one self-contained file with plots and sortable tables.
//!
//! Layer 3 (the safe profiler), report output. [`Report::to_html`] fills a page
//! (`template.html`, with its script `report.js`) with the report's data ([`data::HtmlData`],
//! serialized with `serde_json`) and the plotting library, Apache ECharts 5.6.0, vendored
//! unmodified in `vendor/` (Apache-2.0; see `vendor/README.md`). Nothing is loaded from the
//! network, so the file opens offline and can be mailed or attached to an issue.
//!
//! The page holds: the header facts (mode, device and chip, dropped and flagged counts,
//! warnings) and the text summary; a timeline overview of ranges, kernels and transfers (on
//! the synthetic kernel placement of counter modes, see [`crate::report::timeline::trace`]); each
//! range group's time with its share; DRAM bandwidth per range group and per kernel against
//! the device's theoretical peak ([`crate::model::DevicePeaks`]); a roofline when FLOP (or
//! warp instruction) counters were collected ([`data::FLOP_COUNTERS`]); sortable tables
//! of the top kernels and of every range group; and for a streamed run (issue 42), step time
//! over the whole run with the slowest steps and slow windows marked, and the whole run's
//! aggregates ([`steps`]); for a run in rotation (issue 44), one typical step's range groups
//! and the kernel names' means as the positions estimate them ([`rotation`]).
//!
//! Opened as `report.html#figures`, the page draws the charts that are figures alone, each
//! exported as SVG and PNG (`figures.js`; [`crate::report::figures`] runs it in headless
//! Chromium for `gmprof report OUT --figures DIR`).
//!
//! The page reports its own health for automated checks: `<body data-render>` becomes `ok`
//! once every chart is drawn, and `data-errors` counts script errors and `console.error`
//! calls (`scripts/check-html.sh` renders a report in headless Chromium and reads both).
//!
//! May import [`timeline`](crate::report::timeline) (the overview is drawn from the trace's
//! events), [`text`](crate::report::text) (the summary, folded names),
//! [`tables`](crate::report::tables) (the file writer) and the
//! [`Report`] model. `diff` imports its page.

pub mod data;
pub mod pc;
pub mod rotation;
pub mod steps;

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::tables::csv::write_file;
use crate::report::text::summary::SummaryOptions;

use self::data::HtmlData;

/// The vendored plotting library.
const ECHARTS: &str = include_str!("vendor/echarts.min.js");
/// Its version, shown in the page's footer.
pub const ECHARTS_VERSION: &str = "5.6.0";
/// The report's page: its head (title, page-health script, style) is every page's head.
const TEMPLATE: &str = include_str!("template.html");
/// Helpers every page's script uses (`window.gmprofUi`).
const COMMON: &str = include_str!("common.js");
const SCRIPT: &str = include_str!("report.js");
/// The report page's figure mode (`report.html#figures`, `window.gmprofFigures`), which
/// `report.js` runs when asked.
const FIGURES: &str = include_str!("figures.js");

/// JSON that is safe inside a `<script>` element: every `<` is written as `\u003c` (valid
/// JSON, since `<` occurs only inside strings), so no text can close the element.
fn script_safe_json<T: serde::Serialize>(data: &T, what: &'static str) -> Result<String> {
    let json = serde_json::to_string(data).map_err(|e| Error::Serialize { what, message: e.to_string() })?;
    Ok(json.replace('<', "\\u003c"))
}

/// Text for HTML element content.
pub(crate) fn escape_html(text: &str) -> String {
    crate::report::text::format::escape_markup(text)
}

/// The report template's head (through `</head>`), its body up to the footer, and the
/// footer with the script slots, which every page shares.
fn template_parts() -> Result<(&'static str, &'static str, &'static str)> {
    const END: &str = "</head>\n";
    const FOOTER: &str = "<footer>";
    let at = TEMPLATE.find(END).ok_or_else(|| Error::InvalidState("the HTML template lacks its head".into()))?;
    let (head, rest) = TEMPLATE.split_at(at + END.len());
    let foot = rest.find(FOOTER).ok_or_else(|| Error::InvalidState("the HTML template lacks its footer".into()))?;
    let (body, tail) = rest.split_at(foot);
    Ok((head, body, tail))
}

/// One self-contained page: the report template's head with `title`, then `body`, then
/// the template's footer and script slots, which are filled: `{{ECHARTS_VERSION}}`,
/// `/*{{SCRIPT}}*/` (the shared helpers, then `script`), `/*{{ECHARTS}}*/` (the library)
/// and `{{DATA}}` (`data` as JSON).
pub(crate) fn page<T: serde::Serialize>(
    title: &str,
    body: &str,
    script: &str,
    data: &T,
    what: &'static str,
) -> Result<String> {
    let (head, _, tail) = template_parts()?;
    // Each part is inserted once, in this order; the library and the data go last so
    // that no text of theirs is searched for a placeholder.
    let page = format!("{}{}{}", head.replacen("{{TITLE}}", &escape_html(title), 1), body, tail)
        .replacen("{{ECHARTS_VERSION}}", ECHARTS_VERSION, 1)
        .replacen("/*{{SCRIPT}}*/", &format!("{COMMON}\n{script}"), 1);
    let (before, tail) = page
        .split_once("/*{{ECHARTS}}*/")
        .ok_or_else(|| Error::InvalidState("the HTML page lacks its library slot".into()))?;
    let (middle, end) =
        tail.split_once("{{DATA}}").ok_or_else(|| Error::InvalidState("the HTML page lacks its data slot".into()))?;
    let json = script_safe_json(data, what)?;
    let mut out = String::with_capacity(page.len() + ECHARTS.len() + json.len());
    out.push_str(before);
    out.push_str(ECHARTS);
    out.push_str(middle);
    out.push_str(&json);
    out.push_str(end);
    Ok(out)
}

/// The report's page of `data`; opened as `PAGE#figures`, it draws the figures alone
/// (`figures.js`, [`crate::report::figures`]).
pub(crate) fn report_page(data: &HtmlData) -> Result<String> {
    let title = format!("gmprof report: {} · {}", data.meta.device, data.meta.mode);
    page(&title, template_parts()?.1, &format!("{FIGURES}\n{SCRIPT}"), data, "HTML report")
}

impl Report {
    /// The report as one self-contained HTML page; range groups are made with `options`.
    pub fn to_html(&self, options: &SummaryOptions) -> Result<String> {
        report_page(&HtmlData::of(self, options))
    }

    /// [`Report::to_html`] of the report read from `dir`: a streamed run's step chart is
    /// drawn from every step of its `steps/` parts ([`steps::StreamedView::of_parts`]), not
    /// only the steps `report.json` holds (when `dir` has none, from those).
    pub fn to_html_in(&self, dir: &Path, options: &SummaryOptions) -> Result<String> {
        report_page(&HtmlData::of_in(self, dir, options)?)
    }

    /// Writes [`Report::to_html_in`] to the file `path`.
    pub fn write_html_in(&self, dir: &Path, path: impl AsRef<Path>, options: &SummaryOptions) -> Result<()> {
        let page = self.to_html_in(dir, options)?;
        write_file(path.as_ref(), |out| {
            out.write_all(page.as_bytes()).map_err(|e| Error::Serialize { what: "HTML report", message: e.to_string() })
        })
    }

    /// Writes [`Report::to_html`] to `out`.
    pub fn write_html_to<W: Write>(&self, mut out: W, options: &SummaryOptions) -> Result<()> {
        let page = self.to_html(options)?;
        out.write_all(page.as_bytes()).map_err(|e| Error::Serialize { what: "HTML report", message: e.to_string() })
    }

    /// Writes [`Report::to_html`] to a file, e.g. `report.html`.
    pub fn write_html(&self, path: impl AsRef<Path>, options: &SummaryOptions) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_html_to(&mut *out, options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_text_is_escaped() {
        assert_eq!(escape_html("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
    }

    #[test]
    fn the_template_has_each_slot_once() {
        for slot in ["{{TITLE}}", "{{ECHARTS_VERSION}}", "/*{{SCRIPT}}*/", "/*{{ECHARTS}}*/", "{{DATA}}"] {
            assert_eq!(TEMPLATE.matches(slot).count(), 1, "{slot}");
        }
        for script in [SCRIPT, COMMON, FIGURES] {
            assert!(!script.contains("{{") && !script.contains("http"), "the script loads nothing");
        }
        assert!(ECHARTS.starts_with("\n/*\n* Licensed to the Apache Software Foundation"), "vendored library");
    }
}
