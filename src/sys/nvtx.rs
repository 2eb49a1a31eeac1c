//! The NVTX parameter structures CUPTI hands to NVTX-domain callbacks.
//!
//! CUPTI's `generated_nvtx_meta.h` declares them, but it includes the `nvtx3` headers,
//! which neither the CUPTI nor the runtime wheel ships, so bindgen cannot read it from the
//! pinned header set. The structures are NVTX's stable ABI (unchanged since NVTX v2: the
//! event attribute layout is versioned by its `version` and `size` fields), so they are
//! declared here by hand, with their sizes and offsets checked at compile time against the
//! C layout (x86-64 and aarch64 Linux, LP64).

use std::os::raw::{c_char, c_void};

/// `nvtxRangePushA_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvtxRangePushA_params {
    /// The range's name.
    pub message: *const c_char,
}

/// `nvtxRangePushW_params` (`wchar_t` is 32-bit UTF-32 on Linux).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvtxRangePushW_params {
    /// The range's name.
    pub message: *const i32,
}

/// `nvtxRangePushEx_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvtxRangePushEx_params {
    /// The event attributes, which carry the name.
    pub event_attrib: *const nvtxEventAttributes_t,
}

/// `nvtxEventAttributes_t` (version 2/3 layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvtxEventAttributes_t {
    /// `NVTX_VERSION`.
    pub version: u16,
    /// `sizeof(nvtxEventAttributes_t)` as the caller compiled it.
    pub size: u16,
    /// User category.
    pub category: u32,
    /// `nvtxColorType_t`.
    pub color_type: i32,
    /// ARGB color.
    pub color: u32,
    /// `nvtxPayloadType_t`.
    pub payload_type: i32,
    /// Reserved.
    pub reserved0: i32,
    /// The payload union (8 bytes).
    pub payload: u64,
    /// `nvtxMessageType_t`: which member of `message` is set.
    pub message_type: i32,
    /// The message union: a `const char*`, a `const wchar_t*` or an `nvtxStringHandle_t`.
    pub message: *const c_void,
}

/// `NVTX_MESSAGE_TYPE_ASCII`.
pub const NVTX_MESSAGE_TYPE_ASCII: i32 = 1;
/// `NVTX_MESSAGE_TYPE_UNICODE`.
pub const NVTX_MESSAGE_TYPE_UNICODE: i32 = 2;
/// `NVTX_MESSAGE_TYPE_REGISTERED`.
pub const NVTX_MESSAGE_TYPE_REGISTERED: i32 = 3;

const _: () = {
    assert!(std::mem::size_of::<nvtxRangePushA_params>() == 8);
    assert!(std::mem::size_of::<nvtxRangePushEx_params>() == 8);
    assert!(std::mem::size_of::<nvtxEventAttributes_t>() == 48);
    assert!(std::mem::offset_of!(nvtxEventAttributes_t, category) == 4);
    assert!(std::mem::offset_of!(nvtxEventAttributes_t, payload) == 24);
    assert!(std::mem::offset_of!(nvtxEventAttributes_t, message_type) == 32);
    assert!(std::mem::offset_of!(nvtxEventAttributes_t, message) == 40);
};

/// `NvtxGetExportTableFunc_t`: the function an NVTX instance hands its injection library,
/// which returns the instance's export table for an `NvtxExportTableID` (NULL when unknown).
pub type NvtxGetExportTableFunc = unsafe extern "C" fn(export_table_id: u32) -> *const c_void;

/// `NvtxInitializeInjectionNvtxFunc_t`: the injection library's entry point,
/// `InitializeInjectionNvtx2`. NVTX calls it once per NVTX instance (each library that
/// compiled the NVTX v3 headers in has its own) on that instance's first call; it returns
/// nonzero on success, and on 0 NVTX turns that instance's calls into no-ops.
pub type NvtxInitializeInjectionFunc = unsafe extern "C" fn(get_export_table: Option<NvtxGetExportTableFunc>) -> i32;
