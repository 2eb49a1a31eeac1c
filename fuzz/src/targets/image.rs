//! `image`: a module image as the probe engine reads it at a module load
//! (`capture::probe::images`): how many bytes it spans (a fatbin's header, a cubin's ELF
//! tables and sections, else NUL-terminated text), what it is and the PTX it holds
//! ([`fatbin::classify`], [`fatbin::parse_fatbin`] with its zstd payloads, [`fatbin::ptx_of`]),
//! its identity ([`ImageId`]), and the fatbins of a `.nv_fatbin` section
//! ([`host::fatbins_in`]).

use gmprof::probe::fatbin::{self, Image};
use gmprof::probe::{host, ImageId};

/// `capture::probe::images::MAX_CUBIN`: a cubin whose headers claim more is not read.
const MAX_CUBIN: usize = 1 << 30;

/// Runs one input.
pub fn run(data: &[u8]) {
    // `read_image`: the bytes the image spans, as far as this input has them (the engine
    // reads the program's memory there).
    let head = super::head(data, 16);
    let bytes: &[u8] = if let Some(len) = fatbin::fatbin_len(head) {
        super::head(data, len)
    } else if head.starts_with(b"\x7fELF") {
        let whole = fatbin::elf_extent(super::head(data, 64))
            .filter(|&tables| tables <= MAX_CUBIN)
            .and_then(|tables| fatbin::elf_extent(super::head(data, tables)))
            .filter(|&len| len <= MAX_CUBIN);
        match whole {
            Some(len) => super::head(data, len),
            None => &[],
        }
    } else {
        data.split(|&b| b == 0).next().unwrap_or(&[])
    };
    // `loaded`: the identity, the kind and the PTX.
    let _ = ImageId::of(bytes).to_string();
    if let Ok(Image::Fatbin(entries)) = fatbin::classify(bytes) {
        let (ptx, problems) = fatbin::ptx_of(&entries);
        let _ = (ptx.len(), problems.join("; "));
    }
    // The runtime's fatbins, as a `.nv_fatbin` section lays them.
    for one in host::fatbins_in(data) {
        if let Ok(entries) = fatbin::parse_fatbin(one) {
            let _ = fatbin::ptx_of(&entries);
        }
    }
}
