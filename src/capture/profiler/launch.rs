//! The launch path: what runs inside the program's CUDA calls (launch and transfer
//! callbacks, the kernel-replay gate, per-kernel CUPTI ranges) and the activity records that
//! arrive from the hub.

use std::borrow::Cow;
use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::sync::atomic::Ordering;

use crate::capture::hub::CaptureSession;
use crate::checked::activity::ActivityRecord;
use crate::checked::callback::{ApiCallback, ApiDomain, LaunchKind};
use crate::model::{
    CapturedNode, LaunchApi, LaunchRecord, ProfilingMode, RangeId, ThreadId, TransferCall, TransferKind,
    UntimedTransfer,
};

use super::state::{Counters, SessionState, Shared};

/// The calling thread's OS id (Linux `gettid`), cached per thread.
pub fn current_thread_id() -> ThreadId {
    thread_local! {
        static TID: Cell<u64> = const { Cell::new(0) };
    }
    TID.with(|t| {
        if t.get() == 0 {
            t.set(os_thread_id());
        }
        t.get()
    })
}

#[cfg(target_os = "linux")]
fn os_thread_id() -> u64 {
    extern "C" {
        fn gettid() -> i32;
    }
    // SAFETY: gettid takes no arguments and cannot fail (glibc 2.30+).
    let tid = unsafe { gettid() };
    tid as u64
}

#[cfg(not(target_os = "linux"))]
fn os_thread_id() -> u64 {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A correlation id as a NUL-terminated decimal string on the stack: the per-kernel range's
/// name, made without allocating on the launch path.
struct IdName {
    bytes: [u8; 11],
    start: usize,
}

impl IdName {
    fn new(mut id: u32) -> Self {
        // u32::MAX has 10 digits; the last byte is the NUL.
        let mut bytes = [0u8; 11];
        let mut start = 10;
        loop {
            start -= 1;
            bytes[start] = b'0' + (id % 10) as u8;
            id /= 10;
            if id == 0 {
                break;
            }
        }
        IdName { bytes, start }
    }
}

impl std::ops::Deref for IdName {
    type Target = CStr;
    fn deref(&self) -> &CStr {
        // Digits, then the one NUL at the end: a valid C string.
        CStr::from_bytes_with_nul(&self.bytes[self.start..]).unwrap_or_default()
    }
}

thread_local! {
    /// Correlation id of this thread's outermost launch call in flight.
    static OUTER_CORRELATION: Cell<u32> = const { Cell::new(0) };
    /// Whether this thread holds the kernel-replay launch gate.
    static HOLDS_GATE: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread's launch in flight opened a per-kernel CUPTI range.
    static PUSHED_KERNEL_RANGE: Cell<bool> = const { Cell::new(false) };
    /// This thread's memset in flight under kernel replay, which no activity record will
    /// time: recorded from its parameters at its exit, once its result is known.
    static UNTIMED_MEMSET: Cell<Option<PendingMemset>> = const { Cell::new(None) };
    /// Whether this thread's call in flight is a memset whose parameters could not be read
    /// (kernel replay): counted, and reported in a warning.
    static UNREAD_MEMSET: Cell<bool> = const { Cell::new(false) };
    /// Correlation id of this thread's memcpy or memset in flight whose parameters were read
    /// (0: none): its exit notes an error on its call.
    static TRANSFER_IN_FLIGHT: Cell<u32> = const { Cell::new(0) };
    /// Correlation id of this thread's call in flight whose return is stamped (0: none;
    /// sessions that time API calls only).
    static TIMED_CALL: Cell<u32> = const { Cell::new(0) };
}

/// A memset call between its enter and exit callbacks (kernel replay).
#[derive(Clone, Copy)]
struct PendingMemset {
    correlation_id: u32,
    thread: ThreadId,
    range: Option<RangeId>,
    api_name: &'static str,
    bytes: u64,
}

impl Shared {
    pub(super) fn drain_activity(&self) {
        let records = std::mem::take(&mut *self.incoming.lock());
        if records.is_empty() {
            return;
        }
        // Lock order: replay, capture, state.
        let mut replay = self.replay.lock();
        let mut state = self.state.lock();
        let heard = std::mem::take(&mut state.alias_log);
        state.aliases.extend(heard);
        for record in records {
            match record {
                ActivityRecord::Kernel(mut k) => {
                    if let Some(outer) = state.aliases.get(&k.correlation_id) {
                        k.correlation_id = *outer;
                    }
                    if state.after_finish.contains(&k.correlation_id) {
                        state.records_after_finish += 1;
                        continue;
                    }
                    if state.after_seal.contains(&k.correlation_id) || self.ended_before_start(k.end_ns) {
                        continue;
                    }
                    if replay.tracks(k.correlation_id) && !crate::analysis::correlate::is_profiler_internal_kernel(&k) {
                        replay.signatures.insert(k.correlation_id, (k.name.clone(), k.grid, k.block));
                    }
                    // A later replay pass re-runs pass 0's kernels: not rows of their own.
                    if !replay.replayed.contains(&k.correlation_id) {
                        state.correlator.add_activity(k);
                    }
                }
                ActivityRecord::Transfer(mut t) => {
                    if let Some(outer) = state.aliases.get(&t.correlation_id) {
                        t.correlation_id = *outer;
                    }
                    if state.after_finish.contains(&t.correlation_id) {
                        state.records_after_finish += 1;
                        continue;
                    }
                    if state.after_seal.contains(&t.correlation_id) || self.ended_before_start(t.end_ns) {
                        continue;
                    }
                    state.correlator.add_transfer_activity(t);
                }
            }
        }
    }

    /// Whether a record that ended at `end_ns` (CUPTI clock) ended before the session
    /// started: work launched before it, whose record CUPTI still held when the session's
    /// activity began (an on-demand capture starts in a running program, and the last
    /// record of the idle time before it can arrive in its first buffer). Left out without
    /// a warning, as launches after the seal are. An incomplete record (`end_ns` 0) is kept.
    fn ended_before_start(&self, end_ns: u64) -> bool {
        end_ns != 0 && end_ns < self.clock_start.cupti_ns
    }

    /// The enter callback of a launch or transfer call. Runs inside the launching thread's
    /// CUDA call. Never panics outward (the trampoline catches), never calls the CUDA API it
    /// interrupts. Whatever its exit must undo (the launch gate, a per-kernel range, a
    /// memset to record) is taken only after [`hub::want_exit`](crate::capture::hub::want_exit).
    pub(super) fn on_call_enter(&self, cb: &ApiCallback<'_>, nested: bool) {
        if nested {
            // The runtime calls the driver inside: the same kernel or copy. Map the inner id
            // to the outer so either id finds the call.
            let outer = OUTER_CORRELATION.with(Cell::get);
            if outer != cb.correlation_id {
                self.state.lock().alias_log.push((cb.correlation_id, outer));
            }
            return;
        }
        OUTER_CORRELATION.with(|c| c.set(cb.correlation_id));
        if self.finished.load(Ordering::Acquire) {
            // Launched while the session finishes (another thread, after a signal): its
            // records are left out and counted, not reported as unlaunched.
            self.state.lock().after_finish.insert(cb.correlation_id);
            return;
        }
        if self.sealed.load(Ordering::Acquire) {
            // After the session's window (an on-demand capture's last step): not its work.
            self.state.lock().after_seal.insert(cb.correlation_id);
            return;
        }
        if cb.launch == LaunchKind::Transfer {
            self.record_transfer(cb);
            return;
        }
        crate::capture::last_launch::note(cb.correlation_id);
        if matches!(self.mode, ProfilingMode::KernelReplay | ProfilingMode::PerKernel) {
            crate::capture::hub::want_exit();
            // Held until this launch's exit callback; see the module docs.
            std::mem::forget(self.launch_gate.lock());
            HOLDS_GATE.with(|h| h.set(true));
        }
        self.on_kernel_launch(cb);
        if self.time_api_calls {
            time_return(cb.correlation_id);
        }
    }

    /// A call stamp of [`Shared::time_api_calls`]: the clock's time, or `None` counted with
    /// the first failure's code.
    fn call_stamp(&self) -> Option<u64> {
        match self.launch_clock.read()? {
            Ok(ns) => Some(ns),
            Err(code) => {
                self.call_stamps_missed.fetch_add(1, Ordering::Relaxed);
                let _ = self.call_stamp_error.compare_exchange(0, code.0, Ordering::Relaxed, Ordering::Relaxed);
                None
            }
        }
    }

    /// The exit callback of an outermost call that asked for it at its enter, or that
    /// created graph nodes (`created`: its stream was capturing, so it built a graph and ran
    /// nothing).
    pub(super) fn on_call_exit(&self, cb: &ApiCallback<'_>, created: Vec<CapturedNode>) {
        // First, so that the stamp is as close to the call's return as the callback gets.
        let timed = if self.time_api_calls { TIMED_CALL.with(|t| t.replace(0)) } else { 0 };
        let returned_ns = if timed != 0 { self.call_stamp() } else { None };
        if PUSHED_KERNEL_RANGE.with(|p| p.replace(false)) {
            self.pop_kernel_range();
        }
        if UNREAD_MEMSET.with(|u| u.replace(false)) && !created.is_empty() {
            // A captured memset ran nothing: nothing was lost.
            self.memsets_unread.fetch_sub(1, Ordering::Relaxed);
        }
        let transfer = TRANSFER_IN_FLIGHT.with(|t| t.replace(0));
        if let Some(error) = cb.result.filter(|&code| transfer != 0 && code != 0) {
            let mut state = self.state.lock();
            state.correlator.note_transfer_error(transfer, error);
            // A CUDA error (a sticky one surfaces at the next copy): the flight recorder's
            // ring is worth a window.
            if let Some(pipeline) = state.stream.as_mut().and_then(|s| s.pipeline.as_mut()) {
                pipeline.request_window(format!("{} returned CUDA error {error}", cb.function_name));
            }
        }
        let memset = UNTIMED_MEMSET.with(Cell::take);
        if memset.is_some() || !created.is_empty() {
            let mut state = self.state.lock();
            if let Some(m) = memset {
                self.record_untimed_memset(&mut state, m, cb.result, !created.is_empty());
            }
            if !created.is_empty() {
                // The call's stream was capturing: it built a graph, nothing ran.
                let correlation_id = OUTER_CORRELATION.with(Cell::get);
                state.correlator.add_captured_call(correlation_id, created);
            }
        }
        if HOLDS_GATE.with(|h| h.replace(false)) {
            // SAFETY: this thread locked the gate in the matching enter callback and forgot
            // the guard; CUPTI calls enter and exit on the same thread.
            unsafe { self.launch_gate.force_unlock() };
        }
        if let Some(ns) = returned_ns {
            self.state.lock().correlator.note_call_end(timed, ns);
        }
    }

    /// A memcpy or memset entered (outermost API level).
    pub(super) fn record_transfer(&self, cb: &ApiCallback<'_>) {
        let thread = current_thread_id();
        if self.mode == ProfilingMode::KernelReplay && crate::checked::memset::is_memset(cb.function_name) {
            // No memset activity under kernel replay (see ActivityKinds::KernelsAndMemcpy):
            // the call's own parameters make its row, at its exit.
            match cb.memset() {
                Some(call) => {
                    crate::capture::hub::want_exit();
                    let range = self.attribute(&self.state.lock().tree, thread);
                    let pending = PendingMemset {
                        correlation_id: cb.correlation_id,
                        thread,
                        range,
                        api_name: cb.function_name,
                        bytes: call.bytes,
                    };
                    UNTIMED_MEMSET.with(|u| u.set(Some(pending)));
                }
                None => {
                    crate::capture::hub::want_exit();
                    self.memsets_unread.fetch_add(1, Ordering::Relaxed);
                    UNREAD_MEMSET.with(|u| u.set(true));
                }
            }
            return;
        }
        let params = cb.transfer_params();
        if params.is_some() {
            crate::capture::hub::want_exit();
            TRANSFER_IN_FLIGHT.with(|t| t.set(cb.correlation_id));
        }
        let mut state = self.state.lock();
        if self.time_api_calls {
            // Under the lock that attributes the call, as a launch's stamp is.
            if let Some(ns) = self.call_stamp() {
                state.correlator.note_call_start(cb.correlation_id, ns);
            }
            time_return(cb.correlation_id);
        }
        let range = self.attribute(&state.tree, thread);
        state.correlator.add_transfer_call(TransferCall {
            correlation_id: cb.correlation_id,
            thread,
            range,
            api_name: Cow::Borrowed(cb.function_name),
            untimed: None,
            params,
        });
    }

    /// A kernel-replay memset returned: a transfer call that carries its own size. One that
    /// failed set nothing and is left out; one made while its stream was capturing is kept,
    /// to be counted as captured (it built a graph node).
    fn record_untimed_memset(&self, state: &mut SessionState, m: PendingMemset, result: Option<i32>, captured: bool) {
        if !captured && result.is_some_and(|code| code != 0) {
            tracing::debug!("gmprof: {} (correlation id {}) failed with {result:?}", m.api_name, m.correlation_id);
            return;
        }
        state.correlator.add_transfer_call(TransferCall {
            correlation_id: m.correlation_id,
            thread: m.thread,
            range: m.range,
            api_name: Cow::Borrowed(m.api_name),
            untimed: Some(UntimedTransfer { kind: TransferKind::Memset, bytes: m.bytes, device_id: self.device_id }),
            params: None,
        });
    }

    /// Records a launch: its counter cycle and ordinal (cycling a full counter image first),
    /// and, with `kernel_range`, opens its per-kernel CUPTI range under the same lock.
    pub(super) fn record_launch(
        &self,
        cb: &ApiCallback<'_>,
        replay_active: bool,
        kernel_range: bool,
    ) -> Option<RangeId> {
        // A counter image numbers launches per cycle. Without one (trace, per_range, or no
        // counters) the launch is numbered under the state lock below, and trace and
        // per_range take no other lock.
        let counted = !matches!(self.mode, ProfilingMode::Trace | ProfilingMode::PerRange);
        let mut unmeasured = false;
        let (cycle, ordinal) = if !counted {
            (0, None)
        } else {
            let mut guard = self.capture.lock();
            let capture = guard.as_mut()?;
            match capture.counters.as_mut() {
                Some(counters) => {
                    let cycling_allowed = counters.running && !replay_active;
                    // In kernel replay a graph launch makes one auto range per kernel node, a
                    // number unknown here: it gets a counter image of its own.
                    let graph_alone = self.mode == ProfilingMode::KernelReplay && cb.launch == LaunchKind::Graph;
                    let full = counters.cycle_due();
                    if cycling_allowed && (full || graph_alone && counters.ordinal_in_cycle > 0) {
                        if let Err(e) = self.cycle_counter_image(counters) {
                            tracing::error!("gmprof: could not cycle the counter image: {e}");
                            self.state.lock().warnings.push(format!("counter image cycle failed: {e}"));
                        }
                    } else if counters.restart.is_some() && !replay_active {
                        // A failed cycle left the profiler stopped: this launch tries again.
                        self.next_cycle_if_due(counters);
                    }
                    let at = (counters.cycle, Some(counters.ordinal_in_cycle));
                    counters.ordinal_in_cycle += 1;
                    if graph_alone {
                        // The next launch starts a new image.
                        counters.ordinal_in_cycle =
                            counters.ordinal_in_cycle.max(counters.config.max_ranges_per_pass as u32);
                    }
                    // Without rotation no state lock is taken here: every per_kernel launch is measured.
                    let measured =
                        kernel_range && (!counters.rotating || self.rotation_measures(!counters.image_full(), cb));
                    if measured {
                        self.push_kernel_range_locked(counters, &IdName::new(cb.correlation_id));
                    } else if kernel_range {
                        unmeasured = true;
                    }
                    at
                }
                None => {
                    // No image (the harness): the rotation still decides what would be measured.
                    unmeasured = kernel_range && !self.rotation_measures(true, cb);
                    (0, None)
                }
            }
        };
        let ordinal_from_state = ordinal.is_none();
        let thread = current_thread_id();
        let mut state = self.state.lock();
        let ordinal = ordinal.unwrap_or_else(|| state.next_launch_ordinal());
        // Without a counter image (the harness), the cycle its script numbers.
        let cycle = if counted && ordinal_from_state { state.uncounted_cycle } else { cycle };
        let range = self.attribute(&state.tree, thread);
        if let Some(symbol) = cb.kernel_symbol() {
            state.recent.note(cb.correlation_id, symbol.to_bytes());
        }
        // Taken inside the call (its kernel starts after it) and under the lock that
        // attributes the launch, so it lies inside the range it goes to: the thread's own
        // ranges are pushed before the call and popped after it, and another thread's range
        // (process scope) is in the tree from its push to its pop, each stamped just before
        // taking this lock. `None` where CUPTI gives no timestamp.
        let launch_ns = self.launch_clock.now();
        state.correlator.add_launch(LaunchRecord {
            correlation_id: cb.correlation_id,
            thread,
            range,
            cycle,
            ordinal,
            api: match (cb.launch, cb.domain) {
                (LaunchKind::Graph, _) => LaunchApi::Graph,
                (_, ApiDomain::Driver) => LaunchApi::Driver,
                (_, ApiDomain::Runtime) => LaunchApi::Runtime,
            },
            api_name: Cow::Borrowed(cb.function_name),
            context_id: cb.context_uid,
            launch_ns,
            unmeasured,
        });
        range
    }

    /// A kernel or graph launch entered (outermost API level, the gate held if needed).
    pub(super) fn on_kernel_launch(&self, cb: &ApiCallback<'_>) {
        if !self.user_replay() {
            // No replay state in kernel_replay and trace: keep the launch path lock-light.
            self.record_launch(cb, false, false);
            return;
        }
        let mut replay = self.replay.lock();
        if replay.replaying() {
            // A later replay pass: nothing new for the report; the CUPTI range is named like
            // pass 0's kernel at this position, so CUPTI merges the passes.
            let position = replay.kernel_cursor;
            replay.kernel_cursor += 1;
            if let Some(pass) = replay.pass_kernels.last_mut() {
                pass.push(cb.correlation_id);
            }
            replay.tracked.insert(cb.correlation_id);
            replay.replayed.insert(cb.correlation_id);
            let name = replay.kernel_script.get(position).map(|(c, _)| *c);
            drop(replay);
            if self.mode == ProfilingMode::PerKernel {
                match name {
                    Some(c) => self.push_kernel_range(&IdName::new(c)),
                    None => {
                        let extra = format!("gmprof-replay-extra-{}", cb.correlation_id);
                        self.push_kernel_range(&CString::new(extra).unwrap_or_default());
                    }
                }
            }
            return;
        }
        let active = replay.active;
        if !active && self.user_replay() && self.passes > 1 {
            replay.unreplayed_launches += 1;
        }
        drop(replay);
        // The per-kernel CUPTI range opens under the same lock as the launch's ordinal.
        // Kernel and graph launches alike (transfers never get here): a graph launch's range
        // measures the whole graph.
        let kernel_range = self.mode == ProfilingMode::PerKernel;
        let range = self.record_launch(cb, active, kernel_range);
        if active {
            let mut replay = self.replay.lock();
            replay.kernel_script.push((cb.correlation_id, range));
            replay.tracked.insert(cb.correlation_id);
        }
    }

    /// Whether the launch in flight opens its per-kernel range: always without rotation; with
    /// it, when its position falls in its step's slot ([`super::rotation`]) and the image has
    /// `room`. Takes the state lock (under the capture lock where there is an image).
    fn rotation_measures(&self, room: bool, cb: &ApiCallback<'_>) -> bool {
        let mut state = self.state.lock();
        let state = &mut *state;
        let Some(rotation) = state.rotation.as_mut() else { return true };
        let range = self.attribute(&state.tree, current_thread_id());
        let step = rotation.step_of(&state.tree, range);
        let node = step.and_then(|s| state.tree.get(s));
        let (step_name, push_ns) = node.map_or(("", None), |n| (n.name.as_str(), Some(n.push_ns)));
        let name = cb.kernel_symbol().map_or(&b""[..], CStr::to_bytes);
        let stall = &self.rotation_stall_ns;
        rotation.next(step, step_name, push_ns, name, room, &mut || stall.swap(0, Ordering::Relaxed)).measured
    }

    /// Opens the per-kernel CUPTI range of the launch in flight (PerKernel mode).
    pub(super) fn push_kernel_range(&self, name: &CStr) {
        let mut guard = self.capture.lock();
        let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) else { return };
        self.push_kernel_range_locked(counters, name);
    }

    /// [`Shared::push_kernel_range`] with the capture lock held.
    fn push_kernel_range_locked(&self, counters: &mut Counters, name: &CStr) {
        let Some(rp) = counters.range_profiler.as_ref().filter(|_| counters.running) else { return };
        let t0 = counters.rotating.then(std::time::Instant::now);
        let pushed = self.retried(|| rp.push_cstr(name));
        if let Some(t0) = t0 {
            self.rotation_stall_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        match pushed {
            Ok(()) => {
                counters.user_depth += 1;
                counters.ranges_in_cycle += 1;
                crate::capture::hub::want_exit();
                PUSHED_KERNEL_RANGE.with(|p| p.set(true));
            }
            Err(e) => {
                // Lock order: capture, then state.
                self.state.lock().warnings.push(format!("per-kernel range {}: {e}", name.to_string_lossy()));
            }
        }
    }

    /// Closes the per-kernel CUPTI range at the launch's exit.
    pub(super) fn pop_kernel_range(&self) {
        let mut guard = self.capture.lock();
        let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) else { return };
        let Some(rp) = counters.range_profiler.as_ref().filter(|_| counters.running && counters.user_depth > 0) else {
            return;
        };
        let t0 = counters.rotating.then(std::time::Instant::now);
        let popped = self.retried(|| rp.pop());
        if let Some(t0) = t0 {
            self.rotation_stall_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        match popped {
            Ok(()) => counters.user_depth -= 1,
            // CUPTI's range stays open past its launch: the cycle's counters cannot be
            // trusted, so they are dropped when it is collected.
            Err(e) => {
                counters.broken.get_or_insert(format!("a per-kernel CUPTI range did not close: {e}"));
            }
        }
    }
}

/// Asks for the exit callback of this thread's call in flight, `correlation_id`, to stamp
/// its return ([`Shared::time_api_calls`] only).
fn time_return(correlation_id: u32) {
    crate::capture::hub::want_exit();
    TIMED_CALL.with(|t| t.set(correlation_id));
}

impl CaptureSession for Shared {
    fn on_call_enter(&self, cb: &ApiCallback<'_>, nested: bool) {
        Shared::on_call_enter(self, cb, nested);
    }

    fn on_call_exit(&self, cb: &ApiCallback<'_>, created: Vec<crate::model::CapturedNode>) {
        Shared::on_call_exit(self, cb, created);
    }

    fn on_records(&self, mut records: Vec<ActivityRecord>) {
        self.incoming.lock().append(&mut records);
    }
}

#[cfg(test)]
mod tests {
    use super::IdName;

    #[test]
    fn correlation_ids_become_c_strings_without_allocating() {
        for id in [0u32, 7, 10, 4096, 123_456_789, u32::MAX] {
            assert_eq!(IdName::new(id).to_str().ok(), Some(id.to_string().as_str()));
        }
    }
}
