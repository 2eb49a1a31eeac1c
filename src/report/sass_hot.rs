//! sass_hot.csv: the hottest SASS instructions of each kernel counted through CUPTI's SASS
//! metrics (`gmprof run --probe exec_count` on a kernel without PTX, or `--probe-sass
//! always`).
//!
//! One row per kernel (function and module) and instruction, the kernel's top instructions
//! by warp instructions executed summed over its counted launches, kernels by their total,
//! largest first. The columns: `kernel` (demangled), `mangled`, `cubin_crc` (CUPTI's CRC of
//! the module, which tells two modules' functions of one name apart), `launches` counted,
//! `rank`, `pc_offset` (`0x1f0`, bytes into the function, as `cuobjdump -sass` and ncu's
//! source page number them), `instructions` (warp-level), `share` of the kernel's
//! instructions, `thread_instructions`, `threads_per_instruction` (active threads per warp
//! instruction: 32 is no divergence), `global_loads`, `global_stores` and
//! `global_sector_bytes` (32-byte sectors the instruction accessed).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::csv::write_file;
use crate::error::{Error, Result};

/// File name of the hot-instruction table.
pub const SASS_HOT_CSV: &str = "sass_hot.csv";

/// One sass_hot.csv row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SassHotRow {
    /// Kernel, demangled.
    pub kernel: String,
    /// Mangled name.
    pub mangled: String,
    /// CUPTI's CRC of the kernel's cubin.
    pub cubin_crc: u32,
    /// Launches counted.
    pub launches: u64,
    /// 1 for the kernel's hottest instruction.
    pub rank: u32,
    /// Offset in the function (`0x1f0`).
    pub pc_offset: String,
    /// Warp instructions executed.
    pub instructions: u64,
    /// Share of the kernel's warp instructions.
    pub share: f64,
    /// Thread instructions executed.
    pub thread_instructions: u64,
    /// Active threads per warp instruction; blank when the instruction never ran.
    pub threads_per_instruction: Option<f64>,
    /// Global load instructions executed.
    pub global_loads: u64,
    /// Global store instructions executed.
    pub global_stores: u64,
    /// Bytes of the global sectors accessed.
    pub global_sector_bytes: u64,
}

/// Writes sass_hot.csv into `dir`.
pub fn write_sass_hot_csv(dir: &Path, rows: &[SassHotRow]) -> Result<()> {
    let path = dir.join(SASS_HOT_CSV);
    let fail = |e: ::csv::Error| Error::InvalidState(format!("{}: {e}", path.display()));
    write_file(&path, |out| {
        let mut w = ::csv::Writer::from_writer(out);
        for r in rows {
            w.serialize(r).map_err(fail)?;
        }
        w.flush().map_err(|e| Error::io(&path, e))
    })
}
