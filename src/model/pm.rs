//! PM sampling records: what capture's sampler hands to analysis.
//!
//! A sample is the average of each sampled metric over `[start_ns, end_ns)` of the GPU's
//! timestamp. [`PmCapture`] holds a session's samples and everything that says how complete
//! they are (hardware-buffer overflows, samples missing between kept ones).

use serde::{Deserialize, Serialize};

/// How the sampling interval is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PmInterval {
    /// Nanoseconds of GPU time.
    TimeNs(u64),
    /// Cycles of the GPU's SYSCLK.
    Cycles(u64),
}

impl PmInterval {
    /// The interval in ns when it is counted in time.
    pub fn time_ns(&self) -> Option<u64> {
        match self {
            PmInterval::TimeNs(ns) => Some(*ns),
            PmInterval::Cycles(_) => None,
        }
    }
}

/// A sampled metric and its unit as CUPTI describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmMetric {
    /// Full metric name, e.g. `dram__bytes_read.sum.per_second`.
    pub name: String,
    /// Unit, e.g. `byte/second` or `%`.
    pub unit: String,
}

impl PmMetric {
    /// A metric with its unit.
    pub fn new(name: impl Into<String>, unit: impl Into<String>) -> Self {
        PmMetric { name: name.into(), unit: unit.into() }
    }

    /// True for a rate (a `.per_second` metric): integrating it over time gives an amount.
    pub fn is_rate(&self) -> bool {
        self.name.ends_with(".per_second")
    }

    /// The unit of the integral of a rate (`byte/second` → `byte`); `None` for other metrics.
    pub fn integral_unit(&self) -> Option<String> {
        if !self.is_rate() {
            return None;
        }
        Some(self.unit.strip_suffix("/second").unwrap_or(&self.unit).to_owned())
    }
}

/// One PM sample: each metric's average over `[start_ns, end_ns)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PmSample {
    /// Start, ns (on the activity clock once aligned).
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// One value per [`PmCapture::metrics`] entry; `None` when CUPTI gave no finite value.
    pub values: Vec<Option<f64>>,
}

/// What a session's PM sampler captured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PmCapture {
    /// The sampled metrics, in value order.
    pub metrics: Vec<PmMetric>,
    /// The configured interval.
    pub interval: Option<PmInterval>,
    /// Samples in time order, on the sampler's clock.
    pub samples: Vec<PmSample>,
    /// Decodes that reported a hardware-buffer overflow (samples were lost).
    pub hw_buffer_overflows: u64,
    /// Decodes that filled the counter data image before the hardware buffer was drained.
    pub counter_data_full: u64,
    /// Samples missing between kept ones (a gap of half an interval or more counts as
    /// `round(gap / interval)` samples, at least one), when the interval is in time.
    pub missing_samples: u64,
    /// Samples left out: zero-length ones, and ones longer than 4 intervals (CUPTI's first
    /// sample spans the time before sampling started).
    pub empty_samples: u64,
    /// Errors of the decode thread.
    pub errors: Vec<String>,
    /// How the interval was chosen when it was not given (`--pm-interval auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_chosen_by: Option<String>,
}
