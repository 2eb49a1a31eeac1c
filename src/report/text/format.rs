//! Text for tables and summary lines: durations with a readable unit, the blank of a value
//! that was not measured, cells that a name cannot break, and text escaped for HTML and SVG
//! (the HTML report and the figures).
//!
//! Layer 3, at the bottom of `report`'s text: the summary, the statistics table, and the
//! merge and diff tables (`runs`, `diff`) all format through it, and it imports nothing.

/// Text of a value that was not measured.
pub const BLANK: &str = "—";

/// A duration in ns as text with a readable unit: `850 ns`, `12.35 us`, `4.560 ms`, `1.234 s`.
pub fn format_duration_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return BLANK.to_owned();
    }
    let abs = ns.abs();
    if abs < 1e3 {
        format!("{ns:.0} ns")
    } else if abs < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if abs < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// Text for a table cell: control characters escaped, so a name cannot break the layout.
pub(crate) fn cell(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() { c.escape_default().collect() } else { vec![c] };
            escaped
        })
        .collect()
}

/// Text for HTML or SVG (XML) content and attribute values: `& < > " '` as entities, and
/// control characters but newline and tab (which XML 1.0 forbids) as spaces. The HTML report
/// and the figures both escape through it.
pub fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}
