//! The allocator's side of a streamed run's memory bound: each drain frees the rows it wrote,
//! and glibc's allocator keeps freed blocks in its arenas, scattered among live ones, so the
//! process's resident memory creeps up over millions of drained rows while the bytes live
//! stay flat (measured by `benches/stream.rs`, which counts them). [`release_free_memory`]
//! hands the arenas' free pages back to the system after a drain.
//!
//! Imports nothing of the crate; `pipeline`'s callers (the stream thread) call it.

/// Gives the allocator's free pages back to the system: glibc's `malloc_trim(0)`, which
/// releases the free space at the top of each arena and, since glibc 2.8, the whole free
/// pages inside them. A no-op where the C library is not glibc.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and only walks glibc's own arenas, each under its
    // lock; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
