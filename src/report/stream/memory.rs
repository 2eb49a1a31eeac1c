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

/// The process's memory as the allocator and the kernel see it, in bytes (a streamed run's
/// per-drain memory census, [`tracing`] target `gmprof::census`): resident set, and glibc's
/// `mallinfo2` (bytes handed out and live, bytes free inside the arenas, bytes of the arenas
/// and of the blocks mapped on their own). Live bytes flat while the resident set grows is
/// the allocator's fragmentation; live bytes growing is something kept. Empty where neither
/// is known.
pub fn process_memory() -> Vec<(&'static str, usize)> {
    let mut out = Vec::new();
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        // SAFETY: sysconf takes no pointer and reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        if let Some(rss) = statm.split_whitespace().nth(1).and_then(|s| s.parse::<usize>().ok()) {
            out.push(("mem.rss", rss * page));
        }
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no pointer and returns a struct by value; it walks glibc's
        // arenas, each under its lock, and is safe to call from any thread.
        let m = unsafe { libc::mallinfo2() };
        out.push(("mem.heap_live", m.uordblks + m.hblkhd));
        out.push(("mem.heap_free", m.fordblks));
        out.push(("mem.arenas", m.arena));
        out.push(("mem.mapped", m.hblkhd));
    }
    out
}

/// `name=value` pairs on one line, for a census log.
pub fn census_line(items: &[(&'static str, usize)]) -> String {
    let mut line = String::with_capacity(items.len() * 24);
    for (i, (name, value)) in items.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(name);
        line.push('=');
        line.push_str(&value.to_string());
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_memory_sees_a_live_allocation() {
        let before = process_memory();
        let live = |m: &[(&str, usize)]| m.iter().find(|(n, _)| *n == "mem.heap_live").map(|(_, v)| *v);
        let rss = before.iter().find(|(n, _)| *n == "mem.rss").map(|(_, v)| *v);
        assert!(rss.is_some_and(|r| r > 1 << 20), "{before:?}");
        let block = vec![7u8; 64 << 20];
        let after = process_memory();
        // Other tests' threads allocate and free meanwhile: only the block's own bytes are
        // sure to be live.
        if let Some(b) = live(&after) {
            assert!(b >= 64 << 20, "live {b} bytes with a 64 MiB block held: {after:?}");
        }
        assert!(live(&before).is_some() == live(&after).is_some());
        assert_eq!(block[12345], 7);
        assert_eq!(census_line(&[("a.b", 1), ("c", 22)]), "a.b=1 c=22");
    }
}
