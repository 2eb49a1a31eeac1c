#![no_main]
//! Fuzz target `ptx_parse`: see `gmprof_fuzz::targets::ptx_parse`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::ptx_parse::run(data));
