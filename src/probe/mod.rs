//! The PTX probe engine: instrumenting kernels nobody edited.
//!
//! ```text
//!  loaded image ──► fatbin ──► ptx ─────► prune ──────────► inject ──────────► driver JIT
//!  (PTX text,       PTX entries Module:    one kernel +     map params,         (cuModuleLoadData
//!   fatbin, cubin)  (zstd),     items,     the functions    prologue (map        of the probed PTX,
//!        │          cubin =     bodies,    and globals it   planning), hooks     in place of the
//!        │          SASS only   statements uses; name match at entry/exit and    original launch,
//!        │          → "not probed"   ▲     (exact / best)   instructions         if its block meets
//!        ▼                           │                ▲                          .reqntid/.maxntid)
//!  select: a cubin's PTX from        │            spec: built-in                      │
//!  --probe-ptx-dir, the .ptx whose ──┘            and TOML probes                     ▼
//!  .cubin is the loaded image                               decode: map buffer → records →
//!  (else by name, reported)                                 probes.csv, block tracks
//! ```
//!
//! Everything here is pure Rust and runs on the CPU: [`ptx`] parses a module into items and
//! statements, [`prune`](mod@prune) reduces it to one kernel, [`spec`] holds the probe specifications
//! (the built-in `block_sched`, `gmem_bytes`, `exec_count` and custom TOML ones),
//! [`inject`](mod@inject) rewrites the kernel and the device functions it calls ([`calls`]
//! passes the probes' state through calls, [`warp`] expands warp-level reductions), [`fatbin`]
//! finds PTX in an image, [`select`] picks
//! the PTX of a kernel loaded from a cubin (the `.ptx` whose sibling `.cubin` is the loaded
//! image) and holds launches to the kernel's `.reqntid`/`.maxntid`, and [`decode`] turns a
//! launch's map buffers into records. Catching module loads and launches is the job of the
//! driver side, `capture::probe`, which hears module loads and launches through CUPTI driver
//! callbacks and calls into this folder.
//!
//! This folder names only `model` and `error` of the crate: it sits beside the pipeline, and
//! the layers that talk to CUDA call into it.

pub mod calls;
pub mod decode;
pub mod fatbin;
pub mod host;
pub mod inject;

pub mod prune;
pub mod ptx;
pub mod sass;
pub mod select;
pub mod spec;
pub mod warp;

pub use inject::{inject, inject_with, InjectReport, MapVia};
pub use prune::{demangle, find_kernel, prune, NameMatch};
pub use ptx::Module;
pub use select::{ImageId, ThreadLimits};
pub use spec::{parse_probe_list, Layout, ProbeSpec};

/// A kernel ready to load: its probed PTX and how it was made.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbedKernel {
    /// The kernel's mangled name in the PTX.
    pub kernel: String,
    /// How the requested name matched.
    pub matched: NameMatch,
    /// The pruned, probed module.
    pub ptx: String,
    /// The kernel's own parameters (the map parameters come after them).
    pub params: usize,
    /// Its `.reqntid`/`.maxntid`, which every launch of the probed function must meet.
    pub limits: ThreadLimits,
    /// What injection did.
    pub report: InjectReport,
}

/// Why a kernel was not probed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotProbed {
    /// The image has no PTX (a cubin, or a fatbin with SASS only).
    #[error("SASS only: {0}")]
    SassOnly(String),
    /// The PTX has no kernel of that name (nor one close enough).
    #[error("no kernel named {0} in the module's PTX")]
    NotFound(String),
    /// The PTX did not parse.
    #[error("{0}")]
    Parse(String),
    /// Injection failed.
    #[error("{0}")]
    Inject(String),
}

/// Parses `ptx`, finds `kernel`, prunes and injects `probes`.
pub fn probe_ptx(ptx: &str, kernel: &str, probes: &[ProbeSpec]) -> Result<ProbedKernel, NotProbed> {
    probe_ptx_with(ptx, kernel, probes, MapVia::Param)
}

/// [`probe_ptx`], the maps found as `via` says.
pub fn probe_ptx_with(ptx: &str, kernel: &str, probes: &[ProbeSpec], via: MapVia) -> Result<ProbedKernel, NotProbed> {
    let module = Module::parse(ptx).map_err(|e| NotProbed::Parse(e.to_string()))?;
    let (name, matched) = find_kernel(&module, kernel).ok_or_else(|| NotProbed::NotFound(demangle(kernel)))?;
    let pruned = prune(&module, &name).ok_or_else(|| NotProbed::NotFound(name.clone()))?;
    let (params, limits) = pruned
        .kernels()
        .find(|k| k.name == name)
        .map_or((0, ThreadLimits::default()), |k| (k.params.len(), ThreadLimits::of(k)));
    let (probed, report) = inject_with(&pruned, &name, probes, via).map_err(|e| NotProbed::Inject(e.to_string()))?;
    let ptx = probed.to_ptx();
    // The probed kernel must keep the original's launch-shape directives: the driver holds
    // every launch to them.
    let kept = Module::parse(&ptx).ok().and_then(|m| m.kernels().find(|k| k.name == name).map(ThreadLimits::of));
    if kept != Some(limits) {
        return Err(NotProbed::Inject(format!("the probed kernel lost its thread limits ({limits} became {kept:?})")));
    }
    Ok(ProbedKernel { kernel: name, matched, ptx, params, limits, report })
}
