//! The diff as one self-contained HTML page: the change per range group, the impact of
//! ranges and kernels, and every row in a sortable table.
//!
//! Layer 3 (the safe profiler), report output. The page is made like the report's
//! ([`crate::report::html`]: its head, its page-health checks, its shared helpers and the
//! same vendored ECharts), with a body (`page.html`) and a script (`page.js`) of its own;
//! the data is the [`Diff`] itself, serialized as `--json` writes it. `scripts/check-html.sh`
//! renders it in headless Chromium.

use std::io::Write;
use std::path::Path;

use super::model::Diff;
use crate::error::{Error, Result};
use crate::report::html::page;
use crate::report::tables::csv::write_file;

const BODY: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");

impl Diff {
    /// The diff as one self-contained HTML page.
    pub fn to_html(&self) -> Result<String> {
        let title = format!("gmprof diff: {} → {}", self.base.path, self.new.path);
        page(&title, BODY, SCRIPT, self, "HTML diff")
    }

    /// Writes [`Diff::to_html`] to a file.
    pub fn write_html(&self, path: impl AsRef<Path>) -> Result<()> {
        let html = self.to_html()?;
        write_file(path.as_ref(), |out| {
            out.write_all(html.as_bytes()).map_err(|e| Error::Serialize { what: "HTML diff", message: e.to_string() })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_each_slot_once_and_loads_nothing() {
        // The body stops at its `</main>`: the footer and the slots are the report
        // template's, filled once each.
        for slot in ["{{ECHARTS_VERSION}}", "/*{{SCRIPT}}*/", "/*{{ECHARTS}}*/", "{{DATA}}", "<footer>"] {
            assert_eq!(BODY.matches(slot).count(), 0, "{slot}");
        }
        assert!(BODY.trim_end().ends_with("</main>"));
        let html = crate::report::html::page("t", BODY, SCRIPT, &serde_json::json!({"k": 1}), "test page").unwrap();
        assert!(
            !html.contains("{{ECHARTS_VERSION}}") && !html.contains("/*{{SCRIPT}}*/") && !html.contains("{{DATA}}")
        );
        assert_eq!(html.matches("<footer>").count(), 1);
        assert_eq!(html.matches("id=\"gmprof-data\">{\"k\":1}</script>").count(), 1);
        assert!(html.trim_end().ends_with("</html>"));
        assert!(!SCRIPT.contains("{{") && !SCRIPT.contains("http"), "the script loads nothing");
        assert!(SCRIPT.contains("data-render', 'ok'"), "the script reports its health");
    }
}
