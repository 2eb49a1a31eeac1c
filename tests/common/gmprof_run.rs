//! `gmprof run` with a stand-in libcupti (an empty file: nothing CUDA is needed) and the
//! built `libgmprof.so` preloaded, of `sh -c SCRIPT`, for tests of what `gmprof run` does
//! before and around a program that never touches the GPU.

use std::path::Path;
use std::process::Command;

/// Runs `gmprof run --lib LIB -o DIR/out EXTRA -- sh -c SCRIPT` with `DIR/libcupti.so` as
/// CUPTI; returns the exit code, stdout and stderr.
pub fn gmprof_run(dir: &Path, lib: &Path, extra: &[&str], script: &str) -> (Option<i32>, String, String) {
    let cupti = dir.join("libcupti.so");
    if !cupti.exists() {
        std::fs::write(&cupti, b"").unwrap();
    }
    let output = Command::new(env!("CARGO_BIN_EXE_gmprof"))
        .env("GMPROF_CUPTI_LIB", &cupti)
        .args(["run", "--lib", lib.to_str().unwrap(), "-o", dir.join("out").to_str().unwrap()])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
