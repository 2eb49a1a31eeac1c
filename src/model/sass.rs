//! SASS metric records: what CUPTI's SASS Metrics API hands back on a flush, as plain data.
//!
//! CUPTI patches a kernel's SASS so that each instruction counts what the configured
//! metrics ask for (`smsp__sass_inst_executed`, ...), and a flush returns one record per
//! patched instruction and metric: the module (`cubin_crc`), the function, the
//! instruction's offset in the function, and the metric's value in each instance (one per
//! GPU, SM or SM sub-partition, as configured; gmprof configures one per GPU). The capture
//! side (`checked::sass_metrics`) fills these in; `probe::sass` attributes them to launches.

use serde::{Deserialize, Serialize};

/// One patched instruction's values, as a flush returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SassRecord {
    /// CUPTI's CRC of the function's cubin.
    pub cubin_crc: u32,
    /// The function's symbol index in its module.
    pub function_index: u32,
    /// The function's (mangled) name.
    pub function: String,
    /// The instruction's offset in the function, bytes.
    pub pc_offset: u32,
    /// `(metric id, value)` per instance.
    pub values: Vec<(u64, u64)>,
}
