//! CUPTI's PM sampling API (CUDA 12.6+, `cupti_pmsampling.h`): a device's performance
//! monitors read at a fixed interval into a hardware buffer, decoded into a counter data
//! image whose samples carry a start and end timestamp and are evaluated to metric values by
//! a host object made with [`ProfilerHost::new_pm_sampling`](super::host::ProfilerHost::new_pm_sampling).
//!
//! No replay and no serialization: the workload runs as it would unprofiled.

use std::ffi::CString;
use std::os::raw::c_char;

use super::library::Cupti;
use crate::error::{Error, Result};
use crate::sys::cupti::{
    CUptiResult, CUpti_PmSampling_CounterDataImage_Initialize_Params,
    CUpti_PmSampling_CounterData_GetSampleInfo_Params, CUpti_PmSampling_DecodeData_Params,
    CUpti_PmSampling_DecodeStopReason, CUpti_PmSampling_Disable_Params, CUpti_PmSampling_Enable_Params,
    CUpti_PmSampling_GetCounterAvailability_Params, CUpti_PmSampling_GetCounterDataInfo_Params,
    CUpti_PmSampling_GetCounterDataSize_Params, CUpti_PmSampling_HardwareBuffer_AppendMode, CUpti_PmSampling_Object,
    CUpti_PmSampling_SetConfig_Params, CUpti_PmSampling_Start_Params, CUpti_PmSampling_Stop_Params,
    CUpti_PmSampling_TriggerMode,
};

/// What the sampling interval counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Nanoseconds of GPU time.
    TimeNs(u64),
    /// Cycles of the GPU's SYSCLK (its frequency may vary).
    SysclkCycles(u64),
}

impl Trigger {
    fn raw(self) -> (CUpti_PmSampling_TriggerMode, u64) {
        match self {
            Trigger::TimeNs(ns) => (CUpti_PmSampling_TriggerMode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, ns),
            Trigger::SysclkCycles(c) => {
                (CUpti_PmSampling_TriggerMode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL, c)
            }
        }
    }
}

/// Why a decode stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeStop {
    /// Every record of the hardware buffer was decoded.
    EndOfRecords,
    /// The counter data image is full: evaluate, re-initialize and decode again.
    CounterDataFull,
    /// Another reason (CUPTI's `OTHER`).
    Other,
}

/// What one [`PmSampler::decode`] call reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Why decoding stopped.
    pub stop: DecodeStop,
    /// The hardware buffer overflowed: samples were lost (CUPTI's `overflow` flag, or
    /// `CUPTI_ERROR_OUT_OF_MEMORY` from the decode, in which case nothing was decoded).
    pub overflow: bool,
}

/// How many samples a counter data image holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterDataInfo {
    /// Samples the image has room for.
    pub total: usize,
    /// Samples with some data.
    pub populated: usize,
    /// Samples complete and ready to evaluate.
    pub completed: usize,
}

/// The counter availability image of a device for PM sampling.
pub fn counter_availability(cupti: &Cupti, device_index: usize) -> Result<Vec<u8>> {
    let mut p = cupti_params!(CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage);
    p.deviceIndex = device_index;
    call_cupti!(cupti, cuptiPmSamplingGetCounterAvailability, "sizing the PM sampling availability image", |f| {
        // SAFETY: a null image pointer asks CUPTI for the size only.
        unsafe { f(&mut p) }
    })?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    call_cupti!(cupti, cuptiPmSamplingGetCounterAvailability, "reading the PM sampling availability image", |f| {
        // SAFETY: `image` is writable for the size CUPTI asked for and outlives the call.
        unsafe { f(&mut p) }
    })?;
    Ok(image)
}

/// A PM sampling counter data image: decoded samples land here.
#[derive(Clone, Debug, Default)]
pub struct PmCounterData {
    bytes: Vec<u8>,
}

impl PmCounterData {
    /// The image's bytes, for evaluation with a PM sampling host object.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The image's bytes, moved out (evaluated elsewhere, then reused through
    /// [`PmSampler::reuse_counter_data`]).
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Sample counts (`cuptiPmSamplingGetCounterDataInfo`).
    pub fn info(&self, cupti: &Cupti) -> Result<CounterDataInfo> {
        let mut p = cupti_params!(CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples);
        p.pCounterDataImage = self.bytes.as_ptr();
        p.counterDataImageSize = self.bytes.len();
        call_cupti!(cupti, cuptiPmSamplingGetCounterDataInfo, "counting decoded PM samples", |f| {
            // SAFETY: the image outlives the call and is only read.
            unsafe { f(&mut p) }
        })?;
        Ok(CounterDataInfo {
            total: p.numTotalSamples,
            populated: p.numPopulatedSamples,
            completed: p.numCompletedSamples,
        })
    }
}

/// PM sampling enabled on one device; disabled on drop.
#[must_use = "dropping it disables PM sampling"]
pub struct PmSampler {
    cupti: Cupti,
    object: *mut CUpti_PmSampling_Object,
    device_index: usize,
    /// The configuration image handed to CUPTI, kept alive for as long as CUPTI may read it.
    config: Vec<u8>,
}

impl std::fmt::Debug for PmSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmSampler").field("device_index", &self.device_index).finish_non_exhaustive()
    }
}

// SAFETY: the object is an opaque CUPTI handle with no thread affinity (CUPTI's sample
// decodes on a thread of its own); gmprof uses it from one thread at a time (it is owned by
// the decode thread, or behind a mutex).
unsafe impl Send for PmSampler {}

impl PmSampler {
    /// `cuptiPmSamplingEnable` on device `device_index`. Needs the profiler API initialized
    /// ([`ProfilerApi`](super::target::ProfilerApi)).
    pub fn enable(cupti: &Cupti, device_index: usize) -> Result<PmSampler> {
        let mut p = cupti_params!(CUpti_PmSampling_Enable_Params, pPmSamplingObject);
        p.deviceIndex = device_index;
        call_cupti!(cupti, cuptiPmSamplingEnable, "enabling PM sampling", |f| {
            // SAFETY: `p` is sized; CUPTI fills the object pointer.
            unsafe { f(&mut p) }
        })?;
        if p.pPmSamplingObject.is_null() {
            return Err(Error::InvalidState("cuptiPmSamplingEnable returned no object".into()));
        }
        Ok(PmSampler { cupti: *cupti, object: p.pPmSamplingObject, device_index, config: Vec::new() })
    }

    /// The device it samples.
    pub fn device_index(&self) -> usize {
        self.device_index
    }

    /// `cuptiPmSamplingSetConfig`: the metrics of `config_image` (from a PM sampling host
    /// object), a hardware buffer of `hardware_buffer_bytes`, sampled every `trigger`. When
    /// the hardware buffer fills, the newest samples are dropped (CUPTI's keep-oldest mode)
    /// and the next decode reports an overflow. The image is kept by the sampler.
    pub fn set_config(&mut self, config_image: Vec<u8>, hardware_buffer_bytes: usize, trigger: Trigger) -> Result<()> {
        self.config = config_image;
        let (mode, interval) = trigger.raw();
        let mut p = cupti_params!(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
        p.pPmSamplingObject = self.object;
        p.configSize = self.config.len();
        p.pConfig = self.config.as_ptr();
        p.hardwareBufferSize = hardware_buffer_bytes;
        p.samplingInterval = interval;
        p.triggerMode = mode;
        // KEEP_LATEST: a full buffer overwrites its oldest records and sampling goes on.
        // With KEEP_OLDEST an H100 recorded nothing after the first overflow, and neither a
        // stop and start (CUPTI_ERROR_UNKNOWN from the start) nor anything short of a new
        // object brought it back; the records overwritten now show as a gap in the sample
        // times (counted as missing samples).
        p.hwBufferAppendMode =
            CUpti_PmSampling_HardwareBuffer_AppendMode::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
        call_cupti!(self.cupti, cuptiPmSamplingSetConfig, "configuring PM sampling", |f| {
            // SAFETY: the object is live; the config image is owned by `self` and outlives
            // every later call on the object.
            unsafe { f(&mut p) }
        })
    }

    /// Bytes of a counter data image for `max_samples` samples of `metrics`.
    pub fn counter_data_size(&self, metrics: &[&str], max_samples: u32) -> Result<usize> {
        let owned: Vec<CString> = metrics
            .iter()
            .map(|m| CString::new(*m).map_err(|_| Error::InvalidConfig(format!("metric name contains NUL: {m:?}"))))
            .collect::<Result<_>>()?;
        let mut ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut p = cupti_params!(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
        p.pPmSamplingObject = self.object;
        p.pMetricNames = ptrs.as_mut_ptr();
        p.numMetrics = ptrs.len();
        p.maxSamples = max_samples;
        call_cupti!(self.cupti, cuptiPmSamplingGetCounterDataSize, "sizing the PM sampling counter data", |f| {
            // SAFETY: the name pointers point into `owned`; both outlive the call.
            unsafe { f(&mut p) }
        })?;
        Ok(p.counterDataSize)
    }

    /// A counter data image for `max_samples` samples of `metrics`, initialized.
    pub fn create_counter_data(&self, metrics: &[&str], max_samples: u32) -> Result<PmCounterData> {
        let size = self.counter_data_size(metrics, max_samples)?;
        let mut image = PmCounterData { bytes: vec![0u8; size] };
        self.initialize_counter_data(&mut image)?;
        Ok(image)
    }

    /// An image made of `bytes` (an earlier image's, of the same metrics and size, given
    /// back by [`PmCounterData::into_bytes`]), initialized: no allocation.
    pub fn reuse_counter_data(&self, bytes: Vec<u8>) -> Result<PmCounterData> {
        let mut image = PmCounterData { bytes };
        self.initialize_counter_data(&mut image)?;
        Ok(image)
    }

    /// Empties an image so that the next decode fills it from its start.
    pub fn initialize_counter_data(&self, image: &mut PmCounterData) -> Result<()> {
        let mut p = cupti_params!(CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData);
        p.pPmSamplingObject = self.object;
        p.counterDataSize = image.bytes.len();
        p.pCounterData = image.bytes.as_mut_ptr();
        call_cupti!(
            self.cupti,
            cuptiPmSamplingCounterDataImageInitialize,
            "initializing the PM sampling counter data",
            |f| {
                // SAFETY: the image is writable for its whole length during the call.
                unsafe { f(&mut p) }
            }
        )
    }

    /// `cuptiPmSamplingStart`.
    pub fn start(&self) -> Result<()> {
        let mut p = cupti_params!(CUpti_PmSampling_Start_Params, pPmSamplingObject);
        p.pPmSamplingObject = self.object;
        call_cupti!(self.cupti, cuptiPmSamplingStart, "starting PM sampling", |f| {
            // SAFETY: the object is live and configured.
            unsafe { f(&mut p) }
        })
    }

    /// `cuptiPmSamplingStop`.
    pub fn stop(&self) -> Result<()> {
        let mut p = cupti_params!(CUpti_PmSampling_Stop_Params, pPmSamplingObject);
        p.pPmSamplingObject = self.object;
        call_cupti!(self.cupti, cuptiPmSamplingStop, "stopping PM sampling", |f| {
            // SAFETY: the object is live.
            unsafe { f(&mut p) }
        })
    }

    /// Decodes the hardware buffer into `image` (appending after the samples it holds).
    /// A hardware-buffer overflow is reported in [`Decoded::overflow`], not as an error.
    pub fn decode(&self, image: &mut PmCounterData) -> Result<Decoded> {
        let mut p = cupti_params!(CUpti_PmSampling_DecodeData_Params, overflow);
        p.pPmSamplingObject = self.object;
        p.pCounterDataImage = image.bytes.as_mut_ptr();
        p.counterDataImageSize = image.bytes.len();
        let result = call_cupti!(self.cupti, cuptiPmSamplingDecodeData, "decoding PM samples", |f| {
            // SAFETY: the object is live and the image writable for its length during the call.
            unsafe { f(&mut p) }
        });
        match result {
            Ok(()) => {}
            // CUPTI reports a full hardware buffer this way; nothing was decoded.
            Err(Error::Cupti { code, .. }) if code == CUptiResult::CUPTI_ERROR_OUT_OF_MEMORY.0 => {
                return Ok(Decoded { stop: DecodeStop::Other, overflow: true })
            }
            Err(e) => return Err(e),
        }
        let stop = match p.decodeStopReason {
            CUpti_PmSampling_DecodeStopReason::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS => {
                DecodeStop::EndOfRecords
            }
            CUpti_PmSampling_DecodeStopReason::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL => {
                DecodeStop::CounterDataFull
            }
            _ => DecodeStop::Other,
        };
        Ok(Decoded { stop, overflow: p.overflow != 0 })
    }

    /// The start and end timestamps (ns) of sample `index` of a decoded image.
    pub fn sample_times(&self, image: &PmCounterData, index: usize) -> Result<(u64, u64)> {
        let mut p = cupti_params!(CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp);
        p.pPmSamplingObject = self.object;
        p.pCounterDataImage = image.bytes.as_ptr();
        p.counterDataImageSize = image.bytes.len();
        p.sampleIndex = index;
        call_cupti!(self.cupti, cuptiPmSamplingCounterDataGetSampleInfo, "reading a PM sample's times", |f| {
            // SAFETY: the object is live; the image outlives the call and is only read.
            unsafe { f(&mut p) }
        })?;
        Ok((p.startTimestamp, p.endTimestamp))
    }

    /// Disables PM sampling, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if self.object.is_null() {
            return Ok(());
        }
        let mut p = cupti_params!(CUpti_PmSampling_Disable_Params, pPmSamplingObject);
        p.pPmSamplingObject = std::mem::replace(&mut self.object, std::ptr::null_mut());
        call_cupti!(self.cupti, cuptiPmSamplingDisable, "disabling PM sampling", |f| {
            // SAFETY: the object is live and disabled exactly once (nulled above).
            unsafe { f(&mut p) }
        })
    }
}

impl Drop for PmSampler {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}
