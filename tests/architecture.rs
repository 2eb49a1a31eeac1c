//! The pipeline's import rules (README, "Architecture"), checked on the source tree.
//!
//! `ways_in → capture → analysis → report`, on the foundation `model` and `error`, with the
//! layers `sys` (FFI) and `checked` (checked CUPTI) under capture. A module may name the
//! folders after it in the pipeline and the foundation, never one before it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level modules each folder may name with `crate::`.
fn allowed(folder: &str) -> &'static [&'static str] {
    match folder {
        "sys" => &["sys"],
        "error.rs" => &["error", "sys"],
        "model" => &["model", "error"],
        "device_timers" => &["device_timers", "model", "error"],
        "checked" => &["checked", "sys", "model", "error"],
        "report" => &["report", "analysis", "device_timers", "model", "error"],
        "analysis" => &["analysis", "report", "device_timers", "model", "error"],
        "capture" => &["capture", "probe", "analysis", "report", "device_timers", "checked", "sys", "model", "error"],
        "probe" => &["probe", "model", "error"],
        "ways_in" => {
            &["ways_in", "probe", "capture", "analysis", "report", "device_timers", "checked", "sys", "model", "error"]
        }
        other => {
            panic!("src/{other} is in no layer: add it to tests/architecture.rs and README's Architecture section")
        }
    }
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

/// The identifiers that follow `crate::` in the code (comments skipped).
fn crate_paths(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at + "crate::".len()..];
            let ident: String = tail.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !ident.is_empty() {
                found.insert(ident);
            }
            rest = tail;
        }
    }
    found
}

#[test]
fn imports_point_down_the_pipeline() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_str().unwrap();
        if matches!(top, "lib.rs" | "bin") || rel.starts_with("sys/generated") {
            continue;
        }
        let source = std::fs::read_to_string(file).unwrap();
        for ident in crate_paths(&source) {
            if !allowed(top).contains(&ident.as_str()) {
                violations.push(format!("src/{} names crate::{ident}", rel.display()));
            }
        }
        checked += 1;
    }
    assert!(checked > 30, "only {checked} files checked: is src/ laid out as expected?");
    assert!(violations.is_empty(), "imports against the pipeline:\n{}", violations.join("\n"));
}

#[test]
fn the_checker_sees_paths_and_skips_comments() {
    let paths =
        crate_paths("use crate::model::{A, B};\n// crate::ways_in in a comment\nlet x = crate::report::csv::f();");
    assert_eq!(paths.into_iter().collect::<Vec<_>>(), ["model", "report"]);
}

#[test]
fn no_source_file_is_over_900_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter(|f| !f.to_string_lossy().contains("sys/generated"))
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 900).then(|| format!("{} ({n} lines)", f.display()))
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
        ["checked/pm_sampling.rs", "capture/pm_sampling.rs", "model/pm.rs", "analysis/pm_fold.rs", "report/pm_csv.rs"],
        ["cuptiPmSampling", "PmSampler", "pm_fold::fold"],
    );
}

/// PC sampling has modules of its own, as PM sampling does: the checked wrapper, capture's
/// sampler, the records, the folding, and the CSVs; the profiler only starts and finishes it.
#[test]
fn pc_sampling_lives_in_modules_of_its_own() {
    lives_in_modules_of_its_own(
        "PC sampling",
        ["checked/pc_sampling.rs", "capture/pc_sampling.rs", "model/pc.rs", "analysis/pc_fold.rs", "report/pc_csv.rs"],
        ["cuptiPCSampling", "PcSampling::", "pc_fold::fold"],
    );
}
