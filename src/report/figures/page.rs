//! The figures as the HTML report's own page draws them: `report.html#figures` (its
//! `figures.js`) draws each chart alone and hands the SVG and PNG out in its DOM, in
//! `<script type="application/json" id="gmprof-figures">`. [`read`] takes them from the DOM a
//! browser left ([`Dump`]) and checks them: the page finished (`<body data-render="ok">`)
//! with no script error (`data-errors="0"`, the errors it lists), each SVG is one `<svg>`
//! element, each PNG is a PNG of the size the page drew (twice its pixels).
//!
//! Imports the [`browser`](super::browser)'s dump and errors; `base64` decodes the PNGs.

use base64::Engine as _;
use serde::Deserialize;

use super::browser::Dump;
use crate::error::{Error, Result};

/// Where the page hands the figures out.
const OUTPUT: &str = "<script type=\"application/json\" id=\"gmprof-figures\">";
/// The 8 bytes every PNG starts with.
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// One figure as the page drew it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drawn {
    pub name: String,
    pub title: String,
    /// An SVG document (with its XML declaration).
    pub svg: String,
    pub png: Vec<u8>,
    /// The PNG's size, pixels.
    pub png_size: (u32, u32),
}

/// What the page drew, and what it skipped (name, why).
#[derive(Clone, Debug, Default)]
pub struct PageFigures {
    pub figures: Vec<Drawn>,
    pub skipped: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct Output {
    figures: Vec<Figure>,
    skipped: Vec<Skipped>,
    errors: Vec<String>,
}

#[derive(Deserialize)]
struct Figure {
    name: String,
    title: String,
    width: u32,
    height: u32,
    pixel_ratio: u32,
    svg: String,
    png: String,
}

#[derive(Deserialize)]
struct Skipped {
    name: String,
    why: String,
}

fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    tag[at..].split('"').next()
}

fn page_error(what: String, console: &[String]) -> Error {
    let mut message = format!("the HTML report's page failed to draw the figures: {what}");
    if !console.is_empty() {
        message.push_str(&format!("\nthe browser's console:\n{}", console.join("\n")));
    }
    message.push_str(
        "\nThis is a bug in gmprof: please report it with the report.json. GMPROF_CHROMIUM=none writes the figures \
         gmprof draws itself (SVG, no PNG).",
    );
    Error::InvalidState(message)
}

/// The PNG's width and height, from its header (`IHDR`, the first chunk).
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || png[..8] != PNG_SIGNATURE || &png[12..16] != b"IHDR" {
        return None;
    }
    let be = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    Some((be(16), be(20)))
}

fn drawn(f: Figure) -> std::result::Result<Drawn, String> {
    let svg = f.svg.trim();
    if !svg.starts_with("<svg") || !svg.ends_with("</svg>") || svg.matches("<svg").count() != 1 {
        return Err(format!("figure {}: the page's SVG is not one <svg> element", f.name));
    }
    let png = f
        .png
        .strip_prefix("data:image/png;base64,")
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .ok_or_else(|| format!("figure {}: the page's PNG is not a base64 data: URL of a PNG", f.name))?;
    let want = (f.width * f.pixel_ratio, f.height * f.pixel_ratio);
    match png_size(&png) {
        Some(size) if size == want && want.0 > 0 && want.1 > 0 => Ok(Drawn {
            name: f.name,
            title: f.title,
            svg: format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{svg}\n"),
            png,
            png_size: size,
        }),
        Some(size) => {
            Err(format!("figure {}: the PNG is {}x{} pixels, not {}x{}", f.name, size.0, size.1, want.0, want.1))
        }
        None => Err(format!("figure {}: the page's PNG has no PNG header", f.name)),
    }
}

/// The figures the page handed out in `dump`, checked; an error names what failed: the page
/// did not finish, a script error (with the browser's console), a figure's SVG or PNG.
pub fn read(dump: &Dump) -> Result<PageFigures> {
    let console = &dump.console;
    let body = dump
        .dom
        .find("</head>")
        .and_then(|h| dump.dom[h..].find("<body").map(|b| h + b))
        .and_then(|b| dump.dom[b..].find('>').map(|e| &dump.dom[b..b + e]))
        .ok_or_else(|| page_error("the browser returned no page (no <body>)".into(), console))?;
    let render = attribute(body, "data-render").unwrap_or("missing");
    let errors = attribute(body, "data-errors").unwrap_or("missing");
    let output = dump.dom.find(OUTPUT).map(|at| &dump.dom[at + OUTPUT.len()..]).and_then(|rest| {
        let end = rest.find("</script>")?;
        Some(&rest[..end])
    });
    let parsed: Option<Output> = output.and_then(|json| serde_json::from_str(json).ok());
    let listed = parsed.as_ref().map(|o| o.errors.clone()).unwrap_or_default();
    if errors != "0" || !listed.is_empty() {
        let what = if listed.is_empty() { "see the console".to_owned() } else { listed.join("; ") };
        return Err(page_error(format!("{errors} script error(s): {what}"), console));
    }
    if render != "ok" {
        return Err(page_error(format!("its script did not finish (data-render=\"{render}\")"), console));
    }
    let out = match (output, parsed) {
        (Some(_), Some(out)) => out,
        (Some(_), None) => return Err(page_error("its figures are not the JSON gmprof reads".into(), console)),
        (None, _) => {
            return Err(page_error(
                "it handed out no figures (was it opened at #figures, by a gmprof of this version?)".into(),
                console,
            ))
        }
    };
    let figures = out.figures.into_iter().map(drawn).collect::<std::result::Result<Vec<_>, _>>();
    Ok(PageFigures {
        figures: figures.map_err(|e| page_error(e, console))?,
        skipped: out.skipped.into_iter().map(|s| (s.name, s.why)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG's signature and header of `w`×`h` (the rest does not matter here).
    fn png_header(w: u32, h: u32) -> Vec<u8> {
        let mut png = PNG_SIGNATURE.to_vec();
        png.extend(13u32.to_be_bytes());
        png.extend(b"IHDR");
        png.extend(w.to_be_bytes());
        png.extend(h.to_be_bytes());
        png.extend([8, 6, 0, 0, 0]);
        png
    }

    fn dom(body: &str, json: Option<&str>) -> Dump {
        let out = json.map(|j| format!("{OUTPUT}{j}</script>")).unwrap_or_default();
        Dump {
            dom: format!(
                "<html><head><title>x</title></head>{body}<script>var body = '<body>';</script>{out}</body></html>"
            ),
            console: vec![],
        }
    }

    fn figure_json(name: &str, png: &[u8], (w, h): (u32, u32)) -> String {
        let png = base64::engine::general_purpose::STANDARD.encode(png);
        format!(
            r#"{{"name":"{name}","title":"T","width":{w},"height":{h},"pixel_ratio":2,"svg":"<svg a=\"1\"><text>x</text></svg>","png":"data:image/png;base64,{png}"}}"#
        )
    }

    const OK: &str = r#"<body data-render="ok" data-errors="0" data-figures="1">"#;

    #[test]
    fn reads_each_figure_and_what_was_skipped() {
        let json = format!(
            r#"{{"figures":[{}],"skipped":[{{"name":"steps","why":"not streamed"}}],"errors":[]}}"#,
            figure_json("roofline", &png_header(2000, 1148), (1000, 574))
        );
        let read = read(&dom(OK, Some(&json))).unwrap();
        assert_eq!(read.figures.len(), 1);
        let f = &read.figures[0];
        assert_eq!((f.name.as_str(), f.png_size), ("roofline", (2000, 1148)));
        assert!(f.svg.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg a=\"1\">"));
        assert_eq!(read.skipped, [("steps".to_owned(), "not streamed".to_owned())]);
    }

    #[test]
    fn a_script_error_fails_and_is_named() {
        let json = r#"{"figures":[],"skipped":[],"errors":["figure roofline: x is undefined"]}"#;
        let e = read(&dom(r#"<body data-render="ok" data-errors="1">"#, Some(json))).unwrap_err().to_string();
        assert!(e.contains("1 script error(s): figure roofline: x is undefined"), "{e}");
        // An error before the page could hand anything out: the count, and the console.
        let mut d = dom(r#"<body data-render="pending" data-errors="1">"#, None);
        d.console.push("INFO:CONSOLE(3)] \"Uncaught TypeError: boom\"".into());
        let e = read(&d).unwrap_err().to_string();
        assert!(e.contains("1 script error(s)") && e.contains("Uncaught TypeError: boom"), "{e}");
    }

    #[test]
    fn an_unfinished_page_or_one_without_figures_fails() {
        let e = read(&dom(r#"<body data-render="pending" data-errors="0">"#, None)).unwrap_err().to_string();
        assert!(e.contains("did not finish (data-render=\"pending\")"), "{e}");
        let e = read(&dom(OK, None)).unwrap_err().to_string();
        assert!(e.contains("handed out no figures"), "{e}");
        let e = read(&Dump { dom: String::new(), console: vec![] }).unwrap_err().to_string();
        assert!(e.contains("no <body>"), "{e}");
    }

    #[test]
    fn a_png_of_the_wrong_size_or_no_png_fails_naming_the_figure() {
        let wrong = format!(
            r#"{{"figures":[{}],"skipped":[],"errors":[]}}"#,
            figure_json("range_time", &png_header(1000, 574), (1000, 574))
        );
        let e = read(&dom(OK, Some(&wrong))).unwrap_err().to_string();
        assert!(e.contains("figure range_time: the PNG is 1000x574 pixels, not 2000x1148"), "{e}");
        let none =
            format!(r#"{{"figures":[{}],"skipped":[],"errors":[]}}"#, figure_json("stall_mix", b"GIF89a", (10, 10)));
        let e = read(&dom(OK, Some(&none))).unwrap_err().to_string();
        assert!(e.contains("figure stall_mix: the page's PNG has no PNG header"), "{e}");
    }
}
