//! A memset call's size, read from its callback parameters.
//!
//! Under kernel replay CUPTI records no memset activity (see
//! [`ActivityKinds::KernelsAndMemcpy`](super::activity::ActivityKinds::KernelsAndMemcpy)),
//! so the API call is all gmprof sees of a memset: its parameters say how many bytes it
//! sets, but not when it ran. Every memset entry point of the driver and runtime APIs is
//! read here, from the structures of [`crate::sys::memset`].

use std::mem::size_of;
use std::os::raw::c_void;

use super::callback::ApiDomain;
use crate::sys::cupti::{
    CUpti_driver_api_trace_cbid_enum as DriverCbid, CUpti_runtime_api_trace_cbid_enum as RuntimeCbid,
};
use crate::sys::memset::*;

/// What a memset call's parameters say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemsetCall {
    /// Bytes set: elements × element size (`cuMemsetD8/16/32`), width × height × element
    /// size (`cuMemsetD2D8/16/32`, width in elements), bytes (`cudaMemset`), width × height
    /// (`cudaMemset2D`, width in bytes) or width × height × depth (`cudaMemset3D`).
    pub bytes: u64,
}

/// Whether an API function (by CUPTI's name) is a memset: `cuMemset*`, `cu64Memset*`,
/// `cudaMemset*`. The graph APIs that add or edit memset nodes (`cuGraphAddMemsetNode`, ...)
/// are not: they set nothing.
pub fn is_memset(function_name: &str) -> bool {
    ["cuMemset", "cu64Memset", "cudaMemset"].iter().any(|p| function_name.starts_with(p))
}

/// Reads the bytes of one parameter structure (see [`read`] for the safety contract).
type Reader = unsafe fn(*const c_void) -> u64;

/// Width × height (× depth) × element size, saturating: a size that overflows u64 was
/// never set, and a saturated number is visibly wrong rather than wrapped into a plausible one.
fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |a, b| a.saturating_mul(*b))
}

fn element<V>() -> u64 {
    size_of::<V>() as u64
}

/// # Safety
/// `p` points to a `cuMemsetD*_params` (legacy 32-bit) of `V` elements.
unsafe fn driver_v1<V: Copy>(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure; it is read whole, as CUPTI wrote it.
    let p = unsafe { p.cast::<cuMemsetD_v1_params<V>>().read() };
    product(&[u64::from(p.N), element::<V>()])
}

/// # Safety
/// `p` points to a `cuMemsetD*_v2_params` (or `_v2_ptds`) of `V` elements.
unsafe fn driver_v2<V: Copy>(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemsetD_v2_params<V>>().read() };
    product(&[p.N as u64, element::<V>()])
}

/// # Safety
/// `p` points to a `cuMemsetD*Async_params` (or `_ptsz`) of `V` elements.
unsafe fn driver_async<V: Copy>(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemsetDAsync_params<V>>().read() };
    product(&[p.N as u64, element::<V>()])
}

/// # Safety
/// `p` points to a `cuMemsetD2D*_params` (legacy 32-bit) of `V` elements.
unsafe fn driver_2d_v1<V: Copy>(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemsetD2D_v1_params<V>>().read() };
    product(&[u64::from(p.Width), u64::from(p.Height), element::<V>()])
}

/// # Safety
/// `p` points to a `cuMemsetD2D*_v2_params` (or `_v2_ptds`) of `V` elements.
unsafe fn driver_2d_v2<V: Copy>(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemsetD2D_v2_params<V>>().read() };
    product(&[p.Width as u64, p.Height as u64, element::<V>()])
}

/// # Safety
/// `p` points to a `cuMemsetD2D*Async_params` (or `_ptsz`) of `V` elements.
unsafe fn driver_2d_async<V: Copy>(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemsetD2DAsync_params<V>>().read() };
    product(&[p.Width as u64, p.Height as u64, element::<V>()])
}

/// # Safety
/// `p` points to a `cudaMemset_v3020_params` (or `_ptds_v7000`).
unsafe fn runtime_1d(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    unsafe { p.cast::<cudaMemset_params>().read() }.count as u64
}

/// # Safety
/// `p` points to a `cudaMemsetAsync_v3020_params` (or `_ptsz_v7000`).
unsafe fn runtime_1d_async(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    unsafe { p.cast::<cudaMemsetAsync_params>().read() }.count as u64
}

/// # Safety
/// `p` points to a `cudaMemset2D_v3020_params` (or `_ptds_v7000`).
unsafe fn runtime_2d(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cudaMemset2D_params>().read() };
    product(&[p.width as u64, p.height as u64])
}

/// # Safety
/// `p` points to a `cudaMemset2DAsync_v3020_params` (or `_ptsz_v7000`).
unsafe fn runtime_2d_async(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cudaMemset2DAsync_params>().read() };
    product(&[p.width as u64, p.height as u64])
}

/// # Safety
/// `p` points to a `cudaMemset3D_v3020_params` (or `_ptds_v7000`).
unsafe fn runtime_3d(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let e = unsafe { p.cast::<cudaMemset3D_params>().read() }.extent;
    product(&[e.width as u64, e.height as u64, e.depth as u64])
}

/// # Safety
/// `p` points to a `cudaMemset3DAsync_v3020_params` (or `_ptsz_v7000`).
unsafe fn runtime_3d_async(p: *const c_void) -> u64 {
    // SAFETY: the caller guarantees the structure.
    let e = unsafe { p.cast::<cudaMemset3DAsync_params>().read() }.extent;
    product(&[e.width as u64, e.height as u64, e.depth as u64])
}

/// The reader of a driver memset callback's parameters.
fn driver_reader(cbid: u32) -> Option<Reader> {
    use DriverCbid as C;
    let reader: Reader = match C(cbid) {
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8 => driver_v1::<u8>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16 => driver_v1::<u16>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32 => driver_v1::<u32>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds => driver_v2::<u8>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds => driver_v2::<u16>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds => driver_v2::<u32>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz => {
            driver_async::<u8>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz => {
            driver_async::<u16>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz => {
            driver_async::<u32>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8 => driver_2d_v1::<u8>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16 => driver_2d_v1::<u16>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32 => driver_2d_v1::<u32>,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds => {
            driver_2d_v2::<u8>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds => {
            driver_2d_v2::<u16>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds => {
            driver_2d_v2::<u32>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz => {
            driver_2d_async::<u8>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz => {
            driver_2d_async::<u16>
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async | C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz => {
            driver_2d_async::<u32>
        }
        _ => return None,
    };
    Some(reader)
}

/// The reader of a runtime memset callback's parameters.
fn runtime_reader(cbid: u32) -> Option<Reader> {
    use RuntimeCbid as C;
    let reader: Reader = match C(cbid) {
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020 | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000 => runtime_1d,
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020 | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000 => {
            runtime_1d_async
        }
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020 | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000 => {
            runtime_2d
        }
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020
        | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000 => runtime_2d_async,
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020 | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000 => {
            runtime_3d
        }
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020
        | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000 => runtime_3d_async,
        _ => return None,
    };
    Some(reader)
}

/// The size of memset callback `cbid` of `domain`; `None` for any other callback, or for
/// NULL parameters.
///
/// # Safety
/// `params` is NULL or the `functionParams` CUPTI passed for this callback, valid for the
/// duration of the callback.
pub unsafe fn read(domain: ApiDomain, cbid: u32, params: *const c_void) -> Option<MemsetCall> {
    if params.is_null() {
        return None;
    }
    let reader = match domain {
        ApiDomain::Driver => driver_reader(cbid)?,
        ApiDomain::Runtime => runtime_reader(cbid)?,
    };
    // SAFETY: `reader` is the one for callback `cbid` of `domain`, whose parameters CUPTI
    // passes as the structure it reads (see crate::sys::memset for the layouts).
    Some(MemsetCall { bytes: unsafe { reader(params) } })
}

/// Every memset callback id of `domain` that [`read`] reads, ascending.
#[cfg(any(test, feature = "bench-internals"))]
pub(crate) fn cbids(domain: ApiDomain) -> impl Iterator<Item = u32> {
    let (size, reader): (u32, fn(u32) -> Option<Reader>) = match domain {
        ApiDomain::Driver => (DriverCbid::CUPTI_DRIVER_TRACE_CBID_SIZE.0, driver_reader),
        ApiDomain::Runtime => (RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_SIZE.0, runtime_reader),
    };
    (0..size).filter(move |c| reader(*c).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    const MB: usize = 1 << 20;

    fn driver<P>(cbid: DriverCbid, params: &P) -> Option<u64> {
        // SAFETY: `params` is a live structure of the layout callback `cbid` passes.
        unsafe { read(ApiDomain::Driver, cbid.0, (params as *const P).cast()) }.map(|m| m.bytes)
    }

    fn runtime<P>(cbid: RuntimeCbid, params: &P) -> Option<u64> {
        // SAFETY: as above.
        unsafe { read(ApiDomain::Runtime, cbid.0, (params as *const P).cast()) }.map(|m| m.bytes)
    }

    #[test]
    fn driver_memsets_are_elements_times_element_size() {
        type C = DriverCbid;
        let d8 = cuMemsetD_v2_params::<u8> { dstDevice: 0x7f00_0000_0000, value: 0, N: 96 * MB };
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, &d8), Some(96 * MB as u64));
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds, &d8), Some(96 * MB as u64));
        let d16 = cuMemsetD_v2_params::<u16> { dstDevice: 1 << 40, value: 0x3c00, N: 3 * MB };
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2, &d16), Some(6 * MB as u64));
        let d32 =
            cuMemsetDAsync_params::<u32> { dstDevice: 1 << 40, value: 0, N: 1_572_864, hStream: 0x5000 as *mut _ };
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, &d32), Some(6_291_456));
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz, &d32), Some(6_291_456));
        let legacy = cuMemsetD_v1_params::<u32> { dstDevice: 0x1000, value: 7, N: 1000 };
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32, &legacy), Some(4000));
    }

    #[test]
    fn driver_2d_memsets_are_width_times_height_times_element_size() {
        type C = DriverCbid;
        // 768 rows of 1024 16-bit elements, pitch 2560 bytes: the pitch padding is not set.
        let p = cuMemsetD2D_v2_params::<u16> { dstDevice: 1 << 40, dstPitch: 2560, value: 0, Width: 1024, Height: 768 };
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2, &p), Some(1024 * 768 * 2));
        let a = cuMemsetD2DAsync_params::<u8> {
            dstDevice: 1 << 40,
            dstPitch: 4096,
            value: 0,
            Width: 4000,
            Height: 25,
            hStream: null_mut(),
        };
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz, &a), Some(100_000));
        let legacy = cuMemsetD2D_v1_params::<u32> { dstDevice: 0, dstPitch: 512, value: 0, Width: 100, Height: 3 };
        assert_eq!(driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32, &legacy), Some(1200));
    }

    #[test]
    fn runtime_memsets_are_bytes() {
        type C = RuntimeCbid;
        let one = cudaMemset_params { devPtr: 0x7f00_0000_0000 as *mut _, value: 0, count: 50 * MB };
        assert_eq!(runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, &one), Some(50 * MB as u64));
        let asy = cudaMemsetAsync_params { devPtr: null_mut(), value: 0, count: 2_457_600, stream: 0x10 as *mut _ };
        assert_eq!(runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, &asy), Some(2_457_600));
        assert_eq!(runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000, &asy), Some(2_457_600));
        let two = cudaMemset2D_params { devPtr: null_mut(), pitch: 8192, value: 0, width: 6000, height: 512 };
        assert_eq!(runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020, &two), Some(3_072_000));
        let extent = cudaExtent { width: 1024, height: 64, depth: 16 };
        let pitched = cudaPitchedPtr { ptr: null_mut(), pitch: 1024, xsize: 1024, ysize: 64 };
        let three = cudaMemset3DAsync_params { pitchedDevPtr: pitched, value: 0, extent, stream: null_mut() };
        assert_eq!(runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020, &three), Some(1 << 20));
    }

    #[test]
    fn other_callbacks_and_null_parameters_read_nothing() {
        let d8 = cuMemsetD_v2_params::<u8> { dstDevice: 0, value: 0, N: 10 };
        assert_eq!(driver(DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, &d8), None);
        assert_eq!(driver(DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuGraphAddMemsetNode, &d8), None);
        // SAFETY: NULL parameters are allowed.
        let null =
            unsafe { read(ApiDomain::Driver, DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2.0, std::ptr::null()) };
        assert_eq!(null, None);
        // The same id in the other domain is another function.
        let rt = RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020.0;
        // SAFETY: a driver callback id that is not a memset reads nothing.
        assert_eq!(unsafe { read(ApiDomain::Driver, rt, (&d8 as *const cuMemsetD_v2_params<u8>).cast()) }, None);
    }

    #[test]
    fn sizes_saturate_instead_of_wrapping() {
        let p = cuMemsetD2D_v2_params::<u32> { dstDevice: 0, dstPitch: 0, value: 0, Width: usize::MAX, Height: 3 };
        assert_eq!(driver(DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2, &p), Some(u64::MAX));
    }

    #[test]
    fn every_memset_entry_point_is_read() {
        // 6 shapes × 3 element sizes × (plain, _ptds/_ptsz) minus the 6 legacy ones without a
        // per-thread variant; 6 runtime shapes × 2.
        assert_eq!(cbids(ApiDomain::Driver).count(), 30);
        assert_eq!(cbids(ApiDomain::Runtime).count(), 12);
    }

    #[test]
    fn memset_names() {
        for name in ["cuMemsetD8_v2", "cuMemsetD2D32Async", "cudaMemsetAsync", "cudaMemset3D_v3020", "cu64MemsetD8"] {
            assert!(is_memset(name), "{name}");
        }
        for name in ["cuGraphAddMemsetNode", "cudaGraphMemsetNodeSetParams", "cuMemcpyAsync", "cudaMemcpy"] {
            assert!(!is_memset(name), "{name}");
        }
    }
}
