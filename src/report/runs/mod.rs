//! Several runs or processes made into one: the per-process outputs of a multi-process run
//! merged ([`merge`], with [`rank_ranges`] reading each process's range times, [`stragglers`]
//! the per-step table, [`merge_trace`] the merged trace and its index, and [`merge_run`]
//! running `gmprof merge`), and the reports of one process's CUDA contexts combined into one
//! ([`devices`]); [`killed`] folds a streamed process killed before its report from its part
//! files.
//!
//! May import [`text`](crate::report::text) (the tables' formatting, the ending line),
//! [`timeline`](crate::report::timeline) (the merged trace is made of each process's),
//! [`tables`](crate::report::tables) (the file writers, the Parquet tables it reads back) and
//! the [`Report`](crate::report::Report) model; not `html` or `diff` (`diff` imports it).

pub mod devices;
pub mod killed;
pub mod merge;
pub mod merge_run;
pub mod merge_trace;
pub mod rank_ranges;
pub mod stragglers;
