//! Whether two samples differ beyond noise: the Mann–Whitney U rank test and Holm's
//! adjustment for many tests.
//!
//! Layer 3 (the safe profiler), report output; depends on nothing else of gmprof.
//!
//! GPU times of one range across instances are not normal: a few instances are slow (an
//! allocator growing, a context switch, a clock change), so a test on means lets one
//! outlier decide. The rank test asks only whether a value of one run tends to be larger
//! than a value of the other. It is exact (the distribution of U enumerated) for small
//! samples without ties, and uses the normal approximation with tie and continuity
//! corrections otherwise.

/// Exact p-values are computed while `n1 * n2` is at most this (and no value is tied).
pub const EXACT_MAX_PRODUCT: usize = 400;

/// The result of [`mann_whitney`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankTest {
    /// U of the first sample: how many (first, second) pairs have first > second, ties
    /// counting one half.
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether `p` is exact (enumerated) rather than the normal approximation.
    pub exact: bool,
}

/// Two-sided Mann–Whitney U test of `a` against `b`. `None` when either sample is empty or
/// a value is not finite.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<RankTest> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 || a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    // Rank the pooled values, ties getting the mean of their ranks.
    let mut pooled: Vec<(f64, bool)> = a.iter().map(|&v| (v, true)).chain(b.iter().map(|&v| (v, false))).collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0; // Σ (t³ − t) over groups of tied values
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        let mean_rank = (i + 1 + j) as f64 / 2.0; // ranks i+1 ..= j
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += mean_rank * pooled[i..j].iter().filter(|(_, from_a)| *from_a).count() as f64;
        i = j;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u = rank_sum_a - f1 * (f1 + 1.0) / 2.0;
    if tie_term == 0.0 && n1 * n2 <= EXACT_MAX_PRODUCT {
        return Some(RankTest { u, p: exact_two_sided(n1, n2, u), exact: true });
    }
    let mean = f1 * f2 / 2.0;
    let nf = n as f64;
    let variance = f1 * f2 / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if variance <= 0.0 {
        // Every value tied: no evidence of any difference.
        return Some(RankTest { u, p: 1.0, exact: false });
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    Some(RankTest { u, p: (2.0 * normal_upper_tail(z)).min(1.0), exact: false })
}

/// The exact two-sided p-value of U = `u` for samples of `n1` and `n2` values without ties:
/// the distribution of U is counted by the recurrence over the largest value's sample.
fn exact_two_sided(n1: usize, n2: usize, u: f64) -> f64 {
    let max_u = n1 * n2;
    // counts[m][k] for the current n (columns): ways to get each U with m of the first
    // sample and n of the second. Built up over n, for every m at once.
    // f(m, n, k) = f(m − 1, n, k − n) + f(m, n − 1, k).
    let mut prev: Vec<Vec<f64>> = (0..=n1).map(|_| vec![0.0; max_u + 1]).collect();
    for row in prev.iter_mut() {
        row[0] = 1.0; // n = 0: U is 0 whatever m is
    }
    for n in 1..=n2 {
        let mut cur: Vec<Vec<f64>> = (0..=n1).map(|_| vec![0.0; max_u + 1]).collect();
        cur[0][0] = 1.0; // m = 0
        for m in 1..=n1 {
            for k in 0..=m * n {
                let from_first = if k >= n { cur[m - 1][k - n] } else { 0.0 };
                cur[m][k] = from_first + prev[m][k];
            }
        }
        prev = cur;
    }
    let dist = &prev[n1];
    let total: f64 = dist.iter().sum();
    let k = u.round() as usize;
    let lower: f64 = dist[..=k.min(max_u)].iter().sum::<f64>() / total;
    let upper: f64 = dist[k.min(max_u)..].iter().sum::<f64>() / total;
    (2.0 * lower.min(upper)).min(1.0)
}

/// P(Z > z) for a standard normal Z (W. J. Cody's rational approximation of erfc through
/// the complementary error function, accurate to about 1e-7 relative).
fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' `erfcc`, Chebyshev fit with
/// fractional error below 1.2e-7 everywhere).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Holm's step-down adjustment of `p` (family-wise error control over all of them): the
/// i-th smallest p-value is multiplied by (m − i + 1), capped at 1, and kept monotone.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| p[x].total_cmp(&p[y]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (i, &index) in order.iter().enumerate() {
        running = running.max(((m - i) as f64 * p[index]).min(1.0));
        adjusted[index] = running;
    }
    adjusted
}

/// The median of `values` (the mean of the two middle ones for an even count); `None` when
/// empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 { sorted[mid] } else { (sorted[mid - 1] + sorted[mid]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn exact_p_values_match_the_tables() {
        // 3 vs 3, complete separation: 2 of 20 arrangements are as extreme -> p = 0.1.
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!(t.exact);
        assert_eq!(t.u, 0.0);
        assert!(close(t.p, 0.1, 1e-12), "{}", t.p);
        // 4 vs 4, separated: 2/70.
        let t = mann_whitney(&[10.0, 11.0, 12.0, 13.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.u, 16.0);
        assert!(close(t.p, 2.0 / 70.0, 1e-12), "{}", t.p);
        // 5 vs 5 with U = 4: P(U <= 4) = 12/252 (the standard table), two-sided 24/252.
        let t = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 9.0], &[5.0, 6.0, 7.0, 8.0, 10.0]).unwrap();
        assert_eq!(t.u, 4.0);
        assert!(close(t.p, 24.0 / 252.0, 1e-12), "{}", t.p);
    }

    #[test]
    fn the_normal_approximation_matches_a_known_case() {
        // 30 vs 30, second shifted by one full spread: far beyond noise.
        let a: Vec<f64> = (0..30).map(|i| 100.0 + i as f64).collect();
        let b: Vec<f64> = (0..30).map(|i| 130.0 + i as f64).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert!(!t.exact);
        assert_eq!(t.u, 0.0);
        // z = (450 - 0.5) / sqrt(30*30*61/12) = 6.6457...; p = 2 * Q(z) ~ 3.0e-11.
        assert!(t.p > 1e-11 && t.p < 1e-10, "{}", t.p);
        // Identical samples: nothing to see.
        let t = mann_whitney(&a, &a).unwrap();
        assert!(t.p > 0.99, "{}", t.p);
        // Every value tied.
        assert_eq!(mann_whitney(&[5.0; 30], &[5.0; 30]).unwrap().p, 1.0);
    }

    #[test]
    fn erfc_is_accurate() {
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(erfc(1.0), 0.157_299_207, 1e-7));
        assert!(close(erfc(-1.0), 1.842_700_793, 1e-7));
        assert!(close(normal_upper_tail(1.959_964), 0.025, 1e-7));
    }

    #[test]
    fn holm_adjusts_step_down_and_stays_monotone() {
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.005]);
        // sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 -> max(0.06, 0.04) = 0.06
        assert_eq!(adjusted, vec![0.03, 0.06, 0.06, 0.02]);
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
    }

    #[test]
    fn empty_or_non_finite_samples_are_not_tested() {
        assert!(mann_whitney(&[], &[1.0]).is_none());
        assert!(mann_whitney(&[f64::NAN], &[1.0]).is_none());
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
