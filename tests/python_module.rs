//! Runs the Python module's unit tests (`python/tests`) with `python3 -m unittest`.
//!
//! The tests use a fake library for the wrapper's logic, and `GMPROF_TEST_LIBRARY` points
//! at the real `libgmprof.so` (built on demand, see `common/cdylib.rs`) so that the tests
//! against the real C ABI run as well (no GPU needed).

use std::path::Path;
use std::process::Command;

#[path = "common/cdylib.rs"]
mod common;

#[test]
fn python_module_unit_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new("python3");
    command
        .args(["-m", "unittest", "discover", "-s", "python/tests", "-v"])
        .current_dir(root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("GMPROF_DISABLE");
    let lib = common::cdylib();
    eprintln!("GMPROF_TEST_LIBRARY={}", lib.display());
    command.env("GMPROF_TEST_LIBRARY", lib);

    let output = match command.output() {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            panic!("python3 is not on PATH: install Python 3 to run the gmprof Python module tests")
        }
        Err(err) => panic!("could not run python3: {err}"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python3 -m unittest failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    // unittest reports to stderr; show it with --nocapture.
    eprintln!("{stderr}");
}
