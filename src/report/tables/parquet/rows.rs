//! One row of the kernels, transfers and ranges tables, and their columns: shared by the
//! whole-file tables of a [`Report`](crate::report::Report) (`tables`) and the streamed part
//! files (`parts`), so both have one schema.
//!
//! Imports `writer` and the CSV side's column names; `tables` and `parts` import it.

use std::io::Write;

use super::writer::{Column, ColumnType, ParquetRows};
use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{KernelRow, TransferRow};
use crate::error::Result;
use crate::report::tables::csv::{KERNEL_COLUMNS, RANGE_COLUMNS, RANGE_DERIVED_COLUMNS, TRANSFER_COLUMNS};

use ColumnType::{Float64, Int32, Int64, Text};

/// Types of [`RANGE_COLUMNS`], in order.
const RANGE_TYPES: [(ColumnType, bool); 22] = [
    (Int64, true),   // range_slot
    (Int64, true),   // range_generation
    (Text, false),   // path
    (Text, false),   // name
    (Int64, false),  // depth
    (Int64, false),  // instance
    (Int64, true),   // thread
    (Int64, false),  // kernel_count
    (Int64, false),  // self_kernel_count
    (Int64, false),  // flagged_kernel_count
    (Int64, true),   // gpu_time_ns
    (Int64, true),   // wall_time_ns
    (Int64, true),   // start_ns
    (Int64, true),   // end_ns
    (Int64, true),   // gpu_busy_ns
    (Int64, false),  // transfer_count
    (Int64, false),  // transfer_bytes
    (Int64, false),  // memcpy_bytes
    (Int64, false),  // memset_bytes
    (Int64, false),  // untimed_transfer_count
    (Int64, true),   // transfer_time_ns
    (Float64, true), // transfer_gbps
];

/// Types of [`KERNEL_COLUMNS`], in order.
const KERNEL_TYPES: [(ColumnType, bool); 29] = [
    (Int64, false), // correlation_id
    (Int64, true),  // cycle
    (Int64, true),  // ordinal
    (Int64, true),  // range_slot
    (Int64, true),  // range_generation
    (Text, false),  // range_path
    (Text, true),   // kernel_name
    (Text, true),   // mangled_name
    (Int32, true),  // grid_x
    (Int32, true),  // grid_y
    (Int32, true),  // grid_z
    (Int32, true),  // block_x
    (Int32, true),  // block_y
    (Int32, true),  // block_z
    (Int64, true),  // registers_per_thread
    (Int64, true),  // shared_memory_bytes
    (Int64, true),  // stream_id
    (Int64, true),  // thread
    (Int64, true),  // device_id
    (Int64, true),  // start_ns
    (Int64, true),  // end_ns
    (Int64, true),  // duration_ns
    (Text, false),  // time_source
    (Int64, true),  // range_duration_ns
    (Text, false),  // status
    (Text, false),  // granularity
    (Int64, true),  // graph_id
    (Int64, true),  // graph_node_id
    (Int64, true),  // graph_kernels
];

/// Types of [`TRANSFER_COLUMNS`], in order.
const TRANSFER_TYPES: [(ColumnType, bool); 18] = [
    (Int64, false),  // correlation_id
    (Text, false),   // kind
    (Int64, false),  // bytes
    (Int64, true),   // start_ns
    (Int64, true),   // end_ns
    (Int64, true),   // duration_ns
    (Float64, true), // gbps
    (Text, false),   // timing
    (Int64, true),   // stream_id
    (Int64, true),   // device_id
    (Int64, true),   // range_slot
    (Int64, true),   // range_generation
    (Text, false),   // range_path
    (Int64, true),   // thread
    (Text, true),    // api_name
    (Text, false),   // status
    (Int64, true),   // graph_id
    (Int64, true),   // graph_node_id
];

pub(crate) fn typed(names: &[&str], types: &[(ColumnType, bool)]) -> Vec<Column> {
    names.iter().zip(types).map(|(n, &(ty, nullable))| Column { name: (*n).to_owned(), ty, nullable }).collect()
}

pub(crate) fn u32s(v: Option<u32>) -> Option<u64> {
    v.map(u64::from)
}

/// The columns of `kernels.parquet` up to its metrics (probe columns follow in a report's).
pub fn kernel_columns(metric_names: &[&str]) -> Vec<Column> {
    let mut columns = typed(&KERNEL_COLUMNS, &KERNEL_TYPES);
    columns.extend(metric_names.iter().map(|m| Column::null(*m, Float64)));
    columns
}

/// The columns of `transfers.parquet`.
pub fn transfer_columns() -> Vec<Column> {
    typed(&TRANSFER_COLUMNS, &TRANSFER_TYPES)
}

/// The columns of `ranges.parquet` (without `range_devices.parquet`'s `device_id`).
pub fn range_columns(metric_names: &[&str]) -> Vec<Column> {
    let mut columns = typed(&RANGE_COLUMNS, &RANGE_TYPES);
    columns.extend(metric_names.iter().map(|m| Column::null(*m, Float64)));
    columns.extend(RANGE_DERIVED_COLUMNS.iter().map(|m| Column::null(*m, Float64)));
    columns
}

/// A kernel row's values up to its `metrics` metric columns; the caller ends the row.
pub fn push_kernel<W: Write + Send>(w: &mut ParquetRows<W>, k: &KernelRow, metrics: usize) -> Result<()> {
    w.u64(Some(k.correlation_id.into()))?;
    w.u64(u32s(k.cycle))?;
    w.u64(u32s(k.ordinal))?;
    w.u64(u32s(k.range_id.map(|i| i.slot)))?;
    w.u64(u32s(k.range_id.map(|i| i.generation)))?;
    w.text(Some(&k.range_path))?;
    w.text(k.kernel_name.as_deref())?;
    w.text(k.mangled_name.as_deref())?;
    for axis in 0..3 {
        w.i32(k.grid.map(|g| g[axis]))?;
    }
    for axis in 0..3 {
        w.i32(k.block.map(|b| b[axis]))?;
    }
    w.u64(k.registers_per_thread.map(u64::from))?;
    w.i64(k.shared_memory_bytes)?;
    w.u64(u32s(k.stream_id))?;
    w.u64(k.thread)?;
    w.u64(u32s(k.device_id))?;
    w.u64(k.start_ns)?;
    w.u64(k.end_ns)?;
    w.u64(k.duration_ns)?;
    w.text(Some(k.time_source.as_str()))?;
    w.u64(k.range_duration_ns)?;
    w.text(Some(k.status.as_str()))?;
    w.text(Some(k.granularity.as_str()))?;
    w.u64(u32s(k.graph_id))?;
    w.u64(k.graph_node_id)?;
    w.u64(u32s(k.graph_kernels))?;
    for i in 0..metrics {
        w.f64(k.metrics.get(i).copied().flatten())?;
    }
    Ok(())
}

/// A transfer row's values; the caller ends the row.
pub fn push_transfer<W: Write + Send>(w: &mut ParquetRows<W>, t: &TransferRow) -> Result<()> {
    w.u64(Some(t.correlation_id.into()))?;
    w.text(Some(t.kind.as_str()))?;
    w.u64(Some(t.bytes))?;
    w.u64(t.start_ns)?;
    w.u64(t.end_ns)?;
    w.u64(t.duration_ns)?;
    w.f64(t.gbps())?;
    w.text(Some(t.timing.as_str()))?;
    w.u64(u32s(t.stream_id))?;
    w.u64(u32s(t.device_id))?;
    w.u64(u32s(t.range_id.map(|i| i.slot)))?;
    w.u64(u32s(t.range_id.map(|i| i.generation)))?;
    w.text(Some(&t.range_path))?;
    w.u64(t.thread)?;
    w.text(t.api_name.as_deref())?;
    w.text(Some(t.status.as_str()))?;
    w.u64(u32s(t.graph_id))?;
    w.u64(t.graph_node_id)?;
    Ok(())
}

/// A range row's values with its `metrics` metric columns and the derived ones; the caller
/// ends the row.
pub fn push_range<W: Write + Send>(w: &mut ParquetRows<W>, row: &RangeRow, metrics: usize) -> Result<()> {
    w.u64(u32s(row.range_id.map(|i| i.slot)))?;
    w.u64(u32s(row.range_id.map(|i| i.generation)))?;
    w.text(Some(&row.path))?;
    w.text(Some(&row.name))?;
    w.u64(Some(row.depth.into()))?;
    w.u64(Some(row.instance.into()))?;
    w.u64(row.thread)?;
    w.u64(Some(row.kernel_count))?;
    w.u64(Some(row.self_kernel_count))?;
    w.u64(Some(row.flagged_kernel_count))?;
    w.u64(row.gpu_time_ns)?;
    w.u64(row.wall_time_ns)?;
    w.u64(row.start_ns)?;
    w.u64(row.end_ns)?;
    w.u64(row.gpu_busy_ns)?;
    w.u64(Some(row.transfer_count))?;
    w.u64(Some(row.transfer_bytes))?;
    w.u64(Some(row.memcpy_bytes))?;
    w.u64(Some(row.memset_bytes))?;
    w.u64(Some(row.untimed_transfer_count))?;
    w.u64(row.transfer_time_ns)?;
    w.f64(row.transfer_gbps)?;
    for i in 0..metrics {
        w.f64(row.metrics.get(i).copied().flatten())?;
    }
    w.f64(row.dram_read_bytes)?;
    w.f64(row.dram_write_bytes)?;
    w.f64(row.dram_read_gbps)?;
    w.f64(row.dram_write_gbps)?;
    w.f64(row.dram_total_gbps)?;
    Ok(())
}
