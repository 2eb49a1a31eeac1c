//! JSON exporter and reader: the whole [`Report`], round-trippable.
//!
//! Layer 3 (the safe profiler), report output. Everything goes through `serde_json`; missing
//! values are `null`. A saved report can be read back with [`Report::from_json`] (e.g. by
//! `gmprof report` to print a summary of an earlier run).

use std::io::{Read, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::tables::csv::write_file;

impl Report {
    /// The report as pretty-printed JSON.
    pub fn to_json_string(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::Serialize { what: "JSON report", message: e.to_string() })
    }

    /// Writes the report as pretty-printed JSON to `out`.
    pub fn write_json_to<W: Write>(&self, out: W) -> Result<()> {
        serde_json::to_writer_pretty(out, self)
            .map_err(|e| Error::Serialize { what: "JSON report", message: e.to_string() })
    }

    /// Writes the report as pretty-printed JSON to a file.
    pub fn write_json(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| {
            self.write_json_to(&mut *out)?;
            // A trailing newline, as text files have.
            out.write_all(b"\n").map_err(|e| Error::io(path.as_ref(), e))
        })
    }

    /// Reads a report written by [`Report::write_json`] or [`Report::to_json_string`].
    ///
    /// Text that is not a gmprof report is [`Error::InvalidConfig`], with serde's message
    /// (line and column).
    pub fn from_json(text: &str) -> Result<Report> {
        serde_json::from_str(text).map_err(not_a_report)
    }

    /// Reads a report from a JSON reader.
    pub fn from_json_reader<R: Read>(reader: R) -> Result<Report> {
        serde_json::from_reader(std::io::BufReader::new(reader)).map_err(not_a_report)
    }

    /// Reads a report from a JSON file, or a zstd-compressed one (`report.json.zst`).
    pub fn read_json(path: impl AsRef<Path>) -> Result<Report> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let read = if path.extension().is_some_and(|e| e == "zst") {
            ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(file))
                .map_err(|e| Error::InvalidConfig(format!("{}: not zstd: {e}", path.display())))
                .and_then(Self::from_json_reader)
        } else {
            Self::from_json_reader(file)
        };
        read.map_err(|e| match e {
            Error::InvalidConfig(message) => Error::InvalidConfig(format!("{}: {message}", path.display())),
            other => other,
        })
    }
}

fn not_a_report(error: serde_json::Error) -> Error {
    Error::InvalidConfig(format!("not a gmprof JSON report: {error}"))
}
