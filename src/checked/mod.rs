//! Layer 2: the checked layer.
//!
//! A thin, honest wrapper over [`crate::sys`]: every CUPTI and CUDA driver call goes through
//! one place that turns its result code into an [`Error`](crate::Error) naming the code,
//! CUPTI's description, the API and what gmprof was doing; every CUPTI object is owned by an
//! RAII type whose `Drop` releases it and which also offers an explicit fallible close
//! (`shutdown(self) -> Result<()>`, after nvml-wrapper) for callers who want the error.
//!
//! Nothing here knows about ranges or reports; that is layer 3. Thread rules live in the
//! types: objects bound to a CUDA context are `!Send` unless stated otherwise.

/// Calls a CUPTI function through a loaded [`library::Cupti`], mapping a missing symbol and
/// a failing result to [`Error`](crate::Error).
///
/// `call_cupti!(cupti, cuptiFoo, "what gmprof is doing", |f| unsafe { f(&mut params) })`.
/// The closure-like tail is where the caller writes the `unsafe` call with its own
/// `// SAFETY:` comment, so every unsafe block is documented where its invariants are known.
macro_rules! call_cupti {
    ($cupti:expr, $func:ident, $context:expr, |$f:ident| $call:expr) => {{
        let lib: &$crate::checked::library::Cupti = &$cupti;
        match lib.symbol(&lib.raw().$func, stringify!($func), $context) {
            Ok($f) => {
                let code = $call;
                lib.check(code, stringify!($func), $context)
            }
            Err(e) => Err(e),
        }
    }};
}

/// As [`call_cupti!`], for the CUDA driver.
macro_rules! call_driver {
    ($driver:expr, $func:ident, $context:expr, |$f:ident| $call:expr) => {{
        let lib: &$crate::checked::library::Driver = &$driver;
        match lib.symbol(&lib.raw().$func, stringify!($func), $context) {
            Ok($f) => {
                let code = $call;
                lib.check(code, stringify!($func), $context)
            }
            Err(e) => Err(e),
        }
    }};
}

/// A CUPTI profiler params struct, zeroed, with `structSize` set as
/// `CUPTI_PROFILER_STRUCT_SIZE(type, last_field)` does in C: CUPTI reads the size to know
/// which fields the caller knows about.
macro_rules! cupti_params {
    ($ty:ty, $last:ident) => {{
        let mut p = <$ty>::default();
        p.structSize = ::std::mem::offset_of!($ty, $last) + ::std::mem::size_of_val(&p.$last);
        p
    }};
}

pub mod activity;
pub mod callback;
pub mod device_memory;
pub mod driver;
pub mod host;
pub mod library;
pub mod memcpy;
pub mod memset;
pub mod module;
pub mod pc_sampling;
pub mod pm_sampling;
pub mod range_profiler;
pub mod sass_metrics;
#[cfg(test)]
pub mod scripted;
pub mod self_time;
pub mod target;

pub use library::{Cupti, Driver};
