//! Scripted libcupti and libcuda, for the fault-injection tests (tests only: `cfg(test)`).
//!
//! Every CUPTI and driver call gmprof makes goes through the function table of the library
//! [`Cupti::load`](crate::checked::Cupti::load) and [`Driver::load`](crate::checked::Driver::load)
//! found: the generated `CuptiLibrary` and `DriverLibrary`, one slot per C function.
//! [`install`] fills those tables with Rust functions of the C signatures (the others stay
//! missing, as in an older CUPTI) and puts them where `load` finds its libraries, before
//! anything loads CUPTI. So gmprof runs exactly as it does over the real libraries: the
//! checked layer's calls and result checks, the callback trampoline, the hub, the
//! profiler's launch path, counter cycles, samplers and probe engine, the injected start and
//! finish, and the writing of the outputs. Nothing on gmprof's side knows it is scripted,
//! and the library pays nothing for the seam (the tables are the ones it always calls).
//!
//! Each scripted function first counts its call; the script ([`Fault`]) makes the `nth` call
//! of a function return an error instead of doing anything, and records that it did
//! ([`fired`]). The program's own CUDA calls are [`Program`]'s and are neither counted nor
//! failed: only gmprof's calls are scripted.
//!
//! Why a table of Rust functions rather than a fake `libcupti.so` in C loaded by path: both
//! run the same gmprof code from the checked layer up (a C library would add only the
//! `dlopen`, which `tests/no_cupti.rs` and `gmprof run`'s tests cover), while these functions
//! share gmprof's generated struct layouts (activity records, profiler parameters, callback
//! data) instead of restating them in C, need no compiler at test time, and live in one
//! process with the program that drives them. Each test runs its program in a child process
//! of its own, so the process-wide state (the loaded library, the injected profiler, the
//! exit handler) is fresh every time.
//!
//! The made-up GPU behind them: one device ("GH100"), the contexts, modules and functions
//! [`Program`] creates, kernels that run when launched and leave activity records, counter
//! ranges (auto and user ranges, decoded into counter data images of the scripted library's
//! own format), PM samples, PC records and SASS metric counts, each only while gmprof has
//! that collection on. Files, bottom up: `script` (faults, call counts, clock), `driver`,
//! `callbacks` (subscriber, activity, ids), `profiler` (target, host, range profiler),
//! `samplers` (PM, PC, SASS metrics, cubins), `program` and `table`.

mod callbacks;
mod driver;
mod profiler;
mod program;
mod samplers;
mod script;
mod table;

pub use self::program::Program;
pub use self::script::{calls, fired, Fault, UNKNOWN_ERROR};
pub use self::table::{install, NAME};
