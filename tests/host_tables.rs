//! The metric catalog against CUPTI's real host tables, on the CPU.
//!
//! CUPTI's host side (metric tables, configuration images, pass counts) needs no GPU, so
//! these tests load the libcupti that NVIDIA ships on PyPI (`nvidia-cuda-cupti==13.0.*`),
//! named by `GMPROF_TEST_CUPTI_LIB`. `.ci/run` downloads it and sets the variable; without
//! it the tests print why and pass vacuously, so a developer without the wheel can still run
//! `cargo test`. CI always runs them for real.

use gmprof::checked::Cupti;
use gmprof::metrics::MetricCatalog;
use gmprof::model::MetricKind;

fn catalog() -> Option<MetricCatalog> {
    let Ok(lib) = std::env::var("GMPROF_TEST_CUPTI_LIB") else {
        eprintln!("GMPROF_TEST_CUPTI_LIB is not set: skipping (see .ci/run)");
        return None;
    };
    std::env::set_var("GMPROF_CUPTI_LIB", lib);
    let cupti = Cupti::load().expect("the test libcupti loads");
    Some(MetricCatalog::for_chip(&cupti, "GH100").expect("GH100 tables"))
}

#[test]
fn gh100_lists_dram_bytes_with_type_and_unit() {
    let Some(cat) = catalog() else { return };
    let read = cat.filter("dram__bytes").find(|e| e.name == "dram__bytes_read").expect("dram__bytes_read");
    assert_eq!(read.kind, MetricKind::Counter);
    assert_eq!(read.unit, "byte");
    assert!(cat.filter("dram__bytes").any(|e| e.name == "dram__bytes_write"));
    assert!(cat.entries().len() > 1000, "GH100 has thousands of base metrics, got {}", cat.entries().len());
}

#[test]
fn gh100_pass_counts_match_the_gpu_measurements() {
    let Some(cat) = catalog() else { return };
    let one = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"];
    assert_eq!(cat.passes(&one).unwrap(), 1);
    let eight = [
        "gpu__time_duration.sum",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ];
    let passes = cat.passes(&eight).unwrap();
    assert!(passes > 1, "the throughput set needs several passes");
    assert_eq!(passes, 8, "8 passes were measured on an H200 (GH100)");
}

#[test]
fn unknown_metric_is_named_with_the_closest_valid_name() {
    let Some(cat) = catalog() else { return };
    let err = cat.passes(&["gpu__time_duration.sum", "dram__bytez_read.sum"]).unwrap_err();
    let gmprof::Error::UnknownMetrics { unknown, chip } = &err else { panic!("wrong error: {err}") };
    assert_eq!(chip, "GH100");
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].name, "dram__bytez_read.sum");
    assert_eq!(unknown[0].suggestions[0], "dram__bytes_read.sum");
    assert!(err.to_string().contains("did you mean dram__bytes_read.sum"));
}

#[test]
fn bare_base_names_are_rejected_and_specs_carry_units() {
    let Some(cat) = catalog() else { return };
    assert!(!cat.is_valid("dram__bytes_read"), "a base name without rollup is not collectable");
    let spec = cat.spec("dram__throughput.avg.pct_of_peak_sustained_elapsed");
    assert_eq!(spec.kind, MetricKind::Throughput);
    assert_eq!(spec.unit, "%");
    let spec = cat.spec("gpu__time_duration.sum");
    assert_eq!(spec.kind, MetricKind::Counter);
    assert!(spec.unit.contains("second"), "time unit: {}", spec.unit);
}

#[test]
fn gh100_samples_the_default_pm_metrics_in_one_pass() {
    let Ok(lib) = std::env::var("GMPROF_TEST_CUPTI_LIB") else { return };
    std::env::set_var("GMPROF_CUPTI_LIB", lib);
    let cupti = Cupti::load().unwrap();
    let mut host = gmprof::checked::host::ProfilerHost::new_pm_sampling(&cupti, "GH100", None).unwrap();
    let defaults = gmprof::capture::pm_sampling::DEFAULT_PM_METRICS;
    for name in defaults {
        let props = host.metric_properties(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let unit = props.unit().to_owned();
        if name.ends_with(".per_second") {
            assert_eq!(unit, "byte/second", "{name}");
        } else {
            assert_eq!(unit, "percent", "{name}");
        }
    }
    host.add_metrics(&defaults).unwrap();
    let image = host.config_image().unwrap();
    assert!(!image.is_empty());
    assert_eq!(host.num_passes(&image).unwrap(), 1, "PM sampling has no replay: one pass");
    // sm__throughput is in the tables but needs 19 passes on GH100: it cannot be sampled,
    // which is why the defaults use SM active instead.
    let mut sm = gmprof::checked::host::ProfilerHost::new_pm_sampling(&cupti, "GH100", None).unwrap();
    sm.add_metrics(&["sm__throughput.avg.pct_of_peak_sustained_elapsed"]).unwrap();
    let image = sm.config_image().unwrap();
    assert!(sm.num_passes(&image).unwrap() > 1);
    // A range-profiler-only metric is not in the PM sampling tables.
    assert!(host.metric_properties("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum").is_err());
}

/// Which chips can PM-sample the default set, from CUPTI 13.0's host tables (README, "PM
/// sampling"): one pass from Ampere on, two on Turing (where the tensor-pipe metric alone
/// needs two, and the other four fit in one); GDDR7 Blackwell (GB20x) under its `dram__bytes_op_*` names; the Tegra parts
/// (GA10B, GB10B) have no DRAM byte counters to sample.
#[test]
fn default_pm_metrics_per_chip() {
    let Ok(lib) = std::env::var("GMPROF_TEST_CUPTI_LIB") else { return };
    std::env::set_var("GMPROF_CUPTI_LIB", lib);
    let cupti = Cupti::load().unwrap();
    let defaults: Vec<String> =
        gmprof::capture::pm_sampling::DEFAULT_PM_METRICS.iter().map(|m| (*m).to_owned()).collect();
    for chip in ["TU102", "GA100", "GA102", "AD102", "GH100", "GB100", "GB202", "GB203"] {
        let mut host = gmprof::checked::host::ProfilerHost::new_pm_sampling(&cupti, chip, None).unwrap();
        let resolved = gmprof::capture::pm_sampling::resolve_metrics(&cupti, &host, &defaults)
            .unwrap_or_else(|e| panic!("{chip}: {e}"));
        let gddr7 = chip.starts_with("GB2");
        assert_eq!(resolved[0].name.contains("_op_read"), gddr7, "{chip}: {:?}", resolved[0]);
        assert_eq!(resolved[0].unit, "byte/second", "{chip}");
        let names: Vec<&str> = resolved.iter().map(|m| m.name.as_str()).collect();
        host.add_metrics(&names).unwrap();
        let image = host.config_image().unwrap();
        let expected = if chip.starts_with("TU") { 2 } else { 1 };
        assert_eq!(host.num_passes(&image).unwrap(), expected, "{chip}");
        if chip.starts_with("TU") {
            let mut four = gmprof::checked::host::ProfilerHost::new_pm_sampling(&cupti, chip, None).unwrap();
            let without_tensor: Vec<&str> = names.iter().copied().filter(|n| !n.contains("tensor")).collect();
            four.add_metrics(&without_tensor).unwrap();
            let image = four.config_image().unwrap();
            assert_eq!(four.num_passes(&image).unwrap(), 1, "{chip}: four metrics");
        }
    }
    let tegra = gmprof::checked::host::ProfilerHost::new_pm_sampling(&cupti, "GA10B", None).unwrap();
    let e = gmprof::capture::pm_sampling::resolve_metrics(&cupti, &tegra, &defaults).unwrap_err().to_string();
    assert!(e.contains("dram__bytes_read.sum.per_second") && e.contains("gmprof metrics --pm-sampling"), "{e}");
    // A typo gets the closest name of the PM tables.
    let host = gmprof::checked::host::ProfilerHost::new_pm_sampling(&cupti, "GH100", None).unwrap();
    let e = gmprof::capture::pm_sampling::resolve_metrics(
        &cupti,
        &host,
        &["gr__cycles_actve.avg.pct_of_peak_sustained_elapsed".into()],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("did you mean gr__cycles_active.avg.pct_of_peak_sustained_elapsed?"), "{e}");
}
