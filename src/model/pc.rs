//! PC sampling records: what capture's PC sampler hands to analysis.
//!
//! A [`PcCapture`] holds a session's PC records merged by (cubin, function, SASS offset,
//! correlation id), each with its samples per stall reason, the stall reasons the chip
//! reports (CUPTI's index and name), the interval, and everything that says how complete
//! the samples are (dropped samples, drains that found the hardware buffer full, samples in
//! kernels CUPTI gives no records for). It serializes to JSON: `GMPROF_PC_RECORD=FILE` writes
//! one, and the CPU tests read recorded ones.

use serde::{Deserialize, Serialize};

/// A stall reason as CUPTI lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcStallReason {
    /// CUPTI's index (what records carry).
    pub index: u32,
    /// CUPTI's name, e.g. `smsp__pcsamp_warps_issue_stalled_long_scoreboard`.
    pub name: String,
}

/// One instruction's samples.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcRecord {
    /// CUPTI's CRC of the cubin.
    pub cubin_crc: u64,
    /// The function's name as CUPTI gives it (mangled for C++ kernels).
    pub function: String,
    /// Offset of the instruction in its function, bytes.
    pub pc_offset: u64,
    /// The launch's correlation id; 0 in continuous mode (CUPTI sets it only when kernels
    /// are serialized).
    #[serde(default)]
    pub correlation_id: u32,
    /// (stall reason index, samples), each index once.
    pub stalls: Vec<(u32, u64)>,
}

/// The source line of an instruction, where its cubin has line information.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcSource {
    /// CUPTI's CRC of the cubin.
    pub cubin_crc: u64,
    /// The function's name as CUPTI gives it.
    pub function: String,
    /// Offset of the instruction, bytes.
    pub pc_offset: u64,
    /// Source file (directory joined).
    pub file: String,
    /// Line.
    pub line: u32,
}

/// The SASS text of an instruction, where `nvdisasm` was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcInstruction {
    /// CUPTI's CRC of the cubin.
    pub cubin_crc: u64,
    /// The function's name as CUPTI gives it.
    pub function: String,
    /// Offset of the instruction, bytes.
    pub pc_offset: u64,
    /// The instruction, as nvdisasm prints it (`@!P0 LDG.E R2, desc[UR4][R2.64]`).
    pub sass: String,
}

/// A session's PC samples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcCapture {
    /// The chip's stall reasons, in CUPTI's order.
    pub reasons: Vec<PcStallReason>,
    /// The sampling period as CUPTI counts it: every 2^N cycles; `None` when not read.
    pub period_exponent: Option<u32>,
    /// `continuous` or `kernel_serialized`.
    pub collection: String,
    /// Records merged by (cubin, function, offset, correlation id).
    pub records: Vec<PcRecord>,
    /// Samples CUPTI counted over every drain (user and non-user kernels, dropped ones).
    pub total_samples: u64,
    /// Samples the hardware dropped.
    pub dropped_samples: u64,
    /// Samples in kernels CUPTI gives no PC records for.
    pub non_user_samples: u64,
    /// Drains that found the hardware buffer full (their PC data were lost).
    pub hardware_buffer_full: u64,
    /// Drains of CUPTI's buffer.
    pub drains: u64,
    /// Source lines of the sampled instructions, where known.
    #[serde(default)]
    pub sources: Vec<PcSource>,
    /// SASS text of the sampled instructions, where `nvdisasm` was found.
    #[serde(default)]
    pub instructions: Vec<PcInstruction>,
    /// Errors of the sampler (the samples before them are kept).
    #[serde(default)]
    pub errors: Vec<String>,
}

impl PcCapture {
    /// Adds one drain's records, merging those of the same instruction and launch.
    pub fn merge(&mut self, records: impl IntoIterator<Item = PcRecord>) {
        let mut at: std::collections::HashMap<(u64, String, u64, u32), usize> = self
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| ((r.cubin_crc, r.function.clone(), r.pc_offset, r.correlation_id), i))
            .collect();
        for record in records {
            let key = (record.cubin_crc, record.function.clone(), record.pc_offset, record.correlation_id);
            match at.get(&key) {
                Some(&i) => {
                    let into = &mut self.records[i].stalls;
                    for (reason, samples) in record.stalls {
                        match into.iter_mut().find(|(r, _)| *r == reason) {
                            Some((_, s)) => *s += samples,
                            None => into.push((reason, samples)),
                        }
                    }
                }
                None => {
                    at.insert(key, self.records.len());
                    self.records.push(record);
                }
            }
        }
    }

    /// The sampling period in cycles, when known.
    pub fn period_cycles(&self) -> Option<u64> {
        self.period_exponent.filter(|e| *e < 64).map(|e| 1u64 << e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_merge_by_instruction_and_launch() {
        let rec = |pc, corr, stalls: &[(u32, u64)]| PcRecord {
            cubin_crc: 9,
            function: "k".into(),
            pc_offset: pc,
            correlation_id: corr,
            stalls: stalls.to_vec(),
        };
        let mut c = PcCapture::default();
        c.merge([rec(16, 0, &[(1, 3)]), rec(32, 0, &[(2, 1)])]);
        c.merge([rec(16, 0, &[(1, 2), (4, 1)]), rec(16, 7, &[(1, 1)])]);
        assert_eq!(c.records.len(), 3);
        assert_eq!(c.records[0].stalls, vec![(1, 5), (4, 1)]);
        assert_eq!(c.records[2].correlation_id, 7);
        assert_eq!(PcCapture { period_exponent: Some(10), ..Default::default() }.period_cycles(), Some(1024));
    }
}
