//! Getting PTX out of a loaded image: PTX text, a fatbin, or a cubin (SASS only).
//!
//! A fatbin is a 16-byte header (magic `0xBA55ED50`, version, header size, size of what
//! follows) and a sequence of entries, each a header (kind 1 = PTX, 2 = ELF cubin; header
//! size; payload size; target SM; flags; uncompressed size) and its payload. CUDA 13's
//! nvcc compresses payloads with zstd by default (flag `0x8000`), which is decoded here
//! with `ruzstd`; older toolkits' own compression (flag `0x2000`) is not, and such PTX is
//! reported as not extractable.

use thiserror::Error;

/// Magic of a fatbin.
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// Magic of the wrapper struct the runtime registers (`__cudaRegisterFatBinary`).
pub const FATBIN_WRAPPER_MAGIC: u32 = 0x4662_43B1;
const FLAG_ZSTD: u64 = 0x8000;
/// The most bytes gmprof decompresses a fatbin's PTX entries to, all together (64 MiB):
/// nvcc's PTX of one translation unit for one target is a few MB, and 16 KB of zstd can
/// claim gigabytes. PTX past it is reported as not extracted.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;
const FLAG_OLD_COMPRESSION: u64 = 0x2000;

/// What an image turned out to be.
#[derive(Clone, Debug, PartialEq)]
pub enum Image {
    /// PTX text.
    Ptx(String),
    /// A fatbin's entries.
    Fatbin(Vec<Entry>),
    /// A cubin: SASS only.
    Elf,
    /// Something else.
    Unknown,
}

/// The kind of a fatbin entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// PTX.
    Ptx,
    /// A cubin (SASS).
    Elf,
    /// Another kind number.
    Other(u16),
}

/// One entry of a fatbin.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// PTX or cubin.
    pub kind: EntryKind,
    /// Target SM (90 for sm_90).
    pub sm: u32,
    /// The payload, decompressed; `None` when it could not be (or, compressed SASS, was not:
    /// gmprof reads only PTX).
    pub payload: Option<Vec<u8>>,
    /// Why the payload is missing.
    pub problem: Option<String>,
}

/// A fatbin format error.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("fatbin: {0}")]
pub struct FatbinError(pub String);

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// `offset + size`, both read from a header; `None` when the sum does not fit.
fn end_of(offset: u64, size: u64) -> Option<usize> {
    usize::try_from(offset.checked_add(size)?).ok()
}

/// The total size of a fatbin from its header, if `head` (at least 16 bytes) starts one
/// whose size fits in memory.
pub fn fatbin_len(head: &[u8]) -> Option<usize> {
    if u32_at(head, 0)? != FATBIN_MAGIC {
        return None;
    }
    end_of(u64::from(u16_at(head, 6)?), u64_at(head, 8)?)
}

/// How many bytes a 64-bit ELF (a cubin) spans, as far as `bytes` shows: the end of its
/// section and program header tables and of every section with file data (`SHT_NOBITS`
/// has none) whose header lies within `bytes`. Called on the 64-byte ELF header it gives
/// the tables' end; called again on that many bytes it gives the whole file. `None` when
/// `bytes` is not a 64-bit ELF or an offset and size in its headers add up past what an
/// address can hold (headers no loaded image has).
pub fn elf_extent(bytes: &[u8]) -> Option<usize> {
    if !bytes.starts_with(b"\x7fELF") || bytes.get(4) != Some(&2) {
        return None;
    }
    let (phoff, shoff) = (u64_at(bytes, 0x20)?, u64_at(bytes, 0x28)?);
    let (phentsize, phnum) = (u64::from(u16_at(bytes, 0x36)?), u64::from(u16_at(bytes, 0x38)?));
    let (shentsize, shnum) = (u64::from(u16_at(bytes, 0x3a)?), u64::from(u16_at(bytes, 0x3c)?));
    let mut end = 64.max(end_of(phoff, phentsize * phnum)?).max(end_of(shoff, shentsize * shnum)?);
    for i in 0..shnum {
        let at = end_of(shoff, i * shentsize)?;
        let (Some(kind), Some(offset), Some(size)) = (
            at.checked_add(4).and_then(|a| u32_at(bytes, a)),
            at.checked_add(0x18).and_then(|a| u64_at(bytes, a)),
            at.checked_add(0x20).and_then(|a| u64_at(bytes, a)),
        ) else {
            break;
        };
        if kind != 8 {
            end = end.max(end_of(offset, size)?);
        }
    }
    Some(end)
}

/// Classifies and unpacks an image's bytes.
pub fn classify(bytes: &[u8]) -> Result<Image, FatbinError> {
    if bytes.starts_with(b"\x7fELF") {
        return Ok(Image::Elf);
    }
    if u32_at(bytes, 0) == Some(FATBIN_MAGIC) {
        return parse_fatbin(bytes).map(Image::Fatbin);
    }
    let text = String::from_utf8_lossy(bytes.split(|&b| b == 0).next().unwrap_or(&[]));
    if text.contains(".version") && text.contains(".target") {
        return Ok(Image::Ptx(text.into_owned()));
    }
    Ok(Image::Unknown)
}

/// Parses a fatbin's entries.
pub fn parse_fatbin(bytes: &[u8]) -> Result<Vec<Entry>, FatbinError> {
    let err = |m: &str| FatbinError(m.to_string());
    if u32_at(bytes, 0) != Some(FATBIN_MAGIC) {
        return Err(err("no fatbin header"));
    }
    let total = fatbin_len(bytes).ok_or_else(|| err("the header's size does not fit in memory"))?;
    let end = total.min(bytes.len());
    let mut at = u16_at(bytes, 6).ok_or_else(|| err("short header"))? as usize;
    let mut entries = Vec::new();
    let mut budget = MAX_DECOMPRESSED_BYTES;
    while end.saturating_sub(at) >= 0x40 {
        let kind = u16_at(bytes, at).ok_or_else(|| err("short entry"))?;
        let header = u32_at(bytes, at + 4).ok_or_else(|| err("short entry"))? as usize;
        let padded = u64_at(bytes, at + 8).ok_or_else(|| err("short entry"))?;
        let compressed = u32_at(bytes, at + 0x10).unwrap_or(0) as usize;
        let sm = u32_at(bytes, at + 0x1c).unwrap_or(0);
        let flags = u64_at(bytes, at + 0x28).unwrap_or(0);
        let uncompressed = u64_at(bytes, at + 0x38).unwrap_or(0) as usize;
        if header < 0x40 || kind == 0 {
            return Err(err("an entry header is malformed"));
        }
        let past = || err("an entry runs past the end");
        let start = at.checked_add(header).filter(|&s| s <= end).ok_or_else(past)?;
        let next = end_of(start as u64, padded).ok_or_else(past)?;
        let raw = &bytes[start..next.min(end)];
        let kind = match kind {
            1 => EntryKind::Ptx,
            2 => EntryKind::Elf,
            k => EntryKind::Other(k),
        };
        let (payload, problem) = if flags & FLAG_ZSTD != 0 && kind != EntryKind::Ptx {
            (None, Some("compressed SASS, not decompressed: gmprof reads only PTX".to_string()))
        } else if flags & FLAG_ZSTD != 0 {
            let data = raw.get(..compressed.min(raw.len())).unwrap_or(raw);
            match zstd_decode(data, uncompressed, budget) {
                Ok(out) => {
                    budget -= out.len();
                    (Some(out), None)
                }
                Err(e) => (None, Some(format!("zstd: {e}"))),
            }
        } else if flags & FLAG_OLD_COMPRESSION != 0 {
            (None, Some("compressed with the pre-zstd fatbin compression, which gmprof does not decode".to_string()))
        } else {
            (Some(raw.to_vec()), None)
        };
        entries.push(Entry { kind, sm, payload, problem });
        at = next;
    }
    Ok(entries)
}

/// `data` decompressed: `declared` bytes at most when the entry's header gives its size and
/// it fits the `budget` left, else the whole frame if it fits the budget, else an error.
fn zstd_decode(data: &[u8], declared: usize, budget: usize) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let dec = ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| e.to_string())?;
    let exact = declared > 0 && declared <= budget;
    let limit = if exact { declared } else { budget };
    let mut out = Vec::with_capacity(if exact { declared } else { 0 });
    // One byte past the limit tells a frame that is longer from one that ends there.
    dec.take(limit as u64 + u64::from(!exact)).read_to_end(&mut out).map_err(|e| e.to_string())?;
    if out.len() > limit {
        return Err(format!(
            "it decompresses to more than the {MAX_DECOMPRESSED_BYTES} bytes gmprof decompresses of a fatbin"
        ));
    }
    Ok(out)
}

/// The PTX texts of a fatbin's PTX entries, highest SM first, with the problems of those
/// that could not be read.
pub fn ptx_of(entries: &[Entry]) -> (Vec<String>, Vec<String>) {
    let mut ptx: Vec<(u32, String)> = Vec::new();
    let mut problems = Vec::new();
    for e in entries.iter().filter(|e| e.kind == EntryKind::Ptx) {
        match &e.payload {
            Some(p) => {
                let text = String::from_utf8_lossy(p.split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
                ptx.push((e.sm, text));
            }
            None => problems.push(format!("PTX for sm_{}: {}", e.sm, e.problem.clone().unwrap_or_default())),
        }
    }
    ptx.sort_by_key(|b| std::cmp::Reverse(b.0));
    (ptx.into_iter().map(|(_, t)| t).collect(), problems)
}
