//! Parquet outputs: every table read back from Parquet holds the same values as its CSV
//! twin, cell by cell, blanks as nulls, on recorded real runs (an H100 torch training run in
//! per_kernel mode, the H100 torch_gpt trace runs of tests/data/diff, the PM sampling run of
//! tests/data/pm) and on the golden report; the schema and key-value metadata are pinned by
//! `tests/golden/parquet_schema.txt` (rewrite it with `GMPROF_BLESS=1 cargo test --test parquet`).

#[path = "common/golden.rs"]
mod golden;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::Array;
use arrow_schema::DataType;
use gmprof::report::parquet::tables::{
    KERNELS_PARQUET, PM_PARQUET, PROBES_PARQUET, PROBE_LAUNCHES_PARQUET, RANGES_PARQUET, STATS_PARQUET,
    TRANSFERS_PARQUET,
};
use gmprof::report::parquet::{read, KEY_HEADER, KEY_META, KEY_TABLE};
use gmprof::report::probes::{ProbeTotal, ProbedLaunch};
use gmprof::report::{OutputFormats, Report};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn zst(path: &Path) -> Report {
    let bytes = std::fs::read(path).unwrap();
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(&mut bytes.as_slice()).unwrap().read_to_string(&mut text).unwrap();
    Report::from_json(&text).unwrap()
}

fn golden_report() -> Report {
    let mut r = Report::from_json(include_str!("golden/report.json")).unwrap();
    r.meta.gmprof_version = "GOLDEN".into();
    r
}

/// The golden report with probed launches attached: text, count and flag probe columns, and
/// kernel rows without a launch (blank).
fn probed_report() -> Report {
    let mut r = golden_report();
    let ids: Vec<u32> = r.kernels.iter().map(|k| k.correlation_id).take(2).collect();
    let launch = |id: u32, bytes: u64| ProbedLaunch {
        correlation_id: id,
        kernel: "k".into(),
        blocks: 4,
        threads: 128,
        status: "probed".into(),
        readback_us: 1.25,
        totals: vec![ProbeTotal { probe: "gmem_bytes".into(), field: "ld_bytes".into(), total: bytes, records: 16 }],
        variant: Some(1),
        ..ProbedLaunch::default()
    };
    r.attach_probes(vec![launch(ids[0], 1024), launch(ids[1], 512), launch(999_999, 8)]);
    r
}

/// The PM sampling run recorded on an H100, folded again.
fn pm_report() -> Report {
    let mut r = zst(&manifest().join("tests/data/pm/h100_pm_validate_trace_pm_100us.json.zst"));
    let pm = r.pm.as_ref().unwrap();
    let folded = gmprof::analysis::pm_fold::fold_report(&pm.to_capture(), &r.ranges, &r.kernels);
    r.pm = Some(folded);
    r
}

fn recorded_reports() -> Vec<(&'static str, Report)> {
    vec![
        ("golden", golden_report()),
        ("probed", probed_report()),
        (
            "torch_train_per_kernel",
            Report::read_json(manifest().join("docs/recorded/torch_train_per_kernel.json")).unwrap(),
        ),
        ("torch_gpt_base", zst(&manifest().join("tests/data/diff/torch_gpt_base.json.zst"))),
        ("pm_100us", pm_report()),
        ("two_gpus_per_kernel", zst(&manifest().join("tests/data/devices/pipeline_per_kernel.json.zst"))),
    ]
}

/// The CSV file's `# ` lines, its header and its records.
fn read_csv(path: &Path) -> (Vec<String>, Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let comments: Vec<String> = text.lines().take_while(|l| l.starts_with("# ")).map(|l| l[2..].to_owned()).collect();
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_reader(text.as_bytes());
    let header = reader.headers().unwrap().iter().map(str::to_owned).collect();
    let rows = reader.records().map(|r| r.unwrap().iter().map(str::to_owned).collect()).collect();
    (comments, header, rows)
}

/// Compares `name.csv` and `name.parquet` in `dir` cell by cell; returns (rows, blanks seen).
fn same_values(dir: &Path, name: &str) -> (usize, usize) {
    let (comments, header, rows) = read_csv(&dir.join(format!("{name}.csv")));
    let path = dir.join(format!("{name}.parquet"));
    let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
    let kv: HashMap<String, String> = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .map(|kv| kv.iter().map(|k| (k.key.clone(), k.value.clone().unwrap_or_default())).collect())
        .unwrap_or_default();
    if !comments.is_empty() {
        assert_eq!(kv[KEY_HEADER], comments.join("\n"), "{name}: the CSV header lines are the Parquet metadata");
    }
    let schema = builder.schema().clone();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, header, "{name}: same columns in the same order");
    let mut row = 0;
    let mut blanks = 0;
    for batch in builder.build().unwrap() {
        let batch = batch.unwrap();
        for r in 0..batch.num_rows() {
            let csv_row = &rows[row];
            for (c, column) in batch.columns().iter().enumerate() {
                let cell = csv_row[c].as_str();
                let at = format!("{name} row {row} column {}", header[c]);
                if column.is_null(r) {
                    blanks += 1;
                    assert_eq!(cell, "", "{at}: null in Parquet, {cell:?} in CSV");
                    continue;
                }
                match column.data_type() {
                    DataType::Int64 => {
                        let v = column.as_primitive::<Int64Type>().value(r);
                        assert_eq!(cell.parse::<i64>().ok(), Some(v), "{at}");
                    }
                    DataType::Int32 => {
                        let v = column.as_primitive::<Int32Type>().value(r);
                        assert_eq!(cell.parse::<i32>().ok(), Some(v), "{at}");
                    }
                    DataType::Float64 => {
                        let v = column.as_primitive::<Float64Type>().value(r);
                        let parsed: f64 = cell.parse().unwrap_or_else(|_| panic!("{at}: {cell:?} is not a number"));
                        assert!(parsed == v || (parsed.is_nan() && v.is_nan()), "{at}: {parsed} != {v}");
                    }
                    DataType::Boolean => {
                        let v = column.as_boolean().value(r);
                        assert_eq!(cell, v.to_string(), "{at}");
                    }
                    DataType::Utf8 => {
                        assert_eq!(cell, column.as_string::<i32>().value(r), "{at}");
                    }
                    other => panic!("{at}: unexpected type {other}"),
                }
            }
            row += 1;
        }
    }
    assert_eq!(row, rows.len(), "{name}: same number of rows");
    (row, blanks)
}

#[test]
fn csv_and_parquet_hold_the_same_values_blanks_included() {
    for (label, report) in recorded_reports() {
        let dir = tempfile::tempdir().unwrap();
        report.write_all(dir.path()).unwrap();
        let mut tables = vec!["ranges", "kernels", "transfers", "stats"];
        if report.pm.is_some() {
            tables.push("pm");
        }
        if !report.probes.is_empty() {
            tables.extend(["probe_launches", "probes", "probe_ranges"]);
        }
        if !report.range_devices.is_empty() {
            tables.push("range_devices");
        }
        let mut blanks = 0;
        for table in tables {
            let (rows, b) = same_values(dir.path(), table);
            blanks += b;
            let expected = match table {
                "ranges" => report.ranges.len(),
                "kernels" => report.kernels.len(),
                "transfers" => report.transfers.len(),
                "range_devices" => report.range_devices.len(),
                _ => rows,
            };
            assert_eq!(rows, expected, "{label} {table}");
        }
        // Every report here has values that were not measured: they must come back as nulls.
        assert!(blanks > 0, "{label}: no blank cell compared");
    }
}

#[test]
fn the_recorded_per_kernel_run_keeps_its_kernel_times_and_blank_metrics() {
    let report = Report::read_json(manifest().join("docs/recorded/torch_train_per_kernel.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    report.write_kernels_parquet(dir.path().join(KERNELS_PARQUET)).unwrap();
    let path = dir.path().join(KERNELS_PARQUET);
    assert_eq!(read::row_count(&path).unwrap(), report.kernels.len() as u64);
    let mut durations = Vec::new();
    for batch in read::batches(&path, &["duration_ns", "correlation_id"]).unwrap() {
        let b = batch.unwrap();
        for r in 0..b.len() {
            durations.push((b.int(1, r).unwrap().unwrap() as u32, b.int(0, r).unwrap().map(|d| d as u64)));
        }
    }
    let expected: Vec<(u32, Option<u64>)> = report.kernels.iter().map(|k| (k.correlation_id, k.duration_ns)).collect();
    assert_eq!(durations, expected);
    assert_eq!(read::report_meta(&path).unwrap(), report.meta, "gmprof.meta is the report's metadata");
}

#[test]
fn formats_choose_the_files() {
    let report = probed_report();
    let files = |formats: OutputFormats| {
        let dir = tempfile::tempdir().unwrap();
        report.write_all_as(dir.path(), formats).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let both = files(OutputFormats::default());
    for name in [
        RANGES_PARQUET,
        KERNELS_PARQUET,
        TRANSFERS_PARQUET,
        STATS_PARQUET,
        PROBE_LAUNCHES_PARQUET,
        PROBES_PARQUET,
        "kernels.csv",
        "report.json",
        "trace.json",
    ] {
        assert!(both.iter().any(|n| n == name), "{name} missing from {both:?}");
    }
    let csv = files(OutputFormats::CSV);
    assert!(!csv.iter().any(|n| n.ends_with(".parquet")), "{csv:?}");
    let parquet = files(OutputFormats::PARQUET);
    assert!(!parquet.iter().any(|n| n.ends_with(".csv")), "{parquet:?}");
    assert!(parquet.iter().any(|n| n == "report.json") && parquet.iter().any(|n| n == "trace.json"));
    assert!(!both.iter().any(|n| n.starts_with('.')), "no temporary file left: {both:?}");
    let pm = pm_report();
    let dir = tempfile::tempdir().unwrap();
    pm.write_all_as(dir.path(), OutputFormats::PARQUET).unwrap();
    assert!(dir.path().join(PM_PARQUET).is_file() && !dir.path().join("pm.csv").exists());
}

#[test]
fn a_truncated_or_foreign_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let report = golden_report();
    let path = dir.path().join(KERNELS_PARQUET);
    report.write_kernels_parquet(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = read::report_meta(&cut).unwrap_err().to_string();
    assert!(e.contains("cut.parquet") && e.contains("not a readable Parquet file"), "{e}");
    let csv = dir.path().join("kernels.csv");
    report.write_kernels_csv(&csv).unwrap();
    assert!(read::row_count(&csv).unwrap_err().to_string().contains("not a readable Parquet file"));
    let e = read::batches(&path, &["no_such_column"]).err().unwrap().to_string();
    assert!(e.contains("no column 'no_such_column'"), "{e}");
}

/// The schema and key-value metadata of one table, as text.
fn describe(path: &Path) -> String {
    let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = format!("## {}\n", path.file_name().unwrap().to_string_lossy());
    for f in builder.schema().fields() {
        out += &format!("{}: {}{}\n", f.name(), f.data_type(), if f.is_nullable() { "" } else { " not null" });
    }
    let kv = read::key_values(path).unwrap();
    for key in [KEY_TABLE, KEY_HEADER, KEY_META] {
        if let Some(value) = kv.get(key) {
            out += &format!("{key}:\n");
            for line in value.lines() {
                out += &format!("  {line}\n");
            }
        }
    }
    out
}

#[test]
fn golden_parquet_schema_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    probed_report().write_all_as(dir.path(), OutputFormats::PARQUET).unwrap();
    pm_report().write_pm_parquet(dir.path().join(PM_PARQUET)).unwrap();
    let mut text = String::new();
    for name in [
        RANGES_PARQUET,
        KERNELS_PARQUET,
        TRANSFERS_PARQUET,
        STATS_PARQUET,
        PM_PARQUET,
        PROBE_LAUNCHES_PARQUET,
        PROBES_PARQUET,
    ] {
        let mut part = describe(&dir.path().join(name));
        if name == PM_PARQUET {
            // The recorded run's metadata is long and not the point: its columns are.
            part = part.lines().take_while(|l| !l.starts_with(KEY_TABLE)).map(|l| format!("{l}\n")).collect();
        }
        text += &part;
        text += "\n";
    }
    golden::check_golden("parquet_schema.txt", &text);
}

/// tests/golden holds the golden report's tables as Parquet too (for the Python tests of
/// `gmprof.load` with pyarrow): they must hold the golden CSVs' values.
#[test]
fn golden_parquet_files_hold_the_golden_csv_values() {
    let golden = manifest().join("tests/golden");
    let report = Report::read_json(golden.join("report.json")).unwrap();
    if std::env::var("GMPROF_BLESS").is_ok_and(|v| v == "1") {
        report.write_ranges_parquet(golden.join(RANGES_PARQUET)).unwrap();
        report.write_kernels_parquet(golden.join(KERNELS_PARQUET)).unwrap();
        report.write_transfers_parquet(golden.join(TRANSFERS_PARQUET)).unwrap();
        report.write_stats_parquet(golden.join(STATS_PARQUET)).unwrap();
    }
    assert_eq!(same_values(&golden, "ranges").0, 14);
    assert_eq!(same_values(&golden, "kernels").0, 16);
    assert_eq!(same_values(&golden, "transfers").0, 5);
    assert_eq!(same_values(&golden, "stats").0, 25);
}

/// PC sampling's tables (stalls, pc_samples) have Parquet twins with the CSVs' values, on the
/// golden report with PC records for its kernels (few samples in some ranges: blank shares).
#[test]
fn pc_sampling_tables_have_parquet_twins() {
    use gmprof::model::pc::{PcCapture, PcRecord, PcSource, PcStallReason};
    let mut report = golden_report();
    let functions: Vec<String> = report
        .kernels
        .iter()
        .filter_map(|k| k.mangled_name.clone().or_else(|| k.kernel_name.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(!functions.is_empty());
    let states = ["long_scoreboard", "selected", "wait"];
    let mut reasons = Vec::new();
    for (i, s) in states.iter().enumerate() {
        reasons.push(PcStallReason { index: 2 * i as u32, name: format!("smsp__pcsamp_warps_issue_stalled_{s}") });
        reasons.push(PcStallReason {
            index: 2 * i as u32 + 1,
            name: format!("smsp__pcsamp_warps_issue_stalled_{s}_not_issued"),
        });
    }
    let records = functions
        .iter()
        .enumerate()
        .map(|(i, f)| PcRecord {
            cubin_crc: 0xabc,
            function: f.clone(),
            pc_offset: 16 * i as u64,
            correlation_id: 0,
            stalls: vec![(0, 90 + 40 * i as u64), (1, 80), (2, 30), (4, 7)],
        })
        .collect();
    report.attach_pc(&PcCapture {
        reasons,
        period_exponent: Some(10),
        collection: "continuous".into(),
        records,
        total_samples: 5000,
        drains: 2,
        sources: vec![PcSource {
            cubin_crc: 0xabc,
            function: functions[0].clone(),
            pc_offset: 0,
            file: "a.cu".into(),
            line: 7,
        }],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    report.write_all(dir.path()).unwrap();
    let (rows, blanks) = same_values(dir.path(), "stalls");
    assert_eq!(rows, report.pc.as_ref().unwrap().ranges.len() * 3);
    let (pcs, pc_blanks) = same_values(dir.path(), "pc_samples");
    assert!(pcs > 0 && blanks + pc_blanks > 0, "{pcs} rows, {blanks} + {pc_blanks} blanks");
}
