//! Derived metrics: the DRAM bandwidth columns gmprof computes from collected byte or sector
//! counters ([`DerivedMetric`], the column names, and the inputs found in a metric set).
//!
//! Imports `rules` ([`AggregationRule`], [`kernel_time_input`]); `rows` and `fold` import it,
//! and `aggregate/mod.rs` re-exports its public items.

use serde::{Deserialize, Serialize};

use super::rules::{kernel_time_input, AggregationRule};
use crate::model::{MetricSet, ProfilingMode, GPU_TIME_METRIC};

/// Bytes per DRAM sector, to turn `dram__sectors_*` into bytes.
pub const DRAM_SECTOR_BYTES: f64 = 32.0;

/// Names of the derived DRAM bandwidth columns.
pub const DRAM_READ_GBPS: &str = "dram_read_gbps";
/// See [`DRAM_READ_GBPS`].
pub const DRAM_WRITE_GBPS: &str = "dram_write_gbps";
/// See [`DRAM_READ_GBPS`].
pub const DRAM_TOTAL_GBPS: &str = "dram_total_gbps";

/// A column gmprof derives from collected metrics, recorded in the report's metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DerivedMetric {
    /// Column name, e.g. `dram_read_gbps`.
    pub name: String,
    /// Unit of the column.
    pub unit: String,
    /// The formula, in words.
    pub formula: String,
    /// The collected metrics it is computed from; empty when they were not collected and the
    /// column is left empty.
    pub inputs: Vec<String>,
    /// Its rule.
    pub rule: AggregationRule,
}

/// Where a DRAM byte count comes from.
#[derive(Clone, Copy, Debug)]
struct ByteSource {
    index: usize,
    scale: f64,
}

/// The metric indices the DRAM columns are computed from.
#[derive(Clone, Copy, Debug)]
pub(super) struct DramInputs {
    read: Option<ByteSource>,
    write: Option<ByteSource>,
    /// `dram__bytes.sum`, used for the total only when read or write is missing.
    total: Option<ByteSource>,
}

impl DramInputs {
    pub(super) fn find(set: &MetricSet) -> Self {
        let source = |bytes: &str, sectors: &str| {
            set.index_of(bytes)
                .map(|index| ByteSource { index, scale: 1.0 })
                .or_else(|| set.index_of(sectors).map(|index| ByteSource { index, scale: DRAM_SECTOR_BYTES }))
        };
        Self {
            read: source("dram__bytes_read.sum", "dram__sectors_read.sum"),
            write: source("dram__bytes_write.sum", "dram__sectors_write.sum"),
            total: source("dram__bytes.sum", "dram__sectors.sum"),
        }
    }

    pub(super) fn read_bytes(&self, values: &[Option<f64>]) -> Option<f64> {
        bytes(self.read, values)
    }

    pub(super) fn write_bytes(&self, values: &[Option<f64>]) -> Option<f64> {
        bytes(self.write, values)
    }

    pub(super) fn total_bytes(&self, values: &[Option<f64>]) -> Option<f64> {
        if self.read.is_some() && self.write.is_some() {
            Some(self.read_bytes(values)? + self.write_bytes(values)?)
        } else {
            bytes(self.total, values)
        }
    }

    pub(super) fn describe(&self, set: &MetricSet, mode: ProfilingMode) -> Vec<DerivedMetric> {
        let name_of = |s: Option<ByteSource>| s.and_then(|s| set.metrics.get(s.index)).map(|m| m.name.clone());
        let time = kernel_time_input(mode);
        let with_time = |mut inputs: Vec<String>| {
            let time_known = time != GPU_TIME_METRIC || set.index_of(GPU_TIME_METRIC).is_some();
            if inputs.is_empty() || !time_known {
                Vec::new()
            } else {
                inputs.push(time.to_owned());
                inputs
            }
        };
        let time_text = if time == GPU_TIME_METRIC {
            GPU_TIME_METRIC.to_owned()
        } else {
            format!("kernel durations ({time}, from activity timestamps)")
        };
        let read: Vec<String> = name_of(self.read).into_iter().collect();
        let write: Vec<String> = name_of(self.write).into_iter().collect();
        let total: Vec<String> = if self.read.is_some() && self.write.is_some() {
            read.iter().chain(&write).cloned().collect()
        } else {
            name_of(self.total).into_iter().collect()
        };
        let column = |name: &str, what: &str, inputs: Vec<String>| DerivedMetric {
            name: name.to_owned(),
            unit: "GB/s".to_owned(),
            formula: format!("sum of DRAM bytes {what} / sum of {time_text} (bytes/ns = GB/s); sectors count 32 bytes"),
            inputs: with_time(inputs),
            rule: AggregationRule::RatioOfSums,
        };
        vec![
            column(DRAM_READ_GBPS, "read", read),
            column(DRAM_WRITE_GBPS, "written", write),
            column(DRAM_TOTAL_GBPS, "read and written", total),
        ]
    }
}

fn bytes(source: Option<ByteSource>, values: &[Option<f64>]) -> Option<f64> {
    let source = source?;
    values.get(source.index).copied().flatten().map(|v| v * source.scale)
}
