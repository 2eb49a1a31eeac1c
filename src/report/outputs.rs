//! Every output of a report at once: [`Report::write_all`] and [`Report::write_all_as`] write
//! the files of a run's directory, [`Report::summary`] and [`Report::summary_with`] the text
//! printed at its end.
//!
//! Above the exporters: it calls each of them and none of them names it.

use crate::report::model::Report;
use crate::report::runs::devices;
use crate::report::tables::formats::OutputFormats;
use crate::report::tables::parquet::tables as pq;
use crate::report::tables::{parquet, pc_csv, probes, regions};
use crate::report::text::summary::{Summary, SummaryOptions};
use crate::report::timeline::kineto::{TraceFormat, TraceOptions};
use crate::report::timeline::probe_trace;

/// The files [`Report::write_all`] writes (and `regions.csv` when the report has in-kernel
/// region timers).
pub const OUTPUT_FILES: [&str; 6] =
    ["ranges.csv", "kernels.csv", "transfers.csv", "stats.csv", "report.json", "trace.json"];

/// The whole-file row tables a streamed report does not write (and removes when an earlier
/// checkpoint left them).
pub const WHOLE_FILE_TABLES: [&str; 8] = [
    "ranges.csv",
    "kernels.csv",
    "transfers.csv",
    "stats.csv",
    pq::RANGES_PARQUET,
    pq::KERNELS_PARQUET,
    pq::TRANSFERS_PARQUET,
    pq::STATS_PARQUET,
];

/// The file [`Report::write_all`] adds when the session sampled PM counters.
pub const PM_CSV: &str = "pm.csv";

impl Report {
    /// Writes every output into `dir` (created if missing) in the default formats (CSV and
    /// Parquet, [`OutputFormats::default`]); see [`Report::write_all_as`].
    pub fn write_all(&self, dir: impl AsRef<std::path::Path>) -> crate::error::Result<()> {
        self.write_all_as(dir, OutputFormats::default())
    }

    /// Writes every output into `dir` (created if missing): `report.json` and `trace.json`,
    /// and in each of `formats` the tables of [`OUTPUT_FILES`] (`ranges`, `kernels`,
    /// `transfers`, `stats`), `pm` when the report has PM sampling and the probe tables when
    /// it probed ([`parquet::tables`] names the Parquet files).
    pub fn write_all_as(&self, dir: impl AsRef<std::path::Path>, formats: OutputFormats) -> crate::error::Result<()> {
        self.write_all_traced(dir, formats, &TraceOptions::default())
    }

    /// [`Report::write_all_as`] with `trace.json` in the form `trace` asks for (gmprof's
    /// Chrome trace, or the Kineto form that Holistic Trace Analysis reads).
    pub fn write_all_traced(
        &self,
        dir: impl AsRef<std::path::Path>,
        formats: OutputFormats,
        trace: &TraceOptions,
    ) -> crate::error::Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| crate::error::Error::io(dir, e))?;
        if self.streamed.is_some() {
            // The rows are in the streamed part files; a whole-file table of an earlier
            // checkpoint would hold only the run's start, so it goes.
            // PM sampling's values and samples are in `pm/` and `pm_samples/` then.
            for name in WHOLE_FILE_TABLES.iter().chain(&[PM_CSV, pq::PM_PARQUET]) {
                match std::fs::remove_file(dir.join(name)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(crate::error::Error::io(dir.join(name), e))
                    }
                    _ => {}
                }
            }
        } else {
            self.write_row_tables(dir, formats)?;
        }
        if !self.range_devices.is_empty() {
            if formats.csv {
                self.write_range_devices_csv(dir.join(devices::RANGE_DEVICES_CSV))?;
            }
            if formats.parquet {
                self.write_range_devices_parquet(dir.join(pq::RANGE_DEVICES_PARQUET))?;
            }
        }
        self.write_json(dir.join("report.json"))?;
        self.write_extras(dir, formats, trace)
    }

    /// The whole-file row tables: ranges, kernels, transfers and stats.
    fn write_row_tables(&self, dir: &std::path::Path, formats: OutputFormats) -> crate::error::Result<()> {
        if formats.csv {
            self.write_csv(dir.join("ranges.csv"))?;
            self.write_kernels_csv(dir.join("kernels.csv"))?;
            self.write_transfers_csv(dir.join("transfers.csv"))?;
            self.write_stats_csv(dir.join("stats.csv"))?;
        }
        if formats.parquet {
            self.write_ranges_parquet(dir.join(pq::RANGES_PARQUET))?;
            self.write_kernels_parquet(dir.join(pq::KERNELS_PARQUET))?;
            self.write_transfers_parquet(dir.join(pq::TRANSFERS_PARQUET))?;
            self.write_stats_parquet(dir.join(pq::STATS_PARQUET))?;
        }
        Ok(())
    }

    /// PM, PC, region timers, probes and the trace.
    fn write_extras(
        &self,
        dir: &std::path::Path,
        formats: OutputFormats,
        trace: &TraceOptions,
    ) -> crate::error::Result<()> {
        if self.pm.is_some() && self.streamed.is_none() {
            if formats.csv {
                self.write_pm_csv(dir.join(PM_CSV))?;
            }
            if formats.parquet {
                self.write_pm_parquet(dir.join(pq::PM_PARQUET))?;
            }
        }
        if self.pc.is_some() {
            if formats.csv {
                self.write_stalls_csv(dir.join(pc_csv::STALLS_CSV))?;
                self.write_pc_samples_csv(dir.join(pc_csv::PC_SAMPLES_CSV))?;
            }
            if formats.parquet {
                self.write_stalls_parquet(dir.join(parquet::pc::STALLS_PARQUET))?;
                self.write_pc_samples_parquet(dir.join(parquet::pc::PC_SAMPLES_PARQUET))?;
            }
        }
        if !self.device_timers.is_empty() {
            self.write_regions_csv(dir.join(regions::REGIONS_CSV))?;
        }
        if self.rotation.is_some() {
            self.write_positions_csv(dir.join(crate::report::tables::positions::POSITIONS_CSV))?;
        }
        if !self.probes.is_empty() {
            if formats.csv {
                probes::write_probe_csvs(dir, &self.probes)?;
            }
            if formats.parquet {
                pq::write_probe_parquets(dir, &self.probes)?;
            }
            self.write_probe_trace(dir.join(probe_trace::PROBE_TRACE_JSON))?;
        }
        if self.streamed.is_some() {
            // The rows are in the part files: the whole run at step granularity.
            if trace.format == TraceFormat::Kineto {
                tracing::warn!(
                    "gmprof: a streamed run's trace.json is its step timeline, not a Kineto trace: the flight \
                     recorder's windows (--slow-step) are Kineto traces, or set GMPROF_STREAM=0 for one of the \
                     whole run"
                );
            }
            return self.write_step_trace(dir).map(|_| ());
        }
        self.write_trace(dir.join("trace.json"), trace)
    }

    /// The summary table: range rows grouped by path with numbers folded, the top
    /// [`DEFAULT_TOP`](crate::report::text::summary::DEFAULT_TOP) groups by share (see
    /// [`summary`](crate::report::text::summary)).
    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }

    /// The summary table with other grouping, trimming or warm-up options.
    pub fn summary_with(&self, options: &SummaryOptions) -> Summary {
        Summary::with(self, options)
    }
}
