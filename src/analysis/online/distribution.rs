//! One value's distribution kept while the run goes: exact count, missing, sum, min and max,
//! and quantiles from a DDSketch.
//!
//! The sketch is `sketches-ddsketch` (DataDog's DDSketch, ported from its Go
//! implementation): every quantile it returns is within [`RELATIVE_ERROR`] (1 %) of the
//! value of that rank, for any input, and two sketches merge exactly (the per-window and
//! whole-run tables are merges of one another). Its memory is one bin per 2 % of the value
//! range actually seen: kernels from 1 µs to 1 s take about 700 bins (5.6 KB), never more
//! than [`MAX_BINS`].
//!
//! The bottom of `online`: `aggregates` and `steps` hold these.

use serde::{Deserialize, Serialize};
use sketches_ddsketch::{Config, DDSketch};

/// The relative error of every quantile: an estimate `x̂` of the value `x` of rank
/// `⌊q·(n − 1)⌋` (0-based, values sorted ascending) satisfies `|x̂ − x| ≤ 0.01·x`.
pub const RELATIVE_ERROR: f64 = 0.01;

/// The most bins a sketch holds (8 bytes each). With [`RELATIVE_ERROR`] they cover values from
/// 1 ns to 10^17 ns before the lowest bins would collapse, so they never do.
pub const MAX_BINS: u32 = 2048;

/// The quantiles the tables report.
pub const QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

fn config() -> Config {
    // Values below 1 ns are 0 (a zero duration): the sketch counts them apart, exactly.
    Config::new(RELATIVE_ERROR, MAX_BINS, 1.0)
}

/// The distribution of one quantity (ns) of one group.
#[derive(Clone)]
pub struct Distribution {
    /// Rows with a value.
    pub count: u64,
    /// Rows without one (not measured): left out of every statistic.
    pub missing: u64,
    /// Σ values, exact.
    pub sum: u64,
    /// Smallest value, exact.
    pub min: Option<u64>,
    /// Largest value, exact.
    pub max: Option<u64>,
    sketch: DDSketch,
}

impl std::fmt::Debug for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Distribution")
            .field("count", &self.count)
            .field("missing", &self.missing)
            .field("sum", &self.sum)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Default for Distribution {
    fn default() -> Self {
        Self { count: 0, missing: 0, sum: 0, min: None, max: None, sketch: DDSketch::new(config()) }
    }
}

impl Distribution {
    /// Adds one row's value; `None` counts as missing.
    pub fn add(&mut self, value: Option<u64>) {
        let Some(v) = value else {
            self.missing += 1;
            return;
        };
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
        self.sketch.add(v as f64);
    }

    /// Adds everything `other` holds.
    pub fn merge(&mut self, other: &Distribution) {
        self.count += other.count;
        self.missing += other.missing;
        self.sum = self.sum.saturating_add(other.sum);
        self.min = match (self.min, other.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = match (self.max, other.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        // Both sketches have the one configuration, so the merge cannot fail.
        let _ = self.sketch.merge(&other.sketch);
    }

    /// The value of quantile `q` (0 to 1), within [`RELATIVE_ERROR`]; `None` without values.
    /// Clamped to the exact min and max, which the sketch's bins could otherwise overshoot.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let estimate = self.sketch.quantile(q).ok().flatten()?;
        let (lo, hi) = (self.min? as f64, self.max? as f64);
        Some(estimate.clamp(lo, hi))
    }

    /// Σ / count; `None` without values.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// The numbers a table row shows.
    pub fn summary(&self) -> DistributionSummary {
        let q = |p: f64| self.quantile(p).map(|v| v.round() as u64);
        DistributionSummary {
            count: self.count,
            missing: self.missing,
            total_ns: (self.count > 0).then_some(self.sum),
            mean_ns: self.mean(),
            min_ns: self.min,
            p50_ns: q(QUANTILES[0]),
            p90_ns: q(QUANTILES[1]),
            p99_ns: q(QUANTILES[2]),
            max_ns: self.max,
        }
    }

    /// Bytes the sketch's bins take now.
    pub fn sketch_bytes(&self) -> usize {
        self.sketch.length() * std::mem::size_of::<u64>()
    }
}

/// A [`Distribution`]'s numbers: exact count, missing, total, mean, min and max; p50, p90 and
/// p99 within [`RELATIVE_ERROR`]. Blank (`None`), never 0, without values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DistributionSummary {
    /// Rows with a value.
    pub count: u64,
    /// Rows without one.
    pub missing: u64,
    /// Σ values, ns.
    pub total_ns: Option<u64>,
    /// Σ / count, ns.
    pub mean_ns: Option<f64>,
    /// Smallest value, ns.
    pub min_ns: Option<u64>,
    /// Median, ns (DDSketch).
    pub p50_ns: Option<u64>,
    /// 90th percentile, ns (DDSketch).
    pub p90_ns: Option<u64>,
    /// 99th percentile, ns (DDSketch).
    pub p99_ns: Option<u64>,
    /// Largest value, ns.
    pub max_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of rank ⌊q·(n − 1)⌋, the one DDSketch estimates.
    fn exact(sorted: &[u64], q: f64) -> f64 {
        sorted[(q * (sorted.len() as f64 - 1.0)) as usize] as f64
    }

    #[test]
    fn quantiles_are_within_the_stated_error_and_the_rest_is_exact() {
        // A heavy-tailed mix: short kernels, long GEMMs, a few outliers, zeros.
        let mut values: Vec<u64> = (0..50_000u64)
            .map(|i| {
                let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
                match i % 10 {
                    0 => 0,
                    1..=6 => 2_000 + x % 8_000,
                    7 | 8 => 200_000 + x % 900_000,
                    _ => 5_000_000 + x * 13,
                }
            })
            .collect();
        let mut d = Distribution::default();
        for v in &values {
            d.add(Some(*v));
        }
        d.add(None);
        values.sort_unstable();
        assert_eq!(d.count, 50_000);
        assert_eq!(d.missing, 1);
        assert_eq!(d.sum, values.iter().sum::<u64>());
        assert_eq!(d.min, Some(0));
        assert_eq!(d.max, values.last().copied());
        for q in QUANTILES {
            let (estimate, truth) = (d.quantile(q).unwrap(), exact(&values, q));
            assert!((estimate - truth).abs() <= RELATIVE_ERROR * truth + 1e-9, "q{q}: {estimate} vs {truth}");
        }
        assert!(d.sketch_bytes() <= MAX_BINS as usize * 8);
    }

    #[test]
    fn merged_halves_equal_the_whole() {
        let (mut a, mut b, mut whole) = (Distribution::default(), Distribution::default(), Distribution::default());
        for i in 1..=1000u64 {
            let v = i * i;
            whole.add(Some(v));
            if i % 3 == 0 { &mut a } else { &mut b }.add(Some(v));
        }
        a.merge(&b);
        assert_eq!(a.summary(), whole.summary());
    }

    #[test]
    fn no_values_is_blank_not_zero() {
        let mut d = Distribution::default();
        d.add(None);
        let s = d.summary();
        assert_eq!((s.count, s.missing), (0, 1));
        assert_eq!((s.total_ns, s.mean_ns, s.p50_ns, s.max_ns), (None, None, None, None));
    }
}
