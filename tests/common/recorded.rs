//! Data recorded on a GPU, under tests/data/, zstd-compressed.

use std::io::Read;
use std::path::PathBuf;

/// The text of tests/data/`dir`/`name`, decompressed.
pub fn unzstd(dir: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(dir).join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    ruzstd::decoding::StreamingDecoder::new(file).unwrap().read_to_string(&mut text).unwrap();
    text
}
