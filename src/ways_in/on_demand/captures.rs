//! Where captures are written: `DIR/capture-K/<process>/`, numbered, never overwritten.
//!
//! Layer 3, file names only (no CUPTI). `DIR` is the run's output directory (`gmprof run -o`),
//! `K` the capture's number in the run and `<process>` the process's own name
//! (`<host>-<rank>`, `<host>-pid<pid>`: [`crate::ways_in::layout::ProcessIdentity::dir_name`]).
//! A capture of all ranks is one `capture-K` with a directory per rank, which
//! `gmprof merge DIR/capture-K` merges. Every directory is claimed by creating it, so two
//! captures never share one:
//! - `gmprof capture` reserves the next `K` of the run ([`reserve`]) and sends it to every
//!   process, which claims its own directory in it ([`claim`]);
//! - a capture a process starts by itself (the capture signal, a capture range, the API)
//!   takes the first `K` after the last capture holding this process ([`own_next`]), so a
//!   signal sent to every rank at once gives them the same `K`.
//!
//! Each process's directory holds the usual outputs and `capture.json`
//! ([`super::protocol::CaptureRecord`]).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::ways_in::on_demand::protocol::CaptureRecord;

/// The record each process writes into its directory of a capture.
pub const RECORD_FILE: &str = "capture.json";

/// `DIR/capture-K`.
pub fn capture_dir(run_dir: &Path, id: u64) -> PathBuf {
    run_dir.join(format!("capture-{id}"))
}

/// The number of a `capture-K` directory name.
pub fn capture_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("capture-")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0'))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The run's `capture-K` directories, by `K`.
pub fn scan(run_dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(run_dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| capture_number(&e.file_name().to_string_lossy()).map(|k| (k, e.path())))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Reserves the next capture of the run: creates `DIR/capture-K` for the first `K` after
/// every existing one (another reservation racing for it moves on to `K + 1`).
pub fn reserve(run_dir: &Path) -> Result<(u64, PathBuf)> {
    std::fs::create_dir_all(run_dir).map_err(|e| Error::io(run_dir, e))?;
    let mut id = scan(run_dir).last().map_or(1, |(k, _)| k + 1);
    loop {
        let dir = capture_dir(run_dir, id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && id < u64::MAX => id += 1,
            Err(e) => return Err(Error::io(&dir, e)),
        }
    }
}

/// Claims this process's directory of capture `id`: `DIR/capture-K/<process>`, created now.
/// One that exists is refused: gmprof never writes over a capture.
pub fn claim(run_dir: &Path, id: u64, process: &str) -> Result<PathBuf> {
    let parent = capture_dir(run_dir, id);
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let dir = parent.join(process);
    match std::fs::create_dir(&dir) {
        Ok(()) => Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::InvalidConfig(format!(
            "{} already exists: capture {id} of this process was taken; gmprof does not write over a capture",
            dir.display()
        ))),
        Err(e) => Err(Error::io(&dir, e)),
    }
}

/// The number a capture this process starts by itself takes: one after the last capture
/// holding a directory of this process, and not one that holds it already.
pub fn own_next(run_dir: &Path, process: &str) -> u64 {
    let captures = scan(run_dir);
    let mut id = captures.iter().filter(|(_, dir)| dir.join(process).exists()).map(|(k, _)| k + 1).max().unwrap_or(1);
    while capture_dir(run_dir, id).join(process).exists() {
        id += 1;
    }
    id
}

/// Writes `capture.json` into the record's directory (replaced whole).
pub fn write_record(record: &CaptureRecord) -> Result<()> {
    let path = record.dir.join(RECORD_FILE);
    let text = serde_json::to_string_pretty(record)
        .map_err(|e| Error::InvalidState(format!("serializing {}: {e}", path.display())))?;
    let partial = record.dir.join(format!(".{RECORD_FILE}.partial"));
    std::fs::write(&partial, text).map_err(|e| Error::io(&partial, e))?;
    std::fs::rename(&partial, &path).map_err(|e| Error::io(&path, e))
}

/// Reads a process's `capture.json`.
pub fn read_record(dir: &Path) -> Result<CaptureRecord> {
    let path = dir.join(RECORD_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::InvalidState(format!("{}: {e}", path.display())))
}

/// What `gmprof run --on-demand` prints at the end: one line per process of each capture,
/// and how to read them.
pub fn run_lines(run_dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let captures = scan(run_dir);
    for (id, dir) in &captures {
        let mut processes: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default();
        processes.sort();
        if processes.is_empty() {
            lines.push(format!("capture {id}: no process wrote into {}", dir.display()));
        }
        for process in &processes {
            match read_record(process) {
                Ok(record) => lines.push(record.line()),
                Err(_) if process.join("report.json").is_file() => {
                    lines.push(format!("capture {id}: {} (ended with the process: no capture.json)", process.display()))
                }
                Err(_) => lines.push(format!("capture {id}: {} holds no outputs", process.display())),
            }
        }
        let how = if processes.len() > 1 { "gmprof merge" } else { "gmprof report" };
        lines.push(format!("capture {id}: read it with: {how} {}", dir.display()));
    }
    if captures.is_empty() {
        lines.push(format!(
            "no capture was taken into {} (gmprof capture, the capture signal, a capture range or gmprof.capture \
             start one)",
            run_dir.display()
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ways_in::on_demand::protocol::{CaptureSettings, Outcome, Span};

    #[test]
    fn capture_names_are_numbered_from_one() {
        assert_eq!(capture_number("capture-1"), Some(1));
        assert_eq!(capture_number("capture-12"), Some(12));
        for bad in ["capture-", "capture-01", "capture-x", "capture-1a", "captures-1", "capture-0x1"] {
            assert_eq!(capture_number(bad), None, "{bad}");
        }
    }

    #[test]
    fn reservations_increment_and_never_reuse() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        assert_eq!(reserve(&run).unwrap().0, 1);
        assert_eq!(reserve(&run).unwrap().0, 2);
        std::fs::create_dir(run.join("capture-7")).unwrap();
        std::fs::create_dir(run.join("capture-notes")).unwrap();
        assert_eq!(reserve(&run).unwrap(), (8, run.join("capture-8")));
        assert_eq!(scan(&run).iter().map(|(k, _)| *k).collect::<Vec<_>>(), [1, 2, 7, 8]);
    }

    #[test]
    fn a_process_claims_its_directory_once() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path();
        let dir = claim(run, 3, "node7-0").unwrap();
        assert_eq!(dir, run.join("capture-3/node7-0"));
        assert!(dir.is_dir());
        claim(run, 3, "node7-1").expect("another rank of the same capture");
        let e = claim(run, 3, "node7-0").unwrap_err().to_string();
        assert!(e.contains("does not write over a capture") && e.contains("capture-3/node7-0"), "{e}");
    }

    #[test]
    fn own_captures_follow_the_last_one_holding_the_process() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path();
        assert_eq!(own_next(run, "node7-0"), 1);
        claim(run, 1, "node7-0").unwrap();
        claim(run, 1, "node7-1").unwrap();
        // Both ranks signalled at once after capture 1: both take 2.
        assert_eq!(own_next(run, "node7-0"), 2);
        assert_eq!(own_next(run, "node7-1"), 2);
        // A capture of rank 0 alone (4), a reserved one of no process yet (5).
        claim(run, 4, "node7-0").unwrap();
        std::fs::create_dir(run.join("capture-5")).unwrap();
        assert_eq!(own_next(run, "node7-0"), 5);
        assert_eq!(own_next(run, "node7-1"), 2);
        claim(run, 5, "node7-0").unwrap();
        assert_eq!(own_next(run, "node7-0"), 6);
    }

    #[test]
    fn records_round_trip_and_give_the_run_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path();
        assert!(run_lines(run)[0].starts_with("no capture was taken"));
        let dir = claim(run, 1, "node7-pid5").unwrap();
        let record = CaptureRecord {
            id: 1,
            dir: dir.clone(),
            trigger: "signal SIGUSR2".into(),
            settings: CaptureSettings { mode: Some("trace".into()), ..Default::default() },
            span: Span::Steps(2),
            step_range: Some("step".into()),
            first_step: Some(10),
            steps: 2,
            ended_by: Some("2 step(s)".into()),
            started_unix_ns: Some(5),
            ended_unix_ns: Some(9),
            outcome: Outcome::Written { kernels: 40, ranges: 6 },
        };
        write_record(&record).unwrap();
        assert_eq!(read_record(&dir).unwrap(), record);
        let text = std::fs::read_to_string(dir.join(RECORD_FILE)).unwrap();
        assert!(text.contains("\"outcome\": \"written\"") && text.contains("\"kernels\": 40"), "{text}");
        let lines = run_lines(run);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("capture 1: steps 10-11 (2), 40 kernels, ended by 2 step(s): "), "{lines:?}");
        assert!(lines[1].starts_with("capture 1: read it with: gmprof report "), "{lines:?}");
    }
}
