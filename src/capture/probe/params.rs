//! What the probe engine reads and writes of the driver calls it hooks: the parameter
//! structures of launches, loads, stream-capture ends, graph instantiations and graph
//! launches; the rewrite of a launch into its probed twin ([`substitute`]); and the tally of
//! the engine's own transfers ([`internal_transfers`]).
//!
//! The bottom of the folder with `config` and `launch`: imports only `state`'s [`Probed`]
//! and `checked`/`sys` types; `engine` and `graph_hooks` import it.

use std::collections::BTreeMap;
use std::ffi::c_void;

use parking_lot::Mutex;

use super::state::Probed;
use crate::checked::callback::RawDriverCall;
use crate::checked::module::RawFunction;
use crate::model::TransferKind;
use crate::sys::cupti::CUstream;

/// The probe engine's own transfers (zeroing, setting and reading map buffers), by kind and
/// size. They run inside CUPTI's callbacks, where CUPTI reports no API call for them, so
/// their activity records would be "unlaunched" rows of the user's transfer table; the
/// correlator leaves out as many matching records and counts them
/// (`profiler_internal_transfers`).
static INTERNAL_TRANSFERS: Mutex<BTreeMap<(TransferKind, u64), u64>> = Mutex::new(BTreeMap::new());

pub(super) fn note_internal(kind: TransferKind, bytes: usize) {
    *INTERNAL_TRANSFERS.lock().entry((kind, bytes as u64)).or_insert(0) += 1;
}

/// The probe engine's own transfers so far: `(kind, bytes, count)`; `take` empties the
/// tally (a session's finish takes its own).
pub fn internal_transfers(take: bool) -> Vec<(TransferKind, u64, u64)> {
    let mut tally = INTERNAL_TRANSFERS.lock();
    let list = tally.iter().map(|(&(k, b), &n)| (k, b, n)).collect();
    if take {
        tally.clear();
    }
    list
}

/// `cuLaunchKernel_params` (and `_ptsz`).
#[repr(C)]
pub(super) struct LaunchParams {
    pub(super) f: RawFunction,
    pub(super) grid: [u32; 3],
    pub(super) block: [u32; 3],
    pub(super) shared: u32,
    pub(super) stream: CUstream,
    pub(super) kernel_params: *mut *mut c_void,
    pub(super) extra: *mut *mut c_void,
}

/// `CUlaunchConfig`.
#[repr(C)]
pub(super) struct LaunchConfig {
    pub(super) grid: [u32; 3],
    pub(super) block: [u32; 3],
    pub(super) shared: u32,
    pub(super) stream: CUstream,
    pub(super) attrs: *mut c_void,
    pub(super) num_attrs: u32,
}

/// `cuLaunchKernelEx_params` (and `_ptsz`).
#[repr(C)]
pub(super) struct LaunchExParams {
    pub(super) config: *const LaunchConfig,
    pub(super) f: RawFunction,
    pub(super) kernel_params: *mut *mut c_void,
    pub(super) extra: *mut *mut c_void,
}

/// The first two fields of every module/library load's parameters: the out-handle and the
/// image (`cuModuleLoadData`, `...DataEx`, `...FatBinary`, `cuLibraryLoadData`), or the file
/// name (`cuModuleLoad`, `cuLibraryLoadFromFile`).
#[repr(C)]
pub(super) struct LoadParams {
    pub(super) handle: *mut *mut c_void,
    pub(super) image: *const c_void,
}

/// `cuStreamEndCapture_params` (and `_ptsz`).
#[repr(C)]
pub(super) struct EndCaptureParams {
    pub(super) stream: CUstream,
    pub(super) graph: *mut *mut c_void,
}

/// The first two fields of every `cuGraphInstantiate*` call's parameters.
#[repr(C)]
pub(super) struct InstantiateParams {
    pub(super) exec: *mut *mut c_void,
    pub(super) graph: *mut c_void,
}

/// `cuGraphLaunch_params` (and `_ptsz`).
#[repr(C)]
pub(super) struct GraphLaunchParams {
    pub(super) exec: *mut c_void,
    pub(super) stream: CUstream,
}

/// Rewrites the enter of launch `call` (`cuLaunchKernel` when `plain`, else
/// `cuLaunchKernelEx`) to run `probed` with the maps at `ptrs`: the function handle always,
/// and with maps in parameters the argument array, which becomes the program's `params`
/// arguments followed by a pointer to each map address. Returns that array: it must live
/// until the call's exit.
///
/// # Safety
/// `call` is the enter of a hooked launch of that kind, whose parameters the callback may
/// rewrite; `args` is the program's argument array, with at least `probed.params` entries
/// when `via_params`; `ptrs` lives until the call's exit.
pub(super) unsafe fn substitute(
    call: &RawDriverCall,
    plain: bool,
    probed: &Probed,
    args: *mut *mut c_void,
    ptrs: &[u64],
    via_params: bool,
) -> Vec<*mut c_void> {
    let mut new_args: Vec<*mut c_void> = Vec::with_capacity(probed.params + ptrs.len());
    for i in (0..probed.params).filter(|_| via_params) {
        // SAFETY: the kernel has `params` parameters, so the program's array has as many
        // entries (the caller's contract).
        new_args.push(unsafe { *args.add(i) });
    }
    new_args.extend(ptrs.iter().map(|p| p as *const u64 as *mut c_void));
    if plain {
        // SAFETY: rewriting the call's own parameter struct on enter (the caller's contract).
        let p = unsafe { &mut *(call.params as *mut LaunchParams) };
        p.f = probed.func;
        if via_params {
            p.kernel_params = new_args.as_mut_ptr();
        }
    } else {
        // SAFETY: as above, for cuLaunchKernelEx.
        let p = unsafe { &mut *(call.params as *mut LaunchExParams) };
        p.f = probed.func;
        if via_params {
            p.kernel_params = new_args.as_mut_ptr();
        }
    }
    new_args
}
