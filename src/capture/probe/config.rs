//! What to probe: [`ProbeConfig`], and when CUPTI's SASS metrics count a kernel instead
//! ([`SassUse`]).
//!
//! The bottom of the folder with `launch`: imports only `crate::probe`; `state`, `probed`,
//! `sass` and `engine` import it, and `capture/probe/mod.rs` re-exports both items.

use crate::probe::{MapVia, ProbeSpec};

/// What to probe.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    /// The probes.
    pub probes: Vec<ProbeSpec>,
    /// Kernel name glob (matched against the mangled and the demangled name); all if `None`.
    pub kernels: Option<glob::Pattern>,
    /// Probe only while an NVTX range matching this glob is open; always if `None`.
    pub range: Option<glob::Pattern>,
    /// Launches per kernel whose every record goes to probe_records.csv.
    pub record_launches: usize,
    /// A directory searched (recursively) for `.ptx` files defining a kernel whose module
    /// has no PTX: Triton loads cubins but keeps each kernel's PTX in its cache
    /// (`~/.triton/cache`), so pointing this there probes Triton kernels.
    pub ptx_dir: Option<std::path::PathBuf>,
    /// How probed kernels find their maps: extra parameters, or module variables gmprof
    /// sets before each launch (the launch's arguments untouched).
    pub maps: MapVia,
    /// When CUPTI's SASS metrics count a kernel instead ([`SassUse`]).
    pub sass: SassUse,
    /// Launches of each kernel function the SASS path counts, at most (`None`: every one).
    /// The later launches run patched and unflushed: no wait, no counts.
    pub sass_launches: Option<u64>,
    /// A file the first flush of each kernel counted through SASS metrics is appended to,
    /// as JSON lines (recorded data for the CPU tests).
    pub sass_dump: Option<std::path::PathBuf>,
    /// Why the SASS path may not run in this session (its mode), if so.
    pub sass_blocked: Option<String>,
    /// Device memory the maps of kernels probed inside CUDA graphs may take, in all, bytes
    /// (allocated before captures, never freed); 0: kernels launched during a stream
    /// capture are not probed.
    pub graph_pool_bytes: usize,
}

/// [`ProbeConfig::graph_pool_bytes`] unless set: 256 MiB.
pub const DEFAULT_GRAPH_POOL_BYTES: usize = 256 << 20;

/// When the SASS path counts a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SassUse {
    /// Kernels the PTX path cannot probe (no PTX, or it failed).
    #[default]
    Auto,
    /// Every selected kernel; the PTX path is off.
    Always,
    /// Never: kernels without PTX are listed as not probed.
    Never,
}
