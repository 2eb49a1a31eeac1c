#![no_main]
//! Fuzz target `image`: see `gmprof_fuzz::targets::image`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::image::run(data));
