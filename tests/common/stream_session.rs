//! A synthetic training run fed to a session's correlator and range tree as capture feeds
//! them: a step range per step, layers and an optimizer inside, kernels launched in them and
//! a memcpy per step; each launch's activity record arrives one step later (the GPU runs
//! behind the CPU). The streamed-outputs test and the stream benchmark play it.

#![allow(dead_code)]

use gmprof::correlate::Correlator;
use gmprof::model::{KernelActivity, LaunchApi, LaunchRecord, TransferActivity, TransferCall, TransferKind};
use gmprof::session::SessionTree;

/// Kernel names, as a real run's mix: a few GEMMs and many small kernels.
pub const NAMES: [&str; 12] = [
    "ampere_sgemm_128x64_tn",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
    "void at::native::(anonymous namespace)::layer_norm_kernel<float, float>",
    "softmax_forward_kernel",
    "attention_backward",
    "fused_classifier_kernel3",
    "adamw_kernel3",
    "residual_forward_kernel",
    "matmul_backward_bias_kernel7",
    "encoder_forward_kernel3",
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>",
];

/// Names of the ranges inside a layer (llm.c's functions).
pub const OPS: [&str; 8] = [
    "layernorm_forward",
    "matmul_cublaslt",
    "attention_forward",
    "matmul_backward",
    "gelu_forward",
    "residual_forward",
    "fused_residual_forward5",
    "attention_backward",
];

/// The run's shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Steps.
    pub steps: u64,
    /// Layer ranges per step.
    pub layers: u64,
    /// Kernels per layer.
    pub kernels_per_layer: u64,
    /// Ranges inside each layer (llm.c pushes one per function: `attention_forward`,
    /// `matmul_cublaslt` ...), the layer's kernels spread over them; 0 for none.
    pub ops_per_layer: u64,
}

impl Shape {
    /// Kernels per step (the layers' and the optimizer's 2).
    pub fn kernels_per_step(&self) -> u64 {
        self.layers * self.kernels_per_layer + 2
    }
}

/// Plays one run into a correlator and a tree.
pub struct Player {
    pub shape: Shape,
    next_id: u32,
    clock: u64,
    gpu: u64,
    ordinal: u32,
    /// Activity records of the step before, delivered at the next step.
    late: Vec<KernelActivity>,
    late_transfers: Vec<TransferActivity>,
    /// Kernels launched so far.
    pub launched: u64,
}

impl Player {
    pub fn new(shape: Shape) -> Self {
        Self {
            shape,
            next_id: 1,
            clock: 1_000_000,
            gpu: 1_000_000,
            ordinal: 0,
            late: Vec::new(),
            late_transfers: Vec::new(),
            launched: 0,
        }
    }

    fn tick(&mut self, ns: u64) -> u64 {
        self.clock += ns;
        self.clock
    }

    fn launch(&mut self, tree: &SessionTree, c: &mut Correlator, step: u64, k: u64) {
        let id = self.next_id;
        self.next_id += 1;
        c.add_launch(LaunchRecord {
            correlation_id: id,
            thread: 1,
            range: tree.current(1),
            cycle: 0,
            ordinal: self.ordinal,
            api: LaunchApi::Runtime,
            api_name: "cudaLaunchKernel".into(),
            context_id: 1,
            launch_ns: Some(self.tick(3_000)),
            unmeasured: false,
        });
        self.ordinal += 1;
        // Durations vary by kernel and step: 2 µs to a few ms.
        let name = NAMES[((k * 7 + step) % NAMES.len() as u64) as usize];
        let duration = 2_000 + (k * 7919 + step * 104_729) % 400_000 + if k % 5 == 0 { 1_500_000 } else { 0 };
        self.gpu = self.gpu.max(self.clock) + 500;
        let start = self.gpu;
        self.gpu += duration;
        self.late.push(KernelActivity {
            correlation_id: id,
            name: name.into(),
            grid: [128, 1, 1],
            block: [256, 1, 1],
            stream_id: 7,
            context_id: 1,
            start_ns: start,
            end_ns: self.gpu,
            ..Default::default()
        });
        self.launched += 1;
    }

    /// Plays step `step`: its records, and the previous step's activity records.
    pub fn step(&mut self, tree: &mut SessionTree, c: &mut Correlator, step: u64) {
        let arrived = std::mem::take(&mut self.late);
        let arrived_transfers = std::mem::take(&mut self.late_transfers);
        let t = self.tick(1_000);
        tree.push(&format!("Train step {step}"), 1, t);
        for layer in 0..self.shape.layers {
            let t = self.tick(500);
            tree.push(&format!("Layer {layer}"), 1, t);
            let ops = self.shape.ops_per_layer.max(1);
            for op in 0..ops {
                if self.shape.ops_per_layer > 0 {
                    let t = self.tick(100);
                    tree.push(OPS[(op % OPS.len() as u64) as usize], 1, t);
                }
                let per_op = self.shape.kernels_per_layer.div_ceil(ops);
                let first = op * per_op;
                for k in first..(first + per_op).min(self.shape.kernels_per_layer) {
                    self.launch(tree, c, step, layer * self.shape.kernels_per_layer + k);
                }
                if self.shape.ops_per_layer > 0 {
                    let t = self.tick(100);
                    tree.pop(1, t).expect("balanced");
                }
            }
            let t = self.tick(500);
            tree.pop(1, t).expect("balanced");
        }
        let t = self.tick(500);
        tree.push("optimizer", 1, t);
        self.launch(tree, c, step, 1000);
        self.launch(tree, c, step, 1001);
        let id = self.next_id;
        self.next_id += 1;
        c.add_transfer_call(TransferCall {
            correlation_id: id,
            thread: 1,
            range: tree.current(1),
            api_name: "cuMemcpyHtoDAsync_v2".into(),
            untimed: None,
            params: None,
        });
        self.late_transfers.push(TransferActivity {
            correlation_id: id,
            kind: TransferKind::MemcpyHtoD,
            bytes: 4096,
            start_ns: self.gpu,
            end_ns: self.gpu + 1_000,
            stream_id: 7,
            context_id: 1,
            device_id: 0,
            graph_id: 0,
            graph_node_id: 0,
        });
        let t = self.tick(500);
        tree.pop(1, t).expect("balanced");
        let t = self.tick(500);
        tree.pop(1, t).expect("balanced");
        for a in arrived {
            c.add_activity(a);
        }
        for a in arrived_transfers {
            c.add_transfer_activity(a);
        }
    }

    /// Delivers the last step's records (the end of the run's activity flush).
    pub fn flush(&mut self, c: &mut Correlator) {
        for a in std::mem::take(&mut self.late) {
            c.add_activity(a);
        }
        for a in std::mem::take(&mut self.late_transfers) {
            c.add_transfer_activity(a);
        }
    }

    /// The CUPTI clock now.
    pub fn now(&self) -> u64 {
        self.clock.max(self.gpu)
    }
}
