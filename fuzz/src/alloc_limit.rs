//! A global allocator that turns unbounded allocation into a crash.
//!
//! It forwards to the system allocator and counts the bytes live; an allocation over
//! [`MAX_ONE`] bytes, or one that would take the live bytes over [`MAX_LIVE`], prints what
//! was asked and aborts, which libFuzzer reports as a crash and saves the input of.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest single allocation allowed (256 MiB): no parser needs that much for an input
/// of the sizes fuzzed (at most a few hundred KiB).
pub const MAX_ONE: usize = 256 << 20;
/// The most bytes live at once (1 GiB).
pub const MAX_LIVE: usize = 1 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The limiting allocator.
pub struct Limited;

fn check(size: usize) {
    let live = LIVE.load(Ordering::Relaxed);
    if size > MAX_ONE || live.saturating_add(size) > MAX_LIVE {
        // No allocation here: the message is written from the stack.
        let mut buf = [0u8; 160];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        let _ = write!(cursor, "\n==gmprof-fuzz== allocation of {size} bytes with {live} bytes live: over the limit\n");
        let n = cursor.position() as usize;
        let _ = std::io::stderr().write_all(&buf[..n]);
        std::process::abort();
    }
}

// SAFETY: every call is forwarded to `System` with the caller's layout and pointer; the
// count and the check have no effect on the memory handed out.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            check(new_size - layout.size());
            if new_size > MAX_ONE {
                check(new_size);
            }
        }
        // SAFETY: the caller's contract for `realloc`, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}
