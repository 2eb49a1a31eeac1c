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
//! instruction: 32 is no divergence), `global_loads`, `global_stores`,
//! `global_sector_bytes` (32-byte sectors the instruction accessed), and `file` and `line`
//! where the kernel's cubin has line information (`cuptiGetSassToSourceCorrelation` on the
//! cubin CUPTI handed over when the module was loaded; blank for kernels built without
//! `-lineinfo`, such as cuBLAS's).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::csv::write_records;
use crate::error::Result;

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
    /// The instruction's source file, where the kernel's cubin has line information
    /// (`-lineinfo`, Triton's kernels); blank otherwise.
    pub file: Option<String>,
    /// Its source line; blank with the file.
    pub line: Option<u32>,
}

/// Writes sass_hot.csv into `dir`.
pub fn write_sass_hot_csv(dir: &Path, rows: &[SassHotRow]) -> Result<()> {
    write_records(&dir.join(SASS_HOT_CSV), rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_columns_and_blank_lines() {
        let row = |line: Option<u32>| SassHotRow {
            kernel: "spin(float*, int)".into(),
            mangled: "_Z4spinPfi".into(),
            cubin_crc: 2_734_640_872,
            launches: 3,
            rank: 1,
            pc_offset: "0x130".into(),
            instructions: 196_416,
            share: 0.0508,
            thread_instructions: 6_285_312,
            threads_per_instruction: Some(32.0),
            global_loads: 0,
            global_stores: 0,
            global_sector_bytes: 0,
            file: line.map(|_| "bench/sass_metrics_floor.cu".into()),
            line,
        };
        let dir = tempfile::tempdir().unwrap();
        write_sass_hot_csv(dir.path(), &[row(Some(58)), row(None)]).unwrap();
        let text = std::fs::read_to_string(dir.path().join(SASS_HOT_CSV)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "kernel,mangled,cubin_crc,launches,rank,pc_offset,instructions,share,thread_instructions,\
             threads_per_instruction,global_loads,global_stores,global_sector_bytes,file,line"
        );
        assert!(lines[1].ends_with(",bench/sass_metrics_floor.cu,58"), "{}", lines[1]);
        assert!(lines[2].ends_with(",0,0,0,,"), "no line information is blank, not 0: {}", lines[2]);
    }
}
