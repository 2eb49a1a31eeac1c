//! Folds the PM samples of a written report again, with this build's attribution, and
//! compares each range's DRAM bytes with a per_range report of the same program.
//!
//! `pm_validate` writes both (`trace_pm_<interval>/report.json` and `per_range/report.json`);
//! this re-checks recorded GPU data on a machine without a GPU:
//!
//! ```text
//! cargo run --release --example pm_refold -- out/pm/trace_pm_100us/report.json out/pm/per_range/report.json
//! ```
//!
//! With a third argument, the samples are shifted by that many ns instead of aligned.
//!
//! Prints one line per top-level range instance with the attributed and the overlap-weighted
//! bytes against per_range's, then the worst of each.
use std::error::Error;

use gmprof::analysis::pm_check::{compare_with_per_range, DRAM_BYTES};
use gmprof::analysis::pm_fold::fold_report;
use gmprof::report::Report;

fn load(path: &str) -> Result<Report, Box<dyn Error>> {
    Ok(serde_json::from_reader(std::io::BufReader::new(std::fs::File::open(path)?))?)
}

/// `--kernels REPORT OUT.csv [OFFSET_NS]`: every kernel row of the fold, one line per
/// kernel and metric (start, duration, name, metric, total, confidence, windows), in start
/// order, for `scripts/check/pm_vs_ncu.py`-style comparisons of attribution changes on recorded data.
fn kernel_rows(report: &str, out: &str, offset: Option<i64>) -> Result<(), Box<dyn Error>> {
    let traced = load(report)?;
    let pm = traced.pm.as_ref().ok_or("the report has no PM samples")?;
    let mut capture = pm.to_capture();
    if let Some(offset) = offset {
        for s in &mut capture.samples {
            s.start_ns = (s.start_ns as i64 + offset) as u64;
            s.end_ns = (s.end_ns as i64 + offset) as u64;
        }
    }
    let t0 = std::time::Instant::now();
    let folded = fold_report(&capture, &traced.ranges, &traced.kernels);
    eprintln!(
        "folded {} samples over {} kernels in {:.1} s",
        capture.samples.len(),
        traced.kernels.len(),
        t0.elapsed().as_secs_f64()
    );
    let mut w = csv::Writer::from_path(out)?;
    w.write_record([
        "scope",
        "start_ns",
        "end_ns",
        "duration_ns",
        "kernel_name",
        "metric",
        "total",
        "confidence",
        "windows",
        "coverage",
        "edge_share",
    ])?;
    let mut rows: Vec<_> = folded.rows.iter().filter(|r| r.kernel_name.is_some()).collect();
    rows.sort_by_key(|r| r.start_ns);
    for r in rows {
        for (m, v) in folded.metrics.iter().zip(&r.values) {
            let text = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
            w.write_record([
                "kernel".to_owned(),
                r.start_ns.to_string(),
                r.end_ns.to_string(),
                (r.end_ns - r.start_ns).to_string(),
                r.kernel_name.clone().unwrap_or_default(),
                m.name.clone(),
                text(v.and_then(|v| v.total)),
                v.and_then(|v| v.confidence).map(|c| c.as_str().to_owned()).unwrap_or_default(),
                text(v.map(|v| v.windows)),
                text(v.map(|v| v.coverage)),
                text(v.and_then(|v| v.edge_share)),
            ])?;
        }
    }
    w.flush()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--kernels") {
        return match &args[2..] {
            [report, out] => kernel_rows(report, out, None),
            [report, out, offset] => kernel_rows(report, out, Some(offset.parse()?)),
            _ => Err("usage: pm_refold --kernels REPORT.json OUT.csv [OFFSET_NS]".into()),
        };
    }
    let (traced, per_range, forced) = match args.as_slice() {
        [_, t, p] => (t, p, None),
        [_, t, p, offset] => (t, p, Some(offset.parse::<i64>()?)),
        _ => return Err("usage: pm_refold TRACE_PM/report.json PER_RANGE/report.json [OFFSET_NS]".into()),
    };
    let traced = load(traced)?;
    let per_range = load(per_range)?;
    let pm = traced.pm.as_ref().ok_or("the first report has no PM samples")?;
    // Back onto the sampler's clock: fold_report aligns again.
    // With OFFSET_NS, the samples are shifted by it and not aligned again.
    let mut capture = pm.to_capture();
    if let Some(offset) = forced {
        for m in &mut capture.metrics {
            m.name = m.name.replace("gr__cycles_active", "gr__cycles_active (not aligned)");
        }
        for s in &mut capture.samples {
            s.start_ns = (s.start_ns as i64 + offset) as u64;
            s.end_ns = (s.end_ns as i64 + offset) as u64;
        }
    }
    let folded = fold_report(&capture, &traced.ranges, &traced.kernels);
    let check = compare_with_per_range(&folded, &per_range, DRAM_BYTES, 1_000_000)?;
    println!("alignment: {:?} (recorded: {:?})", folded.alignment, pm.alignment);
    let percent = |e: Option<f64>| e.map_or(f64::NAN, |e| e * 100.0);
    for c in &check.ranges {
        println!(
            "{} #{} {:.0} us: attributed {:.4e} ({:+.2} %), overlap-weighted {:.4e} ({:+.2} %), per_range {:.4e}",
            c.path,
            c.instance,
            c.duration_ns() as f64 / 1e3,
            c.attributed.unwrap_or(f64::NAN),
            percent(c.error()),
            c.overlap_weighted.unwrap_or(f64::NAN),
            percent(c.overlap_error()),
            c.reference
        );
    }
    println!(
        "worst: attributed {:.2} %, overlap-weighted {:.2} % ({} ranges; {} without a per_range value)",
        percent(check.worst()),
        percent(check.worst_overlap()),
        check.ranges.len(),
        check.unmatched
    );
    Ok(())
}
