//! Golden files under tests/golden/: compared, or rewritten with `GMPROF_BLESS=1`.

use std::path::PathBuf;

/// The path of golden file `name`.
pub fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
}

/// Asserts that `actual` equals golden file `name`; `GMPROF_BLESS=1` rewrites it instead.
pub fn check_golden(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var("GMPROF_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("golden dir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with GMPROF_BLESS=1 to create it", path.display()));
    assert!(
        expected == actual,
        "{} differs from the output (GMPROF_BLESS=1 rewrites it):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}
