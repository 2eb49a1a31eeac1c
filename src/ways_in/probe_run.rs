//! `gmprof run --probe`: the injected library's side of the probe engine. Reads the
//! `GMPROF_PROBE*` variables, installs [`crate::capture::probe`] on the pinned subscriber,
//! follows the NVTX ranges `--probe-range` selects, and writes the probe outputs beside
//! the others:
//!
//! - `probe_kernels.csv`: every kernel launched while probing was on, probed or not, with
//!   the reason (SASS only, module not seen, not selected) and the load cost, one row per
//!   variant of a kernel name (its module image, thread limits;
//!   [`crate::report::probe_kernels`]);
//! - `probe_launches.csv`: every selected launch (correlation id and range path as in
//!   kernels.csv; probed, or not probed with the reason), with block_sched's check (blocks
//!   seen once, missing, repeated; first start, last end) and whether the blocks lie inside
//!   the kernel's activity interval under the device timers' clock fit;
//! - `probes.csv`: per launch, probe and field, the total over the map's records (also in
//!   kernels.csv's `probe.<probe>.<field>` columns; see `report::probes`);
//! - `probe_records.csv`: every record of the first launches of each kernel
//!   (`GMPROF_PROBE_RECORD_LAUNCHES`, default 1);
//! - `probe_trace.json`: block_sched's blocks, one track per SM (blocks resident together
//!   on extra lanes), each launch's kernel slice beside them, on trace.json's clock
//!   ([`crate::report::probe_trace`]; written by the report, or here on `%globaltimer`
//!   when no report took the probes). trace.json has the blocks too, inside their kernel's
//!   slice: they reach the report as device-timer launches (region `block (probe
//!   block_sched)`).

use std::cell::RefCell;
use std::path::Path;

use crate::capture::probe::{self, ProbeConfig, SassUse};
use crate::error::{Error, Result};
use crate::probe::{parse_probe_list, MapVia};
use crate::report::Report;

/// Comma-separated probes: built-in names or `.toml` spec paths.
pub const PROBE_ENV: &str = "GMPROF_PROBE";
/// Kernel name glob.
pub const PROBE_KERNELS_ENV: &str = "GMPROF_PROBE_KERNELS";
/// NVTX range glob.
pub const PROBE_RANGE_ENV: &str = "GMPROF_PROBE_RANGE";
/// Launches per kernel whose records all go to probe_records.csv.
pub const PROBE_RECORD_LAUNCHES_ENV: &str = "GMPROF_PROBE_RECORD_LAUNCHES";
/// `param` (default) or `global`: how probed kernels find their maps.
pub const PROBE_MAPS_ENV: &str = "GMPROF_PROBE_MAPS";
/// A directory of `.ptx` files for kernels whose modules have none (Triton's cache).
pub const PROBE_PTX_DIR_ENV: &str = "GMPROF_PROBE_PTX_DIR";
/// `auto` (default), `always` or `never`: when CUPTI's SASS metrics count a kernel.
pub const PROBE_SASS_ENV: &str = "GMPROF_PROBE_SASS";
/// Launches of each kernel function the SASS path counts, at most (default: all).
pub const PROBE_SASS_LAUNCHES_ENV: &str = "GMPROF_PROBE_SASS_LAUNCHES";
/// A file that gets the first SASS metrics flush of each kernel as JSON lines.
pub const PROBE_SASS_DUMP_ENV: &str = "GMPROF_PROBE_SASS_DUMP";
/// `1`: let CUPTI's SASS metrics run beside a counter mode, which gmprof otherwise refuses;
/// an experiment, for measuring why (README, "Probes beside the counter modes").
pub const PROBE_SASS_ANY_MODE_ENV: &str = "GMPROF_PROBE_SASS_ANY_MODE";
/// MiB of device memory for the maps of kernels probed inside CUDA graphs (default 256; 0:
/// kernels launched during stream captures are not probed).
pub const PROBE_GRAPH_POOL_ENV: &str = "GMPROF_PROBE_GRAPH_POOL_MB";

thread_local! {
    static OPEN: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The probe configuration of an environment; `None` when `GMPROF_PROBE` is unset.
pub fn config_from(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<ProbeConfig>> {
    let get = |k: &str| lookup(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let Some(list) = get(PROBE_ENV) else { return Ok(None) };
    let probes = parse_probe_list(&list).map_err(|e| Error::InvalidConfig(format!("{PROBE_ENV}={list}: {e}")))?;
    if probes.is_empty() {
        return Ok(None);
    }
    let pattern = |key: &str| -> Result<Option<glob::Pattern>> {
        get(key)
            .map(|p| glob::Pattern::new(&p).map_err(|e| Error::InvalidConfig(format!("{key}={p}: {e}"))))
            .transpose()
    };
    let record_launches = match get(PROBE_RECORD_LAUNCHES_ENV) {
        None => 1,
        Some(v) => v
            .parse()
            .map_err(|_| Error::InvalidConfig(format!("{PROBE_RECORD_LAUNCHES_ENV}={v}: use a whole number")))?,
    };
    Ok(Some(ProbeConfig {
        probes,
        kernels: pattern(PROBE_KERNELS_ENV)?,
        range: pattern(PROBE_RANGE_ENV)?,
        record_launches,
        ptx_dir: get(PROBE_PTX_DIR_ENV).map(std::path::PathBuf::from),
        sass_launches: match get(PROBE_SASS_LAUNCHES_ENV) {
            None => None,
            Some(v) => Some(v.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "{PROBE_SASS_LAUNCHES_ENV}={v}: use a whole number of launches, at least 1"
                ))
            })?),
        },
        sass_dump: get(PROBE_SASS_DUMP_ENV).map(std::path::PathBuf::from),
        graph_pool_bytes: match get(PROBE_GRAPH_POOL_ENV) {
            None => crate::capture::probe::DEFAULT_GRAPH_POOL_BYTES,
            Some(v) => v.parse::<usize>().ok().and_then(|mb| mb.checked_mul(1 << 20)).ok_or_else(|| {
                Error::InvalidConfig(format!("{PROBE_GRAPH_POOL_ENV}={v}: use a whole number of MiB (0: off)"))
            })?,
        },
        sass_blocked: match get(crate::ways_in::env_names::injection::MODE).as_deref() {
            Some("trace") => None,
            // The measurement of why the refusal stands (scripts/gpu/graph-probes.sh, PART=modes).
            _ if get(PROBE_SASS_ANY_MODE_ENV).as_deref() == Some("1") => None,
            mode => Some(format!(
                "CUPTI's SASS metrics run beside --mode trace only (this run's mode: {}; beside a counter mode the \
                 counters measure CUPTI's patched kernels: 15-67x their time on an H200); add --mode trace",
                mode.unwrap_or("the default, a counter mode")
            )),
        },
        sass: match get(PROBE_SASS_ENV).as_deref() {
            None | Some("auto") => SassUse::Auto,
            Some("always") => SassUse::Always,
            Some("never") => SassUse::Never,
            Some(other) => {
                return Err(Error::InvalidConfig(format!("{PROBE_SASS_ENV}={other}: use auto, always or never")));
            }
        },
        maps: match get(PROBE_MAPS_ENV).as_deref() {
            None | Some("param") => MapVia::Param,
            Some("global") => MapVia::Global,
            Some(other) => {
                return Err(Error::InvalidConfig(format!("{PROBE_MAPS_ENV}={other}: use param or global")));
            }
        },
    }))
}

/// Installs the probes the environment asks for (after the hub is pinned).
pub fn install_from_env() -> Result<bool> {
    match config_from(|k| std::env::var(k).ok())? {
        None => Ok(false),
        Some(config) => {
            probe::install(config)?;
            Ok(true)
        }
    }
}

/// An NVTX push on this thread.
pub fn on_push(name: &str) {
    OPEN.with(|o| o.borrow_mut().push(name.to_string()));
    probe::on_range(name, true);
}

/// An NVTX pop on this thread.
pub fn on_pop() {
    if let Some(name) = OPEN.with(|o| o.borrow_mut().pop()) {
        probe::on_range(&name, false);
    }
}

/// Joins the probed launches to `report`'s kernel rows ([`Report::attach_probes`]): the
/// report then writes probe_launches.csv and probes.csv with their ranges and clock
/// placement, and kernels.csv's probe columns. Returns whether probing was on.
pub fn attach(report: &mut Report) -> bool {
    probe::finish_sass();
    probe::finish_graphs();
    let Some(out) = probe::outputs() else { return false };
    if let Some(sass) = &out.sass {
        report.meta.warnings.extend(sass_warnings(sass));
    }
    report.meta.warnings.extend(out.notes.iter().map(|n| format!("probes: {n}")));
    report.attach_probes(out.launches);
    if out.timeline_left_off > 0 {
        report.meta.warnings.push(format!(
            "probes: block_sched blocks of {} launch(es) are not on the timeline (more than {} blocks in all); \
             probe_launches.csv has their check",
            out.timeline_left_off,
            probe::MAX_TIMELINE_SPANS
        ));
    }
    true
}

/// Writes the probe outputs into `dir`; nothing when probing is off. probe_launches.csv,
/// probes.csv and probe_trace.json are written here only when no report took them (`joined`
/// false: profiling could not finish; the CSVs then have no ranges, and the trace's blocks
/// are on `%globaltimer` without kernel slices). Returns how many kernel variants
/// (probe_kernels.csv rows) were probed and how many were not.
pub fn write_outputs(dir: &Path, joined: bool) -> Result<Option<(usize, usize)>> {
    probe::finish_sass();
    probe::finish_graphs();
    let Some(out) = probe::outputs() else { return Ok(None) };
    crate::report::probe_kernels::write_probe_kernels_csv(dir, &out.kernels)?;
    if let Some(sass) = &out.sass {
        crate::report::sass_hot::write_sass_hot_csv(dir, &sass.hot)?;
        let counted = out
            .launches
            .iter()
            .filter(|l| l.source.as_deref() == Some(probe::SASS_SOURCE) && l.graph_launches.is_none())
            .count();
        eprintln!(
            "gmprof: SASS metrics: {counted} launch(es) counted, {} flush(es) costing {:.1} ms ({:.0} us each, the \
             wait for the launch included){}",
            sass.flushes,
            sass.flush_us / 1e3,
            if sass.flushes > 0 { sass.flush_us / sass.flushes as f64 } else { 0.0 },
            if sass.dropped > 0 {
                format!("; CUPTI dropped {} records at the end", sass.dropped)
            } else {
                String::new()
            }
        );
        if sass.graph_nodes > 0 {
            let rows: Vec<_> = out
                .launches
                .iter()
                .filter(|l| l.source.as_deref() == Some(probe::SASS_SOURCE) && l.graph_launches.is_some())
                .collect();
            let counted = rows.iter().filter(|l| !l.totals.is_empty()).count();
            let not_flushed: u64 = sass.graph_launches_not_flushed.iter().map(|(_, n)| n).sum();
            let why: Vec<String> = sass.graph_launches_not_flushed.iter().map(|(w, n)| format!("{n}: {w}")).collect();
            eprintln!(
                "gmprof: SASS metrics: {} launch(es) made while a CUDA stream was capturing became graph nodes counted \
                 at their graph's launches: {} row(s) in probe_launches.csv (a function's nodes in one graph share a \
                 row), {counted} with counts per graph launch{}",
                sass.graph_nodes,
                rows.len(),
                if not_flushed > 0 {
                    format!(
                        "; {not_flushed} graph launch(es) were not flushed alone and are not in them ({})",
                        why.join("; ")
                    )
                } else {
                    String::new()
                }
            );
        }
        if sass.over_quota > 0 {
            eprintln!(
                "gmprof: SASS metrics: {} later launch(es) ran patched, not counted (--probe-sass-launches)",
                sass.over_quota
            );
        }
    }
    if let Some(why) = &out.sass_off {
        eprintln!("gmprof: probes: {why}; kernels without PTX are not probed");
    }
    if out.graph_nodes > 0 {
        let per_launch = out
            .launches
            .iter()
            .filter(|l| l.graph_launches.is_some_and(|n| n > 0) && l.source.as_deref() == Some(probe::PTX_SOURCE))
            .count();
        eprintln!(
            "gmprof: probes: {} launch(es) made while a CUDA stream was capturing were built into their graph probed \
             ({} MiB of map pool); {per_launch} have counts per graph launch (probe_launches.csv, graph_launches)",
            out.graph_nodes,
            out.graph_pool_bytes >> 20
        );
    }
    if out.captured_launches > 0 {
        eprintln!(
            "gmprof: probes: {} launch(es) made while a CUDA stream was capturing became graph nodes and ran unprobed \
             (gmprof makes no allocation, copy or wait during a capture); probe_kernels.csv says which kernels and why",
            out.captured_launches
        );
    }
    if crate::report::OutputFormats::from_env().unwrap_or_default().parquet {
        crate::report::parquet::tables::write_probe_kernels_parquet(dir, &out.kernels)?;
        if let Some(sass) = &out.sass {
            crate::report::parquet::tables::write_sass_hot_parquet(dir, &sass.hot)?;
        }
    }
    if !joined || out.launches.is_empty() {
        crate::report::probes::write_probe_csvs(dir, &out.launches)?;
        let trace = crate::report::probe_trace::globaltimer_probe_trace(&crate::device_timers::collected());
        trace.write(dir.join(crate::report::probe_trace::PROBE_TRACE_JSON))?;
    }
    crate::report::csv::write_records(&dir.join("probe_records.csv"), &out.records)?;
    let probed = out.kernels.iter().filter(|k| k.status == "probed").count();
    Ok(Some((probed, out.kernels.len() - probed)))
}

/// The report's warnings about the SASS metrics path: what it could not attribute or
/// count.
pub fn sass_warnings(sass: &probe::SassOutputs) -> Vec<String> {
    let mut out = Vec::new();
    let unheard: Vec<&(String, probe::OtherCounts)> =
        sass.others.iter().filter(|(_, o)| o.why.starts_with("not heard")).collect();
    if !unheard.is_empty() {
        let instructions: u64 = unheard.iter().map(|(_, o)| o.instructions).sum();
        out.push(format!(
            "SASS metrics: {} kernel(s) ran without a launch gmprof heard ({instructions} warp instructions; a CUDA \
             graph's kernels, or a launch API gmprof does not hook); probe_kernels.csv lists them as `not heard \
             launched`",
            unheard.len()
        ));
    }
    if sass.dropped > 0 {
        out.push(format!("SASS metrics: CUPTI dropped {} records at the end", sass.dropped));
    }
    if sass.unknown_values > 0 {
        out.push(format!(
            "SASS metrics: {} values of metrics gmprof did not configure were left out",
            sass.unknown_values
        ));
    }
    out.extend(sass.failures.iter().map(|f| format!("SASS metrics: {f}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<ProbeConfig>> {
        config_from(|k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn probe_settings_from_the_environment() {
        assert!(config(&[]).unwrap().is_none());
        let c = config(&[
            (PROBE_ENV, "block_sched, gmem_bytes"),
            (PROBE_KERNELS_ENV, "vector_*"),
            (PROBE_RANGE_ENV, "step 3"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.probes.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["block_sched", "gmem_bytes"]);
        assert!(c.kernels.unwrap().matches("vector_add"));
        assert!(c.range.unwrap().matches("step 3"));
        assert_eq!(c.record_launches, 1);
        // SASS metrics only beside trace mode: a counter mode (or the default) blocks them.
        assert!(c.sass_blocked.as_deref().is_some_and(|w| w.contains("--mode trace only")));
        let t = config(&[(PROBE_ENV, "exec_count"), ("GMPROF_MODE", "trace"), (PROBE_SASS_ENV, "always")])
            .unwrap()
            .unwrap();
        assert_eq!((t.sass_blocked, t.sass), (None, SassUse::Always));
        let e = config(&[(PROBE_ENV, "exec_count"), (PROBE_SASS_ENV, "sometimes")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_PROBE_SASS=sometimes"), "{e}");
        let e = config(&[(PROBE_ENV, "exec_count"), (PROBE_SASS_LAUNCHES_ENV, "0")]).unwrap_err().to_string();
        assert!(e.contains("at least 1"), "{e}");
        let e = config(&[(PROBE_ENV, "block_sched,bogus")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_PROBE=block_sched,bogus") && e.contains("bogus"), "{e}");
        let e = config(&[(PROBE_ENV, "exec_count"), (PROBE_RECORD_LAUNCHES_ENV, "x")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_PROBE_RECORD_LAUNCHES=x"), "{e}");
    }
}
