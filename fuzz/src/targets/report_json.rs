//! `report_json`: a `report.json` (or, starting with zstd's magic, a `report.json.zst`) as
//! `gmprof report`, `merge` and `diff` read it ([`Report::read_json`], from a file), then what each command makes of it: the summary in
//! each grouping, the statistics, the CSV and the HTML report (`gmprof report`), the merge of
//! it beside itself with its merged trace (`gmprof merge`), and its diff against the golden
//! report both ways (`gmprof diff`).

use std::path::PathBuf;

use gmprof::report::diff::{Diff, DiffOptions};
use gmprof::report::merge::{MergeOptions, Merged, ProcessReport};
use gmprof::report::{merge_trace, GroupBy, Report, SummaryOptions};

/// The report `tests/golden` holds (a recorded per-range run).
fn golden() -> &'static ProcessReport {
    static GOLDEN: std::sync::OnceLock<ProcessReport> = std::sync::OnceLock::new();
    GOLDEN.get_or_init(|| ProcessReport {
        label: "golden".into(),
        dir: PathBuf::new(),
        report: Report::from_json(include_str!("../../../tests/golden/report.json")).expect("the golden report reads"),
    })
}

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Runs one input.
pub fn run(data: &[u8]) {
    let name = if data.starts_with(&ZSTD_MAGIC) { "report.json.zst" } else { "report.json" };
    let Some(path) = super::scratch_file(name, data) else { return };
    let Ok(report) = Report::read_json(&path) else { return };
    // gmprof report
    for group_by in [GroupBy::Path, GroupBy::Name, GroupBy::Instance] {
        for (top, skip_first) in [(Some(5), 0), (None, 1)] {
            let _ = report.summary_with(&SummaryOptions { group_by, top, skip_first }).to_string();
        }
    }
    let _ = report.stats().to_string();
    let _ = report.write_csv_to(std::io::sink());
    let _ = report.to_html(&SummaryOptions::default());
    // gmprof merge
    let this = ProcessReport { label: "fuzz".into(), dir: PathBuf::new(), report };
    let both = [this.clone(), golden().clone()];
    if let Ok(merged) = Merged::of(&both, &MergeOptions::default()) {
        let _ = merged.to_string();
        let _ = merged.write_csv_to(std::io::sink());
        let _ = merged.write_kernels_csv_to(std::io::sink());
    }
    let _ = merge_trace::merged_trace(&both).write_to(std::io::sink());
    // gmprof diff
    let pairs = [(&this, golden()), (golden(), &this)];
    for (base, new) in pairs {
        let diff =
            Diff::of("base", std::slice::from_ref(base), "new", std::slice::from_ref(new), DiffOptions::default());
        let _ = diff.table().to_string();
        let _ = diff.write_csv_to(std::io::sink());
        let _ = diff.to_json_string();
        let _ = diff.to_html();
    }
}
