#![no_main]
//! Fuzz target `elf_object`: see `gmprof_fuzz::targets::elf_object`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| gmprof_fuzz::targets::elf_object::run(data));
