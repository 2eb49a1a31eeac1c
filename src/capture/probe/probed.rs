//! The probed function of a launch: whether a kernel is selected, its PTX probed and loaded
//! through the driver's JIT (once per function handle), and whether a launch may run it.
//!
//! Layer 3, part of [`super`]: a launch the probed function cannot take (its `.reqntid`,
//! registers or shared memory) runs the original, and the reason is recorded.

use std::time::Instant;

use super::config::ProbeConfig;
use super::images::Source;
use super::sass::PTX_SOURCE;
use super::state::{Probed, State};
use crate::checked::callback::quietly;
use crate::checked::module::{ModuleApi, RawFunction, RawModule};
use crate::probe::host;
use crate::probe::select;
use crate::probe::{demangle, probe_ptx_with, ImageId, MapVia, ThreadLimits};
use crate::report::probe_kernels::ProbeKernel;

/// A kernel's detail when the kernel glob does not select it.
pub(super) const NOT_SELECTED: &str = "not selected";
/// A kernel's detail when the PTX path is off (`--probe-sass always`).
pub(super) const PTX_OFF: &str = "PTX probes off (--probe-sass always)";
/// Added to a kernel's detail (once) when a launch passed its arguments through `extra`.
pub(super) const EXTRA_UNPROBED: &str = "; a launch passing its arguments through `extra` ran unprobed";

/// Whether the probed function may be launched with `block`: its `.reqntid`/`.maxntid` and
/// the threads per block its registers allow.
pub(super) fn launchable(p: &Probed, block: [u32; 3]) -> std::result::Result<(), String> {
    p.limits.check(block).map_err(|e| format!("the probed function cannot take this launch: {e}"))?;
    let threads: u64 = block.iter().map(|&d| u64::from(d)).product();
    match p.max_threads {
        Some(max) if threads > max as u64 => Err(format!(
            "the probed function allows at most {max} threads per block (its registers) and the launch's block is {} \
             ({threads} threads)",
            select::dims(block)
        )),
        _ => Ok(()),
    }
}

/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub(super) const MAX_DYNAMIC_SHARED_SIZE_BYTES: i32 = 8;
/// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`.
pub(super) const PREFERRED_SHARED_MEMORY_CARVEOUT: i32 = 9;

/// Gives the probed function the original's opt-in to more dynamic shared memory than the
/// default 48 KB, and its carveout preference, when a launch asks for more than the probed
/// function allows. Programs set these on their function with `cuFuncSetAttribute` (Triton
/// does for its large tiles) and the probed function is a new one: without this its launch
/// would fail. An error leaves the launch to the original function.
pub(super) fn match_shared_memory(
    api: &ModuleApi,
    original: RawFunction,
    p: &Probed,
    shared: u32,
) -> std::result::Result<(), String> {
    if shared == 0 {
        return Ok(());
    }
    let allowed = api.function_attribute(p.func, MAX_DYNAMIC_SHARED_SIZE_BYTES);
    if allowed.is_some_and(|a| i64::from(a) >= i64::from(shared)) {
        return Ok(());
    }
    let wanted = api
        .function_attribute(original, MAX_DYNAMIC_SHARED_SIZE_BYTES)
        .map_or(i64::from(shared), |o| i64::from(o).max(i64::from(shared)));
    let wanted = i32::try_from(wanted).unwrap_or(i32::MAX);
    quietly(|| api.set_function_attribute(p.func, MAX_DYNAMIC_SHARED_SIZE_BYTES, wanted)).map_err(|e| {
        format!(
            "the probed function could not be given {shared} B of dynamic shared memory (the original's opt-in): {e}"
        )
    })?;
    if let Some(carveout) = api.function_attribute(original, PREFERRED_SHARED_MEMORY_CARVEOUT).filter(|c| *c >= 0) {
        // A preference only: the launch runs either way.
        let _ = quietly(|| api.set_function_attribute(p.func, PREFERRED_SHARED_MEMORY_CARVEOUT, carveout));
    }
    Ok(())
}

/// The probed function for `f`, probing and loading it on first use (its PTX chosen for a
/// first launch with `block`); `None` when `f` is not selected or cannot be probed
/// (recorded).
pub(super) fn prepare(
    api: &ModuleApi,
    config: &ProbeConfig,
    state: &mut State,
    f: RawFunction,
    no_args: bool,
    block: [u32; 3],
    ptx: bool,
) -> Option<Probed> {
    let key = f as usize;
    if !state.kernels.contains(key) {
        // The name selects the kernel and matches CUPTI's counts to it: read again once when
        // the driver fails to give it; a kernel still without one is not probed or counted
        // this time, and its next launch tries again (nothing is kept of it).
        let mangled = match quietly(|| api.function_name(f)) {
            Ok(name) => name,
            Err(first) => match quietly(|| api.function_name(f)) {
                Ok(name) => {
                    state.note(format!("{first}; it worked when tried again, so nothing was lost"));
                    name
                }
                Err(_) => {
                    state.note(format!(
                        "a kernel's name could not be read ({first}): a launch was neither probed nor counted"
                    ));
                    return None;
                }
            },
        };
        let kernel = demangle(&mangled);
        let selected = config.kernels.as_ref().is_none_or(|p| p.matches(&mangled) || p.matches(&kernel));
        let module = quietly(|| api.function_module(f)).map_err(|e| e.to_string());
        let seen = module.as_ref().ok().and_then(|m| state.modules.get(&(*m as usize)));
        let mut row = ProbeKernel {
            kernel,
            mangled,
            status: "not probed".into(),
            module: seen.and_then(|s| s.id.clone()),
            module_file: seen.and_then(|s| s.file.clone()),
            max_threads_per_block: quietly(|| api.function_attribute(f, 0)),
            ..ProbeKernel::default()
        };
        let mut probed = None;
        if !selected {
            row.detail = NOT_SELECTED.into();
        } else if !ptx {
            row.detail = PTX_OFF.into();
        } else {
            let started = Instant::now();
            let mut limits = None;
            match load_probed(api, config, state, module, &row.mangled, block, &mut limits, &mut row.module_file) {
                Ok((p, detail)) => {
                    probed = Some(p);
                    row.status = "probed".into();
                    row.source = Some(PTX_SOURCE.into());
                    row.detail = detail;
                    row.load_ms = Some(started.elapsed().as_secs_f64() * 1e3);
                }
                Err(reason) => row.detail = reason,
            }
            row.reqntid = limits.and_then(|l| l.reqntid).map(select::dims);
            row.maxntid = limits.and_then(|l| l.maxntid).map(select::dims);
        }
        state.probed.insert(key, probed);
        state.kernels.insert(key, row);
    }
    let row = state.kernels.get_mut(key)?;
    if row.detail == NOT_SELECTED {
        return None;
    }
    row.launches += 1;
    let p = state.probed.get(&key)?.as_ref()?;
    if no_args && config.maps == MapVia::Param {
        if !row.detail.ends_with(EXTRA_UNPROBED) {
            row.detail.push_str(EXTRA_UNPROBED);
        }
        return None;
    }
    Some(p.clone())
}

/// Probes and loads `mangled` of `module`; `limits` gets the kernel's thread limits in the
/// PTX it tried, if any, and `file` the file whose `.nv_fatbin` held a runtime kernel's PTX.
#[allow(clippy::too_many_arguments)]
pub(super) fn load_probed(
    api: &ModuleApi,
    config: &ProbeConfig,
    state: &mut State,
    module: std::result::Result<RawModule, String>,
    mangled: &str,
    block: [u32; 3],
    limits: &mut Option<ThreadLimits>,
    file: &mut Option<String>,
) -> std::result::Result<(Probed, String), String> {
    let from_dir;
    let from_host;
    let mut source = String::new();
    let module = match module {
        Ok(module) => module,
        // The runtime registered the kernel's fatbin: its PTX is in the file it came from.
        Err(e) => {
            let (path, texts) = state
                .host
                .find(mangled)
                .map_err(|why| format!("a runtime kernel (its handle has no module: {e}); {why}"))?;
            source = format!("; PTX from the {} section of {path} (a runtime-registered kernel)", host::NV_FATBIN);
            *file = Some(path);
            from_host = texts;
            return probe_and_load(api, config, &from_host, mangled, &source, limits);
        }
    };
    let texts = match state.modules.get(&(module as usize)).map(|m| &m.source) {
        Some(Source::Ptx(t)) => t,
        other => {
            let (why, cubin) = match other {
                Some(Source::NoPtx(why, cubin)) => (why.clone(), *cubin),
                _ => (
                    "module image not seen: loaded through the runtime's own registration, or before gmprof \
                     attached"
                        .to_string(),
                    None,
                ),
            };
            let env = |k: &str| std::env::var_os(k).or_else(|| (k == "USERNAME").then(login_name).flatten());
            let chosen = find_ptx(config.ptx_dir.as_deref(), file.as_deref(), mangled, cubin, block, &env)
                .map_err(|e| format!("{why}; {e}"))?;
            source = format!("; {}", chosen.how);
            *limits = Some(chosen.limits);
            from_dir = chosen.ptx;
            std::slice::from_ref(&from_dir)
        }
    };
    probe_and_load(api, config, texts, mangled, &source, limits)
}

/// The PTX of a kernel loaded from a cubin (`cubin`: the image's identity): first in
/// `--probe-ptx-dir` (by content, chosen as [`select::choose`] does), then beside the file
/// the module was loaded from, then in Triton's and Inductor's caches
/// ([`select::cache_dirs`]), where only a `.ptx` whose sibling `.cubin` is byte for byte the
/// loaded image is taken: a cache holds many kernels of one name (every graph numbers its
/// kernels from 0), and a name alone could pick another kernel's code.
pub(super) fn find_ptx(
    user_dir: Option<&std::path::Path>,
    module_file: Option<&str>,
    mangled: &str,
    cubin: Option<ImageId>,
    block: [u32; 3],
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> std::result::Result<select::Chosen, String> {
    let mut tried = Vec::new();
    if let Some(dir) = user_dir {
        let candidates = select::candidates(dir, mangled);
        if !candidates.is_empty() {
            return select::choose(&candidates, cubin, block);
        }
        tried.push(format!("no .ptx file under {} defines the kernel", dir.display()));
    }
    let beside = module_file.and_then(|f| std::path::Path::new(f).parent().map(|p| p.to_path_buf()));
    let dirs = beside.into_iter().chain(select::cache_dirs(env));
    let mut looked = 0;
    let mut searched = Vec::new();
    for dir in dirs {
        if !dir.is_dir() || searched.contains(&dir) {
            continue;
        }
        let candidates = select::named_candidates(&dir, mangled);
        looked += candidates.len();
        if let Some(c) = cubin.and_then(|id| candidates.iter().find(|c| c.cubin == Some(id))) {
            return Ok(select::Chosen {
                path: c.path.clone(),
                ptx: c.ptx.clone(),
                how: format!("PTX {}: its .cubin is the image the program loaded", c.path.display()),
                limits: c.limits,
            });
        }
        searched.push(dir);
    }
    let dirs: Vec<String> = searched.iter().map(|d| d.display().to_string()).collect();
    tried.push(if dirs.is_empty() {
        "no Triton or Inductor cache directory exists (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, \
         /tmp/torchinductor_<user>, ~/.triton/cache) and the module was not loaded from a file"
            .to_string()
    } else if cubin.is_none() {
        format!("the loaded image is not a cubin gmprof could identify, so the {looked} file(s) named {mangled}.ptx in {} cannot be matched to it", dirs.join(", "))
    } else {
        format!("none of the {looked} file(s) named {mangled}.ptx in {} has a .cubin identical to the loaded image", dirs.join(", "))
    });
    Err(tried.join("; "))
}

/// The name of the process's user in the password database (what Python's
/// `getpass.getuser` falls back to when no variable names the user).
fn login_name() -> Option<std::ffi::OsString> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: a zeroed passwd struct is a valid out-parameter.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and `buf` has the length given.
    let rc = unsafe { libc::getpwuid_r(libc::getuid(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so `pw_name` is a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(name.to_bytes().to_vec()))
}

/// Probes `mangled` in the first of `texts` that takes the probes, and loads the result.
fn probe_and_load(
    api: &ModuleApi,
    config: &ProbeConfig,
    texts: &[String],
    mangled: &str,
    source: &str,
    limits: &mut Option<ThreadLimits>,
) -> std::result::Result<(Probed, String), String> {
    let mut last = String::new();
    for text in texts {
        match probe_ptx_with(text, mangled, &config.probes, config.maps) {
            Ok(k) => {
                *limits = Some(k.limits);
                let m = quietly(|| api.load_ptx(&k.ptx)).map_err(|e| e.to_string())?;
                let func = quietly(|| api.function(m, &k.kernel)).map_err(|e| e.to_string())?;
                let mut globals = Vec::new();
                if config.maps == MapVia::Global {
                    for name in &k.report.map_params {
                        globals.push(quietly(|| api.global(m, name)).map_err(|e| e.to_string())?);
                    }
                }
                let unseen: Vec<String> = k.report.unprobed.iter().map(|(w, n)| format!("{n} {w}")).collect();
                let mut detail = format!("name match: {}{source}", k.matched);
                if !unseen.is_empty() {
                    detail.push_str(&format!("; not seen by the probes: {}", unseen.join(", ")));
                }
                let max_threads = api.function_attribute(func, 0);
                let probed = Probed { func, params: k.params, globals, limits: k.limits, max_threads };
                return Ok((probed, detail));
            }
            Err(e) => {
                if limits.is_none() {
                    *limits = select::limits_in(text, mangled);
                }
                last = e.to_string()
            }
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::path::PathBuf;

    const KERNEL: &str = "triton_poi_fused_add_mul_relu_0";

    /// A recorded Inductor cache: `triton/0/<hash>/` holding Triton's files for two
    /// autotuned variants of one kernel name.
    fn inductor() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ptx/inductor_cache")
    }

    fn variants() -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(inductor().join("triton/0"))
            .unwrap()
            .map(|e| e.unwrap().path().join(format!("{KERNEL}.cubin")))
            .collect();
        v.sort();
        v
    }

    fn id(path: &std::path::Path) -> ImageId {
        ImageId::of(&std::fs::read(path).unwrap())
    }

    #[test]
    fn inductor_kernels_are_found_in_its_cache_by_their_cubin() {
        let cache = inductor();
        let env = |k: &str| (k == "TORCHINDUCTOR_CACHE_DIR").then(|| OsString::from(&cache));
        let [a, b] = <[PathBuf; 2]>::try_from(variants()).unwrap();
        for cubin in [&a, &b] {
            let chosen = find_ptx(None, None, KERNEL, Some(id(cubin)), [128, 1, 1], &env).unwrap();
            assert_eq!(chosen.path, cubin.with_extension("ptx"));
            assert!(chosen.how.ends_with("its .cubin is the image the program loaded"), "{}", chosen.how);
        }
        // A cubin none of the cache's files is: refused, never chosen by name.
        let other = ImageId::of(b"not a kernel of this cache");
        let e = find_ptx(None, None, KERNEL, Some(other), [128, 1, 1], &env).unwrap_err();
        assert!(e.contains(&format!("none of the 2 file(s) named {KERNEL}.ptx in {}", cache.display())), "{e}");
        assert!(e.contains("has a .cubin identical to the loaded image"), "{e}");
        // An image gmprof could not identify cannot be matched either.
        let e = find_ptx(None, None, KERNEL, None, [128, 1, 1], &env).unwrap_err();
        assert!(e.contains("the loaded image is not a cubin gmprof could identify"), "{e}");
    }

    #[test]
    fn a_cubin_loaded_from_a_file_finds_its_sibling_ptx_without_any_cache() {
        let none = |_: &str| None;
        let b = variants().pop().unwrap();
        let file = b.display().to_string();
        let chosen = find_ptx(None, Some(&file), KERNEL, Some(id(&b)), [64, 1, 1], &none).unwrap();
        assert_eq!(chosen.path, b.with_extension("ptx"));
        let e = find_ptx(None, None, KERNEL, Some(id(&b)), [64, 1, 1], &none).unwrap_err();
        assert!(e.starts_with("no Triton or Inductor cache directory exists"), "{e}");
        // --probe-ptx-dir first, by content (the older route, with its name fallback).
        let user = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ptx/triton_cache");
        let chosen = find_ptx(Some(&user), None, KERNEL, Some(id(&b)), [64, 1, 1], &none).unwrap();
        assert!(chosen.path.starts_with(&user), "{}", chosen.path.display());
    }
}
