//! Layer 1: the generated FFI (the crate's `cupti-sys`).
//!
//! Raw bindgen output for the CUDA driver and CUPTI headers named in `wrapper.h`, nothing
//! more. Functions are not linked: [`cupti::CuptiLibrary`] and [`driver::DriverLibrary`]
//! hold one `Result<fn, libloading::Error>` field per symbol, filled when the library is
//! loaded at run time. The checked layer ([`crate::checked`]) reads those fields directly,
//! so a symbol missing from an older CUPTI is an error, never a panic.
//!
//! The bindings come from bindgen at build time when CUDA headers are present, or from the
//! copy committed in `src/sys/generated/` (CUDA 13.0), which `scripts/regen-bindings.sh`
//! regenerates and CI checks for drift. The exceptions are [`nvtx`] (four NVTX ABI structures)
//! and [`memset`] and [`memcpy`] (the memset and 1D memcpy callbacks' parameters), declared by
//! hand because their headers are not in the pinned header set.

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    unused_imports,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn,
    missing_docs,
    rustdoc::all
)]

/// CUPTI types and functions, plus the CUDA driver types they use.
pub mod cupti {
    include!(concat!(env!("OUT_DIR"), "/cupti.rs"));
}

/// The few CUDA driver functions gmprof calls.
pub mod driver {
    include!(concat!(env!("OUT_DIR"), "/driver.rs"));
}

pub mod memcpy;
pub mod memset;
pub mod nvtx;
