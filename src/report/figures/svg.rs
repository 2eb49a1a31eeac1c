//! A small SVG writer for the figures: the canvas (title, caption), axes with ticks, and the
//! three kinds of chart the figures need (horizontal bars, lines over a linear x axis, points
//! on log-log axes). Only what the figures draw; every text is XML-escaped.

use std::fmt::Write as _;

/// Figure width, px.
pub const WIDTH: f64 = 960.0;
/// Height of one bar's row, px.
const ROW: f64 = 22.0;
/// Space above the plot for the title (and a legend), px.
const TOP: f64 = 64.0;
/// Space below the plot for the x axis, its name and the caption, px.
const BOTTOM: f64 = 78.0;

/// Colours of series, in order.
pub const PALETTE: [&str; 10] =
    ["#2f6fdf", "#e8743b", "#19a979", "#945ecf", "#ed4a7b", "#13a4b4", "#c9a227", "#6c8893", "#bf399e", "#3f8f29"];
/// Colour of peaks and roofs.
pub const PEAK: &str = "#b3261e";

/// Text for XML content and attribute values.
pub fn escape(text: &str) -> String {
    crate::report::text::format::escape_markup(text)
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// A kernel's name as the HTML page labels it: no `void `, no parameter list, template
/// arguments folded to `<…>`.
pub fn kernel_label(name: &str) -> String {
    let text = name.strip_prefix("void ").unwrap_or(name).replace("(anonymous namespace)", "{anonymous}");
    let (mut out, mut depth) = (String::new(), 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '<' => {
                if depth == 0 {
                    out.push_str("<…>");
                }
                depth += 1;
            }
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 && i > 0 => break,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A number for a tick label: few digits, no trailing zeros.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.0e}")
    } else {
        let s = if a >= 100.0 {
            format!("{v:.0}")
        } else if a >= 1.0 {
            format!("{v:.2}")
        } else {
            format!("{v:.4}")
        };
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    }
}

/// Ticks of a linear axis from `lo` to about `hi`: (the axis' end, the ticks).
fn linear_ticks(lo: f64, hi: f64) -> (f64, Vec<f64>) {
    let span = if hi > lo { hi - lo } else { 1.0 };
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).floor() * step;
    let mut ticks = Vec::new();
    let mut t = first;
    while t < hi + step * 0.999 && ticks.len() < 50 {
        ticks.push(t);
        t += step;
    }
    (ticks.last().copied().unwrap_or(hi), ticks)
}

/// An SVG document being drawn.
pub struct Svg {
    out: String,
}

impl Svg {
    /// A canvas of `height` px with `title` at its top and `caption` (the run's facts) at its
    /// bottom.
    pub fn new(height: f64, title: &str, caption: &str) -> Self {
        let mut out = String::new();
        let _ = write!(
            out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
             viewBox=\"0 0 {WIDTH} {height}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n\
             <title>{}</title>\n<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height}\" fill=\"#ffffff\"/>\n",
            escape(title)
        );
        let mut svg = Svg { out };
        svg.text(16.0, 26.0, "start", 16.0, "title", title);
        svg.text(16.0, height - 12.0, "start", 11.0, "caption", caption);
        svg
    }

    /// The document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }

    /// A text; `class` names its role (`title`, `caption`, `axis-name`, `tick`, `label`, `legend`).
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, size: f64, class: &str, text: &str) {
        let _ = writeln!(
            self.out,
            "<text class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-size=\"{size}\">{}</text>",
            escape(text)
        );
    }

    /// A text turned a quarter to the left (a y axis' name).
    fn vertical_text(&mut self, x: f64, y: f64, class: &str, text: &str) {
        let _ = writeln!(
            self.out,
            "<text class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"middle\" font-size=\"12\" \
             transform=\"rotate(-90 {x:.1} {y:.1})\">{}</text>",
            escape(text)
        );
    }

    /// A filled rectangle with a tooltip.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: &str) {
        let _ = writeln!(
            self.out,
            "<rect class=\"bar\" x=\"{x:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{h:.2}\" fill=\"{fill}\"><title>{}</title></rect>",
            w.max(0.0),
            escape(tip)
        );
    }

    /// A straight line.
    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, dashed: bool) {
        let dash = if dashed { " stroke-dasharray=\"6 4\"" } else { "" };
        let _ = writeln!(
            self.out,
            "<line x1=\"{x1:.2}\" y1=\"{y1:.2}\" x2=\"{x2:.2}\" y2=\"{y2:.2}\" stroke=\"{stroke}\" stroke-width=\"1\"{dash}/>"
        );
    }

    /// A path through `points` (a series), broken where a point is missing.
    pub fn path(&mut self, points: &[Option<(f64, f64)>], stroke: &str, width: f64, dashed: bool, name: &str) {
        let mut d = String::new();
        let mut pen_down = false;
        for p in points {
            match p {
                Some((x, y)) => {
                    let _ = write!(d, "{}{x:.2} {y:.2} ", if pen_down { "L" } else { "M" });
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        if d.is_empty() {
            return;
        }
        let dash = if dashed { " stroke-dasharray=\"6 4\"" } else { "" };
        let _ = writeln!(
            self.out,
            "<path class=\"series\" d=\"{}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{width}\"{dash}><title>{}</title></path>",
            d.trim_end(),
            escape(name)
        );
    }

    /// A point with a tooltip.
    pub fn circle(&mut self, (x, y): (f64, f64), r: f64, fill: &str, tip: &str) {
        let _ = writeln!(
            self.out,
            "<circle class=\"point\" cx=\"{x:.2}\" cy=\"{y:.2}\" r=\"{r:.1}\" fill=\"{fill}\" fill-opacity=\"0.75\"><title>{}</title></circle>",
            escape(tip)
        );
    }

    /// A legend of `(name, colour)` in one row under the title.
    pub fn legend(&mut self, items: &[(String, &str)]) {
        let (mut x, mut y) = (16.0, 44.0);
        for (name, color) in items {
            let label = shorten(name, 36);
            let w = 18.0 + 6.5 * label.chars().count() as f64;
            if x + w > WIDTH - 16.0 {
                x = 16.0;
                y += 16.0;
            }
            let _ = writeln!(
                self.out,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/>",
                y - 9.0
            );
            self.text(x + 14.0, y, "start", 11.0, "legend", &label);
            x += w + 10.0;
        }
    }
}

/// A plot area: its left, top, width and height on the canvas.
#[derive(Clone, Copy)]
pub struct Area {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

/// One series of a bar chart: its name, colour and a value per category (`None`: none).
pub struct BarSeries<'a> {
    pub name: String,
    pub color: &'a str,
    pub values: Vec<Option<f64>>,
}

/// A vertical marker line on a bar chart: its value and label (a peak).
pub struct Mark {
    pub value: f64,
    pub label: String,
}

/// Horizontal bars: one row per category, the series stacked, the x axis from 0 (to `x_max`
/// when given), with an optional marker line; each bar's tooltip is its category and value.
pub fn bars(
    title: &str,
    caption: &str,
    x_name: &str,
    categories: &[String],
    series: &[BarSeries],
    x_max: Option<f64>,
    mark: Option<&Mark>,
) -> String {
    let legend_rows = if series.len() > 1 { 1.0 + (series.len() as f64 / 5.0).floor() } else { 0.0 };
    let top = TOP + 16.0 * legend_rows;
    let height = top + ROW * categories.len() as f64 + BOTTOM;
    let mut svg = Svg::new(height, title, caption);
    if series.len() > 1 {
        svg.legend(&series.iter().map(|s| (s.name.clone(), s.color)).collect::<Vec<_>>());
    }
    let area = Area { x: 320.0, y: top, w: WIDTH - 320.0 - 40.0, h: ROW * categories.len() as f64 };
    let totals = (0..categories.len()).map(|i| series.iter().filter_map(|s| s.values[i]).sum::<f64>());
    let mut hi = totals.fold(0.0f64, f64::max);
    if let Some(m) = mark {
        hi = hi.max(m.value * 1.05);
    }
    let (end, ticks) = match x_max {
        Some(max) => linear_ticks(0.0, max),
        None => linear_ticks(0.0, if hi > 0.0 { hi } else { 1.0 }),
    };
    let sx = |v: f64| area.x + area.w * v / end;
    for t in &ticks {
        svg.line((sx(*t), area.y), (sx(*t), area.y + area.h), "#e3e6eb", false);
        svg.text(sx(*t), area.y + area.h + 16.0, "middle", 11.0, "tick", &tick_label(*t));
    }
    svg.line((area.x, area.y + area.h), (area.x + area.w, area.y + area.h), "#333333", false);
    svg.line((area.x, area.y), (area.x, area.y + area.h), "#333333", false);
    svg.text(area.x + area.w / 2.0, area.y + area.h + 36.0, "middle", 12.0, "axis-name", x_name);
    for (i, cat) in categories.iter().enumerate() {
        let y = area.y + ROW * i as f64;
        svg.text(area.x - 8.0, y + ROW * 0.68, "end", 11.0, "label", &shorten(cat, 48));
        let mut at = 0.0;
        for s in series {
            if let Some(v) = s.values[i] {
                let tip = if series.len() > 1 {
                    format!("{cat}: {} {}", s.name, tick_label(v))
                } else {
                    format!("{cat}: {}", tick_label(v))
                };
                svg.rect(sx(at), y + ROW * 0.15, sx(at + v) - sx(at), ROW * 0.7, s.color, &tip);
                at += v;
            }
        }
    }
    if let Some(m) = mark {
        let x = sx(m.value);
        svg.line((x, area.y - 4.0), (x, area.y + area.h), PEAK, true);
        svg.text(x - 4.0, area.y - 8.0, "end", 11.0, "label", &m.label);
    }
    svg.finish()
}

/// One series of a line chart: its name, colour, points (`None`: a gap) and whether it is
/// drawn as points only.
pub struct LineSeries<'a> {
    pub name: String,
    pub color: &'a str,
    pub points: Vec<(f64, Option<f64>)>,
    pub dots: bool,
    pub width: f64,
}

/// Lines over linear axes (x and y each from the data's range, y from 0).
pub fn lines(title: &str, caption: &str, x_name: &str, y_name: &str, series: &[LineSeries]) -> String {
    let height = 480.0;
    let mut svg = Svg::new(height, title, caption);
    svg.legend(&series.iter().map(|s| (s.name.clone(), s.color)).collect::<Vec<_>>());
    let area = Area { x: 80.0, y: TOP + 16.0, w: WIDTH - 80.0 - 40.0, h: height - TOP - 16.0 - BOTTOM };
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (xlo, xhi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let ys = series.iter().flat_map(|s| s.points.iter().filter_map(|p| p.1));
    let yhi = ys.fold(0.0f64, f64::max);
    let (xlo, xhi) = if xlo.is_finite() && xhi > xlo { (xlo, xhi) } else { (xlo.min(0.0), xlo.max(0.0) + 1.0) };
    let (xstart, xticks) = {
        let (_, t) = linear_ticks(xlo, xhi);
        (t.first().copied().unwrap_or(xlo), t)
    };
    let xend = xticks.last().copied().unwrap_or(xhi).max(xstart + 1e-9);
    let (yend, yticks) = linear_ticks(0.0, if yhi > 0.0 { yhi } else { 1.0 });
    let sx = |v: f64| area.x + area.w * (v - xstart) / (xend - xstart);
    let sy = |v: f64| area.y + area.h - area.h * v / yend;
    axes(&mut svg, area, x_name, y_name);
    for t in &xticks {
        svg.text(sx(*t), area.y + area.h + 16.0, "middle", 11.0, "tick", &tick_label(*t));
    }
    for t in &yticks {
        svg.line((area.x, sy(*t)), (area.x + area.w, sy(*t)), "#e3e6eb", false);
        svg.text(area.x - 6.0, sy(*t) + 4.0, "end", 11.0, "tick", &tick_label(*t));
    }
    for s in series {
        if s.dots {
            for (x, y) in &s.points {
                if let Some(y) = y {
                    let tip = format!("{}: {} at {}", s.name, tick_label(*y), tick_label(*x));
                    svg.circle((sx(*x), sy(*y)), 3.5, s.color, &tip);
                }
            }
        } else {
            let pts: Vec<_> = s.points.iter().map(|(x, y)| y.map(|y| (sx(*x), sy(y)))).collect();
            svg.path(&pts, s.color, s.width, false, &s.name);
        }
    }
    svg.finish()
}

/// The axis lines and names of `area`.
fn axes(svg: &mut Svg, area: Area, x_name: &str, y_name: &str) {
    svg.line((area.x, area.y + area.h), (area.x + area.w, area.y + area.h), "#333333", false);
    svg.line((area.x, area.y), (area.x, area.y + area.h), "#333333", false);
    svg.text(area.x + area.w / 2.0, area.y + area.h + 36.0, "middle", 12.0, "axis-name", x_name);
    svg.vertical_text(22.0, area.y + area.h / 2.0, "axis-name", y_name);
}

/// One point of a log-log chart: its position, size (0 to 1) and tooltip.
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub size: f64,
    pub color: &'static str,
    pub tip: String,
}

/// Points on log-log axes, with a roof drawn through `roof` (already clipped to the axes) and
/// named by `roof_label` above the plot.
#[allow(clippy::too_many_arguments)]
pub fn loglog(
    title: &str,
    caption: &str,
    x_name: &str,
    y_name: &str,
    points: &[Point],
    x_range: (f64, f64),
    y_range: (f64, f64),
    roof: &[(f64, f64)],
    roof_label: &str,
) -> String {
    let height = 560.0;
    let mut svg = Svg::new(height, title, caption);
    let area = Area { x: 90.0, y: TOP, w: WIDTH - 90.0 - 40.0, h: height - TOP - BOTTOM };
    let decades = |(lo, hi): (f64, f64)| (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0));
    let (x0, x1) = decades(x_range);
    let (y0, y1) = decades(y_range);
    let sx = |v: f64| area.x + area.w * (v.log10() - x0) / (x1 - x0);
    let sy = |v: f64| area.y + area.h - area.h * (v.log10() - y0) / (y1 - y0);
    axes(&mut svg, area, x_name, y_name);
    for e in (x0 as i32)..=(x1 as i32) {
        let v = 10f64.powi(e);
        svg.line((sx(v), area.y), (sx(v), area.y + area.h), "#e3e6eb", false);
        svg.text(sx(v), area.y + area.h + 16.0, "middle", 11.0, "tick", &tick_label(v));
    }
    for e in (y0 as i32)..=(y1 as i32) {
        let v = 10f64.powi(e);
        svg.line((area.x, sy(v)), (area.x + area.w, sy(v)), "#e3e6eb", false);
        svg.text(area.x - 6.0, sy(v) + 4.0, "end", 11.0, "tick", &tick_label(v));
    }
    let roof: Vec<_> = roof.iter().map(|(x, y)| Some((sx(*x), sy(*y)))).collect();
    svg.path(&roof, PEAK, 1.5, true, "roof");
    if !roof_label.is_empty() {
        svg.text(area.x + 8.0, area.y - 8.0, "start", 11.0, "label", roof_label);
    }
    for p in points {
        svg.circle((sx(p.x), sy(p.y)), 3.0 + 9.0 * p.size.clamp(0.0, 1.0), p.color, &p.tip);
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let (end, ticks) = linear_ticks(0.0, 4814.3);
        assert_eq!(ticks.first(), Some(&0.0));
        assert!(end >= 4814.3 && ticks.len() <= 8, "{ticks:?}");
        assert_eq!(tick_label(2.50), "2.5");
        assert_eq!(tick_label(1000.0), "1000");
        assert_eq!(escape("a<b>&'\""), "a&lt;b&gt;&amp;&apos;&quot;");
        assert_eq!(
            kernel_label(
                "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float> >(at::native::ReduceOp<float>)"
            ),
            "at::native::reduce_kernel<…>"
        );
    }
}
