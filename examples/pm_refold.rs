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
use std::collections::HashMap;
use std::error::Error;

use gmprof::analysis::pm_fold::{fold, fold_report, PmScope};
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
    let idx = |name: &str| pm.metrics.iter().position(|m| m.name == name);
    let (read, write) = (
        idx("dram__bytes_read.sum.per_second").ok_or("no DRAM read metric")?,
        idx("dram__bytes_write.sum.per_second").ok_or("no DRAM write metric")?,
    );
    let reference: HashMap<(String, u32), f64> = per_range
        .ranges
        .iter()
        .filter(|r| r.depth == 0 && r.range_id.is_some())
        .filter_map(|r| {
            let m = |name: &str| {
                per_range
                    .meta
                    .metrics
                    .iter()
                    .position(|x| x.metric.name == name)
                    .and_then(|i| r.metrics.get(i).copied().flatten())
            };
            Some(((r.path.clone(), r.instance), m("dram__bytes_read.sum")? + m("dram__bytes_write.sum")?))
        })
        .collect();
    println!("alignment: {:?} (recorded: {:?})", folded.alignment, pm.alignment);
    let (mut worst, mut worst_plain) = (0.0f64, 0.0f64);
    for row in folded.rows.iter().filter(|r| r.scope == PmScope::Range && r.depth == Some(0)) {
        let Some(&reference) = reference.get(&(row.path.clone(), row.instance.unwrap_or(0))) else { continue };
        if row.end_ns - row.start_ns < 1_000_000 {
            continue;
        }
        let total = |m: usize| row.values[m].and_then(|v| v.total).unwrap_or(f64::NAN);
        let bytes = total(read) + total(write);
        let plain = |m: usize| {
            fold(&folded.samples, m, true, row.start_ns, row.end_ns).and_then(|v| v.total).unwrap_or(f64::NAN)
        };
        let plain_bytes = plain(read) + plain(write);
        let (err, err_plain) = (bytes / reference - 1.0, plain_bytes / reference - 1.0);
        worst = worst.max(err.abs());
        worst_plain = worst_plain.max(err_plain.abs());
        println!(
            "{} #{} {:.0} us: attributed {:.4e} ({:+.2} %), overlap-weighted {:.4e} ({:+.2} %), per_range {:.4e}",
            row.path,
            row.instance.unwrap_or(0),
            (row.end_ns - row.start_ns) as f64 / 1e3,
            bytes,
            err * 100.0,
            plain_bytes,
            err_plain * 100.0,
            reference
        );
    }
    println!("worst: attributed {:.2} %, overlap-weighted {:.2} %", worst * 100.0, worst_plain * 100.0);
    Ok(())
}
