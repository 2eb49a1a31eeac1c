#![no_main]
//! Fuzz target `env`: see `gmprof_fuzz::targets::env`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::env::run(data));
