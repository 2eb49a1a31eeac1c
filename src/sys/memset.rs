//! The parameter structures CUPTI hands to the driver and runtime memset callbacks
//! (`CUpti_CallbackData::functionParams`).
//!
//! CUDA declares them in `generated_cuda_meta.h` and `generated_cuda_runtime_api_meta.h`,
//! which are not in the pinned header set of `wrapper.h` (bindgen would bring thousands of
//! structures for the few gmprof reads). They are declared here by hand, one generic
//! structure per shape: the `uc`/`us`/`ui` value is an 8-, 16- or 32-bit element, which
//! moves no other field (the next one is 8-aligned), and the `_ptds`/`_ptsz` variants have
//! the layout of the plain ones. Sizes and offsets are checked at compile time against the
//! C layout (x86-64 and aarch64 Linux, LP64), as gcc reports it for the CUDA 13.0 headers.

use std::os::raw::c_void;

/// `cuMemsetD8_params`, `cuMemsetD16_params`, `cuMemsetD32_params`: the legacy 32-bit
/// entry points (`CUdeviceptr_v1`, `unsigned int N`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemsetD_v1_params<V> {
    /// Destination (`CUdeviceptr_v1`).
    pub dstDevice: u32,
    /// The value (`uc`, `us` or `ui`).
    pub value: V,
    /// Number of elements.
    pub N: u32,
}

/// `cuMemsetD8_v2_params` (and `D16`, `D32`, their `_v2_ptds`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemsetD_v2_params<V> {
    /// Destination.
    pub dstDevice: u64,
    /// The value.
    pub value: V,
    /// Number of elements.
    pub N: usize,
}

/// `cuMemsetD8Async_params` (and `D16`, `D32`, their `_ptsz`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemsetDAsync_params<V> {
    /// Destination.
    pub dstDevice: u64,
    /// The value.
    pub value: V,
    /// Number of elements.
    pub N: usize,
    /// The stream.
    pub hStream: *mut c_void,
}

/// `cuMemsetD2D8_params` (and `D16`, `D32`): the legacy 32-bit entry points.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemsetD2D_v1_params<V> {
    /// Destination (`CUdeviceptr_v1`).
    pub dstDevice: u32,
    /// Bytes between rows.
    pub dstPitch: u32,
    /// The value.
    pub value: V,
    /// Elements per row.
    pub Width: u32,
    /// Rows.
    pub Height: u32,
}

/// `cuMemsetD2D8_v2_params` (and `D16`, `D32`, their `_v2_ptds`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemsetD2D_v2_params<V> {
    /// Destination.
    pub dstDevice: u64,
    /// Bytes between rows.
    pub dstPitch: usize,
    /// The value.
    pub value: V,
    /// Elements per row.
    pub Width: usize,
    /// Rows.
    pub Height: usize,
}

/// `cuMemsetD2D8Async_params` (and `D16`, `D32`, their `_ptsz`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemsetD2DAsync_params<V> {
    /// Destination.
    pub dstDevice: u64,
    /// Bytes between rows.
    pub dstPitch: usize,
    /// The value.
    pub value: V,
    /// Elements per row.
    pub Width: usize,
    /// Rows.
    pub Height: usize,
    /// The stream.
    pub hStream: *mut c_void,
}

/// `cudaMemset_v3020_params` (and `cudaMemset_ptds_v7000_params`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemset_params {
    /// Destination.
    pub devPtr: *mut c_void,
    /// The byte value.
    pub value: i32,
    /// Bytes.
    pub count: usize,
}

/// `cudaMemsetAsync_v3020_params` (and `_ptsz_v7000`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemsetAsync_params {
    /// Destination.
    pub devPtr: *mut c_void,
    /// The byte value.
    pub value: i32,
    /// Bytes.
    pub count: usize,
    /// The stream.
    pub stream: *mut c_void,
}

/// `cudaMemset2D_v3020_params` (and `_ptds_v7000`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemset2D_params {
    /// Destination.
    pub devPtr: *mut c_void,
    /// Bytes between rows.
    pub pitch: usize,
    /// The byte value.
    pub value: i32,
    /// Bytes per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

/// `cudaMemset2DAsync_v3020_params` (and `_ptsz_v7000`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemset2DAsync_params {
    /// Destination.
    pub devPtr: *mut c_void,
    /// Bytes between rows.
    pub pitch: usize,
    /// The byte value.
    pub value: i32,
    /// Bytes per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// The stream.
    pub stream: *mut c_void,
}

/// `struct cudaPitchedPtr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaPitchedPtr {
    /// The allocation.
    pub ptr: *mut c_void,
    /// Bytes between rows.
    pub pitch: usize,
    /// Logical width of the allocation, elements.
    pub xsize: usize,
    /// Logical height of the allocation, elements.
    pub ysize: usize,
}

/// `struct cudaExtent`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaExtent {
    /// Width: bytes for linear memory (what `cudaMemset3D` sets).
    pub width: usize,
    /// Height, rows.
    pub height: usize,
    /// Depth, slices.
    pub depth: usize,
}

/// `cudaMemset3D_v3020_params` (and `_ptds_v7000`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemset3D_params {
    /// Destination.
    pub pitchedDevPtr: cudaPitchedPtr,
    /// The byte value.
    pub value: i32,
    /// What is set.
    pub extent: cudaExtent,
}

/// `cudaMemset3DAsync_v3020_params` (and `_ptsz_v7000`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemset3DAsync_params {
    /// Destination.
    pub pitchedDevPtr: cudaPitchedPtr,
    /// The byte value.
    pub value: i32,
    /// What is set.
    pub extent: cudaExtent,
    /// The stream.
    pub stream: *mut c_void,
}

// Sizes and offsets of the C structures (gcc, CUDA 13.0 headers, LP64).
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<cuMemsetD_v1_params<u8>>() == 12 && offset_of!(cuMemsetD_v1_params<u8>, N) == 8);
    assert!(size_of::<cuMemsetD_v1_params<u16>>() == 12 && offset_of!(cuMemsetD_v1_params<u16>, N) == 8);
    assert!(size_of::<cuMemsetD_v1_params<u32>>() == 12 && offset_of!(cuMemsetD_v1_params<u32>, N) == 8);
    assert!(size_of::<cuMemsetD2D_v1_params<u8>>() == 20);
    assert!(offset_of!(cuMemsetD2D_v1_params<u8>, Width) == 12 && offset_of!(cuMemsetD2D_v1_params<u8>, Height) == 16);
    assert!(size_of::<cuMemsetD2D_v1_params<u32>>() == 20 && offset_of!(cuMemsetD2D_v1_params<u32>, Width) == 12);
    assert!(size_of::<cuMemsetD_v2_params<u8>>() == 24 && offset_of!(cuMemsetD_v2_params<u8>, N) == 16);
    assert!(size_of::<cuMemsetD_v2_params<u32>>() == 24 && offset_of!(cuMemsetD_v2_params<u32>, N) == 16);
    assert!(size_of::<cuMemsetDAsync_params<u16>>() == 32);
    assert!(offset_of!(cuMemsetDAsync_params<u16>, N) == 16 && offset_of!(cuMemsetDAsync_params<u16>, hStream) == 24);
    assert!(size_of::<cuMemsetD2D_v2_params<u8>>() == 40);
    assert!(offset_of!(cuMemsetD2D_v2_params<u8>, Width) == 24 && offset_of!(cuMemsetD2D_v2_params<u8>, Height) == 32);
    assert!(size_of::<cuMemsetD2DAsync_params<u16>>() == 48);
    assert!(offset_of!(cuMemsetD2DAsync_params<u16>, Width) == 24);
    assert!(offset_of!(cuMemsetD2DAsync_params<u16>, Height) == 32);
    assert!(offset_of!(cuMemsetD2DAsync_params<u16>, hStream) == 40);
    assert!(size_of::<cudaMemset_params>() == 24 && offset_of!(cudaMemset_params, count) == 16);
    assert!(size_of::<cudaMemsetAsync_params>() == 32);
    assert!(offset_of!(cudaMemsetAsync_params, count) == 16 && offset_of!(cudaMemsetAsync_params, stream) == 24);
    assert!(size_of::<cudaMemset2D_params>() == 40);
    assert!(offset_of!(cudaMemset2D_params, width) == 24 && offset_of!(cudaMemset2D_params, height) == 32);
    assert!(size_of::<cudaMemset2DAsync_params>() == 48 && offset_of!(cudaMemset2DAsync_params, stream) == 40);
    assert!(size_of::<cudaMemset3D_params>() == 64);
    assert!(offset_of!(cudaMemset3D_params, value) == 32 && offset_of!(cudaMemset3D_params, extent) == 40);
    assert!(size_of::<cudaMemset3DAsync_params>() == 72 && offset_of!(cudaMemset3DAsync_params, stream) == 64);
};
