//! Probing at run time: the driver side of the probe engine (`src/probe/`).
//!
//! **Mechanism.** Everything goes through CUPTI driver-API callbacks on the one subscriber
//! the hub pins for an injected gmprof, not through an exported shim: CUPTI's callbacks fire
//! inside the driver's own entry points, so they see calls however the program reached them
//! (directly, through the runtime, or through pointers from `cuGetProcAddress`), where an
//! `LD_PRELOAD` shim misses every call made through `cuGetProcAddress` (which is how the
//! CUDA 12/13 runtime calls the driver).
//!
//! - Module loads (`cuModuleLoadData`, `cuModuleLoadDataEx`, `cuModuleLoadFatBinary`,
//!   `cuLibraryLoadData`, and from files `cuModuleLoad`, `cuLibraryLoadFromFile`, which is
//!   how PyTorch's static Triton launcher loads Triton's cubins): on exit, the image the
//!   program passed (or the file, read back) is classified (PTX text, fatbin, cubin) and kept
//!   by its module (a library's module through `cuLibraryGetModule`) with its identity
//!   ([`ImageId`]: probe_kernels.csv's `module`, and how a cubin's PTX is found in
//!   `--probe-ptx-dir`).
//! - Kernel launches (`cuLaunchKernel`, `cuLaunchKernelEx` and their per-thread-stream
//!   variants): on enter, a selected kernel (name pattern, open range) is looked up by
//!   `cuFuncGetModule`; its module's PTX is pruned and probed (cached per function), loaded
//!   with `cuModuleLoadDataEx` (the driver JIT: no ptxas at run time), map buffers are
//!   allocated and zeroed on the launch's stream, and the callback rewrites the call's
//!   parameter struct: `f` becomes the probed function and `kernelParams` the original
//!   arguments followed by the map addresses. On exit, gmprof waits for the stream, reads
//!   and frees the maps and decodes them.
//!
//! - Runtime-registered kernels (every `<<<>>>` launch of a program built with nvcc: the
//!   runtime registers its fatbins through a path of its own, and the kernel's handle has
//!   no module): the PTX comes from the `.nv_fatbin` section of the files the process
//!   mapped, its executable first ([`crate::probe::host`]; files are read on first need,
//!   at most `images::HOST_FATBIN_MAX` (256 MB) of section each).
//!
//! A kernel whose PTX cannot be found (a cubin, a SASS-only fatbin, a library whose
//! fatbins hold no PTX for it) runs untouched and is listed as not probed, with the reason. Every loaded function is one
//! [`ProbeKernel`]; probe_kernels.csv has a row per variant of a kernel name (module image,
//! thread limits: [`crate::report::probe_kernels`]). gmprof's own driver calls run
//! [`quietly`], so neither the hook nor the profiler hears them.
//!
//! # Files
//!
//! This `mod.rs` only declares the folder's files and re-exports their public items (the
//! crate names them as `capture::probe::X`); no file imports it. Bottom up: `config` (what to
//! probe) and `launch` (how a launch is named), `images` (what the program loaded), `sass`
//! (the SASS metrics path), `graphs` (the bookkeeping of probes inside CUDA graphs), `state`
//! (the engine's process-wide state), `params` (the hooked calls' parameters and a launch's
//! rewrite), `probed` (a function's probed twin), `graph_hooks` (probing launches during
//! stream captures, and reading their maps at the end), and `engine` (the driver hook,
//! which composes them).
//!
//! [`ImageId`]: crate::probe::ImageId
//! [`ProbeKernel`]: crate::report::probe_kernels::ProbeKernel
//! [`quietly`]: crate::checked::callback::quietly

mod config;
mod engine;
mod graph_hooks;
mod graphs;
mod images;
mod launch;
mod params;
mod probed;
mod sass;
mod sass_graphs;
mod state;

pub use self::config::{ProbeConfig, SassUse, DEFAULT_GRAPH_POOL_BYTES};
pub use self::engine::{
    finish_sass, install, on_range, outputs, ProbeOutputs, SassOutputs, HOOKED, MAX_TIMELINE_SPANS, SASS_HOT_TOP,
};
pub use self::graph_hooks::finish_graphs;
pub use self::params::internal_transfers;
pub use self::sass::{OtherCounts, PTX_SOURCE, SASS_SOURCE};
pub use crate::report::probe_kernels::{KernelTable, ProbeKernel};
pub use crate::report::probe_trace::BLOCK_SCHED_REGION;
pub use crate::report::probes::{ProbeTotal, ProbedLaunch as LaunchRecord};
