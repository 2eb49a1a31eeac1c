//! The function tables: gmprof's generated libcupti and libcuda tables, every slot missing
//! except the scripted functions, installed where `Cupti::load` and `Driver::load` find
//! them.
//!
//! Imports every file of the folder with functions in it.

use super::script::{self, Fault};
use super::{callbacks as cb, driver as drv, profiler as prof, samplers as smp};
use crate::checked::library::Cupti;
use crate::error::{Error, Result};
use crate::sys::cupti::CuptiLibrary;
use crate::sys::driver::DriverLibrary;

/// What `Cupti::path` says of the scripted library.
pub const NAME: &str = "scripted libcupti (tests)";

/// Installs the scripted libcupti and libcuda for the rest of the process, with `faults`.
/// Must come before anything loads CUPTI.
pub fn install(faults: Vec<Fault>) -> Result<()> {
    script::set_faults(faults);
    // SAFETY: a handle to the running program; looking CUPTI's and the driver's names up in
    // it finds nothing (the test binary defines none of them) and runs no code.
    let this = || libloading::os::unix::Library::this();
    // SAFETY: as above.
    let mut c = unsafe { CuptiLibrary::from_library(this()) }
        .map_err(|e| Error::InvalidState(format!("the scripted libcupti: {e}")))?;
    // SAFETY: as above.
    let mut d = unsafe { DriverLibrary::from_library(this()) }
        .map_err(|e| Error::InvalidState(format!("the scripted libcuda: {e}")))?;

    c.cuptiGetResultString = Ok(cb::cupti_get_result_string);
    c.cuptiSubscribe = Ok(cb::cupti_subscribe);
    c.cuptiUnsubscribe = Ok(cb::cupti_unsubscribe);
    c.cuptiEnableCallback = Ok(cb::cupti_enable_callback);
    c.cuptiGetCallbackName = Ok(cb::cupti_get_callback_name);
    c.cuptiActivityRegisterCallbacks = Ok(cb::cupti_activity_register_callbacks);
    c.cuptiActivityEnable = Ok(cb::cupti_activity_enable);
    c.cuptiActivityDisable = Ok(cb::cupti_activity_disable);
    c.cuptiActivityFlushAll = Ok(cb::cupti_activity_flush_all);
    c.cuptiActivityGetNextRecord = Ok(cb::cupti_activity_get_next_record);
    c.cuptiActivityGetNumDroppedRecords = Ok(cb::cupti_activity_get_num_dropped_records);
    c.cuptiGetTimestamp = Ok(cb::cupti_get_timestamp);
    c.cuptiGetContextId = Ok(cb::cupti_get_context_id);
    c.cuptiGetDeviceId = Ok(cb::cupti_get_device_id);

    c.cuptiProfilerInitialize = Ok(prof::profiler_initialize);
    c.cuptiProfilerDeInitialize = Ok(prof::profiler_deinitialize);
    c.cuptiDeviceGetChipName = Ok(prof::device_get_chip_name);
    c.cuptiProfilerGetCounterAvailability = Ok(prof::profiler_get_counter_availability);
    c.cuptiProfilerHostInitialize = Ok(prof::host_initialize);
    c.cuptiProfilerHostDeinitialize = Ok(prof::host_deinitialize);
    c.cuptiProfilerHostGetSupportedChips = Ok(prof::host_get_supported_chips);
    c.cuptiProfilerHostGetBaseMetrics = Ok(prof::host_get_base_metrics);
    c.cuptiProfilerHostGetSubMetrics = Ok(prof::host_get_sub_metrics);
    c.cuptiProfilerHostGetMetricProperties = Ok(prof::host_get_metric_properties);
    c.cuptiProfilerHostConfigAddMetrics = Ok(prof::host_config_add_metrics);
    c.cuptiProfilerHostGetConfigImageSize = Ok(prof::host_get_config_image_size);
    c.cuptiProfilerHostGetConfigImage = Ok(prof::host_get_config_image);
    c.cuptiProfilerHostGetNumOfPasses = Ok(prof::host_get_num_of_passes);
    c.cuptiProfilerHostGetRangeName = Ok(prof::host_get_range_name);
    c.cuptiProfilerHostEvaluateToGpuValues = Ok(prof::host_evaluate_to_gpu_values);
    c.cuptiRangeProfilerEnable = Ok(prof::range_enable);
    c.cuptiRangeProfilerDisable = Ok(prof::range_disable);
    c.cuptiRangeProfilerGetCounterDataSize = Ok(prof::range_get_counter_data_size);
    c.cuptiRangeProfilerCounterDataImageInitialize = Ok(prof::range_counter_data_image_initialize);
    c.cuptiRangeProfilerSetConfig = Ok(prof::range_set_config);
    c.cuptiRangeProfilerStart = Ok(prof::range_start);
    c.cuptiRangeProfilerStop = Ok(prof::range_stop);
    c.cuptiRangeProfilerPushRange = Ok(prof::range_push);
    c.cuptiRangeProfilerPopRange = Ok(prof::range_pop);
    c.cuptiRangeProfilerDecodeData = Ok(prof::range_decode_data);
    c.cuptiRangeProfilerGetCounterDataInfo = Ok(prof::range_get_counter_data_info);

    c.cuptiPmSamplingGetCounterAvailability = Ok(smp::pm_get_counter_availability);
    c.cuptiPmSamplingEnable = Ok(smp::pm_enable);
    c.cuptiPmSamplingDisable = Ok(smp::pm_disable);
    c.cuptiPmSamplingSetConfig = Ok(smp::pm_set_config);
    c.cuptiPmSamplingGetCounterDataSize = Ok(smp::pm_get_counter_data_size);
    c.cuptiPmSamplingCounterDataImageInitialize = Ok(smp::pm_counter_data_image_initialize);
    c.cuptiPmSamplingStart = Ok(smp::pm_start);
    c.cuptiPmSamplingStop = Ok(smp::pm_stop);
    c.cuptiPmSamplingDecodeData = Ok(smp::pm_decode_data);
    c.cuptiPmSamplingGetCounterDataInfo = Ok(smp::pm_get_counter_data_info);
    c.cuptiPmSamplingCounterDataGetSampleInfo = Ok(smp::pm_counter_data_get_sample_info);
    c.cuptiPCSamplingEnable = Ok(smp::pc_enable);
    c.cuptiPCSamplingDisable = Ok(smp::pc_disable);
    c.cuptiPCSamplingGetNumStallReasons = Ok(smp::pc_get_num_stall_reasons);
    c.cuptiPCSamplingGetStallReasons = Ok(smp::pc_get_stall_reasons);
    c.cuptiPCSamplingSetConfigurationAttribute = Ok(smp::pc_set_configuration_attribute);
    c.cuptiPCSamplingGetConfigurationAttribute = Ok(smp::pc_get_configuration_attribute);
    c.cuptiPCSamplingGetData = Ok(smp::pc_get_data);
    c.cuptiSassMetricsGetNumOfMetrics = Ok(smp::sass_get_num_of_metrics);
    c.cuptiSassMetricsGetMetrics = Ok(smp::sass_get_metrics);
    c.cuptiSassMetricsGetProperties = Ok(smp::sass_get_properties);
    c.cuptiSassMetricsSetConfig = Ok(smp::sass_set_config);
    c.cuptiSassMetricsUnsetConfig = Ok(smp::sass_unset_config);
    c.cuptiSassMetricsEnable = Ok(smp::sass_enable);
    c.cuptiSassMetricsDisable = Ok(smp::sass_disable);
    c.cuptiSassMetricsGetDataProperties = Ok(smp::sass_get_data_properties);
    c.cuptiSassMetricsFlushData = Ok(smp::sass_flush_data);
    c.cuptiGetCubinCrc = Ok(smp::get_cubin_crc);
    c.cuptiGetSassToSourceCorrelation = Ok(smp::get_sass_to_source_correlation);

    d.cuGetErrorString = Ok(drv::cu_get_error_string);
    d.cuGetErrorName = Ok(drv::cu_get_error_name);
    d.cuInit = Ok(drv::cu_init);
    d.cuDriverGetVersion = Ok(drv::cu_driver_get_version);
    d.cuDeviceGet = Ok(drv::cu_device_get);
    d.cuDeviceGetCount = Ok(drv::cu_device_get_count);
    d.cuDeviceGetName = Ok(drv::cu_device_get_name);
    d.cuDeviceGetAttribute = Ok(drv::cu_device_get_attribute);
    d.cuDevicePrimaryCtxRetain = Ok(drv::cu_device_primary_ctx_retain);
    d.cuDevicePrimaryCtxRelease_v2 = Ok(drv::cu_device_primary_ctx_release);
    d.cuCtxSetCurrent = Ok(drv::cu_ctx_set_current);
    d.cuCtxGetCurrent = Ok(drv::cu_ctx_get_current);
    d.cuCtxGetDevice = Ok(drv::cu_ctx_get_device);
    d.cuCtxSynchronize = Ok(drv::cu_ctx_synchronize);
    d.cuFuncGetAttribute = Ok(drv::cu_func_get_attribute);
    d.cuFuncSetAttribute = Ok(drv::cu_func_set_attribute);
    d.cuFuncGetModule = Ok(drv::cu_func_get_module);
    d.cuFuncGetName = Ok(drv::cu_func_get_name);
    d.cuKernelGetName = Ok(drv::cu_kernel_get_name);

    Cupti::install_scripted(c, d, NAME)
}
