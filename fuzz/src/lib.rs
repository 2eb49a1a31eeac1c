//! gmprof's fuzz targets: every parser that runs inside the profiled program or reads a
//! user's file, driven by libFuzzer through cargo-fuzz (`fuzz_targets/`, one binary each).
//!
//! Each target is a plain function of the input bytes in [`targets`], so the regression
//! tests of the main package (`tests/fuzz_regressions.rs`) run the inputs that once crashed
//! through the very same code without libFuzzer. [`alloc_limit`] is the fuzz binaries' global
//! allocator: it aborts on one allocation over [`alloc_limit::MAX_ONE`] or more than
//! [`alloc_limit::MAX_LIVE`] live bytes, so unbounded allocation is a crash libFuzzer saves
//! (libFuzzer's own `-malloc_limit_mb` needs a sanitizer's allocator hooks, which a
//! `--sanitizer none` build lacks).

pub mod alloc_limit;
pub mod targets;

#[global_allocator]
static ALLOCATOR: alloc_limit::Limited = alloc_limit::Limited;
