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

/// How long the streamed drains took: the part under the session's lock (the program's
/// launches wait for it) and the whole drain (the rows' writing, with the session let go).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainTimes {
    /// Drains that moved rows while the run went (the finish's last one not counted).
    pub drains: u64,
    /// Their time under the session's lock, summed, in ns.
    pub session_lock_ns: u64,
    /// The longest one, in ns.
    pub session_lock_max_ns: u64,
    /// Their whole time (flush to rows written), summed, in ns.
    pub total_ns: u64,
    /// The longest one, in ns.
    pub total_max_ns: u64,
    /// The drains' other holds of the session's lock, summed, in ns: moving CUPTI's records
    /// into the session before each drain, and removing the ranges it completed after it
    /// (in turns, the lock let go between two).
    #[serde(default)]
    pub other_lock_ns: u64,
    /// The longest single one of those holds, in ns.
    #[serde(default)]
    pub other_lock_max_ns: u64,
    /// Time giving the allocator's free pages back after the drains
    /// ([`release_free_memory`](super::release_free_memory)), summed, in ns (0 when off).
    #[serde(default)]
    pub release_ns: u64,
    /// The longest one, in ns.
    #[serde(default)]
    pub release_max_ns: u64,
}

impl DrainTimes {
    /// Adds one drain: `held_ns` under the session's lock, `total_ns` in all.
    pub fn add(&mut self, held_ns: u64, total_ns: u64) {
        self.drains += 1;
        self.session_lock_ns += held_ns;
        self.session_lock_max_ns = self.session_lock_max_ns.max(held_ns);
        self.total_ns += total_ns;
        self.total_max_ns = self.total_max_ns.max(total_ns);
    }

    /// Adds one drain's other holds of the session's lock: `ns` in all, `longest_ns` the
    /// longest single hold.
    pub fn add_other_lock(&mut self, ns: u64, longest_ns: u64) {
        self.other_lock_ns += ns;
        self.other_lock_max_ns = self.other_lock_max_ns.max(longest_ns);
    }

    /// Adds one release of free memory that took `ns`.
    pub fn add_release(&mut self, ns: u64) {
        self.release_ns += ns;
        self.release_max_ns = self.release_max_ns.max(ns);
    }
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
    /// How long the drains took, and how long the program's launches could wait for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_times: Option<DrainTimes>,
    /// The flight recorder's windows (`window-N/`), when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flight: Option<FlightSummary>,
    /// PM sampling: kernels with no row in `pm/`, shorter than half a sample window
    /// ([`crate::report::stream::PmKernelRows`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pm_kernels_left_out: u64,
    /// Their GPU time, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pm_kernels_left_out_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
