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

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
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
