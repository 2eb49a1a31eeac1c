//! What `report.json` says of a run whose rows were streamed ([`StreamedSummary`]): why, the
//! part files written, and the whole run's aggregates in place of the rows.
//!
//! Imports only `analysis::online`'s rows; `report::model` holds it in
//! [`Report::streamed`](crate::report::Report::streamed), `pipeline` makes it.

use serde::{Deserialize, Serialize};

use crate::analysis::online::{AggregateRow, FlightSummary, StepRow};

/// One streamed table's part files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamedTable {
    /// Its directory, beside `report.json` (`kernels`, `steps`, ...).
    pub table: String,
    /// Closed part files.
    pub parts: u32,
    /// Rows in them.
    pub rows: u64,
}

/// A run whose rows left memory as they were streamed: the whole-file row tables
/// (`ranges`, `kernels`, `transfers`, `stats` as CSV and Parquet) are not written, the part
/// files hold every row, and these aggregates stand for them in the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamedSummary {
    /// Why the rows were streamed, in words.
    pub why: String,
    /// The row limit (`GMPROF_ROW_LIMIT`) the run passed.
    pub row_limit: u64,
    /// Kernel rows streamed.
    pub kernels: u64,
    /// Transfer rows streamed.
    pub transfers: u64,
    /// Range instances streamed (the root row included).
    pub ranges: u64,
    /// Step rows (`steps/`).
    pub steps: u64,
    /// The step range group, when one was found.
    pub step_group: Option<String>,
    /// Each streamed table's parts.
    pub tables: Vec<StreamedTable>,
    /// The whole run's aggregates (per range group and per kernel name); the windows' are
    /// in `aggregates/`.
    pub aggregates: Vec<AggregateRow>,
    /// The steps table's first rows (at most
    /// [`MAX_REPORT_STEPS`](crate::report::stream::writer::MAX_REPORT_STEPS), without their
    /// range groups, which are in `step_ranges/`).
    #[serde(default)]
    pub steps_table: Vec<StepRow>,
    /// Step rows beyond those, in `steps/` only.
    #[serde(default)]
    pub steps_table_left_out: u64,
    /// The flight recorder's windows (`window-N/`), when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flight: Option<FlightSummary>,
}
