#![no_main]
//! Fuzz target `parquet`: see `gmprof_fuzz::targets::parquet`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::parquet::run(data));
