//! CUPTI's PC Sampling API (`cupti_pcsampling.h`): every 2^N cycles each SM's warp
//! scheduler picks a warp and records its program counter and why it was stalled (or that it
//! issued). CUPTI parses the hardware buffer on worker threads of its own and hands PC records
//! ([`PcRecordRaw`]: cubin CRC, function, SASS offset, samples per stall reason) to
//! `cuptiPCSamplingGetData`.
//!
//! Layer 2. The objects:
//!
//! - [`stall_reasons`]: the stall reasons the device reports, by CUPTI's index and name
//!   (`smsp__pcsamp_warps_issue_stalled_long_scoreboard`, and `..._not_issued` twins);
//! - [`PcSampling`]: PC sampling enabled on one context (`cuptiPCSamplingEnable`), disabled on
//!   drop; [`PcSampling::configure`] sets every attribute in one call, [`PcSampling::drain`]
//!   takes what CUPTI parsed since the last drain, [`PcSampling::shutdown`] disables and reads
//!   the records CUPTI copies into the configured buffer at disable.
//!
//! Facts from the header (CUPTI 13.0): in continuous mode kernels are not serialized and a
//! record's `correlationId` is 0 (it is only valid in kernel-serialized mode);
//! `cuptiPCSamplingGetData` never synchronizes the device, so a drain has what CUPTI's worker
//! threads parsed so far; a full hardware buffer makes it return `CUPTI_ERROR_OUT_OF_MEMORY`
//! with `hardwareBufferFull` set and no PC data. A record's `functionName` may be shared with
//! other records and activity records; gmprof copies it and never frees it (freeing a shared
//! string twice is worse than keeping it).

use std::ffi::{c_char, c_void, CStr};

use super::driver::Context;
use super::library::Cupti;
use crate::error::{Error, Result};
use crate::sys::cupti::*;

/// One stall reason a device reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StallReasonName {
    /// CUPTI's index (what records carry).
    pub index: u32,
    /// CUPTI's name.
    pub name: String,
}

/// Longest stall reason name CUPTI writes (`CUPTI_STALL_REASON_STRING_SIZE`).
const STALL_REASON_STRING_SIZE: usize = 128;

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: CUPTI's strings are NUL-terminated.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The stall reasons of the device of `ctx` (`cuptiPCSamplingGetNumStallReasons` and
/// `cuptiPCSamplingGetStallReasons`).
/// Sampling must be enabled on `ctx` first ([`PcSampling::enable`]): before, CUPTI answers
/// `CUPTI_ERROR_INVALID_OPERATION`.
pub fn stall_reasons(cupti: &Cupti, ctx: Context) -> Result<Vec<StallReasonName>> {
    let mut count: usize = 0;
    let mut n = CUpti_PCSamplingGetNumStallReasonsParams {
        size: std::mem::size_of::<CUpti_PCSamplingGetNumStallReasonsParams>(),
        pPriv: std::ptr::null_mut(),
        ctx: ctx.as_raw(),
        numStallReasons: &mut count,
    };
    call_cupti!(cupti, cuptiPCSamplingGetNumStallReasons, "counting the PC sampling stall reasons", |f| {
        // SAFETY: `n` is sized and `count` outlives the call.
        unsafe { f(&mut n) }
    })?;
    let mut indices = vec![0u32; count];
    let mut names: Vec<Vec<c_char>> = (0..count).map(|_| vec![0 as c_char; STALL_REASON_STRING_SIZE]).collect();
    let mut name_ptrs: Vec<*mut c_char> = names.iter_mut().map(|v| v.as_mut_ptr()).collect();
    let mut g = CUpti_PCSamplingGetStallReasonsParams {
        size: std::mem::size_of::<CUpti_PCSamplingGetStallReasonsParams>(),
        pPriv: std::ptr::null_mut(),
        ctx: ctx.as_raw(),
        numStallReasons: count,
        stallReasonIndex: indices.as_mut_ptr(),
        stallReasons: name_ptrs.as_mut_ptr(),
    };
    call_cupti!(cupti, cuptiPCSamplingGetStallReasons, "listing the PC sampling stall reasons", |f| {
        // SAFETY: `indices` has `count` entries and each name buffer has
        // CUPTI_STALL_REASON_STRING_SIZE bytes; all outlive the call.
        unsafe { f(&mut g) }
    })?;
    Ok(indices
        .iter()
        .zip(&names)
        .map(|(i, name)| {
            let last = name.len() - 1;
            let mut name = name.clone();
            name[last] = 0;
            StallReasonName { index: *i, name: text(name.as_ptr()) }
        })
        .collect())
}

/// Kernel serialization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collection {
    /// Kernels run as they would (records have no correlation id).
    Continuous,
    /// Kernels are serialized; each record has its launch's correlation id.
    KernelSerialized,
}

/// How to sample (every attribute gmprof sets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcSamplingSetup {
    /// Sample every 2^`period_exponent` cycles (5 to 31); `None`: CUPTI's default.
    pub period_exponent: Option<u32>,
    /// Stall reason indices to collect (all of [`stall_reasons`]).
    pub reasons: Vec<u32>,
    /// Bytes of CUPTI's buffer of parsed records (CUPTI's default is 1 MiB, ~5500 PCs).
    pub scratch_buffer_bytes: usize,
    /// Bytes of the device buffer (CUPTI's default is 512 MiB).
    pub hardware_buffer_bytes: usize,
    /// Kernel serialization.
    pub collection: Collection,
    /// How long CUPTI's worker threads sleep between parses, ms (CUPTI's default 100).
    pub worker_sleep_ms: Option<u32>,
    /// PC records one drain takes at most.
    pub max_pcs: usize,
    /// PC records the buffer CUPTI fills at disable holds (more are discarded by CUPTI).
    pub final_max_pcs: usize,
}

/// One PC record, copied out of CUPTI's buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcRecordRaw {
    /// CUPTI's CRC of the cubin ([`super::sass_metrics::cubin_crc`]).
    pub cubin_crc: u64,
    /// Offset of the instruction in its function, bytes.
    pub pc_offset: u64,
    /// The function's symbol index in its module.
    pub function_index: u32,
    /// The function's (mangled) name.
    pub function_name: String,
    /// The launch's correlation id (0 in continuous mode).
    pub correlation_id: u32,
    /// (stall reason index, samples).
    pub stalls: Vec<(u32, u32)>,
}

/// What one drain returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// The PC records.
    pub records: Vec<PcRecordRaw>,
    /// Samples of every PC (user and non-user kernels, dropped ones, all stall reasons).
    pub total_samples: u64,
    /// Samples the hardware dropped (back-pressure or overflow).
    pub dropped_samples: u64,
    /// Samples in kernels CUPTI gives no records for (non-user kernels).
    pub non_user_samples: u64,
    /// PC records still waiting in CUPTI (the buffer was the limit: drain again).
    pub remaining_pcs: usize,
    /// CUPTI said the hardware buffer was full (its PC data are lost).
    pub hardware_buffer_full: bool,
    /// CUPTI's range id of the data.
    pub range_id: u64,
}

/// A `CUpti_PCSamplingData` with room for `max_pcs` records of `num_reasons` stall reasons,
/// pinned in memory (CUPTI keeps the configured one's address).
struct DataBuffer {
    data: Box<CUpti_PCSamplingData>,
    _pcs: Vec<CUpti_PCSamplingPCData>,
    _reasons: Vec<CUpti_PCSamplingStallReason>,
}

impl DataBuffer {
    fn new(max_pcs: usize, num_reasons: usize) -> Self {
        let mut reasons = vec![CUpti_PCSamplingStallReason::default(); max_pcs * num_reasons.max(1)];
        let mut pcs = vec![CUpti_PCSamplingPCData::default(); max_pcs];
        for (i, pc) in pcs.iter_mut().enumerate() {
            pc.size = std::mem::size_of::<CUpti_PCSamplingPCData>();
            // In bounds: `reasons` has `num_reasons.max(1)` entries per PC.
            pc.stallReason = reasons[i * num_reasons.max(1)..].as_mut_ptr();
        }
        let mut data = Box::new(CUpti_PCSamplingData::default());
        data.size = std::mem::size_of::<CUpti_PCSamplingData>();
        data.collectNumPcs = max_pcs;
        data.pPcData = pcs.as_mut_ptr();
        DataBuffer { data, _pcs: pcs, _reasons: reasons }
    }

    fn raw(&mut self) -> *mut c_void {
        (&mut *self.data as *mut CUpti_PCSamplingData).cast()
    }

    /// Copies the records out and makes the buffer ready for the next fill.
    fn take(&mut self) -> Drained {
        let d = &*self.data;
        let n = d.totalNumPcs.min(d.collectNumPcs);
        let mut records = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `pPcData` points at `collectNumPcs` entries owned by `self`; CUPTI filled
            // the first `totalNumPcs`.
            let pc = unsafe { *d.pPcData.add(i) };
            let count = pc.stallReasonCount;
            let stalls = (0..count)
                .map(|j| {
                    // SAFETY: CUPTI wrote `stallReasonCount` entries (at most the number of
                    // reasons each PC has room for) at `stallReason`.
                    let s = unsafe { *pc.stallReason.add(j) };
                    (s.pcSamplingStallReasonIndex, s.samples)
                })
                .collect();
            records.push(PcRecordRaw {
                cubin_crc: pc.cubinCrc,
                pc_offset: pc.pcOffset,
                function_index: pc.functionIndex,
                function_name: text(pc.functionName),
                correlation_id: pc.correlationId,
                stalls,
            });
        }
        let drained = Drained {
            records,
            total_samples: d.totalSamples,
            dropped_samples: d.droppedSamples,
            non_user_samples: d.nonUsrKernelsTotalSamples,
            remaining_pcs: d.remainingNumPcs,
            hardware_buffer_full: d.hardwareBufferFull != 0,
            range_id: d.rangeId,
        };
        let d = &mut *self.data;
        d.totalNumPcs = 0;
        d.remainingNumPcs = 0;
        d.totalSamples = 0;
        d.droppedSamples = 0;
        d.nonUsrKernelsTotalSamples = 0;
        d.hardwareBufferFull = 0;
        drained
    }
}

/// PC sampling enabled on one context; disabled on drop.
#[must_use = "dropping it disables PC sampling"]
pub struct PcSampling {
    cupti: Cupti,
    ctx: Context,
    /// The buffer CUPTI copies the last records into at disable (configured).
    final_buffer: Option<DataBuffer>,
    /// The buffer drains fill.
    drain_buffer: Option<DataBuffer>,
    /// The stall reason indices handed to CUPTI, kept alive for as long as CUPTI may read them.
    reasons: Vec<u32>,
    enabled: bool,
}

impl std::fmt::Debug for PcSampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcSampling").field("enabled", &self.enabled).finish_non_exhaustive()
    }
}

// SAFETY: the context is a driver handle usable from any thread; the buffers are owned and
// only touched through `&mut self`, from one thread at a time (the drain thread, or behind a
// mutex).
unsafe impl Send for PcSampling {}

impl PcSampling {
    /// `cuptiPCSamplingEnable` on `ctx`.
    pub fn enable(cupti: &Cupti, ctx: Context) -> Result<PcSampling> {
        let mut p = CUpti_PCSamplingEnableParams {
            size: std::mem::size_of::<CUpti_PCSamplingEnableParams>(),
            pPriv: std::ptr::null_mut(),
            ctx: ctx.as_raw(),
        };
        call_cupti!(cupti, cuptiPCSamplingEnable, "enabling PC sampling", |f| {
            // SAFETY: `p` is sized and names a live context.
            unsafe { f(&mut p) }
        })?;
        Ok(PcSampling {
            cupti: *cupti,
            ctx,
            final_buffer: None,
            drain_buffer: None,
            reasons: Vec::new(),
            enabled: true,
        })
    }

    /// Sets every attribute of `setup` in one `cuptiPCSamplingSetConfigurationAttribute`
    /// call; an attribute CUPTI refused is named in the error.
    pub fn configure(&mut self, setup: &PcSamplingSetup) -> Result<()> {
        use CUpti_PCSamplingConfigurationAttributeType as A;
        self.reasons = setup.reasons.clone();
        let mut final_buffer = DataBuffer::new(setup.final_max_pcs, self.reasons.len());
        self.drain_buffer = Some(DataBuffer::new(setup.max_pcs, self.reasons.len()));
        let mut infos: Vec<CUpti_PCSamplingConfigurationInfo> = Vec::new();
        let mut push = |kind: A, fill: &dyn Fn(&mut CUpti_PCSamplingConfigurationInfo__bindgen_ty_1)| {
            let mut info = CUpti_PCSamplingConfigurationInfo { attributeType: kind, ..Default::default() };
            fill(&mut info.attributeData);
            infos.push(info);
        };
        let reasons_ptr = self.reasons.as_mut_ptr();
        let reason_count = self.reasons.len();
        push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON, &|d| {
            d.stallReasonData.stallReasonCount = reason_count;
            d.stallReasonData.pStallReasonIndex = reasons_ptr;
        });
        let scratch = setup.scratch_buffer_bytes;
        push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE, &|d| {
            d.scratchBufferSizeData.scratchBufferSize = scratch;
        });
        let hw = setup.hardware_buffer_bytes;
        push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE, &|d| {
            d.hardwareBufferSizeData.hardwareBufferSize = hw;
        });
        let mode = match setup.collection {
            Collection::Continuous => CUpti_PCSamplingCollectionMode::CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS,
            Collection::KernelSerialized => {
                CUpti_PCSamplingCollectionMode::CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED
            }
        };
        push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE, &|d| {
            d.collectionModeData.collectionMode = mode;
        });
        push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL, &|d| {
            d.enableStartStopControlData.enableStartStopControl = 0;
        });
        push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT, &|d| {
            d.outputDataFormatData.outputDataFormat =
                CUpti_PCSamplingOutputDataFormat::CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
        });
        let buffer = final_buffer.raw();
        push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER, &|d| {
            d.samplingDataBufferData.samplingDataBuffer = buffer;
        });
        if let Some(exp) = setup.period_exponent {
            push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, &|d| {
                d.samplingPeriodData.samplingPeriod = exp;
            });
        }
        if let Some(ms) = setup.worker_sleep_ms {
            push(A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN, &|d| {
                d.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan = ms;
            });
        }
        let mut p = CUpti_PCSamplingConfigurationInfoParams {
            size: std::mem::size_of::<CUpti_PCSamplingConfigurationInfoParams>(),
            pPriv: std::ptr::null_mut(),
            ctx: self.ctx.as_raw(),
            numAttributes: infos.len(),
            pPCSamplingConfigurationInfo: infos.as_mut_ptr(),
        };
        // The buffer's heap parts do not move when the owner moves into `self`.
        self.final_buffer = Some(final_buffer);
        let result =
            call_cupti!(self.cupti, cuptiPCSamplingSetConfigurationAttribute, "configuring PC sampling", |f| {
                // SAFETY: `infos` has `numAttributes` entries; the reason indices and the data
                // buffer they point at are owned by `self` and outlive the sampling.
                unsafe { f(&mut p) }
            });
        if let Err(e) = result {
            let refused: Vec<String> = infos
                .iter()
                .filter(|i| i.attributeStatus != CUptiResult::CUPTI_SUCCESS)
                .map(|i| format!("attribute {} ({})", i.attributeType.0, i.attributeStatus.0))
                .collect();
            if refused.is_empty() {
                return Err(e);
            }
            return Err(Error::InvalidConfig(format!("CUPTI refused PC sampling's {}: {e}", refused.join(", "))));
        }
        Ok(())
    }

    /// The sampling period CUPTI uses (`cuptiPCSamplingGetConfigurationAttribute`): every
    /// 2^N cycles.
    pub fn period_exponent(&self) -> Result<u32> {
        let mut info = CUpti_PCSamplingConfigurationInfo {
            attributeType:
                CUpti_PCSamplingConfigurationAttributeType::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD,
            ..Default::default()
        };
        let mut p = CUpti_PCSamplingConfigurationInfoParams {
            size: std::mem::size_of::<CUpti_PCSamplingConfigurationInfoParams>(),
            pPriv: std::ptr::null_mut(),
            ctx: self.ctx.as_raw(),
            numAttributes: 1,
            pPCSamplingConfigurationInfo: &mut info,
        };
        call_cupti!(self.cupti, cuptiPCSamplingGetConfigurationAttribute, "reading the PC sampling period", |f| {
            // SAFETY: one attribute for CUPTI to fill; `info` outlives the call.
            unsafe { f(&mut p) }
        })?;
        // SAFETY: CUPTI filled the sampling period member of the union, the one asked for.
        Ok(unsafe { info.attributeData.samplingPeriodData.samplingPeriod })
    }

    /// `cuptiPCSamplingGetData`: the records CUPTI parsed since the last drain. A full
    /// hardware buffer (`CUPTI_ERROR_OUT_OF_MEMORY`) is no error here: it comes back as
    /// [`Drained::hardware_buffer_full`].
    pub fn drain(&mut self) -> Result<Drained> {
        let buffer = self
            .drain_buffer
            .as_mut()
            .ok_or_else(|| Error::InvalidState("PC sampling drained before it was configured".into()))?;
        let mut p = CUpti_PCSamplingGetDataParams {
            size: std::mem::size_of::<CUpti_PCSamplingGetDataParams>(),
            pPriv: std::ptr::null_mut(),
            ctx: self.ctx.as_raw(),
            pcSamplingData: buffer.raw(),
        };
        let result = call_cupti!(self.cupti, cuptiPCSamplingGetData, "reading PC samples", |f| {
            // SAFETY: the buffer has room for `collectNumPcs` records of every configured
            // stall reason and is owned by `self`.
            unsafe { f(&mut p) }
        });
        match result {
            Ok(()) => Ok(buffer.take()),
            Err(Error::Cupti { ref code_name, .. }) if code_name == "CUPTI_ERROR_OUT_OF_MEMORY" => {
                let mut drained = buffer.take();
                drained.hardware_buffer_full = true;
                Ok(drained)
            }
            Err(e) => Err(e),
        }
    }

    fn disable(&mut self) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        self.enabled = false;
        let mut p = CUpti_PCSamplingDisableParams {
            size: std::mem::size_of::<CUpti_PCSamplingDisableParams>(),
            pPriv: std::ptr::null_mut(),
            ctx: self.ctx.as_raw(),
        };
        call_cupti!(self.cupti, cuptiPCSamplingDisable, "disabling PC sampling", |f| {
            // SAFETY: sampling is enabled on the context; the configured buffer is still owned
            // by `self` for CUPTI to copy the last records into.
            unsafe { f(&mut p) }
        })
    }

    /// Disables sampling and returns the records CUPTI copied into the configured buffer
    /// (those parsed after the last drain), and whether they filled it (CUPTI discards
    /// the records that do not fit).
    pub fn shutdown(mut self) -> Result<(Drained, bool)> {
        self.disable()?;
        let drained = self.final_buffer.as_mut().map(DataBuffer::take).unwrap_or_default();
        let capacity = self.final_buffer.as_ref().map_or(0, |b| b.data.collectNumPcs);
        let full = capacity > 0 && drained.records.len() >= capacity;
        Ok((drained, full))
    }
}

impl Drop for PcSampling {
    fn drop(&mut self) {
        if let Err(e) = self.disable() {
            tracing::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_gives_each_pc_its_own_stall_reason_slots_and_copies_records_out() {
        let mut b = DataBuffer::new(3, 4);
        let first = b.data.pPcData;
        // SAFETY: the test writes within the buffer as CUPTI would.
        unsafe {
            let pc1 = &mut *first.add(1);
            assert_eq!(pc1.stallReason, b._reasons.as_mut_ptr().add(4));
            pc1.pcOffset = 0x1a0;
            pc1.cubinCrc = 7;
            pc1.stallReasonCount = 2;
            *pc1.stallReason = CUpti_PCSamplingStallReason { pcSamplingStallReasonIndex: 5, samples: 9 };
            *pc1.stallReason.add(1) = CUpti_PCSamplingStallReason { pcSamplingStallReasonIndex: 6, samples: 2 };
        }
        b.data.totalNumPcs = 2;
        b.data.totalSamples = 40;
        b.data.droppedSamples = 3;
        b.data.hardwareBufferFull = 1;
        let d = b.take();
        assert_eq!(d.records.len(), 2);
        assert_eq!(d.records[1].pc_offset, 0x1a0);
        assert_eq!(d.records[1].stalls, vec![(5, 9), (6, 2)]);
        assert_eq!(d.records[0].stalls, vec![]);
        assert_eq!((d.total_samples, d.dropped_samples, d.hardware_buffer_full), (40, 3, true));
        // Emptied for the next drain.
        assert_eq!(b.take(), Drained::default());
    }
}
