//! The text of a streamed run ([`StreamedSummary`]): why its rows are in part files, and the
//! range groups and kernels with the most time from the whole run's aggregates, in place of
//! the summary's range table (which a streamed report has no rows for).
//!
//! Imports `format` and the streamed summary; `gmprof report` (and so `gmprof run`) prints it
//! after the summary.

use std::fmt::Write as _;

use super::format::{format_duration_ns, BLANK};
use crate::analysis::online::{AggregateQuantity, AggregateRow, AggregateTable, FlightSummary};
use crate::report::stream::summary::StreamedSummary;

/// Rows shown per table.
pub const STREAMED_TOP: usize = 10;

fn duration(ns: Option<u64>) -> String {
    ns.map_or_else(|| BLANK.to_owned(), |t| format_duration_ns(t as f64))
}

fn table(out: &mut String, title: &str, rows: &mut Vec<&AggregateRow>) {
    rows.sort_by(|a, b| b.summary.total_ns.cmp(&a.summary.total_ns).then_with(|| a.key.cmp(&b.key)));
    let _ = writeln!(out, "{title} (whole run, from the aggregates; p50 and p99 within 1 %):");
    let _ = writeln!(out, "  {:>10} {:>12} {:>10} {:>10} {:>10}  name", "count", "total", "mean", "p50", "p99");
    for r in rows.iter().take(STREAMED_TOP) {
        let s = &r.summary;
        let mean = s.mean_ns.map_or_else(|| BLANK.to_owned(), format_duration_ns);
        let _ = writeln!(
            out,
            "  {:>10} {:>12} {:>10} {:>10} {:>10}  {}",
            s.count,
            duration(s.total_ns),
            mean,
            duration(s.p50_ns),
            duration(s.p99_ns),
            r.key
        );
    }
    if rows.len() > STREAMED_TOP {
        let _ = writeln!(out, "  ... and {} more (aggregates/ parts)", rows.len() - STREAMED_TOP);
    }
}

/// The text: the why, the range groups' GPU time and the kernels' durations.
pub fn streamed_text(s: &StreamedSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "streamed: {} kernels, {} transfers, {} range instances, {} steps{}",
        s.kernels,
        s.transfers,
        s.ranges,
        s.steps,
        s.step_group.as_deref().map(|g| format!(" (step range `{g}`)")).unwrap_or_default()
    );
    let _ = writeln!(out, "{}", s.why);
    if let Some(t) = &s.drain_times {
        let ms = |ns: u64| ns as f64 / 1e6;
        let _ = writeln!(
            out,
            "drains: {} while the run went, {:.1} ms each on average ({:.1} ms at most); the program's launches could \
             wait {:.2} ms each on average ({:.2} ms at most) while one took the rows out of the session",
            t.drains,
            ms(t.total_ns) / t.drains.max(1) as f64,
            ms(t.total_max_ns),
            ms(t.session_lock_ns) / t.drains.max(1) as f64,
            ms(t.session_lock_max_ns)
        );
        if t.other_lock_ns > 0 {
            let _ = writeln!(
                out,
                "the drains also held the session {:.2} ms each on average (one hold {:.2} ms at most) moving CUPTI's records in \
                 and the completed ranges out",
                ms(t.other_lock_ns) / t.drains.max(1) as f64,
                ms(t.other_lock_max_ns)
            );
        }
        if t.release_ns > 0 {
            let _ = writeln!(
                out,
                "memory given back to the system every few drains (GMPROF_STREAM_TRIM=0 keeps it): {:.2} ms in all \
                 ({:.2} ms at most)",
                ms(t.release_ns),
                ms(t.release_max_ns)
            );
        }
    }
    if s.flight.is_none() {
        let _ = writeln!(
            out,
            "(GMPROF_STREAM=0 keeps every row in memory and writes the per-row CSV and report.json rows instead)"
        );
    }
    let _ = writeln!(out, "(the range rows are in ranges/; the tables below come from the whole run's aggregates)");
    let pick = |table: AggregateTable, quantity: AggregateQuantity| -> Vec<&AggregateRow> {
        s.aggregates.iter().filter(|a| a.table == table && a.quantity == quantity).collect()
    };
    table(&mut out, "range groups by GPU time", &mut pick(AggregateTable::Range, AggregateQuantity::GpuTimeNs));
    table(&mut out, "kernels by duration", &mut pick(AggregateTable::Kernel, AggregateQuantity::DurationNs));
    if let Some(f) = &s.flight {
        flight(&mut out, f);
    }
    out
}

/// The flight recorder's windows, one line each.
fn flight(out: &mut String, f: &FlightSummary) {
    match f.windows.len() {
        0 => {
            let _ = writeln!(out, "flight recorder: no window ({})", f.settings);
        }
        n => {
            let _ = writeln!(out, "flight recorder: {n} window(s) ({})", f.settings);
        }
    }
    for w in &f.windows {
        let steps = match (w.first_step, w.last_step) {
            (Some(a), Some(b)) => format!("steps {a} to {b}"),
            _ => "after the last step".to_owned(),
        };
        let first = w.triggers.first().map_or("", String::as_str);
        let more = if w.triggers.len() > 1 { format!(" (and {} more)", w.triggers.len() - 1) } else { String::new() };
        let _ = writeln!(out, "  {}/: {steps}, {} kernels: {first}{more}", w.dir, w.kernels);
    }
    if f.suppressed > 0 {
        let first = f.suppressed_first.first().map_or("", String::as_str);
        let _ = writeln!(out, "  {} trigger(s) not written (rate limit), the first: {first}", f.suppressed);
    }
    if f.dropped_rows > 0 {
        let _ = writeln!(
            out,
            "  {} row(s) not kept: the recorder was at its row bound (GMPROF_FLIGHT_ROWS); windows may lack rows",
            f.dropped_rows
        );
    }
    for e in &f.errors {
        let _ = writeln!(out, "  {e}");
    }
}
