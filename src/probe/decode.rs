//! Decoding a launch's map buffers into records, `probes.csv` rows and block tracks.
//!
//! `block_sched` stores each block's start as the bitwise complement of `%globaltimer` (so
//! that one `red.max` over the block's threads keeps the earliest); the decoder turns it
//! back into `start_ns`. A record no thread wrote (all zero) is still a row: for
//! `block_sched` its `entries` is 0 and its times are blank, so a block that never ran shows.

use serde::Serialize;

use super::spec::{FieldType, ProbeSpec};

/// One probed launch, as the driver side saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchInfo {
    /// The launch's correlation id (joins kernels.csv).
    pub correlation_id: u32,
    /// The kernel's name (demangled).
    pub kernel: String,
    /// Blocks in the grid.
    pub blocks: u64,
    /// Threads per block.
    pub threads: u64,
}

/// One field of one record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeRow {
    /// The launch's correlation id.
    pub correlation_id: u32,
    /// The kernel (demangled).
    pub kernel: String,
    /// The probe.
    pub probe: String,
    /// Record index (thread, warp or block, by the probe's layout).
    pub record: u64,
    /// Field name.
    pub field: String,
    /// Value as text (integers exactly); empty when not measured.
    pub value: String,
}

/// A block as `block_sched` saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSpan {
    /// Linear block index.
    pub block: u64,
    /// SM it ran on.
    pub smid: u32,
    /// `%globaltimer` at its first thread's entry, ns.
    pub start_ns: u64,
    /// At its last thread's exit, ns.
    pub end_ns: u64,
    /// Times the block's leader thread entered (1 when it ran once).
    pub entries: u32,
}

/// A decoding error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("probe {probe}: map buffer of {got} bytes, expected {expected}")]
pub struct DecodeError {
    /// The probe.
    pub probe: String,
    /// Bytes received.
    pub got: usize,
    /// Bytes expected.
    pub expected: usize,
}

fn read(bytes: &[u8], at: usize, ty: FieldType) -> String {
    let b8 = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&bytes[at..at + n]);
        a
    };
    match ty {
        FieldType::U32 => u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()).to_string(),
        FieldType::S32 => i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()).to_string(),
        FieldType::F32 => f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()).to_string(),
        FieldType::U64 => u64::from_le_bytes(b8(8)).to_string(),
        FieldType::S64 => i64::from_le_bytes(b8(8)).to_string(),
        FieldType::F64 => f64::from_le_bytes(b8(8)).to_string(),
    }
}

/// The map buffer size for `spec` at this launch.
pub fn map_bytes(spec: &ProbeSpec, launch: &LaunchInfo) -> usize {
    spec.layout.records(launch.blocks, launch.threads) as usize * spec.record_layout().1
}

/// The rows of one probe's map buffer.
pub fn rows(spec: &ProbeSpec, launch: &LaunchInfo, map: &[u8]) -> Result<Vec<ProbeRow>, DecodeError> {
    let expected = map_bytes(spec, launch);
    if map.len() != expected {
        return Err(DecodeError { probe: spec.name.clone(), got: map.len(), expected });
    }
    let (offsets, size) = spec.record_layout();
    let mut out = Vec::new();
    for (r, rec) in map.chunks_exact(size.max(1)).enumerate() {
        let sched = spec.name == "block_sched" && spec.fields.len() == 4;
        let entered = sched && read(rec, offsets[3], FieldType::U32) != "0";
        for (f, &off) in spec.fields.iter().zip(&offsets) {
            let (field, value) = match (sched, f.name.as_str()) {
                (true, "start_ns_inverted") => {
                    let inv = u64::from_le_bytes(rec[off..off + 8].try_into().unwrap_or_default());
                    ("start_ns".to_string(), if entered { (!inv).to_string() } else { String::new() })
                }
                (true, "end_ns" | "smid") if !entered => (f.name.clone(), String::new()),
                _ => (f.name.clone(), read(rec, off, f.ty)),
            };
            out.push(ProbeRow {
                correlation_id: launch.correlation_id,
                kernel: launch.kernel.clone(),
                probe: spec.name.clone(),
                record: r as u64,
                field,
                value,
            });
        }
    }
    Ok(out)
}

/// `block_sched`'s blocks, from its map buffer (24-byte records).
pub fn block_spans(map: &[u8]) -> Vec<BlockSpan> {
    map.chunks_exact(24)
        .enumerate()
        .map(|(i, r)| {
            let u64_at = |o: usize| u64::from_le_bytes(r[o..o + 8].try_into().unwrap_or_default());
            let u32_at = |o: usize| u32::from_le_bytes(r[o..o + 4].try_into().unwrap_or_default());
            BlockSpan {
                block: i as u64,
                start_ns: !u64_at(0),
                end_ns: u64_at(8),
                smid: u32_at(16),
                entries: u32_at(20),
            }
        })
        .collect()
}

/// Sum of an unsigned (`u32`, `u64`) field over all records; `None` for a field of another
/// type (a sum of signed or floating-point bits is no total), and when the sum does not fit
/// in 64 bits (`block_sched`'s `%globaltimer` fields over a dozen blocks: a total of times
/// means nothing, and probes.csv leaves it out).
pub fn field_total(spec: &ProbeSpec, map: &[u8], field: &str) -> Option<u64> {
    let (offsets, size) = spec.record_layout();
    let i = spec.fields.iter().position(|f| f.name == field)?;
    let ty = spec.fields[i].ty;
    if !matches!(ty, FieldType::U32 | FieldType::U64) {
        return None;
    }
    let off = offsets[i];
    let value = |r: &[u8]| match ty {
        FieldType::U32 => u64::from(u32::from_le_bytes(r[off..off + 4].try_into().unwrap_or_default())),
        _ => u64::from_le_bytes(r[off..off + 8].try_into().unwrap_or_default()),
    };
    map.chunks_exact(size.max(1)).try_fold(0u64, |sum, r| sum.checked_add(value(r)))
}

/// Writes rows as CSV.
pub fn write_csv<W: std::io::Write>(rows: &[ProbeRow], out: W) -> csv::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}
