//! Runs the Python module's unit tests (`python/tests`) with `python3 -m unittest`.
//!
//! The tests use a fake library for the wrapper's logic; when the cdylib exists
//! (`target/debug/libgmprof.so` or `target/release/libgmprof.so`), `GMPROF_TEST_LIBRARY`
//! points at it so that the tests against the real C ABI run as well (no GPU needed).

use std::path::{Path, PathBuf};
use std::process::Command;

fn cdylib(root: &Path) -> Option<PathBuf> {
    ["target/debug/libgmprof.so", "target/release/libgmprof.so"]
        .iter()
        .map(|rel| root.join(rel))
        .find(|path| path.is_file())
}

#[test]
fn python_module_unit_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new("python3");
    command
        .args(["-m", "unittest", "discover", "-s", "python/tests", "-v"])
        .current_dir(root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("GMPROF_DISABLE");
    match cdylib(root) {
        Some(path) => {
            eprintln!("GMPROF_TEST_LIBRARY={}", path.display());
            command.env("GMPROF_TEST_LIBRARY", path);
        }
        None => eprintln!("no libgmprof.so under target/: the real-library Python tests are skipped"),
    }

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
