//! A scripted data-parallel training run of two ranks, fed to each rank's correlator and
//! range tree as capture feeds them (trace mode): per step a `train_step` range around
//! `forward`, `backward` and `optimizer`; an input memcpy, a gradient memset, cuBLAS GEMMs and
//! PyTorch's elementwise kernels on stream 7, and one NCCL all-reduce per layer on stream 13
//! that runs beside the next layer's backward GEMMs; the optimizer waits for the last one.
//! Kernel names are those CUPTI reports for PyTorch 2.x on an H100, durations of that order;
//! rank 1's compute is 4 % slower and starts 31 µs later. Each launch, memcpy and memset call
//! is stamped when it returns, as a session that times API calls stamps them (`gmprof run
//! --trace-format kineto`). Deterministic: the Kineto traces of `tests/data/hta/` are written
//! from it.

#![allow(dead_code)]

use gmprof::correlate::Correlator;
use gmprof::model::{
    ClockPair, ClockSync, DevicePeaks, KernelActivity, LaunchApi, LaunchRecord, MetricSet, ProfilingMode,
    TransferActivity, TransferCall, TransferKind,
};
use gmprof::report::kineto::{DistributedInfo, TraceOptions};
use gmprof::report::{CaptureInfo, Report};
use gmprof::session::SessionTree;

/// Ranks of the run.
pub const WORLD_SIZE: u32 = 2;
/// Layers of the model.
pub const LAYERS: u32 = 2;
/// The compute stream and NCCL's stream.
pub const COMPUTE_STREAM: u32 = 7;
pub const NCCL_STREAM: u32 = 13;

pub const GEMM_FWD: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
pub const GEMM_DGRAD: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
pub const GEMM_WGRAD: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas";
pub const LAYER_NORM: &str =
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)";
pub const LAYER_NORM_GRAD: &str =
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)";
pub const GELU: &str =
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)";
pub const ALL_REDUCE: &str = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
pub const ADAMW: &str =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, float*, float, float, float, float, float, float, bool, float*, float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, float*, float, float, float, float, float, float, bool, float*, float*)";

/// How long a launch call and a memcpy or memset call take, ns (gmprof stamps their
/// returns when it writes a Kineto trace: `ProfilerBuilder::time_api_calls`).
pub const LAUNCH_CALL_NS: u64 = 1_800;
pub const TRANSFER_CALL_NS: u64 = 1_200;

/// The CUPTI clock when rank 0 starts, ns.
const START_NS: u64 = 52_000_000_000;
/// The Unix time of `START_NS`.
const START_UNIX_NS: u64 = 1_795_000_000_000_000_000;

/// One rank of the run.
struct Rank {
    rank: u32,
    thread: u64,
    tree: SessionTree,
    correlator: Correlator,
    next_id: u32,
    ordinal: u32,
    /// The CPU thread's clock and each stream's next free instant, ns.
    cpu: u64,
    compute_free: u64,
    nccl_free: u64,
    /// Compute durations scale by this.
    scale: f64,
}

impl Rank {
    fn ns(&self, us: f64) -> u64 {
        (us * 1000.0 * self.scale).round() as u64
    }

    fn tick(&mut self, ns: u64) -> u64 {
        self.cpu += ns;
        self.cpu
    }

    fn push(&mut self, name: &str) {
        let t = self.tick(1_500);
        self.tree.push(name, self.thread, t);
    }

    fn pop(&mut self, at: u64) {
        self.cpu = self.cpu.max(at);
        self.tree.pop(self.thread, self.cpu).expect("balanced ranges");
    }

    /// Launches `name` on `stream`, running `dur_ns` once the stream and `after` allow.
    fn launch(&mut self, name: &str, stream: u32, dur_ns: u64, after: u64, grid: [i32; 3], block: [i32; 3]) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let launch = self.tick(6_200);
        self.correlator.add_launch(LaunchRecord {
            correlation_id: id,
            thread: self.thread,
            range: self.tree.current(self.thread),
            cycle: 0,
            ordinal: self.ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: Some(launch),
            unmeasured: false,
        });
        self.correlator.note_call_end(id, launch + LAUNCH_CALL_NS);
        self.ordinal += 1;
        let free = if stream == NCCL_STREAM { &mut self.nccl_free } else { &mut self.compute_free };
        let start = (launch + 4_100).max(*free).max(after);
        *free = start + dur_ns;
        self.correlator.add_activity(KernelActivity {
            correlation_id: id,
            name: name.into(),
            grid,
            block,
            registers_per_thread: if stream == NCCL_STREAM { 96 } else { 168 },
            static_shared_memory: 0,
            dynamic_shared_memory: if stream == NCCL_STREAM { 4_096 } else { 213_000 },
            stream_id: stream,
            context_id: 1,
            device_id: self.rank,
            start_ns: start,
            end_ns: start + dur_ns,
            ..Default::default()
        });
        start + dur_ns
    }

    /// A memcpy or memset on the compute stream.
    fn transfer(&mut self, kind: TransferKind, api: &'static str, bytes: u64, dur_ns: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let call = self.tick(3_400);
        self.correlator.add_transfer_call(TransferCall {
            correlation_id: id,
            thread: self.thread,
            range: self.tree.current(self.thread),
            api_name: api.into(),
            untimed: None,
            params: None,
        });
        self.correlator.note_call_start(id, call);
        self.correlator.note_call_end(id, call + TRANSFER_CALL_NS);
        let start = (call + 2_300).max(self.compute_free);
        self.compute_free = start + dur_ns;
        self.correlator.add_transfer_activity(TransferActivity {
            correlation_id: id,
            kind,
            bytes,
            start_ns: start,
            end_ns: start + dur_ns,
            stream_id: COMPUTE_STREAM,
            context_id: 1,
            device_id: self.rank,
            graph_id: 0,
            graph_node_id: 0,
        });
        start + dur_ns
    }

    fn step(&mut self) {
        self.push("train_step");
        self.transfer(TransferKind::MemcpyHtoD, "cudaMemcpyAsync", 4 << 20, 165_300);
        self.push("forward");
        for _ in 0..LAYERS {
            let (g, b) = ([132, 8, 1], [384, 1, 1]);
            self.launch(GEMM_FWD, COMPUTE_STREAM, self.ns(184.2), 0, g, b);
            self.launch(LAYER_NORM, COMPUTE_STREAM, self.ns(11.6), 0, [4096, 1, 1], [128, 1, 1]);
            self.launch(GELU, COMPUTE_STREAM, self.ns(23.7), 0, [8192, 1, 1], [128, 1, 1]);
        }
        let t = self.tick(2_000);
        self.pop(t);
        self.push("backward");
        self.transfer(TransferKind::Memset, "cudaMemsetAsync", 1 << 20, 3_200);
        let mut reduced = 0;
        for _ in 0..LAYERS {
            self.launch(LAYER_NORM_GRAD, COMPUTE_STREAM, self.ns(14.1), 0, [4096, 1, 1], [128, 1, 1]);
            self.launch(GEMM_DGRAD, COMPUTE_STREAM, self.ns(201.5), 0, [132, 8, 1], [384, 1, 1]);
            let grads = self.launch(GEMM_WGRAD, COMPUTE_STREAM, self.ns(176.8), 0, [66, 16, 1], [384, 1, 1]);
            reduced = self.launch(ALL_REDUCE, NCCL_STREAM, 243_900, grads, [2, 1, 1], [640, 1, 1]);
        }
        let t = self.tick(2_000);
        self.pop(t);
        self.push("optimizer");
        self.launch(ADAMW, COMPUTE_STREAM, self.ns(38.4), reduced, [1320, 1, 1], [512, 1, 1]);
        let t = self.tick(2_000);
        self.pop(t);
        // The step's end synchronizes with the GPU.
        let done = self.compute_free.max(self.nccl_free) + 8_700;
        self.pop(done);
    }
}

/// Rank `rank`'s report after `steps` steps.
pub fn rank_report(rank: u32, steps: u32) -> Report {
    let start = START_NS + u64::from(rank) * 31_000;
    let mut r = Rank {
        rank,
        thread: 40_100 + u64::from(rank),
        tree: SessionTree::new(),
        correlator: Correlator::new(),
        next_id: 1,
        ordinal: 0,
        cpu: start,
        compute_free: start,
        nccl_free: start,
        scale: 1.0 + 0.04 * f64::from(rank),
    };
    for _ in 0..steps {
        r.step();
    }
    let mut info = CaptureInfo::new(ProfilingMode::Trace);
    info.device_name = Some("NVIDIA H100 80GB HBM3".into());
    info.chip = Some("GH100".into());
    let pair = |cupti_ns: u64| ClockPair { cupti_ns, unix_ns: START_UNIX_NS + (cupti_ns - START_NS) };
    info.clock = Some(ClockSync { start: pair(START_NS), finish: pair(r.cpu) });
    info.device_peaks = Some(DevicePeaks {
        compute_capability: Some([9, 0]),
        sm_count: Some(132),
        sm_clock_khz: Some(1_980_000),
        memory_clock_khz: Some(2_619_000),
        memory_bus_width_bits: Some(5120),
        dram_peak_gbps: Some(3352.3),
        fp32_peak_gflops: Some(66_908.2),
        warp_issue_peak_ginst: Some(1_045.4),
    });
    let mut report = Report::analyze(info, &MetricSet::default(), &r.tree, r.correlator);
    report.meta.gmprof_version = "GOLDEN".into();
    report
}

/// How rank `rank`'s process writes its Kineto trace (pid 31400 + rank, as torchrun's
/// `RANK`, `WORLD_SIZE` and `LOCAL_RANK` say).
pub fn rank_options(rank: u32) -> TraceOptions {
    TraceOptions::kineto(
        Some(31_400 + rank),
        Some(DistributedInfo {
            rank,
            world_size: Some(WORLD_SIZE),
            local_rank: Some(rank),
            rank_variable: Some("RANK".into()),
        }),
    )
}
