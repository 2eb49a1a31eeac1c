//! Stream captures in progress in this process, so that gmprof never breaks one.
//!
//! While a stream captures (`cuStreamBeginCapture` … `cuStreamEndCapture`: `torch.cuda.graph`,
//! Inductor's CUDA graph trees, `cudaStreamBeginCapture`), its launches build graph nodes and
//! run nothing. A wait on that stream, a `cuCtxSynchronize`, an allocation or a copy issued by
//! gmprof then fails and invalidates the program's capture (`cudaErrorStreamCaptureInvalidated`:
//! a public GPT-2 under `torch.compile(mode="reduce-overhead")` crashed so under the probes);
//! in the global capture mode the same calls made by any thread of the process do. So every
//! part of gmprof that waits, allocates or copies in the program's process asks [`any`] first
//! and leaves its call out while a capture is in progress: the probe engine (its per-launch
//! work is exactly such calls), and a session's waits ([`SkippedWaits`]: `--sync-on-pop`'s
//! synchronize, a replay pass's, the synchronize before a session's last flush), which it
//! counts and says once, in the report.
//!
//! The captures are heard through CUPTI's driver callbacks ([`CBIDS`]), which the capture hub
//! watches on its subscriber for as long as it has one, whichever features are on, and feeds
//! to [`note_call`] before any other watcher hears the call: a capture that began is counted
//! on the successful exit of its begin call; one that ended is forgotten on the exit of its
//! end call, whatever the result (an invalidated capture ends there too). Captures are kept by
//! stream; the count that [`any`] reads is one atomic load, so a call outside captures pays
//! nothing more. A capture begun before gmprof subscribed (a profiler started by the program
//! inside its own capture) is not heard, and the captures in progress when the hub
//! unsubscribes (its last session left) are forgotten ([`unfollowed`]).
//!
//! Imported by the hub (which watches the calls), the probe engine and the profiler; imports
//! only `checked`'s callback types and `sys`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::checked::callback::{CallbackSite, RawDriverCall};
use crate::sys::cupti::CUpti_driver_api_trace_cbid_enum as Cbid;

/// The driver calls that begin and end a stream capture.
pub const CBIDS: &[Cbid] = &[
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
];

const ENDS: [Cbid; 2] =
    [Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz];

/// The first field of every begin and end call's parameter struct: the stream.
#[repr(C)]
struct StreamFirst {
    stream: *mut std::ffi::c_void,
}

/// Captures in progress, by stream.
struct Captures {
    /// By stream, how many begins without an end (normally 1).
    streams: Mutex<BTreeMap<usize, u32>>,
    /// How many streams capture now; read without the lock.
    in_progress: AtomicUsize,
}

impl Captures {
    const fn new() -> Captures {
        Captures { streams: Mutex::new(BTreeMap::new()), in_progress: AtomicUsize::new(0) }
    }

    fn any(&self) -> bool {
        self.in_progress.load(Ordering::Acquire) > 0
    }

    fn began(&self, stream: usize) {
        let mut streams = self.streams.lock();
        *streams.entry(stream).or_insert(0) += 1;
        self.in_progress.store(streams.len(), Ordering::Release);
    }

    fn ended(&self, stream: usize) {
        let mut streams = self.streams.lock();
        streams.remove(&stream);
        self.in_progress.store(streams.len(), Ordering::Release);
    }

    fn origin_of(&self, stream: usize) -> Option<usize> {
        let streams = self.streams.lock();
        if streams.contains_key(&stream) {
            return Some(stream);
        }
        let mut keys = streams.keys();
        match (keys.next(), keys.next()) {
            (Some(&only), None) => Some(only),
            _ => None,
        }
    }

    fn forget_all(&self) {
        self.streams.lock().clear();
        self.in_progress.store(0, Ordering::Release);
    }

    fn note_call(&self, call: &RawDriverCall) -> bool {
        if !is_capture_call(call.cbid) {
            return false;
        }
        if call.site != CallbackSite::Exit || call.params.is_null() {
            return true;
        }
        // SAFETY: every begin and end call's parameter struct starts with its CUstream, and
        // CUPTI passes the call's own struct, valid for the callback.
        let stream = unsafe { (*(call.params as *const StreamFirst)).stream } as usize;
        if ends(call.cbid) {
            self.ended(stream);
        } else if call.result == Some(0) {
            self.began(stream);
        }
        true
    }
}

/// The process's captures.
static PROCESS: Captures = Captures::new();

/// Whether any stream of the process is capturing now.
pub fn any() -> bool {
    #[cfg(test)]
    if CAPTURING_HERE.with(std::cell::Cell::get) {
        return true;
    }
    PROCESS.any()
}

#[cfg(test)]
thread_local! {
    /// Tests: [`any`] says a stream captures, on this thread only (the process's state is
    /// read by the other tests' sessions running beside it).
    static CAPTURING_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Tests: makes [`any`] say that a stream captures (or not), on the calling thread only.
#[cfg(test)]
pub(crate) fn capturing_on_this_thread(on: bool) {
    CAPTURING_HERE.with(|c| c.set(on));
}

/// The capture a launch on `stream` joins: `stream`'s own, or, when `stream` is not one that
/// began a capture (a stream forked into another's capture through events), the only
/// capture in progress. `None` when several are and `stream` began none of them.
pub fn origin_of(stream: usize) -> Option<usize> {
    PROCESS.origin_of(stream)
}

/// Whether driver callback `cbid` is one of [`CBIDS`].
pub fn is_capture_call(cbid: u32) -> bool {
    CBIDS.iter().any(|c| c.0 == cbid)
}

/// Whether driver callback `cbid` ends a capture.
pub fn ends(cbid: u32) -> bool {
    ENDS.iter().any(|c| c.0 == cbid)
}

/// Whether driver callback `cbid` begins a capture.
pub fn begins(cbid: u32) -> bool {
    CBIDS.iter().any(|c| c.0 == cbid) && !ENDS.iter().any(|c| c.0 == cbid)
}

/// The hub unsubscribed: no capture's end will be heard, so the captures in progress are
/// forgotten (else a capture that ended unheard would hold every later session's waits and
/// starts off). A later subscription hears only the captures that begin after it.
pub fn unfollowed() {
    PROCESS.forget_all();
}

/// Follows a driver call if it begins or ends a capture; returns whether it was one of
/// [`CBIDS`]. The hub's watcher, which hears every one of them before any other watcher.
pub fn note_call(call: &RawDriverCall) -> bool {
    PROCESS.note_call(call)
}

/// A wait (a synchronize) a profiling session makes in the program's process, which it
/// leaves out while a capture is in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// `--sync-on-pop` (`ProfilerBuilder::synchronize_on_pop`): the synchronize at a range's pop.
    SyncOnPop,
    /// The synchronize that ends a user-replay pass, before the range profiler stops.
    ReplayPass,
    /// The synchronize before a session's last activity flush, when it finishes.
    Finish,
}

impl Wait {
    const ALL: [Wait; 3] = [Wait::SyncOnPop, Wait::ReplayPass, Wait::Finish];

    /// The report's warning for `n` such waits left out.
    fn warning(self, n: u64) -> String {
        const WHY: &str = "a synchronize there invalidates the program's capture, and the captured work had \
                           not run";
        match self {
            Wait::SyncOnPop => {
                format!("--sync-on-pop: {n} pop(s) inside a CUDA stream capture were not synchronized ({WHY})")
            }
            Wait::ReplayPass => format!(
                "{n} replay pass(es) ended inside a CUDA stream capture and were not synchronized before the range \
                 profiler stopped ({WHY})"
            ),
            Wait::Finish => "the session finished inside a CUDA stream capture: the context was not synchronized \
                 before the last activity flush (that invalidates the program's capture); kernels still running \
                 then may lack their activity"
                .to_owned(),
        }
    }
}

/// The waits a session left out because a capture was in progress, by kind: counted,
/// said once in the log when the first is left out, and once in the report
/// ([`SkippedWaits::warnings`]).
#[derive(Debug, Default)]
pub struct SkippedWaits {
    counts: [AtomicU64; 3],
}

impl SkippedWaits {
    /// Whether `wait` must be left out now: true while any stream captures, and then counted.
    pub fn skip(&self, wait: Wait) -> bool {
        self.skip_while(wait, any())
    }

    fn skip_while(&self, wait: Wait, capturing: bool) -> bool {
        if !capturing {
            return false;
        }
        if self.counts[wait as usize].fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!("gmprof: {} (the first; the report counts them)", wait.warning(1));
        }
        true
    }

    /// How many waits of kind `wait` were left out.
    pub fn count(&self, wait: Wait) -> u64 {
        self.counts[wait as usize].load(Ordering::Relaxed)
    }

    /// One warning per kind of wait left out, with its count.
    pub fn warnings(&self) -> Vec<String> {
        Wait::ALL.iter().map(|&w| (w, self.count(w))).filter(|(_, n)| *n > 0).map(|(w, n)| w.warning(n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(cbid: Cbid, site: CallbackSite, stream: usize, result: Option<i32>) -> (RawDriverCall, Box<StreamFirst>) {
        let mut params = Box::new(StreamFirst { stream: stream as *mut std::ffi::c_void });
        let raw = RawDriverCall {
            cbid: cbid.0,
            site,
            correlation_id: 1,
            params: &mut *params as *mut StreamFirst as *mut std::ffi::c_void,
            result,
        };
        (raw, params)
    }

    /// Captures on two streams, from begin to end (on a state of the test's own: the
    /// process's is read by every session's waits, in tests running beside this one).
    #[test]
    fn captures_are_followed_by_stream_from_begin_to_end() {
        let captures = Captures::new();
        let begin = Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2;
        let end = Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture;
        assert!(!captures.any());
        // The enter of a begin changes nothing; a failed begin neither.
        let (c, _p) = call(begin, CallbackSite::Enter, 0x10, None);
        assert!(captures.note_call(&c));
        let (c, _p) = call(begin, CallbackSite::Exit, 0x10, Some(900));
        assert!(captures.note_call(&c));
        assert!(!captures.any());
        // Two streams capture; one ends; then the other, whose end failed (invalidated).
        for s in [0x10, 0x20] {
            let (c, _p) = call(begin, CallbackSite::Exit, s, Some(0));
            captures.note_call(&c);
        }
        assert!(captures.any());
        assert_eq!(
            (captures.origin_of(0x10), captures.origin_of(0x99)),
            (Some(0x10), None),
            "two captures: a forked stream's is unknown"
        );
        let (c, _p) = call(end, CallbackSite::Exit, 0x10, Some(0));
        captures.note_call(&c);
        assert!(captures.any(), "stream 0x20 still captures");
        assert_eq!(
            (captures.origin_of(0x20), captures.origin_of(0x99)),
            (Some(0x20), Some(0x20)),
            "a forked stream joins the only capture"
        );
        let (c, _p) = call(end, CallbackSite::Exit, 0x20, Some(901));
        captures.note_call(&c);
        assert!(!captures.any());
        // Other calls are not followed.
        let (c, _p) = call(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CallbackSite::Exit, 0x30, Some(0));
        assert!(!captures.note_call(&c));
        assert!(!captures.any());
        assert!(begins(begin.0) && begins(Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph.0));
        assert!(!begins(end.0) && !begins(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel.0));
        assert!(ends(end.0) && !ends(begin.0));
        assert!(is_capture_call(end.0) && !is_capture_call(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel.0));
        assert_eq!(captures.origin_of(0x10), None);
        // A capture whose end went unheard (the hub unsubscribed) is forgotten with the rest.
        let (c, _p) = call(begin, CallbackSite::Exit, 0x40, Some(0));
        captures.note_call(&c);
        assert!(captures.any());
        captures.forget_all();
        assert!(!captures.any() && captures.origin_of(0x40).is_none());
    }

    #[test]
    fn waits_are_left_out_only_while_a_capture_is_in_progress_and_counted_by_kind() {
        let skipped = SkippedWaits::default();
        assert!(!skipped.skip_while(Wait::SyncOnPop, false));
        assert!(skipped.warnings().is_empty());
        assert!(skipped.skip_while(Wait::SyncOnPop, true));
        assert!(skipped.skip_while(Wait::SyncOnPop, true));
        assert!(skipped.skip_while(Wait::Finish, true));
        assert_eq!((skipped.count(Wait::SyncOnPop), skipped.count(Wait::ReplayPass)), (2, 0));
        let warnings = skipped.warnings();
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].starts_with("--sync-on-pop: 2 pop(s) inside a CUDA stream capture were not synchronized"));
        assert!(warnings[1].starts_with("the session finished inside a CUDA stream capture"));
    }
}
