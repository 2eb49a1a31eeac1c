//! `probe_spec`: a custom probe's TOML spec (`gmprof run --probe my.toml`:
//! [`ProbeSpec::from_toml`]), injected into real kernels beside a built-in probe
//! ([`gmprof::probe::probe_ptx`]), and a map buffer decoded with it ([`decode`]). The input
//! is the TOML, then a NUL byte, then the map's bytes.

use gmprof::probe::decode::{self, LaunchInfo};
use gmprof::probe::{probe_ptx, ProbeSpec};

/// nvcc's PTX of `tests/data/ptx/probe_kernels.cu` (the seeds of `ptx_parse` hold it too).
const PTX: &str = include_str!("../../../tests/data/ptx/probe_kernels_sm90.ptx");
/// A kernel of it with a loop and atomics, and one that calls a device function.
const KERNELS: [&str; 2] = ["_Z9histogramPjPKhi", "_Z5mixerPfPK6float4i"];

/// Runs one input.
pub fn run(data: &[u8]) {
    let (spec, map) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(spec) else { return };
    let Ok(spec) = ProbeSpec::from_toml(text) else { return };
    for kernel in KERNELS {
        let _ = probe_ptx(PTX, kernel, std::slice::from_ref(&spec));
    }
    if let Ok(sched) = ProbeSpec::builtin("block_sched") {
        if sched.name != spec.name {
            let _ = probe_ptx(PTX, KERNELS[0], &[sched, spec.clone()]);
        }
    }
    // The map of a launch of as many one-thread blocks as it holds records.
    let (_, size) = spec.record_layout();
    let launch =
        LaunchInfo { correlation_id: 7, kernel: "k".into(), blocks: (map.len() / size.max(1)) as u64, threads: 1 };
    let map = super::head(map, decode::map_bytes(&spec, &launch));
    if let Ok(rows) = decode::rows(&spec, &launch, map) {
        let _ = decode::write_csv(&rows, std::io::sink());
    }
    for f in &spec.fields {
        let _ = decode::field_total(&spec, map, &f.name);
    }
    let _ = decode::block_spans(map);
}
