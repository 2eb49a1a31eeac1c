//! The per-row tables of a report, each written as CSV and as Parquet: ranges, kernels and
//! transfers ([`csv`]), their Parquet twins and reader ([`parquet`]), statistics per label
//! ([`stats`]), PM samples ([`pm_csv`]), PC stall reasons ([`pc_csv`]), in-kernel region
//! timers ([`regions`]), the probe engine's tables ([`probes`], [`probe_kernels`],
//! [`sass_hot`]), and which of the two formats a run writes ([`formats`]).
//!
//! The bottom folder of `report`: its files import the [`Report`](crate::report::Report)
//! model (`report/model.rs`) and no other folder of `report`. Every other folder may import
//! it (its atomic file writer, the CSV record writer and the tables' columns).

pub mod csv;
pub mod formats;
pub mod parquet;
pub mod pc_csv;
pub mod pm_csv;
pub mod positions;
pub mod probe_kernels;
pub mod probes;
pub mod regions;
pub mod sass_hot;
pub mod stats;
