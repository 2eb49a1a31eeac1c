//! Statistics of span durations per region: over everything, per SM and per lane.
//!
//! Percentiles are nearest rank, as in the report's `stats.csv`: the value at 1-based rank
//! `⌈p · n / 100⌉` of the ascending durations, never an interpolation (for 1..=100 ns, p50
//! is 50 and p99 is 99).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::TimedLaunch;

/// What a row of [`region_stats`] groups by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every span of the region.
    All,
    /// The spans that began on one SM (`key` = `%smid`).
    Sm,
    /// The spans of one lane in the block (`key` = 0, the warp, or the group), over blocks.
    Lane,
}

/// Statistics of one region's durations in one scope; a row of `regions.csv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionStats {
    /// The kernel the launches ran (or the launch's label).
    pub kernel: String,
    /// Region name (`region_<id>` when the host gave none).
    pub region: String,
    /// Region id.
    pub region_id: u16,
    /// What the row groups by.
    pub scope: Scope,
    /// The SM or lane; empty for [`Scope::All`].
    pub key: Option<u32>,
    /// Launches whose spans the row holds.
    pub launches: u64,
    /// Spans.
    pub count: u64,
    /// Σ durations, ns.
    pub total_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Shortest, ns.
    pub min_ns: u64,
    /// Longest, ns.
    pub max_ns: u64,
    /// Median (nearest rank), ns.
    pub p50_ns: u64,
    /// 99th percentile (nearest rank), ns.
    pub p99_ns: u64,
    /// Σ begin payloads (bytes, iterations, ...).
    pub payload_sum: u64,
}

/// The nearest-rank `percentile` of ascending `sorted` values (see the module docs).
pub fn nearest_rank(sorted: &[u64], percentile: u32) -> Option<u64> {
    let n = sorted.len() as u128;
    if n == 0 {
        return None;
    }
    let rank = (u128::from(percentile.min(100)) * n).div_ceil(100).clamp(1, n);
    sorted.get(rank as usize - 1).copied()
}

#[derive(Default)]
struct Group {
    durations: Vec<u64>,
    payload_sum: u64,
    launches: std::collections::BTreeSet<usize>,
}

/// Per-region statistics of `launches` (each with its kernel label): for each (kernel,
/// region), a [`Scope::All`] row, then one row per SM, then one per lane, in that order.
pub fn region_stats(launches: &[(String, &TimedLaunch)]) -> Vec<RegionStats> {
    let mut groups: BTreeMap<(String, u16, Scope, Option<u32>), Group> = BTreeMap::new();
    for (i, (kernel, launch)) in launches.iter().enumerate() {
        for span in &launch.spans.spans {
            for (scope, key) in
                [(Scope::All, None), (Scope::Sm, Some(u32::from(span.sm))), (Scope::Lane, Some(span.lane_in_block))]
            {
                let g = groups.entry((kernel.clone(), span.region, scope, key)).or_default();
                g.durations.push(span.duration_ns());
                g.payload_sum += u64::from(span.begin_payload);
                g.launches.insert(i);
            }
        }
    }
    let name_of = |kernel: &str, id: u16| {
        launches
            .iter()
            .filter(|(k, _)| k == kernel)
            .find_map(|(_, l)| l.region_names.get(usize::from(id)).filter(|n| !n.is_empty()).cloned())
            .unwrap_or_else(|| format!("region_{id}"))
    };
    groups
        .into_iter()
        .map(|((kernel, region_id, scope, key), mut g)| {
            g.durations.sort_unstable();
            let count = g.durations.len() as u64;
            let total: u64 = g.durations.iter().sum();
            RegionStats {
                region: name_of(&kernel, region_id),
                kernel,
                region_id,
                scope,
                key,
                launches: g.launches.len() as u64,
                count,
                total_ns: total,
                mean_ns: total as f64 / count as f64,
                min_ns: g.durations[0],
                max_ns: g.durations[g.durations.len() - 1],
                p50_ns: nearest_rank(&g.durations, 50).unwrap_or(0),
                p99_ns: nearest_rank(&g.durations, 99).unwrap_or(0),
                payload_sum: g.payload_sum,
            }
        })
        .collect()
}
