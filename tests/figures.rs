//! `gmprof report OUT --figures DIR` (issue 45): each chart of the HTML report as an SVG with
//! its table as CSV, drawn by gmprof (the command's way without a browser) from recorded runs:
//! - docs/recorded/torch_train_per_kernel.json (per_kernel on an H200: GPU time per range
//!   group, DRAM bandwidth against the peak, the instruction roofline);
//! - tests/data/streamed/rank1 (a streamed run: the step breakdown from its `steps/` parts);
//! - tests/data/pc (llm.c on an H100 with PC sampling: the stall mix per range group).
//!
//! Each SVG must be well-formed XML (a strict parse below), hold its chart (a bar, series or
//! point per table row, axis names with units) and the caption with GPU, mode and version;
//! each CSV's rows must be the report's numbers. The command without a browser says there is
//! no PNG and how to get one; with a stand-in browser, a chart the page did not draw, a script
//! error, a failing browser and one past its time are errors that name what failed. The
//! figures the real page draws in Chromium (SVG and PNG) are checked by
//! `scripts/check/check-figures.sh`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use gmprof::report::figures::{Figure, Figures};
use gmprof::report::html::data::HtmlData;
use gmprof::report::{Report, SummaryOptions};

#[path = "common/recorded.rs"]
mod recorded;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn per_kernel() -> Report {
    Report::read_json(root().join("docs/recorded/torch_train_per_kernel.json")).unwrap()
}

/// One element of a parsed SVG: its name, attributes and direct text.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: HashMap<String, String>,
    text: String,
}

fn unescape(text: &str, at: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = rest[i..].find(';').unwrap_or_else(|| panic!("an unterminated entity in {at}"));
        out.push(match &rest[i..i + end + 1] {
            "&amp;" => '&',
            "&lt;" => '<',
            "&gt;" => '>',
            "&quot;" => '"',
            "&apos;" => '\'',
            e => panic!("unknown entity {e} in {at}"),
        });
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    out
}

/// A strict parse of the subset of XML the figures use: one declaration, elements with
/// double-quoted attributes, escaped text; every tag closed in order, one root `<svg>`.
fn parse_xml(doc: &str) -> Vec<Element> {
    let body = doc.strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n").expect("the XML declaration");
    let mut elements: Vec<Element> = Vec::new();
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut rest = body;
    let mut roots = 0;
    while !rest.is_empty() {
        let lt = rest.find('<').unwrap_or(rest.len());
        let text = &rest[..lt];
        assert!(!text.contains('>'), "a raw '>' in text: {text:?}");
        let text = unescape(text, "text");
        if let Some((_, at)) = open.last() {
            elements[*at].text.push_str(&text);
        } else {
            assert!(text.trim().is_empty(), "text outside the root: {text:?}");
        }
        rest = &rest[lt..];
        if rest.is_empty() {
            break;
        }
        let gt = rest.find('>').expect("an unterminated tag");
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let (top, _) = open.pop().unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(top, name, "</{name}> closes <{top}>");
            continue;
        }
        let (tag, selfclosing) = match tag.strip_suffix('/') {
            Some(t) => (t, true),
            None => (tag, false),
        };
        let name_end = tag.find(' ').unwrap_or(tag.len());
        let name = &tag[..name_end];
        assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'), "tag name {name:?}");
        let mut attrs = HashMap::new();
        let mut a = tag[name_end..].trim_start();
        while !a.is_empty() {
            let eq = a.find("=\"").unwrap_or_else(|| panic!("attribute without =\" in <{tag}>"));
            let key = &a[..eq];
            assert!(key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':'), "attribute {key:?}");
            let end = a[eq + 2..].find('"').expect("an unterminated attribute") + eq + 2;
            let value = &a[eq + 2..end];
            assert!(!value.contains('<'), "'<' in an attribute");
            assert!(attrs.insert(key.to_owned(), unescape(value, "attribute")).is_none(), "{key} twice");
            a = a[end + 1..].trim_start();
        }
        if open.is_empty() {
            roots += 1;
            assert_eq!(name, "svg", "the root");
        }
        elements.push(Element { name: name.to_owned(), attrs, text: String::new() });
        if !selfclosing {
            open.push((name.to_owned(), elements.len() - 1));
        }
    }
    assert!(open.is_empty(), "unclosed: {open:?}");
    assert_eq!(roots, 1, "one root element");
    elements
}

fn texts<'a>(svg: &'a [Element], class: &str) -> Vec<&'a str> {
    svg.iter()
        .filter(|e| e.name == "text" && e.attrs.get("class").map(String::as_str) == Some(class))
        .map(|e| e.text.as_str())
        .collect()
}

fn count(svg: &[Element], name: &str, class: &str) -> usize {
    svg.iter().filter(|e| e.name == name && e.attrs.get("class").map(String::as_str) == Some(class)).count()
}

/// The CSV's header and rows.
fn csv_rows(f: &Figure) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_reader(f.csv.as_bytes());
    let header = r.headers().unwrap().iter().map(str::to_owned).collect();
    let rows = r.records().map(|x| x.unwrap().iter().map(str::to_owned).collect()).collect();
    (header, rows)
}

fn num(cell: &str) -> Option<f64> {
    (!cell.is_empty()).then(|| cell.parse().unwrap_or_else(|e| panic!("{cell:?}: {e}")))
}

/// Checks what every figure holds: well-formed, a title, axis names with units, the caption
/// with the run's facts; returns the parsed SVG.
fn check_common(f: &Figure, report: &Report) -> Vec<Element> {
    let svg = parse_xml(&f.svg);
    assert_eq!(texts(&svg, "title"), [f.title.as_str()], "{}", f.name);
    let caption = texts(&svg, "caption");
    assert_eq!(caption.len(), 1, "{}", f.name);
    let m = &report.meta;
    for fact in [m.device_name.as_deref().unwrap(), m.mode.as_str(), &format!("gmprof {}", m.gmprof_version)] {
        assert!(caption[0].contains(fact), "{}: caption {:?} lacks {fact:?}", f.name, caption[0]);
    }
    let axes = texts(&svg, "axis-name");
    assert!(!axes.is_empty(), "{}: no axis name", f.name);
    assert!(axes.iter().any(|a| a.contains('(') && a.ends_with(')')), "{}: no unit in {axes:?}", f.name);
    assert!(!texts(&svg, "tick").is_empty(), "{}: no tick labels", f.name);
    svg
}

fn figure<'a>(figures: &'a Figures, name: &str) -> &'a Figure {
    figures.figures.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no figure {name}: {:?}", figures.skipped))
}

#[test]
fn per_kernel_run_draws_time_bandwidth_and_roofline_from_the_reports_numbers() {
    let report = per_kernel();
    let options = SummaryOptions::default();
    let figures = report.figures(None, &options).unwrap();
    let names: Vec<_> = figures.figures.iter().map(|f| f.name).collect();
    assert_eq!(names, ["range_time", "dram_bandwidth", "dram_bandwidth_kernels", "roofline"]);
    let skipped: Vec<_> = figures.skipped.iter().map(|s| s.name).collect();
    assert_eq!(skipped, ["steps", "stall_mix"]);
    assert!(figures.skipped.iter().all(|s| !s.why.is_empty()));

    // GPU time per range group: the summary's rows, numbers as they are.
    let summary = report.summary_with(&SummaryOptions { top: None, ..options });
    let expected: Vec<_> = summary.rows.iter().filter(|r| r.total_ns.is_some()).take(25).collect();
    let f = figure(&figures, "range_time");
    let svg = check_common(f, &report);
    let (header, rows) = csv_rows(f);
    assert_eq!(header, ["range_group", "count", "total_ns", "mean_ns", "share_pct"]);
    assert_eq!(rows.len(), expected.len());
    assert!(!rows.is_empty());
    for (row, g) in rows.iter().zip(&expected) {
        assert_eq!(row[0], g.label);
        assert_eq!(row[1], g.count.to_string());
        assert_eq!(row[2].parse::<u64>().ok(), g.total_ns);
        assert_eq!(num(&row[3]), g.mean_ns);
        assert_eq!(num(&row[4]), g.share_pct);
    }
    assert_eq!(count(&svg, "rect", "bar"), rows.len(), "a bar per row");
    assert_eq!(texts(&svg, "label").len(), rows.len(), "a label per row");
    assert!(texts(&svg, "axis-name").contains(&"GPU time (ms)"));

    // DRAM bandwidth against the peak of the device that ran it.
    let peak = report.meta.device_peaks.and_then(|p| p.dram_peak_gbps).expect("an H200's peak");
    let f = figure(&figures, "dram_bandwidth");
    let svg = check_common(f, &report);
    let (header, rows) = csv_rows(f);
    assert_eq!(header, ["range group", "dram_gbps", "peak_gbps", "pct_of_peak"]);
    let expected: Vec<_> = summary.rows.iter().filter(|r| r.dram_gbps.is_some()).take(20).collect();
    assert_eq!(rows.len(), expected.len());
    for (row, g) in rows.iter().zip(&expected) {
        assert_eq!((row[0].as_str(), num(&row[1])), (g.label.as_str(), g.dram_gbps));
        assert_eq!(num(&row[2]), Some(peak));
        assert_eq!(num(&row[3]), Some(100.0 * g.dram_gbps.unwrap() / peak));
    }
    assert_eq!(count(&svg, "rect", "bar"), rows.len());
    assert!(texts(&svg, "label").iter().any(|l| *l == format!("peak {peak:.0} GB/s")), "the peak is marked");
    assert!(texts(&svg, "axis-name").iter().any(|a| a.ends_with("(GB/s)")));

    // The roofline: one point per kernel name with work and bytes, the data's numbers.
    let data = HtmlData::of(&report, &options);
    let f = figure(&figures, "roofline");
    let svg = check_common(f, &report);
    let (header, rows) = csv_rows(f);
    assert_eq!(header[3..5], ["warp_inst_per_byte", "g_warp_inst_per_s"]);
    let points: Vec<_> = data
        .kernels
        .iter()
        .filter(|k| k.intensity.is_some_and(|v| v > 0.0) && k.rate_g.is_some_and(|v| v > 0.0))
        .collect();
    assert_eq!(rows.len(), points.len());
    for (row, k) in rows.iter().zip(&points) {
        assert_eq!((row[0].as_str(), row[1].parse::<u64>().unwrap()), (k.name.as_str(), k.calls));
        assert_eq!((num(&row[3]), num(&row[4])), (k.intensity, k.rate_g));
        assert_eq!(num(&row[5]), Some(peak));
    }
    assert_eq!(count(&svg, "circle", "point"), rows.len(), "a point per kernel");
    assert_eq!(count(&svg, "path", "series"), 1, "the roof");
    let roof = format!("dashed roof: DRAM peak {peak:.0} GB/s, issue peak 1045 G warp inst/s");
    assert!(texts(&svg, "label").contains(&roof.as_str()), "the roofs are named: {:?}", texts(&svg, "label"));
    assert!(texts(&svg, "axis-name").contains(&"performance (G warp inst/s)"));
}

#[test]
fn streamed_run_draws_its_step_breakdown_from_every_step_part() {
    let dir = root().join("tests/data/streamed/rank1");
    let report = Report::read_json(dir.join("report.json")).unwrap();
    let figures = report.figures(Some(&dir), &SummaryOptions::default()).unwrap();
    let f = figure(&figures, "steps");
    let svg = check_common(f, &report);
    let data = HtmlData::of_in(&report, &dir, &SummaryOptions::default()).unwrap();
    let st = data.streamed.expect("a streamed view");
    let (header, rows) = csv_rows(f);
    assert_eq!(header.len(), 8);
    assert_eq!(rows.len(), st.series.len());
    assert!(!rows.is_empty());
    for (row, p) in rows.iter().zip(&st.series) {
        assert_eq!((row[0].parse::<u64>().unwrap(), row[1].parse::<u64>().unwrap()), (p.first_step, p.last_step));
        let values: Vec<Option<f64>> = row[2..].iter().map(|c| num(c)).collect();
        assert_eq!(values, p.wall.iter().chain(p.gpu.iter()).copied().collect::<Vec<_>>());
    }
    assert!(count(&svg, "path", "series") >= 3, "wall mean, min, max (and GPU time)");
    assert_eq!(count(&svg, "circle", "point"), st.slow_steps.len(), "the slowest steps");
    assert!(texts(&svg, "axis-name").contains(&"time per step (ms)"));
    assert!(texts(&svg, "axis-name").contains(&"step"));
}

#[test]
fn pc_sampled_run_draws_the_stall_mix_per_range_group() {
    let mut report: Report = serde_json::from_str(&recorded::unzstd("pc", "h100_llmc_3steps_report.json.zst")).unwrap();
    let capture: gmprof::model::pc::PcCapture =
        serde_json::from_str(&recorded::unzstd("pc", "h100_llmc_3steps_pc_capture.json.zst")).unwrap();
    report.attach_pc(&capture);
    let options = SummaryOptions::default();
    let figures = report.figures(None, &options).unwrap();
    let f = figure(&figures, "stall_mix");
    let svg = check_common(f, &report);
    let pc = HtmlData::of(&report, &options).pc.expect("a pc view");
    let (header, rows) = csv_rows(f);
    assert_eq!(header[..3], ["range_group", "samples", "too_few"]);
    assert_eq!(rows.len(), pc.groups.len());
    let mut bars = 0;
    for (row, g) in rows.iter().zip(&pc.groups) {
        assert_eq!((row[0].as_str(), row[1].parse::<u64>().unwrap()), (g.label.as_str(), g.samples));
        let mut total = 0.0;
        for (col, cell) in header[3..].iter().zip(&row[3..]) {
            let reason = pc.reasons.iter().position(|r| format!("{r} (%)") == *col).expect("a reason column");
            assert_eq!(num(cell), g.shares[reason]);
            total += num(cell).unwrap_or(0.0);
            bars += usize::from(num(cell).is_some());
        }
        if !g.few {
            assert!((total - 100.0).abs() < 1e-6, "{}: shares add to {total}", g.label);
        }
    }
    assert!(bars >= rows.len());
    assert_eq!(count(&svg, "rect", "bar"), bars, "a bar segment per share");
    assert!(texts(&svg, "axis-name").contains(&"share of PC samples (%)"));
    assert!(texts(&svg, "legend").len() == header.len() - 3, "a legend entry per reason");
}

/// `gmprof report --figures DIR` on the recorded per_kernel run, with `env` set (and
/// `GMPROF_CHROMIUM` unset unless `env` sets it); its exit status and standard error.
fn figures_command(dir: &Path, env: &[(&str, &std::ffi::OsStr)]) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gmprof"));
    command.arg("report").arg(root().join("docs/recorded/torch_train_per_kernel.json")).arg("--figures").arg(dir);
    command.env_remove("GMPROF_CHROMIUM");
    for (key, value) in env {
        command.env(key, value);
    }
    let run = command.output().unwrap();
    (run.status.success(), String::from_utf8_lossy(&run.stderr).into_owned())
}

#[test]
fn without_a_browser_the_command_writes_gmprofs_svg_and_csv_and_says_there_is_no_png() {
    let out = tempfile::tempdir().unwrap();
    // No browser on PATH: gmprof's own SVGs, and how to get the page's figures with PNGs.
    let empty = out.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let dir = out.path().join("figs");
    let (ok, stderr) = figures_command(&dir, &[("PATH", empty.as_os_str())]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("wrote 4 figure(s)") && stderr.contains("NAME.svg and NAME.csv, no PNG"), "{stderr}");
    assert!(stderr.contains("figure steps skipped: not a streamed run"), "{stderr}");
    assert!(stderr.contains("figure stall_mix skipped: the run has no PC sampling"), "{stderr}");
    assert!(
        stderr.contains(
            "no browser found (GMPROF_CHROMIUM unset; none of chromium, chromium-browser, google-chrome on PATH)"
        ) && stderr.contains("no PNG was written")
            && stderr.contains("apt-get install chromium"),
        "{stderr}"
    );
    for name in ["range_time", "dram_bandwidth", "dram_bandwidth_kernels", "roofline"] {
        for ext in ["svg", "csv"] {
            let path: &Path = &dir.join(format!("{name}.{ext}"));
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if ext == "svg" {
                parse_xml(&text);
            }
        }
        assert!(!dir.join(format!("{name}.png")).exists(), "{name}.png");
    }
    assert!(!dir.join("steps.svg").exists());
    // GMPROF_CHROMIUM=none: the same, said as chosen.
    let dir = out.path().join("none");
    let (ok, stderr) = figures_command(&dir, &[("GMPROF_CHROMIUM", "none".as_ref())]);
    assert!(ok && stderr.contains("GMPROF_CHROMIUM=none: the SVGs are gmprof's own drawing"), "{stderr}");
    assert!(dir.join("roofline.svg").is_file() && !dir.join("roofline.png").exists());
    // A GMPROF_CHROMIUM that names nothing is an error, not a silent fallback.
    let (ok, stderr) = figures_command(&out.path().join("bad"), &[("GMPROF_CHROMIUM", "/no/such/chromium".as_ref())]);
    assert!(!ok && stderr.contains("GMPROF_CHROMIUM=/no/such/chromium names no executable file"), "{stderr}");
    assert!(!out.path().join("bad").exists());
}

/// A stand-in browser: a shell script that checks it was asked for the page's figures and
/// then runs `body`.
#[cfg(unix)]
fn fake_browser(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("chromium");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *'--headless'*'--dump-dom file://'*'#figures') ;; *) echo \"unexpected: $*\" >&2; exit 3 ;; esac\n{body}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[cfg(unix)]
#[test]
fn a_chart_the_page_did_not_draw_or_a_script_error_fails_the_command_naming_it() {
    let out = tempfile::tempdir().unwrap();
    let page = |body: &str, json: &str| {
        format!(
            "cat <<'EOF'\n<html><head></head>{body}<script type=\"application/json\" id=\"gmprof-figures\">{json}</script></body></html>\nEOF"
        )
    };
    // The page drew nothing, and said nothing of range_time, which has a table.
    let ok_body = r#"<body data-render="ok" data-errors="0" data-figures="0">"#;
    let browser = fake_browser(out.path(), &page(ok_body, r#"{"figures":[],"skipped":[],"errors":[]}"#));
    let (ok, stderr) = figures_command(&out.path().join("a"), &[("GMPROF_CHROMIUM", browser.as_os_str())]);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("the HTML report's page drew no chart range_time although its table has 6 row(s)"),
        "{stderr}"
    );
    assert!(!out.path().join("a").exists(), "nothing written");
    // A script error of the page is named.
    let json = r#"{"figures":[],"skipped":[],"errors":["figure roofline: points is undefined"]}"#;
    let browser = fake_browser(out.path(), &page(r#"<body data-render="ok" data-errors="1">"#, json));
    let (ok, stderr) = figures_command(&out.path().join("b"), &[("GMPROF_CHROMIUM", browser.as_os_str())]);
    assert!(!ok && stderr.contains("1 script error(s): figure roofline: points is undefined"), "{stderr}");
    // A browser that fails without a page: its last lines.
    let browser = fake_browser(out.path(), "echo 'cannot open display' >&2; exit 1");
    let (ok, stderr) = figures_command(&out.path().join("c"), &[("GMPROF_CHROMIUM", browser.as_os_str())]);
    assert!(
        !ok && stderr.contains("failed (exit status: 1) without a page") && stderr.contains("cannot open display"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn a_browser_past_its_time_is_killed_with_all_it_started() {
    let out = tempfile::tempdir().unwrap();
    let pid_file = out.path().join("child.pid");
    let browser = fake_browser(out.path(), &format!("sleep 60 &\necho $! > {}\nwait", pid_file.display()));
    let start = std::time::Instant::now();
    let e = per_kernel()
        .figures_in_browser(None, &SummaryOptions::default(), &browser, std::time::Duration::from_secs(2))
        .unwrap_err()
        .to_string();
    assert!(e.contains("did not finish drawing the figures within 2 s (killed)"), "{e}");
    assert!(start.elapsed() < std::time::Duration::from_secs(20), "{:?}", start.elapsed());
    // The browser's own child (here `sleep`) went with it: gone, or a zombie until reaped.
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_owned();
    let gone = (0..100).any(|_| {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        let dead =
            state.as_deref().is_none_or(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')));
        if !dead {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        dead
    });
    assert!(gone, "the browser's child {pid} still runs");
}

#[test]
fn several_processes_reports_are_refused_not_ignored() {
    let out = tempfile::tempdir().unwrap();
    for rank in ["rank0", "rank1"] {
        std::fs::create_dir_all(out.path().join(rank)).unwrap();
        std::fs::copy(
            root().join("docs/recorded/torch_train_per_kernel.json"),
            out.path().join(rank).join("report.json"),
        )
        .unwrap();
    }
    let figs = out.path().join("figs");
    let run = Command::new(env!("CARGO_BIN_EXE_gmprof"))
        .arg("report")
        .arg(out.path())
        .arg("--figures")
        .arg(&figs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(stderr.contains("holds several processes' reports") && stderr.contains("--figures"), "{stderr}");
    assert!(!figs.exists());
}
