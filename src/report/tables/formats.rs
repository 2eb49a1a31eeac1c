//! Which table formats a run writes: CSV, Parquet or both (`--format csv,parquet`,
//! `GMPROF_FORMAT`).
//!
//! Layer 3, report output. The default is both: the CSV files are what a person opens and
//! what the goldens pin (byte for byte as before Parquet existed), the Parquet files are what
//! DuckDB, Polars, pandas and Spark load at scale ([`parquet`](super::parquet)). Writing both
//! costs little: the Parquet copy of a table is a fraction of the CSV's size and written
//! faster (BENCHMARKS.md). `report.json` and `trace.json` are written whatever the formats.

use std::fmt;

use crate::error::{Error, Result};

/// The environment variable `gmprof run --format` sets for the profiled processes.
pub const FORMAT_ENV: &str = "GMPROF_FORMAT";

/// The table formats to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputFormats {
    /// `ranges.csv`, `kernels.csv`, `transfers.csv`, `stats.csv` (and `pm.csv`, probe CSVs).
    pub csv: bool,
    /// The same tables as `.parquet`.
    pub parquet: bool,
}

impl Default for OutputFormats {
    /// CSV and Parquet.
    fn default() -> Self {
        Self { csv: true, parquet: true }
    }
}

impl OutputFormats {
    /// CSV only (the outputs of gmprof before Parquet).
    pub const CSV: OutputFormats = OutputFormats { csv: true, parquet: false };
    /// Parquet only.
    pub const PARQUET: OutputFormats = OutputFormats { csv: false, parquet: true };

    /// Parses `csv`, `parquet` or `csv,parquet` (case-insensitive, any order, blanks ignored).
    pub fn parse(text: &str) -> Result<Self> {
        let mut formats = OutputFormats { csv: false, parquet: false };
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word.to_ascii_lowercase().as_str() {
                "csv" => formats.csv = true,
                "parquet" => formats.parquet = true,
                other => {
                    return Err(Error::InvalidConfig(format!(
                        "unknown output format '{other}' in '{text}': use csv, parquet or csv,parquet"
                    )))
                }
            }
        }
        if !formats.csv && !formats.parquet {
            return Err(Error::InvalidConfig(format!("no output format in '{text}': use csv, parquet or csv,parquet")));
        }
        Ok(formats)
    }

    /// The formats `GMPROF_FORMAT` asks for through `lookup` (an environment); the default
    /// when it is unset or blank.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        match lookup(FORMAT_ENV).filter(|v| !v.trim().is_empty()) {
            None => Ok(Self::default()),
            Some(v) => Self::parse(&v).map_err(|e| match e {
                Error::InvalidConfig(m) => Error::InvalidConfig(format!("{FORMAT_ENV}: {m}")),
                other => other,
            }),
        }
    }

    /// The formats of this process's environment (`GMPROF_FORMAT`).
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }
}

impl fmt::Display for OutputFormats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.csv, self.parquet) {
            (true, true) => f.write_str("csv,parquet"),
            (true, false) => f.write_str("csv"),
            (false, true) => f.write_str("parquet"),
            (false, false) => f.write_str("none"),
        }
    }
}

impl std::str::FromStr for OutputFormats {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_refuses_unknown_words() {
        assert_eq!(OutputFormats::parse("csv").unwrap(), OutputFormats::CSV);
        assert_eq!(OutputFormats::parse(" Parquet ").unwrap(), OutputFormats::PARQUET);
        assert_eq!(OutputFormats::parse("parquet,csv").unwrap(), OutputFormats::default());
        let e = OutputFormats::parse("csv,arrow").unwrap_err().to_string();
        assert!(e.contains("'arrow'") && e.contains("csv,parquet"), "{e}");
        assert!(OutputFormats::parse(" , ").is_err());
        assert_eq!(OutputFormats::from_lookup(|_| None).unwrap(), OutputFormats::default());
        assert_eq!(OutputFormats::from_lookup(|_| Some("csv".into())).unwrap(), OutputFormats::CSV);
        let e = OutputFormats::from_lookup(|_| Some("xml".into())).unwrap_err().to_string();
        assert!(e.starts_with("invalid configuration: GMPROF_FORMAT") || e.contains("GMPROF_FORMAT"), "{e}");
        assert_eq!(OutputFormats::default().to_string(), "csv,parquet");
    }
}
