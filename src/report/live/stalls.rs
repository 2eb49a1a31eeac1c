//! PC sampling's stall reasons per range group, for the live metrics ([`StallSums`]).
//!
//! The PC sampler drains CUPTI on a thread of its own and keeps each function's samples per
//! stall reason; at each streamed drain the capture hands the running totals over
//! ([`StallSums::pc_totals`]), and the drain's kernel rows say which range group each
//! function's launches ran in and for how long ([`StallSums::kernel`]). A function's new
//! samples are shared among the groups its launches ran in so far, in proportion to their
//! GPU time, reason by reason, in whole samples (largest remainders,
//! [`apportion`]): the attribution `pc_fold` makes for continuous collection, where CUPTI
//! gives records no launch. A group's samples are those of the kernels launched directly in
//! it (its own launches, not its nested ranges'), so the groups' samples add up to every
//! attributed sample. Samples of a function no kernel row has named yet wait for one.
//!
//! **Bounded:** the groups are the live metrics' range groups (at most
//! [`MAX_RANGE_GROUPS`](super::MAX_RANGE_GROUPS) and `<other>`); each group names at most
//! [`MAX_STALL_REASONS`] reasons, the first that have samples in it, most samples first, and
//! counts every other in [`OTHER_REASON`]. A reason, once named, stays so, and one that is not
//! never is, so every series only goes up.
//!
//! The reasons are CUPTI's warp states without their prefix
//! (`smsp__pcsamp_warps_issue_stalled_long_scoreboard` is `long_scoreboard`); the
//! `_not_issued` twins are left out (a sample is in exactly one state).
//!
//! A leaf of `live`: imports only `crate::analysis::pc_fold` ([`apportion`], the reason
//! names) and `crate::model::pc` ([`running_totals`] reads a [`PcCapture`]).

use std::collections::{BTreeMap, HashMap};

use crate::analysis::pc_fold::{apportion, NOT_ISSUED_SUFFIX, REASON_PREFIX};
use crate::model::pc::PcCapture;

/// A PC capture's running totals as [`StallSums::pc_totals`] takes them: (function, reason
/// without CUPTI's prefix, samples so far), the `_not_issued` twins left out; with the
/// capture's samples and dropped samples so far.
pub fn running_totals(capture: &PcCapture) -> (Vec<(String, String, u64)>, u64, u64) {
    let names: HashMap<u32, &str> = capture
        .reasons
        .iter()
        .filter(|r| !r.name.ends_with(NOT_ISSUED_SUFFIX))
        .map(|r| (r.index, r.name.strip_prefix(REASON_PREFIX).unwrap_or(&r.name)))
        .collect();
    let mut totals: HashMap<(&str, &str), u64> = HashMap::new();
    for record in &capture.records {
        for (index, n) in &record.stalls {
            if let Some(reason) = names.get(index) {
                *totals.entry((record.function.as_str(), reason)).or_default() += n;
            }
        }
    }
    let totals = totals.into_iter().map(|((f, r), n)| (f.to_owned(), r.to_owned(), n)).collect();
    (totals, capture.total_samples, capture.dropped_samples)
}

/// Stall reasons a range group names; the rest count in [`OTHER_REASON`].
pub const MAX_STALL_REASONS: usize = 5;

/// The `reason` label of a group's reasons past [`MAX_STALL_REASONS`].
pub const OTHER_REASON: &str = "<other>";

/// One function's samples by reason.
type Reasons = BTreeMap<String, u64>;

/// What the PC samples add to the live metrics; see the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct StallSums {
    /// GPU time, ns, of each function's launches per range group, over the run so far.
    weights: HashMap<String, BTreeMap<String, u64>>,
    /// The sampler's totals per function last handed over.
    seen: HashMap<String, Reasons>,
    /// New samples of functions not yet attributed.
    pending: HashMap<String, Reasons>,
    /// Attributed samples per group and reason, over the run so far.
    totals: HashMap<String, Reasons>,
    /// The reasons each group names.
    named: HashMap<String, Vec<String>>,
    /// What the drain adds, by (group, reason label).
    out: BTreeMap<(String, String), u64>,
}

impl StallSums {
    /// A kernel launch of `function` in range group `group` that ran `gpu_ns`.
    pub fn kernel(&mut self, function: &str, group: &str, gpu_ns: u64) {
        let groups = match self.weights.get_mut(function) {
            Some(g) => g,
            None => self.weights.entry(function.to_owned()).or_default(),
        };
        match groups.get_mut(group) {
            Some(w) => *w = w.saturating_add(gpu_ns),
            None => {
                groups.insert(group.to_owned(), gpu_ns);
            }
        }
    }

    /// The sampler's running totals: (function, reason, samples so far). What is new since
    /// the last call waits to be attributed ([`StallSums::attribute`]).
    pub fn pc_totals(&mut self, totals: impl IntoIterator<Item = (String, String, u64)>) {
        for (function, reason, total) in totals {
            let seen = self.seen.entry(function.clone()).or_default().entry(reason.clone()).or_default();
            let new = total.saturating_sub(*seen);
            *seen = (*seen).max(total);
            if new > 0 {
                *self.pending.entry(function).or_default().entry(reason).or_default() += new;
            }
        }
    }

    /// Shares the pending samples of every function with launches among their groups, and
    /// adds them to what the drain exports.
    pub fn attribute(&mut self) {
        let functions: Vec<String> =
            self.pending.keys().filter(|f| self.weights.contains_key(f.as_str())).cloned().collect();
        let mut touched: Vec<String> = Vec::new();
        for function in functions {
            let Some(reasons) = self.pending.remove(&function) else { continue };
            let Some(groups) = self.weights.get(&function) else { continue };
            let (names, weights): (Vec<&String>, Vec<u64>) = groups.iter().map(|(g, w)| (g, *w)).unzip();
            for (reason, n) in reasons {
                for (group, share) in names.iter().zip(apportion(n, &weights)) {
                    if share == 0 {
                        continue;
                    }
                    *self.totals.entry((*group).clone()).or_default().entry(reason.clone()).or_default() += share;
                    *self.out.entry(((*group).clone(), reason.clone())).or_default() += share;
                    touched.push((*group).clone());
                }
            }
        }
        // Name the reasons of the groups that got samples, most samples first.
        touched.sort();
        touched.dedup();
        for group in touched {
            let named = self.named.entry(group.clone()).or_default();
            if named.len() >= MAX_STALL_REASONS {
                continue;
            }
            let mut by_count: Vec<(&String, &u64)> =
                self.totals.get(&group).map(|r| r.iter().collect()).unwrap_or_default();
            by_count.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
            for (reason, _) in by_count {
                if named.len() >= MAX_STALL_REASONS {
                    break;
                }
                if !named.contains(reason) {
                    named.push(reason.clone());
                }
            }
        }
    }

    /// What the drain adds, by (range group, reason label: a named reason or
    /// [`OTHER_REASON`]), and empties it.
    pub fn take(&mut self) -> BTreeMap<(String, String), u64> {
        let mut out = BTreeMap::new();
        for ((group, reason), n) in std::mem::take(&mut self.out) {
            let named = self.named.get(&group).is_some_and(|r| r.contains(&reason));
            let label = if named { reason } else { OTHER_REASON.to_owned() };
            *out.entry((group, label)).or_default() += n;
        }
        out
    }

    /// Samples handed over that no kernel row has attributed yet.
    pub fn pending_samples(&self) -> u64 {
        self.pending.values().flat_map(|r| r.values()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(items: &[(&str, &str, u64)]) -> Vec<(String, String, u64)> {
        items.iter().map(|(f, r, n)| ((*f).to_owned(), (*r).to_owned(), *n)).collect()
    }

    #[test]
    fn new_samples_are_shared_by_gpu_time_and_wait_for_their_functions_launches() {
        let mut s = StallSums::default();
        s.kernel("gemm", "step/forward", 300);
        s.kernel("gemm", "step/backward", 100);
        s.pc_totals(totals(&[("gemm", "long_scoreboard", 8), ("gemm", "selected", 4), ("softmax", "wait", 5)]));
        s.attribute();
        let out = s.take();
        // 3:1 by GPU time, reason by reason, in whole samples.
        assert_eq!(out[&("step/forward".into(), "long_scoreboard".into())], 6);
        assert_eq!(out[&("step/backward".into(), "long_scoreboard".into())], 2);
        assert_eq!(out[&("step/forward".into(), "selected".into())], 3);
        assert_eq!(out[&("step/backward".into(), "selected".into())], 1);
        // softmax has no launch yet: its samples wait.
        assert_eq!(s.pending_samples(), 5);
        assert_eq!(out.values().sum::<u64>(), 12);
        // Running totals: only what is new counts; softmax's launch attributes what waited.
        s.kernel("softmax", "step/forward", 10);
        s.pc_totals(totals(&[("gemm", "long_scoreboard", 8), ("softmax", "wait", 7)]));
        s.attribute();
        let out = s.take();
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[&("step/forward".into(), "wait".into())], 7);
        assert_eq!(s.pending_samples(), 0);
    }

    #[test]
    fn a_group_names_its_first_reasons_most_samples_first_and_the_rest_are_other_for_good() {
        let mut s = StallSums::default();
        s.kernel("k", "g", 1);
        let first: Vec<(String, String, u64)> =
            (0..MAX_STALL_REASONS as u64 + 2).map(|i| ("k".to_owned(), format!("r{i}"), 10 + i)).collect();
        s.pc_totals(first);
        s.attribute();
        let out = s.take();
        // r6 and r5 ... r2 are named (most samples); r1 and r0 are other.
        assert_eq!(out.len(), MAX_STALL_REASONS + 1, "{out:?}");
        assert_eq!(out[&("g".into(), OTHER_REASON.into())], 10 + 11);
        assert!(out.contains_key(&("g".into(), "r6".into())) && !out.contains_key(&("g".into(), "r1".into())));
        // r0 grows past every named one later: still other, so no series ever goes down.
        s.pc_totals(totals(&[("k", "r0", 1_000)]));
        s.attribute();
        assert_eq!(s.take()[&("g".into(), OTHER_REASON.into())], 990);
    }
}
