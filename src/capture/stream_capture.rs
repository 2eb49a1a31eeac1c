//! Stream captures in progress in this process, so that gmprof never breaks one.
//!
//! While a stream captures (`cuStreamBeginCapture` … `cuStreamEndCapture`: `torch.cuda.graph`,
//! Inductor's CUDA graph trees, `cudaStreamBeginCapture`), its launches build graph nodes and
//! run nothing. A wait on that stream, a `cuCtxSynchronize`, an allocation or a copy issued by
//! gmprof then fails and invalidates the program's capture (`cudaErrorStreamCaptureInvalidated`:
//! a public GPT-2 under `torch.compile(mode="reduce-overhead")` crashed so under the probes);
//! in the global capture mode the same calls made by any thread of the process do. So the
//! probe engine, whose per-launch work is exactly such calls, asks [`any`] first and leaves
//! the launch alone while a capture is in progress.
//!
//! The captures are heard through CUPTI's driver callbacks ([`CBIDS`], which the probe engine
//! hooks beside its own and feeds to [`note_call`]): a capture that began is counted on the successful exit
//! of its begin call; one that ended is forgotten on the exit of its end call, whatever the
//! result (an invalidated capture ends there too). Captures are kept by stream; the count
//! that [`any`] reads is one atomic load, so a launch outside captures pays nothing more.
//!
//! Imported by the probe engine (`capture/probe/engine.rs`); imports only `checked`'s
//! callback types and `sys`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Captures in progress, by stream (the value: how many begins without an end, normally 1).
static STREAMS: Mutex<BTreeMap<usize, u32>> = Mutex::new(BTreeMap::new());
/// How many streams capture now; read without the lock.
static IN_PROGRESS: AtomicUsize = AtomicUsize::new(0);

/// Whether any stream of the process is capturing now.
pub fn any() -> bool {
    IN_PROGRESS.load(Ordering::Acquire) > 0
}

/// A capture of `stream` began.
pub fn began(stream: usize) {
    let mut streams = STREAMS.lock();
    *streams.entry(stream).or_insert(0) += 1;
    IN_PROGRESS.store(streams.len(), Ordering::Release);
}

/// The capture of `stream` ended (or failed to: either way the stream left capture mode).
pub fn ended(stream: usize) {
    let mut streams = STREAMS.lock();
    streams.remove(&stream);
    IN_PROGRESS.store(streams.len(), Ordering::Release);
}

/// The capture a launch on `stream` joins: `stream`'s own, or, when `stream` is not one that
/// began a capture (a stream forked into another's capture through events), the only
/// capture in progress. `None` when several are and `stream` began none of them.
pub fn origin_of(stream: usize) -> Option<usize> {
    let streams = STREAMS.lock();
    if streams.contains_key(&stream) {
        return Some(stream);
    }
    let mut keys = streams.keys();
    match (keys.next(), keys.next()) {
        (Some(&only), None) => Some(only),
        _ => None,
    }
}

/// Whether driver callback `cbid` ends a capture.
pub fn ends(cbid: u32) -> bool {
    ENDS.iter().any(|c| c.0 == cbid)
}

/// Whether driver callback `cbid` begins a capture.
pub fn begins(cbid: u32) -> bool {
    CBIDS.iter().any(|c| c.0 == cbid) && !ENDS.iter().any(|c| c.0 == cbid)
}

/// Follows a driver call if it begins or ends a capture; returns whether it was one of
/// [`CBIDS`] (the caller has nothing more to do with it then).
pub fn note_call(call: &RawDriverCall) -> bool {
    if !CBIDS.iter().any(|c| c.0 == call.cbid) {
        return false;
    }
    if call.site != CallbackSite::Exit || call.params.is_null() {
        return true;
    }
    // SAFETY: every begin and end call's parameter struct starts with its CUstream, and
    // CUPTI passes the call's own struct, valid for the callback.
    let stream = unsafe { (*(call.params as *const StreamFirst)).stream } as usize;
    if ENDS.iter().any(|c| c.0 == call.cbid) {
        ended(stream);
    } else if call.result == Some(0) {
        began(stream);
    }
    true
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

    /// One test walks the process-wide state through begins and ends on two streams (the
    /// state is global, so the steps run in one test, in order).
    #[test]
    fn captures_are_followed_by_stream_from_begin_to_end() {
        let begin = Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2;
        let end = Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture;
        assert!(!any());
        // The enter of a begin changes nothing; a failed begin neither.
        let (c, _p) = call(begin, CallbackSite::Enter, 0x10, None);
        assert!(note_call(&c));
        let (c, _p) = call(begin, CallbackSite::Exit, 0x10, Some(900));
        assert!(note_call(&c));
        assert!(!any());
        // Two streams capture; one ends; then the other, whose end failed (invalidated).
        for s in [0x10, 0x20] {
            let (c, _p) = call(begin, CallbackSite::Exit, s, Some(0));
            note_call(&c);
        }
        assert!(any());
        assert_eq!(
            (origin_of(0x10), origin_of(0x99)),
            (Some(0x10), None),
            "two captures: a forked stream's is unknown"
        );
        let (c, _p) = call(end, CallbackSite::Exit, 0x10, Some(0));
        note_call(&c);
        assert!(any(), "stream 0x20 still captures");
        assert_eq!(
            (origin_of(0x20), origin_of(0x99)),
            (Some(0x20), Some(0x20)),
            "a forked stream joins the only capture"
        );
        let (c, _p) = call(end, CallbackSite::Exit, 0x20, Some(901));
        note_call(&c);
        assert!(!any());
        // Other calls are not followed.
        let (c, _p) = call(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CallbackSite::Exit, 0x30, Some(0));
        assert!(!note_call(&c));
        assert!(!any());
        assert!(begins(begin.0) && begins(Cbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph.0));
        assert!(!begins(end.0) && !begins(Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel.0));
        assert!(ends(end.0) && !ends(begin.0));
        assert_eq!(origin_of(0x10), None);
    }
}
