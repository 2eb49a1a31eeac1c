//! Online aggregates and the steps table: what a run of any length keeps while its rows
//! stream to disk (issue 42).
//!
//! [`OnlineAggregates`] takes kernel rows and completed range instances as they are made and
//! keeps, per range group (paths with numbers folded, as the summary folds them) and per
//! kernel name, count, missing, total, min, max and p50/p90/p99 ([`Distribution`]), for the
//! whole run and per window of steps; its [`StepTracker`] makes one [`StepRow`] per step.
//! Nothing here holds a row: memory is bounded by [`OnlineSettings`], not by the run.
//!
//! The quantiles come from DDSketch (`sketches-ddsketch`), chosen over HdrHistogram and
//! t-digest: it bounds the *relative* error of every quantile (1 % here) for any input, so a
//! p99 of 2 µs kernels and one of 200 ms steps are both right to 1 %; it merges exactly
//! (windows into the whole run); and its memory grows with the logarithm of the value range
//! seen (about 5 KiB for values from 1 µs to 1 s). HdrHistogram gives a comparable bound but
//! allocates its whole value range up front (tens to hundreds of KiB per histogram at 2 to 3
//! significant digits, per kernel name and per window); t-digest bounds no error.
//!
//! Files, bottom up: `folding` ([`fold_numbers`]), `settings`, `distribution`, `steps`,
//! `aggregates`; beside them `instances` ([`RangeInstances`]: range rows made as ranges
//! complete, for the streamed outputs) and the flight recorder, `flight_rules`
//! ([`FlightSettings`], [`TriggerRule`]) and `flight` ([`FlightRecorder`]: the last steps of
//! full detail, and the windows its triggers make of them). This `mod.rs` only declares and re-exports them; no file imports it.
//!
//! May import `model` and the rows of `correlate` and `aggregate`.

pub mod aggregates;
pub mod distribution;
pub mod flight;
pub mod flight_rules;
pub mod folding;
pub mod instances;
pub mod settings;
pub mod steps;

pub use self::aggregates::{
    AggregateQuantity, AggregateRow, AggregateTable, OnlineAggregates, WindowAggregates, NO_NAME,
};
pub use self::distribution::{Distribution, DistributionSummary, QUANTILES, RELATIVE_ERROR};
pub use self::flight::{FlightRecorder, FlightSummary, FlightWindow, StepDetail, WindowEntry};
pub use self::flight_rules::{FlightSettings, SlowStepRule, StepTime, TriggerRule};
pub use self::folding::{fold_numbers, NUMBER_MARK};
pub use self::instances::RangeInstances;
pub use self::settings::{OnlineSettings, DEFAULT_WINDOW_STEPS, OTHER_KEY};
pub use self::steps::{StepGroup, StepRow, StepTracker, MAX_STEP_GROUPS};
