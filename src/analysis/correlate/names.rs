//! Names that cross the capture/analysis seam: the CUPTI range names gmprof gives its ranges,
//! the range profiler's own kernels, and demangled kernel names.

use crate::model::{KernelActivity, RangeId};

/// The counter range name gmprof gives the CUPTI user range of a gmprof range in
/// [`ProfilingMode::PerRange`](crate::model::ProfilingMode::PerRange); the correlator joins counter ranges back to ranges by it.
pub fn range_counter_name(id: RangeId) -> String {
    format!("gmprof-range-{}-{}", id.slot, id.generation)
}

/// The inverse of [`range_counter_name`]; `None` for any other name.
pub fn parse_range_counter_name(name: &str) -> Option<RangeId> {
    let rest = name.strip_prefix("gmprof-range-")?;
    let (slot, generation) = rest.split_once('-')?;
    Some(RangeId { slot: parse_decimal_u32(slot)?, generation: parse_decimal_u32(generation)? })
}

/// Parses a canonical decimal `u32`: digits only, no sign, no leading zeros (except "0"), so
/// that a name matches an ordinal exactly when it is the ordinal's `to_string()`.
pub(super) fn parse_decimal_u32(text: &str) -> Option<u32> {
    let canonical =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text.len() == 1 || !text.starts_with('0'));
    if canonical {
        text.parse().ok()
    } else {
        None
    }
}

/// True for a kernel the range profiler launches itself under user ranges.
pub fn is_profiler_internal_kernel(a: &KernelActivity) -> bool {
    a.name == "WaitNs" && a.grid == [1, 1, 1] && a.block == [1, 1, 1]
}

/// Demangles a C++ (Itanium ABI) kernel name; any other name is returned as it is.
pub fn demangle_kernel_name(raw: &str) -> String {
    if !raw.starts_with("_Z") {
        return raw.to_owned();
    }
    cpp_demangle::Symbol::new(raw).ok().and_then(|symbol| symbol.demangle().ok()).unwrap_or_else(|| raw.to_owned())
}
