//! The capture path of memcpys and memsets, driven through CUPTI's callback trampoline with
//! the parameter structures CUDA passes (a GPU-less [`LaunchHarness`]), at the scale of
//! llm.c's GPT-2 trainer: memsets of 1–100 MB, runtime calls nesting a driver call,
//! driver-direct calls, 2D memsets.

use std::ffi::CStr;
use std::os::raw::c_void;

use super::harness::{LaunchHarness, TransferApi, DEVICE_ID};
use crate::analysis::correlate::{TransferStatus, TransferTiming};
use crate::checked::callback::ApiDomain;
use crate::model::session::ROOT_PATH;
use crate::model::{ProfilingMode, TransferActivity, TransferKind};
use crate::sys::cupti::{CUpti_driver_api_trace_cbid_enum as D, CUpti_runtime_api_trace_cbid_enum as R};
use crate::sys::memset::*;

const MB: usize = 1 << 20;

fn driver<P>(cbid: D, name: &'static CStr, params: &mut P) -> TransferApi {
    TransferApi { domain: ApiDomain::Driver, cbid: cbid.0, name, params: (params as *mut P).cast::<c_void>() }
}

fn runtime<P>(cbid: R, name: &'static CStr, params: &mut P) -> TransferApi {
    TransferApi { domain: ApiDomain::Runtime, cbid: cbid.0, name, params: (params as *mut P).cast::<c_void>() }
}

fn stream() -> *mut c_void {
    0x5555_0000_1000usize as *mut c_void
}

/// A memcpy activity record on stream 7 of the harness's device.
fn copy_record(correlation_id: u32, kind: TransferKind, bytes: u64, start_ns: u64, end_ns: u64) -> TransferActivity {
    TransferActivity {
        correlation_id,
        kind,
        bytes,
        start_ns,
        end_ns,
        stream_id: 7,
        context_id: 1,
        device_id: DEVICE_ID,
        graph_id: 0,
        graph_node_id: 0,
    }
}

/// One training step's transfers under kernel replay: a batch copy (timed by its activity
/// record) and memsets of every shape (no activity: kernel replay records none).
#[test]
fn kernel_replay_memsets_are_rows_with_their_bytes_and_no_times() {
    let mut h = LaunchHarness::new(ProfilingMode::KernelReplay).expect("stand-in session");
    h.push_range("train step").expect("push");

    let mut copy = [0u8; 64];
    let (batch, _) = h.transfer(
        driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, c"cuMemcpyHtoDAsync_v2", &mut copy),
        None,
        0,
    );
    h.transfer_activity(vec![copy_record(batch, TransferKind::MemcpyHtoD, 4 * MB as u64, 1_000_000, 1_400_000)]);

    // cudaMemset(grads, 0, 100 MB): the runtime call nests cuMemsetD8_v2.
    let mut grads = cudaMemset_params { devPtr: stream(), value: 0, count: 100 * MB };
    let mut grads_d8 = cuMemsetD_v2_params::<u8> { dstDevice: 0x7f00_0000_0000, value: 0, N: 100 * MB };
    let (zero_grads, inner) = h.transfer(
        runtime(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, c"cudaMemset_v3020", &mut grads),
        Some(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, c"cuMemsetD8_v2", &mut grads_d8)),
        0,
    );
    assert!(inner.is_some());
    // cudaMemsetAsync of 2.4 MB on a stream, nesting cuMemsetD8Async.
    let mut acts = cudaMemsetAsync_params { devPtr: stream(), value: 0, count: 2_457_600, stream: stream() };
    let mut acts_d8 = cuMemsetDAsync_params::<u8> { dstDevice: 1 << 40, value: 0, N: 2_457_600, hStream: stream() };
    h.transfer(
        runtime(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, c"cudaMemsetAsync_v3020", &mut acts),
        Some(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, c"cuMemsetD8Async", &mut acts_d8)),
        0,
    );
    // Driver-direct: 1.5 M floats set to 0 with cuMemsetD32Async.
    let mut floats = cuMemsetDAsync_params::<u32> { dstDevice: 1 << 41, value: 0, N: 1_572_864, hStream: stream() };
    h.transfer(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, c"cuMemsetD32Async", &mut floats), None, 0);
    // 2D: 768 rows of 1024 halves (pitch 2560 B), and cudaMemset2D of 512 rows of 6000 B.
    let mut halves =
        cuMemsetD2D_v2_params::<u16> { dstDevice: 1 << 42, dstPitch: 2560, value: 0, Width: 1024, Height: 768 };
    h.transfer(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2, c"cuMemsetD2D16_v2", &mut halves), None, 0);
    let mut rows = cudaMemset2D_params { devPtr: stream(), pitch: 8192, value: 0, width: 6000, height: 512 };
    let mut rows_d8 =
        cuMemsetD2D_v2_params::<u8> { dstDevice: 1 << 43, dstPitch: 8192, value: 0, Width: 6000, Height: 512 };
    h.transfer(
        runtime(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020, c"cudaMemset2D_v3020", &mut rows),
        Some(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2, c"cuMemsetD2D8_v2", &mut rows_d8)),
        0,
    );
    // A memset that fails (cudaErrorInvalidValue) sets nothing: no row.
    let mut bad = cudaMemsetAsync_params { devPtr: stream(), value: 0, count: 64, stream: stream() };
    h.transfer(runtime(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, c"cudaMemsetAsync_v3020", &mut bad), None, 1);
    h.pop_range().expect("pop");
    // Outside any range.
    let mut tail = cuMemsetD_v2_params::<u8> { dstDevice: 1 << 44, value: 0, N: MB };
    h.transfer(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, c"cuMemsetD8_v2", &mut tail), None, 0);

    let report = h.report();
    assert!(report.meta.warnings.is_empty(), "{:?}", report.meta.warnings);
    let memsets: Vec<_> = report.transfers.iter().filter(|t| t.kind == TransferKind::Memset).collect();
    let got: Vec<(&str, u64)> = memsets.iter().map(|t| (t.api_name.as_deref().unwrap_or(""), t.bytes)).collect();
    assert_eq!(
        got,
        [
            ("cudaMemset_v3020", 104_857_600),
            ("cudaMemsetAsync_v3020", 2_457_600),
            ("cuMemsetD32Async", 6_291_456),
            ("cuMemsetD2D16_v2", 1_572_864),
            ("cudaMemset2D_v3020", 3_072_000),
            ("cuMemsetD8_v2", 1_048_576),
        ],
        "one row per outermost call, none for the nested driver calls or the failed one"
    );
    for t in &memsets {
        assert_eq!((t.start_ns, t.end_ns, t.duration_ns, t.gbps(), t.stream_id), (None, None, None, None, None));
        assert_eq!((t.timing, t.status, t.device_id), (TransferTiming::ApiCall, TransferStatus::Ok, Some(DEVICE_ID)));
    }
    assert_eq!(memsets[0].correlation_id, zero_grads);
    assert_eq!(memsets[0].range_path, "train step");
    assert_eq!(memsets[5].range_path, ROOT_PATH);
    let copy_row = &report.transfers[0];
    assert_eq!(
        (copy_row.correlation_id, copy_row.timing, copy_row.duration_ns),
        (batch, TransferTiming::Activity, Some(400_000))
    );

    let counts = &report.meta.counts;
    assert_eq!((counts.transfer_rows, counts.untimed_transfers, counts.transfer_calls_without_activity), (7, 6, 0));
    let summary = report.summary().to_string();
    assert!(
        summary.contains(
            "transfers: 7 | memcpy 4194304 B | memset 119300096 B (6 not timed) | 400.00 us over 1 timed transfer(s) \
             | 10.49 GB/s"
        ),
        "{summary}"
    );
    assert!(summary.contains("warnings: 0"), "{summary}");

    // The range's sums hold every byte; time and bandwidth are the copy's.
    let step = report.ranges.iter().find(|r| r.path == "train step").expect("step row");
    assert_eq!((step.transfer_count, step.untimed_transfer_count), (6, 5));
    assert_eq!((step.memcpy_bytes, step.memset_bytes), (4_194_304, 118_251_520));
    assert_eq!((step.transfer_time_ns, step.transfer_gbps), (Some(400_000), Some(4_194_304.0 / 400_000.0)));
    let root = report.ranges.iter().find(|r| r.range_id.is_none()).expect("root row");
    assert_eq!((root.transfer_count, root.memset_bytes, root.untimed_transfer_count), (1, 1_048_576, 1));
    assert_eq!((root.transfer_time_ns, root.transfer_gbps), (None, None), "nothing of the root row was timed");

    // transfers.csv: the bytes, and blank times and stream.
    let mut csv = Vec::new();
    report.write_transfers_csv_to(&mut csv).expect("csv");
    let csv = String::from_utf8(csv).expect("utf8");
    let line = format!(r#"{zero_grads},"memset",104857600,"","","","","api_call","",0,0,0,"train step","#);
    assert!(csv.lines().any(|l| l.starts_with(&line)), "{line} in\n{csv}");
    assert!(csv.contains("# untimed_transfers: 6 "), "{csv}");

    // No memset is drawn on the timeline; the trace counts them.
    let trace = report.to_chrome_trace();
    let drawn: Vec<&str> =
        trace.trace_events.iter().filter(|e| e.cat == Some("transfer")).map(|e| e.name.as_str()).collect();
    assert_eq!(drawn, ["memcpy_htod"]);
    assert_eq!(trace.other_data.skipped.untimed_transfers, 6);
}

/// Trace mode records memset activity: the memset is one row, timed by its record (whose
/// correlation id is the nested driver call's), not a second row from its API call.
#[test]
fn a_timed_memset_is_one_row_in_trace_mode() {
    let mut h = LaunchHarness::trace().expect("stand-in session");
    h.push_range("zero grads").expect("push");
    let mut grads = cudaMemset_params { devPtr: stream(), value: 0, count: 100 * MB };
    let mut d8 = cuMemsetD_v2_params::<u8> { dstDevice: 0x7f00_0000_0000, value: 0, N: 100 * MB };
    let (outer, inner) = h.transfer(
        runtime(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, c"cudaMemset_v3020", &mut grads),
        Some(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, c"cuMemsetD8_v2", &mut d8)),
        0,
    );
    let inner = inner.expect("nested call");
    h.transfer_activity(vec![copy_record(inner, TransferKind::Memset, 104_857_600, 5_000_000, 5_040_000)]);
    h.pop_range().expect("pop");

    let report = h.report();
    assert!(report.meta.warnings.is_empty(), "{:?}", report.meta.warnings);
    assert_eq!(report.transfers.len(), 1);
    let t = &report.transfers[0];
    assert_eq!(
        (t.correlation_id, t.api_name.as_deref(), t.range_path.as_str()),
        (outer, Some("cudaMemset_v3020"), "zero grads")
    );
    assert_eq!((t.timing, t.duration_ns, t.stream_id), (TransferTiming::Activity, Some(40_000), Some(7)));
    assert_eq!(report.meta.counts.untimed_transfers, 0);
    let summary = report.summary().to_string();
    assert!(summary.contains("transfers: 1 | memcpy 0 B | memset 104857600 B | 40.00 us | 2621.44 GB/s"), "{summary}");
}

/// A memset under kernel replay whose activity record arrives after all (the process's
/// activity kinds came from another session): the record times it, once.
#[test]
fn a_kernel_replay_memset_with_a_record_is_not_duplicated() {
    let mut h = LaunchHarness::new(ProfilingMode::KernelReplay).expect("stand-in session");
    let mut p = cuMemsetDAsync_params::<u32> { dstDevice: 1 << 40, value: 0, N: 4 * MB, hStream: stream() };
    let (id, _) = h.transfer(driver(D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, c"cuMemsetD32Async", &mut p), None, 0);
    h.transfer_activity(vec![copy_record(id, TransferKind::Memset, 16 * MB as u64, 100, 2_100)]);
    let report = h.report();
    assert_eq!(report.transfers.len(), 1);
    assert_eq!((report.transfers[0].timing, report.transfers[0].bytes), (TransferTiming::Activity, 16 * MB as u64));
    assert_eq!((report.meta.counts.untimed_transfers, report.meta.counts.transfer_calls_without_activity), (0, 0));
    assert!(report.meta.warnings.is_empty(), "{:?}", report.meta.warnings);
}

/// A memset entry point whose parameters gmprof cannot read (NULL here) is the one memset
/// left out of transfers.csv, and the report says so.
#[test]
fn an_unreadable_kernel_replay_memset_is_counted_in_a_warning() {
    let mut h = LaunchHarness::new(ProfilingMode::KernelReplay).expect("stand-in session");
    let api = TransferApi {
        domain: ApiDomain::Driver,
        cbid: D::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2.0,
        name: c"cuMemsetD8_v2",
        params: std::ptr::null_mut(),
    };
    h.transfer(api, None, 0);
    let report = h.report();
    assert!(report.transfers.is_empty());
    assert_eq!(report.meta.warnings.len(), 1, "{:?}", report.meta.warnings);
    assert!(
        report.meta.warnings[0].starts_with("1 memset call(s) are not in transfers.csv"),
        "{:?}",
        report.meta.warnings
    );
}
