//! `gmprof diff`: two runs compared, range by range and kernel by kernel, with each change
//! judged against the noise of the runs themselves.
//!
//! Layer 3 (the safe profiler), report output. The values compared and found are `model.rs`'s
//! ([`Diff`], [`DiffRow`], ...), which every file here imports; `compare.rs` reads the sides and
//! judges the rows ([`Diff::of`]), [`table`], [`export`] and [`html`] write them out.
//!
//! May import [`runs`](crate::report::runs) (finding and reading the processes of a run),
//! [`html`](crate::report::html) (the page every HTML file shares), [`text`](crate::report::text)
//! (folding numbered names, warm-up, the tables' formatting), [`tables`](crate::report::tables)
//! (the file writer) and the [`Report`](crate::report::Report) model. The top folder of
//! `report`: nothing imports it but the command line and Python.
//!
//! # What is compared
//!
//! Each side is one output directory: one process's (with `report.json`) or a run of
//! several processes (ranks), whose instances are pooled. Range rows are grouped as the
//! summary groups them (by path, numbers folded: `Train step #/Layer #`), kernels by name.
//! Warm-up instances (`skip_first`, as in `gmprof report --skip-first`) are left out. For
//! each range group and kernel, and each quantity measured on both sides (GPU time per
//! instance, kernels per range instance, every metric both runs collected, DRAM bandwidth),
//! the instances' values of the two runs are the two samples.
//!
//! # When a change is beyond noise
//!
//! A change is marked (`slower`/`faster` for GPU time, `higher`/`lower` otherwise) when
//! all hold:
//! - the two-sided Mann–Whitney U rank test ([`rank_test`]) rejects "no difference" at
//!   `alpha` (default 0.05) after Holm's adjustment over all tests of its kind (ranges, or
//!   kernels), so 20 or 200 rows compared do not make false alarms likelier;
//! - the medians differ by at least `threshold_pct` (default 2 %): a real but negligible
//!   shift, or a run-to-run drift of the GPU's clocks, is not a change worth a look;
//! - for GPU time, its impact on the total is at least `min_impact_pct` (default 0.1 %) of
//!   the base run's steady-state GPU time: on an H100, a 5.8 us backward of a position
//!   embedding measured 4 % (223 ns) faster beside a model whose MLPs were widened, beyond
//!   noise but 0.006 % of the step; 0 marks every change, however small.
//!
//! Anything else is `noise`; a quantity with fewer than [`MIN_SAMPLES`] values on a side is
//! `too_few` (with 3 against 3 the rank test cannot reach 0.05 at all); one measured on
//! neither side is `unmeasured`. Ranges and kernels present on one side only are listed
//! apart (`only_base`, `only_new`). Rows are sorted by impact on the total: the change of
//! the mean GPU time per instance times the new run's instances per process.
//!
//! # Comparable runs
//!
//! [`Diff::warnings`] says when the runs differ in GPU, chip, clocks' maximum, driver,
//! mode, time source or metric set, when either is partial, or when either has dropped
//! records or flagged rows: their numbers may then differ for reasons the code change did
//! not cause.

mod comparable;
mod compare;
pub mod export;
pub mod html;
mod model;
pub mod rank_test;
mod samples;
pub mod table;

pub use self::compare::read_side;
pub use self::model::{Diff, DiffOptions, DiffRow, Gate, Kind, SideInfo, Verdict, GPU_TIME, KERNELS, MIN_SAMPLES};
