//! Inputs that once crashed gmprof (found by the fuzz targets, `fuzz/`; README "Fuzzing"),
//! kept in `tests/data/fuzz/TARGET/`, and what gmprof now makes of each, read through the
//! entry point that crashed.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn regression(target: &str, name: &str) -> Vec<u8> {
    std::fs::read(root().join("tests/data/fuzz").join(target).join(name)).unwrap()
}

// ---- What gmprof makes of each input that crashed it (each test failed before its fix).

#[test]
fn ptx_with_an_unterminated_string_is_a_parse_error() {
    // `."`: the cursor stepped past the end of the input looking for the closing quote, and
    // the error's line count sliced past it (ptx.rs).
    let input = regression("ptx_parse", "unterminated_string_at_top_level.ptx");
    let e = gmprof::probe::Module::parse(std::str::from_utf8(&input).unwrap()).unwrap_err();
    assert_eq!(e.line, 1);
    assert_eq!(e.message, "expected one of \";{\" before the end of the input");
    let e = gmprof::probe::probe_ptx(".version 9.0\n.target sm_90\n.entry k(\"", "k", &[]).unwrap_err();
    assert_eq!(e.to_string(), "PTX line 3: expected one of \";{\" before the end of the input");
}
