//! The pipeline's import rules (README, "Architecture"), checked on the source tree.
//!
//! `ways_in → capture → report → analysis`, on the foundation `device_timers`, `model` and
//! `error`, with `probe` beside the pipeline and the layers `checked` (checked CUPTI) and `sys`
//! (FFI) under capture. Checked here, on the file-level import graph of `src/`
//! (`architecture/graph.rs`):
//! - no two files import each other through any chain of imports (the failure names the
//!   circle, file by file);
//! - no file imports a layer above its own, or names one it may not (`sys`/`checked` only
//!   from `capture` and `ways_in`; `probe` only from those too);
//! - no file imports the `mod.rs` of a folder that holds it: a folder's `mod.rs` composes its
//!   files and re-exports them, and what the files share lives in a file of its own;
//! - no source file is over 800 lines.

#[path = "architecture/graph.rs"]
mod graph;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use graph::Graph;

/// The top-level folders of `src/`, from the top of the pipeline down. A file may import
/// files of its own folder and of the folders after its own, never of one before it.
const LAYERS: [&str; 10] =
    ["ways_in", "capture", "report", "analysis", "probe", "device_timers", "checked", "model", "error", "sys"];

/// Layers below a folder that it still may not name (they are not its business).
fn forbidden(folder: &str) -> &'static [&'static str] {
    match folder {
        "report" | "analysis" => &["probe", "checked", "sys"],
        "probe" | "device_timers" => &["checked", "sys"],
        _ => &[],
    }
}

fn layer(rel: &Path) -> &str {
    let top = rel.components().next().unwrap().as_os_str().to_str().unwrap();
    top.strip_suffix(".rs").unwrap_or(top)
}

fn rank(folder: &str) -> usize {
    LAYERS.iter().position(|l| *l == folder).unwrap_or_else(|| {
        panic!("src/{folder} is in no layer: add it to tests/architecture.rs and README's Architecture section")
    })
}

/// Files the rules leave out: the crate root, the command's own files, generated FFI.
fn skipped(rel: &Path) -> bool {
    rel == Path::new("lib.rs") || rel.starts_with("bin") || rel.starts_with("sys/generated")
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn show(cycle: &graph::Cycle) -> String {
    let names = |files: &[PathBuf]| files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
    let mut line = names(&cycle.path).join(" → ");
    if !cycle.others.is_empty() {
        line.push_str(&format!("\n  (circles through these files also join {})", names(&cycle.others).join(", ")));
    }
    line
}

/// Every circle of imports in `src`, one line each.
fn circles(src: &Path) -> Vec<String> {
    Graph::read(src, skipped).cycles().iter().map(show).collect()
}

#[test]
fn no_two_files_import_each_other_through_any_chain() {
    let graph = Graph::read(&src(), skipped);
    assert!(graph.edges.len() > 100, "only {} files read: is src/ laid out as expected?", graph.edges.len());
    let found = circles(&src());
    assert!(
        found.is_empty(),
        "{} circle(s) of imports between files (a → b: a names an item that b defines):\n{}\n\
         Move what both files need into a file that both import.",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn imports_point_down_the_pipeline() {
    let graph = Graph::read(&src(), skipped);
    let mut violations = Vec::new();
    for (from, tos) in &graph.edges {
        let here = layer(from);
        for to in tos {
            let there = layer(to);
            if skipped(to) || here == there {
                continue;
            }
            if rank(there) < rank(here) {
                violations.push(format!(
                    "src/{} imports src/{}: {there} is above {here}",
                    from.display(),
                    to.display()
                ));
            } else if forbidden(here).contains(&there) {
                violations.push(format!(
                    "src/{} imports src/{}: {here} may not name {there}",
                    from.display(),
                    to.display()
                ));
            }
        }
    }
    assert!(violations.is_empty(), "imports against the pipeline:\n{}", violations.join("\n"));
}

#[test]
fn no_file_imports_the_folder_that_holds_it() {
    let graph = Graph::read(&src(), skipped);
    let mut violations = Vec::new();
    for (from, tos) in &graph.edges {
        for to in tos {
            if to.file_name().is_some_and(|n| n == "mod.rs") && from.starts_with(to.parent().unwrap()) {
                violations.push(format!("src/{} imports src/{}", from.display(), to.display()));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "files that import their own folder's mod.rs (move what they need out of it, into a file of its own):\n{}",
        violations.join("\n")
    );
}

/// The checker finds a circle planted in a small tree, names it, and sees no circle where
/// there is none.
#[test]
fn the_checker_finds_a_planted_circle() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("report/tables")).unwrap();
    std::fs::write(root.join("lib.rs"), "pub mod report;\n").unwrap();
    std::fs::write(root.join("report/mod.rs"), "pub mod model;\npub mod tables;\npub use model::Report;\n").unwrap();
    std::fs::write(root.join("report/model.rs"), "pub struct Report;\n").unwrap();
    std::fs::write(root.join("report/tables/mod.rs"), "pub mod csv;\npub mod rows;\n").unwrap();
    std::fs::write(
        root.join("report/tables/csv.rs"),
        "use crate::report::Report;\nuse super::rows::Row; // crate::report::tables::json in a comment\npub fn write(_: &Report, _: Row) {}\n",
    )
    .unwrap();
    std::fs::write(root.join("report/tables/rows.rs"), "pub struct Row;\n").unwrap();
    assert_eq!(circles(root), Vec::<String>::new(), "a re-export through report/mod.rs is no circle");
    let graph = Graph::read(root, skipped);
    assert_eq!(
        graph.edges[Path::new("report/tables/csv.rs")],
        BTreeSet::from([PathBuf::from("report/model.rs"), PathBuf::from("report/tables/rows.rs")])
    );
    // Plant one: rows.rs names the writer.
    std::fs::write(
        root.join("report/tables/rows.rs"),
        "pub struct Row;\nfn f() { crate::report::tables::csv::write(&crate::report::Report, Row) }\n",
    )
    .unwrap();
    assert_eq!(circles(root), ["report/tables/csv.rs → report/tables/rows.rs → report/tables/csv.rs"]);
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_800_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter(|f| !f.to_string_lossy().contains("sys/generated"))
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 800).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these at a real seam: {long:?}");
}

/// A sampler's code in modules of its own, none of it in the profiler or the correlator (the
/// largest folders): each of `own` exists, and no file of those folders names a `needle`.
fn lives_in_modules_of_its_own(what: &str, own: [&str; 5], needles: [&str; 3]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for own in own {
        assert!(src.join(own).is_file(), "src/{own} is missing");
    }
    let mut files = Vec::new();
    rust_files(&src.join("capture/profiler"), &mut files);
    rust_files(&src.join("analysis/correlate"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for needle in needles {
            assert!(!text.contains(needle), "{} holds {what} code ({needle})", file.display());
        }
    }
}

/// PM sampling has modules of its own (README, "Architecture"): the checked wrapper beside
/// the range profiler's, capture's sampler, the records, and the folding math.
#[test]
fn pm_sampling_lives_in_modules_of_its_own() {
    lives_in_modules_of_its_own(
        "PM sampling",
        [
            "checked/pm_sampling.rs",
            "capture/pm_sampling.rs",
            "model/pm.rs",
            "analysis/pm_fold.rs",
            "report/tables/pm_csv.rs",
        ],
        ["cuptiPmSampling", "PmSampler", "pm_fold::fold"],
    );
}

/// PC sampling has modules of its own, as PM sampling does: the checked wrapper, capture's
/// sampler, the records, the folding, and the CSVs; the profiler only starts and finishes it.
#[test]
fn pc_sampling_lives_in_modules_of_its_own() {
    lives_in_modules_of_its_own(
        "PC sampling",
        [
            "checked/pc_sampling.rs",
            "capture/pc_sampling.rs",
            "model/pc.rs",
            "analysis/pc_fold.rs",
            "report/tables/pc_csv.rs",
        ],
        ["cuptiPCSampling", "PcSampling::", "pc_fold::fold"],
    );
}
