//! What the program loaded: a module's image read back (PTX text, a fatbin, a cubin) and
//! identified, so a launched function's PTX can be found.
//!
//! Layer 3, part of [`super`].

use super::*;

/// A module gmprof saw loaded.
pub(super) struct Loaded {
    pub(super) source: Source,
    /// Its image's kind and [`ImageId`] (`cubin 31240 B #9f1c2a3b4c5d6e7f`), when its bytes
    /// could be read.
    pub(super) id: Option<String>,
    /// The file it was loaded from.
    pub(super) file: Option<String>,
}

pub(super) enum Source {
    Ptx(Vec<String>),
    /// Why there is no PTX, and the identity of a cubin image (its PTX may lie in the PTX
    /// directory beside an identical `.cubin`).
    NoPtx(String, Option<ImageId>),
}

pub(super) const CUBIN: &str = "SASS only: the module was loaded from a cubin";
/// A cubin whose headers claim more than this is not identified (a sanity bound).
pub(super) const MAX_CUBIN: usize = 1 << 30;

/// Reads what an image pointer points at.
///
/// # Safety
/// `image` must point at a PTX string, a fatbin, a fatbin wrapper or a cubin, as the driver
/// accepts them.
pub(super) unsafe fn read_image(image: *const c_void) -> Loaded {
    // SAFETY: every accepted image is at least 4 bytes.
    let magic = unsafe { (image as *const u32).read_unaligned() };
    let image = if magic == fatbin::FATBIN_WRAPPER_MAGIC {
        // SAFETY: the wrapper is {int magic; int version; const void* data; ...}.
        unsafe { *((image as *const u8).add(8) as *const *const c_void) }
    } else {
        image
    };
    // SAFETY: a fatbin has a 16-byte header, a cubin a 64-byte ELF header.
    let head = unsafe { std::slice::from_raw_parts(image as *const u8, 16) };
    let bytes: &[u8] = if let Some(len) = fatbin::fatbin_len(head) {
        // SAFETY: the fatbin header gives its size.
        unsafe { std::slice::from_raw_parts(image as *const u8, len) }
    } else if head.starts_with(b"\x7fELF") {
        // SAFETY: a cubin image is a whole ELF file: its 64-byte header, then its header
        // tables and sections, which `elf_extent` bounds from what it has read.
        let whole = unsafe {
            let elf = |len| std::slice::from_raw_parts(image as *const u8, len);
            fatbin::elf_extent(elf(64))
                .filter(|&tables| tables <= MAX_CUBIN)
                .and_then(|tables| fatbin::elf_extent(elf(tables)))
                .filter(|&len| len <= MAX_CUBIN)
                .map(elf)
        };
        match whole {
            Some(elf) => elf,
            None => return Loaded { source: Source::NoPtx(CUBIN.into(), None), id: None, file: None },
        }
    } else {
        // SAFETY: otherwise the driver takes the image as NUL-terminated PTX text.
        unsafe { std::ffi::CStr::from_ptr(image as *const std::ffi::c_char) }.to_bytes()
    };
    loaded(bytes)
}

/// A whole image (read from memory or a file): what it holds, and its kind and identity
/// (a cubin's is also how its PTX is found).
pub(super) fn loaded(bytes: &[u8]) -> Loaded {
    let image = ImageId::of(bytes);
    let (kind, source) = match fatbin::classify(bytes) {
        Ok(Image::Ptx(t)) => ("PTX", Source::Ptx(vec![t])),
        Ok(Image::Fatbin(entries)) => {
            let (ptx, problems) = fatbin::ptx_of(&entries);
            let source = if ptx.is_empty() {
                let why = if problems.is_empty() { "no PTX entry".to_string() } else { problems.join("; ") };
                Source::NoPtx(format!("SASS only: the fatbin has {why}"), None)
            } else {
                Source::Ptx(ptx)
            };
            ("fatbin", source)
        }
        Ok(Image::Elf) => ("cubin", Source::NoPtx(CUBIN.into(), Some(image))),
        Ok(Image::Unknown) => ("image", Source::NoPtx("the module image is of an unknown kind".into(), None)),
        Err(e) => ("image", Source::NoPtx(e.to_string(), None)),
    };
    Loaded { source, id: Some(format!("{kind} {image}")), file: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cubin_file_is_identified_as_its_sibling_candidate_is() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ptx/triton_cache");
        let candidates = select::candidates(&dir, "triton_poi_fused_add_mul_relu_0");
        assert_eq!(candidates.len(), 2);
        let mut ids = Vec::new();
        for c in &candidates {
            // What cuModuleLoad's hook keeps for the file it read back.
            let bytes = std::fs::read(c.path.with_extension("cubin")).unwrap();
            let Loaded { source: Source::NoPtx(why, id), id: shown, .. } = loaded(&bytes) else {
                panic!("a cubin has no PTX")
            };
            assert_eq!((why.as_str(), id), (CUBIN, c.cubin));
            // probe_kernels.csv's `module`: the kind, the length and the hash.
            assert_eq!(shown, Some(format!("cubin {} B #{:016x}", bytes.len(), id.unwrap().hash)));
            ids.push(shown);
            let chosen = select::choose(&candidates, id, [64, 1, 1]).unwrap();
            assert_eq!(chosen.path, c.path);
            assert_eq!(chosen.limits, c.limits);
        }
        // The two autotuned variants of one name are two modules.
        assert_ne!(ids[0], ids[1]);
        let Loaded { source: Source::Ptx(texts), id, .. } = loaded(candidates[0].ptx.as_bytes()) else {
            panic!("PTX text is PTX")
        };
        assert_eq!(texts.len(), 1);
        assert!(id.is_some_and(|id| id.starts_with(&format!("PTX {} B #", candidates[0].ptx.len()))));
        let fatbin = std::fs::read(dir.join("../probe_kernels_default.fatbin")).unwrap();
        let Loaded { source: Source::Ptx(_), id, .. } = loaded(&fatbin) else { panic!("the fatbin has PTX") };
        assert!(id.is_some_and(|id| id.starts_with("fatbin ")));
    }
}
