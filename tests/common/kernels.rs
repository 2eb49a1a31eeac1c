//! Recorded-like launches for correlator tests: one runtime launch record and its kernel
//! activity record (1×1×1 grid and block, stream 7, context 1), in the range open on the thread.

// Each test crate uses the helpers it needs.
#![allow(dead_code)]

use gmprof::correlate::Correlator;
use gmprof::model::{KernelActivity, LaunchApi, LaunchRecord, RangeId, ThreadId};
use gmprof::session::SessionTree;

/// Adds launch `id` of kernel `name` by `thread`, which ran on the GPU from `start_ns` to `end_ns`.
pub fn launch_kernel(
    tree: &SessionTree,
    correlator: &mut Correlator,
    thread: ThreadId,
    id: u32,
    name: &str,
    start_ns: u64,
    end_ns: u64,
) {
    correlator.add_launch(launch_record(tree, thread, id, id));
    correlator.add_activity(kernel_activity(id, name, start_ns, end_ns));
}

/// The runtime launch record of launch `id` by `thread` (cycle 0, position `ordinal`), in the
/// range open on the thread.
pub fn launch_record(tree: &SessionTree, thread: ThreadId, id: u32, ordinal: u32) -> LaunchRecord {
    launch_record_in(tree.current(thread), thread, id, ordinal)
}

/// [`launch_record`] in range `range`.
pub fn launch_record_in(range: Option<RangeId>, thread: ThreadId, id: u32, ordinal: u32) -> LaunchRecord {
    LaunchRecord {
        correlation_id: id,
        thread,
        range,
        cycle: 0,
        ordinal,
        api: LaunchApi::Runtime,
        api_name: "cudaLaunchKernel".into(),
        context_id: 1,
        launch_ns: None,
        unmeasured: false,
    }
}

/// The activity record of kernel `name` of launch `id` that ran from `start_ns` to `end_ns`.
pub fn kernel_activity(id: u32, name: &str, start_ns: u64, end_ns: u64) -> KernelActivity {
    KernelActivity {
        correlation_id: id,
        name: name.into(),
        grid: [1, 1, 1],
        block: [1, 1, 1],
        stream_id: 7,
        context_id: 1,
        start_ns,
        end_ns,
        ..Default::default()
    }
}
