//! A linear memcpy call's size, direction and stream, read from its callback parameters.
//!
//! gmprof times a copy by its activity record; the call's own parameters say what was asked
//! for, so a call that no record ever times can still be told apart (its bytes, its
//! direction, its stream). The driver's 1D copies (`cuMemcpy*`, `HtoD`, `DtoH`, `DtoD`,
//! `Peer`, each synchronous and async, with their per-thread-stream variants) and the
//! runtime's (`cudaMemcpy`, `cudaMemcpyAsync`, `cudaMemcpyPeer*`, `cudaMemcpyBatchAsync`) are
//! read here, from the structures of [`crate::sys::memcpy`]; 2D, 3D, array and symbol copies
//! are not (their calls are recorded without parameters).

use std::os::raw::c_void;

use super::callback::ApiDomain;
use crate::model::TransferKind;
use crate::sys::cupti::{
    CUpti_driver_api_trace_cbid_enum as DriverCbid, CUpti_runtime_api_trace_cbid_enum as RuntimeCbid,
};
use crate::sys::memcpy::*;

/// What a memcpy call's parameters say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyCall {
    /// The direction, as activity records name it: host to host and "inferred from the
    /// pointers" (`cudaMemcpyDefault`, the driver's unified `cuMemcpy`) are
    /// [`TransferKind::MemcpyOther`].
    pub kind: TransferKind,
    /// The runtime's `cudaMemcpyKind` as the program passed it (0 host to host, 1 host to
    /// device, 2 device to host, 3 device to device, 4 inferred); `None` for driver calls.
    pub cuda_kind: Option<i32>,
    /// Bytes asked for (for a batch, the sum of its copies').
    pub bytes: u64,
    /// Copies the call asks for: 1, or a batch's count.
    pub copies: u64,
    /// The stream handle (`CUstream`/`cudaStream_t`; 0 is the legacy default stream), `None`
    /// for the synchronous calls, which take none.
    pub stream: Option<u64>,
}

/// Batches longer than this are summed only this far (the count stays exact).
const MAX_BATCH_READ: usize = 1 << 16;

/// Reads one parameter structure (see [`read`] for the safety contract).
type Reader = unsafe fn(*const c_void) -> CopyCall;

fn copy(kind: TransferKind, bytes: usize, stream: Option<*mut c_void>) -> CopyCall {
    CopyCall { kind, cuda_kind: None, bytes: bytes as u64, copies: 1, stream: stream.map(|s| s as u64) }
}

/// The direction of a `cudaMemcpyKind`.
pub fn kind_of_cuda_kind(kind: i32) -> TransferKind {
    match kind {
        1 => TransferKind::MemcpyHtoD,
        2 => TransferKind::MemcpyDtoH,
        3 => TransferKind::MemcpyDtoD,
        _ => TransferKind::MemcpyOther,
    }
}

/// # Safety
/// `p` points to a `cuMemcpy*_params` of the three-field shape.
unsafe fn driver_sync(p: *const c_void, kind: TransferKind) -> CopyCall {
    // SAFETY: the caller guarantees the structure; it is read whole, as CUPTI wrote it.
    let p = unsafe { p.cast::<cuMemcpy_params>().read() };
    copy(kind, p.ByteCount, None)
}

/// # Safety
/// `p` points to a `cuMemcpy*Async_params` of the four-field shape.
unsafe fn driver_async(p: *const c_void, kind: TransferKind) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemcpyAsync_params>().read() };
    copy(kind, p.ByteCount, Some(p.hStream))
}

macro_rules! driver_readers {
    ($($name:ident: $shape:ident, $kind:ident;)*) => {
        $(
            /// # Safety
            /// `p` points to the structure of this reader's shape.
            unsafe fn $name(p: *const c_void) -> CopyCall {
                // SAFETY: forwarded from the caller.
                unsafe { $shape(p, TransferKind::$kind) }
            }
        )*
    };
}

driver_readers! {
    unified: driver_sync, MemcpyOther;
    unified_async: driver_async, MemcpyOther;
    htod: driver_sync, MemcpyHtoD;
    htod_async: driver_async, MemcpyHtoD;
    dtoh: driver_sync, MemcpyDtoH;
    dtoh_async: driver_async, MemcpyDtoH;
    dtod: driver_sync, MemcpyDtoD;
    dtod_async: driver_async, MemcpyDtoD;
}

/// # Safety
/// `p` points to a `cuMemcpyPeer_params` (or `_ptds`).
unsafe fn driver_peer(p: *const c_void) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemcpyPeer_params>().read() };
    copy(TransferKind::MemcpyPtoP, p.ByteCount, None)
}

/// # Safety
/// `p` points to a `cuMemcpyPeerAsync_params` (or `_ptsz`).
unsafe fn driver_peer_async(p: *const c_void) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cuMemcpyPeerAsync_params>().read() };
    copy(TransferKind::MemcpyPtoP, p.ByteCount, Some(p.hStream))
}

/// # Safety
/// `p` points to a `cudaMemcpy_v3020_params` (or `_ptds_v7000`).
unsafe fn runtime_sync(p: *const c_void) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cudaMemcpy_params>().read() };
    CopyCall { cuda_kind: Some(p.kind), ..copy(kind_of_cuda_kind(p.kind), p.count, None) }
}

/// # Safety
/// `p` points to a `cudaMemcpyAsync_v3020_params` (or `_ptsz_v7000`).
unsafe fn runtime_async(p: *const c_void) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cudaMemcpyAsync_params>().read() };
    CopyCall { cuda_kind: Some(p.kind), ..copy(kind_of_cuda_kind(p.kind), p.count, Some(p.stream)) }
}

/// # Safety
/// `p` points to a `cudaMemcpyPeer_v4000_params`.
unsafe fn runtime_peer(p: *const c_void) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cudaMemcpyPeer_params>().read() };
    copy(TransferKind::MemcpyPtoP, p.count, None)
}

/// # Safety
/// `p` points to a `cudaMemcpyPeerAsync_v4000_params`.
unsafe fn runtime_peer_async(p: *const c_void) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cudaMemcpyPeerAsync_params>().read() };
    copy(TransferKind::MemcpyPtoP, p.count, Some(p.stream))
}

/// # Safety
/// `p` points to a `cudaMemcpyBatchAsync_v13000_params` (or `_ptsz_v13000`) whose `sizes`
/// is NULL or holds `count` entries, as the runtime requires of the program.
unsafe fn runtime_batch(p: *const c_void) -> CopyCall {
    // SAFETY: the caller guarantees the structure.
    let p = unsafe { p.cast::<cudaMemcpyBatchAsync_params>().read() };
    let bytes = if p.sizes.is_null() {
        0
    } else {
        // SAFETY: `sizes` has `count` entries (the call's contract); at most MAX_BATCH_READ
        // are read.
        let sizes = unsafe { std::slice::from_raw_parts(p.sizes, p.count.min(MAX_BATCH_READ)) };
        sizes.iter().fold(0u64, |a, &s| a.saturating_add(s as u64))
    };
    CopyCall {
        kind: TransferKind::MemcpyOther,
        cuda_kind: None,
        bytes,
        copies: p.count as u64,
        stream: Some(p.stream as u64),
    }
}

/// The reader of a driver memcpy callback's parameters.
fn driver_reader(cbid: u32) -> Option<Reader> {
    use DriverCbid as C;
    let reader: Reader = match C(cbid) {
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpy | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds => unified,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz => unified_async,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds => htod,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz => {
            htod_async
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds => dtoh,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz => {
            dtoh_async
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds => dtod,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2 | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz => {
            dtod_async
        }
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds => driver_peer,
        C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync | C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz => {
            driver_peer_async
        }
        _ => return None,
    };
    Some(reader)
}

/// The reader of a runtime memcpy callback's parameters.
fn runtime_reader(cbid: u32) -> Option<Reader> {
    use RuntimeCbid as C;
    let reader: Reader = match C(cbid) {
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020 | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000 => {
            runtime_sync
        }
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000 => {
            runtime_async
        }
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000 => runtime_peer,
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000 => runtime_peer_async,
        C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000
        | C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000 => runtime_batch,
        _ => return None,
    };
    Some(reader)
}

/// What memcpy callback `cbid` of `domain` asks for; `None` for any other callback (2D, 3D,
/// array and symbol copies included), or for NULL parameters.
///
/// # Safety
/// `params` is NULL or the `functionParams` CUPTI passed for this callback, valid for the
/// duration of the callback (and, for a batch, the program's `sizes` array with it).
pub unsafe fn read(domain: ApiDomain, cbid: u32, params: *const c_void) -> Option<CopyCall> {
    if params.is_null() {
        return None;
    }
    let reader = match domain {
        ApiDomain::Driver => driver_reader(cbid)?,
        ApiDomain::Runtime => runtime_reader(cbid)?,
    };
    // SAFETY: `reader` is the one for callback `cbid` of `domain`, whose parameters CUPTI
    // passes as the structure it reads (see crate::sys::memcpy for the layouts).
    Some(unsafe { reader(params) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    fn driver<P>(cbid: DriverCbid, params: &P) -> Option<CopyCall> {
        // SAFETY: `params` is a live structure of the layout callback `cbid` passes.
        unsafe { read(ApiDomain::Driver, cbid.0, (params as *const P).cast()) }
    }

    fn runtime<P>(cbid: RuntimeCbid, params: &P) -> Option<CopyCall> {
        // SAFETY: as above.
        unsafe { read(ApiDomain::Runtime, cbid.0, (params as *const P).cast()) }
    }

    #[test]
    fn driver_copies_say_their_direction_bytes_and_stream() {
        type C = DriverCbid;
        let p = cuMemcpyAsync_params { dst: 1 << 40, src: 0x5555_0000, ByteCount: 196_608, hStream: 0x77 as *mut _ };
        let c = driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz, &p).unwrap();
        assert_eq!(
            (c.kind, c.bytes, c.copies, c.stream, c.cuda_kind),
            (TransferKind::MemcpyHtoD, 196_608, 1, Some(0x77), None)
        );
        let c = driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, &p).unwrap();
        assert_eq!(c.kind, TransferKind::MemcpyOther);
        let s = cuMemcpy_params { dst: 0x5555_0000, src: 1 << 40, ByteCount: 4 };
        let c = driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, &s).unwrap();
        assert_eq!((c.kind, c.bytes, c.stream), (TransferKind::MemcpyDtoH, 4, None));
        let peer = cuMemcpyPeerAsync_params {
            dstDevice: 1 << 40,
            dstContext: 0x10 as *mut _,
            srcDevice: 2 << 40,
            srcContext: 0x20 as *mut _,
            ByteCount: 1 << 30,
            hStream: null_mut(),
        };
        let c = driver(C::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, &peer).unwrap();
        assert_eq!((c.kind, c.bytes, c.stream), (TransferKind::MemcpyPtoP, 1 << 30, Some(0)));
    }

    #[test]
    fn runtime_copies_keep_the_kind_the_program_passed() {
        type C = RuntimeCbid;
        let p =
            cudaMemcpyAsync_params { dst: null_mut(), src: std::ptr::null(), count: 0, kind: 0, stream: null_mut() };
        let c = runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &p).unwrap();
        assert_eq!((c.kind, c.cuda_kind, c.bytes, c.stream), (TransferKind::MemcpyOther, Some(0), 0, Some(0)));
        let p = cudaMemcpy_params { dst: null_mut(), src: std::ptr::null(), count: 8, kind: 2 };
        let c = runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000, &p).unwrap();
        assert_eq!((c.kind, c.cuda_kind, c.bytes, c.stream), (TransferKind::MemcpyDtoH, Some(2), 8, None));
        let p = cudaMemcpyAsync_params {
            dst: null_mut(),
            src: std::ptr::null(),
            count: 3 << 20,
            kind: 4,
            stream: 0x99 as *mut _,
        };
        let c = runtime(C::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, &p).unwrap();
        assert_eq!((c.kind, c.cuda_kind, c.bytes), (TransferKind::MemcpyOther, Some(4), 3 << 20));
    }

    #[test]
    fn a_batch_sums_its_sizes() {
        let sizes = [1024usize, 4096, 0, 17];
        let p = cudaMemcpyBatchAsync_params {
            dsts: std::ptr::null(),
            srcs: std::ptr::null(),
            sizes: sizes.as_ptr(),
            count: sizes.len(),
            attrs: null_mut(),
            attrsIdxs: null_mut(),
            numAttrs: 0,
            stream: 0x42 as *mut _,
        };
        let c = runtime(RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000, &p).unwrap();
        assert_eq!((c.bytes, c.copies, c.stream), (5137, 4, Some(0x42)));
    }

    #[test]
    fn other_callbacks_and_null_parameters_read_nothing() {
        let p = cuMemcpy_params { dst: 0, src: 0, ByteCount: 10 };
        assert_eq!(driver(DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, &p), None);
        assert_eq!(driver(DriverCbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2, &p), None);
        // SAFETY: NULL parameters are allowed.
        let null = unsafe {
            read(ApiDomain::Runtime, RuntimeCbid::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020.0, std::ptr::null())
        };
        assert_eq!(null, None);
    }
}
