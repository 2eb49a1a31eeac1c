#![no_main]
//! Fuzz target `report_json`: see `gmprof_fuzz::targets::report_json`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::report_json::run(data));
