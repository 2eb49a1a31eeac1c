//! The timeline: `trace.json` and everything placed on it, and the checker that reads it back.
//!
//! [`trace`] writes a report as a Chrome trace (Perfetto); its document, the events and their
//! args, is [`events`]. The CUPTI-clock placement of ranges, kernels and transfers (`placement`)
//! is shared with `probe_trace.json` ([`probe_trace`]), so both put a launch at the same time;
//! [`lanes`] moves slices that overlap on one track to lanes of their own; [`device_timers`]
//! adds the in-kernel region tracks. A streamed run's `trace.json` is [`step_trace`]'s
//! whole-run step timeline, read from its part files. [`trace_check`] checks any such file (`gmprof
//! check-trace`). [`kineto`] writes `trace.json` in the form PyTorch's profiler writes
//! (`--trace-format kineto`), for Holistic Trace Analysis.
//!
//! May import [`tables`](crate::report::tables) (the file writer) and the
//! [`Report`](crate::report::Report) model; no other folder of `report`. The multi-process
//! trace ([`merge_trace`](crate::report::runs::merge_trace)) and the HTML report import it.

pub mod device_timers;
pub mod events;
pub mod kineto;
mod kineto_events;
pub mod kineto_steps;
pub mod lanes;
mod placement;
pub mod probe_trace;
pub mod step_trace;
pub mod trace;
pub mod trace_check;

pub use self::events::{
    ChromeTrace, EventArgs, KernelArgs, Phase, RangeArgs, SkippedRows, TraceEvent, TraceInfo, TransferArgs,
    COUNTER_TID, CPU_PID, GPU_PID_BASE, PAUSE_TID, PM_TID, SYNTHETIC_PLACEMENT,
};
