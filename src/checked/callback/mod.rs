//! CUPTI callback subscription: gmprof hears each kernel launch as it happens, and, when
//! injected into a program, its NVTX ranges and the creation and destruction of contexts.
//!
//! This `mod.rs` only declares the folder's files and re-exports their public items (the
//! crate names them as `checked::callback::X`); no file imports it. Bottom up: `kinds` (call
//! site, API domain, launch kind: imports nothing), `ids` (the callback ids gmprof listens
//! to), `events` (what a handler gets, and the handler types), `dispatch` (the `extern "C"`
//! trampoline and the handlers' box), `subscriber` ([`Subscriber`]), and `bench` (a
//! trampoline CUPTI never saw, for the benchmark and CPU tests).

#[cfg(any(test, feature = "bench-internals"))]
mod bench;
mod dispatch;
mod events;
mod ids;
mod kinds;
mod subscriber;

#[cfg(any(test, feature = "bench-internals"))]
pub(crate) use self::bench::{BenchCall, BenchTrampoline};
pub use self::dispatch::quietly;
pub use self::events::{
    ApiCallback, ApiHandler, ContextEvent, ContextHandler, DriverHook, GraphEvent, GraphHandler, ModuleHandler,
    NvtxEvent, NvtxHandler, ProfilerApiCall, ProfilerApiHandler, RawDriverCall,
};
pub use self::ids::{
    DRIVER_GRAPH_LAUNCHES, DRIVER_KERNEL_LAUNCHES, NVTX_RANGE_CALLBACKS, RUNTIME_GRAPH_LAUNCHES,
    RUNTIME_KERNEL_LAUNCHES,
};
pub use self::kinds::{ApiDomain, CallbackSite, LaunchKind};
pub use self::subscriber::Subscriber;
