#![no_main]
//! Fuzz target `trace_check`: see `gmprof_fuzz::targets::trace_check`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::trace_check::run(data));
