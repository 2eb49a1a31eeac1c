//! The fuzz targets, one module each, each a `run(data: &[u8])` that feeds the input to the
//! entry point gmprof itself uses and then to what consumes that entry point's result.
//! A target never panics on its own: a panic, an abort or a hang is gmprof's.
//!
//! Included as they are by the main package's `tests/fuzz_regressions.rs`, so they use
//! nothing but `gmprof` and `std`.

pub mod control;
pub mod elf_object;
pub mod env;
pub mod image;
pub mod parquet;
pub mod probe_spec;
pub mod ptx_inject;
pub mod ptx_parse;
pub mod report_json;
pub mod trace_check;

/// The first `n` bytes at most.
pub(crate) fn head(data: &[u8], n: usize) -> &[u8] {
    &data[..data.len().min(n)]
}

/// A directory of this process's own for files a target writes (in `/dev/shm` where there is
/// one: the readers under test take paths).
pub(crate) fn scratch_dir() -> std::path::PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!("gmprof-fuzz-{}", std::process::id()))
}

/// `data` written to `name` in [`scratch_dir`]; `None` when it could not be written.
pub(crate) fn scratch_file(name: &str, data: &[u8]) -> Option<std::path::PathBuf> {
    let dir = scratch_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(name);
    std::fs::write(&path, data).ok()?;
    Some(path)
}
