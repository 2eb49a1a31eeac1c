//! The scripted libcupti's profiler: the profiler API's target side (initialization, chip
//! name, counter availability), host objects (metric tables, configuration images, pass
//! counts, evaluation) and the range profiler, whose counter data images hold the ranges
//! the made-up GPU's kernels ran in.
//!
//! The counter data images are the scripted library's own format (a header, then one slot
//! per range: its name's parts and its three counter values), read back only by the
//! functions here, as CUPTI's images are read only by CUPTI. PM sampling images are laid out
//! here too ([`pm_sample`]): `samplers` writes them, the host evaluates them.
//!
//! Imports `script`; `samplers`, `program` and `table` import it.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};

use parking_lot::Mutex;

use super::script::{fault, interned, malloc_string, text, Ran};
use crate::sys::cupti::*;

const SUCCESS: CUptiResult = CUptiResult::CUPTI_SUCCESS;

/// Counts the call; returns the scripted failure when there is one.
macro_rules! scripted {
    ($name:literal) => {
        if let Some(code) = fault($name) {
            return CUptiResult(code);
        }
    };
}

/// The params pointer gmprof passed, or CUPTI's answer to a NULL one.
macro_rules! params {
    ($p:expr) => {
        // SAFETY: gmprof passes its sized params struct, valid and unaliased for the call.
        match unsafe { $p.as_mut() } {
            Some(p) => p,
            None => return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
        }
    };
}

/// The chip the made-up device is.
pub(super) const CHIP: &CStr = c"GH100";

/// The range profiler's metric tables: base name, unit, description.
const RANGE_METRICS: [(&str, &str, &str); 3] = [
    ("gpu__time_duration", "nsecond", "GPU time of the range"),
    ("dram__bytes_read", "byte", "DRAM bytes read"),
    ("dram__bytes_write", "byte", "DRAM bytes written"),
];

/// PM sampling's metric tables: base name, the one submetric, its unit.
pub(super) const PM_METRICS: [(&str, &str, &str); 5] = [
    ("dram__bytes_read", ".sum.per_second", "byte/second"),
    ("dram__bytes_write", ".sum.per_second", "byte/second"),
    ("sm__cycles_active", ".avg.pct_of_peak_sustained_elapsed", "%"),
    ("sm__pipe_tensor_cycles_active", ".avg.pct_of_peak_sustained_elapsed", "%"),
    ("gr__cycles_active", ".avg.pct_of_peak_sustained_elapsed", "%"),
];

/// A host object: whose tables, and the metrics its configuration holds.
struct Host {
    pm: bool,
    metrics: Vec<String>,
}

static HOSTS: Mutex<Option<HashMap<usize, Host>>> = Mutex::new(None);

/// A fresh, unique handle value for a made-up CUPTI object.
pub(super) fn new_object() -> usize {
    Box::into_raw(Box::new(0u64)) as usize
}

/// The base of a full metric name (`dram__bytes_read.sum` → `dram__bytes_read`).
fn base(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// Whether a host of `pm`'s tables knows `name` (a base name, or a full one when `full`).
fn known(pm: bool, name: &str, full: bool) -> bool {
    let b = base(name);
    if full && b == name {
        return false;
    }
    // The range profiler's tables hold PM sampling's metrics too, as CUPTI's do.
    let pm_known = PM_METRICS.iter().any(|(m, sub, _)| *m == b && (!full || name == format!("{m}{sub}")));
    pm_known || (!pm && RANGE_METRICS.iter().any(|(m, _, _)| *m == b))
}

/// A leaked array of C string pointers, for the name lists CUPTI hands out.
fn name_array(names: &[&str]) -> *const *const c_char {
    let ptrs: Vec<*const c_char> = names.iter().map(|n| interned(n).as_ptr()).collect();
    Box::leak(ptrs.into_boxed_slice()).as_ptr()
}

pub(super) unsafe extern "C" fn profiler_initialize(p: *mut CUpti_Profiler_Initialize_Params) -> CUptiResult {
    scripted!("cuptiProfilerInitialize");
    let _ = params!(p);
    SUCCESS
}

pub(super) unsafe extern "C" fn profiler_deinitialize(p: *mut CUpti_Profiler_DeInitialize_Params) -> CUptiResult {
    scripted!("cuptiProfilerDeInitialize");
    let _ = params!(p);
    SUCCESS
}

pub(super) unsafe extern "C" fn device_get_chip_name(p: *mut CUpti_Device_GetChipName_Params) -> CUptiResult {
    scripted!("cuptiDeviceGetChipName");
    let p = params!(p);
    if p.deviceIndex != 0 {
        return CUptiResult::CUPTI_ERROR_INVALID_DEVICE;
    }
    p.pChipName = CHIP.as_ptr();
    SUCCESS
}

/// Bytes of a counter availability image.
pub(super) const AVAILABILITY_BYTES: usize = 16;

pub(super) unsafe extern "C" fn profiler_get_counter_availability(
    p: *mut CUpti_Profiler_GetCounterAvailability_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerGetCounterAvailability");
    let p = params!(p);
    if p.pCounterAvailabilityImage.is_null() {
        p.counterAvailabilityImageSize = AVAILABILITY_BYTES;
    } else {
        // SAFETY: gmprof's image of the size asked for.
        unsafe { std::ptr::write_bytes(p.pCounterAvailabilityImage, 0xff, p.counterAvailabilityImageSize) };
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn host_initialize(p: *mut CUpti_Profiler_Host_Initialize_Params) -> CUptiResult {
    scripted!("cuptiProfilerHostInitialize");
    let p = params!(p);
    // SAFETY: gmprof's chip name, NUL-terminated.
    if unsafe { text(p.pChipName) } != CHIP.to_string_lossy() {
        return CUptiResult::CUPTI_ERROR_INVALID_CHIP_NAME;
    }
    let pm = p.profilerType == CUpti_ProfilerType::CUPTI_PROFILER_TYPE_PM_SAMPLING;
    let object = new_object();
    HOSTS.lock().get_or_insert_with(HashMap::new).insert(object, Host { pm, metrics: Vec::new() });
    p.pHostObject = object as *mut CUpti_Profiler_Host_Object;
    SUCCESS
}

pub(super) unsafe extern "C" fn host_deinitialize(p: *mut CUpti_Profiler_Host_Deinitialize_Params) -> CUptiResult {
    scripted!("cuptiProfilerHostDeinitialize");
    let p = params!(p);
    match HOSTS.lock().as_mut().and_then(|h| h.remove(&(p.pHostObject as usize))) {
        Some(_) => SUCCESS,
        None => CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
    }
}

/// Whether `object` is a live host object, and of PM sampling's tables.
fn host_kind(object: *mut CUpti_Profiler_Host_Object) -> Option<bool> {
    HOSTS.lock().as_ref().and_then(|h| h.get(&(object as usize))).map(|h| h.pm)
}

pub(super) unsafe extern "C" fn host_get_supported_chips(
    p: *mut CUpti_Profiler_Host_GetSupportedChips_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostGetSupportedChips");
    let p = params!(p);
    p.numChips = 1;
    p.ppChipNames = name_array(&["GH100"]);
    SUCCESS
}

pub(super) unsafe extern "C" fn host_get_base_metrics(
    p: *mut CUpti_Profiler_Host_GetBaseMetrics_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostGetBaseMetrics");
    let p = params!(p);
    let Some(pm) = host_kind(p.pHostObject) else { return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER };
    let names: Vec<&str> = match (pm, p.metricType) {
        (false, CUpti_MetricType::CUPTI_METRIC_TYPE_COUNTER) => RANGE_METRICS.iter().map(|m| m.0).collect(),
        (true, CUpti_MetricType::CUPTI_METRIC_TYPE_THROUGHPUT) => PM_METRICS.iter().map(|m| m.0).collect(),
        _ => Vec::new(),
    };
    p.numMetrics = names.len();
    p.ppMetricNames = name_array(&names) as *mut *const c_char;
    SUCCESS
}

pub(super) unsafe extern "C" fn host_get_sub_metrics(p: *mut CUpti_Profiler_Host_GetSubMetrics_Params) -> CUptiResult {
    scripted!("cuptiProfilerHostGetSubMetrics");
    let p = params!(p);
    let Some(pm) = host_kind(p.pHostObject) else { return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER };
    // SAFETY: gmprof's metric name, NUL-terminated.
    let name = unsafe { text(p.pMetricName) }.into_owned();
    if !known(pm, &name, false) {
        return CUptiResult::CUPTI_ERROR_INVALID_METRIC_NAME;
    }
    let subs: Vec<&str> =
        if pm { PM_METRICS.iter().filter(|m| m.0 == name).map(|m| m.1).collect() } else { vec![".sum", ".max"] };
    p.numOfSubmetrics = subs.len();
    p.ppSubMetrics = name_array(&subs) as *mut *const c_char;
    SUCCESS
}

pub(super) unsafe extern "C" fn host_get_metric_properties(
    p: *mut CUpti_Profiler_Host_GetMetricProperties_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostGetMetricProperties");
    let p = params!(p);
    let Some(pm) = host_kind(p.pHostObject) else { return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER };
    // SAFETY: gmprof's metric name, NUL-terminated.
    let name = unsafe { text(p.pMetricName) }.into_owned();
    if !known(pm, &name, name.contains('.')) {
        return CUptiResult::CUPTI_ERROR_INVALID_METRIC_NAME;
    }
    let (unit, description) = if pm {
        let m = PM_METRICS.iter().find(|m| m.0 == base(&name));
        (m.map_or("", |m| m.2), "sampled")
    } else {
        let m = RANGE_METRICS.iter().find(|m| m.0 == base(&name));
        (m.map_or("", |m| m.1), m.map_or("", |m| m.2))
    };
    p.pDescription = interned(description).as_ptr();
    p.pHwUnit = interned(unit).as_ptr();
    p.pDimUnit = interned(unit).as_ptr();
    p.metricType = if unit == "%" {
        CUpti_MetricType::CUPTI_METRIC_TYPE_RATIO
    } else {
        CUpti_MetricType::CUPTI_METRIC_TYPE_COUNTER
    };
    SUCCESS
}

pub(super) unsafe extern "C" fn host_config_add_metrics(
    p: *mut CUpti_Profiler_Host_ConfigAddMetrics_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostConfigAddMetrics");
    let p = params!(p);
    let mut names = Vec::with_capacity(p.numMetrics);
    for i in 0..p.numMetrics {
        // SAFETY: gmprof passes `numMetrics` NUL-terminated names.
        names.push(unsafe { text(*p.ppMetricNames.add(i)) }.into_owned());
    }
    let mut hosts = HOSTS.lock();
    let Some(host) = hosts.as_mut().and_then(|h| h.get_mut(&(p.pHostObject as usize))) else {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    };
    if names.iter().any(|n| !known(host.pm, n, true)) {
        return CUptiResult::CUPTI_ERROR_INVALID_METRIC_NAME;
    }
    host.metrics.extend(names);
    SUCCESS
}

/// Bytes of a configuration image.
const CONFIG_BYTES: usize = 64;

pub(super) unsafe extern "C" fn host_get_config_image_size(
    p: *mut CUpti_Profiler_Host_GetConfigImageSize_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostGetConfigImageSize");
    let p = params!(p);
    if host_kind(p.pHostObject).is_none() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    p.configImageSize = CONFIG_BYTES;
    SUCCESS
}

pub(super) unsafe extern "C" fn host_get_config_image(
    p: *mut CUpti_Profiler_Host_GetConfigImage_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostGetConfigImage");
    let p = params!(p);
    if host_kind(p.pHostObject).is_none() || p.pConfigImage.is_null() || p.configImageSize < CONFIG_BYTES {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: gmprof's image of `configImageSize` bytes.
    unsafe { std::ptr::write_bytes(p.pConfigImage, 0x5c, CONFIG_BYTES) };
    SUCCESS
}

pub(super) unsafe extern "C" fn host_get_num_of_passes(
    p: *mut CUpti_Profiler_Host_GetNumOfPasses_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostGetNumOfPasses");
    let p = params!(p);
    if p.pConfigImage.is_null() || p.configImageSize < CONFIG_BYTES {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    p.numOfPasses = 1;
    SUCCESS
}

/// Counter data images: a header (magic, capacity, count), then [`SLOT`] bytes per range.
const RANGE_MAGIC: &[u8; 4] = b"GMRP";
/// PM sampling images start so (see `samplers`).
pub(super) const PM_MAGIC: &[u8; 4] = b"GMPM";
/// Bytes of an image's header.
pub(super) const HEADER: usize = 16;
/// Bytes of a range's name in its slot (parts separated by 0x1f, NUL-padded).
const NAME_BYTES: usize = 104;
/// Bytes of a range's slot: its name, then three f64 counters.
const SLOT: usize = NAME_BYTES + 24;

/// An image's header: magic, capacity, count.
///
/// # Safety
/// `image` points at `size` readable bytes.
pub(super) unsafe fn header(image: *const u8, size: usize) -> Option<([u8; 4], usize, usize)> {
    if image.is_null() || size < HEADER {
        return None;
    }
    // SAFETY: the header's 12 bytes are inside the image.
    let b = unsafe { std::slice::from_raw_parts(image, 12) };
    let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
    Some(([b[0], b[1], b[2], b[3]], word(4), word(8)))
}

/// Writes an image's header.
///
/// # Safety
/// `image` points at [`HEADER`] writable bytes.
pub(super) unsafe fn set_header(image: *mut u8, magic: &[u8; 4], capacity: usize, count: usize) {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(magic);
    h[4..8].copy_from_slice(&(capacity as u32).to_le_bytes());
    h[8..12].copy_from_slice(&(count as u32).to_le_bytes());
    // SAFETY: the caller's guarantee.
    unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), image, HEADER) };
}

/// The range profiler: its configuration, its open user ranges and what it collected.
struct RangeProfiler {
    object: usize,
    /// The configured image.
    image: usize,
    image_size: usize,
    auto: bool,
    levels: usize,
    started: bool,
    /// Open user ranges: name and counters so far.
    open: Vec<(String, [f64; 3])>,
    /// Ranges collected since the last decode: name parts and counters.
    collected: Vec<(Vec<String>, [f64; 3])>,
    /// The next auto range's number (CUPTI numbers them from the enable).
    auto_next: u64,
}

static RANGE: Mutex<Option<RangeProfiler>> = Mutex::new(None);

/// A kernel ran: counted in the open user ranges, or as an auto range of its own, while
/// the range profiler collects.
pub(super) fn kernel_ran(ran: &Ran) {
    let mut guard = RANGE.lock();
    let Some(rp) = guard.as_mut().filter(|rp| rp.started) else { return };
    let counters = ran.counters();
    if rp.auto {
        let name = rp.auto_next.to_string();
        rp.auto_next += 1;
        rp.collected.push((vec![name], counters));
        return;
    }
    let levels = rp.levels;
    for (_, sum) in rp.open.iter_mut().take(levels) {
        for (s, c) in sum.iter_mut().zip(counters) {
            *s += c;
        }
    }
}

/// Runs `f` on the range profiler `object`, or answers that it is not one.
fn with_profiler(
    object: *mut CUpti_RangeProfiler_Object,
    f: impl FnOnce(&mut RangeProfiler) -> CUptiResult,
) -> CUptiResult {
    match RANGE.lock().as_mut().filter(|rp| rp.object == object as usize) {
        Some(rp) => f(rp),
        None => CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
    }
}

pub(super) unsafe extern "C" fn range_enable(p: *mut CUpti_RangeProfiler_Enable_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerEnable");
    let p = params!(p);
    let mut guard = RANGE.lock();
    if guard.is_some() {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    }
    let object = new_object();
    *guard = Some(RangeProfiler {
        object,
        image: 0,
        image_size: 0,
        auto: true,
        levels: 1,
        started: false,
        open: Vec::new(),
        collected: Vec::new(),
        auto_next: 0,
    });
    p.pRangeProfilerObject = object as *mut CUpti_RangeProfiler_Object;
    SUCCESS
}

pub(super) unsafe extern "C" fn range_disable(p: *mut CUpti_RangeProfiler_Disable_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerDisable");
    let p = params!(p);
    let mut guard = RANGE.lock();
    if guard.as_ref().is_none_or(|rp| rp.object != p.pRangeProfilerObject as usize) {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    *guard = None;
    SUCCESS
}

pub(super) unsafe extern "C" fn range_get_counter_data_size(
    p: *mut CUpti_RangeProfiler_GetCounterDataSize_Params,
) -> CUptiResult {
    scripted!("cuptiRangeProfilerGetCounterDataSize");
    let p = params!(p);
    let ranges = p.maxNumOfRanges;
    with_profiler(p.pRangeProfilerObject, |_| {
        p.counterDataSize = HEADER + ranges * SLOT;
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn range_counter_data_image_initialize(
    p: *mut CUpti_RangeProfiler_CounterDataImage_Initialize_Params,
) -> CUptiResult {
    scripted!("cuptiRangeProfilerCounterDataImageInitialize");
    let p = params!(p);
    if p.pCounterData.is_null() || p.counterDataSize < HEADER {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let (image, size) = (p.pCounterData, p.counterDataSize);
    with_profiler(p.pRangeProfilerObject, |_| {
        // SAFETY: gmprof's image of `size` bytes, at least a header.
        unsafe {
            std::ptr::write_bytes(image, 0, size);
            set_header(image, RANGE_MAGIC, (size - HEADER) / SLOT, 0);
        }
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn range_set_config(p: *mut CUpti_RangeProfiler_SetConfig_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerSetConfig");
    let p = params!(p);
    // SAFETY: gmprof's image of `counterDataImageSize` bytes.
    let valid = unsafe { header(p.pCounterDataImage, p.counterDataImageSize) }.is_some_and(|h| &h.0 == RANGE_MAGIC);
    if !valid || p.pConfig.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let (image, size, auto, levels) = (
        p.pCounterDataImage as usize,
        p.counterDataImageSize,
        p.range == CUpti_ProfilerRange::CUPTI_AutoRange,
        usize::from(p.numNestingLevels.max(1)),
    );
    with_profiler(p.pRangeProfilerObject, |rp| {
        if rp.started {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        }
        (rp.image, rp.image_size, rp.auto, rp.levels) = (image, size, auto, levels);
        // A new configuration starts a new collection: what was never decoded is gone.
        rp.collected.clear();
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn range_start(p: *mut CUpti_RangeProfiler_Start_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerStart");
    let p = params!(p);
    with_profiler(p.pRangeProfilerObject, |rp| {
        if rp.image == 0 || rp.started {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        }
        rp.started = true;
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn range_stop(p: *mut CUpti_RangeProfiler_Stop_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerStop");
    let p = params!(p);
    let mut out = (0, 0);
    let r = with_profiler(p.pRangeProfilerObject, |rp| {
        if !rp.started || !rp.open.is_empty() {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        }
        rp.started = false;
        out = (0, 1);
        SUCCESS
    });
    (p.passIndex, p.isAllPassSubmitted) = out;
    r
}

pub(super) unsafe extern "C" fn range_push(p: *mut CUpti_RangeProfiler_PushRange_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerPushRange");
    let p = params!(p);
    // SAFETY: gmprof's range name, NUL-terminated.
    let name = unsafe { text(p.pRangeName) }.into_owned();
    with_profiler(p.pRangeProfilerObject, |rp| {
        if !rp.started || rp.auto {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        }
        rp.open.push((name, [0.0; 3]));
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn range_pop(p: *mut CUpti_RangeProfiler_PopRange_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerPopRange");
    let p = params!(p);
    with_profiler(p.pRangeProfilerObject, |rp| {
        let depth = rp.open.len();
        let path: Vec<String> = rp.open.iter().map(|(n, _)| n.clone()).collect();
        let Some((_, counters)) = rp.open.pop() else { return CUptiResult::CUPTI_ERROR_INVALID_OPERATION };
        if depth <= rp.levels {
            rp.collected.push((path, counters));
        }
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn range_decode_data(p: *mut CUpti_RangeProfiler_DecodeData_Params) -> CUptiResult {
    scripted!("cuptiRangeProfilerDecodeData");
    let p = params!(p);
    let mut dropped = 0;
    let r = with_profiler(p.pRangeProfilerObject, |rp| {
        if rp.started {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        }
        let image = rp.image as *mut u8;
        // SAFETY: the configured image, which gmprof keeps alive until the next configuration.
        let Some((_, capacity, mut count)) = (unsafe { header(image, rp.image_size) }) else {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        };
        for (parts, counters) in std::mem::take(&mut rp.collected) {
            if count >= capacity {
                dropped += 1;
                continue;
            }
            let mut slot = [0u8; SLOT];
            let name = parts.join("\u{1f}");
            let n = name.len().min(NAME_BYTES - 1);
            slot[..n].copy_from_slice(&name.as_bytes()[..n]);
            for (i, c) in counters.iter().enumerate() {
                slot[NAME_BYTES + 8 * i..NAME_BYTES + 8 * (i + 1)].copy_from_slice(&c.to_le_bytes());
            }
            // SAFETY: slot `count` lies inside the image (count < capacity).
            unsafe { std::ptr::copy_nonoverlapping(slot.as_ptr(), image.add(HEADER + count * SLOT), SLOT) };
            count += 1;
        }
        // SAFETY: as above.
        unsafe { set_header(image, RANGE_MAGIC, capacity, count) };
        SUCCESS
    });
    p.numOfRangeDropped = dropped;
    r
}

pub(super) unsafe extern "C" fn range_get_counter_data_info(
    p: *mut CUpti_RangeProfiler_GetCounterDataInfo_Params,
) -> CUptiResult {
    scripted!("cuptiRangeProfilerGetCounterDataInfo");
    let p = params!(p);
    // SAFETY: gmprof's image of `counterDataImageSize` bytes.
    match unsafe { header(p.pCounterDataImage, p.counterDataImageSize) } {
        Some((magic, _, count)) if &magic == RANGE_MAGIC => {
            p.numTotalRanges = count;
            SUCCESS
        }
        _ => CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
    }
}

/// Slot `index` of a range image: its name's parts and its counters.
///
/// # Safety
/// `image` points at `size` readable bytes.
unsafe fn range_slot(image: *const u8, size: usize, index: usize) -> Option<(Vec<String>, [f64; 3])> {
    // SAFETY: the caller's guarantee.
    let (magic, _, count) = unsafe { header(image, size) }?;
    if &magic != RANGE_MAGIC || index >= count || HEADER + (index + 1) * SLOT > size {
        return None;
    }
    // SAFETY: the slot is inside the image (checked above).
    let slot = unsafe { std::slice::from_raw_parts(image.add(HEADER + index * SLOT), SLOT) };
    let end = slot[..NAME_BYTES].iter().position(|b| *b == 0).unwrap_or(NAME_BYTES);
    let name = String::from_utf8_lossy(&slot[..end]).split('\u{1f}').map(str::to_owned).collect();
    let mut counters = [0.0; 3];
    for (i, c) in counters.iter_mut().enumerate() {
        let at = NAME_BYTES + 8 * i;
        *c = f64::from_le_bytes(slot[at..at + 8].try_into().unwrap_or_default());
    }
    Some((name, counters))
}

pub(super) unsafe extern "C" fn host_get_range_name(p: *mut CUpti_Profiler_Host_GetRangeName_Params) -> CUptiResult {
    scripted!("cuptiProfilerHostGetRangeName");
    let p = params!(p);
    // SAFETY: gmprof's image and delimiter.
    let (slot, delimiter) = unsafe {
        (range_slot(p.pCounterDataImage, p.counterDataImageSize, p.rangeIndex), text(p.delimiter).into_owned())
    };
    let Some((parts, _)) = slot else { return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER };
    p.pRangeName = malloc_string(&parts.join(&delimiter));
    SUCCESS
}

/// Bytes of a PM sample's slot: start, end, then one f64 per [`PM_METRICS`].
pub(super) const PM_SLOT: usize = 16 + 8 * PM_METRICS.len();

/// Sample `index` of a PM image: start, end and values.
///
/// # Safety
/// `image` points at `size` readable bytes.
pub(super) unsafe fn pm_sample(image: *const u8, size: usize, index: usize) -> Option<(u64, u64, [f64; 5])> {
    // SAFETY: the caller's guarantee.
    let (magic, _, count) = unsafe { header(image, size) }?;
    if &magic != PM_MAGIC || index >= count || HEADER + (index + 1) * PM_SLOT > size {
        return None;
    }
    // SAFETY: the slot is inside the image (checked above).
    let slot = unsafe { std::slice::from_raw_parts(image.add(HEADER + index * PM_SLOT), PM_SLOT) };
    let word = |at: usize| <[u8; 8]>::try_from(&slot[at..at + 8]).unwrap_or_default();
    let mut values = [0.0; 5];
    for (i, v) in values.iter_mut().enumerate() {
        *v = f64::from_le_bytes(word(16 + 8 * i));
    }
    Some((u64::from_le_bytes(word(0)), u64::from_le_bytes(word(8)), values))
}

/// Writes sample `index` of a PM image (its header is the caller's).
///
/// # Safety
/// `image` has room for slot `index`.
pub(super) unsafe fn set_pm_sample(image: *mut u8, index: usize, start: u64, end: u64, values: [f64; 5]) {
    let mut slot = [0u8; PM_SLOT];
    slot[..8].copy_from_slice(&start.to_le_bytes());
    slot[8..16].copy_from_slice(&end.to_le_bytes());
    for (i, v) in values.iter().enumerate() {
        slot[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    // SAFETY: the caller's guarantee.
    unsafe { std::ptr::copy_nonoverlapping(slot.as_ptr(), image.add(HEADER + index * PM_SLOT), PM_SLOT) };
}

pub(super) unsafe extern "C" fn host_evaluate_to_gpu_values(
    p: *mut CUpti_Profiler_Host_EvaluateToGpuValues_Params,
) -> CUptiResult {
    scripted!("cuptiProfilerHostEvaluateToGpuValues");
    let p = params!(p);
    let mut names = Vec::with_capacity(p.numMetrics);
    for i in 0..p.numMetrics {
        // SAFETY: gmprof passes `numMetrics` NUL-terminated names.
        names.push(unsafe { text(*p.ppMetricNames.add(i)) }.into_owned());
    }
    let Some(pm) = host_kind(p.pHostObject) else { return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER };
    let values: Vec<Option<f64>> = if pm {
        // SAFETY: gmprof's image of `counterDataImageSize` bytes.
        let Some((_, _, sample)) = (unsafe { pm_sample(p.pCounterDataImage, p.counterDataImageSize, p.rangeIndex) })
        else {
            return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
        };
        names.iter().map(|n| PM_METRICS.iter().position(|m| m.0 == base(n)).map(|i| sample[i])).collect()
    } else {
        // SAFETY: gmprof's image of `counterDataImageSize` bytes.
        let Some((_, counters)) = (unsafe { range_slot(p.pCounterDataImage, p.counterDataImageSize, p.rangeIndex) })
        else {
            return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
        };
        names.iter().map(|n| RANGE_METRICS.iter().position(|m| m.0 == base(n)).map(|i| counters[i])).collect()
    };
    if values.iter().any(Option::is_none) || p.pMetricValues.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_METRIC_NAME;
    }
    for (i, v) in values.into_iter().enumerate() {
        // SAFETY: gmprof's value buffer has one f64 per metric name.
        unsafe { *p.pMetricValues.add(i) = v.unwrap_or(f64::NAN) };
    }
    SUCCESS
}
