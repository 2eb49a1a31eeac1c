//! The Kineto form of `trace.json` of a session driven through the capture path (a GPU-less
//! [`LaunchHarness`]): runtime launches whose records carry the inner driver call's
//! correlation id, as CUPTI gives it, NCCL kernels on a stream of their own beside the GEMMs,
//! and a runtime memcpy. The launch links HTA follows (`correlation`) must name the outer
//! call on both sides. A session that times API calls gives each call its duration.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CStr;

use serde_json::Value;

use super::harness::{LaunchHarness, TransferApi, DEVICE_ID};
use crate::checked::activity::{ActivityRecord, LaunchClock};
use crate::checked::callback::ApiDomain;
use crate::model::{KernelActivity, TransferActivity, TransferKind};
use crate::report::kineto::{to_kineto_json, DistributedInfo, TraceOptions};
use crate::report::timeline::trace_check::{check_trace_json, CheckOptions};
use crate::sys::cupti::CUpti_runtime_api_trace_cbid_enum as R;

const GEMM: &CStr = c"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas";
const NCCL: &CStr = c"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

/// A `cudaMemcpyAsync` call, without parameters.
fn memcpy_async() -> TransferApi {
    TransferApi {
        domain: ApiDomain::Runtime,
        cbid: R::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020.0,
        name: c"cudaMemcpyAsync_v3020",
        params: std::ptr::null_mut(),
    }
}

fn kernel(h: &LaunchHarness, id: u32, symbol: &CStr, stream: u32, start_ns: u64, end_ns: u64) -> ActivityRecord {
    ActivityRecord::Kernel(KernelActivity {
        correlation_id: id,
        name: symbol.to_str().expect("UTF-8").into(),
        grid: [66, 16, 1],
        block: [384, 1, 1],
        stream_id: stream,
        context_id: h.context_id(),
        device_id: DEVICE_ID,
        start_ns,
        end_ns,
        ..Default::default()
    })
}

#[test]
fn launch_links_name_the_outer_call_and_nccl_runs_beside_the_gemms() {
    let mut h = LaunchHarness::trace_on_scripted_clock().expect("stand-in session");
    let (mut cpu, mut compute, mut comm) = (1_000_000u64, 1_000_000u64, 1_000_000u64);
    let mut copies = Vec::new();
    let mut outer: BTreeSet<u64> = BTreeSet::new();
    for _ in 0..2 {
        h.set_clock(cpu);
        h.push_range("train_step").unwrap();
        let (id, _) = h.transfer(memcpy_async(), None, 0);
        let start = (cpu + 5_000).max(compute);
        compute = start + 165_300;
        copies.push(TransferActivity {
            correlation_id: id,
            kind: TransferKind::MemcpyHtoD,
            bytes: 4 << 20,
            start_ns: start,
            end_ns: compute,
            stream_id: 7,
            context_id: h.context_id(),
            device_id: DEVICE_ID,
            graph_id: 0,
            graph_node_id: 0,
        });
        h.set_clock(cpu + 2_000);
        h.push_range("backward").unwrap();
        let mut records = Vec::new();
        for _ in 0..2 {
            cpu += 6_000;
            LaunchClock::set_scripted(cpu);
            // A runtime launch: its record carries the inner cuLaunchKernel's id.
            let gemm = h.launch_kernel(true, GEMM);
            outer.insert(gemm.into());
            let start = (cpu + 4_000).max(compute);
            compute = start + 176_800;
            records.push(kernel(&h, gemm + 1, GEMM, 7, start, compute));
            cpu += 6_000;
            LaunchClock::set_scripted(cpu);
            let reduce = h.launch_kernel(true, NCCL);
            outer.insert(reduce.into());
            let start = (cpu + 4_000).max(comm).max(compute);
            comm = start + 243_900;
            records.push(kernel(&h, reduce + 1, NCCL, 13, start, comm));
        }
        h.set_clock(cpu + 1_000);
        h.pop_range().unwrap();
        cpu = compute.max(comm) + 8_700;
        h.set_clock(cpu);
        h.pop_range().unwrap();
        h.deliver(records);
    }
    h.transfer_activity(copies);
    let report = h.report();
    assert_eq!(report.kernels.len(), 8);
    assert!(report.kernels.iter().all(|k| k.status == crate::analysis::correlate::KernelStatus::Ok));

    let options = TraceOptions::kineto(
        Some(4242),
        Some(DistributedInfo { rank: 1, world_size: Some(2), local_rank: Some(1), rank_variable: None }),
    );
    let text = to_kineto_json(&report.to_kineto_trace(&options)).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:?}", check.violations);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let of = |cat: &str| events.iter().filter(|e| e["cat"] == cat).collect::<Vec<_>>();
    let launches: HashMap<u64, &Value> =
        of("cuda_runtime").into_iter().map(|r| (r["args"]["correlation"].as_u64().unwrap(), r)).collect();
    let kernels = of("kernel");
    assert_eq!((kernels.len(), launches.len()), (8, 8));
    // The outer cudaLaunchKernel's ids, not the inner driver calls' that the records carry.
    let linked: BTreeSet<u64> = kernels.iter().map(|k| k["args"]["correlation"].as_u64().unwrap()).collect();
    assert_eq!(linked, outer);
    assert_eq!(launches.keys().copied().collect::<BTreeSet<u64>>(), outer);
    for k in &kernels {
        let launch = launches[&k["args"]["correlation"].as_u64().unwrap()];
        assert_eq!((launch["name"].as_str(), launch["cat"].as_str()), (Some("cudaLaunchKernel"), Some("cuda_runtime")));
        // This session does not time API calls: the launch is the instant it was stamped.
        assert_eq!(launch["dur"], 0.0);
        assert_eq!(launch["pid"], 4242);
        assert!(launch["ts"].as_f64() < k["ts"].as_f64());
        assert_eq!(launch["ts"], k["args"]["launch_ts"]);
    }
    let nccl: Vec<_> = kernels.iter().filter(|k| k["args"]["stream"] == 13).collect();
    assert_eq!(nccl.len(), 4);
    assert!(nccl.iter().all(|k| k["name"].as_str().unwrap().starts_with("ncclDevKernel_AllReduce")));
    // The first all-reduce of each step runs beside the step's second GEMM.
    let span = |e: &Value| (e["ts"].as_f64().unwrap(), e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap());
    let beside = nccl
        .iter()
        .filter(|n| kernels.iter().any(|k| k["args"]["stream"] == 7 && span(k).0 < span(n).1 && span(k).1 > span(n).0));
    assert_eq!(beside.count(), 2);
    let copies = of("gpu_memcpy");
    assert_eq!(copies.len(), 2);
    assert!(copies.iter().all(|c| c["name"] == "Memcpy HtoD" && c["args"]["api_name"] == "cudaMemcpyAsync_v3020"));
    assert_eq!(trace["distributedInfo"]["rank"], 1);
    // The four ranges, and the two train_step instances as PyTorch's profiler steps.
    let annotations: Vec<&str> = of("user_annotation").iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(annotations.len(), 6, "{annotations:?}");
    assert_eq!(annotations.iter().filter(|n| n.starts_with("ProfilerStep#")).count(), 2, "{annotations:?}");
    assert_eq!(trace["otherData"]["steps"]["range"], "train_step");
}

/// One session's Kineto trace: a runtime launch, a memcpy and a driver launch inside a range,
/// each call returning 2.5 µs after it was made when `timed`. Returns the trace and the ids
/// (runtime launch, memcpy, driver launch).
fn calls_in_a_range(timed: bool) -> (crate::report::Report, Value, [u32; 3]) {
    let mut h = if timed { LaunchHarness::trace_timing_calls(2_500) } else { LaunchHarness::trace_on_scripted_clock() }
        .expect("stand-in session");
    h.set_clock(900_000);
    h.push_range("train_step").unwrap();
    LaunchClock::set_scripted(1_000_000);
    let gemm = h.launch_kernel(true, GEMM);
    LaunchClock::set_scripted(1_010_000);
    let (copy, _) = h.transfer(memcpy_async(), None, 0);
    LaunchClock::set_scripted(1_020_000);
    let reduce = h.launch_kernel(false, NCCL);
    h.set_clock(1_100_000);
    h.pop_range().unwrap();
    h.deliver(vec![
        kernel(&h, gemm + 1, GEMM, 7, 1_005_000, 1_200_000),
        kernel(&h, reduce, NCCL, 13, 1_030_000, 1_300_000),
    ]);
    h.transfer_activity(vec![TransferActivity {
        correlation_id: copy,
        kind: TransferKind::MemcpyHtoD,
        bytes: 4096,
        start_ns: 1_200_000,
        end_ns: 1_201_000,
        stream_id: 7,
        context_id: h.context_id(),
        device_id: DEVICE_ID,
        graph_id: 0,
        graph_node_id: 0,
    }]);
    let report = h.report();
    let text = to_kineto_json(&report.to_kineto_trace(&TraceOptions::kineto(Some(4242), None))).unwrap();
    let check = check_trace_json(&text, &CheckOptions::default());
    assert!(check.is_ok(), "{:?}", check.violations);
    (report, serde_json::from_str(&text).unwrap(), [gemm, copy, reduce])
}

#[test]
fn a_session_timing_api_calls_gives_each_call_its_name_and_duration() {
    let (report, trace, [gemm, copy, reduce]) = calls_in_a_range(true);
    let row = report.kernels.iter().find(|k| k.correlation_id == gemm).unwrap();
    assert_eq!(
        (row.launch_ns, row.launch_end_ns, row.api_name.as_deref()),
        (Some(1_000_000), Some(1_002_500), Some("cudaLaunchKernel"))
    );
    let t = &report.transfers[0];
    assert_eq!((t.correlation_id, t.call_ns, t.call_end_ns), (copy, Some(1_010_000), Some(1_012_500)));
    let events = trace["traceEvents"].as_array().unwrap();
    let call = |id: u32| {
        events
            .iter()
            .find(|e| {
                matches!(e["cat"].as_str(), Some("cuda_runtime" | "cuda_driver")) && e["args"]["correlation"] == id
            })
            .unwrap_or_else(|| panic!("no call event of {id}"))
    };
    // (name, category, duration µs, start µs from the range's push at 900 001 ns).
    let seen = |id| {
        let e = call(id);
        (e["name"].as_str().unwrap(), e["cat"].as_str().unwrap(), e["dur"].as_f64().unwrap(), e["ts"].as_f64().unwrap())
    };
    assert_eq!(seen(gemm), ("cudaLaunchKernel", "cuda_runtime", 2.5, 99.999));
    assert_eq!(
        seen(copy),
        ("cudaMemcpyAsync", "cuda_runtime", 2.5, 109.999),
        "CUPTI's _v3020 dropped, as Kineto names it"
    );
    assert_eq!(seen(reduce), ("cuLaunchKernel", "cuda_driver", 2.5, 119.999));
    // The memcpy call flows to its copy, as a launch to its kernel.
    let flows = |ph: &str| events.iter().filter(|e| e["ph"] == ph && e["id"] == copy).count();
    assert_eq!((flows("s"), flows("f")), (1, 1));
    assert!(events.iter().any(|e| e["cat"] == "gpu_memcpy" && e["args"]["correlation"] == copy));
}

#[test]
fn a_session_that_does_not_time_api_calls_has_instants_and_no_memcpy_calls() {
    let (report, trace, [gemm, copy, _]) = calls_in_a_range(false);
    let row = report.kernels.iter().find(|k| k.correlation_id == gemm).unwrap();
    assert_eq!((row.launch_ns, row.launch_end_ns), (Some(1_000_000), None));
    assert_eq!((report.transfers[0].call_ns, report.transfers[0].call_end_ns), (None, None));
    let events = trace["traceEvents"].as_array().unwrap();
    let calls: Vec<&Value> =
        events.iter().filter(|e| e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver").collect();
    assert_eq!(calls.len(), 2, "the two launches; the memcpy's call has no stamp");
    assert!(calls.iter().all(|c| c["dur"] == 0.0 && c["args"]["correlation"] != copy));
    // One train_step: no repeated range, so no steps, and the note says so.
    assert!(events.iter().all(|e| !e["name"].as_str().unwrap_or("").starts_with("ProfilerStep#")));
    assert!(trace["otherData"]["note"].as_str().unwrap().contains("no ProfilerStep#N events"));
}
