//! In-kernel region timers in the report: the join to kernel rows and `regions.csv`.
//!
//! [`Report::attach_device_timers`] joins each [`TimedLaunch`] to the kernel row of its
//! correlation id (kernel name, range path) and computes [`Report::device_regions`];
//! `report.json` then holds both. `regions.csv` ([`REGIONS_CSV`]) is those statistics, one
//! row per (kernel, region, scope, key), after `# ` metadata lines that count everything the
//! decoder left out. The regions' tracks on the timeline are
//! [`timeline::device_timers`](crate::report::timeline::device_timers)'.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use ::csv::{QuoteStyle, WriterBuilder};
use serde::Serialize;

use super::csv::write_file;
use crate::device_timers::{region_stats, TimedLaunch};
use crate::error::{Error, Result};
use crate::report::model::Report;

/// The file name of the region statistics.
pub const REGIONS_CSV: &str = "regions.csv";

#[derive(Serialize)]
struct MetaCount<'a> {
    what: &'a str,
    value: u64,
}

impl Report {
    /// Joins `launches` to their kernel rows and (re)computes [`Report::device_regions`]. A
    /// launch whose correlation id names no kernel row is kept (labelled by its own label)
    /// and counted in a warning.
    pub fn attach_device_timers(&mut self, launches: Vec<TimedLaunch>) {
        let rows: HashMap<u32, usize> = self.kernels.iter().enumerate().map(|(i, k)| (k.correlation_id, i)).collect();
        let mut unjoined = 0;
        for mut launch in launches {
            match launch.correlation_id.and_then(|id| rows.get(&id)) {
                Some(&i) => {
                    let k = &self.kernels[i];
                    launch.kernel_name = k.kernel_name.clone().or_else(|| k.mangled_name.clone());
                    launch.range_path = Some(k.range_path.clone());
                }
                None => unjoined += 1,
            }
            self.device_timers.push(launch);
        }
        if unjoined > 0 {
            self.meta.warnings.push(format!(
                "device timers: {unjoined} launch(es) have no kernel row (no correlation id, or a launch this session \
                 did not profile): their regions are in regions.csv under their label but not on the timeline"
            ));
        }
        let labelled: Vec<(String, &TimedLaunch)> = self.device_timers.iter().map(|l| (launch_label(l), l)).collect();
        self.device_regions = region_stats(&labelled);
    }

    /// Writes `regions.csv` (see the [module docs](self)) to `out`.
    pub fn write_regions_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        const WHAT: &str = "regions CSV";
        let fail = |e: &dyn std::fmt::Display| Error::Serialize { what: WHAT, message: e.to_string() };
        self.write_metadata(&mut out, "device regions", WHAT)?;
        let t = &self.device_timers;
        let sum = |f: &dyn Fn(&TimedLaunch) -> u64| t.iter().map(f).sum::<u64>();
        let counts = [
            MetaCount { what: "launches", value: t.len() as u64 },
            MetaCount { what: "overflow_records", value: sum(&|l| l.overflow()) },
            MetaCount { what: "torn_records", value: sum(&|l| l.torn) },
            MetaCount { what: "stray_records", value: sum(&|l| l.stray) },
            MetaCount { what: "unclosed_begins", value: sum(&|l| l.spans.unclosed_begins) },
            MetaCount { what: "unmatched_ends", value: sum(&|l| l.spans.unmatched_ends) },
            MetaCount { what: "launches_with_lanes_not_once", value: sum(&|l| u64::from(!l.spans.lanes.each_once())) },
        ];
        let line = counts.iter().map(|c| format!("{}={}", c.what, c.value)).collect::<Vec<_>>().join(" ");
        writeln!(out, "# device timers: {line}").map_err(|e| fail(&e))?;
        writeln!(out, "# durations by %globaltimer; percentiles by nearest rank; key: the SM or lane of scope sm/lane")
            .map_err(|e| fail(&e))?;
        let mut w = WriterBuilder::new().quote_style(QuoteStyle::NonNumeric).from_writer(out);
        if self.device_regions.is_empty() {
            w.write_record(REGIONS_COLUMNS).map_err(|e| fail(&e))?;
        }
        for row in &self.device_regions {
            w.serialize(row).map_err(|e| fail(&e))?;
        }
        w.flush().map_err(|e| fail(&e))
    }

    /// Writes `regions.csv` to a file.
    pub fn write_regions_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_regions_csv_to(out))
    }
}

/// Columns of `regions.csv` (the fields of [`crate::device_timers::RegionStats`]).
pub const REGIONS_COLUMNS: [&str; 14] = [
    "kernel",
    "region",
    "region_id",
    "scope",
    "key",
    "launches",
    "count",
    "total_ns",
    "mean_ns",
    "min_ns",
    "max_ns",
    "p50_ns",
    "p99_ns",
    "payload_sum",
];

/// The label a launch's statistics go under: kernel name, own label, or `<unknown kernel>`.
fn launch_label(l: &TimedLaunch) -> String {
    l.kernel_name.clone().or_else(|| l.label.clone()).unwrap_or_else(|| "<unknown kernel>".into())
}
