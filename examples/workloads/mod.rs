//! GPU workloads shared by the gmprof examples and GPU tests.
//!
//! Included with `#[path = "workloads/mod.rs"] mod workloads;` from `examples/` and
//! `#[path = "../examples/workloads/mod.rs"] mod workloads;` from `tests/`, so every
//! includer compiles its own copy and uses only part of it (hence `dead_code` is allowed).
//!
//! Everything runs on the device's primary context (cudarc's [`CudaContext::new`]), which is
//! the context gmprof attaches to, and on that context's default (null) stream. The default
//! stream is deliberate: creating a second cudarc stream switches cudarc into multi-stream
//! mode, where every launch also records and waits on CUDA events. Those extra driver calls
//! would show up in the launch-overhead numbers the synthetic benchmark measures.
//!
//! * [`Gpu`]: context, stream, NVRTC-compiled kernels and a cuBLAS handle, plus the
//!   synthetic kernels ([`Gpu::vector_add`], [`Gpu::tiny_kernel`]).
//! * [`Mlp`]: a two-layer MLP trained with SGD on one fixed synthetic batch (cuBLAS GEMMs
//!   and NVRTC kernels). Its loss falls step after step, which shows the loop does real
//!   work.
//!
//! Do not hard-code how many kernels a phase launches: cuBLAS picks its GEMM algorithm
//! at run time and may launch one or several kernels (split-K reductions, for example)
//! per GEMM, depending on the GPU and library version.

#![allow(dead_code)]

use std::fmt;
use std::sync::Arc;

use cudarc::cublas::result::CublasError;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::CompileError;

/// Kernel source; see the file for what each kernel does.
const KERNELS_SRC: &str = include_str!("kernels.cu");

/// Block size for element-wise kernels.
const ELEMENTWISE_BLOCK: u32 = 256;

/// `softmax_xent_forward` reduces over exactly this many threads per row; it must equal
/// `BLOCK` in kernels.cu.
const SOFTMAX_BLOCK: u32 = 256;

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// Anything that can go wrong while setting up or running a workload.
#[derive(Debug)]
pub enum GpuError {
    /// A CUDA shared library could not be loaded. Checked up front because cudarc's
    /// dynamic loader panics when a library is missing; we want a plain error instead.
    LibraryMissing {
        /// Library name as cudarc knows it, e.g. "cuda", "cublas".
        lib: &'static str,
        /// File names that were tried.
        tried: Vec<String>,
        /// What to do about it.
        hint: &'static str,
    },
    /// A CUDA driver API call failed.
    Driver(DriverError),
    /// NVRTC failed to compile kernels.cu.
    Compile(CompileError),
    /// A cuBLAS call failed.
    Cublas(CublasError),
    /// A size that the kernels cannot handle (they index with 32-bit ints).
    Size(String),
    /// The device computed a result that differs from the host's expectation.
    WrongResult(String),
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::LibraryMissing { lib, tried, hint } => {
                write!(f, "lib{lib} could not be loaded; tried: {}. {hint}", tried.join(", "))
            }
            GpuError::Driver(e) => write!(f, "CUDA driver error: {e}"),
            GpuError::Compile(CompileError::CompileError { nvrtc, log, .. }) => {
                write!(f, "NVRTC failed to compile the workload kernels ({nvrtc:?}):\n{}", log.to_string_lossy())
            }
            GpuError::Compile(e) => write!(f, "NVRTC error: {e}"),
            GpuError::Cublas(e) => write!(f, "cuBLAS error: {e}"),
            GpuError::Size(msg) => write!(f, "unsupported size: {msg}"),
            GpuError::WrongResult(msg) => write!(f, "wrong result: {msg}"),
        }
    }
}

impl std::error::Error for GpuError {}

impl From<DriverError> for GpuError {
    fn from(e: DriverError) -> Self {
        GpuError::Driver(e)
    }
}

impl From<CompileError> for GpuError {
    fn from(e: CompileError) -> Self {
        GpuError::Compile(e)
    }
}

impl From<CublasError> for GpuError {
    fn from(e: CublasError) -> Self {
        GpuError::Cublas(e)
    }
}

pub type Result<T> = std::result::Result<T, GpuError>;

/// Fails with [`GpuError::LibraryMissing`] unless libcuda, libnvrtc and libcublas can all be
/// loaded. cudarc would otherwise panic on first use of a missing library.
pub fn check_libraries() -> Result<()> {
    // SAFETY: each probe only dlopen()s candidate file names and drops the handle again; it
    // runs the libraries' initialisers, as any later use of them would.
    let present = unsafe {
        [
            ("cuda", cudarc::driver::sys::is_culib_present(), "Is an NVIDIA driver installed on this machine?"),
            (
                "nvrtc",
                cudarc::nvrtc::sys::is_culib_present(),
                "Install the CUDA toolkit and add its lib64 directory (e.g. /usr/local/cuda/lib64) \
                 to LD_LIBRARY_PATH.",
            ),
            (
                "cublas",
                cudarc::cublas::sys::is_culib_present(),
                "Install the CUDA toolkit and add its lib64 directory (e.g. /usr/local/cuda/lib64) \
                 to LD_LIBRARY_PATH.",
            ),
        ]
    };
    for (lib, ok, hint) in present {
        if !ok {
            let mut tried = cudarc::get_lib_name_candidates(lib);
            // The candidate list repeats some names; keep the first of each.
            let mut seen = std::collections::HashSet::new();
            tried.retain(|name| seen.insert(name.clone()));
            return Err(GpuError::LibraryMissing { lib, tried, hint });
        }
    }
    Ok(())
}

/// Rejects buffers the kernels cannot index with a 32-bit `int`.
fn check_i32(what: &str, n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| GpuError::Size(format!("{what} = {n} exceeds i32::MAX")))
}

fn elementwise_config(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(ELEMENTWISE_BLOCK), 1, 1),
        block_dim: (ELEMENTWISE_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

// ---------------------------------------------------------------------------------------
// Gpu: context, kernels, cuBLAS, synthetic kernels
// ---------------------------------------------------------------------------------------

/// The loaded kernels of kernels.cu.
struct Kernels {
    vector_add: CudaFunction,
    tiny: CudaFunction,
    bias_relu: CudaFunction,
    relu_backward: CudaFunction,
    softmax_xent_forward: CudaFunction,
    softmax_xent_backward: CudaFunction,
    column_sum: CudaFunction,
    sgd_update: CudaFunction,
}

/// Buffers for [`Gpu::vector_add`], allocated once and grown on demand.
struct VectorAddBuffers {
    a: CudaSlice<f32>,
    b: CudaSlice<f32>,
    c: CudaSlice<f32>,
}

/// One device: its primary context, default stream, compiled kernels and cuBLAS handle.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub blas: Arc<CudaBlas>,
    kernels: Arc<Kernels>,
    vadd: Option<VectorAddBuffers>,
    tiny_counter: CudaSlice<i32>,
}

impl Gpu {
    /// Opens `device`'s primary context and compiles the kernels. Create this before the
    /// gmprof profiler, which attaches to the same primary context.
    pub fn new(device: usize) -> Result<Self> {
        check_libraries()?;
        let ctx = CudaContext::new(device)?;
        let stream = ctx.default_stream();

        // No `arch` option: NVRTC emits PTX for its default virtual architecture and the
        // driver JIT-compiles it for whatever GPU this is when the module is loaded.
        let ptx = cudarc::nvrtc::compile_ptx(KERNELS_SRC)?;
        let module = ctx.load_module(ptx)?;
        let kernels = Kernels {
            vector_add: module.load_function("vector_add")?,
            tiny: module.load_function("tiny")?,
            bias_relu: module.load_function("bias_relu")?,
            relu_backward: module.load_function("relu_backward")?,
            softmax_xent_forward: module.load_function("softmax_xent_forward")?,
            softmax_xent_backward: module.load_function("softmax_xent_backward")?,
            column_sum: module.load_function("column_sum")?,
            sgd_update: module.load_function("sgd_update")?,
        };

        let blas = CudaBlas::new(stream.clone())?;
        let tiny_counter = stream.alloc_zeros::<i32>(1)?;
        Ok(Gpu { ctx, stream, blas: Arc::new(blas), kernels: Arc::new(kernels), vadd: None, tiny_counter })
    }

    /// The device name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> Result<String> {
        Ok(self.ctx.name()?)
    }

    /// Blocks until all work queued so far has finished.
    pub fn sync(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }

    /// Allocates (or grows) and fills the vector-add buffers for `n` elements, then waits
    /// for the uploads. Call it before profiling so that the profiled region contains only
    /// kernel launches, not allocations and copies.
    pub fn prepare_vector_add(&mut self, n: usize) -> Result<()> {
        check_i32("vector_add elements", n)?;
        if self.vadd.as_ref().is_some_and(|v| v.c.len() >= n) {
            return Ok(());
        }
        // Small integers keep a[i] + b[i] exact in f32, so verify_vector_add can compare
        // with ==.
        let a: Vec<f32> = (0..n).map(|i| (i % 1024) as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 2.0).collect();
        self.vadd = Some(VectorAddBuffers {
            a: self.stream.clone_htod(&a)?,
            b: self.stream.clone_htod(&b)?,
            c: self.stream.alloc_zeros::<f32>(n)?,
        });
        self.sync()
    }

    /// Queues c[i] = a[i] + b[i] over the first `n` elements and returns without waiting.
    /// Allocates on first use (see [`Gpu::prepare_vector_add`]).
    pub fn vector_add(&mut self, n: usize) -> Result<()> {
        self.prepare_vector_add(n)?;
        let bufs = self.vadd.as_mut().expect("prepared above");
        let n_i32 = n as i32; // checked by prepare_vector_add
        let mut launch = self.stream.launch_builder(&self.kernels.vector_add);
        launch.arg(&bufs.a).arg(&bufs.b).arg(&mut bufs.c).arg(&n_i32);
        // SAFETY: the argument list matches vector_add(const float*, const float*, float*,
        // int), and all three buffers hold at least n elements.
        unsafe { launch.launch(elementwise_config(n)) }?;
        Ok(())
    }

    /// Waits for the queue and checks that the last [`Gpu::vector_add`] over `n` elements
    /// produced a + b.
    pub fn verify_vector_add(&self, n: usize) -> Result<()> {
        let bufs = self
            .vadd
            .as_ref()
            .filter(|v| v.c.len() >= n)
            .ok_or_else(|| GpuError::WrongResult(format!("no vector_add over {n} elements")))?;
        let a = self.stream.clone_dtoh(&bufs.a)?;
        let b = self.stream.clone_dtoh(&bufs.b)?;
        let c = self.stream.clone_dtoh(&bufs.c)?;
        self.sync()?;
        match (0..n).find(|&i| c[i] != a[i] + b[i]) {
            None => Ok(()),
            Some(i) => Err(GpuError::WrongResult(format!(
                "vector_add: c[{i}] = {} but a[{i}] + b[{i}] = {}",
                c[i],
                a[i] + b[i]
            ))),
        }
    }

    /// Queues one launch of a minimal kernel (1 block × 32 threads) that increments a
    /// device counter; for launch-overhead tests with very many launches.
    pub fn tiny_kernel(&mut self) -> Result<()> {
        let mut launch = self.stream.launch_builder(&self.kernels.tiny);
        launch.arg(&mut self.tiny_counter);
        // SAFETY: tiny(int*) takes one pointer to at least one int.
        unsafe { launch.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }?;
        Ok(())
    }

    /// Waits for the queue and returns how many [`Gpu::tiny_kernel`] launches have run since
    /// the last reset. (Under CUPTI kernel replay each kernel runs several times, but CUPTI
    /// restores device memory between passes, so the count is still one per launch.)
    pub fn tiny_count(&self) -> Result<i32> {
        let v = self.stream.clone_dtoh(&self.tiny_counter)?;
        self.sync()?;
        Ok(v[0])
    }

    /// Sets the [`Gpu::tiny_kernel`] counter back to zero.
    pub fn reset_tiny_count(&mut self) -> Result<()> {
        self.stream.memset_zeros(&mut self.tiny_counter)?;
        self.sync()
    }
}

// ---------------------------------------------------------------------------------------
// Row-major GEMM on column-major cuBLAS
// ---------------------------------------------------------------------------------------

/// Row-major `C[m×n] = op(A)[m×k] · op(B)[k×n]` (overwriting C), where `op(X)` is `X` or,
/// with `trans_x`, `Xᵀ`. A is stored `[m×k]`, or `[k×m]` when transposed; B is stored
/// `[k×n]`, or `[n×k]` when transposed; all densely packed.
///
/// The layout trick: cuBLAS is column-major, and a dense row-major `[r×c]` matrix is the
/// same bytes as a column-major `[c×r]` matrix, its transpose, with leading dimension `c`.
/// So cuBLAS sees our C as `Cᵀ`, and we ask it for `Cᵀ = op(B)ᵀ · op(A)ᵀ`: swap the operands
/// (cuBLAS's A is our B, its B is our A), swap m and n, and keep each operand's own
/// transpose flag, since cuBLAS already sees each stored matrix transposed. Each leading
/// dimension is the row length of the matrix as we store it.
#[allow(clippy::too_many_arguments)]
fn gemm_row_major(
    blas: &CudaBlas,
    trans_a: bool,
    trans_b: bool,
    m: usize,
    n: usize,
    k: usize,
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
) -> Result<()> {
    // These make the unsafe call below sound: cuBLAS reads/writes exactly these extents.
    assert!(a.len() >= m * k, "gemm: A has {} < {m}×{k} elements", a.len());
    assert!(b.len() >= k * n, "gemm: B has {} < {k}×{n} elements", b.len());
    assert!(c.len() >= m * n, "gemm: C has {} < {m}×{n} elements", c.len());
    let op = |t: bool| {
        if t {
            cublasOperation_t::CUBLAS_OP_T
        } else {
            cublasOperation_t::CUBLAS_OP_N
        }
    };
    let (m, n, k) = (check_i32("m", m)?, check_i32("n", n)?, check_i32("k", k)?);
    let cfg = GemmConfig {
        transa: op(trans_b),
        transb: op(trans_a),
        m: n,
        n: m,
        k,
        alpha: 1.0f32,
        lda: if trans_b { k } else { n },
        ldb: if trans_a { m } else { k },
        beta: 0.0f32,
        ldc: n,
    };
    // SAFETY: the asserts above guarantee every operand covers the extent cuBLAS touches
    // for these m, n, k and leading dimensions; all three live on this handle's stream.
    unsafe { blas.gemm(cfg, b, a, c) }?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// MLP
// ---------------------------------------------------------------------------------------

/// Sizes of the [`Mlp`]. One step runs five GEMMs, 2·B·H·(2D + 3C) ≈ 86 GFLOP at the
/// defaults; in plain f32 (cuBLAS's default math mode, no TF32) that should take a few
/// milliseconds on an H100.
#[derive(Clone, Copy, Debug)]
pub struct MlpConfig {
    /// Batch size B.
    pub batch: usize,
    /// Input features D.
    pub input: usize,
    /// Hidden units H.
    pub hidden: usize,
    /// Classes C.
    pub classes: usize,
    /// Seed for the synthetic data and initial weights.
    pub seed: u64,
}

impl Default for MlpConfig {
    fn default() -> Self {
        MlpConfig { batch: 2048, input: 1024, hidden: 4096, classes: 1024, seed: 0x5eed }
    }
}

/// Default SGD learning rate for [`Mlp::update`]. At the default sizes a CPU replica of
/// this model drops the loss from 7.19 to 6.27 over the first five steps with it, and
/// twice this rate still descends smoothly.
pub const DEFAULT_LR: f32 = 0.3;

/// A two-layer perceptron, `logits = relu(X·W1 + b1)·W2 + b2`, with softmax cross-entropy
/// against random labels, trained by SGD on one fixed synthetic batch. With a fixed batch
/// the network simply memorises the labels, so the loss falls from about ln(C).
///
/// All matrices are row-major on the device. [`Mlp::forward`], [`Mlp::backward`] and
/// [`Mlp::update`] only queue work; [`Mlp::loss`] waits for it.
pub struct Mlp {
    cfg: MlpConfig,
    stream: Arc<CudaStream>,
    blas: Arc<CudaBlas>,
    kernels: Arc<Kernels>,

    // Data.
    x: CudaSlice<f32>,      // [B×D]
    labels: CudaSlice<i32>, // [B]

    // Parameters and their gradients.
    w1: CudaSlice<f32>,  // [D×H]
    b1: CudaSlice<f32>,  // [H]
    w2: CudaSlice<f32>,  // [H×C]
    b2: CudaSlice<f32>,  // [C]
    dw1: CudaSlice<f32>, // [D×H]
    db1: CudaSlice<f32>, // [H]
    dw2: CudaSlice<f32>, // [H×C]
    db2: CudaSlice<f32>, // [C]

    // Activations.
    z1: CudaSlice<f32>,       // [B×H] pre-activation (bias included)
    a1: CudaSlice<f32>,       // [B×H] relu(z1)
    logits: CudaSlice<f32>,   // [B×C] A1·W2, without b2 (the softmax kernel adds it)
    probs: CudaSlice<f32>,    // [B×C]
    row_loss: CudaSlice<f32>, // [B]

    // Activation gradients.
    dlogits: CudaSlice<f32>, // [B×C]
    dhidden: CudaSlice<f32>, // [B×H] dA1, turned into dZ1 in place
}

/// xorshift64*: enough randomness for synthetic data, and no extra dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-bound, bound).
    fn uniform(&mut self, bound: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
        (2.0 * unit - 1.0) * bound
    }

    fn uniform_vec(&mut self, n: usize, bound: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(bound)).collect()
    }
}

impl Mlp {
    /// Allocates and initialises the data and parameters on `gpu` and waits for the
    /// uploads, so nothing of the setup leaks into a later profiled region.
    pub fn new(gpu: &Gpu, cfg: MlpConfig) -> Result<Self> {
        let MlpConfig { batch: b, input: d, hidden: h, classes: c, seed } = cfg;
        if b == 0 || d == 0 || h == 0 || c == 0 {
            return Err(GpuError::Size(format!("MLP dimensions must be > 0: {cfg:?}")));
        }
        for (what, n) in [("B×D", b * d), ("D×H", d * h), ("B×H", b * h), ("H×C", h * c)] {
            check_i32(what, n)?;
        }
        check_i32("B×C", b * c)?;

        let stream = gpu.stream.clone();
        let mut rng = Rng::new(seed);
        let x = rng.uniform_vec(b * d, 1.0);
        let labels: Vec<i32> = (0..b).map(|_| (rng.next_u64() % c as u64) as i32).collect();
        // He-uniform for the relu layer, Glorot-uniform for the output layer.
        let w1 = rng.uniform_vec(d * h, (6.0 / d as f32).sqrt());
        let w2 = rng.uniform_vec(h * c, (6.0 / (h + c) as f32).sqrt());

        let mlp = Mlp {
            cfg,
            x: stream.clone_htod(&x)?,
            labels: stream.clone_htod(&labels)?,
            w1: stream.clone_htod(&w1)?,
            b1: stream.alloc_zeros(h)?,
            w2: stream.clone_htod(&w2)?,
            b2: stream.alloc_zeros(c)?,
            dw1: stream.alloc_zeros(d * h)?,
            db1: stream.alloc_zeros(h)?,
            dw2: stream.alloc_zeros(h * c)?,
            db2: stream.alloc_zeros(c)?,
            z1: stream.alloc_zeros(b * h)?,
            a1: stream.alloc_zeros(b * h)?,
            logits: stream.alloc_zeros(b * c)?,
            probs: stream.alloc_zeros(b * c)?,
            row_loss: stream.alloc_zeros(b)?,
            dlogits: stream.alloc_zeros(b * c)?,
            dhidden: stream.alloc_zeros(b * h)?,
            blas: gpu.blas.clone(),
            kernels: gpu.kernels.clone(),
            stream,
        };
        mlp.stream.synchronize()?;
        Ok(mlp)
    }

    pub fn config(&self) -> MlpConfig {
        self.cfg
    }

    /// Queues the forward pass: 2 GEMMs, the bias+relu epilogue and softmax cross-entropy.
    pub fn forward(&mut self) -> Result<()> {
        let MlpConfig { batch: b, input: d, hidden: h, classes: c, .. } = self.cfg;
        let (b_i, h_i, c_i) = (b as i32, h as i32, c as i32); // checked in new()

        // Z1 = X·W1, then Z1 += b1 and A1 = relu(Z1).
        gemm_row_major(&self.blas, false, false, b, h, d, &self.x, &self.w1, &mut self.z1)?;
        let mut launch = self.stream.launch_builder(&self.kernels.bias_relu);
        launch.arg(&mut self.z1).arg(&self.b1).arg(&mut self.a1).arg(&b_i).arg(&h_i);
        // SAFETY: matches bias_relu(float*, const float*, float*, int, int); z1 and a1 hold
        // B×H elements, b1 holds H.
        unsafe { launch.launch(elementwise_config(b * h)) }?;

        // logits = A1·W2; b2 is added inside the softmax kernel.
        gemm_row_major(&self.blas, false, false, b, c, h, &self.a1, &self.w2, &mut self.logits)?;
        let mut launch = self.stream.launch_builder(&self.kernels.softmax_xent_forward);
        launch
            .arg(&self.logits)
            .arg(&self.b2)
            .arg(&self.labels)
            .arg(&mut self.probs)
            .arg(&mut self.row_loss)
            .arg(&b_i)
            .arg(&c_i);
        // SAFETY: matches softmax_xent_forward(const float*, const float*, const int*,
        // float*, float*, int, int); one block of SOFTMAX_BLOCK (= BLOCK in the kernel)
        // threads per row; logits/probs hold B×C, b2 C, labels and row_loss B elements,
        // and every label is in [0, C).
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (b as u32, 1, 1),
                block_dim: (SOFTMAX_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        Ok(())
    }

    /// Queues the backward pass of the mean loss: 3 GEMMs (dW2, dA1, dW1), two bias
    /// gradients and the relu mask. Needs the activations of the last [`Mlp::forward`].
    pub fn backward(&mut self) -> Result<()> {
        let MlpConfig { batch: b, input: d, hidden: h, classes: c, .. } = self.cfg;
        let (b_i, c_i, bh_i) = (b as i32, c as i32, (b * h) as i32); // checked in new()
        let scale = 1.0f32 / b as f32;

        // dlogits = (probs - onehot(labels)) / B.
        let mut launch = self.stream.launch_builder(&self.kernels.softmax_xent_backward);
        launch.arg(&self.probs).arg(&self.labels).arg(&mut self.dlogits).arg(&b_i).arg(&c_i).arg(&scale);
        // SAFETY: matches softmax_xent_backward(const float*, const int*, float*, int, int,
        // float); probs and dlogits hold B×C elements, labels B.
        unsafe { launch.launch(elementwise_config(b * c)) }?;

        // dW2 = A1ᵀ·dlogits   [H×C] = [B×H]ᵀ·[B×C]
        gemm_row_major(&self.blas, true, false, h, c, b, &self.a1, &self.dlogits, &mut self.dw2)?;
        // db2 = column sums of dlogits.
        self.column_sum(Which::Logits)?;
        // dA1 = dlogits·W2ᵀ   [B×H] = [B×C]·[H×C]ᵀ  (W2 not yet updated)
        gemm_row_major(&self.blas, false, true, b, h, c, &self.dlogits, &self.w2, &mut self.dhidden)?;

        // dZ1 = dA1 ⊙ (Z1 > 0), in place.
        let mut launch = self.stream.launch_builder(&self.kernels.relu_backward);
        launch.arg(&mut self.dhidden).arg(&self.z1).arg(&bh_i);
        // SAFETY: matches relu_backward(float*, const float*, int); both hold B×H elements.
        unsafe { launch.launch(elementwise_config(b * h)) }?;

        // dW1 = Xᵀ·dZ1   [D×H] = [B×D]ᵀ·[B×H]
        gemm_row_major(&self.blas, true, false, d, h, b, &self.x, &self.dhidden, &mut self.dw1)?;
        // db1 = column sums of dZ1.
        self.column_sum(Which::Hidden)?;
        Ok(())
    }

    /// Queues the SGD step `p -= lr · dp` for all four parameter tensors.
    pub fn update(&mut self, lr: f32) -> Result<()> {
        let sgd = &self.kernels.sgd_update;
        let stream = &self.stream;
        for (w, g) in
            [(&mut self.w1, &self.dw1), (&mut self.b1, &self.db1), (&mut self.w2, &self.dw2), (&mut self.b2, &self.db2)]
        {
            let n = w.len();
            let n_i = n as i32; // every parameter tensor was checked in new()
            let mut launch = stream.launch_builder(sgd);
            launch.arg(w).arg(g).arg(&lr).arg(&n_i);
            // SAFETY: matches sgd_update(float*, const float*, float, int); each gradient
            // has the same length as its parameter.
            unsafe { launch.launch(elementwise_config(n)) }?;
        }
        Ok(())
    }

    /// Forward, backward and update in one call.
    pub fn step(&mut self, lr: f32) -> Result<()> {
        self.forward()?;
        self.backward()?;
        self.update(lr)
    }

    /// Waits for the queue and returns the mean cross-entropy of the last
    /// [`Mlp::forward`] (i.e. before that step's update).
    pub fn loss(&self) -> Result<f32> {
        let per_row = self.stream.clone_dtoh(&self.row_loss)?;
        self.stream.synchronize()?;
        let sum: f64 = per_row.iter().map(|&l| l as f64).sum();
        Ok((sum / per_row.len() as f64) as f32)
    }

    /// Bias gradient = column sums of an activation gradient.
    fn column_sum(&mut self, which: Which) -> Result<()> {
        let rows = self.cfg.batch;
        let (src, dst, cols) = match which {
            Which::Logits => (&self.dlogits, &mut self.db2, self.cfg.classes),
            Which::Hidden => (&self.dhidden, &mut self.db1, self.cfg.hidden),
        };
        let (rows_i, cols_i) = (rows as i32, cols as i32);
        let mut launch = self.stream.launch_builder(&self.kernels.column_sum);
        launch.arg(src).arg(dst).arg(&rows_i).arg(&cols_i);
        // SAFETY: matches column_sum(const float*, float*, int, int); src holds rows×cols
        // elements and dst cols.
        unsafe { launch.launch(elementwise_config(cols)) }?;
        Ok(())
    }
}

/// Which bias gradient [`Mlp::column_sum`] computes.
#[derive(Clone, Copy)]
enum Which {
    Logits,
    Hidden,
}

// ---------------------------------------------------------------------------------------
// Kernel-time workloads
// ---------------------------------------------------------------------------------------

/// Elements of the mixed workload's memory-bound vector add: 2^25 floats, 402 MB moved,
/// over 100 µs of DRAM traffic on an H100 or H200.
pub const MIXED_LARGE: usize = 1 << 25;

/// The MLP sizes of the mixed workload: B=512 makes its GEMMs tens to a few hundred µs.
pub fn mixed_mlp_config() -> MlpConfig {
    MlpConfig { batch: 512, ..MlpConfig::default() }
}

/// One step of a mixed workload for kernel-time checks: vector adds of 2^19, 2^20 and 2^21
/// floats (about 2 to 10 µs each on an H200), one MLP training step (cuBLAS GEMMs and element-wise
/// kernels) and one memory-bound vector add of [`MIXED_LARGE`] floats. Queues the work and
/// returns; call [`Gpu::prepare_vector_add`] with [`MIXED_LARGE`] first.
pub fn mixed_step(gpu: &mut Gpu, mlp: &mut Mlp) -> Result<()> {
    for n in [1 << 19, 1 << 19, 1 << 19, 1 << 19, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 21, 1 << 21] {
        gpu.vector_add(n)?;
    }
    mlp.step(DEFAULT_LR)?;
    gpu.vector_add(MIXED_LARGE)
}

/// One step of a CPU-bound loop: `kernels` vector adds of 2^16 floats, each after
/// `host_us` µs of host work (a busy wait standing in for a data loader), so the GPU idles
/// between kernels.
pub fn cpu_bound_step(gpu: &mut Gpu, kernels: usize, host_us: u64) -> Result<()> {
    for _ in 0..kernels {
        let until = std::time::Instant::now() + std::time::Duration::from_micros(host_us);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
        gpu.vector_add(1 << 16)?;
    }
    Ok(())
}

/// The nearest-rank `p`-quantile (0 < p ≤ 1) of `values`; `None` when empty.
pub fn quantile(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}
