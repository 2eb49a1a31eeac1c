#![no_main]
//! Fuzz target `probe_spec`: see `gmprof_fuzz::targets::probe_spec`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::probe_spec::run(data));
