//! CUPTI activity tracing: buffer callbacks, record decoding, dropped-record counts, flush.
//!
//! CUPTI's buffer callbacks carry no user pointer, so the registration is process-wide: one
//! [`ActivityTracing`] at a time owns it. Buffers come from a pool that is filled before
//! profiling starts and recycled after each completion, so the measured program does not
//! pay for allocations; when the pool runs dry a new buffer is allocated and counted.

use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::library::Cupti;
use crate::error::Result;
use crate::model::{KernelActivity, TransferActivity, TransferKind};
use crate::sys::cupti::{
    CUcontext, CUptiResult, CUpti_Activity, CUpti_ActivityFlag, CUpti_ActivityKernel10, CUpti_ActivityKind,
    CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4, CUpti_ActivityMemset4,
};

/// Size of one activity buffer. CUPTI recommends a few MB; 8 MB holds ~25k kernel records.
pub const BUFFER_SIZE: usize = 8 << 20;
/// CUPTI requires activity buffers aligned to 8 bytes.
const BUFFER_WORDS: usize = BUFFER_SIZE / 8;

/// One decoded activity record.
#[derive(Clone, Debug, PartialEq)]
pub enum ActivityRecord {
    /// A kernel execution.
    Kernel(KernelActivity),
    /// A memcpy or memset.
    Transfer(TransferActivity),
}

impl ActivityRecord {
    /// The CUDA context the record belongs to.
    pub fn context_id(&self) -> u32 {
        match self {
            ActivityRecord::Kernel(k) => k.context_id,
            ActivityRecord::Transfer(t) => t.context_id,
        }
    }
}

/// Receives the records of each completed buffer. Called on CUPTI's thread or on the thread
/// that flushes; it must not call back into CUPTI's activity API, and must not take a lock
/// that a flushing thread holds.
pub type ActivitySink = Arc<dyn Fn(Vec<ActivityRecord>) + Send + Sync>;

/// A [`TransferActivity`] from a memcpy, peer-to-peer memcpy or memset record: CUPTI's three
/// record types name these fields alike.
macro_rules! transfer {
    ($m:expr, $kind:expr) => {
        TransferActivity {
            correlation_id: $m.correlationId,
            bytes: $m.bytes,
            kind: $kind,
            start_ns: $m.start,
            end_ns: $m.end,
            stream_id: $m.streamId,
            context_id: $m.contextId,
            device_id: $m.deviceId,
            graph_id: $m.graphId,
            graph_node_id: $m.graphNodeId,
        }
    };
}

struct Registration {
    sink: ActivitySink,
    pool: Vec<Box<[u64]>>,
}

static REGISTRATION: Mutex<Option<Registration>> = Mutex::new(None);
static BUFFERS_ALLOCATED_LATE: AtomicU64 = AtomicU64::new(0);
static RECORDS_DROPPED: AtomicU64 = AtomicU64::new(0);
static CALLBACK_PANICS: AtomicU64 = AtomicU64::new(0);
static BUFFERS_CUT_SHORT: AtomicU64 = AtomicU64::new(0);
static DROPPED_COUNTS_UNREAD: AtomicU64 = AtomicU64::new(0);
/// The error of the first call that cut a buffer short or hid the dropped count.
static FIRST_READ_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Counts a failed read of a completed buffer (`counter`) and keeps the first error.
fn read_failed(counter: &AtomicU64, error: crate::error::Error) {
    counter.fetch_add(1, Ordering::Relaxed);
    FIRST_READ_ERROR.lock().get_or_insert_with(|| error.to_string());
}

/// The error of the first `cuptiActivityGetNextRecord` or `cuptiActivityGetNumDroppedRecords`
/// that failed (see [`ActivityStats::buffers_cut_short`]).
pub fn first_read_error() -> Option<String> {
    FIRST_READ_ERROR.lock().clone()
}

fn new_buffer() -> Box<[u64]> {
    vec![0u64; BUFFER_WORDS].into_boxed_slice()
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let buf = REGISTRATION.lock().as_mut().and_then(|r| r.pool.pop()).unwrap_or_else(|| {
            BUFFERS_ALLOCATED_LATE.fetch_add(1, Ordering::Relaxed);
            new_buffer()
        });
        Box::into_raw(buf) as *mut u64 as *mut u8
    }));
    let ptr = result.unwrap_or_else(|_| {
        CALLBACK_PANICS.fetch_add(1, Ordering::Relaxed);
        std::ptr::null_mut()
    });
    // SAFETY: CUPTI passes valid out-pointers. A null buffer tells CUPTI to drop records,
    // which it then counts as dropped.
    unsafe {
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER_SIZE };
        *max_records = 0;
    }
}

unsafe extern "C" fn buffer_completed(_ctx: CUcontext, _stream: u32, buffer: *mut u8, _size: usize, valid: usize) {
    if buffer.is_null() {
        return;
    }
    let timer = super::self_time::start();
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: every buffer handed to CUPTI came from `buffer_requested`, which leaked a
        // `Box<[u64]>` of BUFFER_WORDS words; CUPTI returns each exactly once.
        let buf = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buffer as *mut u64, BUFFER_WORDS)) };
        let cupti = Cupti::load().ok();
        let records = match cupti {
            // SAFETY: `buffer` holds `valid` bytes of records written by CUPTI.
            Some(c) => unsafe { decode_buffer(&c, buffer, valid) },
            None => Vec::new(),
        };
        let sink = {
            let mut reg = REGISTRATION.lock();
            match reg.as_mut() {
                Some(r) => {
                    r.pool.push(buf);
                    Some(r.sink.clone())
                }
                None => None,
            }
        };
        if let Some(sink) = sink {
            sink(records);
        }
    }));
    if result.is_err() {
        CALLBACK_PANICS.fetch_add(1, Ordering::Relaxed);
    }
    super::self_time::buffer_done(timer);
}

/// Decodes the kernel, memcpy and memset records in a completed buffer.
///
/// # Safety
/// `buffer` must hold `valid` bytes of CUPTI activity records.
unsafe fn decode_buffer(cupti: &Cupti, buffer: *mut u8, valid: usize) -> Vec<ActivityRecord> {
    let mut out = Vec::new();
    let Ok(next) = cupti.raw().cuptiActivityGetNextRecord.as_ref() else {
        return out;
    };
    let mut record: *mut CUpti_Activity = std::ptr::null_mut();
    loop {
        // SAFETY: `buffer`/`valid` describe a completed CUPTI buffer (caller's guarantee);
        // `record` is the iterator CUPTI advances.
        let rc = unsafe { next(buffer, valid, &mut record) };
        if rc == CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED || (rc == CUptiResult::CUPTI_SUCCESS && record.is_null()) {
            // The end of the buffer.
            break;
        }
        if rc != CUptiResult::CUPTI_SUCCESS {
            // Any other answer ends the buffer early: the records after this point are lost.
            let context = "reading a completed activity buffer";
            read_failed(&BUFFERS_CUT_SHORT, cupti.error(rc, "cuptiActivityGetNextRecord", context));
            break;
        }
        // SAFETY: CUPTI returned a pointer to a record inside the buffer.
        let kind = unsafe { (*record).kind };
        match kind {
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL
            | CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
                // SAFETY: records of these kinds are CUpti_ActivityKernel10 in CUPTI 13.
                let k = unsafe { &*(record as *const CUpti_ActivityKernel10) };
                let name = if k.name.is_null() {
                    String::new()
                } else {
                    // SAFETY: CUPTI's kernel names are NUL-terminated and live with the buffer.
                    unsafe { CStr::from_ptr(k.name) }.to_string_lossy().into_owned()
                };
                out.push(ActivityRecord::Kernel(KernelActivity {
                    correlation_id: k.correlationId,
                    name,
                    grid: [k.gridX, k.gridY, k.gridZ],
                    block: [k.blockX, k.blockY, k.blockZ],
                    registers_per_thread: k.registersPerThread,
                    static_shared_memory: k.staticSharedMemory,
                    dynamic_shared_memory: k.dynamicSharedMemory,
                    stream_id: k.streamId,
                    context_id: k.contextId,
                    device_id: k.deviceId,
                    graph_id: k.graphId,
                    graph_node_id: k.graphNodeId,
                    start_ns: k.start,
                    end_ns: k.end,
                }));
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => {
                // SAFETY: MEMCPY records are CUpti_ActivityMemcpy6 in CUPTI 13.
                let m = unsafe { &*(record as *const CUpti_ActivityMemcpy6) };
                out.push(ActivityRecord::Transfer(transfer!(m, TransferKind::from_cupti_copy_kind(m.copyKind))));
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY2 => {
                // SAFETY: MEMCPY2 (peer-to-peer) records are CUpti_ActivityMemcpyPtoP4 in
                // CUPTI 13.
                let m = unsafe { &*(record as *const CUpti_ActivityMemcpyPtoP4) };
                out.push(ActivityRecord::Transfer(transfer!(m, TransferKind::from_cupti_copy_kind(m.copyKind))));
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET => {
                // SAFETY: MEMSET records are CUpti_ActivityMemset4 in CUPTI 13.
                let m = unsafe { &*(record as *const CUpti_ActivityMemset4) };
                out.push(ActivityRecord::Transfer(transfer!(m, TransferKind::Memset)));
            }
            _ => {}
        }
    }
    // Records CUPTI could not store because no buffer was available.
    if let Ok(get_dropped) = cupti.raw().cuptiActivityGetNumDroppedRecords.as_ref() {
        let mut dropped = 0usize;
        // SAFETY: null context and stream 0 ask for the global count; `dropped` is valid.
        match unsafe { get_dropped(std::ptr::null_mut(), 0, &mut dropped) } {
            CUptiResult::CUPTI_SUCCESS => {
                RECORDS_DROPPED.fetch_add(dropped as u64, Ordering::Relaxed);
            }
            rc => {
                let context = "counting the activity records CUPTI dropped";
                read_failed(&DROPPED_COUNTS_UNREAD, cupti.error(rc, "cuptiActivityGetNumDroppedRecords", context));
            }
        }
    }
    out
}

/// The activity kinds gmprof records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivityKinds {
    /// Kernels only.
    Kernels,
    /// Kernels, memcpys and memsets.
    KernelsAndMemory,
    /// Kernels and memcpys, no memsets: for kernel replay. With CUPTI 13.0.1, MEMSET records
    /// enabled beside the range profiler in kernel replay make `cuptiActivityFlushAll` crash
    /// (SIGSEGV in CUPTI's worker thread) once a memset ran before the first replayed kernel
    /// (seen on an H200, driver 580; memcpy records and memsets after kernels do not).
    KernelsAndMemcpy,
}

impl ActivityKinds {
    fn kinds(self) -> &'static [CUpti_ActivityKind] {
        use CUpti_ActivityKind as K;
        let serial = SERIAL_KERNELS.load(Ordering::Relaxed);
        match (self, serial) {
            (ActivityKinds::Kernels, false) => &[K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL],
            (ActivityKinds::Kernels, true) => &[K::CUPTI_ACTIVITY_KIND_KERNEL],
            // MEMCPY2: copies between two GPUs (peer to peer), recorded apart from MEMCPY.
            (ActivityKinds::KernelsAndMemory, false) => &[
                K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                K::CUPTI_ACTIVITY_KIND_MEMCPY,
                K::CUPTI_ACTIVITY_KIND_MEMCPY2,
                K::CUPTI_ACTIVITY_KIND_MEMSET,
            ],
            (ActivityKinds::KernelsAndMemory, true) => &[
                K::CUPTI_ACTIVITY_KIND_KERNEL,
                K::CUPTI_ACTIVITY_KIND_MEMCPY,
                K::CUPTI_ACTIVITY_KIND_MEMCPY2,
                K::CUPTI_ACTIVITY_KIND_MEMSET,
            ],
            (ActivityKinds::KernelsAndMemcpy, false) => &[
                K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                K::CUPTI_ACTIVITY_KIND_MEMCPY,
                K::CUPTI_ACTIVITY_KIND_MEMCPY2,
            ],
            (ActivityKinds::KernelsAndMemcpy, true) => {
                &[K::CUPTI_ACTIVITY_KIND_KERNEL, K::CUPTI_ACTIVITY_KIND_MEMCPY, K::CUPTI_ACTIVITY_KIND_MEMCPY2]
            }
        }
    }
}

/// Whether kernels are recorded serialized (`CUPTI_ACTIVITY_KIND_KERNEL`).
static SERIAL_KERNELS: AtomicBool = AtomicBool::new(false);

/// Records kernels with `CUPTI_ACTIVITY_KIND_KERNEL` (CUPTI serializes kernels) instead of
/// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`, for tracing started from now on: CUPTI's SASS
/// metrics count nothing while concurrent kernel records are enabled
/// ([`super::sass_metrics`]).
pub fn serialize_kernel_records() {
    SERIAL_KERNELS.store(true, Ordering::Relaxed);
}

/// Whether [`serialize_kernel_records`] was called.
pub fn kernel_records_serialized() -> bool {
    SERIAL_KERNELS.load(Ordering::Relaxed)
}

/// Counters about the activity machinery, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActivityStats {
    /// Records CUPTI dropped for lack of buffer space.
    pub records_dropped: u64,
    /// Buffers allocated while profiling because the pool ran dry.
    pub buffers_allocated_late: u64,
    /// Panics caught inside buffer callbacks (each loses that buffer's records).
    pub callback_panics: u64,
    /// Completed buffers whose records could not be read to the end
    /// (`cuptiActivityGetNextRecord` failed): the records after that point are lost.
    pub buffers_cut_short: u64,
    /// Completed buffers after which CUPTI's count of dropped records could not be read
    /// (`cuptiActivityGetNumDroppedRecords` failed): `records_dropped` may be too low.
    pub dropped_counts_unread: u64,
}

/// Process-wide activity tracing, owned; disabled (after a final flush) on drop.
#[must_use = "dropping it stops activity tracing"]
pub struct ActivityTracing {
    cupti: Cupti,
    kinds: ActivityKinds,
    stats_at_start: ActivityStats,
    closed: bool,
}

impl std::fmt::Debug for ActivityTracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivityTracing").field("kinds", &self.kinds).finish_non_exhaustive()
    }
}

fn global_stats() -> ActivityStats {
    ActivityStats {
        records_dropped: RECORDS_DROPPED.load(Ordering::Relaxed),
        buffers_allocated_late: BUFFERS_ALLOCATED_LATE.load(Ordering::Relaxed),
        callback_panics: CALLBACK_PANICS.load(Ordering::Relaxed),
        buffers_cut_short: BUFFERS_CUT_SHORT.load(Ordering::Relaxed),
        dropped_counts_unread: DROPPED_COUNTS_UNREAD.load(Ordering::Relaxed),
    }
}

/// Fills the buffer pool up to `total` buffers (a process that profiles another context
/// produces records on both: a pool sized for one ran dry on two GPUs).
pub fn grow_pool(total: usize) {
    let mut reg = REGISTRATION.lock();
    if let Some(r) = reg.as_mut() {
        while r.pool.len() < total {
            r.pool.push(new_buffer());
        }
    }
}

impl ActivityTracing {
    /// Registers the buffer callbacks with `prealloc` pooled buffers and enables `kinds`.
    pub fn start(cupti: &Cupti, kinds: ActivityKinds, prealloc: usize, sink: ActivitySink) -> Result<ActivityTracing> {
        {
            let mut reg = REGISTRATION.lock();
            let mut pool = reg.take().map(|r| r.pool).unwrap_or_default();
            while pool.len() < prealloc {
                pool.push(new_buffer());
            }
            *reg = Some(Registration { sink, pool });
        }
        call_cupti!(cupti, cuptiActivityRegisterCallbacks, "registering activity buffer callbacks", |f| {
            // SAFETY: both callbacks are `extern "C"`, never unwind (catch_unwind inside) and
            // stay valid for the life of the process.
            unsafe { f(Some(buffer_requested), Some(buffer_completed)) }
        })?;
        let tracing = ActivityTracing { cupti: *cupti, kinds, stats_at_start: global_stats(), closed: false };
        for kind in kinds.kinds() {
            call_cupti!(cupti, cuptiActivityEnable, "enabling activity records", |f| {
                // SAFETY: plain enum argument.
                unsafe { f(*kind) }
            })?;
        }
        Ok(tracing)
    }

    /// The kinds enabled now.
    pub fn kinds(&self) -> ActivityKinds {
        self.kinds
    }

    /// Enables and disables kinds so that exactly `kinds` are recorded from now on.
    pub fn set_kinds(&mut self, kinds: ActivityKinds) -> Result<()> {
        let (old, new) = (self.kinds.kinds(), kinds.kinds());
        for kind in old.iter().filter(|k| !new.contains(k)) {
            call_cupti!(self.cupti, cuptiActivityDisable, "disabling activity records", |f| {
                // SAFETY: plain enum argument.
                unsafe { f(*kind) }
            })?;
        }
        for kind in new.iter().filter(|k| !old.contains(k)) {
            call_cupti!(self.cupti, cuptiActivityEnable, "enabling activity records", |f| {
                // SAFETY: plain enum argument.
                unsafe { f(*kind) }
            })?;
        }
        self.kinds = kinds;
        Ok(())
    }

    /// Delivers every completed or partially filled buffer to the sink now.
    pub fn flush(&self) -> Result<()> {
        flush_all(&self.cupti, true)
    }

    /// Counts since this tracing started.
    pub fn stats(&self) -> ActivityStats {
        let now = global_stats();
        ActivityStats {
            records_dropped: now.records_dropped - self.stats_at_start.records_dropped,
            buffers_allocated_late: now.buffers_allocated_late - self.stats_at_start.buffers_allocated_late,
            callback_panics: now.callback_panics - self.stats_at_start.callback_panics,
            buffers_cut_short: now.buffers_cut_short - self.stats_at_start.buffers_cut_short,
            dropped_counts_unread: now.dropped_counts_unread - self.stats_at_start.dropped_counts_unread,
        }
    }

    /// Flushes, disables the kinds and detaches the sink, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let flushed = flush_all(&self.cupti, true);
        let mut first_err = flushed.err();
        for kind in self.kinds.kinds() {
            let r = call_cupti!(self.cupti, cuptiActivityDisable, "disabling activity records", |f| {
                // SAFETY: plain enum argument.
                unsafe { f(*kind) }
            });
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        // Keep the pool for the next session; drop the sink so no records leak into it.
        if let Some(reg) = REGISTRATION.lock().as_mut() {
            reg.sink = Arc::new(|_| {});
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for ActivityTracing {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}

/// `cuptiActivityFlushAll`. Without `forced` (CUPTI's default flush) it delivers every
/// buffer whose records are all complete, full or not: the flush to make while the program
/// runs. `forced` delivers every buffer, including records of work still running, whose
/// timestamps CUPTI has not filled in and never will (`cupti_activity.h`: the forced flush is
/// for the end of a session); a record so delivered has `end <= start`.
pub fn flush_all(cupti: &Cupti, forced: bool) -> Result<()> {
    let flag = if forced { CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.0 } else { 0 };
    call_cupti!(cupti, cuptiActivityFlushAll, "flushing activity buffers", |f| {
        // SAFETY: plain flag argument; completion callbacks run on this thread.
        unsafe { f(flag) }
    })
}

/// CUPTI's id of a context, the one activity records and callbacks carry.
pub fn context_id(cupti: &Cupti, ctx: crate::checked::driver::Context) -> Result<u32> {
    let mut id = 0u32;
    call_cupti!(cupti, cuptiGetContextId, "reading the context id", |f| {
        // SAFETY: `ctx` is a live context; `id` is a valid out-pointer.
        unsafe { f(ctx.as_raw(), &mut id) }
    })?;
    Ok(id)
}

/// `cuptiGetTimestamp` resolved once, for the launch path: [`LaunchClock::now`] builds no
/// error and allocates nothing, so a missing function or a failing call costs only its
/// `None`.
#[derive(Clone, Copy, Debug)]
pub struct LaunchClock {
    get: Option<unsafe extern "C" fn(*mut u64) -> CUptiResult>,
}

impl LaunchClock {
    /// `cupti`'s clock; none where the library lacks `cuptiGetTimestamp` (a stand-in).
    pub fn of(cupti: &Cupti) -> LaunchClock {
        LaunchClock { get: cupti.raw().cuptiGetTimestamp.as_ref().ok().copied() }
    }

    /// A clock for GPU-less harnesses: `CLOCK_MONOTONIC_RAW` through the vDSO, a stand-in
    /// for what a CUPTI timestamp costs (not CUPTI's clock).
    pub fn monotonic_stand_in() -> LaunchClock {
        LaunchClock { get: Some(monotonic_raw) }
    }

    /// A clock for GPU-less harnesses that script the GPU's time line: it reads what
    /// [`LaunchClock::set_scripted`] last set on the calling thread (launches stamp on the
    /// thread that makes them).
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn scripted() -> LaunchClock {
        LaunchClock { get: Some(scripted_now) }
    }

    /// Sets what [`LaunchClock::scripted`] reads on this thread.
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn set_scripted(ns: u64) {
        SCRIPTED_NOW.set(ns);
    }

    /// What [`LaunchClock::scripted`] reads on this thread now.
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn scripted_now() -> u64 {
        SCRIPTED_NOW.get()
    }

    /// The timestamp, ns; `None` without a clock or when the call fails (counted, with the
    /// first failure's code: [`launch_stamps_missed`]).
    pub fn now(&self) -> Option<u64> {
        match self.read()? {
            Ok(ts) => Some(ts),
            Err(code) => {
                STAMPS_MISSED.fetch_add(1, Ordering::Relaxed);
                let _ = STAMP_ERROR.compare_exchange(0, code.0, Ordering::Relaxed, Ordering::Relaxed);
                None
            }
        }
    }

    /// The timestamp, ns, or the code the call failed with; `None` without a clock. Counts
    /// nothing: the caller keeps its own count of what it could not stamp.
    pub fn read(&self) -> Option<std::result::Result<u64, CUptiResult>> {
        let get = self.get?;
        let mut ts = 0u64;
        // SAFETY: `get` is cuptiGetTimestamp or `monotonic_raw`; both write one u64 through
        // the valid out-pointer they are given.
        let code = unsafe { get(&mut ts) };
        Some(if code == CUptiResult::CUPTI_SUCCESS { Ok(ts) } else { Err(code) })
    }
}

/// Launch stamps [`LaunchClock::now`] could not take, process-wide.
static STAMPS_MISSED: AtomicU64 = AtomicU64::new(0);
/// The code of the first of them (0: none).
static STAMP_ERROR: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Launch stamps that could not be taken so far (process-wide), and the first failure's code.
pub fn launch_stamps_missed() -> (u64, Option<CUptiResult>) {
    let code = STAMP_ERROR.load(Ordering::Relaxed);
    (STAMPS_MISSED.load(Ordering::Relaxed), (code != 0).then_some(CUptiResult(code)))
}

#[cfg(any(test, feature = "bench-internals"))]
thread_local! {
    /// [`LaunchClock::scripted`]'s time on this thread.
    static SCRIPTED_NOW: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// [`LaunchClock::scripted`]'s function, shaped like `cuptiGetTimestamp`.
///
/// # Safety
/// `ts` must be valid for one `u64` write.
#[cfg(any(test, feature = "bench-internals"))]
unsafe extern "C" fn scripted_now(ts: *mut u64) -> CUptiResult {
    // SAFETY: the caller passes a pointer valid for one u64 write (see # Safety).
    unsafe { ts.write(SCRIPTED_NOW.get()) };
    CUptiResult::CUPTI_SUCCESS
}

/// [`LaunchClock::monotonic_stand_in`]'s function, shaped like `cuptiGetTimestamp`.
///
/// # Safety
/// `ts` must be valid for one `u64` write.
unsafe extern "C" fn monotonic_raw(ts: *mut u64) -> CUptiResult {
    let mut spec = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `spec` is a valid out-pointer for clock_gettime.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut spec) } != 0 {
        return CUptiResult::CUPTI_ERROR_UNKNOWN;
    }
    let ns = (spec.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(spec.tv_nsec as u64);
    // SAFETY: the caller passes a pointer valid for one u64 write (see # Safety).
    unsafe { ts.write(ns) };
    CUptiResult::CUPTI_SUCCESS
}

/// The CUPTI timestamp (ns), the clock activity records use.
pub fn timestamp(cupti: &Cupti) -> Result<u64> {
    let mut ts = 0u64;
    call_cupti!(cupti, cuptiGetTimestamp, "reading the CUPTI timestamp", |f| {
        // SAFETY: `ts` is a valid out-pointer.
        unsafe { f(&mut ts) }
    })?;
    Ok(ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_clocks_read_or_say_none_without_an_error() {
        // A libcupti without cuptiGetTimestamp: no clock, no error built.
        assert_eq!(LaunchClock { get: None }.now(), None);
        let clock = LaunchClock::monotonic_stand_in();
        let (a, b) = (clock.now().expect("a reading"), clock.now().expect("a reading"));
        assert!(a > 0 && b >= a, "{a} then {b}");
    }
}
