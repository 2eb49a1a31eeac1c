//! The terminal table of a [`Diff`]: what changed, largest impact first, sized for a screen.
//!
//! Layer 3 (the safe profiler), report output. Shows the GPU time rows of ranges and of
//! kernels (the top `top` of each by impact), then the other quantities that changed beyond
//! noise, then what ran on one side only, then the method, so a reader knows what "beyond
//! noise" meant.

use std::fmt;

use super::model::{Diff, DiffRow, Kind, Verdict, GPU_TIME, KERNELS};
use crate::report::text::format::{cell, format_duration_ns, BLANK};

/// Rows of each kind shown by default.
pub const DEFAULT_TOP: usize = 20;
/// Characters of a name column.
const NAME_CHARS: usize = 44;

/// A [`Diff`] as text; `top` rows of each kind (`None`: all).
pub struct DiffTable<'a> {
    /// The diff.
    pub diff: &'a Diff,
    /// Rows shown per kind.
    pub top: Option<usize>,
}

impl Diff {
    /// The terminal table with the default number of rows.
    pub fn table(&self) -> DiffTable<'_> {
        DiffTable { diff: self, top: Some(DEFAULT_TOP) }
    }
}

/// `text` cut to `n` characters: paths keep their end, kernel names their start (without
/// `void ` and the argument list).
fn label(kind: Kind, text: &str, n: usize) -> String {
    let text = cell(text);
    let text = match kind {
        Kind::Range => text,
        Kind::Kernel => kernel_label(&text),
    };
    let count = text.chars().count();
    if count <= n {
        return text;
    }
    match kind {
        Kind::Range => format!("…{}", text.chars().skip(count - (n - 1)).collect::<String>()),
        Kind::Kernel => format!("{}…", text.chars().take(n - 1).collect::<String>()),
    }
}

/// A demangled kernel name without `void ` and its argument list.
fn kernel_label(name: &str) -> String {
    let name = name.strip_prefix("void ").unwrap_or(name).replace("(anonymous namespace)", "{anonymous}");
    let mut depth = 0i32;
    for (i, c) in name.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 && i > 0 => return name[..i].to_owned(),
            _ => {}
        }
    }
    name.to_owned()
}

fn signed_duration(ns: f64) -> String {
    if ns > 0.0 {
        format!("+{}", format_duration_ns(ns))
    } else {
        format_duration_ns(ns)
    }
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:+.1}%")).unwrap_or_else(|| BLANK.to_owned())
}

fn p_text(v: Option<f64>) -> String {
    match v {
        None => BLANK.to_owned(),
        Some(p) if p >= 0.001 => format!("{p:.3}"),
        Some(p) => format!("{p:.0e}"),
    }
}

/// A value of `quantity`, as the summary writes it.
fn value(quantity: &str, v: Option<f64>) -> String {
    match v {
        None => BLANK.to_owned(),
        Some(v) if quantity == GPU_TIME => format_duration_ns(v),
        Some(v) if quantity == KERNELS || v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
}

fn counts(diff: &Diff, kind: Kind) -> String {
    let mut by: Vec<(Verdict, usize)> = Vec::new();
    for r in diff.rows.iter().filter(|r| r.kind == kind && r.quantity == GPU_TIME) {
        match by.iter_mut().find(|(v, _)| *v == r.verdict) {
            Some((_, n)) => *n += 1,
            None => by.push((r.verdict, 1)),
        }
    }
    let order = [
        Verdict::Slower,
        Verdict::Faster,
        Verdict::Noise,
        Verdict::TooFew,
        Verdict::Unmeasured,
        Verdict::OnlyBase,
        Verdict::OnlyNew,
    ];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|v| by.iter().find(|(w, _)| w == v).map(|(_, n)| format!("{n} {}", v.as_str())))
        .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

fn side(diff_side: &super::model::SideInfo) -> String {
    let processes = diff_side.processes.len();
    format!(
        "{} ({} process{}, {}, {})",
        diff_side.path,
        processes,
        if processes == 1 { "" } else { "es" },
        diff_side.device_name.as_deref().unwrap_or("unknown GPU"),
        diff_side.mode
    )
}

impl fmt::Display for DiffTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.diff;
        writeln!(f, "gmprof diff | base {} | new {}", side(&d.base), side(&d.new))?;
        let total = match (d.base.total_gpu_time_ns, d.new.total_gpu_time_ns) {
            (Some(b), Some(n)) => format!(
                "{} -> {} ({})",
                format_duration_ns(b),
                format_duration_ns(n),
                pct((b > 0.0).then(|| 100.0 * (n - b) / b))
            ),
            _ => BLANK.to_owned(),
        };
        writeln!(
            f,
            "steady-state GPU time per process: {total} | skip-first {} | ranges: {} | kernels: {}",
            d.options.skip_first,
            counts(d, Kind::Range),
            counts(d, Kind::Kernel)
        )?;
        for w in &d.warnings {
            writeln!(f, "warning: not comparable: {w}")?;
        }
        for kind in [Kind::Range, Kind::Kernel] {
            let rows: Vec<&DiffRow> = d
                .rows
                .iter()
                .filter(|r| {
                    r.kind == kind
                        && r.quantity == GPU_TIME
                        && !matches!(r.verdict, Verdict::OnlyBase | Verdict::OnlyNew)
                })
                .collect();
            if rows.is_empty() {
                continue;
            }
            let shown = self.top.unwrap_or(rows.len()).min(rows.len());
            writeln!(
                f,
                "{:<w$} {:>6} {:>6} {:>11} {:>11} {:>11} {:>7} {:>7}  {:<10} {:>11} {:>7}",
                if kind == Kind::Range { "range (GPU time per instance)" } else { "kernel (GPU time per launch)" },
                "base n",
                "new n",
                "base p50",
                "new p50",
                "change",
                "change",
                "p(adj)",
                "verdict",
                "impact",
                "of total",
                w = NAME_CHARS
            )?;
            for r in &rows[..shown] {
                writeln!(
                    f,
                    "{:<w$} {:>6} {:>6} {:>11} {:>11} {:>11} {:>7} {:>7}  {:<10} {:>11} {:>7}",
                    label(kind, &r.name, NAME_CHARS),
                    r.base_n,
                    r.new_n,
                    value(GPU_TIME, r.base_median),
                    value(GPU_TIME, r.new_median),
                    r.change.map(signed_duration).unwrap_or_else(|| BLANK.to_owned()),
                    pct(r.change_pct),
                    p_text(r.p_adjusted),
                    r.verdict.as_str(),
                    r.impact_ns.map(signed_duration).unwrap_or_else(|| BLANK.to_owned()),
                    pct(r.impact_pct),
                    w = NAME_CHARS
                )?;
            }
            if shown < rows.len() {
                writeln!(
                    f,
                    "… {} more {kind}s (--top 0 shows all; every row is in --csv and --json)",
                    rows.len() - shown,
                    kind = kind.as_str()
                )?;
            }
        }
        let others: Vec<&DiffRow> = d.rows.iter().filter(|r| r.quantity != GPU_TIME && r.verdict.is_change()).collect();
        if !others.is_empty() {
            writeln!(f, "other quantities beyond noise:")?;
            let shown = self.top.unwrap_or(others.len()).min(others.len());
            for r in &others[..shown] {
                writeln!(
                    f,
                    "  {:<6} {:<w$} {:<32} {:>12} -> {:<12} {:>7}  {} (p(adj) {})",
                    r.kind.as_str(),
                    label(r.kind, &r.name, NAME_CHARS),
                    cell(&r.quantity),
                    value(&r.quantity, r.base_median),
                    value(&r.quantity, r.new_median),
                    pct(r.change_pct),
                    r.verdict.as_str(),
                    p_text(r.p_adjusted),
                    w = NAME_CHARS
                )?;
            }
            if shown < others.len() {
                writeln!(f, "  … {} more", others.len() - shown)?;
            }
        }
        for (verdict, title) in [(Verdict::OnlyBase, "only in base"), (Verdict::OnlyNew, "only in new")] {
            let rows: Vec<&DiffRow> = d.rows.iter().filter(|r| r.verdict == verdict).collect();
            if rows.is_empty() {
                continue;
            }
            writeln!(f, "{title}: {} (instances per process, GPU time per process)", rows.len())?;
            let shown = self.top.unwrap_or(rows.len()).min(rows.len());
            for r in &rows[..shown] {
                let count = if verdict == Verdict::OnlyBase { r.base_count } else { r.new_count };
                writeln!(
                    f,
                    "  {:<6} {:<w$} {:>8} {:>11}",
                    r.kind.as_str(),
                    label(r.kind, &r.name, NAME_CHARS),
                    value(KERNELS, Some(count)),
                    r.impact_ns.map(|i| format_duration_ns(i.abs())).unwrap_or_else(|| BLANK.to_owned()),
                    w = NAME_CHARS
                )?;
            }
            if shown < rows.len() {
                writeln!(f, "  … {} more", rows.len() - shown)?;
            }
        }
        write!(f, "method: {}", d.method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_keep_what_tells_rows_apart() {
        assert_eq!(
            kernel_label(
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)"
            ),
            "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
        );
        assert_eq!(kernel_label("sm90_xmma_gemm"), "sm90_xmma_gemm");
        assert_eq!(
            kernel_label("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, int)"),
            "at::native::{anonymous}::cunn_SoftMaxForward<4, float>"
        );
        assert_eq!(label(Kind::Range, "a/b/c/d", 5), "…/c/d");
        assert_eq!(label(Kind::Kernel, "void abcdefgh(int)", 5), "abcd…");
        assert_eq!(p_text(Some(0.5)), "0.500");
        assert_eq!(p_text(Some(1.2e-7)), "1e-7");
        assert_eq!(pct(Some(-3.04)), "-3.0%");
        assert_eq!(value(GPU_TIME, Some(1500.0)), "1.50 us");
        assert_eq!(value("dram__bytes_read.sum", Some(1024.0)), "1024");
        assert_eq!(value("sm__throughput.avg.pct_of_peak_sustained_elapsed", Some(12.3456)), "12.346");
    }
}
