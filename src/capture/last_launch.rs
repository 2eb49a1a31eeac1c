//! The hook that ties an in-kernel timer buffer to its launch: the correlation id of the
//! last kernel (or graph) launch the profiler recorded on the calling thread.
//!
//! The launch callback notes it; `ways_in::device_timers` reads it right after the launch
//! the buffer was passed to, so the decoded records join that launch's kernel row and range.

use std::cell::Cell;

thread_local! {
    static LAST_KERNEL_LAUNCH: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Called by the launch callback for every profiled kernel or graph launch.
pub(crate) fn note(correlation_id: u32) {
    LAST_KERNEL_LAUNCH.with(|c| c.set(Some(correlation_id)));
}

/// The correlation id of the last kernel launch profiled on this thread, if any.
pub fn last_kernel_correlation_id() -> Option<u32> {
    LAST_KERNEL_LAUNCH.with(Cell::get)
}
