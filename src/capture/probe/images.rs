//! What the program loaded: a module's image read back (PTX text, a fatbin, a cubin) and
//! identified, so a launched function's PTX can be found.
//!
//! Layer 3, part of [`super`].

use std::ffi::c_void;

use crate::probe::fatbin::{self, Image};
use crate::probe::host;
use crate::probe::ImageId;

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

/// How much of an object's `.nv_fatbin` section gmprof reads to find a runtime kernel's
/// PTX (the program's own executable holds a few MB; vendor libraries such as cuBLAS hold
/// hundreds of MB of SASS).
pub(super) const HOST_FATBIN_MAX: u64 = 256 << 20;

/// The PTX of runtime-registered kernels, from the `.nv_fatbin` sections of the files the
/// process mapped ([`crate::probe::host`]). A lookup that misses reads files not read yet, in
/// mapping order, until one defines the kernel; files mapped later (`dlopen`) are read by a
/// later miss.
#[derive(Default)]
pub(super) struct HostObjects {
    scanned: std::collections::HashSet<String>,
    /// The objects with device code, in the order the process mapped them.
    objects: Vec<(String, host::ObjectPtx)>,
    /// Objects not read, and why.
    skipped: Vec<String>,
}

impl HostObjects {
    /// The object whose fatbins define kernel `mangled`, and those PTX texts; or why none.
    pub(super) fn find(&mut self, mangled: &str) -> std::result::Result<(String, Vec<String>), String> {
        if let Some(found) = self.lookup(mangled) {
            return Ok(found);
        }
        let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps: {e}"))?;
        // In mapping order, the executable first, and only until a file defines the kernel:
        // a program's own kernels never cost a read of its libraries (cuBLAS alone holds
        // hundreds of MB of fatbins).
        for path in mapped_files(&maps) {
            if !self.scanned.insert(path.clone()) {
                continue;
            }
            match host::object_ptx(std::path::Path::new(&path), HOST_FATBIN_MAX) {
                Ok(Some(ptx)) => {
                    let defines = !ptx.defining(mangled).is_empty();
                    self.objects.push((path, ptx));
                    if defines {
                        break;
                    }
                }
                Ok(None) => {}
                Err(e) => self.skipped.push(e),
            }
        }
        self.lookup(mangled).ok_or_else(|| {
            let mut why = format!(
                "no PTX defines it in the {} section of the {} mapped file(s) with device code",
                host::NV_FATBIN,
                self.objects.len()
            );
            let problems: Vec<&String> = self.objects.iter().flat_map(|(_, o)| &o.problems).collect();
            if !problems.is_empty() {
                why.push_str(&format!(
                    " (unreadable: {})",
                    problems.iter().take(3).map(|p| p.as_str()).collect::<Vec<_>>().join("; ")
                ));
            }
            if !self.skipped.is_empty() {
                why.push_str(&format!("; not read: {}", self.skipped.join("; ")));
            }
            why
        })
    }

    fn lookup(&self, mangled: &str) -> Option<(String, Vec<String>)> {
        self.objects.iter().find_map(|(path, ptx)| {
            let texts = ptx.defining(mangled);
            (!texts.is_empty()).then(|| (path.clone(), texts.into_iter().map(str::to_string).collect()))
        })
    }
}

/// The files a `/proc/PID/maps` text maps, once each, in order (no anonymous mappings,
/// pseudo-files or deleted files).
pub(super) fn mapped_files(maps: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    maps.lines()
        .filter_map(|line| line.splitn(6, char::is_whitespace).nth(5).map(str::trim))
        .filter(|p| p.starts_with('/') && !p.starts_with("/dev/") && !p.ends_with(" (deleted)"))
        .filter(|p| seen.insert(p.to_string()))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::select;

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

    #[test]
    fn mapped_files_are_the_files_once_each_in_order() {
        let maps = "\
5592f3a1c000-5592f3a4e000 r--p 00000000 fd:01 1048602                    /work/llmc/train_gpt2cu
5592f3a4e000-5592f3c10000 r-xp 00032000 fd:01 1048602                    /work/llmc/train_gpt2cu
5592f4d1e000-5592f6a3f000 rw-p 00000000 00:00 0                          [heap]
7f3b1c000000-7f3b1c021000 rw-p 00000000 00:00 0 
7f3b2e400000-7f3b3a1d5000 r--p 00000000 fd:01 2097210                    /usr/local/cuda/lib64/libcublasLt.so.13.0.0.19
7f3b40a00000-7f3b40a01000 rw-s 00000000 00:05 1034                       /dev/nvidiactl
7f3b41000000-7f3b41001000 r--p 00000000 fd:01 3                          /tmp/old lib.so (deleted)
7f3b42000000-7f3b42001000 r--p 00000000 fd:01 4                          /opt/my libs/libk.so
7ffd5e1b6000-7ffd5e1d8000 rw-p 00000000 00:00 0                          [stack]
";
        assert_eq!(
            mapped_files(maps),
            ["/work/llmc/train_gpt2cu", "/usr/local/cuda/lib64/libcublasLt.so.13.0.0.19", "/opt/my libs/libk.so"]
        );
    }

    #[test]
    fn this_process_maps_its_own_executable_which_has_no_device_code() {
        let mut host = HostObjects::default();
        let why = host.find("_Z5saxpyIfEvPT_PKS0_S0_i").unwrap_err();
        assert!(why.starts_with("no PTX defines it in the .nv_fatbin section of the 0 mapped file(s)"), "{why}");
        let exe = std::env::current_exe().unwrap().to_string_lossy().into_owned();
        assert!(host.scanned.contains(&exe), "{exe} not among {:?}", host.scanned);
        // An object with device code that the process mapped is found by its kernels.
        let object = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ptx/probe_kernels_host.o");
        let ptx = host::object_ptx(&object, HOST_FATBIN_MAX).unwrap().unwrap();
        host.objects.push((object.display().to_string(), ptx));
        let (path, texts) = host.find("_Z9histogramPjPKhi").unwrap();
        assert!(path.ends_with("probe_kernels_host.o"));
        assert_eq!(texts.len(), 1);
        assert!(texts[0].contains(".entry _Z9histogramPjPKhi("));
    }
}
