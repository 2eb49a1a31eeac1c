//! The SASS metrics path on recorded data: flushes CUPTI returned on an H100 (driver 580,
//! CUPTI 13.0.1) for bench/sass_metrics_floor.cu's `spin`, `axpy` and cuBLAS's SGEMM
//! (`scripts/gpu/sass-record.sh`: GMPROF_PROBE_SASS_DUMP), attributed as
//! gmprof attributes a launch's flush, against what ncu measured for the same launches
//! (`ncu --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,
//! smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_global_st.sum`, same GPU).

use std::io::Read;
use std::path::PathBuf;

use gmprof::probe::sass::{attribute, Counter, HotSpots, MetricIds, SassRecord, METRICS};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sass").join(name)
}

/// The GH100's metric ids, from its recorded `cuptiSassMetricsGetMetrics` list.
fn gh100_ids() -> MetricIds {
    let list = std::fs::read_to_string(data("gh100_sass_metrics.txt")).unwrap();
    let id = |name: &str| -> u64 {
        list.lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                Some((f.next()?, f.next()?))
            })
            .find(|(_, n)| *n == name)
            .and_then(|(id, _)| id.parse().ok())
            .unwrap_or_else(|| panic!("{name} not in the GH100's list"))
    };
    MetricIds(METRICS.map(id))
}

fn flushes() -> Vec<(String, Vec<SassRecord>)> {
    let file = std::fs::File::open(data("h100_flushes.jsonl.zst")).unwrap();
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(file).unwrap().read_to_string(&mut text).unwrap();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["metrics"], serde_json::json!(METRICS));
            let records: Vec<SassRecord> = serde_json::from_value(v["records"].clone()).unwrap();
            (v["kernel"].as_str().unwrap().to_string(), records)
        })
        .collect()
}

#[test]
fn recorded_flushes_give_ncus_instruction_counts() {
    let ids = gh100_ids();
    // ncu on the H100, same program and launches: instructions and thread instructions;
    // then global load and store instructions as CUPTI's SASS metrics classify them, by
    // opcode (LDG/LD, STG/ST). ncu's smsp__inst_executed_op_global_{ld,st}.sum agree for spin
    // and axpy; for the SGEMM ncu gives 1024 loads and 0 stores, while the SASS counts 0
    // loads (its tiles come in through LDGSTS async copies) and 32768 stores, which is its
    // 4 MB result (32768 warp stores x 32 lanes x 4 B).
    let ncu: [(&str, [u64; 4]); 3] = [
        ("_Z4spinPfi", [1_289_376, 41_260_032, 0, 1_056]),
        ("_Z4axpyPKfPffi", [622_592, 19_922_944, 65_536, 32_768]),
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
            [41_498_112, 1_327_939_584, 0, 32_768],
        ),
    ];
    let flushes = flushes();
    assert_eq!(flushes.len(), 3);
    let mut hot = HotSpots::default();
    for (kernel, expected) in ncu {
        let (_, records) = flushes.iter().find(|(k, _)| k == kernel).unwrap();
        let a = attribute(records, &ids, kernel);
        assert!(a.others.is_empty(), "{kernel}: one launch per flush");
        assert_eq!(a.unknown_values, 0);
        let k = a.launch.unwrap();
        let got = [
            k.total(Counter::Instructions),
            k.total(Counter::ThreadInstructions),
            k.total(Counter::GlobalLoads),
            k.total(Counter::GlobalStores),
        ];
        assert_eq!(got, expected, "{kernel}");
        // The probe fields are the same counts.
        assert_eq!(k.field("exec_count", "instructions"), Some(expected[0]));
        assert_eq!(k.field("gmem_bytes", "loads"), Some(expected[2]));
        // Bytes: every sector of a load is read, of a store written.
        assert_eq!(
            k.read_bytes() + k.written_bytes() + k.other_bytes(),
            k.total(Counter::GlobalSectors) * 32,
            "{kernel}"
        );
        hot.add(&k);
    }
    // axpy moves 4 MB in and 4 MB back per vector: 2 x 1M floats read, 1M written.
    let (_, records) = flushes.iter().find(|(k, _)| k == "_Z4axpyPKfPffi").unwrap();
    let axpy = attribute(records, &ids, "_Z4axpyPKfPffi").launch.unwrap();
    assert_eq!(axpy.read_bytes(), 2 * 4 * (1 << 20));
    assert_eq!(axpy.written_bytes(), 4 * (1 << 20));
    // The SGEMM reads its A and B tiles through LDGSTS async copies, which count as reads:
    // 798 720 of them, 96 MiB of sectors (each of the 128 blocks reads a 128-row panel of A
    // and a 64-column panel of B, 1024 deep: 128 x (128 + 64) x 1024 x 4 B = 96 MiB).
    let sgemm_name = ncu[2].0;
    let (_, records) = flushes.iter().find(|(k, _)| k == sgemm_name).unwrap();
    let sgemm = attribute(records, &ids, sgemm_name).launch.unwrap();
    assert_eq!((sgemm.read_bytes(), sgemm.written_bytes(), sgemm.other_bytes()), (96 << 20, 4 << 20, 0));
    assert_eq!(sgemm.field("gmem_bytes", "async_copies"), Some(798_720));
    // The spin loop (1000 iterations, unrolled 16 times: 62 trips) outweighs its prologue,
    // which runs once per warp (1056 warps).
    let top = hot.top(3);
    let spin: Vec<_> = top.iter().filter(|h| h.function == "_Z4spinPfi").collect();
    assert_eq!(spin.len(), 3);
    assert_eq!(spin[0].counts.get(Counter::Instructions), 62 * 1056, "{:?}", spin[0]);
    assert!(spin.iter().all(|h| h.share > 0.0 && h.share <= 1.0));
    // Kernels by total instructions: the SGEMM first.
    assert!(top[0].function.starts_with("sm80_xmma_gemm"));
}
