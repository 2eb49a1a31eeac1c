//! A fault at every CUPTI and driver call point (issue 43): tests only, run by `cargo test`
//! on the CPU (README, "A fault at every CUPTI and driver call").
//!
//! Each run is a child process of the unit test binary ([`child`]): it installs the scripted
//! libcupti and libcuda ([`crate::checked::scripted`]) with the run's faults, starts gmprof as
//! the CUDA driver does (`InitializeInjection`), in the environment `gmprof run` gives a
//! program, and runs a made-up program of one of eight workloads. The parent ([`run`]) reads
//! back what `gmprof run` reads (the processes' outputs, the summary, the end-of-run
//! messages) and every output file. [`reference`] keeps each workload's run without a fault
//! (with gmprof, and without it); [`checks`] holds what every fault's run must pass.
//! [`points`] is README's table, a test per point, and [`sweep`] fails every function a run
//! calls, at its first call and its last. [`stream_captures`] runs programs that capture a
//! CUDA stream, whose capture gmprof's waits must leave alone (issue 43).
//!
//! Bottom up: `child`, `run`, `reference`, `checks`, then `points`, `sweep` and
//! `stream_captures`.

mod checks;
mod child;
mod points;
mod reference;
mod run;
mod stream_captures;
mod sweep;
