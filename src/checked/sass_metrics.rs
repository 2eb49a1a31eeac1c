//! CUPTI's SASS Metrics API (`cupti_sass_metrics.h`) and SASS-to-source correlation.
//!
//! Layer 2. CUPTI patches a kernel's SASS so that its instructions count the configured
//! metrics. The objects:
//!
//! - [`metrics`] / [`metric`]: the metrics a chip offers, and one by name (an unknown name
//!   is an error that lists close ones);
//! - [`SassConfig`]: a device's metric configuration (`cuptiSassMetricsSetConfig`), unset on
//!   drop;
//! - [`SassCollection`]: collection in one context (`cuptiSassMetricsEnable`, with lazy
//!   patching: a function is patched on its first launch inside the collection), disabled on
//!   drop; [`SassCollection::flush`] takes what was counted since the last flush
//!   (`cuptiSassMetricsGetDataProperties` + `cuptiSassMetricsFlushData`), and
//!   [`SassCollection::shutdown`] returns the records CUPTI dropped at the end;
//! - [`cubin_crc`] and [`source_line`]: a cubin's CRC as CUPTI computes it (the
//!   `cubin_crc` of the records) and the file and line of an instruction, where the cubin
//!   has line information.
//!
//! Measured on an H100 with CUPTI 13.0.1 (bench/sass_metrics_floor.cu): with
//! `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL` enabled every counted value is 0, and with only
//! memcpy or memset records enabled no function is patched; with
//! `CUPTI_ACTIVITY_KIND_KERNEL` (serialized kernel records) the counts are right. The
//! activity layer switches to serialized kernel records while SASS metrics are in use
//! (`activity::serialize_kernel_records`).

use std::ffi::{c_char, c_void, CStr, CString};

use super::driver::Context;
use super::library::Cupti;
use crate::error::{Error, Result};
use crate::model::sass::SassRecord;
use crate::sys::cupti::*;

/// One SASS metric of a chip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassMetric {
    /// CUPTI's id (what flushed records carry).
    pub id: u64,
    /// Name (`smsp__sass_inst_executed`).
    pub name: String,
    /// CUPTI's description.
    pub description: String,
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: CUPTI's strings are NUL-terminated and live in CUPTI.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The SASS metrics `chip` offers (`GH100`: 60 on CUPTI 13.0.1).
pub fn metrics(cupti: &Cupti, chip: &str) -> Result<Vec<SassMetric>> {
    let chip_c = CString::new(chip).map_err(|_| Error::InvalidConfig(format!("chip name {chip:?}")))?;
    let mut n = cupti_params!(CUpti_SassMetrics_GetNumOfMetrics_Params, numOfMetrics);
    n.pChipName = chip_c.as_ptr();
    call_cupti!(cupti, cuptiSassMetricsGetNumOfMetrics, "counting the chip's SASS metrics", |f| {
        // SAFETY: `n` is sized and its chip name outlives the call.
        unsafe { f(&mut n) }
    })?;
    let mut list = vec![CUpti_SassMetrics_MetricDetails::default(); n.numOfMetrics];
    let mut g = cupti_params!(CUpti_SassMetrics_GetMetrics_Params, pMetricsList);
    g.pChipName = chip_c.as_ptr();
    g.numOfMetrics = list.len();
    g.pMetricsList = list.as_mut_ptr();
    call_cupti!(cupti, cuptiSassMetricsGetMetrics, "listing the chip's SASS metrics", |f| {
        // SAFETY: `list` has `numOfMetrics` entries for CUPTI to fill.
        unsafe { f(&mut g) }
    })?;
    Ok(list
        .iter()
        .map(|m| SassMetric { id: m.metricId, name: text(m.pMetricName), description: text(m.pMetricDescription) })
        .collect())
}

/// One SASS metric of `chip` by name.
pub fn metric(cupti: &Cupti, chip: &str, name: &str) -> Result<SassMetric> {
    let chip_c = CString::new(chip).map_err(|_| Error::InvalidConfig(format!("chip name {chip:?}")))?;
    let name_c = CString::new(name).map_err(|_| Error::InvalidConfig(format!("SASS metric {name:?}")))?;
    let mut p = cupti_params!(CUpti_SassMetrics_GetProperties_Params, metric);
    p.pChipName = chip_c.as_ptr();
    p.pMetricName = name_c.as_ptr();
    let found = call_cupti!(cupti, cuptiSassMetricsGetProperties, "looking up a SASS metric", |f| {
        // SAFETY: `p` is sized; both strings outlive the call.
        unsafe { f(&mut p) }
    });
    match found {
        Ok(()) => Ok(SassMetric {
            id: p.metric.metricId,
            name: name.to_string(),
            description: text(p.metric.pMetricDescription),
        }),
        Err(e) => {
            let offered = metrics(cupti, chip).unwrap_or_default();
            let mut close: Vec<&str> =
                offered.iter().map(|m| m.name.as_str()).filter(|m| strsim::jaro_winkler(m, name) > 0.85).collect();
            close.truncate(5);
            Err(Error::InvalidConfig(format!(
                "the {chip} offers no SASS metric {name:?} ({} offered{}): {e}",
                offered.len(),
                if close.is_empty() { String::new() } else { format!("; close: {}", close.join(", ")) }
            )))
        }
    }
}

/// A device's SASS metric configuration; unset on drop.
#[must_use = "dropping it unsets the device's SASS metric configuration"]
#[derive(Debug)]
pub struct SassConfig {
    cupti: Cupti,
    device: u32,
    closed: bool,
}

impl SassConfig {
    /// Configures `metric_ids`, one value per GPU each (`CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU`),
    /// on device `device`.
    pub fn set(cupti: &Cupti, device: u32, metric_ids: &[u64]) -> Result<SassConfig> {
        let mut configs: Vec<CUpti_SassMetrics_Config> = metric_ids
            .iter()
            .map(|&id| CUpti_SassMetrics_Config {
                metricId: id,
                outputGranularity: CUpti_SassMetrics_OutputGranularity::CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU.0
                    as u8,
            })
            .collect();
        let mut p = cupti_params!(CUpti_SassMetricsSetConfig_Params, deviceIndex);
        p.numOfMetricConfig = configs.len();
        p.pConfigs = configs.as_mut_ptr();
        p.deviceIndex = device;
        call_cupti!(cupti, cuptiSassMetricsSetConfig, "configuring SASS metrics", |f| {
            // SAFETY: `configs` outlives the call and has `numOfMetricConfig` entries.
            unsafe { f(&mut p) }
        })?;
        Ok(SassConfig { cupti: *cupti, device, closed: false })
    }

    /// Unsets the configuration, reporting failure.
    pub fn shutdown(mut self) -> Result<()> {
        self.close()
    }

    fn close(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let mut p = cupti_params!(CUpti_SassMetricsUnsetConfig_Params, deviceIndex);
        p.deviceIndex = self.device;
        call_cupti!(self.cupti, cuptiSassMetricsUnsetConfig, "unsetting SASS metrics", |f| {
            // SAFETY: a sized params struct naming the device configured in `set`.
            unsafe { f(&mut p) }
        })
    }
}

impl Drop for SassConfig {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}

/// SASS metric collection in one context; disabled on drop.
#[must_use = "dropping it disables SASS metric collection"]
#[derive(Debug)]
pub struct SassCollection {
    cupti: Cupti,
    ctx: Context,
    closed: bool,
}

impl SassCollection {
    /// Enables collection in `ctx` with lazy patching (each function is patched at its first
    /// launch inside the collection, so functions never launched cost nothing).
    pub fn enable(cupti: &Cupti, ctx: Context) -> Result<SassCollection> {
        let mut p = cupti_params!(CUpti_SassMetricsEnable_Params, enableLazyPatching);
        p.ctx = ctx.as_raw();
        p.enableLazyPatching = 1;
        call_cupti!(cupti, cuptiSassMetricsEnable, "enabling SASS metric collection", |f| {
            // SAFETY: a sized params struct naming a live context.
            unsafe { f(&mut p) }
        })?;
        Ok(SassCollection { cupti: *cupti, ctx, closed: false })
    }

    /// The context collected in.
    pub fn context(&self) -> Context {
        self.ctx
    }

    /// What was counted since the last flush: one record per patched instruction and metric
    /// (the caller waits for the context's work first).
    pub fn flush(&self) -> Result<Vec<SassRecord>> {
        let mut d = cupti_params!(CUpti_SassMetricsGetDataProperties_Params, numOfInstances);
        d.ctx = self.ctx.as_raw();
        call_cupti!(self.cupti, cuptiSassMetricsGetDataProperties, "sizing a SASS metrics flush", |f| {
            // SAFETY: a sized params struct naming the collection's context.
            unsafe { f(&mut d) }
        })?;
        let (records, instances) = (d.numOfPatchedInstructionRecords, d.numOfInstances);
        if records == 0 || instances == 0 {
            return Ok(Vec::new());
        }
        let mut values = vec![CUpti_SassMetrics_InstanceValue::default(); records * instances];
        let mut data: Vec<CUpti_SassMetrics_Data> = (0..records)
            .map(|i| CUpti_SassMetrics_Data {
                structSize: std::mem::size_of::<CUpti_SassMetrics_Data>(),
                // SAFETY: `i * instances` is inside `values`, which outlives the flush.
                pInstanceValues: unsafe { values.as_mut_ptr().add(i * instances) },
                ..Default::default()
            })
            .collect();
        let mut p = cupti_params!(CUpti_SassMetricsFlushData_Params, numOfInstances);
        p.ctx = self.ctx.as_raw();
        p.numOfPatchedInstructionRecords = records;
        p.numOfInstances = instances;
        p.pMetricsData = data.as_mut_ptr();
        call_cupti!(self.cupti, cuptiSassMetricsFlushData, "flushing SASS metrics", |f| {
            // SAFETY: `data` has `records` entries, each pointing at `instances` values.
            unsafe { f(&mut p) }
        })?;
        let out = data
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let function = text(r.functionName);
                if !r.functionName.is_null() {
                    // SAFETY: CUPTI allocates each record's function name with malloc and
                    // leaves it to the caller to free (as its sample does), once.
                    unsafe { libc::free(r.functionName as *mut c_void) };
                }
                let values = values[i * instances..(i + 1) * instances].iter().map(|v| (v.metricId, v.value)).collect();
                SassRecord {
                    cubin_crc: r.cubinCrc,
                    function_index: r.functionIndex,
                    function,
                    pc_offset: r.pcOffset,
                    values,
                }
            })
            .collect();
        Ok(out)
    }

    /// Disables collection; returns the records CUPTI dropped (counted since the last
    /// flush and never flushed).
    pub fn shutdown(mut self) -> Result<u64> {
        self.close()
    }

    fn close(&mut self) -> Result<u64> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(0);
        }
        let mut p = cupti_params!(CUpti_SassMetricsDisable_Params, numOfDroppedRecords);
        p.ctx = self.ctx.as_raw();
        call_cupti!(self.cupti, cuptiSassMetricsDisable, "disabling SASS metric collection", |f| {
            // SAFETY: a sized params struct naming the collection's context.
            unsafe { f(&mut p) }
        })?;
        Ok(p.numOfDroppedRecords as u64)
    }
}

impl Drop for SassCollection {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}

/// CUPTI's CRC of a cubin (what SASS metric records carry as `cubin_crc`).
pub fn cubin_crc(cupti: &Cupti, cubin: &[u8]) -> Result<u64> {
    let mut p = CUpti_GetCubinCrcParams {
        size: std::mem::size_of::<CUpti_GetCubinCrcParams>(),
        cubinSize: cubin.len(),
        cubin: cubin.as_ptr() as *const c_void,
        cubinCrc: 0,
    };
    call_cupti!(cupti, cuptiGetCubinCrc, "computing a cubin's CRC", |f| {
        // SAFETY: `cubin` outlives the call and `cubinSize` is its length.
        unsafe { f(&mut p) }
    })?;
    Ok(p.cubinCrc)
}

/// The source file (directory joined) and line of the instruction at `pc_offset` in
/// `function` of `cubin`; `None` when the cubin has no line information there, an error when
/// `cuptiGetSassToSourceCorrelation` failed.
pub fn source_line(cupti: &Cupti, cubin: &[u8], function: &str, pc_offset: u32) -> Result<Option<(String, u32)>> {
    let name = CString::new(function).map_err(|_| Error::InvalidConfig(format!("function name {function:?}")))?;
    let mut p = CUpti_GetSassToSourceCorrelationParams {
        size: std::mem::size_of::<CUpti_GetSassToSourceCorrelationParams>(),
        cubin: cubin.as_ptr() as *const c_void,
        functionName: name.as_ptr(),
        cubinSize: cubin.len(),
        pcOffset: u64::from(pc_offset),
        ..Default::default()
    };
    let found = call_cupti!(cupti, cuptiGetSassToSourceCorrelation, "finding an instruction's source line", |f| {
        // SAFETY: `cubin` and `name` outlive the call; CUPTI fills the out-fields.
        unsafe { f(&mut p) }
    });
    let take = |s: *mut c_char| {
        let t = text(s);
        if !s.is_null() {
            // SAFETY: CUPTI mallocs the file and directory names for the caller to free.
            unsafe { libc::free(s as *mut c_void) };
        }
        t
    };
    let (file, dir) = (take(p.fileName), take(p.dirName));
    found?;
    if file.is_empty() || p.lineNumber == 0 {
        return Ok(None);
    }
    let path = if dir.is_empty() || file.starts_with('/') { file } else { format!("{dir}/{file}") };
    Ok(Some((path, p.lineNumber)))
}
