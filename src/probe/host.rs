//! The PTX of kernels the CUDA runtime registers: the `.nv_fatbin` sections of the
//! program's own executable and shared libraries.
//!
//! A C/CUDA program built with nvcc (llm.c, for one) never loads a module itself: nvcc puts
//! each translation unit's fatbin into the object's `.nv_fatbin` section, and at start-up the
//! runtime (statically linked, as nvcc links it by default) registers those fatbins with the
//! driver through a path of its own that no public driver entry point, and so no CUPTI
//! callback, sees. The kernel handles it launches have no module gmprof can ask for. The
//! fatbins are still in the files the process mapped, so the PTX of such a kernel is found
//! by reading those sections back: [`object_ptx`] reads one object's section (only that
//! section: the file is read through [`object::ReadCache`], so a 1 GB library costs its
//! section headers and its fatbins, not its size) and [`fatbins_in`] splits a section into
//! its fatbins, which [`super::fatbin`] unpacks.
//!
//! Pure Rust over files: which files the process mapped is the driver side's business
//! (`capture::probe`).

use std::path::Path;

use object::{Object, ObjectSection};

use super::fatbin;

/// The section nvcc puts fatbins in.
pub const NV_FATBIN: &str = ".nv_fatbin";

/// The fatbins laid one after another in a `.nv_fatbin` section. nvcc aligns each to 8
/// bytes; padding between them is skipped, and a truncated last one is kept as far as the
/// section goes (its parser reports what is missing).
pub fn fatbins_in(section: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while section.len().saturating_sub(at) >= 16 {
        let head = &section[at..];
        // A size past the address space is kept as far as the section goes, like a
        // truncated fatbin.
        let len = head.starts_with(&fatbin::FATBIN_MAGIC.to_le_bytes()).then(|| fatbin::fatbin_len(head));
        match len.map(|l| l.unwrap_or(usize::MAX)) {
            Some(len) if len >= 16 => {
                let end = at.saturating_add(len).min(section.len());
                out.push(&section[at..end]);
                // The next one starts 8-aligned after this one; none after one that runs
                // past the section.
                at = if end < section.len() { (end + 7) & !7 } else { section.len() };
            }
            _ => at += 8,
        }
    }
    out
}

/// The PTX an object's fatbins hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectPtx {
    /// Every PTX text of every fatbin in the section, highest SM first within a fatbin.
    pub texts: Vec<String>,
    /// What could not be read (a PTX entry compressed in a way gmprof does not decode, a
    /// malformed fatbin).
    pub problems: Vec<String>,
    /// The section's size.
    pub section_bytes: u64,
    /// The fatbins in it.
    pub fatbins: usize,
}

impl ObjectPtx {
    /// The texts that define kernel `mangled` (an `.entry` of that name).
    pub fn defining<'a>(&'a self, mangled: &str) -> Vec<&'a str> {
        self.texts.iter().map(String::as_str).filter(|t| defines(t, mangled)).collect()
    }
}

/// Whether PTX `text` has an `.entry` named `mangled`.
pub fn defines(text: &str, mangled: &str) -> bool {
    let needle = format!(".entry {mangled}");
    text.match_indices(&needle)
        .any(|(at, _)| text[at + needle.len()..].chars().next().is_some_and(|c| c == '(' || c.is_whitespace()))
}

/// Reads the `.nv_fatbin` section of the ELF file at `path` and the PTX in it: `Ok(None)`
/// when the file is not an ELF object or has no such section (most libraries), an error
/// when the file cannot be read or its section is larger than `max_section_bytes` (then it
/// is not read; the caller says so).
pub fn object_ptx(path: &Path, max_section_bytes: u64) -> Result<Option<ObjectPtx>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let cache = object::ReadCache::new(file);
    ptx_in_object(&cache, &path.display().to_string(), max_section_bytes)
}

/// [`object_ptx`] of an object's bytes (or a [`object::ReadCache`] of its file), `name`
/// naming it in the errors.
pub fn ptx_in_object<'data, R: object::ReadRef<'data>>(
    data: R,
    name: &str,
    max_section_bytes: u64,
) -> Result<Option<ObjectPtx>, String> {
    let Ok(elf) = object::File::parse(data) else { return Ok(None) };
    let Some(section) = elf.section_by_name(NV_FATBIN) else { return Ok(None) };
    let size = section.size();
    if size > max_section_bytes {
        return Err(format!(
            "{name}: its {NV_FATBIN} section is {size} B, over the {max_section_bytes} B gmprof reads"
        ));
    }
    let data = section.data().map_err(|e| format!("{name}: {NV_FATBIN}: {e}"))?;
    let mut out = ObjectPtx { section_bytes: size, ..ObjectPtx::default() };
    for bytes in fatbins_in(data) {
        out.fatbins += 1;
        match fatbin::parse_fatbin(bytes) {
            Ok(entries) => {
                let (texts, problems) = fatbin::ptx_of(&entries);
                out.texts.extend(texts);
                out.problems.extend(problems);
            }
            Err(e) => out.problems.push(e.to_string()),
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ptx").join(name)
    }

    #[test]
    fn an_nvcc_object_s_section_holds_the_fatbin_nvcc_writes_alone() {
        // probe_kernels_host.o is `nvcc -c` of probe_kernels.cu with the same targets as
        // probe_kernels_default.fatbin (scripts/probe-golden.sh).
        let ptx = object_ptx(&data("probe_kernels_host.o"), 1 << 30).unwrap().expect("an nvcc object has a .nv_fatbin");
        let bytes = std::fs::read(data("probe_kernels_host.o")).unwrap();
        assert_eq!(ptx_in_object(bytes.as_slice(), "probe_kernels_host.o", 1 << 30), Ok(Some(ptx.clone())));
        assert_eq!(ptx.fatbins, 1);
        assert!(ptx.problems.is_empty(), "{:?}", ptx.problems);
        assert_eq!(ptx.texts.len(), 1, "one compute_90 PTX entry");
        let alone = fatbin::parse_fatbin(&std::fs::read(data("probe_kernels_default.fatbin")).unwrap()).unwrap();
        assert_eq!(ptx.texts, fatbin::ptx_of(&alone).0);
        for kernel in ["_Z5saxpyIfEvPT_PKS0_S0_i", "_Z9histogramPjPKhi", "_Z5mixerPfPK6float4i"] {
            assert_eq!(ptx.defining(kernel).len(), 1, "{kernel}");
        }
        // A prefix of a name is not the name; a device function is not an entry.
        assert!(ptx.defining("_Z5saxpy").is_empty());
        assert!(ptx.defining("_Z3mixff").is_empty());
    }

    #[test]
    fn objects_without_device_code_and_oversized_sections() {
        // Not ELF, and an ELF without the section.
        assert_eq!(object_ptx(&data("probe_kernels.cu"), 1 << 30), Ok(None));
        let exe = std::env::current_exe().unwrap();
        assert_eq!(object_ptx(&exe, 1 << 30), Ok(None));
        let err = object_ptx(&data("probe_kernels_host.o"), 1024).unwrap_err();
        assert!(err.ends_with(".nv_fatbin section is 15032 B, over the 1024 B gmprof reads"), "{err}");
        assert!(object_ptx(Path::new("/nonexistent/lib.so"), 1 << 30).is_err());
    }

    #[test]
    fn fatbins_in_a_section_are_split_across_padding() {
        let one = std::fs::read(data("probe_kernels_default.fatbin")).unwrap();
        let len = fatbin::fatbin_len(&one).unwrap();
        assert_eq!(len, one.len());
        // Two fatbins, the first padded to 8 bytes, as a linked executable lays them.
        let mut section = one.clone();
        section.resize(one.len().next_multiple_of(8) + 8, 0);
        section.extend_from_slice(&one);
        let found = fatbins_in(&section);
        assert_eq!(found.len(), 2);
        assert!(found.iter().all(|f| *f == one.as_slice()));
        // Truncated: kept as far as it goes, and its parser says it is short.
        let cut = &section[..section.len() - 100];
        let found = fatbins_in(cut);
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].len(), one.len() - 100);
        assert!(fatbins_in(&[0u8; 64]).is_empty());
    }
}
