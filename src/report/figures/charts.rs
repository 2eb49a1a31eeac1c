//! The figures' tables, and the figures as gmprof draws them itself (without a browser), each
//! from the table the HTML report's chart of it plots ([`HtmlData`]): GPU time per range
//! group, the step breakdown of a streamed run, DRAM bandwidth against the peak (range groups
//! and kernels), the roofline and the stall mix per range group. Each is its table as CSV and
//! its chart as SVG, or why it was skipped.

use std::fmt::Display;

use crate::report::html::data::HtmlData;
use crate::report::html::steps::StepPoint;

use super::svg::{self, BarSeries, LineSeries, Mark, Point, PALETTE};

/// Range groups (and kernels) drawn at most in a bar chart, as in the HTML report.
pub const MAX_TIME_ROWS: usize = 25;
/// Range groups and kernels in the bandwidth charts at most, as in the HTML report.
pub const MAX_BANDWIDTH_ROWS: usize = 20;

/// One figure: its file stem, title, chart and table.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem: `NAME.svg` and `NAME.csv`.
    pub name: &'static str,
    pub title: String,
    /// The chart, an SVG document.
    pub svg: String,
    /// The chart as PNG, when the HTML report's page drew it ([`super::page`]); gmprof's own
    /// drawing ([`super::svg`]) makes none.
    pub png: Option<Vec<u8>>,
    /// The table behind the chart, CSV with a header row.
    pub csv: String,
}

/// A figure left out, and why (the report lacks its data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub name: &'static str,
    pub why: String,
}

/// A figure, or why there is none.
pub type Made = std::result::Result<Figure, Skipped>;

fn skip(name: &'static str, why: impl Into<String>) -> Made {
    Err(Skipped { name, why: why.into() })
}

/// The caption line every figure carries: the run's facts.
pub fn caption(data: &HtmlData) -> String {
    let m = &data.meta;
    format!("GPU: {} (chip {}) · mode: {} · grouped by {} · gmprof {}", m.device, m.chip, m.mode, m.group_by, m.version)
}

/// A CSV table built row by row (the `csv` crate quotes what needs it).
struct Table(csv::Writer<Vec<u8>>);

impl Table {
    fn new(header: &[String]) -> Self {
        let mut w = csv::Writer::from_writer(Vec::new());
        let _ = w.write_record(header);
        Table(w)
    }

    fn row(&mut self, cells: &[String]) {
        let _ = self.0.write_record(cells);
    }

    fn finish(self) -> String {
        let bytes = self.0.into_inner().unwrap_or_default();
        String::from_utf8(bytes).unwrap_or_default()
    }
}

/// A cell: the value as Rust writes it (it reads back to the same number), or empty.
fn cell<T: Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn header(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// GPU time per range group: the 25 groups with the most steady-state GPU time, one bar
/// segment per GPU when the process profiled several.
pub fn range_time(data: &HtmlData) -> Made {
    const NAME: &str = "range_time";
    let rows: Vec<_> = data.groups.iter().filter(|g| g.total_ns.is_some()).take(MAX_TIME_ROWS).collect();
    if rows.is_empty() {
        return skip(NAME, "no range group has a measured GPU time");
    }
    let mut devices: Vec<u32> = rows.iter().flat_map(|g| g.by_device.iter().map(|d| d.0)).collect();
    devices.sort_unstable();
    devices.dedup();
    let per_device = devices.len() > 1;
    let mut cols = header(&["range_group", "count", "total_ns", "mean_ns", "share_pct"]);
    if per_device {
        cols.extend(devices.iter().map(|d| format!("gpu{d}_ns")));
    }
    let mut table = Table::new(&cols);
    for g in &rows {
        let mut r = vec![g.label.clone(), g.count.to_string(), cell(g.total_ns), cell(g.mean_ns), cell(g.share_pct)];
        if per_device {
            r.extend(devices.iter().map(|d| cell(g.by_device.iter().find(|x| x.0 == *d).map(|x| x.1))));
        }
        table.row(&r);
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    let series: Vec<BarSeries> = if per_device {
        devices
            .iter()
            .enumerate()
            .map(|(i, d)| BarSeries {
                name: format!("GPU {d}"),
                color: PALETTE[i % PALETTE.len()],
                values: rows
                    .iter()
                    .map(|g| Some(g.by_device.iter().find(|x| x.0 == *d).map_or(0.0, |x| ms(x.1))))
                    .collect(),
            })
            .collect()
    } else {
        vec![BarSeries {
            name: "GPU time".into(),
            color: PALETTE[0],
            values: rows.iter().map(|g| g.total_ns.map(ms)).collect(),
        }]
    };
    let title = format!("GPU time per range group (steady state, top {})", rows.len());
    let labels: Vec<String> = rows
        .iter()
        .map(|g| match g.share_pct {
            Some(s) => format!("{} ({s:.1}%)", svg::shorten(&g.label, 40)),
            None => g.label.clone(),
        })
        .collect();
    let svg = svg::bars(&title, &caption(data), "GPU time (ms)", &labels, &series, None, None);
    Ok(Figure { name: NAME, title, svg, png: None, csv: table.finish() })
}

/// The step breakdown of a streamed run: wall time per step (mean, minimum and maximum of each
/// bucket of steps) and GPU time per step, with the slowest steps marked.
pub fn steps(data: &HtmlData) -> Made {
    const NAME: &str = "steps";
    let Some(st) = &data.streamed else {
        return skip(
            NAME,
            "not a streamed run: the step chart is drawn for runs past GMPROF_ROW_LIMIT (README, \"Streamed outputs\")",
        );
    };
    if st.series.is_empty() {
        return skip(NAME, "the streamed run has no step rows (no range repeats at the top level)");
    }
    let mut table = Table::new(&header(&[
        "first_step",
        "last_step",
        "wall_min_ns",
        "wall_mean_ns",
        "wall_max_ns",
        "gpu_min_ns",
        "gpu_mean_ns",
        "gpu_max_ns",
    ]));
    for p in &st.series {
        let mut r = vec![p.first_step.to_string(), p.last_step.to_string()];
        r.extend(p.wall.iter().chain(p.gpu.iter()).map(|v| cell(*v)));
        table.row(&r);
    }
    let mid = |p: &StepPoint| (p.first_step + p.last_step) as f64 / 2.0;
    let line = |name: &str, color: &'static str, width: f64, pick: &dyn Fn(&StepPoint) -> Option<f64>| LineSeries {
        name: name.into(),
        color,
        points: st.series.iter().map(|p| (mid(p), pick(p).map(|v| v / 1e6))).collect(),
        dots: false,
        width,
    };
    let mut series = vec![
        line("wall time (max)", "#9db8ef", 1.0, &|p| p.wall[2]),
        line("wall time (min)", "#9db8ef", 1.0, &|p| p.wall[0]),
        line("wall time (mean)", PALETTE[0], 1.8, &|p| p.wall[1]),
        line("GPU time (mean)", PALETTE[2], 1.8, &|p| p.gpu[1]),
    ];
    if !st.slow_steps.is_empty() {
        series.push(LineSeries {
            name: "slowest steps".into(),
            color: svg::PEAK,
            points: st.slow_steps.iter().map(|s| (s.step as f64, Some(s.wall_time_ns as f64 / 1e6))).collect(),
            dots: true,
            width: 0.0,
        });
    }
    let group = st.step_group.as_deref().map(|g| format!(" of {}", svg::shorten(g, 40))).unwrap_or_default();
    let per = if st.bucket > 1 { format!(", {} steps per point", st.bucket) } else { String::new() };
    let title = format!("Time per step{group} ({} steps{per})", st.steps_shown);
    let svg = svg::lines(&title, &caption(data), "step", "time per step (ms)", &series);
    Ok(Figure { name: NAME, title, svg, png: None, csv: table.finish() })
}

/// DRAM bandwidth of labelled rows against the device's peak.
/// `label` makes a row's label on the chart (the CSV has the whole name).
fn bandwidth(
    data: &HtmlData,
    name: &'static str,
    what: &str,
    rows: Vec<(String, f64)>,
    label: fn(&str) -> String,
) -> Made {
    if rows.is_empty() {
        return skip(name, format!("no {what} has a DRAM bandwidth: DRAM byte counters were not collected"));
    }
    let peak = data.meta.dram_peak_gbps;
    let mut table = Table::new(&header(&[what, "dram_gbps", "peak_gbps", "pct_of_peak"]));
    for (label, gbps) in &rows {
        table.row(&[label.clone(), gbps.to_string(), cell(peak), cell(peak.map(|p| 100.0 * gbps / p))]);
    }
    let labels: Vec<String> = rows.iter().map(|r| label(&r.0)).collect();
    let series = [BarSeries {
        name: "DRAM bandwidth".into(),
        color: PALETTE[2],
        values: rows.iter().map(|r| Some(r.1)).collect(),
    }];
    let mark = peak.map(|p| Mark { value: p, label: format!("peak {p:.0} GB/s") });
    let title = match peak {
        Some(_) => format!("DRAM bandwidth per {what} against the device's peak (top {})", rows.len()),
        None => format!("DRAM bandwidth per {what} (top {}; the device's peak is not known)", rows.len()),
    };
    let svg =
        svg::bars(&title, &caption(data), "DRAM bandwidth, read + write (GB/s)", &labels, &series, None, mark.as_ref());
    Ok(Figure { name, title, svg, png: None, csv: table.finish() })
}

/// DRAM bandwidth per range group (the 20 with the most time) against the peak.
pub fn range_bandwidth(data: &HtmlData) -> Made {
    let rows = data.groups.iter().filter_map(|g| Some((g.label.clone(), g.dram_gbps?))).take(MAX_BANDWIDTH_ROWS);
    bandwidth(data, "dram_bandwidth", "range group", rows.collect(), str::to_owned)
}

/// DRAM bandwidth per kernel name (the 20 with the most time) against the peak.
pub fn kernel_bandwidth(data: &HtmlData) -> Made {
    let rows = data.kernels.iter().filter_map(|k| Some((k.name.clone(), k.dram_gbps?))).take(MAX_BANDWIDTH_ROWS);
    bandwidth(data, "dram_bandwidth_kernels", "kernel", rows.collect(), svg::kernel_label)
}

/// The roofline: each kernel name at (work per DRAM byte, work per second) under the roofs.
pub fn roofline(data: &HtmlData) -> Made {
    const NAME: &str = "roofline";
    let Some(r) = &data.roofline else {
        return skip(
            NAME,
            "no FLOP or instruction counters were collected (e.g. smsp__inst_executed.sum with the DRAM byte counters)",
        );
    };
    let points: Vec<_> = data
        .kernels
        .iter()
        .filter_map(|k| {
            let (i, g) = (k.intensity?, k.rate_g?);
            (i > 0.0 && g > 0.0).then_some((k, i, g))
        })
        .collect();
    if points.is_empty() {
        return skip(NAME, "the work counters were collected, but no kernel has both work and DRAM bytes");
    }
    let flop = r.kind == "flop";
    let (xunit, yunit) = if flop { ("FLOP/byte", "GFLOP/s") } else { ("warp inst/byte", "G warp inst/s") };
    let (ci, cg) = if flop { ("flop_per_byte", "gflop_per_s") } else { ("warp_inst_per_byte", "g_warp_inst_per_s") };
    let mut table = Table::new(&header(&["kernel", "calls", "total_ns", ci, cg, "dram_peak_gbps", "compute_peak_g"]));
    for (k, i, g) in &points {
        table.row(&[
            k.name.clone(),
            k.calls.to_string(),
            cell(k.total_ns),
            i.to_string(),
            g.to_string(),
            cell(r.dram_peak_gbps),
            cell(r.compute_peak_g),
        ]);
    }
    let (xmin, xmax) = points.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (xmin, xmax) = (xmin / 4.0, xmax * 4.0);
    let mut ys: Vec<f64> = points.iter().map(|p| p.2).collect();
    ys.extend(r.compute_peak_g);
    if r.compute_peak_g.is_none() {
        ys.extend(r.dram_peak_gbps.map(|p| p * xmax));
    }
    let ymin = points.iter().map(|p| p.2).fold(f64::INFINITY, f64::min) / 4.0;
    let ymax = ys.iter().copied().fold(0.0f64, f64::max) * 2.0;
    let mut roof = Vec::new();
    let clip = |y: f64| y.clamp(ymin, ymax);
    match (r.dram_peak_gbps, r.compute_peak_g) {
        (Some(bw), ceiling) => {
            for i in 0..=40 {
                let x = xmin * (xmax / xmin).powf(i as f64 / 40.0);
                let y = ceiling.map_or(bw * x, |c| (bw * x).min(c));
                roof.push((x, clip(y)));
            }
        }
        (None, Some(c)) => roof.extend([(xmin, clip(c)), (xmax, clip(c))]),
        (None, None) => {}
    }
    let max_time = points.iter().filter_map(|p| p.0.total_ns).max().unwrap_or(1).max(1) as f64;
    let drawn: Vec<Point> = points
        .iter()
        .enumerate()
        .map(|(n, (k, i, g))| Point {
            x: *i,
            y: *g,
            size: (k.total_ns.unwrap_or(0) as f64 / max_time).sqrt(),
            color: PALETTE[n % PALETTE.len()],
            tip: format!(
                "{}: {} {xunit}, {} {yunit}, {} calls",
                svg::kernel_label(&k.name),
                svg::tick_label(*i),
                svg::tick_label(*g),
                k.calls
            ),
        })
        .collect();
    let mut roofs = Vec::new();
    if let Some(bw) = r.dram_peak_gbps {
        roofs.push(format!("DRAM peak {bw:.0} GB/s"));
    }
    if let Some(c) = r.compute_peak_g {
        roofs.push(format!("{} {} {yunit}", if flop { "FP32 peak" } else { "issue peak" }, svg::tick_label(c)));
    }
    let roof_label = if roofs.is_empty() { String::new() } else { format!("dashed roof: {}", roofs.join(", ")) };
    let what = if flop { format!("FLOPs ({})", r.precisions.join(", ")) } else { "warp instructions".into() };
    let title = format!("Roofline of {} kernel names: {what} against DRAM bytes", points.len());
    let svg = svg::loglog(
        &title,
        &caption(data),
        &format!("arithmetic intensity ({xunit})"),
        &format!("performance ({yunit})"),
        &drawn,
        (xmin, xmax),
        (ymin, ymax),
        &roof,
        &roof_label,
    );
    Ok(Figure { name: NAME, title, svg, png: None, csv: table.finish() })
}

/// The stall mix per range group: each group's PC samples by stall reason, 100 % per bar.
pub fn stall_mix(data: &HtmlData) -> Made {
    const NAME: &str = "stall_mix";
    let Some(pc) = &data.pc else {
        return skip(NAME, "the run has no PC sampling (gmprof run --pc-sampling)");
    };
    if pc.groups.is_empty() {
        return skip(NAME, "no range has PC samples");
    }
    let used: Vec<usize> = (0..pc.reasons.len())
        .filter(|i| pc.groups.iter().any(|g| g.shares.get(*i).copied().flatten().is_some_and(|s| s > 0.0)))
        .collect();
    let mut cols = header(&["range_group", "samples", "too_few"]);
    cols.extend(used.iter().map(|i| format!("{} (%)", pc.reasons[*i])));
    let mut table = Table::new(&cols);
    for g in &pc.groups {
        let mut r = vec![g.label.clone(), g.samples.to_string(), g.few.to_string()];
        r.extend(used.iter().map(|i| cell(g.shares.get(*i).copied().flatten())));
        table.row(&r);
    }
    let labels: Vec<String> = pc
        .groups
        .iter()
        .map(|g| {
            let label = svg::shorten(&g.label, 30);
            if g.few {
                format!("{label} ({} samples: too few)", g.samples)
            } else {
                format!("{label} ({} samples)", g.samples)
            }
        })
        .collect();
    let series: Vec<BarSeries> = used
        .iter()
        .enumerate()
        .map(|(n, i)| BarSeries {
            name: pc.reasons[*i].clone(),
            color: PALETTE[n % PALETTE.len()],
            values: pc.groups.iter().map(|g| g.shares.get(*i).copied().flatten()).collect(),
        })
        .collect();
    let title = format!("Stall reasons per range group ({} groups, PC sampling)", pc.groups.len());
    let svg = svg::bars(&title, &caption(data), "share of PC samples (%)", &labels, &series, Some(100.0), None);
    Ok(Figure { name: NAME, title, svg, png: None, csv: table.finish() })
}

/// Every figure of `data`, in the HTML report's order, made or skipped.
pub fn all(data: &HtmlData) -> Vec<Made> {
    vec![steps(data), range_time(data), range_bandwidth(data), kernel_bandwidth(data), roofline(data), stall_mix(data)]
}
