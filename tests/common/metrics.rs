//! Metric specs for tests that build reports without CUPTI: the name, kind and unit a
//! metric set reads from CUPTI's tables, with a description that says it is synthetic.

use gmprof::model::{MetricKind, MetricSpec};

/// A metric spec as CUPTI's tables would give it.
pub fn spec(name: &str, kind: MetricKind, unit: &str) -> MetricSpec {
    MetricSpec { name: name.into(), kind, unit: unit.into(), description: format!("{name} (synthetic)") }
}
