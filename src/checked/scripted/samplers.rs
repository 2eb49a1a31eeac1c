//! The scripted libcupti's samplers: PM sampling (one sample per kernel the made-up GPU ran
//! while sampling), PC sampling (one PC record per such kernel), SASS metrics (one patched
//! instruction per such kernel in a collecting context), and the cubin lookups (CRC, source
//! line) behind source lines.
//!
//! Imports `script` and `profiler` (the PM image layout and object handles); `program` and
//! `table` import it.

use std::ffi::{c_char, CStr};

use parking_lot::Mutex;

use super::profiler::{header, new_object, set_header, set_pm_sample, HEADER, PM_MAGIC, PM_SLOT};
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

/// PM sampling: the sampler and the samples its hardware buffer holds.
#[derive(Default)]
struct Pm {
    object: usize,
    configured: bool,
    started: bool,
    /// Samples not decoded yet: start, end, values.
    buffer: Vec<(u64, u64, [f64; 5])>,
}

static PM: Mutex<Option<Pm>> = Mutex::new(None);

/// PC sampling: the contexts it is enabled on, the buffer CUPTI fills at disable, and the
/// kernels whose PCs are not drained yet.
#[derive(Default)]
struct Pc {
    enabled: Vec<usize>,
    final_buffer: usize,
    pending: Vec<&'static CStr>,
}

static PC: Mutex<Option<Pc>> = Mutex::new(None);

/// SASS metrics: configured devices, collecting contexts and counted kernels not flushed.
#[derive(Default)]
struct Sass {
    configured: Vec<u32>,
    collecting: Vec<usize>,
    pending: Vec<&'static CStr>,
}

static SASS: Mutex<Option<Sass>> = Mutex::new(None);

/// A kernel ran: a PM sample, a PC record and a SASS count where each is on.
pub(super) fn kernel_ran(ran: &Ran) {
    if let Some(pm) = PM.lock().as_mut().filter(|pm| pm.started) {
        let seconds = (ran.end - ran.start) as f64 / 1e9;
        let [_, read, write] = ran.counters();
        pm.buffer.push((ran.start, ran.end, [read / seconds, write / seconds, 80.0, 10.0, 95.0]));
    }
    if let Some(pc) = PC.lock().as_mut().filter(|pc| pc.enabled.contains(&ran.context)) {
        pc.pending.push(ran.name);
    }
    if let Some(sass) = SASS.lock().as_mut().filter(|s| s.collecting.contains(&ran.context)) {
        sass.pending.push(ran.name);
    }
}

pub(super) unsafe extern "C" fn pm_get_counter_availability(
    p: *mut CUpti_PmSampling_GetCounterAvailability_Params,
) -> CUptiResult {
    scripted!("cuptiPmSamplingGetCounterAvailability");
    let p = params!(p);
    if p.deviceIndex != 0 {
        return CUptiResult::CUPTI_ERROR_INVALID_DEVICE;
    }
    if p.pCounterAvailabilityImage.is_null() {
        p.counterAvailabilityImageSize = 16;
    } else {
        // SAFETY: gmprof's image of the size asked for.
        unsafe { std::ptr::write_bytes(p.pCounterAvailabilityImage, 0xff, p.counterAvailabilityImageSize) };
    }
    SUCCESS
}

/// Runs `f` on the PM sampler `object`, or answers that it is not one.
fn with_pm(object: *mut CUpti_PmSampling_Object, f: impl FnOnce(&mut Pm) -> CUptiResult) -> CUptiResult {
    match PM.lock().as_mut().filter(|pm| pm.object == object as usize) {
        Some(pm) => f(pm),
        None => CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
    }
}

pub(super) unsafe extern "C" fn pm_enable(p: *mut CUpti_PmSampling_Enable_Params) -> CUptiResult {
    scripted!("cuptiPmSamplingEnable");
    let p = params!(p);
    let mut guard = PM.lock();
    if guard.is_some() {
        return CUptiResult::CUPTI_ERROR_HARDWARE_BUSY;
    }
    let object = new_object();
    *guard = Some(Pm { object, ..Default::default() });
    p.pPmSamplingObject = object as *mut CUpti_PmSampling_Object;
    SUCCESS
}

pub(super) unsafe extern "C" fn pm_disable(p: *mut CUpti_PmSampling_Disable_Params) -> CUptiResult {
    scripted!("cuptiPmSamplingDisable");
    let p = params!(p);
    let mut guard = PM.lock();
    if guard.as_ref().is_none_or(|pm| pm.object != p.pPmSamplingObject as usize) {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    *guard = None;
    SUCCESS
}

pub(super) unsafe extern "C" fn pm_set_config(p: *mut CUpti_PmSampling_SetConfig_Params) -> CUptiResult {
    scripted!("cuptiPmSamplingSetConfig");
    let p = params!(p);
    if p.pConfig.is_null() || p.samplingInterval == 0 {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    with_pm(p.pPmSamplingObject, |pm| {
        pm.configured = true;
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn pm_get_counter_data_size(
    p: *mut CUpti_PmSampling_GetCounterDataSize_Params,
) -> CUptiResult {
    scripted!("cuptiPmSamplingGetCounterDataSize");
    let p = params!(p);
    let samples = p.maxSamples as usize;
    with_pm(p.pPmSamplingObject, |_| {
        p.counterDataSize = HEADER + samples * PM_SLOT;
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn pm_counter_data_image_initialize(
    p: *mut CUpti_PmSampling_CounterDataImage_Initialize_Params,
) -> CUptiResult {
    scripted!("cuptiPmSamplingCounterDataImageInitialize");
    let p = params!(p);
    if p.pCounterData.is_null() || p.counterDataSize < HEADER {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let (image, size) = (p.pCounterData, p.counterDataSize);
    with_pm(p.pPmSamplingObject, |_| {
        // SAFETY: gmprof's image of `size` bytes, at least a header.
        unsafe { set_header(image, PM_MAGIC, (size - HEADER) / PM_SLOT, 0) };
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn pm_start(p: *mut CUpti_PmSampling_Start_Params) -> CUptiResult {
    scripted!("cuptiPmSamplingStart");
    let p = params!(p);
    with_pm(p.pPmSamplingObject, |pm| {
        if !pm.configured || pm.started {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        }
        pm.started = true;
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn pm_stop(p: *mut CUpti_PmSampling_Stop_Params) -> CUptiResult {
    scripted!("cuptiPmSamplingStop");
    let p = params!(p);
    with_pm(p.pPmSamplingObject, |pm| {
        if !pm.started {
            return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
        }
        pm.started = false;
        SUCCESS
    })
}

pub(super) unsafe extern "C" fn pm_decode_data(p: *mut CUpti_PmSampling_DecodeData_Params) -> CUptiResult {
    scripted!("cuptiPmSamplingDecodeData");
    let p = params!(p);
    let (image, size) = (p.pCounterDataImage, p.counterDataImageSize);
    let mut full = false;
    let r = with_pm(p.pPmSamplingObject, |pm| {
        // SAFETY: gmprof's image of `size` bytes.
        let Some((magic, capacity, mut count)) = (unsafe { header(image, size) }) else {
            return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
        };
        if &magic != PM_MAGIC {
            return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
        }
        let mut taken = 0;
        for &(start, end, values) in &pm.buffer {
            if count >= capacity {
                full = true;
                break;
            }
            // SAFETY: slot `count` lies inside the image (count < capacity).
            unsafe { set_pm_sample(image, count, start, end, values) };
            count += 1;
            taken += 1;
        }
        pm.buffer.drain(..taken);
        // SAFETY: as above.
        unsafe { set_header(image, PM_MAGIC, capacity, count) };
        SUCCESS
    });
    p.decodeStopReason = if full {
        CUpti_PmSampling_DecodeStopReason::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
    } else {
        CUpti_PmSampling_DecodeStopReason::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS
    };
    p.overflow = 0;
    r
}

pub(super) unsafe extern "C" fn pm_get_counter_data_info(
    p: *mut CUpti_PmSampling_GetCounterDataInfo_Params,
) -> CUptiResult {
    scripted!("cuptiPmSamplingGetCounterDataInfo");
    let p = params!(p);
    // SAFETY: gmprof's image of `counterDataImageSize` bytes.
    match unsafe { header(p.pCounterDataImage, p.counterDataImageSize) } {
        Some((magic, capacity, count)) if &magic == PM_MAGIC => {
            (p.numTotalSamples, p.numPopulatedSamples, p.numCompletedSamples) = (capacity, count, count);
            SUCCESS
        }
        _ => CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
    }
}

pub(super) unsafe extern "C" fn pm_counter_data_get_sample_info(
    p: *mut CUpti_PmSampling_CounterData_GetSampleInfo_Params,
) -> CUptiResult {
    scripted!("cuptiPmSamplingCounterDataGetSampleInfo");
    let p = params!(p);
    // SAFETY: gmprof's image of `counterDataImageSize` bytes.
    match unsafe { super::profiler::pm_sample(p.pCounterDataImage, p.counterDataImageSize, p.sampleIndex) } {
        Some((start, end, _)) => {
            (p.startTimestamp, p.endTimestamp) = (start, end);
            SUCCESS
        }
        None => CUptiResult::CUPTI_ERROR_INVALID_PARAMETER,
    }
}

/// The stall reasons the made-up device reports: index and name.
const STALL_REASONS: [(u32, &str); 2] =
    [(1, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"), (2, "smsp__pcsamp_warps_issue_stalled_selected")];

/// Samples each PC record carries (all of the first stall reason).
const SAMPLES_PER_PC: u32 = 10;

/// The CRC every made-up cubin has, as CUPTI computes it ([`get_cubin_crc`]).
pub(super) const CUBIN_CRC: u64 = 0x5c12_3a7d;

pub(super) unsafe extern "C" fn pc_enable(p: *mut CUpti_PCSamplingEnableParams) -> CUptiResult {
    scripted!("cuptiPCSamplingEnable");
    let p = params!(p);
    if p.ctx.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_CONTEXT;
    }
    let mut guard = PC.lock();
    let pc = guard.get_or_insert_with(Pc::default);
    if pc.enabled.contains(&(p.ctx as usize)) {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    }
    pc.enabled.push(p.ctx as usize);
    SUCCESS
}

/// Whether PC sampling is enabled on `ctx`.
fn pc_on(ctx: CUcontext) -> bool {
    PC.lock().as_ref().is_some_and(|pc| pc.enabled.contains(&(ctx as usize)))
}

pub(super) unsafe extern "C" fn pc_get_num_stall_reasons(
    p: *mut CUpti_PCSamplingGetNumStallReasonsParams,
) -> CUptiResult {
    scripted!("cuptiPCSamplingGetNumStallReasons");
    let p = params!(p);
    if !pc_on(p.ctx) || p.numStallReasons.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    }
    // SAFETY: checked non-null; gmprof's out-pointer.
    unsafe { p.numStallReasons.write(STALL_REASONS.len()) };
    SUCCESS
}

pub(super) unsafe extern "C" fn pc_get_stall_reasons(p: *mut CUpti_PCSamplingGetStallReasonsParams) -> CUptiResult {
    scripted!("cuptiPCSamplingGetStallReasons");
    let p = params!(p);
    if !pc_on(p.ctx) || p.numStallReasons < STALL_REASONS.len() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    for (i, (index, name)) in STALL_REASONS.iter().enumerate() {
        // SAFETY: gmprof gives `numStallReasons` indices and name buffers of 128 bytes.
        unsafe {
            *p.stallReasonIndex.add(i) = *index;
            let out = *p.stallReasons.add(i);
            std::ptr::copy_nonoverlapping(interned(name).as_ptr(), out, name.len() + 1);
        }
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn pc_set_configuration_attribute(
    p: *mut CUpti_PCSamplingConfigurationInfoParams,
) -> CUptiResult {
    scripted!("cuptiPCSamplingSetConfigurationAttribute");
    let p = params!(p);
    if !pc_on(p.ctx) || p.pPCSamplingConfigurationInfo.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    }
    for i in 0..p.numAttributes {
        // SAFETY: gmprof passes `numAttributes` entries.
        let info = unsafe { &mut *p.pPCSamplingConfigurationInfo.add(i) };
        if info.attributeType
            == CUpti_PCSamplingConfigurationAttributeType::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER
        {
            // SAFETY: the union member of this attribute type.
            let buffer = unsafe { info.attributeData.samplingDataBufferData.samplingDataBuffer };
            if let Some(pc) = PC.lock().as_mut() {
                pc.final_buffer = buffer as usize;
            }
        }
        info.attributeStatus = SUCCESS;
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn pc_get_configuration_attribute(
    p: *mut CUpti_PCSamplingConfigurationInfoParams,
) -> CUptiResult {
    scripted!("cuptiPCSamplingGetConfigurationAttribute");
    let p = params!(p);
    if !pc_on(p.ctx) || p.pPCSamplingConfigurationInfo.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    }
    for i in 0..p.numAttributes {
        // SAFETY: gmprof passes `numAttributes` entries.
        let info = unsafe { &mut *p.pPCSamplingConfigurationInfo.add(i) };
        if info.attributeType
            == CUpti_PCSamplingConfigurationAttributeType::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD
        {
            info.attributeData.samplingPeriodData.samplingPeriod = 13;
        }
        info.attributeStatus = SUCCESS;
    }
    SUCCESS
}

/// Fills a `CUpti_PCSamplingData` with the PCs of the kernels not drained yet.
///
/// # Safety
/// `data` is a buffer gmprof set up: `collectNumPcs` PC entries, each with room for every
/// stall reason.
unsafe fn fill(data: *mut CUpti_PCSamplingData, pending: &mut Vec<&'static CStr>) {
    // SAFETY: the caller's guarantee.
    let d = unsafe { &mut *data };
    let n = pending.len().min(d.collectNumPcs);
    for (i, name) in pending.drain(..n).enumerate() {
        // SAFETY: entry `i` < collectNumPcs, with room for at least one stall reason.
        unsafe {
            let pc = &mut *d.pPcData.add(i);
            pc.cubinCrc = CUBIN_CRC;
            pc.pcOffset = 0x20;
            pc.functionIndex = 0;
            pc.functionName = name.as_ptr() as *mut c_char;
            pc.correlationId = 0;
            pc.stallReasonCount = 1;
            *pc.stallReason =
                CUpti_PCSamplingStallReason { pcSamplingStallReasonIndex: STALL_REASONS[0].0, samples: SAMPLES_PER_PC };
        }
    }
    d.totalNumPcs = n;
    d.remainingNumPcs = pending.len();
    d.totalSamples = n as u64 * u64::from(SAMPLES_PER_PC);
    d.droppedSamples = 0;
    d.nonUsrKernelsTotalSamples = 0;
    d.hardwareBufferFull = 0;
}

pub(super) unsafe extern "C" fn pc_get_data(p: *mut CUpti_PCSamplingGetDataParams) -> CUptiResult {
    scripted!("cuptiPCSamplingGetData");
    let p = params!(p);
    if !pc_on(p.ctx) || p.pcSamplingData.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    }
    let mut guard = PC.lock();
    let Some(pc) = guard.as_mut() else { return CUptiResult::CUPTI_ERROR_INVALID_OPERATION };
    // SAFETY: gmprof's drain buffer.
    unsafe { fill(p.pcSamplingData as *mut CUpti_PCSamplingData, &mut pc.pending) };
    SUCCESS
}

pub(super) unsafe extern "C" fn pc_disable(p: *mut CUpti_PCSamplingDisableParams) -> CUptiResult {
    scripted!("cuptiPCSamplingDisable");
    let p = params!(p);
    let mut guard = PC.lock();
    let Some(pc) = guard.as_mut().filter(|pc| pc.enabled.contains(&(p.ctx as usize))) else {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    };
    pc.enabled.retain(|c| *c != p.ctx as usize);
    if pc.final_buffer != 0 {
        // SAFETY: the buffer gmprof configured, which it keeps until after the disable.
        unsafe { fill(pc.final_buffer as *mut CUpti_PCSamplingData, &mut pc.pending) };
    }
    SUCCESS
}

/// The SASS metrics the made-up chip offers: gmprof's six, by id.
const SASS_METRICS: [(u64, &str); 6] = [
    (1001, "smsp__sass_inst_executed"),
    (1002, "smsp__sass_thread_inst_executed"),
    (1003, "smsp__sass_inst_executed_op_global_ld"),
    (1004, "smsp__sass_inst_executed_op_global_st"),
    (1005, "smsp__sass_sectors_mem_global"),
    (1006, "smsp__sass_inst_executed_op_ldgsts"),
];

/// Each counted kernel's one instruction's values, in [`SASS_METRICS`]' order.
const SASS_VALUES: [u64; 6] = [64, 2048, 16, 8, 24, 0];

fn sass_chip_ok(chip: *const c_char) -> bool {
    // SAFETY: gmprof's chip name, NUL-terminated.
    let chip = unsafe { text(chip) };
    chip == super::profiler::CHIP.to_string_lossy()
}

pub(super) unsafe extern "C" fn sass_get_num_of_metrics(
    p: *mut CUpti_SassMetrics_GetNumOfMetrics_Params,
) -> CUptiResult {
    scripted!("cuptiSassMetricsGetNumOfMetrics");
    let p = params!(p);
    if !sass_chip_ok(p.pChipName) {
        return CUptiResult::CUPTI_ERROR_INVALID_CHIP_NAME;
    }
    p.numOfMetrics = SASS_METRICS.len();
    SUCCESS
}

pub(super) unsafe extern "C" fn sass_get_metrics(p: *mut CUpti_SassMetrics_GetMetrics_Params) -> CUptiResult {
    scripted!("cuptiSassMetricsGetMetrics");
    let p = params!(p);
    if !sass_chip_ok(p.pChipName) || p.pMetricsList.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    for (i, (id, name)) in SASS_METRICS.iter().enumerate().take(p.numOfMetrics) {
        // SAFETY: gmprof's list has `numOfMetrics` entries.
        unsafe {
            *p.pMetricsList.add(i) = CUpti_SassMetrics_MetricDetails {
                metricId: *id,
                pMetricName: interned(name).as_ptr(),
                pMetricDescription: c"counted by the scripted libcupti".as_ptr(),
            };
        }
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn sass_get_properties(p: *mut CUpti_SassMetrics_GetProperties_Params) -> CUptiResult {
    scripted!("cuptiSassMetricsGetProperties");
    let p = params!(p);
    // SAFETY: gmprof's metric name, NUL-terminated.
    let name = unsafe { text(p.pMetricName) }.into_owned();
    match SASS_METRICS.iter().find(|(_, n)| *n == name).filter(|_| sass_chip_ok(p.pChipName)) {
        Some((id, n)) => {
            p.metric = CUpti_SassMetrics_MetricDetails {
                metricId: *id,
                pMetricName: interned(n).as_ptr(),
                pMetricDescription: c"counted by the scripted libcupti".as_ptr(),
            };
            SUCCESS
        }
        None => CUptiResult::CUPTI_ERROR_INVALID_METRIC_NAME,
    }
}

pub(super) unsafe extern "C" fn sass_set_config(p: *mut CUpti_SassMetricsSetConfig_Params) -> CUptiResult {
    scripted!("cuptiSassMetricsSetConfig");
    let p = params!(p);
    if p.numOfMetricConfig == 0 || p.pConfigs.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    SASS.lock().get_or_insert_with(Sass::default).configured.push(p.deviceIndex);
    SUCCESS
}

pub(super) unsafe extern "C" fn sass_unset_config(p: *mut CUpti_SassMetricsUnsetConfig_Params) -> CUptiResult {
    scripted!("cuptiSassMetricsUnsetConfig");
    let p = params!(p);
    let device = p.deviceIndex;
    match SASS.lock().as_mut().filter(|s| s.configured.contains(&device)) {
        Some(s) => {
            s.configured.retain(|d| *d != device);
            SUCCESS
        }
        None => CUptiResult::CUPTI_ERROR_INVALID_OPERATION,
    }
}

pub(super) unsafe extern "C" fn sass_enable(p: *mut CUpti_SassMetricsEnable_Params) -> CUptiResult {
    scripted!("cuptiSassMetricsEnable");
    let p = params!(p);
    let mut guard = SASS.lock();
    let Some(s) = guard.as_mut().filter(|s| !s.configured.is_empty()) else {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    };
    s.collecting.push(p.ctx as usize);
    SUCCESS
}

pub(super) unsafe extern "C" fn sass_disable(p: *mut CUpti_SassMetricsDisable_Params) -> CUptiResult {
    scripted!("cuptiSassMetricsDisable");
    let p = params!(p);
    let mut guard = SASS.lock();
    let Some(s) = guard.as_mut().filter(|s| s.collecting.contains(&(p.ctx as usize))) else {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    };
    s.collecting.retain(|c| *c != p.ctx as usize);
    p.numOfDroppedRecords = std::mem::take(&mut s.pending).len();
    SUCCESS
}

pub(super) unsafe extern "C" fn sass_get_data_properties(
    p: *mut CUpti_SassMetricsGetDataProperties_Params,
) -> CUptiResult {
    scripted!("cuptiSassMetricsGetDataProperties");
    let p = params!(p);
    let guard = SASS.lock();
    let Some(s) = guard.as_ref().filter(|s| s.collecting.contains(&(p.ctx as usize))) else {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    };
    p.numOfPatchedInstructionRecords = s.pending.len();
    p.numOfInstances = SASS_METRICS.len();
    SUCCESS
}

pub(super) unsafe extern "C" fn sass_flush_data(p: *mut CUpti_SassMetricsFlushData_Params) -> CUptiResult {
    scripted!("cuptiSassMetricsFlushData");
    let p = params!(p);
    let mut guard = SASS.lock();
    let Some(s) = guard.as_mut().filter(|s| s.collecting.contains(&(p.ctx as usize))) else {
        return CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
    };
    if p.pMetricsData.is_null() || p.numOfPatchedInstructionRecords < s.pending.len() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let instances = p.numOfInstances.min(SASS_METRICS.len());
    for (i, name) in s.pending.drain(..).enumerate() {
        // SAFETY: gmprof's records, each pointing at `numOfInstances` values.
        unsafe {
            let r = &mut *p.pMetricsData.add(i);
            r.cubinCrc = CUBIN_CRC as u32;
            r.functionIndex = 0;
            r.functionName = malloc_string(&name.to_string_lossy());
            r.pcOffset = 0x10;
            for (j, ((id, _), value)) in SASS_METRICS.iter().zip(SASS_VALUES).enumerate().take(instances) {
                *r.pInstanceValues.add(j) = CUpti_SassMetrics_InstanceValue { metricId: *id, value };
            }
        }
    }
    SUCCESS
}

pub(super) unsafe extern "C" fn get_cubin_crc(p: *mut CUpti_GetCubinCrcParams) -> CUptiResult {
    scripted!("cuptiGetCubinCrc");
    let p = params!(p);
    if p.cubin.is_null() || p.cubinSize == 0 {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    p.cubinCrc = CUBIN_CRC;
    SUCCESS
}

pub(super) unsafe extern "C" fn get_sass_to_source_correlation(
    p: *mut CUpti_GetSassToSourceCorrelationParams,
) -> CUptiResult {
    scripted!("cuptiGetSassToSourceCorrelation");
    let p = params!(p);
    if p.cubin.is_null() || p.functionName.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    p.fileName = malloc_string("kernels.cu");
    p.dirName = malloc_string("/src");
    p.lineNumber = 40 + p.pcOffset as u32 / 16;
    SUCCESS
}
