//! `include/gmprof.h` against what `libgmprof.so` really exports: every declared function is
//! exported, and every exported `gmprof_*` function is declared.

use std::collections::BTreeSet;
use std::process::Command;

/// Function names declared in the header: identifiers `gmprof_*` directly followed by `(`.
fn declared() -> BTreeSet<String> {
    let header = include_str!("../include/gmprof.h");
    let mut names = BTreeSet::new();
    for line in header.lines().filter(|l| !l.trim_start().starts_with('*') && !l.trim_start().starts_with("/*")) {
        let mut rest = line;
        while let Some(at) = rest.find("gmprof_") {
            let tail = &rest[at..];
            let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
            if tail[end..].starts_with('(') {
                names.insert(tail[..end].to_owned());
            }
            rest = &tail[end..];
        }
    }
    names
}

#[path = "common/cdylib.rs"]
mod common;
use common::cdylib;

#[test]
fn header_matches_the_library_exports() {
    let declared = declared();
    assert_eq!(declared.len(), gmprof::capi::EXPORTED_FUNCTIONS.len(), "declared: {declared:?}");
    let lib = cdylib();
    assert!(lib.exists(), "{} was not built (crate-type cdylib)", lib.display());
    let out = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("run nm (binutils)");
    assert!(out.status.success(), "nm failed: {}", String::from_utf8_lossy(&out.stderr));
    let exported: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (_addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
            (kind == "T" && name.starts_with("gmprof_")).then(|| name.to_owned())
        })
        .collect();
    assert_eq!(declared, exported, "include/gmprof.h and libgmprof.so disagree");
}
