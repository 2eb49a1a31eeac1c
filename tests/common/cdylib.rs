//! Locates `libgmprof.so` for tests that load it (the C header check, the Python module).
//!
//! `cargo test` builds the crate as an rlib only, so the cdylib exists only after a
//! `cargo build`. When it is missing or older than the sources (a `cargo build` before the
//! last edit), it is built here with a nested cargo into its own target directory, which
//! never contends for the lock of the build running the tests.

use std::path::PathBuf;
use std::process::Command;

pub fn cdylib() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let built = target.join("debug/libgmprof.so");
    if modified(&built).is_some_and(|lib| newest_source(&root).is_none_or(|src| src <= lib)) {
        return built;
    }
    let own_dir = target.join("cdylib-for-tests");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--lib", "--quiet", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&own_dir)
        .status()
        .expect("run cargo to build libgmprof.so");
    assert!(status.success(), "cargo build --lib failed");
    let lib = own_dir.join("debug/libgmprof.so");
    assert!(lib.exists(), "{} missing after cargo build --lib", lib.display());
    lib
}

fn modified(path: &std::path::Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The latest modification time of Cargo.toml, build.rs and the files under src/.
fn newest_source(root: &std::path::Path) -> Option<std::time::SystemTime> {
    let mut newest = [root.join("Cargo.toml"), root.join("build.rs")].iter().filter_map(|p| modified(p)).max();
    let mut dirs = vec![root.join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Some(t) = modified(&path) {
                newest = newest.max(Some(t));
            }
        }
    }
    newest
}
