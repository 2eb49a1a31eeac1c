//! The CUPTI profiler host object: metric tables for a chip, configuration images, pass
//! counts and evaluation of counter data to metric values.
//!
//! The host side runs on the CPU alone: given a chip name it works without a GPU, which is
//! what lets `gmprof passes --chip GH100` and the CPU tests use the real metric tables.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;

use super::library::Cupti;
use crate::error::{Error, Result};
use crate::model::MetricKind;
use crate::sys::cupti::{
    CUpti_MetricType, CUpti_ProfilerType, CUpti_Profiler_Host_ConfigAddMetrics_Params,
    CUpti_Profiler_Host_Deinitialize_Params, CUpti_Profiler_Host_EvaluateToGpuValues_Params,
    CUpti_Profiler_Host_GetBaseMetrics_Params, CUpti_Profiler_Host_GetConfigImageSize_Params,
    CUpti_Profiler_Host_GetConfigImage_Params, CUpti_Profiler_Host_GetMetricProperties_Params,
    CUpti_Profiler_Host_GetNumOfPasses_Params, CUpti_Profiler_Host_GetRangeName_Params,
    CUpti_Profiler_Host_GetSubMetrics_Params, CUpti_Profiler_Host_GetSupportedChips_Params,
    CUpti_Profiler_Host_Initialize_Params, CUpti_Profiler_Host_Object,
};

/// Serializes host object creation and release across the process: concurrent
/// `cuptiProfilerHostInitialize` calls from several threads failed with CUPTI_ERROR_UNKNOWN
/// (seen with CUPTI 13.0 when tests created catalogs in parallel).
static HOST_LIFECYCLE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// CUPTI's description of one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricProperties {
    /// The name asked about.
    pub name: String,
    /// Counter, ratio or throughput.
    pub kind: MetricKind,
    /// Hardware unit, e.g. `byte`, `cycle`, `nsecond`.
    pub hw_unit: String,
    /// Dimension unit, e.g. `byte`, `%`.
    pub dim_unit: String,
    /// Description.
    pub description: String,
}

impl MetricProperties {
    /// The unit to show: the dimension unit when there is one, else the hardware unit.
    pub fn unit(&self) -> &str {
        if self.dim_unit.is_empty() {
            &self.hw_unit
        } else {
            &self.dim_unit
        }
    }
}

/// A CUPTI profiler host object for one chip, de-initialized on drop.
///
/// `Send` but not `Sync`: CUPTI documents no thread safety for host objects, so one is used
/// by one thread at a time.
#[must_use = "dropping it de-initializes the host object"]
pub struct ProfilerHost {
    cupti: Cupti,
    object: *mut CUpti_Profiler_Host_Object,
    chip: String,
}

impl std::fmt::Debug for ProfilerHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilerHost").field("chip", &self.chip).finish_non_exhaustive()
    }
}

extern "C" {
    /// The C library's `free`, for strings CUPTI allocates and the caller must release.
    fn free(ptr: *mut std::ffi::c_void);
}

fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidConfig(format!("{what} contains a NUL byte: {s:?}")))
}

/// Reads an array of C strings owned by CUPTI.
///
/// # Safety
/// `ptr` must point to `len` valid, NUL-terminated strings (or be null with `len == 0`).
unsafe fn read_names(ptr: *const *const c_char, len: usize) -> Vec<String> {
    if ptr.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller guarantees `len` readable pointers at `ptr`.
    let slice = unsafe { std::slice::from_raw_parts(ptr, len) };
    slice
        .iter()
        .filter(|p| !p.is_null())
        // SAFETY: each non-null entry is a NUL-terminated string (caller's guarantee).
        .map(|p| unsafe { CStr::from_ptr(*p) }.to_string_lossy().into_owned())
        .collect()
}

/// Chips this CUPTI's host side knows.
pub fn supported_chips(cupti: &Cupti) -> Result<Vec<String>> {
    let mut p = cupti_params!(CUpti_Profiler_Host_GetSupportedChips_Params, ppChipNames);
    call_cupti!(cupti, cuptiProfilerHostGetSupportedChips, "listing supported chips", |f| {
        // SAFETY: `p` is sized; CUPTI fills the count and a pointer to its own array.
        unsafe { f(&mut p) }
    })?;
    // SAFETY: CUPTI returned `numChips` strings it owns.
    Ok(unsafe { read_names(p.ppChipNames, p.numChips) })
}

fn metric_type(kind: MetricKind) -> CUpti_MetricType {
    match kind {
        MetricKind::Counter => CUpti_MetricType::CUPTI_METRIC_TYPE_COUNTER,
        MetricKind::Ratio => CUpti_MetricType::CUPTI_METRIC_TYPE_RATIO,
        MetricKind::Throughput => CUpti_MetricType::CUPTI_METRIC_TYPE_THROUGHPUT,
    }
}

// SAFETY: the host object is plain CUPTI-owned memory with no thread affinity; gmprof
// never uses one from two threads at once (it is owned, and shared only behind a mutex).
unsafe impl Send for ProfilerHost {}

impl ProfilerHost {
    /// Creates a host object for the range profiler on `chip`. The availability image, when
    /// given, restricts configurations to counters the device can collect now.
    pub fn new(cupti: &Cupti, chip: &str, availability: Option<&[u8]>) -> Result<ProfilerHost> {
        Self::initialize(cupti, chip, availability, CUpti_ProfilerType::CUPTI_PROFILER_TYPE_RANGE_PROFILER)
    }

    /// Creates a host object for PM sampling on `chip`: its metric tables list what can be
    /// sampled, its configuration images go to
    /// [`PmSampler::set_config`](super::pm_sampling::PmSampler::set_config), and
    /// [`ProfilerHost::evaluate`] reads sample `i` of a PM counter data image as range `i`.
    pub fn new_pm_sampling(cupti: &Cupti, chip: &str, availability: Option<&[u8]>) -> Result<ProfilerHost> {
        Self::initialize(cupti, chip, availability, CUpti_ProfilerType::CUPTI_PROFILER_TYPE_PM_SAMPLING)
    }

    fn initialize(
        cupti: &Cupti,
        chip: &str,
        availability: Option<&[u8]>,
        kind: CUpti_ProfilerType,
    ) -> Result<ProfilerHost> {
        let chip_c = c_string(chip, "chip name")?;
        let mut p = cupti_params!(CUpti_Profiler_Host_Initialize_Params, pHostObject);
        p.profilerType = kind;
        p.pChipName = chip_c.as_ptr();
        p.pCounterAvailabilityImage = availability.map_or(std::ptr::null(), |a| a.as_ptr());
        let _serialized = HOST_LIFECYCLE.lock();
        call_cupti!(cupti, cuptiProfilerHostInitialize, "creating the profiler host object", |f| {
            // SAFETY: the chip name and availability image outlive the call; CUPTI copies
            // what it keeps.
            unsafe { f(&mut p) }
        })?;
        if p.pHostObject.is_null() {
            return Err(Error::InvalidState("cuptiProfilerHostInitialize returned no host object".into()));
        }
        Ok(ProfilerHost { cupti: *cupti, object: p.pHostObject, chip: chip.to_owned() })
    }

    /// The chip this host object describes.
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// Base metric names of one type (without rollup or submetric suffixes).
    pub fn base_metrics(&self, kind: MetricKind) -> Result<Vec<String>> {
        let mut p = cupti_params!(CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics);
        p.pHostObject = self.object;
        p.metricType = metric_type(kind);
        call_cupti!(self.cupti, cuptiProfilerHostGetBaseMetrics, "listing base metrics", |f| {
            // SAFETY: `object` is live; CUPTI fills a pointer to its own name array.
            unsafe { f(&mut p) }
        })?;
        // SAFETY: CUPTI returned `numMetrics` strings owned by the host object.
        Ok(unsafe { read_names(p.ppMetricNames, p.numMetrics) })
    }

    /// The submetric suffixes of a base metric (e.g. `.sum`, `.avg.per_second`).
    pub fn sub_metrics(&self, base: &str, kind: MetricKind) -> Result<Vec<String>> {
        let name = c_string(base, "metric name")?;
        let mut p = cupti_params!(CUpti_Profiler_Host_GetSubMetrics_Params, ppSubMetrics);
        p.pHostObject = self.object;
        p.metricType = metric_type(kind);
        p.pMetricName = name.as_ptr();
        call_cupti!(self.cupti, cuptiProfilerHostGetSubMetrics, "listing submetrics", |f| {
            // SAFETY: `object` is live and `name` outlives the call.
            unsafe { f(&mut p) }
        })?;
        // SAFETY: CUPTI returned `numOfSubmetrics` strings owned by the host object.
        Ok(unsafe { read_names(p.ppSubMetrics, p.numOfSubmetrics) })
    }

    /// Type, units and description of a metric (base or full name).
    pub fn metric_properties(&self, metric: &str) -> Result<MetricProperties> {
        let name = c_string(metric, "metric name")?;
        let mut p = cupti_params!(CUpti_Profiler_Host_GetMetricProperties_Params, metricType);
        p.pHostObject = self.object;
        p.pMetricName = name.as_ptr();
        call_cupti!(self.cupti, cuptiProfilerHostGetMetricProperties, "reading metric properties", |f| {
            // SAFETY: `object` is live and `name` outlives the call.
            unsafe { f(&mut p) }
        })?;
        let read = |ptr: *const c_char| {
            if ptr.is_null() {
                String::new()
            } else {
                // SAFETY: non-null strings returned by CUPTI are NUL-terminated and owned by
                // the host object, which is alive.
                unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
            }
        };
        let kind = match p.metricType {
            CUpti_MetricType::CUPTI_METRIC_TYPE_RATIO => MetricKind::Ratio,
            CUpti_MetricType::CUPTI_METRIC_TYPE_THROUGHPUT => MetricKind::Throughput,
            _ => MetricKind::Counter,
        };
        Ok(MetricProperties {
            name: metric.to_owned(),
            kind,
            hw_unit: read(p.pHwUnit),
            dim_unit: read(p.pDimUnit),
            description: read(p.pDescription),
        })
    }

    /// Adds metrics to this host object's configuration.
    pub fn add_metrics(&mut self, metrics: &[&str]) -> Result<()> {
        let owned: Vec<CString> = metrics.iter().map(|m| c_string(m, "metric name")).collect::<Result<_>>()?;
        let mut ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut p = cupti_params!(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
        p.pHostObject = self.object;
        p.ppMetricNames = ptrs.as_mut_ptr();
        p.numMetrics = ptrs.len();
        call_cupti!(self.cupti, cuptiProfilerHostConfigAddMetrics, "adding metrics to the configuration", |f| {
            // SAFETY: `ptrs` points into `owned`; both outlive the call.
            unsafe { f(&mut p) }
        })
    }

    /// The configuration image for the metrics added so far.
    pub fn config_image(&self) -> Result<Vec<u8>> {
        let mut p = cupti_params!(CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize);
        p.pHostObject = self.object;
        call_cupti!(self.cupti, cuptiProfilerHostGetConfigImageSize, "sizing the configuration image", |f| {
            // SAFETY: `object` is live.
            unsafe { f(&mut p) }
        })?;
        let mut image = vec![0u8; p.configImageSize];
        let mut q = cupti_params!(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage);
        q.pHostObject = self.object;
        q.configImageSize = image.len();
        q.pConfigImage = image.as_mut_ptr();
        call_cupti!(self.cupti, cuptiProfilerHostGetConfigImage, "building the configuration image", |f| {
            // SAFETY: `image` is writable for `configImageSize` bytes and outlives the call.
            unsafe { f(&mut q) }
        })?;
        Ok(image)
    }

    /// How many replay passes a configuration image needs.
    pub fn num_passes(&self, config_image: &[u8]) -> Result<usize> {
        let mut image = config_image.to_vec();
        let mut p = cupti_params!(CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses);
        p.configImageSize = image.len();
        p.pConfigImage = image.as_mut_ptr();
        call_cupti!(self.cupti, cuptiProfilerHostGetNumOfPasses, "counting replay passes", |f| {
            // SAFETY: `image` is a config image from this CUPTI and outlives the call.
            unsafe { f(&mut p) }
        })?;
        Ok(p.numOfPasses)
    }

    /// Evaluates `metrics` for range `range_index` of a decoded counter data image.
    pub fn evaluate(&self, counter_data: &[u8], range_index: usize, metrics: &[&str]) -> Result<Vec<f64>> {
        let owned: Vec<CString> = metrics.iter().map(|m| c_string(m, "metric name")).collect::<Result<_>>()?;
        let mut ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut values = vec![f64::NAN; metrics.len()];
        let mut p = cupti_params!(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues);
        p.pHostObject = self.object;
        p.pCounterDataImage = counter_data.as_ptr();
        p.counterDataImageSize = counter_data.len();
        p.rangeIndex = range_index;
        p.ppMetricNames = ptrs.as_mut_ptr();
        p.numMetrics = ptrs.len();
        p.pMetricValues = values.as_mut_ptr();
        call_cupti!(self.cupti, cuptiProfilerHostEvaluateToGpuValues, "evaluating counter data", |f| {
            // SAFETY: the image, the name pointers and the value buffer (one f64 per name)
            // all outlive the call.
            unsafe { f(&mut p) }
        })?;
        Ok(values)
    }

    /// The name of range `index` of a decoded counter data image; nested user ranges are
    /// joined by `delimiter`.
    pub fn range_name(&self, counter_data: &[u8], index: usize, delimiter: &str) -> Result<String> {
        let delim = c_string(delimiter, "range delimiter")?;
        let mut p = cupti_params!(CUpti_Profiler_Host_GetRangeName_Params, pRangeName);
        p.pCounterDataImage = counter_data.as_ptr();
        p.counterDataImageSize = counter_data.len();
        p.rangeIndex = index;
        p.delimiter = delim.as_ptr();
        call_cupti!(self.cupti, cuptiProfilerHostGetRangeName, "reading a range name", |f| {
            // SAFETY: the image and delimiter outlive the call; CUPTI fills `pRangeName`.
            unsafe { f(&mut p) }
        })?;
        if p.pRangeName.is_null() {
            return Ok(String::new());
        }
        // SAFETY: CUPTI returned a NUL-terminated string; it is copied before being freed.
        let name = unsafe { CStr::from_ptr(p.pRangeName) }.to_string_lossy().into_owned();
        // CUPTI's header says the caller frees the name it allocated (with malloc).
        // SAFETY: the pointer came from CUPTI's allocation and is freed exactly once.
        unsafe { free(p.pRangeName as *mut std::ffi::c_void) };
        Ok(name)
    }

    /// De-initializes the host object, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if self.object.is_null() {
            return Ok(());
        }
        let mut p = cupti_params!(CUpti_Profiler_Host_Deinitialize_Params, pHostObject);
        p.pHostObject = std::mem::replace(&mut self.object, std::ptr::null_mut());
        let _serialized = HOST_LIFECYCLE.lock();
        call_cupti!(self.cupti, cuptiProfilerHostDeinitialize, "releasing the profiler host object", |f| {
            // SAFETY: the object is live and released exactly once (nulled above).
            unsafe { f(&mut p) }
        })
    }
}

impl Drop for ProfilerHost {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}
