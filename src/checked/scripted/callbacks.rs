//! The scripted libcupti's callbacks and activity: the subscriber (and the callbacks the
//! made-up program raises through it), activity buffers and their records, CUPTI's clock,
//! and the ids and names CUPTI gives.
//!
//! Imports `script` and `driver` (contexts); `program` and `table` import it.

use std::collections::HashSet;
use std::ffi::{c_char, c_void, CStr};

use parking_lot::Mutex;

use super::driver;
use super::script::{fault, interned, now, Ran};
use crate::sys::cupti::{
    CUcontext, CUptiResult, CUpti_Activity, CUpti_ActivityKernel10, CUpti_ActivityKind, CUpti_ActivityMemcpy6,
    CUpti_BuffersCallbackCompleteFunc, CUpti_BuffersCallbackRequestFunc, CUpti_CallbackDomain, CUpti_CallbackFunc,
    CUpti_CallbackId, CUpti_SubscriberHandle, CUpti_driver_api_trace_cbid_enum as DriverCbid,
};

const SUCCESS: CUptiResult = CUptiResult::CUPTI_SUCCESS;

/// Counts the call; returns the scripted failure when there is one.
macro_rules! scripted {
    ($name:literal) => {
        if let Some(code) = fault($name) {
            return CUptiResult(code);
        }
    };
}

/// The one subscriber: its callback, its userdata and the callbacks it enabled.
struct Subscription {
    callback: CUpti_CallbackFunc,
    userdata: usize,
    enabled: HashSet<(u32, u32)>,
}

static SUBSCRIBER: Mutex<Option<Subscription>> = Mutex::new(None);

/// The handle [`cupti_subscribe`] gives out.
static HANDLE: u8 = 0;

fn handle() -> CUpti_SubscriberHandle {
    &HANDLE as *const u8 as CUpti_SubscriberHandle
}

pub(super) unsafe extern "C" fn cupti_subscribe(
    subscriber: *mut CUpti_SubscriberHandle,
    callback: CUpti_CallbackFunc,
    userdata: *mut c_void,
) -> CUptiResult {
    scripted!("cuptiSubscribe");
    let mut slot = SUBSCRIBER.lock();
    if slot.is_some() {
        return CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    if subscriber.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    *slot = Some(Subscription { callback, userdata: userdata as usize, enabled: HashSet::new() });
    // SAFETY: checked non-null; gmprof's out-pointer.
    unsafe { subscriber.write(handle()) };
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_unsubscribe(subscriber: CUpti_SubscriberHandle) -> CUptiResult {
    scripted!("cuptiUnsubscribe");
    let mut slot = SUBSCRIBER.lock();
    if slot.is_none() || subscriber != handle() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    *slot = None;
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_enable_callback(
    enable: u32,
    subscriber: CUpti_SubscriberHandle,
    domain: CUpti_CallbackDomain,
    cbid: CUpti_CallbackId,
) -> CUptiResult {
    scripted!("cuptiEnableCallback");
    let mut slot = SUBSCRIBER.lock();
    let Some(s) = slot.as_mut().filter(|_| subscriber == handle()) else {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    };
    if enable != 0 {
        s.enabled.insert((domain.0, cbid));
    } else {
        s.enabled.remove(&(domain.0, cbid));
    }
    SUCCESS
}

/// The API functions the made-up program calls, by callback id: CUPTI names every id, and
/// gmprof finds the memcpys and memsets among them by name.
pub(super) const DRIVER_NAMES: [(DriverCbid, &CStr); 4] = [
    (DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, c"cuLaunchKernel"),
    (DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, c"cuMemcpyHtoD_v2"),
    (DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, c"cuMemcpyDtoH_v2"),
    (DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, c"cuModuleLoadData"),
];

pub(super) unsafe extern "C" fn cupti_get_callback_name(
    domain: CUpti_CallbackDomain,
    cbid: u32,
    name: *mut *const c_char,
) -> CUptiResult {
    scripted!("cuptiGetCallbackName");
    if name.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let found = match domain {
        CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API => {
            DRIVER_NAMES.iter().find(|(id, _)| id.0 == cbid).map(|(_, n)| *n).unwrap_or(c"cuOther")
        }
        CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API => c"cudaOther",
        _ => return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
    };
    // SAFETY: checked non-null; gmprof's out-pointer.
    unsafe { name.write(found.as_ptr()) };
    SUCCESS
}

/// Calls the subscriber with `data` for `(domain, cbid)`, when it enabled that callback (as
/// CUPTI does inside the program's call); the lock is not held while it runs.
pub(super) fn raise(domain: CUpti_CallbackDomain, cbid: u32, data: *const c_void) {
    let target = SUBSCRIBER
        .lock()
        .as_ref()
        .filter(|s| s.enabled.contains(&(domain.0, cbid)))
        .and_then(|s| s.callback.map(|f| (f, s.userdata)));
    if let Some((callback, userdata)) = target {
        // SAFETY: the subscriber's own callback and userdata, with the callback data CUPTI
        // passes for this domain, valid for the call.
        unsafe { callback(userdata as *mut c_void, domain, cbid, data) };
    }
}

/// A record waiting in the made-up CUPTI's buffers.
#[derive(Clone, Copy, Debug)]
enum Record {
    Kernel(Ran, CUpti_ActivityKind),
    Memcpy { correlation_id: u32, context_id: u32, bytes: u64, start: u64, end: u64 },
}

/// The activity registration: buffer callbacks, kinds enabled, records waiting.
struct Activity {
    requested: CUpti_BuffersCallbackRequestFunc,
    completed: CUpti_BuffersCallbackCompleteFunc,
    kinds: Vec<u32>,
    pending: Vec<Record>,
    /// Records that found no buffer, not yet asked for.
    dropped: usize,
}

static ACTIVITY: Mutex<Activity> =
    Mutex::new(Activity { requested: None, completed: None, kinds: Vec::new(), pending: Vec::new(), dropped: 0 });

pub(super) unsafe extern "C" fn cupti_activity_register_callbacks(
    requested: CUpti_BuffersCallbackRequestFunc,
    completed: CUpti_BuffersCallbackCompleteFunc,
) -> CUptiResult {
    scripted!("cuptiActivityRegisterCallbacks");
    if requested.is_none() || completed.is_none() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let mut a = ACTIVITY.lock();
    a.requested = requested;
    a.completed = completed;
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_activity_enable(kind: CUpti_ActivityKind) -> CUptiResult {
    scripted!("cuptiActivityEnable");
    let mut a = ACTIVITY.lock();
    if !a.kinds.contains(&kind.0) {
        a.kinds.push(kind.0);
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_activity_disable(kind: CUpti_ActivityKind) -> CUptiResult {
    scripted!("cuptiActivityDisable");
    ACTIVITY.lock().kinds.retain(|k| *k != kind.0);
    SUCCESS
}

/// A kernel ran: its record waits for the next flush, when kernel records are enabled.
pub(super) fn kernel_ran(ran: &Ran) {
    let mut a = ACTIVITY.lock();
    let kind =
        [CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL]
            .into_iter()
            .find(|k| a.kinds.contains(&k.0));
    if let Some(kind) = kind {
        a.pending.push(Record::Kernel(*ran, kind));
    }
}

/// A memcpy ran: its record waits for the next flush, when memcpy records are enabled.
pub(super) fn memcpy_ran(correlation_id: u32, context_id: u32, bytes: u64, start: u64, end: u64) {
    let mut a = ACTIVITY.lock();
    if a.kinds.contains(&CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY.0) {
        a.pending.push(Record::Memcpy { correlation_id, context_id, bytes, start, end });
    }
}

/// Bytes a record of `kind` takes in a buffer (8-byte aligned); 0 for kinds never written.
fn record_size(kind: CUpti_ActivityKind) -> usize {
    let size = match kind {
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL | CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
            std::mem::size_of::<CUpti_ActivityKernel10>()
        }
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => std::mem::size_of::<CUpti_ActivityMemcpy6>(),
        _ => 0,
    };
    size.div_ceil(8) * 8
}

impl Record {
    fn kind(&self) -> CUpti_ActivityKind {
        match self {
            Record::Kernel(_, kind) => *kind,
            Record::Memcpy { .. } => CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
        }
    }

    /// Writes the record as CUPTI lays it out.
    ///
    /// # Safety
    /// `at` has room for [`record_size`] of its kind.
    unsafe fn write(&self, at: *mut u8) {
        match *self {
            Record::Kernel(r, kind) => {
                let k = CUpti_ActivityKernel10 {
                    kind,
                    start: r.start,
                    end: r.end,
                    completed: r.end,
                    deviceId: 0,
                    contextId: r.context_id,
                    streamId: 7,
                    gridX: r.grid[0] as i32,
                    gridY: r.grid[1] as i32,
                    gridZ: r.grid[2] as i32,
                    blockX: r.block[0] as i32,
                    blockY: r.block[1] as i32,
                    blockZ: r.block[2] as i32,
                    registersPerThread: 32,
                    correlationId: r.correlation_id,
                    name: r.name.as_ptr(),
                    ..Default::default()
                };
                // SAFETY: the caller's guarantee; unaligned, as buffers are only 8-aligned.
                unsafe { (at as *mut CUpti_ActivityKernel10).write_unaligned(k) };
            }
            Record::Memcpy { correlation_id, context_id, bytes, start, end } => {
                let m = CUpti_ActivityMemcpy6 {
                    kind: CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
                    copyKind: 1,
                    bytes,
                    start,
                    end,
                    deviceId: 0,
                    contextId: context_id,
                    streamId: 7,
                    correlationId: correlation_id,
                    ..Default::default()
                };
                // SAFETY: as above.
                unsafe { (at as *mut CUpti_ActivityMemcpy6).write_unaligned(m) };
            }
        }
    }
}

/// Hands every waiting record to gmprof's buffer callbacks, as CUPTI does at a flush: a
/// buffer from the request callback, filled, then the completion callback (on the calling
/// thread). Records that find no buffer are counted as dropped.
fn deliver() {
    let (records, requested, completed) = {
        let mut a = ACTIVITY.lock();
        (std::mem::take(&mut a.pending), a.requested, a.completed)
    };
    let (Some(requested), Some(completed)) = (requested, completed) else { return };
    let mut rest = records.as_slice();
    while !rest.is_empty() {
        let (mut buffer, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
        // SAFETY: gmprof's request callback with valid out-pointers.
        unsafe { requested(&mut buffer, &mut size, &mut max) };
        if buffer.is_null() || size < record_size(rest[0].kind()) {
            ACTIVITY.lock().dropped += rest.len();
            return;
        }
        let mut used = 0;
        while let Some(r) = rest.first() {
            let n = record_size(r.kind());
            if used + n > size {
                break;
            }
            // SAFETY: `buffer` has `size` bytes and `used + n` of them are in bounds.
            unsafe { r.write(buffer.add(used)) };
            used += n;
            rest = &rest[1..];
        }
        // SAFETY: gmprof's completion callback with the buffer it gave, `used` bytes valid.
        unsafe { completed(std::ptr::null_mut(), 0, buffer, size, used) };
    }
}

pub(super) unsafe extern "C" fn cupti_activity_flush_all(_flag: u32) -> CUptiResult {
    scripted!("cuptiActivityFlushAll");
    deliver();
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_activity_get_next_record(
    buffer: *mut u8,
    valid: usize,
    record: *mut *mut CUpti_Activity,
) -> CUptiResult {
    scripted!("cuptiActivityGetNextRecord");
    if buffer.is_null() || record.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: gmprof's in-out pointer.
    let previous = unsafe { *record };
    let offset = if previous.is_null() {
        0
    } else {
        // SAFETY: `previous` is a record this function returned, inside the buffer.
        let kind = unsafe { (previous as *const CUpti_ActivityKind).read_unaligned() };
        previous as usize - buffer as usize + record_size(kind)
    };
    if offset >= valid {
        return CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    // SAFETY: `offset` is inside the valid bytes of the buffer.
    unsafe { record.write(buffer.add(offset) as *mut CUpti_Activity) };
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_activity_get_num_dropped_records(
    _ctx: CUcontext,
    _stream: u32,
    dropped: *mut usize,
) -> CUptiResult {
    scripted!("cuptiActivityGetNumDroppedRecords");
    if dropped.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let n = std::mem::take(&mut ACTIVITY.lock().dropped);
    // SAFETY: checked non-null; gmprof's out-pointer.
    unsafe { dropped.write(n) };
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_get_timestamp(timestamp: *mut u64) -> CUptiResult {
    scripted!("cuptiGetTimestamp");
    if timestamp.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: checked non-null; gmprof's out-pointer.
    unsafe { timestamp.write(now()) };
    SUCCESS
}

pub(super) unsafe extern "C" fn cupti_get_context_id(ctx: CUcontext, id: *mut u32) -> CUptiResult {
    scripted!("cuptiGetContextId");
    match (driver::context(ctx), id.is_null()) {
        (Some(c), false) => {
            // SAFETY: checked non-null; gmprof's out-pointer.
            unsafe { id.write(c.id) };
            SUCCESS
        }
        _ => CUptiResult::CUPTI_ERROR_INVALID_CONTEXT,
    }
}

pub(super) unsafe extern "C" fn cupti_get_device_id(ctx: CUcontext, device: *mut u32) -> CUptiResult {
    scripted!("cuptiGetDeviceId");
    match (driver::context(ctx), device.is_null()) {
        (Some(c), false) => {
            // SAFETY: checked non-null; gmprof's out-pointer.
            unsafe { device.write(c.device as u32) };
            SUCCESS
        }
        _ => CUptiResult::CUPTI_ERROR_INVALID_CONTEXT,
    }
}

pub(super) unsafe extern "C" fn cupti_get_result_string(code: CUptiResult, text: *mut *const c_char) -> CUptiResult {
    if text.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let what = interned(&format!("{} (scripted libcupti)", crate::checked::library::cupti_result_name(code)));
    // SAFETY: checked non-null; gmprof's out-pointer.
    unsafe { text.write(what.as_ptr()) };
    SUCCESS
}
