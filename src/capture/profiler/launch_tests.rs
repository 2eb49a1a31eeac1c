//! The launch path's calls and exits, driven through CUPTI's callback trampoline and the
//! hub (a GPU-less [`LaunchHarness`]): which exits reach the session, and what they give back.

use super::harness::LaunchHarness;
use crate::analysis::correlate::KernelStatus;
use crate::model::ProfilingMode;

/// The modes that hold the launch gate from a launch's enter to its exit.
const GATED: [ProfilingMode; 2] = [ProfilingMode::KernelReplay, ProfilingMode::PerKernel];

#[test]
fn gated_modes_give_the_launch_gate_back_at_every_launch_exit() {
    for mode in GATED {
        let mut h = LaunchHarness::new(mode).unwrap();
        for runtime in [false, true, false] {
            h.launch(runtime);
            assert!(h.gate_is_free(), "{mode:?}: the gate is still held after a launch (runtime {runtime})");
        }
        h.launch_captured(true, 9);
        assert!(h.gate_is_free(), "{mode:?}: the gate is still held after a captured launch");
        assert_eq!(h.recorded().0, 4, "{mode:?}");
    }
}

#[test]
fn a_launch_into_a_capturing_stream_is_counted_as_captured_in_every_mode() {
    // Trace and per_range ask for no exit: only the graph node created inside the call
    // brings its exit to the session.
    for mode in [ProfilingMode::Trace, ProfilingMode::PerRange, ProfilingMode::KernelReplay] {
        let mut h = LaunchHarness::new(mode).unwrap();
        h.launch(false);
        let captured_runtime = h.launch_captured(true, 3);
        let captured_driver = h.launch_captured(false, 3);
        h.launch(true);
        assert_eq!(h.recorded(), (4, 2), "{mode:?}: launches and the runtime calls' nested ids");
        let report = h.report();
        assert_eq!(report.meta.counts.captured_launches, 2, "{mode:?}");
        let rows: Vec<u32> = report.kernels.iter().map(|k| k.correlation_id).collect();
        assert!(
            !rows.contains(&captured_runtime) && !rows.contains(&captured_driver),
            "{mode:?}: a captured launch ran nothing, so it has no kernel row: {rows:?}"
        );
    }
}

#[test]
fn trace_mode_numbers_launches_in_order_without_counters() {
    let mut h = LaunchHarness::trace().unwrap();
    let ids: Vec<u32> = (0..5).map(|i| h.launch_kernel(i % 2 == 1, c"_Z6kernelv")).collect();
    assert_eq!(h.launch_ordinals(), (0..5).map(|o| (ids[o as usize], o)).collect::<Vec<_>>());
}

#[test]
fn a_launch_whose_runtime_call_creates_the_context_is_recorded_under_its_driver_call() {
    // torch.compile's first kernel on an H100: the runtime call's enter came before the
    // context, so only the driver call inside it reached the session. It was once taken for
    // a nested call of an unseen outer one, mapped to correlation id 0, and reported as a
    // kernel with no launch.
    for mode in [ProfilingMode::Trace, ProfilingMode::PerKernel, ProfilingMode::KernelReplay] {
        let mut h = LaunchHarness::new(mode).unwrap();
        let first = h.launch_creating_context();
        assert!(h.gate_is_free(), "{mode:?}");
        let second = h.launch_kernel(true, c"_Z10fill_floatPfi");
        // Records of runtime launches carry the driver call's id (see LaunchHarness::deliver).
        let fill = "_Z10fill_floatPfi";
        h.deliver(vec![h.kernel_record(first, fill, 1_000, 1_960), h.kernel_record(second + 1, fill, 3_000, 3_960)]);
        assert_eq!(h.recorded(), (2, 1), "{mode:?}: two launches, one nested driver call");
        let report = h.report();
        let rows: Vec<(u32, KernelStatus)> = report.kernels.iter().map(|k| (k.correlation_id, k.status)).collect();
        assert!(rows.iter().all(|(id, _)| *id != 0), "{mode:?}: {rows:?}");
        assert_eq!(report.meta.counts.unlaunched_activity, 0, "{mode:?}: {rows:?}");
        assert_eq!(report.meta.counts.missing_activity, 0, "{mode:?}: {rows:?}");
        assert_eq!(rows.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![first, second], "{mode:?}");
    }
}
