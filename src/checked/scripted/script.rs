//! The script: which of gmprof's calls fail, what every call counted, and the made-up GPU's
//! clock and kernels, shared by the scripted functions of the other files.
//!
//! Imports nothing of the folder; every other file of it imports this one.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// One injected failure: the `nth` call (1-based) of `function` returns `code` instead of
/// doing anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The CUPTI or driver function, by its C name (`cuptiRangeProfilerPushRange`).
    pub function: String,
    /// Which of its calls fails, counting from 1.
    pub nth: u32,
    /// The `CUptiResult` or `CUresult` it returns.
    pub code: u32,
}

/// `CUPTI_ERROR_UNKNOWN` and `CUDA_ERROR_UNKNOWN`: what a fault returns unless it says.
pub const UNKNOWN_ERROR: u32 = 999;

impl Fault {
    /// The `nth` call of `function` fails with the unknown error.
    pub fn new(function: &str, nth: u32) -> Fault {
        Fault { function: function.to_owned(), nth, code: UNKNOWN_ERROR }
    }

    /// Parses [`Fault::spec`]'s form, `function:nth[:code]`.
    pub fn parse(text: &str) -> Option<Fault> {
        let mut parts = text.trim().split(':');
        let function = parts.next().filter(|f| !f.is_empty())?.to_owned();
        let nth = parts.next()?.parse().ok().filter(|n| *n > 0)?;
        let code = match parts.next() {
            Some(c) => c.parse().ok()?,
            None => UNKNOWN_ERROR,
        };
        parts.next().is_none().then_some(Fault { function, nth, code })
    }

    /// `function:nth:code`.
    pub fn spec(&self) -> String {
        format!("{}:{}:{}", self.function, self.nth, self.code)
    }
}

/// Every call of a scripted function so far, and the faults.
#[derive(Default)]
struct Calls {
    /// Calls per function.
    counts: HashMap<&'static str, u32>,
    /// Functions in the order of their first call.
    order: Vec<&'static str>,
    /// The faults, and whether each fired.
    faults: Vec<(Fault, bool)>,
}

static CALLS: Mutex<Option<Calls>> = Mutex::new(None);

/// Sets the faults of the rest of the process (and forgets the calls counted so far).
pub(super) fn set_faults(faults: Vec<Fault>) {
    *CALLS.lock() = Some(Calls { faults: faults.into_iter().map(|f| (f, false)).collect(), ..Default::default() });
}

/// Counts a call of `function`: the code it must return when the script fails this call.
pub(super) fn fault(function: &'static str) -> Option<u32> {
    let mut guard = CALLS.lock();
    let calls = guard.get_or_insert_with(Calls::default);
    let n = calls.counts.entry(function).or_insert(0);
    *n += 1;
    let n = *n;
    if n == 1 {
        calls.order.push(function);
    }
    let (fault, fired) = calls.faults.iter_mut().find(|(f, fired)| !fired && f.function == function && f.nth == n)?;
    *fired = true;
    Some(fault.code)
}

/// Each function called so far with its number of calls, in the order of first calls.
pub fn calls() -> Vec<(&'static str, u32)> {
    let guard = CALLS.lock();
    let Some(calls) = guard.as_ref() else { return Vec::new() };
    calls.order.iter().map(|f| (*f, calls.counts[f])).collect()
}

/// The faults that fired.
pub fn fired() -> Vec<Fault> {
    let guard = CALLS.lock();
    guard
        .as_ref()
        .map_or_else(Vec::new, |c| c.faults.iter().filter(|(_, fired)| *fired).map(|(f, _)| f.clone()).collect())
}

/// The made-up GPU's clock, ns (CUPTI's clock and the activity records' times).
static CLOCK: AtomicU64 = AtomicU64::new(1_000_000_000);

/// The clock now; every reading is later than the one before.
pub(super) fn now() -> u64 {
    CLOCK.fetch_add(10, Ordering::Relaxed)
}

/// Moves the clock on by `ns`; returns where it was.
pub(super) fn advance(ns: u64) -> u64 {
    CLOCK.fetch_add(ns, Ordering::Relaxed)
}

/// A kernel the made-up GPU ran.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ran {
    /// Its (mangled) name, as CUPTI gives it.
    pub(super) name: &'static CStr,
    /// The launch's correlation id.
    pub(super) correlation_id: u32,
    /// CUPTI's id of its context.
    pub(super) context_id: u32,
    /// Its context, as a handle value.
    pub(super) context: usize,
    /// Start and end on [`now`]'s clock.
    pub(super) start: u64,
    pub(super) end: u64,
    /// Grid and block.
    pub(super) grid: [u32; 3],
    pub(super) block: [u32; 3],
}

/// DRAM bytes a kernel of the made-up GPU reads and writes per block of its grid.
pub(super) const BYTES_READ_PER_BLOCK: u64 = 4096;
/// See [`BYTES_READ_PER_BLOCK`].
pub(super) const BYTES_WRITTEN_PER_BLOCK: u64 = 1024;

impl Ran {
    /// Blocks in the grid.
    pub(super) fn blocks(&self) -> u64 {
        self.grid.iter().map(|&d| u64::from(d)).product()
    }

    /// `gpu__time_duration.sum`, `dram__bytes_read.sum` and `dram__bytes_write.sum`.
    pub(super) fn counters(&self) -> [f64; 3] {
        [
            (self.end - self.start) as f64,
            (self.blocks() * BYTES_READ_PER_BLOCK) as f64,
            (self.blocks() * BYTES_WRITTEN_PER_BLOCK) as f64,
        ]
    }
}

/// Strings handed to gmprof that live for the rest of the process, one per text.
static INTERNED: Mutex<Option<HashMap<String, &'static CStr>>> = Mutex::new(None);

/// `text` as a C string that is never freed (CUPTI's names are global constants).
pub(super) fn interned(text: &str) -> &'static CStr {
    let mut guard = INTERNED.lock();
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(s) = map.get(text) {
        return s;
    }
    let leaked: &'static CStr = Box::leak(CString::new(text.replace('\0', " ")).unwrap_or_default().into_boxed_c_str());
    map.insert(text.to_owned(), leaked);
    leaked
}

/// A copy of `text` in memory from `malloc`, for the strings CUPTI leaves to the caller to
/// `free` (range names, SASS function names, source file names).
pub(super) fn malloc_string(text: &str) -> *mut std::os::raw::c_char {
    let bytes = text.as_bytes();
    // SAFETY: malloc of the text's length plus its NUL; a null result is returned as it is.
    let p = unsafe { libc::malloc(bytes.len() + 1) } as *mut u8;
    if !p.is_null() {
        // SAFETY: `p` has room for the bytes and the NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
            *p.add(bytes.len()) = 0;
        }
    }
    p as *mut std::os::raw::c_char
}

/// Reads a C string gmprof passed in; "" for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub(super) unsafe fn text<'a>(p: *const std::os::raw::c_char) -> std::borrow::Cow<'a, str> {
    if p.is_null() {
        return std::borrow::Cow::Borrowed("");
    }
    // SAFETY: the caller's guarantee.
    unsafe { CStr::from_ptr(p) }.to_string_lossy()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_specs_read_back() {
        let f = Fault { function: "cuptiGetTimestamp".into(), nth: 3, code: 7 };
        assert_eq!(Fault::parse(&f.spec()), Some(f));
        assert_eq!(Fault::parse("cuCtxSynchronize:1"), Some(Fault::new("cuCtxSynchronize", 1)));
        for bad in ["", "x", "x:0", "x:one", "x:1:2:3", ":1"] {
            assert_eq!(Fault::parse(bad), None, "{bad}");
        }
    }
}
