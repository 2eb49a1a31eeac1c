//! Running sums of the per-range fold: of one metric over kernels ([`MetricSums`]), of one
//! range ([`RangeSums`]), and of its memcpy and memset rows ([`TransferSums`]).
//!
//! Imports only `correlate`'s [`TransferRow`] and `model`; `fold` imports it.

use crate::analysis::correlate::TransferRow;
use crate::model::TransferKind;

/// Running sums of one metric over a set of kernels.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MetricSums {
    /// Σ v over kernels with a value.
    pub(super) sum: f64,
    /// Kernels with a value.
    pub(super) count: u64,
    /// Σ v over kernels with a value and a duration.
    pub(super) timed_sum: f64,
    /// Σ t (kernel duration) over kernels with a value and a duration.
    pub(super) time: f64,
    /// Σ v·w over kernels with a value and a counter window `w`.
    pub(super) weighted_sum: f64,
    /// Σ w over kernels with a value and a counter window.
    pub(super) weight: f64,
}

impl MetricSums {
    /// Adds one kernel's value, with its duration `time` (for rates) and the window its
    /// counters were measured over, `window` (for duration weighting).
    pub(super) fn add(&mut self, value: Option<f64>, time: Option<f64>, window: Option<f64>) {
        let Some(v) = value else { return };
        self.sum += v;
        self.count += 1;
        if let Some(t) = time {
            self.timed_sum += v;
            self.time += t;
        }
        if let Some(w) = window {
            self.weighted_sum += v * w;
            self.weight += w;
        }
    }

    pub(super) fn merge(&mut self, other: &MetricSums) {
        self.sum += other.sum;
        self.count += other.count;
        self.timed_sum += other.timed_sum;
        self.time += other.time;
        self.weighted_sum += other.weighted_sum;
        self.weight += other.weight;
    }

    pub(super) fn total(&self) -> Option<f64> {
        (self.count > 0).then_some(self.sum)
    }

    pub(super) fn weighted_mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.weighted_sum / self.weight)
    }

    /// Σv / Σt over kernels with both, per ns.
    pub(super) fn per_ns(&self) -> Option<f64> {
        (self.time > 0.0).then(|| self.timed_sum / self.time)
    }
}

/// Running sums of one range (self, then inclusive after roll-up).
#[derive(Clone, Debug, Default)]
pub(super) struct RangeSums {
    pub(super) kernels: u64,
    pub(super) self_kernels: u64,
    pub(super) flagged: u64,
    pub(super) time_ns: u64,
    pub(super) timed_kernels: u64,
    /// Read, write, total DRAM bytes.
    pub(super) dram: [MetricSums; 3],
    pub(super) transfers: TransferSums,
}

/// Running sums of a range's memcpy and memset rows.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TransferSums {
    pub(super) count: u64,
    pub(super) memcpy_bytes: u64,
    pub(super) memset_bytes: u64,
    /// Rows without times; their bytes are in the sums above, not in `timed_bytes`.
    pub(super) untimed: u64,
    pub(super) timed_bytes: u64,
    pub(super) time_ns: u64,
}

impl TransferSums {
    pub(super) fn add(&mut self, row: &TransferRow) {
        self.count += 1;
        match row.kind {
            TransferKind::Memset => self.memset_bytes = self.memset_bytes.saturating_add(row.bytes),
            _ => self.memcpy_bytes = self.memcpy_bytes.saturating_add(row.bytes),
        }
        match row.duration_ns {
            Some(d) => {
                self.timed_bytes = self.timed_bytes.saturating_add(row.bytes);
                self.time_ns = self.time_ns.saturating_add(d);
            }
            None => self.untimed += 1,
        }
    }

    pub(super) fn merge(&mut self, other: &TransferSums) {
        self.count += other.count;
        self.memcpy_bytes = self.memcpy_bytes.saturating_add(other.memcpy_bytes);
        self.memset_bytes = self.memset_bytes.saturating_add(other.memset_bytes);
        self.untimed += other.untimed;
        self.timed_bytes = self.timed_bytes.saturating_add(other.timed_bytes);
        self.time_ns = self.time_ns.saturating_add(other.time_ns);
    }

    pub(super) fn bytes(&self) -> u64 {
        self.memcpy_bytes.saturating_add(self.memset_bytes)
    }

    /// Σ durations of the timed rows; `None` when there are rows and none was timed.
    pub(super) fn time_ns(&self) -> Option<u64> {
        (self.count == 0 || self.untimed < self.count).then_some(self.time_ns)
    }

    /// Timed bytes per timed ns (GB/s).
    pub(super) fn gbps(&self) -> Option<f64> {
        (self.time_ns > 0).then(|| self.timed_bytes as f64 / self.time_ns as f64)
    }
}

impl RangeSums {
    pub(super) fn merge(&mut self, other: &RangeSums) {
        self.kernels += other.kernels;
        self.flagged += other.flagged;
        self.time_ns += other.time_ns;
        self.timed_kernels += other.timed_kernels;
        for (mine, theirs) in self.dram.iter_mut().zip(&other.dram) {
            mine.merge(theirs);
        }
        self.transfers.merge(&other.transfers);
    }
}
