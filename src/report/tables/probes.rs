//! PTX probe results in the report: each probed launch joined to its kernel row.
//!
//! The probe engine (`gmprof run --probe`) hands one [`ProbedLaunch`] per selected launch.
//! [`Report::attach_probes`] joins it to the kernel row of its correlation id (range path,
//! kernel name) and places its blocks on the CUPTI clock with the device timers' clock fit
//! ([`DeviceClock::fit_runs`] over the launches' brackets, per GPU): a launch whose
//! `block_sched` span fits inside its kernel's activity interval under its run's offset has
//! `blocks_inside_kernel` true. The report then carries:
//!
//! - kernels.csv: `probe_status`, one `probe.<probe>.<field>` column per probe field (the
//!   launch's total), `probe_blocks_inside_kernel` and `probe_variant` (the kernel's variant
//!   in probe_kernels.csv, [`super::probe_kernels`]), after the metric columns, only when the
//!   session probed (blank on rows of launches that were not probed);
//! - [`PROBE_LAUNCHES_CSV`] (one row per launch, with its range path and clock placement)
//!   and [`PROBES_CSV`] (one row per launch, probe and field);
//! - `report.json`'s `probes`.
//!
//! `block_sched`'s blocks themselves reach the timeline as device-timer launches (region
//! `block`, one track per SM inside the kernel's slice), through the device timers' decoder
//! and clock, and `probe_trace.json` on the same clock
//! ([`probe_trace`](crate::report::timeline::probe_trace)).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::csv::write_records;
use crate::analysis::correlate::TimeSource;
use crate::device_timers::clock::{Bracket, DeviceClock};
use crate::error::Result;
use crate::report::model::Report;
pub use crate::report::model::{ProbeTotal, ProbedLaunch};

/// File name of the per-launch probe table.
pub const PROBE_LAUNCHES_CSV: &str = "probe_launches.csv";
/// File name of the per-field totals.
pub const PROBES_CSV: &str = "probes.csv";

/// A probe_launches.csv row: a [`ProbedLaunch`] without its totals.
#[derive(Serialize)]
struct LaunchCsv<'a> {
    correlation_id: u32,
    kernel: &'a str,
    range_path: Option<&'a str>,
    blocks: u64,
    threads: u64,
    status: &'a str,
    blocks_once: Option<u64>,
    blocks_missing: Option<u64>,
    blocks_repeated: Option<u64>,
    first_block_start_ns: Option<u64>,
    last_block_end_ns: Option<u64>,
    blocks_inside_kernel: Option<bool>,
    clock_offset_ns: Option<i64>,
    clock_slack_ns: Option<u64>,
    clock_run_launches: Option<u32>,
    readback_us: f64,
    variant: Option<u32>,
    source: Option<&'a str>,
    graph_launches: Option<u64>,
}

/// A probes.csv row.
#[derive(Serialize)]
struct TotalCsv<'a> {
    correlation_id: u32,
    kernel: &'a str,
    range_path: Option<&'a str>,
    probe: &'a str,
    field: &'a str,
    total: u64,
    records: u64,
}

/// File name of the per-range probe totals.
pub const PROBE_RANGES_CSV: &str = "probe_ranges.csv";

/// A probe_ranges.csv row: one range path, probe field and source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRangeTotal {
    /// The range path (`step/forward`); its total includes the launches of the ranges
    /// nested in it.
    pub range_path: String,
    /// Probe.
    pub probe: String,
    /// Field.
    pub field: String,
    /// `ptx-probe` or `sass-metrics`.
    pub source: String,
    /// Sum over the launches.
    pub total: u64,
    /// Launches summed.
    pub launches: u64,
}

/// Per range path (each launch counted in its range and every enclosing one), probe field
/// and source: the sum of the probed launches' totals. Launches without a range path (no
/// kernel row) are left out; unprobed launches have no totals.
pub fn range_totals(launches: &[ProbedLaunch]) -> Vec<ProbeRangeTotal> {
    // A sum that does not fit in 64 bits is `None` and its row left out (a probe's time
    // fields, `%globaltimer` values, over a dozen launches), as `field_total` leaves it out
    // of a launch.
    type Key = (String, String, String, String);
    let mut sums: BTreeMap<Key, (Option<u64>, u64)> = BTreeMap::new();
    for l in launches {
        let Some(path) = l.range_path.as_deref() else { continue };
        let source = l.source.clone().unwrap_or_default();
        let parts: Vec<&str> = path.split('/').collect();
        for depth in 1..=parts.len() {
            let prefix = parts[..depth].join("/");
            for t in &l.totals {
                let e = sums
                    .entry((prefix.clone(), t.probe.clone(), t.field.clone(), source.clone()))
                    .or_insert((Some(0), 0));
                e.0 = e.0.and_then(|sum| sum.checked_add(t.total));
                e.1 += 1;
            }
        }
    }
    sums.into_iter()
        .filter_map(|((range_path, probe, field, source), (total, launches))| {
            Some(ProbeRangeTotal { range_path, probe, field, source, total: total?, launches })
        })
        .collect()
}

/// Writes probe_launches.csv, probes.csv and probe_ranges.csv for `launches` into `dir`.
pub fn write_probe_csvs(dir: &Path, launches: &[ProbedLaunch]) -> Result<()> {
    write_records(&dir.join(PROBE_RANGES_CSV), range_totals(launches))?;
    write_records(
        &dir.join(PROBE_LAUNCHES_CSV),
        launches.iter().map(|l| LaunchCsv {
            correlation_id: l.correlation_id,
            kernel: &l.kernel,
            range_path: l.range_path.as_deref(),
            blocks: l.blocks,
            threads: l.threads,
            status: &l.status,
            blocks_once: l.blocks_once,
            blocks_missing: l.blocks_missing,
            blocks_repeated: l.blocks_repeated,
            first_block_start_ns: l.first_block_start_ns,
            last_block_end_ns: l.last_block_end_ns,
            blocks_inside_kernel: l.blocks_inside_kernel,
            clock_offset_ns: l.clock_offset_ns,
            clock_slack_ns: l.clock_slack_ns,
            clock_run_launches: l.clock_run_launches,
            readback_us: l.readback_us,
            variant: l.variant,
            source: l.source.as_deref(),
            graph_launches: l.graph_launches,
        }),
    )?;
    write_records(
        &dir.join(PROBES_CSV),
        launches.iter().flat_map(|l| {
            l.totals.iter().map(move |t| TotalCsv {
                correlation_id: l.correlation_id,
                kernel: &l.kernel,
                range_path: l.range_path.as_deref(),
                probe: &t.probe,
                field: &t.field,
                total: t.total,
                records: t.records,
            })
        }),
    )
}

impl Report {
    /// Joins probed launches to their kernel rows and places their blocks on the kernel
    /// rows' clock (module docs). A launch without a kernel row is kept and counted in a
    /// warning, as are launches whose blocks do not fit inside their kernel.
    pub fn attach_probes(&mut self, launches: Vec<ProbedLaunch>) {
        let rows: HashMap<u32, usize> = self.kernels.iter().enumerate().map(|(i, k)| (k.correlation_id, i)).collect();
        let measured = self.meta.time_source == TimeSource::Activity;
        let mut unjoined = 0;
        // (device, launch index, bracket) of the launches with blocks and a measured kernel.
        let mut brackets: Vec<(u32, usize, Bracket)> = Vec::new();
        let first = self.probes.len();
        for (n, mut launch) in launches.into_iter().enumerate() {
            match rows.get(&launch.correlation_id) {
                Some(&i) => {
                    let k = &self.kernels[i];
                    launch.range_path = Some(k.range_path.clone());
                    let times = k.start_ns.zip(k.end_ns).filter(|(s, e)| measured && e > s);
                    let blocks = launch.first_block_start_ns.zip(launch.last_block_end_ns);
                    if let (Some((start, end)), Some((first_ns, last_ns))) = (times, blocks) {
                        let bracket = Bracket { kernel_start_ns: start, kernel_end_ns: end, first_ns, last_ns };
                        brackets.push((k.device_id.unwrap_or(0), first + n, bracket));
                    }
                }
                // A graph node's correlation id is its capture call's, which has no kernel
                // row: its graph's kernels ran under the graph launches' ids.
                None if launch.graph_launches.is_some() => {}
                None => unjoined += 1,
            }
            self.probes.push(launch);
        }
        let devices: BTreeSet<u32> = brackets.iter().map(|b| b.0).collect();
        let mut outside = 0;
        for device in devices {
            let members: Vec<&(u32, usize, Bracket)> = brackets.iter().filter(|b| b.0 == device).collect();
            let fitted = DeviceClock::fit_runs(&members.iter().map(|b| b.2).collect::<Vec<_>>());
            for (&&(_, i, bracket), clock) in members.iter().zip(fitted) {
                let (lo, hi) = bracket.offsets();
                let inside = lo <= i128::from(clock.offset_ns) && i128::from(clock.offset_ns) <= hi;
                outside += usize::from(!inside);
                let l = &mut self.probes[i];
                l.blocks_inside_kernel = Some(inside);
                l.clock_offset_ns = Some(clock.offset_ns);
                l.clock_slack_ns = Some(clock.slack_ns);
                l.clock_run_launches = Some(clock.launches);
            }
        }
        if unjoined > 0 {
            self.meta.warnings.push(format!(
                "probes: {unjoined} probed launch(es) have no kernel row (a launch this session did not profile): \
                 they are in probe_launches.csv without a range"
            ));
        }
        if outside > 0 {
            self.meta.warnings.push(format!(
                "probes: the blocks of {outside} launch(es) span longer than their kernel's activity interval \
                 (probe_launches.csv, blocks_inside_kernel)"
            ));
        }
    }

    /// The probe columns of kernels.csv (and kernels.parquet): `(header, value per kernel
    /// row)`; none when the session probed nothing. A kernel row without a probed launch, or
    /// a launch without the value, is `None` (blank).
    pub(crate) fn probe_columns(&self) -> Vec<(String, ProbeValues)> {
        if self.probes.is_empty() {
            return Vec::new();
        }
        let by_id: HashMap<u32, &ProbedLaunch> = self.probes.iter().map(|l| (l.correlation_id, l)).collect();
        let launch = |i: usize| by_id.get(&self.kernels[i].correlation_id).copied();
        let n = self.kernels.len();
        let mut fields: Vec<(String, String)> = Vec::new();
        for t in self.probes.iter().flat_map(|l| &l.totals) {
            let key = (t.probe.clone(), t.field.clone());
            if !fields.contains(&key) {
                fields.push(key);
            }
        }
        let mut columns = vec![
            (
                "probe_status".to_string(),
                ProbeValues::Text((0..n).map(|i| launch(i).map(|l| l.status.clone())).collect()),
            ),
            (
                "probe_source".to_string(),
                ProbeValues::Text((0..n).map(|i| launch(i).and_then(|l| l.source.clone())).collect()),
            ),
        ];
        let totals: Vec<BTreeMap<(&str, &str), u64>> = (0..n)
            .map(|i| {
                launch(i)
                    .map(|l| l.totals.iter().map(|t| ((t.probe.as_str(), t.field.as_str()), t.total)).collect())
                    .unwrap_or_default()
            })
            .collect();
        for (probe, field) in &fields {
            let values = totals.iter().map(|m| m.get(&(probe.as_str(), field.as_str())).copied()).collect();
            columns.push((format!("probe.{probe}.{field}"), ProbeValues::Count(values)));
        }
        columns.push((
            "probe_blocks_inside_kernel".to_string(),
            ProbeValues::Flag((0..n).map(|i| launch(i).and_then(|l| l.blocks_inside_kernel)).collect()),
        ));
        columns.push((
            "probe_variant".to_string(),
            ProbeValues::Count((0..n).map(|i| launch(i).and_then(|l| l.variant).map(u64::from)).collect()),
        ));
        columns
    }
}

/// One probe column of the kernel table, typed: one value per kernel row.
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeValues {
    /// `probe_status`.
    Text(Vec<Option<String>>),
    /// Totals and the variant.
    Count(Vec<Option<u64>>),
    /// `probe_blocks_inside_kernel`.
    Flag(Vec<Option<bool>>),
}

impl ProbeValues {
    /// Row `row` as the CSV writes it (blank when `None`).
    pub fn text(&self, row: usize) -> String {
        match self {
            ProbeValues::Text(v) => v[row].clone().unwrap_or_default(),
            ProbeValues::Count(v) => v[row].map(|x| x.to_string()).unwrap_or_default(),
            ProbeValues::Flag(v) => v[row].map(|x| x.to_string()).unwrap_or_default(),
        }
    }
}
