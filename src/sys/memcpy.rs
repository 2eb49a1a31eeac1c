//! The parameter structures CUPTI hands to the driver and runtime callbacks of linear memcpys
//! (`CUpti_CallbackData::functionParams`): the calls whose size is one number (or, for
//! `cudaMemcpyBatchAsync`, an array of them).
//!
//! Declared by hand, as [`super::memset`]'s are, from `generated_cuda_meta.h` and
//! `generated_cuda_runtime_api_meta.h` of CUDA 13.0. The driver's plain, `_v2`, `_ptds` and
//! `_ptsz` variants of a shape have one layout; so have the runtime's `_v3020`, `_ptds_v7000`
//! and `_ptsz_v7000`. Sizes and offsets are checked at compile time (LP64).

use std::os::raw::c_void;

/// `cuMemcpy_params`, `cuMemcpyHtoD_v2_params`, `cuMemcpyDtoH_v2_params`,
/// `cuMemcpyDtoD_v2_params` (and their `_ptds`): two addresses (device or host), then bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemcpy_params {
    /// Destination (`CUdeviceptr` or a host pointer).
    pub dst: u64,
    /// Source (`CUdeviceptr` or a host pointer).
    pub src: u64,
    /// Bytes.
    pub ByteCount: usize,
}

/// `cuMemcpyAsync_params`, `cuMemcpyHtoDAsync_v2_params`, `cuMemcpyDtoHAsync_v2_params`,
/// `cuMemcpyDtoDAsync_v2_params` (and their `_ptsz`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemcpyAsync_params {
    /// Destination.
    pub dst: u64,
    /// Source.
    pub src: u64,
    /// Bytes.
    pub ByteCount: usize,
    /// The stream (`CUstream`).
    pub hStream: *mut c_void,
}

/// `cuMemcpyPeer_params` (and `_ptds`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemcpyPeer_params {
    /// Destination.
    pub dstDevice: u64,
    /// Destination context.
    pub dstContext: *mut c_void,
    /// Source.
    pub srcDevice: u64,
    /// Source context.
    pub srcContext: *mut c_void,
    /// Bytes.
    pub ByteCount: usize,
}

/// `cuMemcpyPeerAsync_params` (and `_ptsz`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuMemcpyPeerAsync_params {
    /// Destination.
    pub dstDevice: u64,
    /// Destination context.
    pub dstContext: *mut c_void,
    /// Source.
    pub srcDevice: u64,
    /// Source context.
    pub srcContext: *mut c_void,
    /// Bytes.
    pub ByteCount: usize,
    /// The stream.
    pub hStream: *mut c_void,
}

/// `cudaMemcpy_v3020_params` (and `_ptds_v7000`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemcpy_params {
    /// Destination.
    pub dst: *mut c_void,
    /// Source.
    pub src: *const c_void,
    /// Bytes.
    pub count: usize,
    /// `enum cudaMemcpyKind`: 0 host to host, 1 host to device, 2 device to host, 3 device
    /// to device, 4 inferred from the pointers.
    pub kind: i32,
}

/// `cudaMemcpyAsync_v3020_params` (and `_ptsz_v7000`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemcpyAsync_params {
    /// Destination.
    pub dst: *mut c_void,
    /// Source.
    pub src: *const c_void,
    /// Bytes.
    pub count: usize,
    /// `enum cudaMemcpyKind`.
    pub kind: i32,
    /// The stream.
    pub stream: *mut c_void,
}

/// `cudaMemcpyPeer_v4000_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemcpyPeer_params {
    /// Destination.
    pub dst: *mut c_void,
    /// Destination device.
    pub dstDevice: i32,
    /// Source.
    pub src: *const c_void,
    /// Source device.
    pub srcDevice: i32,
    /// Bytes.
    pub count: usize,
}

/// `cudaMemcpyPeerAsync_v4000_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemcpyPeerAsync_params {
    /// Destination.
    pub dst: *mut c_void,
    /// Destination device.
    pub dstDevice: i32,
    /// Source.
    pub src: *const c_void,
    /// Source device.
    pub srcDevice: i32,
    /// Bytes.
    pub count: usize,
    /// The stream.
    pub stream: *mut c_void,
}

/// `cudaMemcpyBatchAsync_v13000_params` (and `_ptsz_v13000`): `count` copies, whose sizes are
/// the program's array `sizes`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemcpyBatchAsync_params {
    /// Destinations.
    pub dsts: *const *mut c_void,
    /// Sources.
    pub srcs: *const *const c_void,
    /// Bytes of each copy.
    pub sizes: *const usize,
    /// Copies.
    pub count: usize,
    /// `struct cudaMemcpyAttributes *`.
    pub attrs: *mut c_void,
    /// Which attributes apply from which copy.
    pub attrsIdxs: *mut usize,
    /// Attributes.
    pub numAttrs: usize,
    /// The stream.
    pub stream: *mut c_void,
}

// Sizes and offsets of the C structures (CUDA 13.0 headers, LP64).
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<cuMemcpy_params>() == 24 && offset_of!(cuMemcpy_params, ByteCount) == 16);
    assert!(size_of::<cuMemcpyAsync_params>() == 32 && offset_of!(cuMemcpyAsync_params, hStream) == 24);
    assert!(size_of::<cuMemcpyPeer_params>() == 40 && offset_of!(cuMemcpyPeer_params, ByteCount) == 32);
    assert!(size_of::<cuMemcpyPeerAsync_params>() == 48 && offset_of!(cuMemcpyPeerAsync_params, hStream) == 40);
    assert!(size_of::<cudaMemcpy_params>() == 32 && offset_of!(cudaMemcpy_params, kind) == 24);
    assert!(size_of::<cudaMemcpyAsync_params>() == 40 && offset_of!(cudaMemcpyAsync_params, stream) == 32);
    assert!(size_of::<cudaMemcpyPeer_params>() == 40 && offset_of!(cudaMemcpyPeer_params, count) == 32);
    assert!(size_of::<cudaMemcpyPeerAsync_params>() == 48 && offset_of!(cudaMemcpyPeerAsync_params, stream) == 40);
    assert!(size_of::<cudaMemcpyBatchAsync_params>() == 64);
    assert!(offset_of!(cudaMemcpyBatchAsync_params, count) == 24);
    assert!(offset_of!(cudaMemcpyBatchAsync_params, stream) == 56);
};
