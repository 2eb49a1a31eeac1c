//! The cubins of the modules loaded while gmprof watches (CUPTI's module-load callback), kept
//! for the source lines of sampled or counted instructions (`cuptiGetSassToSourceCorrelation`
//! needs the cubin). Shared by the probes' SASS path and PC sampling: CUPTI's subscriber takes
//! one module handler, set once by [`watch`].

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::checked::library::Cupti;
use crate::checked::sass_metrics;

/// The kept cubins.
#[derive(Default)]
pub(crate) struct CubinStore {
    pub(crate) cubins: Vec<Vec<u8>>,
    bytes: usize,
    /// Modules not kept (over [`CUBIN_BYTES_MAX`]).
    pub(crate) skipped: u64,
}

/// Bytes of cubins kept at most.
pub(crate) const CUBIN_BYTES_MAX: usize = 1 << 30;

pub(crate) static CUBINS: Mutex<CubinStore> = Mutex::new(CubinStore { cubins: Vec::new(), bytes: 0, skipped: 0 });

/// The outcome of the first [`watch`], for later callers.
static WATCHING: Mutex<Option<Result<(), String>>> = Mutex::new(None);

/// CUPTI's module-load callback: keeps the cubin.
pub(crate) fn on_module(cubin: &[u8]) {
    let mut store = CUBINS.lock();
    if store.bytes + cubin.len() > CUBIN_BYTES_MAX {
        store.skipped += 1;
        return;
    }
    store.bytes += cubin.len();
    store.cubins.push(cubin.to_vec());
}

/// Keeps the cubin of every module loaded from now on (once per process; later calls return
/// the first one's outcome). Needs an injected gmprof (`gmprof run`).
pub(crate) fn watch() -> Result<(), String> {
    let mut watching = WATCHING.lock();
    watching
        .get_or_insert_with(|| super::hub::watch_modules(std::sync::Arc::new(on_module)).map_err(|e| e.to_string()))
        .clone()
}

/// What [`annotate`] found: file and line, and SASS text, by `(function, cubin CRC, offset)`;
/// and what to say of the lookups that failed (a kept cubin that could not be identified,
/// [`crc_index`]; source-line lookups).
pub(crate) type Annotations =
    (HashMap<(String, u64, u64), (String, u32)>, HashMap<(String, u64, u64), String>, Vec<String>);

/// Each kept cubin's index by CUPTI's CRC of it (the first cubin of a CRC), and, when
/// `cuptiGetCubinCrc` failed for some, what to say: their instructions get no source line.
pub(crate) fn crc_index(cupti: &Cupti, store: &CubinStore) -> (HashMap<u64, usize>, Option<String>) {
    let mut by_crc: HashMap<u64, usize> = HashMap::new();
    let (mut failed, mut first) = (0, None);
    for (i, cubin) in store.cubins.iter().enumerate() {
        match sass_metrics::cubin_crc(cupti, cubin) {
            Ok(crc) => {
                by_crc.entry(crc).or_insert(i);
            }
            Err(e) => {
                failed += 1;
                first.get_or_insert(e);
            }
        }
    }
    let note = first.map(|e| {
        format!(
            "{failed} of {} kept cubin(s) could not be identified ({e}): their instructions have no source line",
            store.cubins.len()
        )
    });
    (by_crc, note)
}

/// The file and line of each `(function, cubin CRC, offset)` of `wanted` where a kept cubin of
/// that CRC has line information for it, and its SASS text where `nvdisasm` is found
/// ([`super::sass_text`]).
pub(crate) fn annotate(cupti: &Cupti, wanted: &[(String, u64, u64)]) -> Annotations {
    let store = CUBINS.lock();
    let (by_crc, note) = crc_index(cupti, &store);
    let mut notes: Vec<String> = note.into_iter().collect();
    let text = match super::sass_text::nvdisasm() {
        Some(tool) => {
            let cubins: HashMap<u64, &[u8]> = by_crc.iter().map(|(c, i)| (*c, store.cubins[*i].as_slice())).collect();
            super::sass_text::instructions(&tool, &cubins, wanted)
        }
        None => HashMap::new(),
    };
    let mut out = HashMap::new();
    let (mut asked, mut failed, mut first) = (0, 0, None);
    for (function, crc, pc) in wanted {
        let (Some(&i), Ok(pc32)) = (by_crc.get(crc), u32::try_from(*pc)) else { continue };
        asked += 1;
        match sass_metrics::source_line(cupti, &store.cubins[i], function, pc32) {
            Ok(Some(at)) => {
                out.insert((function.clone(), *crc, *pc), at);
            }
            Ok(None) => {}
            Err(e) => {
                failed += 1;
                first.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first {
        notes.push(format!(
            "{failed} of {asked} source-line lookup(s) failed ({e}): those instructions have no source line (a cubin \
             built without -lineinfo may answer so)"
        ));
    }
    (out, text, notes)
}
