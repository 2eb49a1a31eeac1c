//! `elf_object`: an executable or shared library the program mapped, read for the PTX of its
//! runtime-registered kernels ([`host::ptx_in_object`]: the ELF headers through the
//! `object` crate, the `.nv_fatbin` section, its fatbins and their PTX entries).

use gmprof::probe::host;

/// `capture::probe::images::HOST_FATBIN_MAX`.
const HOST_FATBIN_MAX: u64 = 256 << 20;

/// Runs one input.
pub fn run(data: &[u8]) {
    if let Ok(Some(ptx)) = host::ptx_in_object(data, "fuzz.o", HOST_FATBIN_MAX) {
        let _ = ptx.defining("_Z9histogramPjPKhi");
    }
}
