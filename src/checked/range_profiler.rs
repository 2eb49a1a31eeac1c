//! The CUPTI range profiler (CUDA 12.6+): an object bound to one context that collects
//! counters into a counter data image, range by range.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;

use super::driver::Context;
use super::library::Cupti;
use crate::error::{Error, Result};
use crate::sys::cupti::{
    CUpti_ProfilerRange, CUpti_ProfilerReplayMode, CUpti_RangeProfiler_CounterDataImage_Initialize_Params,
    CUpti_RangeProfiler_DecodeData_Params, CUpti_RangeProfiler_Disable_Params, CUpti_RangeProfiler_Enable_Params,
    CUpti_RangeProfiler_GetCounterDataInfo_Params, CUpti_RangeProfiler_GetCounterDataSize_Params,
    CUpti_RangeProfiler_Object, CUpti_RangeProfiler_PopRange_Params, CUpti_RangeProfiler_PushRange_Params,
    CUpti_RangeProfiler_SetConfig_Params, CUpti_RangeProfiler_Start_Params, CUpti_RangeProfiler_Stop_Params,
};

/// How CUPTI delimits counter ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeMode {
    /// One range per kernel, named "0", "1", ... in launch order.
    Auto,
    /// Ranges delimited by push/pop.
    User,
}

/// How CUPTI gets the passes a metric set needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayMode {
    /// CUPTI saves and restores memory and replays each kernel once per pass.
    Kernel,
    /// The application runs the workload once per pass.
    User,
}

/// The configuration handed to `cuptiRangeProfilerSetConfig`.
#[derive(Clone, Copy, Debug)]
pub struct RangeConfig {
    /// Auto or user ranges.
    pub range: RangeMode,
    /// Kernel or user replay.
    pub replay: ReplayMode,
    /// Ranges one pass can hold (the counter data image is sized for this).
    pub max_ranges_per_pass: usize,
    /// Nesting levels collected (user ranges).
    pub num_nesting_levels: u16,
    /// The outermost nesting level collected (1-based).
    pub min_nesting_level: u16,
    /// The pass this configuration is for (user replay).
    pub pass_index: usize,
    /// The nesting level replayed in this pass (user replay).
    pub target_nesting_level: u16,
}

/// What `cuptiRangeProfilerStop` reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopStatus {
    /// The pass that was just collected.
    pub pass_index: usize,
    /// True once every pass of the configuration has been submitted.
    pub all_passes_submitted: bool,
}

/// A counter data image: CUPTI writes decoded counters here.
#[derive(Clone, Debug, Default)]
pub struct CounterDataImage {
    bytes: Vec<u8>,
}

impl CounterDataImage {
    /// A zero-filled image of `len` bytes (calloc'd: pages are touched only when used), to be
    /// initialized with [`RangeProfiler::initialize_counter_data`] before use.
    pub fn zeroed(len: usize) -> Self {
        CounterDataImage { bytes: vec![0u8; len] }
    }

    /// The image's bytes, for evaluation.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True for an image that was never sized.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Number of ranges the image holds after decoding.
    pub fn range_count(&self, cupti: &Cupti) -> Result<usize> {
        let mut p = cupti_params!(CUpti_RangeProfiler_GetCounterDataInfo_Params, numTotalRanges);
        p.pCounterDataImage = self.bytes.as_ptr();
        p.counterDataImageSize = self.bytes.len();
        call_cupti!(cupti, cuptiRangeProfilerGetCounterDataInfo, "counting decoded ranges", |f| {
            // SAFETY: the image outlives the call and is only read.
            unsafe { f(&mut p) }
        })?;
        Ok(p.numTotalRanges)
    }
}

/// An enabled range profiler on one context; disabled on drop.
///
/// Not `Send`: CUPTI requires range profiler calls on the context's thread order, and gmprof
/// drives it from one place at a time (behind the profiler's lock).
#[must_use = "dropping it disables the range profiler"]
pub struct RangeProfiler {
    cupti: Cupti,
    object: *mut CUpti_RangeProfiler_Object,
    ctx: Context,
}

impl std::fmt::Debug for RangeProfiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeProfiler").field("ctx", &self.ctx).finish_non_exhaustive()
    }
}

// SAFETY: the object is an opaque CUPTI handle; gmprof serializes every call on it behind a
// mutex, and CUPTI accepts range profiler calls from any thread of the process.
unsafe impl Send for RangeProfiler {}

impl RangeProfiler {
    /// `cuptiRangeProfilerEnable` on `ctx`.
    pub fn enable(cupti: &Cupti, ctx: Context) -> Result<RangeProfiler> {
        let mut p = cupti_params!(CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject);
        p.ctx = ctx.as_raw();
        call_cupti!(cupti, cuptiRangeProfilerEnable, "enabling the range profiler", |f| {
            // SAFETY: `ctx` is a live context; CUPTI fills the object pointer.
            unsafe { f(&mut p) }
        })?;
        if p.pRangeProfilerObject.is_null() {
            return Err(Error::InvalidState("cuptiRangeProfilerEnable returned no object".into()));
        }
        Ok(RangeProfiler { cupti: *cupti, object: p.pRangeProfilerObject, ctx })
    }

    /// The context it profiles.
    pub fn context(&self) -> Context {
        self.ctx
    }

    /// Bytes of a counter data image for `max_ranges` ranges of `metrics`.
    pub fn counter_data_size(&self, metrics: &[&str], max_ranges: usize, max_tree_nodes: u32) -> Result<usize> {
        let owned: Vec<CString> = metrics
            .iter()
            .map(|m| CString::new(*m).map_err(|_| Error::InvalidConfig(format!("metric name contains NUL: {m:?}"))))
            .collect::<Result<_>>()?;
        let mut ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut p = cupti_params!(CUpti_RangeProfiler_GetCounterDataSize_Params, counterDataSize);
        p.pRangeProfilerObject = self.object;
        p.pMetricNames = ptrs.as_mut_ptr();
        p.numMetrics = ptrs.len();
        p.maxNumOfRanges = max_ranges;
        p.maxNumRangeTreeNodes = max_tree_nodes;
        call_cupti!(self.cupti, cuptiRangeProfilerGetCounterDataSize, "sizing the counter data image", |f| {
            // SAFETY: the name pointers point into `owned`; both outlive the call.
            unsafe { f(&mut p) }
        })?;
        Ok(p.counterDataSize)
    }

    /// A counter data image sized for `max_ranges` ranges of `metrics`, initialized.
    pub fn create_counter_data(
        &self,
        metrics: &[&str],
        max_ranges: usize,
        max_tree_nodes: u32,
    ) -> Result<CounterDataImage> {
        let size = self.counter_data_size(metrics, max_ranges, max_tree_nodes)?;
        let mut image = CounterDataImage { bytes: vec![0u8; size] };
        self.initialize_counter_data(&mut image)?;
        Ok(image)
    }

    /// Re-initializes an image so it can be filled again.
    pub fn initialize_counter_data(&self, image: &mut CounterDataImage) -> Result<()> {
        let mut p = cupti_params!(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, pCounterData);
        p.pRangeProfilerObject = self.object;
        p.counterDataSize = image.bytes.len();
        p.pCounterData = image.bytes.as_mut_ptr();
        call_cupti!(
            self.cupti,
            cuptiRangeProfilerCounterDataImageInitialize,
            "initializing the counter data image",
            |f| {
                // SAFETY: the image is writable for its whole length during the call.
                unsafe { f(&mut p) }
            }
        )
    }

    /// `cuptiRangeProfilerSetConfig`.
    ///
    /// # Safety
    /// CUPTI keeps pointers to `config_image` and `counter_data` until the next `set_config`,
    /// decode or disable: the caller must keep both alive and unmoved (their heap buffers must
    /// not be reallocated) for that long.
    pub unsafe fn set_config(
        &self,
        config_image: &[u8],
        counter_data: &mut CounterDataImage,
        config: &RangeConfig,
    ) -> Result<()> {
        let mut p = cupti_params!(CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel);
        p.pRangeProfilerObject = self.object;
        p.configSize = config_image.len();
        p.pConfig = config_image.as_ptr();
        p.counterDataImageSize = counter_data.bytes.len();
        p.pCounterDataImage = counter_data.bytes.as_mut_ptr();
        p.range = match config.range {
            RangeMode::Auto => CUpti_ProfilerRange::CUPTI_AutoRange,
            RangeMode::User => CUpti_ProfilerRange::CUPTI_UserRange,
        };
        p.replayMode = match config.replay {
            ReplayMode::Kernel => CUpti_ProfilerReplayMode::CUPTI_KernelReplay,
            ReplayMode::User => CUpti_ProfilerReplayMode::CUPTI_UserReplay,
        };
        p.maxRangesPerPass = config.max_ranges_per_pass;
        p.numNestingLevels = config.num_nesting_levels;
        p.minNestingLevel = config.min_nesting_level;
        p.passIndex = config.pass_index;
        p.targetNestingLevel = config.target_nesting_level;
        call_cupti!(self.cupti, cuptiRangeProfilerSetConfig, "configuring the range profiler", |f| {
            // SAFETY: both images are valid now; the caller keeps them alive afterwards.
            unsafe { f(&mut p) }
        })
    }

    /// `cuptiRangeProfilerStart`.
    pub fn start(&self) -> Result<()> {
        let mut p = cupti_params!(CUpti_RangeProfiler_Start_Params, pRangeProfilerObject);
        p.pRangeProfilerObject = self.object;
        call_cupti!(self.cupti, cuptiRangeProfilerStart, "starting the range profiler", |f| {
            // SAFETY: the object is live.
            unsafe { f(&mut p) }
        })
    }

    /// `cuptiRangeProfilerStop`.
    pub fn stop(&self) -> Result<StopStatus> {
        let mut p = cupti_params!(CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted);
        p.pRangeProfilerObject = self.object;
        call_cupti!(self.cupti, cuptiRangeProfilerStop, "stopping the range profiler", |f| {
            // SAFETY: the object is live.
            unsafe { f(&mut p) }
        })?;
        Ok(StopStatus { pass_index: p.passIndex, all_passes_submitted: p.isAllPassSubmitted != 0 })
    }

    /// `cuptiRangeProfilerPushRange` (user ranges).
    pub fn push(&self, name: &str) -> Result<()> {
        let name =
            CString::new(name).map_err(|_| Error::InvalidConfig(format!("range name contains NUL: {name:?}")))?;
        self.push_cstr(&name)
    }

    /// [`RangeProfiler::push`] with a name that is already NUL-terminated (no allocation).
    pub fn push_cstr(&self, name: &CStr) -> Result<()> {
        let mut p = cupti_params!(CUpti_RangeProfiler_PushRange_Params, pRangeName);
        p.pRangeProfilerObject = self.object;
        p.pRangeName = name.as_ptr();
        call_cupti!(self.cupti, cuptiRangeProfilerPushRange, "pushing a CUPTI range", |f| {
            // SAFETY: CUPTI copies the name during the call.
            unsafe { f(&mut p) }
        })
    }

    /// `cuptiRangeProfilerPopRange` (user ranges).
    pub fn pop(&self) -> Result<()> {
        let mut p = cupti_params!(CUpti_RangeProfiler_PopRange_Params, pRangeProfilerObject);
        p.pRangeProfilerObject = self.object;
        call_cupti!(self.cupti, cuptiRangeProfilerPopRange, "popping a CUPTI range", |f| {
            // SAFETY: the object is live.
            unsafe { f(&mut p) }
        })
    }

    /// Decodes collected counters into the configured image; returns the dropped-range count.
    pub fn decode(&self) -> Result<usize> {
        let mut p = cupti_params!(CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped);
        p.pRangeProfilerObject = self.object;
        call_cupti!(self.cupti, cuptiRangeProfilerDecodeData, "decoding counter data", |f| {
            // SAFETY: the object is live and its configured image is kept alive by the caller
            // of `set_config`.
            unsafe { f(&mut p) }
        })?;
        Ok(p.numOfRangeDropped)
    }

    /// Disables the profiler, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if self.object.is_null() {
            return Ok(());
        }
        let mut p = cupti_params!(CUpti_RangeProfiler_Disable_Params, pRangeProfilerObject);
        p.pRangeProfilerObject = std::mem::replace(&mut self.object, std::ptr::null_mut());
        call_cupti!(self.cupti, cuptiRangeProfilerDisable, "disabling the range profiler", |f| {
            // SAFETY: the object is live and disabled exactly once (nulled above).
            unsafe { f(&mut p) }
        })
    }
}

impl Drop for RangeProfiler {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}
