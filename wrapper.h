/*
 * The CUDA driver and CUPTI headers gmprof binds to. build.rs runs bindgen on this file
 * (parsed as C++, because cupti_profiler_host.h includes <string>), and
 * scripts/regen-bindings.sh regenerates the committed copy in src/sys/generated/.
 */
#include <cuda.h>
#include <cupti.h>
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>
#include <cupti_pmsampling.h>
#include <cupti_sass_metrics.h>
#include <cupti_pcsampling.h>
