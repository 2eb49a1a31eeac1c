//! Helpers of the analysis tests (`analysis.rs`, `analysis_trace.rs`, `aggregation_rules.rs`):
//! a kernel-replay activity record, a range row by path and instance, and a close comparison.
//! The crate that includes this also includes `common/kernels.rs` as `kernels`.

// Each test crate uses the helpers it needs.
#![allow(dead_code)]

use gmprof::aggregate::RangeRow;
use gmprof::model::KernelActivity;
use gmprof::report::Report;

/// A kernel-replay activity record (start == end) of a 32-thread kernel on stream 1.
pub fn activity(correlation_id: u32, name: &str) -> KernelActivity {
    KernelActivity {
        block: [32, 1, 1],
        registers_per_thread: 16,
        stream_id: 1,
        ..crate::kernels::kernel_activity(correlation_id, name, 5, 5)
    }
}

/// The row of range `path`, instance `instance`.
pub fn range<'a>(report: &'a Report, path: &str, instance: u32) -> &'a RangeRow {
    report
        .ranges
        .iter()
        .find(|r| r.path == path && r.instance == instance)
        .unwrap_or_else(|| panic!("no range {path}#{instance}"))
}

/// `actual` is `expected`, to 1e-9 relative.
pub fn assert_close(actual: Option<f64>, expected: f64) {
    let a = actual.unwrap_or_else(|| panic!("expected {expected}, got None"));
    assert!((a - expected).abs() <= 1e-9 * expected.abs().max(1.0), "{a} != {expected}");
}
