//! Chooses the CUDA/CUPTI bindings gmprof compiles against.
//!
//! When CUDA headers are found (see [`find_include_dirs`]), bindgen generates fresh bindings
//! from `wrapper.h` into `OUT_DIR`. Otherwise, or when generation fails (no libclang, headers
//! of a CUDA release without the range profiler), the bindings committed in
//! `src/sys/generated/` are used, so `cargo build`, `cargo test` and `cargo doc` work on a
//! machine with neither CUDA nor libclang.
//!
//! Environment:
//! - `GMPROF_CUDA_INCLUDE`: a directory holding `cuda.h` and `cupti.h` (or a `:`-separated list).
//! - `CUDA_HOME`, `CUDA_PATH`: a CUDA toolkit root; `/usr/local/cuda` is tried last.
//! - `GMPROF_USE_COMMITTED_BINDINGS=1`: skip bindgen even when headers are present.
//! - `GMPROF_BINDINGS_OUT_DIR`: also copy the generated files there (used by
//!   `scripts/regen-bindings.sh`; generation failure is then a hard error).
//!
//! Nothing is linked: libcupti and libcuda are loaded at run time.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// The files bindgen writes, and their committed twins.
const OUTPUTS: [&str; 2] = ["cupti.rs", "driver.rs"];

/// CUDA driver functions gmprof calls; everything else in cuda.h is left out.
const DRIVER_FUNCTIONS: &str = "cuInit|cuDriverGetVersion|cuDeviceGet|cuDeviceGetCount|\
cuDeviceGetName|cuDeviceGetAttribute|cuDevicePrimaryCtxRetain|cuDevicePrimaryCtxRelease(_v2)?|\
cuCtxGetCurrent|cuCtxSetCurrent|cuCtxGetDevice|cuCtxSynchronize|cuCtxGetId|cuGetErrorName|\
cuGetErrorString|cuMemAlloc_v2|cuMemFree_v2|cuMemsetD8_v2|cuMemcpyHtoD_v2|cuMemcpyDtoH_v2|\
cuFuncGetName|cuKernelGetName|cuFuncGetAttribute|cuFuncSetAttribute|cuFuncGetModule|cuLibraryGetModule|\
cuModuleLoadDataEx|cuModuleGetFunction|cuModuleGetGlobal_v2|cuMemcpyHtoDAsync_v2|cuMemsetD8Async|\
cuStreamSynchronize";

fn main() {
    for var in
        ["GMPROF_CUDA_INCLUDE", "CUDA_HOME", "CUDA_PATH", "GMPROF_USE_COMMITTED_BINDINGS", "GMPROF_BINDINGS_OUT_DIR"]
    {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let committed = manifest_dir.join("src/sys/generated");
    let regenerate_into = env::var_os("GMPROF_BINDINGS_OUT_DIR").map(PathBuf::from);

    let skip = env::var("GMPROF_USE_COMMITTED_BINDINGS").is_ok_and(|v| v == "1");
    let includes = if skip { None } else { find_include_dirs() };

    let generated = match &includes {
        Some(dirs) => match generate(&manifest_dir, dirs, &out_dir) {
            Ok(()) => true,
            Err(why) => {
                if regenerate_into.is_some() {
                    panic!("bindgen failed on {dirs:?}: {why}");
                }
                println!(
                    "cargo:warning=gmprof: bindgen failed on CUDA headers in {dirs:?} ({why}); \
                     using the committed CUDA 13.0 bindings"
                );
                false
            }
        },
        None => false,
    };

    if generated {
        for dir in includes.iter().flatten() {
            println!("cargo:rerun-if-changed={}", dir.join("cupti.h").display());
        }
        if let Some(dest) = regenerate_into {
            fs::create_dir_all(&dest).expect("create GMPROF_BINDINGS_OUT_DIR");
            for name in OUTPUTS {
                fs::copy(out_dir.join(name), dest.join(name)).expect("copy generated bindings");
            }
        }
        println!("cargo:rustc-cfg=gmprof_bindings=\"generated\"");
    } else {
        assert!(
            regenerate_into.is_none(),
            "GMPROF_BINDINGS_OUT_DIR is set but no CUDA headers were found: set GMPROF_CUDA_INCLUDE"
        );
        for name in OUTPUTS {
            let src = committed.join(name);
            println!("cargo:rerun-if-changed={}", src.display());
            fs::copy(&src, out_dir.join(name))
                .unwrap_or_else(|e| panic!("committed bindings {} are missing: {e}", src.display()));
        }
        println!("cargo:rustc-cfg=gmprof_bindings=\"committed\"");
    }
    println!("cargo:rustc-check-cfg=cfg(gmprof_bindings, values(\"generated\", \"committed\"))");
}

/// Include directories holding both `cuda.h` and the CUPTI headers, or `None`.
///
/// Covers the toolkit layout (`include` + `extras/CUPTI/include`), the per-target layout
/// (`targets/x86_64-linux/include`) and a flat directory such as pip's `nvidia/cu13/include`.
fn find_include_dirs() -> Option<Vec<PathBuf>> {
    if let Some(list) = env::var_os("GMPROF_CUDA_INCLUDE") {
        let dirs: Vec<PathBuf> = env::split_paths(&list).collect();
        return has_headers(&dirs).then_some(dirs);
    }
    let roots = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| env::var_os(v).map(PathBuf::from))
        .chain(std::iter::once(PathBuf::from("/usr/local/cuda")));
    for root in roots {
        let candidates = [
            vec![root.join("include"), root.join("extras/CUPTI/include")],
            vec![root.join("targets/x86_64-linux/include")],
            vec![root.join("targets/sbsa-linux/include")],
        ];
        for dirs in candidates {
            if has_headers(&dirs) {
                return Some(dirs);
            }
        }
    }
    None
}

fn has_headers(dirs: &[PathBuf]) -> bool {
    let found = |file: &str| dirs.iter().any(|d| d.join(file).is_file());
    found("cuda.h") && found("cupti.h") && found("cupti_range_profiler.h")
}

fn generate(manifest_dir: &Path, includes: &[PathBuf], out_dir: &Path) -> Result<(), String> {
    let wrapper = manifest_dir.join("wrapper.h");
    let base = || {
        let mut b = bindgen::Builder::default()
            .header(wrapper.to_string_lossy())
            .clang_args(["-x", "c++", "-std=c++17"])
            .clang_args(includes.iter().map(|d| format!("-I{}", d.display())))
            .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false, is_global: false })
            .derive_default(true)
            .derive_debug(true)
            .layout_tests(true)
            .generate_comments(false)
            .formatter(bindgen::Formatter::Prettyplease)
            .rust_target(bindgen::RustTarget::stable(82, 0).map_err(|e| e.to_string())?);
        b = b.raw_line("// Generated by bindgen from wrapper.h; regenerate with scripts/regen-bindings.sh.");
        Ok::<_, String>(b)
    };

    // CUPTI: every CUPTI function and the types they (and the driver calls below) need.
    let cupti = base()?
        .allowlist_function("cupti.*")
        .allowlist_type(
            "CUpti.*|CUresult|CUdevice|CUcontext|CUstream|CUdevice_attribute.*|CUuuid|CUdeviceptr(_v2)?|\
             CUfunction|CUmodule|CUlibrary|CUkernel|CUfunction_attribute.*|CUjit_option.*",
        )
        .allowlist_var("CUPTI_.*")
        .dynamic_library_name("CuptiLibrary")
        .dynamic_link_require_all(false)
        .generate()
        .map_err(|e| e.to_string())?;
    cupti.write_to_file(out_dir.join("cupti.rs")).map_err(|e| e.to_string())?;

    // The CUDA driver: only the functions gmprof calls; their types come from cupti.rs.
    let driver = base()?
        .allowlist_function(DRIVER_FUNCTIONS)
        .allowlist_recursively(false)
        .raw_line("use super::cupti::*;")
        .dynamic_library_name("DriverLibrary")
        .dynamic_link_require_all(false)
        .generate()
        .map_err(|e| e.to_string())?;
    driver.write_to_file(out_dir.join("driver.rs")).map_err(|e| e.to_string())?;
    Ok(())
}
