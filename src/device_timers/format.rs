//! The buffer format of `include/gmprof_device.cuh` (version [`VERSION`]) and its decoder.
//!
//! The header's comment is the reference; in short: 8 header words (magic and version,
//! capacity, overflow counter, grid and lane layout, sampling, records per lane), then
//! 16-byte records, each a 64-bit `%globaltimer` stamp and a tag word (payload, region,
//! kind, `%smid`, a 7-bit check of the stamp, a set top bit). Recording lane `g` owns records
//! `[g * per_lane, (g + 1) * per_lane)`, so a record's lane (and block) follows from its slot.
//!
//! [`decode`] never fails on the records themselves: an empty record ends its lane, a torn
//! one (one word zero, or a check that does not match the stamp) is counted in
//! [`Decoded::torn`] and left out. Only a header that is not a gmprof buffer, or one the
//! device flagged as misaligned (nothing recorded), is an error.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// `"GMDT"` in the low 32 bits of word 0.
pub const MAGIC: u32 = 0x5444_4D47;
/// The format version this decoder reads.
pub const VERSION: u16 = 1;
/// Header words before the first record.
pub const HEADER_WORDS: usize = 8;
/// Bytes per record.
pub const RECORD_BYTES: usize = 16;
/// The largest region id.
pub const MAX_REGION: u16 = 4095;
/// Word 6, bit 0: the device found the buffer's base not 16-byte aligned, wrote no record
/// and counted every one as overflow.
pub const FLAG_MISALIGNED: u64 = 1;
/// Lane-marker region of a lane's start record (payload: the block).
pub const LANE_START: u16 = 0;
/// Lane-marker region of a lane's finish record.
pub const LANE_FINISH: u16 = 1;

/// Bytes of a buffer that holds `capacity` records.
pub fn buffer_bytes(capacity: u32) -> usize {
    HEADER_WORDS * 8 + capacity as usize * RECORD_BYTES
}

/// The two header words the host writes before the launch (the rest stays zero).
pub fn host_header(capacity: u32) -> [u64; 2] {
    [
        u64::from(MAGIC) | (u64::from(VERSION) << 32) | ((HEADER_WORDS as u64) << 48),
        u64::from(capacity) | ((RECORD_BYTES as u64) << 32),
    ]
}

/// What a record marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A region opens.
    Begin,
    /// A region closes.
    End,
    /// A point event.
    Instant,
    /// A lane starts ([`LANE_START`]) or finishes ([`LANE_FINISH`]).
    Lane,
}

impl Kind {
    fn from_bits(bits: u64) -> Kind {
        match bits & 3 {
            0 => Kind::Begin,
            1 => Kind::End,
            2 => Kind::Instant,
            _ => Kind::Lane,
        }
    }

    fn bits(self) -> u64 {
        match self {
            Kind::Begin => 0,
            Kind::End => 1,
            Kind::Instant => 2,
            Kind::Lane => 3,
        }
    }
}

/// How the kernel split blocks into lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneMode {
    /// One lane per block (`gmprof_dt_init_block`).
    Block,
    /// One lane per warp (`gmprof_dt_init_warp`).
    Warp,
    /// One lane per named group (`gmprof_dt_init_group`).
    Group,
}

/// The header as the device left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Format version.
    pub version: u16,
    /// Records the buffer holds.
    pub capacity: u32,
    /// Records the device could not write because their lane was full.
    pub overflow: u64,
    /// Blocks in the grid; `None` when no block initialized the timers (words 3-5 unset).
    pub blocks: Option<u32>,
    /// Lanes per block.
    pub lanes_per_block: Option<u32>,
    /// How lanes were formed.
    pub lane_mode: Option<LaneMode>,
    /// Every Nth block recorded.
    pub sample_blocks: Option<u32>,
    /// Every Nth lane of a block recorded.
    pub sample_lanes: Option<u32>,
    /// Records per recording lane.
    pub per_lane: Option<u32>,
    /// Recording lanes.
    pub lanes: Option<u32>,
}

impl Header {
    /// Recording lanes per block: `ceil(lanes_per_block / sample_lanes)`.
    pub fn sampled_lanes_per_block(&self) -> Option<u32> {
        Some(self.lanes_per_block?.div_ceil(self.sample_lanes?.max(1)))
    }

    /// (block, lane in block) of recording lane `g`.
    pub fn lane_position(&self, g: u32) -> Option<(u32, u32)> {
        let per_block = self.sampled_lanes_per_block()?.max(1);
        Some(((g / per_block) * self.sample_blocks?.max(1), (g % per_block) * self.sample_lanes?.max(1)))
    }
}

/// One decoded record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Recording lane index (from the record's slot).
    pub lane: u32,
    /// Block, linear (`x + X * (y + Y * z)`).
    pub block: u32,
    /// Lane in the block: 0, the warp, or the group.
    pub lane_in_block: u32,
    /// What the record marks.
    pub kind: Kind,
    /// Region id (for lane markers, [`LANE_START`] or [`LANE_FINISH`]).
    pub region: u16,
    /// The user's 32-bit payload.
    pub payload: u32,
    /// `%smid` when the record was written.
    pub sm: u16,
    /// `%globaltimer`, ns.
    pub ts_ns: u64,
}

/// A decoded buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decoded {
    /// The header.
    pub header: Header,
    /// Every complete record, lane by lane, in write order within a lane.
    pub records: Vec<Record>,
    /// Records with one word zero or a failed check: left out.
    pub torn: u64,
    /// Records found past a lane's first empty record (a lane writes its records in order,
    /// so these are left from another launch or written by a second leader): left out.
    pub stray: u64,
}

/// The tag word of a record (the device's `gmprof_dt_tag`: its `gmprof_dt_tag_base` with the
/// stamp's low 7 bits XORed into the check); used by tests and encoders.
pub fn tag_word(ts_ns: u64, kind: Kind, region: u16, payload: u32, sm: u16) -> u64 {
    u64::from(payload)
        | (u64::from(region & 0xFFF) << 32)
        | (kind.bits() << 44)
        | (u64::from(sm & 0x3FF) << 46)
        | (((ts_ns ^ 0x5A) & 0x7F) << 56)
        | (1 << 63)
}

fn bits(word: u64, shift: u32, width: u32) -> u64 {
    (word >> shift) & ((1u64 << width) - 1)
}

/// Reads the header; an error when `words` is not a version-1 gmprof buffer, or when the
/// device flagged its base as misaligned ([`FLAG_MISALIGNED`]: nothing was recorded).
pub fn read_header(words: &[u64]) -> Result<Header> {
    if words.len() < HEADER_WORDS {
        return Err(Error::InvalidConfig(format!(
            "device timer buffer: {} words, fewer than the {HEADER_WORDS}-word header",
            words.len()
        )));
    }
    let w0 = words[0];
    if bits(w0, 0, 32) as u32 != MAGIC {
        return Err(Error::InvalidConfig(format!(
            "device timer buffer: word 0 is {w0:#018x}, not the gmprof magic {MAGIC:#010x} (was the header written \
             before the launch?)"
        )));
    }
    let version = bits(w0, 32, 16) as u16;
    if version != VERSION {
        return Err(Error::InvalidConfig(format!(
            "device timer buffer: format version {version}, this gmprof reads version {VERSION}"
        )));
    }
    let record_bytes = bits(words[1], 32, 32);
    if record_bytes != RECORD_BYTES as u64 || bits(w0, 48, 16) != HEADER_WORDS as u64 {
        return Err(Error::InvalidConfig(format!(
            "device timer buffer: {record_bytes}-byte records and {}-word header, expected {RECORD_BYTES} and \
             {HEADER_WORDS}",
            bits(w0, 48, 16)
        )));
    }
    if words[6] & FLAG_MISALIGNED != 0 {
        return Err(Error::InvalidConfig(format!(
            "device timer buffer: the kernel found its base address not 16-byte aligned and wrote no record ({} \
             counted as overflow); pass a 16-byte aligned buffer (gmprof's own allocations are)",
            words[2]
        )));
    }
    let written = bits(words[3], 56, 8) == 1;
    let lane_mode = match bits(words[3], 48, 8) {
        1 => Some(LaneMode::Block),
        2 => Some(LaneMode::Warp),
        3 => Some(LaneMode::Group),
        _ => None,
    };
    let some = |v: u64| written.then_some(v as u32);
    Ok(Header {
        version,
        capacity: bits(words[1], 0, 32) as u32,
        overflow: words[2],
        blocks: some(bits(words[3], 0, 32)),
        lanes_per_block: some(bits(words[3], 32, 16)),
        lane_mode: lane_mode.filter(|_| written),
        sample_blocks: some(bits(words[4], 0, 32)),
        sample_lanes: some(bits(words[4], 32, 32)),
        per_lane: some(bits(words[5], 0, 32)),
        lanes: some(bits(words[5], 32, 32)),
    })
}

/// Little-endian bytes (a copied buffer, a file) as words; trailing bytes are ignored.
pub fn words_from_bytes(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8"))).collect()
}

/// Decodes a whole buffer (header and records).
pub fn decode(words: &[u64]) -> Result<Decoded> {
    let header = read_header(words)?;
    let mut out = Decoded { header: header.clone(), records: Vec::new(), torn: 0, stray: 0 };
    let body = &words[HEADER_WORDS..];
    let slots = (body.len() / 2).min(header.capacity as usize);
    let (Some(per_lane), Some(lanes)) = (header.per_lane, header.lanes) else {
        // No block initialized: every non-empty slot is stray.
        out.stray = (0..slots).filter(|i| body[2 * i] != 0 || body[2 * i + 1] != 0).count() as u64;
        return Ok(out);
    };
    let per_lane = per_lane as usize;
    // Lanes past the buffer's records hold nothing (and a corrupt header's lane count must
    // not make the decoder spin).
    let lanes_in_buffer = if per_lane == 0 { 0 } else { (lanes as usize).min(slots.div_ceil(per_lane)) };
    for g in 0..lanes_in_buffer {
        let Some((block, lane_in_block)) = header.lane_position(g as u32) else { break };
        let mut ended = false;
        for i in g * per_lane..((g + 1) * per_lane).min(slots) {
            let (a, b) = (body[2 * i], body[2 * i + 1]);
            if a == 0 && b == 0 {
                ended = true;
                continue;
            }
            if ended {
                out.stray += 1;
                continue;
            }
            if a == 0 || b >> 63 == 0 || bits(b, 56, 7) != (a ^ 0x5A) & 0x7F {
                out.torn += 1;
                continue;
            }
            out.records.push(Record {
                lane: g as u32,
                block,
                lane_in_block,
                kind: Kind::from_bits(bits(b, 44, 2)),
                region: bits(b, 32, 12) as u16,
                payload: bits(b, 0, 32) as u32,
                sm: bits(b, 46, 10) as u16,
                ts_ns: a,
            });
        }
    }
    // Slots beyond the recording lanes' share are never written by this launch.
    out.stray +=
        (lanes_in_buffer * per_lane..slots).filter(|i| body[2 * i] != 0 || body[2 * i + 1] != 0).count() as u64;
    Ok(out)
}

/// One record to [`encode`]: (kind, region, payload, SM, `%globaltimer` ns).
pub type RawRecord = (Kind, u16, u32, u16, u64);

/// Builds a buffer the way the device writes one: for tests, golden files and the host's
/// own checks. `lanes[g]` holds lane `g`'s records as (kind, region, payload, sm, ts).
pub fn encode(capacity: u32, layout: (u32, u32, LaneMode), sampling: (u32, u32), lanes: &[Vec<RawRecord>]) -> Vec<u64> {
    let (blocks, lanes_per_block, mode) = layout;
    let mut words = vec![0u64; HEADER_WORDS + 2 * capacity as usize];
    let [w0, w1] = host_header(capacity);
    words[0] = w0;
    words[1] = w1;
    let sampled =
        u64::from(blocks.div_ceil(sampling.0.max(1))) * u64::from(lanes_per_block.div_ceil(sampling.1.max(1)));
    let per_lane = u64::from(capacity).checked_div(sampled).unwrap_or(0);
    let mode_bits = match mode {
        LaneMode::Block => 1u64,
        LaneMode::Warp => 2,
        LaneMode::Group => 3,
    };
    words[3] = u64::from(blocks) | (u64::from(lanes_per_block) << 32) | (mode_bits << 48) | (1 << 56);
    words[4] = u64::from(sampling.0) | (u64::from(sampling.1) << 32);
    words[5] = per_lane | (sampled << 32);
    let mut overflow = 0;
    for (g, records) in lanes.iter().enumerate() {
        for (n, &(kind, region, payload, sm, ts)) in records.iter().enumerate() {
            if n as u64 >= per_lane {
                overflow += 1;
                continue;
            }
            let at = HEADER_WORDS + 2 * (g * per_lane as usize + n);
            words[at] = ts;
            words[at + 1] = tag_word(ts, kind, region, payload, sm);
        }
    }
    words[2] = overflow;
    words
}
