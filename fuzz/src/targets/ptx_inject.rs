//! `ptx_inject`: the probe engine end to end on PTX text
//! ([`gmprof::probe::probe_ptx_with`]: parse, find the kernel, prune, inject, print, parse
//! again), with the built-in probes alone and together and both ways of finding the maps.

use gmprof::probe::{probe_ptx, probe_ptx_with, MapVia, Module, ProbeSpec};

fn builtins() -> &'static [ProbeSpec] {
    static PROBES: std::sync::OnceLock<Vec<ProbeSpec>> = std::sync::OnceLock::new();
    PROBES.get_or_init(|| {
        ["block_sched", "gmem_bytes", "exec_count"]
            .iter()
            .map(|n| ProbeSpec::builtin(n).expect("the built-in probes parse"))
            .collect()
    })
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data.split(|&b| b == 0).next().unwrap_or(&[]));
    let Ok(module) = Module::parse(&text) else { return };
    let kernels: Vec<String> = module.kernels().map(|k| k.name.clone()).take(2).collect();
    let probes = builtins();
    for kernel in &kernels {
        for via in [MapVia::Param, MapVia::Global] {
            let _ = probe_ptx_with(&text, kernel, probes, via);
        }
        for probe in probes {
            let _ = probe_ptx(&text, kernel, std::slice::from_ref(probe));
        }
    }
}
