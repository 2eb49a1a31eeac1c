//! Outputs at scale, for BENCHMARKS.md (`scripts/bench-outputs.sh` runs it; no GPU needed).
//!
//! - `outputs_at_scale table DIR [--kernels N]`: one synthetic rank of N kernel rows (default
//!   1 000 000): writes kernels.csv and kernels.parquet into DIR, timing each, and reads each
//!   back whole in Rust (the CSV's every field through the `csv` crate, the Parquet's every
//!   column through `parquet`'s Arrow reader), printing times and sizes.
//! - `outputs_at_scale ranks DIR [--ranks R] [--kernels N] [--steps S]`: R synthetic rank
//!   directories (default 512 of 200 000 kernels and 1 000 steps) with ranges.parquet and
//!   kernels.parquet, for `gmprof merge DIR`. Reproducible: the same arguments give the same
//!   files; the slowest rank of step s is known (tests/common/synthetic.rs).

#[path = "../tests/common/synthetic.rs"]
mod synthetic;

use std::path::{Path, PathBuf};
use std::time::Instant;

use synthetic::{rank_report, write_rank, Synthetic};

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.windows(2).find(|w| w[0] == name).map_or(default, |w| w[1].parse().expect("a whole number"))
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

fn table(dir: &Path, kernels: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let s = Synthetic { ranks: 1, kernels, steps: (kernels / 1000).max(1) };
    let report = rank_report(0, &s);
    let (csv, parquet) = (dir.join("kernels.csv"), dir.join("kernels.parquet"));
    let t = Instant::now();
    report.write_kernels_csv(&csv).unwrap();
    let csv_write = t.elapsed().as_secs_f64();
    let t = Instant::now();
    report.write_kernels_parquet(&parquet).unwrap();
    let parquet_write = t.elapsed().as_secs_f64();
    drop(report);

    let t = Instant::now();
    let mut reader = csv::ReaderBuilder::new().comment(Some(b'#')).from_path(&csv).unwrap();
    let mut record = csv::StringRecord::new();
    let (mut rows, mut fields) = (0usize, 0usize);
    while reader.read_record(&mut record).unwrap() {
        rows += 1;
        fields += record.len();
    }
    let csv_read = t.elapsed().as_secs_f64();
    assert_eq!(rows, kernels);

    let t = Instant::now();
    let file = std::fs::File::open(&parquet).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let (mut prows, mut cells) = (0usize, 0usize);
    for batch in reader {
        let b = batch.unwrap();
        prows += b.num_rows();
        cells += b.num_rows() * b.num_columns();
    }
    let parquet_read = t.elapsed().as_secs_f64();
    assert_eq!((prows, cells), (rows, fields));

    println!("| {kernels} kernel rows, {} columns | CSV | Parquet |", fields / rows);
    println!("| --- | --- | --- |");
    println!("| write (Rust) | {csv_write:.2} s | {parquet_write:.2} s |");
    println!("| read every value back (Rust) | {csv_read:.2} s | {parquet_read:.2} s |");
    println!(
        "| size | {:.1} MB | {:.1} MB ({:.1} %) |",
        size(&csv) as f64 / 1e6,
        size(&parquet) as f64 / 1e6,
        size(&parquet) as f64 / size(&csv) as f64 * 100.0
    );
}

fn ranks(dir: &Path, s: Synthetic) {
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let rank = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if rank >= s.ranks {
                    return;
                }
                write_rank(dir, rank, &s);
            });
        }
    });
    let bytes: u64 = (0..s.ranks)
        .flat_map(|r| ["ranges.parquet", "kernels.parquet"].map(|f| dir.join(synthetic::label(r)).join(f)))
        .map(|p| size(&p))
        .sum();
    println!(
        "wrote {} rank directories of {} kernels and {} steps into {} in {:.1} s ({:.2} GB)",
        s.ranks,
        s.kernels,
        s.steps,
        dir.display(),
        t.elapsed().as_secs_f64(),
        bytes as f64 / 1e9
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: outputs_at_scale table DIR [--kernels N] | ranks DIR [--ranks R] [--kernels N] [--steps S]";
    let (Some(what), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    match what.as_str() {
        "table" => table(&dir, arg(&args, "--kernels", 1_000_000)),
        "ranks" => ranks(
            &dir,
            Synthetic {
                ranks: arg(&args, "--ranks", 512),
                kernels: arg(&args, "--kernels", 200_000),
                steps: arg(&args, "--steps", 1_000),
            },
        ),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
