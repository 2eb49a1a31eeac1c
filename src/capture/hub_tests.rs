//! The hub's routing on made-up records and calls, and the launch hook on a harness session
//! (`profiler::harness`): a child of `hub.rs` that `hub.rs` never imports, so naming the
//! harness from here makes no circle.

use super::*;

fn copy(correlation_id: u32, context_id: u32) -> ActivityRecord {
    ActivityRecord::Transfer(crate::model::TransferActivity {
        correlation_id,
        kind: crate::model::TransferKind::MemcpyPtoP,
        bytes: 4 << 20,
        start_ns: 10,
        end_ns: 20,
        stream_id: 7,
        context_id,
        device_id: 1,
        graph_id: 0,
        graph_node_id: 0,
    })
}

#[test]
fn a_copy_between_gpus_goes_to_the_session_that_heard_its_call() {
    // `.to("cuda:1")` called in context 1 (GPU 0); CUPTI's peer copy record carries
    // context 2 (GPU 1), as on two H100s.
    let mut calls = TransferCalls::new();
    calls.note(41, 1);
    calls.note(42, 1);
    assert_eq!(route_key(&copy(42, 2), Some(&calls)), 1, "the caller's context");
    assert_eq!(route_key(&copy(43, 2), Some(&calls)), 2, "a call nobody heard: the record's own");
    assert_eq!(route_key(&copy(42, 2), None), 2, "one session: records go by their context");
    // Bounded: the oldest calls are forgotten first.
    for id in 0..TransferCalls::CAPACITY as u32 + 100 {
        calls.note(1_000 + id, 3);
    }
    assert_eq!(calls.owner(41), None);
    assert_eq!(calls.owner(1_000 + TransferCalls::CAPACITY as u32 + 99), Some(3));
    assert_eq!(calls.order.len(), TransferCalls::CAPACITY);
}

#[test]
fn calls_of_an_earlier_epoch_are_forgotten() {
    // A thread inside a routed call when the callbacks went off never heard its exit.
    forget_calls_of_an_earlier_epoch();
    CALL_DEPTH.with(|d| d.set(2));
    ROUTED_LEVELS.with(|r| r.set(0b11));
    IN_CALL.with(|c| c.set(true));
    forget_calls_of_an_earlier_epoch();
    assert_eq!(CALL_DEPTH.with(Cell::get), 2, "same epoch: nothing changes");
    LAUNCH_EPOCH.fetch_add(1, Ordering::AcqRel); // the callbacks came on again
    forget_calls_of_an_earlier_epoch();
    assert_eq!((CALL_DEPTH.with(Cell::get), ROUTED_LEVELS.with(Cell::get)), (0, 0));
    assert!(!IN_CALL.with(Cell::get));
}

#[test]
fn the_launch_hook_runs_at_the_next_outermost_call_of_its_context() {
    let mut h = crate::capture::profiler::harness::LaunchHarness::trace().unwrap();
    let own = h.context_id();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    set_launch_hook(Some(Arc::new(move |context| {
        // Other tests' harnesses launch too: only this context's call counts.
        if context == own {
            log.lock().push(context);
            set_launch_hook(None);
        }
    })));
    // While a stream of the program captures, what the hook starts (a session) would
    // invalidate the capture: it waits for the first call after the capture.
    crate::capture::stream_capture::capturing_on_this_thread(true);
    h.launch(false);
    crate::capture::stream_capture::capturing_on_this_thread(false);
    assert!(heard.lock().is_empty(), "the hook ran during a stream capture");
    assert!(LAUNCH_HOOK_SET.load(Ordering::Acquire));
    assert_eq!(launch_hook_deferred(), 1);
    h.launch(true); // a runtime launch: the hook runs once, at the outer call
    h.launch(false);
    assert_eq!(*heard.lock(), [own]);
    assert!(!LAUNCH_HOOK_SET.load(Ordering::Acquire));
}

#[test]
fn launches_and_kernels_of_unprofiled_contexts_are_counted_per_context() {
    // Context ids of this test only: the table is process-wide.
    let (a, b) = (900_001, 900_002);
    note_unprofiled(a, 1, 0, None);
    note_unprofiled(a, 1, 0, None);
    note_unprofiled(b, 0, 3, Some(1));
    note_unprofiled(a, 0, 2, Some(0));
    note_unprofiled(0, 7, 7, Some(0)); // no context yet: not a context
    let mine = |own: u32| -> Vec<UnprofiledContext> {
        unprofiled_contexts(own)
            .into_iter()
            .filter(|c| c.context_id == a || c.context_id == b || c.context_id == 0)
            .collect()
    };
    assert_eq!(
        mine(1),
        [
            UnprofiledContext { context_id: a, device_id: Some(0), launches: 2, kernels: 2, why: None },
            UnprofiledContext { context_id: b, device_id: Some(1), launches: 0, kernels: 3, why: None },
        ]
    );
    // A session's own context is never among the others.
    assert_eq!(mine(a), [UnprofiledContext { context_id: b, device_id: Some(1), launches: 0, kernels: 3, why: None }]);
}
