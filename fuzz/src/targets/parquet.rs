//! `parquet`: a process's Parquet tables as `gmprof merge` reads them
//! ([`RankRanges::read`]: `ranges.parquet`'s metadata and five columns, `kernels.parquet`'s
//! two), folded into a merge ([`MergeBuilder`]) whose tables are written. The input is
//! read once as a process's `ranges.parquet` and once as the `kernels.parquet` beside the
//! golden `ranges.parquet`; the metadata readers of [`parquet::read`] run on it too.

use gmprof::report::merge::{MergeBuilder, MergeOptions};
use gmprof::report::parquet;
use gmprof::report::rank_ranges::RankRanges;

const GOLDEN_RANGES: &[u8] = include_bytes!("../../../tests/golden/ranges.parquet");

/// Runs one input.
pub fn run(data: &[u8]) {
    lets_caught_decoder_panics_unwind();
    let root = super::scratch_dir().join("parquet");
    let (ranges, kernels) = (root.join("ranges"), root.join("kernels"));
    for dir in [&ranges, &kernels] {
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
    }
    let written = std::fs::write(ranges.join("ranges.parquet"), data).is_ok()
        && std::fs::write(kernels.join("ranges.parquet"), GOLDEN_RANGES).is_ok()
        && std::fs::write(kernels.join("kernels.parquet"), data).is_ok();
    if !written {
        return;
    }
    let file = ranges.join("ranges.parquet");
    let _ = parquet::read::key_values(&file);
    let _ = parquet::read::row_count(&file);
    let mut builder = MergeBuilder::new(&MergeOptions::default());
    for dir in [&ranges, &kernels] {
        if let Ok(rank) = RankRanges::read(&root, dir) {
            let _ = builder.add(&rank);
        }
    }
    let merged = builder.finish();
    let _ = merged.to_string();
    let _ = merged.write_csv_to(std::io::sink());
    let _ = merged.write_kernels_csv_to(std::io::sink());
}

/// The `parquet` crate asserts on some malformed data; gmprof's reader catches that panic and
/// returns the file's error (`parquet::read::in_guarded_decode`). libFuzzer's panic hook
/// aborts on every panic, so it is wrapped once to let those caught ones unwind.
fn lets_caught_decoder_panics_unwind() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let outer = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !parquet::read::in_guarded_decode() {
                outer(info);
            }
        }));
    });
}
