//! Analysis: turns capture's records into rows.
//!
//! Stage 2 of the pipeline (`ways_in → capture → analysis → report`). [`correlate`] joins
//! launch records, activity records and decoded counter ranges into one row per kernel and
//! per transfer; [`aggregate`] sums them into one row per range by each metric's rule.
//! [`Report::analyze`] runs both and builds the [`Report`].
//!
//! May import: `model`, `error`, and `report` (to build the [`Report`] value). Never
//! `capture`, `checked` or `ways_in`: analysis runs on recorded data alone, which is what the
//! CPU tests feed it.

pub mod aggregate;
pub mod correlate;
