#![no_main]
//! Fuzz target `control`: see `gmprof_fuzz::targets::control`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::control::run(data));
