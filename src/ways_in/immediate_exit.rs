//! `_exit`: a process that ends without running its exit handlers still writes its outputs.
//!
//! Layer 3, for [`crate::ways_in::injection`]. Python's `multiprocessing` ends a forked
//! worker with `os._exit` (the default start method on Linux until Python 3.14), and C
//! programs and daemons call `_exit` after `fork`: `atexit` handlers do not run, so an
//! injected gmprof that waits for them wrote nothing (two forked children that each ran 40
//! kernels on an H100 wrote no directory). `gmprof run` preloads libgmprof.so
//! (`LD_PRELOAD`), so this definition of `_exit` comes first: it finishes and writes the
//! injected profilers' outputs, as the exit handler would, then ends the process with the
//! `exit_group` system call, which is what the C library's `_exit` does. A process gmprof
//! does not profile goes straight to the system call.

use std::ffi::c_int;
use std::panic::catch_unwind;

/// Replaces the C library's `_exit` in processes that preload libgmprof.so (and in programs
/// that link it ahead of libc).
///
/// # Safety
/// Called as `_exit(2)`: it does not return.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    let _ = catch_unwind(crate::ways_in::injection::before_immediate_exit);
    // SAFETY: exit_group takes the status and ends every thread of the process; it does not
    // return.
    unsafe { libc::syscall(libc::SYS_exit_group, status as libc::c_long) };
    // Not reached: exit_group does not fail.
    loop {
        std::hint::spin_loop();
    }
}
