//! With libcupti and libcuda made unfindable, every entry point returns the clear error and
//! nothing panics.

use std::process::Command;

fn hide_libraries() {
    std::env::set_var("GMPROF_CUPTI_LIB", "/nonexistent/libcupti.so");
    std::env::set_var("GMPROF_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1");
}

#[test]
fn library_entry_points_return_the_clear_error() {
    hide_libraries();
    let err = gmprof::checked::Cupti::load().unwrap_err();
    let text = err.to_string();
    assert!(err.is_library_missing());
    assert!(text.contains("libcupti could not be loaded"), "{text}");
    assert!(text.contains("/nonexistent/libcupti.so: no such file"), "{text}");
    assert!(text.contains("GMPROF_CUPTI_LIB"), "the message says how to fix it: {text}");

    let err = gmprof::Profiler::builder().build().unwrap_err();
    assert!(err.is_library_missing(), "{err}");

    let err = gmprof::init(gmprof::Profiler::builder()).unwrap_err();
    assert!(err.is_library_missing(), "{err}");
    assert!(!gmprof::is_initialized());

    // Without a profiler, the global range calls say so instead of panicking.
    let err = gmprof::push_range("step").unwrap_err();
    assert!(err.to_string().contains("call gmprof::init first"), "{err}");
    assert!(gmprof::pop_range().is_err());
    assert!(gmprof::finish().is_err());

    let err = gmprof::checked::driver::init().unwrap_err();
    assert!(err.to_string().contains("libcuda could not be loaded"), "{err}");
}

#[test]
fn cli_prints_the_error_and_exits_non_zero() {
    for args in [
        &["metrics", "--filter", "dram"][..],
        &["passes", "dram__bytes_read.sum"][..],
        &["passes", "--chip", "GH100", "dram__bytes_read.sum"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gmprof"))
            .args(args)
            .env("GMPROF_CUPTI_LIB", "/nonexistent/libcupti.so")
            .env("GMPROF_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
            .output()
            .expect("run gmprof");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("gmprof: error: libcupti could not be loaded"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn report_command_reprints_saved_outputs_without_a_gpu() {
    let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(["report", golden]).output().expect("run gmprof");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = gmprof::Report::read_json(golden).expect("golden report");
    assert_eq!(stdout.trim_end(), report.summary().to_string().trim_end());
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(["report", golden, "--csv"]).output().expect("run");
    let mut expected = Vec::new();
    report.write_csv_to(&mut expected).unwrap();
    assert_eq!(out.stdout, expected);
    let out = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(["report", "/nonexistent/dir"]).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("gmprof: error:"));
}
