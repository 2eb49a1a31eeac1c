//! The made-up program: its CUDA calls, each raising the callbacks CUPTI raises inside the
//! real call (context creation and destruction, module loads, NVTX ranges, kernel launches,
//! memcpys) through whatever subscriber gmprof installed, and running on the made-up GPU
//! (activity records, counter ranges, samples). Every call's result goes into a transcript,
//! which a run with gmprof must repeat exactly as a run without it.
//!
//! Its own calls are not counted and never fail: only gmprof's calls are scripted.
//!
//! Imports `script`, `driver`, `callbacks`, `profiler` and `samplers`.

use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};

use super::script::{advance, interned, Ran};
use super::{callbacks, driver, profiler, samplers};
use crate::sys::cupti::{
    CUcontext, CUfunction, CUmodule, CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain,
    CUpti_CallbackIdResource, CUpti_ModuleResourceData, CUpti_NvtxData, CUpti_ResourceData,
    CUpti_driver_api_trace_cbid_enum as DriverCbid, CUpti_nvtx_api_trace_cbid as NvtxCbid, CUresult, CUstream,
};
use crate::sys::nvtx::nvtxRangePushA_params;

/// Correlation ids, process-wide as CUPTI's.
static NEXT_CORRELATION: AtomicU32 = AtomicU32::new(1);

/// `cuLaunchKernel_params` (CUDA's `generated_cuda_meta.h`).
#[repr(C)]
struct LaunchParams {
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: CUstream,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

/// `cuModuleLoadData_params`.
#[repr(C)]
struct ModuleLoadParams {
    module: *mut CUmodule,
    image: *const c_void,
}

/// `cuMemcpyHtoD_v2_params`.
#[repr(C)]
struct MemcpyParams {
    dst: u64,
    src: *const c_void,
    bytes: usize,
}

/// `cuStreamBeginCapture_v2_params` and `cuStreamEndCapture_params`: the stream, then the
/// mode or the graph's out-pointer.
#[repr(C)]
struct CaptureParams {
    stream: CUstream,
    second: *mut c_void,
}

/// What the made-up program's module image is: PTX text, as a driver takes it.
const MODULE_IMAGE: &CStr = c"//\n// scripted module\n//\n.version 8.0\n.target sm_90\n.address_size 64\n";
/// The cubin its module-load callback hands over.
const CUBIN: &[u8] = b"\x7fELF scripted cubin: only its bytes are kept";

/// The made-up program, with its transcript.
#[derive(Debug, Default)]
pub struct Program {
    ctx: usize,
    functions: Vec<(String, usize)>,
    nvtx_depth: i32,
    lines: Vec<String>,
}

fn code(result: CUresult) -> String {
    driver::error_name(result).to_string_lossy().into_owned()
}

impl Program {
    /// A program that has made no call yet.
    pub fn new() -> Program {
        Program::default()
    }

    /// What each call returned, in order.
    pub fn transcript(&self) -> &[String] {
        &self.lines
    }

    fn context(&self) -> CUcontext {
        self.ctx as CUcontext
    }

    fn context_id(&self) -> u32 {
        driver::context(self.context()).map_or(0, |c| c.id)
    }

    /// One driver API callback, `site` of call `correlation_id`.
    #[allow(clippy::too_many_arguments)]
    fn api(
        &self,
        cbid: DriverCbid,
        name: &'static CStr,
        site: CUpti_ApiCallbackSite,
        correlation_id: u32,
        params: *const c_void,
        result: Option<&CUresult>,
        symbol: Option<&CStr>,
    ) {
        let mut correlation_data = 0u64;
        let data = CUpti_CallbackData {
            callbackSite: site,
            functionName: name.as_ptr(),
            functionParams: params,
            functionReturnValue: result.map_or(std::ptr::null_mut(), |r| r as *const CUresult as *mut c_void),
            symbolName: symbol.map_or(std::ptr::null(), CStr::as_ptr),
            context: self.context(),
            contextUid: self.context_id(),
            correlationData: &mut correlation_data,
            correlationId: correlation_id,
        };
        callbacks::raise(
            CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
            cbid.0,
            &data as *const CUpti_CallbackData as *const c_void,
        );
    }

    /// One resource callback about the program's context.
    fn resource(&self, cbid: CUpti_CallbackIdResource, descriptor: *mut c_void) {
        let data = CUpti_ResourceData { context: self.context(), resourceDescriptor: descriptor, ..Default::default() };
        callbacks::raise(
            CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE,
            cbid.0,
            &data as *const CUpti_ResourceData as *const c_void,
        );
    }

    /// `cuInit(0)`.
    pub fn init(&mut self) {
        self.lines.push("cuInit = CUDA_SUCCESS".into());
    }

    /// `cuCtxCreate` on device 0: the context is created and current, then CUPTI's
    /// context-created callback runs.
    pub fn create_context(&mut self) {
        self.ctx = driver::create_context() as usize;
        self.resource(CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_CREATED, std::ptr::null_mut());
        self.lines.push("cuCtxCreate = CUDA_SUCCESS".into());
    }

    /// `cuModuleLoadData` of a module with `kernels` (mangled names): the call's callbacks
    /// around CUPTI's module-loaded callback, which hands over the module's cubin.
    pub fn load_module(&mut self, kernels: &[&str]) {
        let correlation_id = NEXT_CORRELATION.fetch_add(1, Ordering::Relaxed);
        let mut module: CUmodule = std::ptr::null_mut();
        let params = ModuleLoadParams { module: &mut module, image: MODULE_IMAGE.as_ptr() as *const c_void };
        let p = &params as *const ModuleLoadParams as *const c_void;
        let name = c"cuModuleLoadData";
        let cbid = DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData;
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_ENTER, correlation_id, p, None, None);
        let handle = profiler::new_object();
        // SAFETY: the out-handle points at `module`, which lives on this frame.
        unsafe { *params.module = handle as CUmodule };
        for k in kernels {
            self.functions.push(((*k).to_owned(), driver::create_function(k, handle) as usize));
        }
        let mut loaded =
            CUpti_ModuleResourceData { moduleId: 1, cubinSize: CUBIN.len(), pCubin: CUBIN.as_ptr().cast() };
        self.resource(
            CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_MODULE_LOADED,
            &mut loaded as *mut CUpti_ModuleResourceData as *mut c_void,
        );
        let result = CUresult::CUDA_SUCCESS;
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_EXIT, correlation_id, p, Some(&result), None);
        self.lines.push(format!("cuModuleLoadData = {} ({} functions)", code(result), kernels.len()));
    }

    /// `nvtxRangePushA(name)`: CUPTI's NVTX callback; returns the depth, as NVTX does.
    pub fn push(&mut self, name: &str) {
        let message = CString::new(name).unwrap_or_default();
        let params = nvtxRangePushA_params { message: message.as_ptr() };
        let depth = self.nvtx_depth;
        let data = CUpti_NvtxData {
            functionName: c"nvtxRangePushA".as_ptr(),
            functionParams: &params as *const nvtxRangePushA_params as *const c_void,
            functionReturnValue: &depth as *const i32 as *const c_void,
        };
        callbacks::raise(
            CUpti_CallbackDomain::CUPTI_CB_DOMAIN_NVTX,
            NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePushA.0,
            &data as *const CUpti_NvtxData as *const c_void,
        );
        self.nvtx_depth += 1;
        self.lines.push(format!("nvtxRangePushA({name}) = {depth}"));
    }

    /// `nvtxRangePop()`.
    pub fn pop(&mut self) {
        self.nvtx_depth -= 1;
        let depth = self.nvtx_depth;
        let data = CUpti_NvtxData {
            functionName: c"nvtxRangePop".as_ptr(),
            functionParams: std::ptr::null(),
            functionReturnValue: &depth as *const i32 as *const c_void,
        };
        callbacks::raise(
            CUpti_CallbackDomain::CUPTI_CB_DOMAIN_NVTX,
            NvtxCbid::CUPTI_CBID_NVTX_nvtxRangePop.0,
            &data as *const CUpti_NvtxData as *const c_void,
        );
        self.lines.push(format!("nvtxRangePop = {depth}"));
    }

    /// `cuLaunchKernel` of `kernel` (loaded before) over `blocks` blocks of 256 threads with
    /// one `int` argument. The made-up GPU runs the function the parameters name once the
    /// enter callback returns (a callback may have changed them, as the probe engine does):
    /// it "computes" `2 * arg + blocks`, which the transcript records.
    pub fn launch(&mut self, kernel: &str, blocks: u32, arg: i32) {
        let correlation_id = NEXT_CORRELATION.fetch_add(1, Ordering::Relaxed);
        let f = self.functions.iter().find(|(n, _)| n == kernel).map_or(0, |(_, f)| *f);
        let mut value = arg;
        let mut args: [*mut c_void; 1] = [&mut value as *mut i32 as *mut c_void];
        let params = LaunchParams {
            f: f as CUfunction,
            grid: [blocks, 1, 1],
            block: [256, 1, 1],
            shared_mem_bytes: 0,
            stream: std::ptr::null_mut(),
            kernel_params: args.as_mut_ptr(),
            extra: std::ptr::null_mut(),
        };
        let p = &params as *const LaunchParams as *const c_void;
        let name = c"cuLaunchKernel";
        let cbid = DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
        let symbol = interned(kernel);
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_ENTER, correlation_id, p, None, Some(symbol));
        let (result, output) = self.run(&params, correlation_id);
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_EXIT, correlation_id, p, Some(&result), Some(symbol));
        let output = output.map_or_else(|| "no output".to_owned(), |o| format!("output {o}"));
        self.lines.push(format!("cuLaunchKernel({kernel}, {blocks} blocks, arg {arg}) = {}, {output}", code(result)));
    }

    /// Runs a launch as its parameters say: the result and the kernel's output.
    fn run(&self, params: &LaunchParams, correlation_id: u32) -> (CUresult, Option<i64>) {
        let Some(function) = driver::function(params.f) else { return (CUresult::CUDA_ERROR_INVALID_HANDLE, None) };
        if driver::context(self.context()).is_none() {
            return (CUresult::CUDA_ERROR_INVALID_CONTEXT, None);
        }
        if params.kernel_params.is_null() {
            return (CUresult::CUDA_ERROR_INVALID_VALUE, None);
        }
        // SAFETY: the kernel takes one `int`; its pointer is the parameters' first entry.
        let arg = unsafe { *(*params.kernel_params as *const i32) };
        let start = advance(3000) + 500;
        let ran = Ran {
            name: function.name,
            correlation_id,
            context_id: self.context_id(),
            context: self.ctx,
            start,
            end: start + 2000,
            grid: params.grid,
            block: params.block,
        };
        callbacks::kernel_ran(&ran);
        profiler::kernel_ran(&ran);
        samplers::kernel_ran(&ran);
        (CUresult::CUDA_SUCCESS, Some(2 * i64::from(arg) + i64::from(params.grid[0])))
    }

    /// `cuMemcpyHtoD_v2` of `bytes` bytes.
    pub fn memcpy(&mut self, bytes: usize) {
        let correlation_id = NEXT_CORRELATION.fetch_add(1, Ordering::Relaxed);
        let host = vec![7u8; bytes];
        let params = MemcpyParams { dst: 0x7000_0000, src: host.as_ptr() as *const c_void, bytes };
        let p = &params as *const MemcpyParams as *const c_void;
        let name = c"cuMemcpyHtoD_v2";
        let cbid = DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2;
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_ENTER, correlation_id, p, None, None);
        let start = advance(1000) + 100;
        callbacks::memcpy_ran(correlation_id, self.context_id(), bytes as u64, start, start + 800);
        let result = CUresult::CUDA_SUCCESS;
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_EXIT, correlation_id, p, Some(&result), None);
        self.lines.push(format!("cuMemcpyHtoD_v2({bytes} B) = {}", code(result)));
    }

    /// `cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL)`: from here to
    /// [`Program::end_capture`] the stream captures, and a synchronize, allocation or copy
    /// by anyone in the process invalidates the capture (as CUDA's global mode has it).
    pub fn begin_capture(&mut self, stream: usize) {
        let correlation_id = NEXT_CORRELATION.fetch_add(1, Ordering::Relaxed);
        let params = CaptureParams { stream: stream as CUstream, second: std::ptr::null_mut() };
        let p = &params as *const CaptureParams as *const c_void;
        let name = c"cuStreamBeginCapture_v2";
        let cbid = DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2;
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_ENTER, correlation_id, p, None, None);
        driver::begin_capture(stream);
        let result = CUresult::CUDA_SUCCESS;
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_EXIT, correlation_id, p, Some(&result), None);
        self.lines.push(format!("cuStreamBeginCapture_v2(stream {stream:#x}) = {}", code(result)));
    }

    /// `cuStreamEndCapture(stream, &graph)`: `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` when a
    /// forbidden call was made during the capture.
    pub fn end_capture(&mut self, stream: usize) {
        let correlation_id = NEXT_CORRELATION.fetch_add(1, Ordering::Relaxed);
        let mut graph: *mut c_void = std::ptr::null_mut();
        let params =
            CaptureParams { stream: stream as CUstream, second: &mut graph as *mut *mut c_void as *mut c_void };
        let p = &params as *const CaptureParams as *const c_void;
        let name = c"cuStreamEndCapture";
        let cbid = DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture;
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_ENTER, correlation_id, p, None, None);
        let result = driver::end_capture();
        self.api(cbid, name, CUpti_ApiCallbackSite::CUPTI_API_EXIT, correlation_id, p, Some(&result), None);
        self.lines.push(format!("cuStreamEndCapture(stream {stream:#x}) = {}", code(result)));
    }

    /// A line of the test's own in the transcript (what a call of gmprof's API returned).
    pub fn note(&mut self, line: String) {
        self.lines.push(line);
    }

    /// `cuCtxSynchronize` (the made-up GPU is always done).
    pub fn synchronize(&mut self) {
        self.lines.push("cuCtxSynchronize = CUDA_SUCCESS".into());
    }

    /// `cuCtxDestroy`: CUPTI's destroy-starting callback, then the context ends.
    pub fn destroy_context(&mut self) {
        self.resource(CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, std::ptr::null_mut());
        driver::destroy_context(self.context());
        self.lines.push("cuCtxDestroy = CUDA_SUCCESS".into());
    }
}
