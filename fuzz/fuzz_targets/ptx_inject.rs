#![no_main]
//! Fuzz target `ptx_inject`: see `gmprof_fuzz::targets::ptx_inject`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::ptx_inject::run(data));
