//! CSV exporters: per-range, per-kernel and per-transfer tables (and the statistics table
//! of [`crate::report::tables::stats`]).
//!
//! Layer 3 (the safe profiler), report output. Each file starts with metadata lines that
//! begin with `# ` (mode, time source, metric rules, dropped and flagged counts, warnings),
//! then a header and one record per row, written by the `csv` crate. Read it back with
//! `csv::ReaderBuilder::new().comment(Some(b'#'))` or pandas `read_csv(path, comment='#')`.
//!
//! Why every text field is quoted ([`QuoteStyle::NonNumeric`](::csv::QuoteStyle)): pandas
//! cuts an *unquoted* field at a `#` (its comment character) even in the middle of a line,
//! and a range or kernel name may contain one. Quoting also keeps a name that begins with
//! `#` from being read as a comment line. The first column of each table is numeric, and
//! metadata text has its line breaks escaped, so a comment never spills into the data.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use ::csv::{QuoteStyle, WriterBuilder};

use crate::error::{Error, Result};
use crate::model::RangeId;
use crate::report::model::Report;

/// Columns of the per-range table before the metric columns.
pub const RANGE_COLUMNS: [&str; 22] = [
    "range_slot",
    "range_generation",
    "path",
    "name",
    "depth",
    "instance",
    "thread",
    "kernel_count",
    "self_kernel_count",
    "flagged_kernel_count",
    "gpu_time_ns",
    "wall_time_ns",
    "start_ns",
    "end_ns",
    "gpu_busy_ns",
    "transfer_count",
    "transfer_bytes",
    "memcpy_bytes",
    "memset_bytes",
    "untimed_transfer_count",
    "transfer_time_ns",
    "transfer_gbps",
];

/// Columns of the per-range table after the metric columns.
pub const RANGE_DERIVED_COLUMNS: [&str; 5] =
    ["dram_read_bytes", "dram_write_bytes", "dram_read_gbps", "dram_write_gbps", "dram_total_gbps"];

/// Columns of the per-kernel table before the metric columns.
pub const KERNEL_COLUMNS: [&str; 29] = [
    "correlation_id",
    "cycle",
    "ordinal",
    "range_slot",
    "range_generation",
    "range_path",
    "kernel_name",
    "mangled_name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "shared_memory_bytes",
    "stream_id",
    "thread",
    "device_id",
    "start_ns",
    "end_ns",
    "duration_ns",
    "time_source",
    "range_duration_ns",
    "status",
    "granularity",
    "graph_id",
    "graph_node_id",
    "graph_kernels",
];

/// Columns of the per-transfer table.
pub const TRANSFER_COLUMNS: [&str; 18] = [
    "correlation_id",
    "kind",
    "bytes",
    "start_ns",
    "end_ns",
    "duration_ns",
    "gbps",
    "timing",
    "stream_id",
    "device_id",
    "range_slot",
    "range_generation",
    "range_path",
    "thread",
    "api_name",
    "status",
    "graph_id",
    "graph_node_id",
];

/// Writes one field at a time through a reused buffer (no allocation per field).
pub(crate) struct RecordWriter<W: Write> {
    csv: ::csv::Writer<W>,
    buffer: String,
    what: &'static str,
}

impl<W: Write> RecordWriter<W> {
    pub(crate) fn new(out: W, what: &'static str) -> Self {
        let csv = WriterBuilder::new().quote_style(QuoteStyle::NonNumeric).from_writer(out);
        Self { csv, buffer: String::new(), what }
    }

    pub(crate) fn text(&mut self, value: &str) -> Result<()> {
        self.csv.write_field(value).map_err(|e| csv_error(self.what, e))
    }

    pub(crate) fn display(&mut self, value: impl std::fmt::Display) -> Result<()> {
        self.buffer.clear();
        // Writing to a String cannot fail.
        let _ = write!(self.buffer, "{value}");
        self.csv.write_field(self.buffer.as_bytes()).map_err(|e| csv_error(self.what, e))
    }

    pub(crate) fn optional(&mut self, value: Option<impl std::fmt::Display>) -> Result<()> {
        match value {
            Some(v) => self.display(v),
            None => self.text(""),
        }
    }

    fn range_id(&mut self, id: Option<RangeId>) -> Result<()> {
        self.optional(id.map(|i| i.slot))?;
        self.optional(id.map(|i| i.generation))
    }

    pub(crate) fn end_record(&mut self) -> Result<()> {
        self.csv.write_record(None::<&[u8]>).map_err(|e| csv_error(self.what, e))
    }

    pub(crate) fn header<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        for name in names {
            self.text(name)?;
        }
        self.end_record()
    }

    pub(crate) fn finish(mut self) -> Result<()> {
        self.csv.flush().map_err(|e| Error::Serialize { what: self.what, message: e.to_string() })
    }
}

fn csv_error(what: &'static str, error: ::csv::Error) -> Error {
    Error::Serialize { what, message: error.to_string() }
}

/// A metadata line's text with line breaks and other control characters escaped, so it
/// stays one comment line.
fn comment_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl Report {
    /// The `# ` metadata lines that head every CSV file.
    pub fn csv_metadata_lines(&self, table: &str) -> Vec<String> {
        let m = &self.meta;
        let mut lines = vec![
            format!("gmprof {} {table}", m.gmprof_version),
            format!("mode: {}", m.mode.as_str()),
            format!("time_source: {}", m.time_source),
            format!(
                "device: {} (chip {})",
                m.device_name.as_deref().unwrap_or("unknown"),
                m.chip.as_deref().unwrap_or("unknown")
            ),
        ];
        if !m.devices.is_empty() {
            let each: Vec<String> =
                m.devices.iter().map(|d| format!("{} ({} kernels)", d.device_id, d.kernel_count)).collect();
            lines.push(format!("devices: {}", each.join(", ")));
        }
        for rule in &m.metrics {
            lines.push(format!(
                "metric: {} kind={} unit={} rule={} inputs={}",
                rule.metric.name,
                kind_name(rule.metric.kind),
                rule.metric.unit,
                rule.rule.as_str(),
                rule.inputs.join("+")
            ));
        }
        for derived in &m.derived_metrics {
            let inputs = if derived.inputs.is_empty() {
                "not collected (column empty)".to_owned()
            } else {
                derived.inputs.join("+")
            };
            lines.push(format!(
                "derived: {} unit={} rule={} inputs={}",
                derived.name,
                derived.unit,
                derived.rule.as_str(),
                inputs
            ));
        }
        lines.push(format!("counter_cycles: {}", m.counter_cycles));
        lines.push(format!("kernels: {}", m.kernel_count));
        lines.push(format!(
            "total_gpu_time_ns: {}",
            m.total_gpu_time_ns.map_or_else(|| "not measured".to_owned(), |t| t.to_string())
        ));
        lines.push(format!("dropped_counter_ranges: {}", m.dropped_counter_ranges));
        lines.push(format!("dropped_activity_records: {}", m.dropped_activity_records));
        lines.push(format!("flagged_kernel_rows: {}", m.flagged_kernel_rows));
        lines.push(format!("orphan_counter_ranges: {}", m.orphan_counter_ranges));
        lines.push(format!("transfers: {}", self.transfers.len()));
        let untimed = self.transfers.iter().filter(|t| !t.is_timed()).count();
        if untimed > 0 {
            lines.push(format!(
                "untimed_transfers: {untimed} (timing api_call: kind, bytes and range from the API call; no activity \
                 record, so no start, end, duration or stream)"
            ));
        }
        if let Some(clock) = &m.clock {
            lines.push(format!(
                "clock: cupti_ns {} = unix_ns {} at start, cupti_ns {} = unix_ns {} at finish",
                clock.start.cupti_ns, clock.start.unix_ns, clock.finish.cupti_ns, clock.finish.unix_ns
            ));
        }
        if let Some(drift) = m.clock_drift_ns {
            lines.push(format!("clock_drift_ns: {drift}"));
        }
        for warning in &m.warnings {
            lines.push(format!("warning: {warning}"));
        }
        lines.into_iter().map(|l| comment_text(&l)).collect()
    }

    pub(crate) fn write_metadata<W: Write>(&self, out: &mut W, table: &str, what: &'static str) -> Result<()> {
        for line in self.csv_metadata_lines(table) {
            writeln!(out, "# {line}").map_err(|e| Error::Serialize { what, message: e.to_string() })?;
        }
        Ok(())
    }

    /// Writes the per-range CSV (metadata lines, header, one record per range row) to `out`.
    pub fn write_csv_to<W: Write>(&self, out: W) -> Result<()> {
        self.write_range_table(out, "per-range report", "per-range CSV", self.ranges.iter().map(|r| (None, r)), false)
    }

    /// Writes `range_devices.csv`'s content (each range instance's row on each device, when
    /// the process profiled several GPUs; [`Report::range_devices`]) to `out`.
    pub fn write_range_devices_csv_to<W: Write>(&self, out: W) -> Result<()> {
        let rows = self.range_devices.iter().map(|d| (Some(d.device_id), &d.row));
        self.write_range_table(out, "per-range report by device", "per-range-by-device CSV", rows, true)
    }

    /// Writes `range_devices.csv` to a file.
    pub fn write_range_devices_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_range_devices_csv_to(out))
    }

    fn write_range_table<'a, W: Write>(
        &self,
        mut out: W,
        table: &str,
        what: &'static str,
        rows: impl Iterator<Item = (Option<u32>, &'a crate::analysis::aggregate::RangeRow)>,
        device_column: bool,
    ) -> Result<()> {
        self.write_metadata(&mut out, table, what)?;
        let mut w = RecordWriter::new(out, what);
        let metric_names = self.metric_names();
        w.header(
            device_column
                .then_some("device_id")
                .into_iter()
                .chain(RANGE_COLUMNS.iter().copied())
                .chain(metric_names.iter().copied())
                .chain(RANGE_DERIVED_COLUMNS.iter().copied()),
        )?;
        for (device, row) in rows {
            if device_column {
                w.optional(device)?;
            }
            w.range_id(row.range_id)?;
            w.text(&row.path)?;
            w.text(&row.name)?;
            w.display(row.depth)?;
            w.display(row.instance)?;
            w.optional(row.thread)?;
            w.display(row.kernel_count)?;
            w.display(row.self_kernel_count)?;
            w.display(row.flagged_kernel_count)?;
            w.optional(row.gpu_time_ns)?;
            w.optional(row.wall_time_ns)?;
            w.optional(row.start_ns)?;
            w.optional(row.end_ns)?;
            w.optional(row.gpu_busy_ns)?;
            w.display(row.transfer_count)?;
            w.display(row.transfer_bytes)?;
            w.display(row.memcpy_bytes)?;
            w.display(row.memset_bytes)?;
            w.display(row.untimed_transfer_count)?;
            w.optional(row.transfer_time_ns)?;
            w.optional(row.transfer_gbps)?;
            for i in 0..metric_names.len() {
                w.optional(row.metrics.get(i).copied().flatten())?;
            }
            w.optional(row.dram_read_bytes)?;
            w.optional(row.dram_write_bytes)?;
            w.optional(row.dram_read_gbps)?;
            w.optional(row.dram_write_gbps)?;
            w.optional(row.dram_total_gbps)?;
            w.end_record()?;
        }
        w.finish()
    }

    /// Writes the per-kernel CSV (metadata lines, header, one record per kernel) to `out`.
    pub fn write_kernels_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        const WHAT: &str = "per-kernel CSV";
        self.write_metadata(&mut out, "per-kernel report", WHAT)?;
        let mut w = RecordWriter::new(out, WHAT);
        let metric_names = self.metric_names();
        let probes = self.probe_columns();
        w.header(
            KERNEL_COLUMNS
                .iter()
                .copied()
                .chain(metric_names.iter().copied())
                .chain(probes.iter().map(|(name, _)| name.as_str())),
        )?;
        for (row, k) in self.kernels.iter().enumerate() {
            w.display(k.correlation_id)?;
            w.optional(k.cycle)?;
            w.optional(k.ordinal)?;
            w.range_id(k.range_id)?;
            w.text(&k.range_path)?;
            w.text(k.kernel_name.as_deref().unwrap_or(""))?;
            w.text(k.mangled_name.as_deref().unwrap_or(""))?;
            for axis in 0..3 {
                w.optional(k.grid.map(|g| g[axis]))?;
            }
            for axis in 0..3 {
                w.optional(k.block.map(|b| b[axis]))?;
            }
            w.optional(k.registers_per_thread)?;
            w.optional(k.shared_memory_bytes)?;
            w.optional(k.stream_id)?;
            w.optional(k.thread)?;
            w.optional(k.device_id)?;
            w.optional(k.start_ns)?;
            w.optional(k.end_ns)?;
            w.optional(k.duration_ns)?;
            w.text(k.time_source.as_str())?;
            w.optional(k.range_duration_ns)?;
            w.text(k.status.as_str())?;
            w.text(k.granularity.as_str())?;
            w.optional(k.graph_id)?;
            w.optional(k.graph_node_id)?;
            w.optional(k.graph_kernels)?;
            for i in 0..metric_names.len() {
                w.optional(k.metrics.get(i).copied().flatten())?;
            }
            for (_, values) in &probes {
                w.text(&values.text(row))?;
            }
            w.end_record()?;
        }
        w.finish()
    }

    /// Writes the per-transfer CSV (metadata lines, header, one record per memcpy/memset) to
    /// `out`.
    pub fn write_transfers_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        const WHAT: &str = "per-transfer CSV";
        self.write_metadata(&mut out, "per-transfer report", WHAT)?;
        let mut w = RecordWriter::new(out, WHAT);
        w.header(TRANSFER_COLUMNS)?;
        for t in &self.transfers {
            w.display(t.correlation_id)?;
            w.text(t.kind.as_str())?;
            w.display(t.bytes)?;
            w.optional(t.start_ns)?;
            w.optional(t.end_ns)?;
            w.optional(t.duration_ns)?;
            w.optional(t.gbps())?;
            w.text(t.timing.as_str())?;
            w.optional(t.stream_id)?;
            w.optional(t.device_id)?;
            w.range_id(t.range_id)?;
            w.text(&t.range_path)?;
            w.optional(t.thread)?;
            w.text(t.api_name.as_deref().unwrap_or(""))?;
            w.text(t.status.as_str())?;
            w.optional(t.graph_id)?;
            w.optional(t.graph_node_id)?;
            w.end_record()?;
        }
        w.finish()
    }

    /// Writes the per-range CSV to a file.
    pub fn write_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_csv_to(out))
    }

    /// Writes the per-kernel CSV to a file.
    pub fn write_kernels_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_kernels_csv_to(out))
    }

    /// Writes the per-transfer CSV to a file.
    pub fn write_transfers_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_transfers_csv_to(out))
    }
}

fn kind_name(kind: crate::model::MetricKind) -> &'static str {
    match kind {
        crate::model::MetricKind::Counter => "counter",
        crate::model::MetricKind::Ratio => "ratio",
        crate::model::MetricKind::Throughput => "throughput",
    }
}

/// Creates `path`, hands a buffered writer to `write`, and flushes it; I/O errors name the
/// file.
/// Writes `rows` (serde records, a header row first) to `path` as CSV, atomically as
/// [`write_file`] does.
pub(crate) fn write_records<T: serde::Serialize>(path: &Path, rows: impl IntoIterator<Item = T>) -> Result<()> {
    let fail = |e: ::csv::Error| Error::InvalidState(format!("{}: {e}", path.display()));
    write_file(path, |out| {
        let mut w = ::csv::Writer::from_writer(out);
        for r in rows {
            w.serialize(r).map_err(fail)?;
        }
        w.flush().map_err(|e| Error::io(path, e))
    })
}

pub(crate) fn write_file(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    // Written beside the target and renamed over it: a reader (or a process killed halfway)
    // sees the previous complete file or the new complete file, never a torn one. This is
    // what lets checkpoints rewrite the outputs of a running program.
    let tmp = temp_path(path);
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut out = BufWriter::new(file);
        write(&mut out)?;
        out.flush().map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `dir/.name.tmp-PID` for `dir/name`: hidden, and unique to the writing process.
fn temp_path(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_file_replaces_whole_files_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ranges.csv");
        write_file(&path, |out| out.write_all(b"first\n").map_err(|e| Error::io(&path, e))).unwrap();
        let failed = write_file(&path, |out| {
            out.write_all(b"half of a second vers").map_err(|e| Error::io(&path, e))?;
            Err(Error::InvalidState("killed halfway".into()))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\n", "a failed write leaves the old file whole");
        write_file(&path, |out| out.write_all(b"second\n").map_err(|e| Error::io(&path, e))).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["ranges.csv"], "no temporary file is left behind");
    }

    #[test]
    fn comment_text_stays_on_one_line() {
        assert_eq!(comment_text("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(comment_text("naïve ✓"), "naïve ✓");
    }
}
