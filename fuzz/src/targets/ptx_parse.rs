//! `ptx_parse`: PTX text as the probe engine reads it from a loaded module, a fatbin's PTX
//! entry or `--probe-ptx-dir` ([`gmprof::probe::Module::parse`]), then what the engine does
//! with a parsed module short of injecting: printing it back and parsing that, finding and
//! pruning a kernel by name, its thread limits held against launches (and the choice among
//! `--probe-ptx-dir` candidates that uses them), the names a function references.

use std::path::PathBuf;

use gmprof::probe::select::{self, Candidate};
use gmprof::probe::{find_kernel, host, prune, Module, ThreadLimits};

/// Blocks of launches: a common one and the largest CUDA allows.
const BLOCKS: [[u32; 3]; 2] = [[128, 1, 1], [1024, 1, 1]];

/// Runs one input.
pub fn run(data: &[u8]) {
    // The engine reads PTX up to its first NUL, lossily (`probe::fatbin::classify`).
    let text = String::from_utf8_lossy(data.split(|&b| b == 0).next().unwrap_or(&[]));
    let Ok(module) = Module::parse(&text) else { return };
    let printed = module.to_ptx();
    let _ = Module::parse(&printed);
    for f in module.functions().take(4) {
        let limits = ThreadLimits::of(f);
        let _ = limits.to_string();
        for block in BLOCKS.into_iter().chain(limits.reqntid).chain(limits.maxntid) {
            let _ = limits.check(block);
        }
        let candidate =
            Candidate { path: PathBuf::from("k.ptx"), ptx: String::new(), cubin: None, limits, num_warps: Some(4) };
        let _ = select::choose(&[candidate], None, BLOCKS[0]);
        let _ = f.referenced();
        let _ = find_kernel(&module, &f.name);
        if let Some(pruned) = prune(&module, &f.name) {
            let _ = pruned.to_ptx();
        }
        let _ = select::limits_in(&text, &f.name);
        let _ = host::defines(&text, &f.name);
    }
    // A name the module may not have: the best-match path.
    let _ = find_kernel(&module, "_Z6kernelPfi");
}
