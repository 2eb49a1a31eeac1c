//! The exported values themselves ([`Store`]): every metric family ([`Fam`], its name, help,
//! kind and unit in [`definitions`]) and, in each, its series by label set ([`SeriesKey`]).
//! One store per process, behind one lock that the stream thread takes once per drain and an
//! encoding (a scrape, an OTLP push) once; the program's launch path never takes it.
//!
//! Both exports read the same store, so a Prometheus scrape and an OTLP push say the same
//! values: the Prometheus text through [`StoreCollector`] (a `prometheus-client` collector),
//! the OTLP messages through `otlp` ([`Store::visit`]).
//!
//! A leaf of `live`: imports only `prometheus-client`'s encoding traits.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// What a family is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (Prometheus `_total`, an OTLP monotonic sum).
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution of observations ([`Hist`]).
    Histogram,
}

/// One family's description.
#[derive(Clone, Debug)]
pub struct FamilyDef {
    /// Its name without the `gmprof_` prefix (and, for a counter, without `_total`).
    pub name: &'static str,
    /// What it is.
    pub help: String,
    /// Its kind.
    pub kind: Kind,
    /// Its unit in UCUM, as OTLP carries it (`s`, `By`, `By/s`, `1`).
    pub unit: &'static str,
}

macro_rules! families {
    ($($variant:ident),* $(,)?) => {
        /// Every exported family, in the order a scrape lists them.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Fam { $($variant),* }

        impl Fam {
            /// Every family, in order.
            pub const ALL: &'static [Fam] = &[$(Fam::$variant),*];
        }
    };
}

families!(
    Steps,
    StepWall,
    LastStep,
    LastStepWall,
    LastStepGpu,
    LastStepKernels,
    LastStepTransfers,
    Kernels,
    KernelGpu,
    Transfers,
    TransferBytes,
    RangeInstances,
    RangeGpu,
    RangeWall,
    RangeKernels,
    RangeTransferBytes,
    RangeDramBytes,
    RangeStallSamples,
    DramRate,
    PmSamples,
    PmSamplesLost,
    PcSamples,
    PcSamplesDropped,
    RecordsDropped,
    FlaggedRows,
    Warnings,
    Drains,
    DrainFailures,
    DrainSeconds,
    DrainLockSeconds,
    CallbackSeconds,
    OtlpPushes,
    OtlpPushFailures,
);

/// The families' descriptions, indexed by [`Fam`]; `range_help` is `range_instances`'s
/// (it states the bound), `stall_help` `range_stall_samples`'s.
pub fn definitions(range_help: String, stall_help: String) -> Vec<FamilyDef> {
    use Kind::{Counter, Gauge, Histogram};
    let d = |name, help: &str, kind, unit| FamilyDef { name, help: help.to_owned(), kind, unit };
    let defs = vec![
        d("steps", "Steps completed: rows of the steps table (steps/)", Counter, "1"),
        d("step_wall_seconds", "Wall time of each step (push to pop of the step range)", Histogram, "s"),
        d("last_step", "Number of the last step completed (the steps table's step)", Gauge, "1"),
        d("last_step_wall_seconds", "Wall time of the last step completed", Gauge, "s"),
        d("last_step_gpu_seconds", "GPU time (sum of kernel durations) of the last step", Gauge, "s"),
        d("last_step_kernels", "Kernels of the last step completed", Gauge, "1"),
        d("last_step_transfers", "Memcpys and memsets of the last step completed", Gauge, "1"),
        d("kernels", "Kernels executed (rows of the kernels table)", Counter, "1"),
        d("kernel_gpu_seconds", "Sum of kernel durations", Counter, "s"),
        d("transfers", "Memcpys and memsets (rows of the transfers table)", Counter, "1"),
        d("transfer_bytes", "Bytes of memcpys and memsets", Counter, "By"),
        FamilyDef { name: "range_instances", help: range_help, kind: Counter, unit: "1" },
        d("range_gpu_seconds", "Sum of the range group's GPU time (inclusive)", Counter, "s"),
        d("range_wall_seconds", "Sum of the range group's wall time (push to pop)", Counter, "s"),
        d("range_kernels", "Kernels of the range group's instances (inclusive)", Counter, "1"),
        d("range_transfer_bytes", "Memcpy and memset bytes of the range group", Counter, "By"),
        d(
            "range_dram_bytes",
            "DRAM bytes of the range group, from its counters (dram__bytes_read.sum, dram__bytes_write.sum)",
            Counter,
            "By",
        ),
        FamilyDef { name: "range_stall_samples", help: stall_help, kind: Counter, unit: "1" },
        d(
            "dram_bytes_per_second",
            "DRAM bandwidth from PM sampling: the mean of the samples decoded since the last drain",
            Gauge,
            "By/s",
        ),
        d("pm_samples", "PM samples decoded", Counter, "1"),
        d("pm_samples_lost", "PM samples lost (gaps between the samples kept)", Counter, "1"),
        d("pc_samples", "PC samples CUPTI counted (every kernel, dropped ones included)", Counter, "1"),
        d("pc_samples_dropped", "PC samples the hardware dropped", Counter, "1"),
        d("activity_records_dropped", "Activity records CUPTI dropped (process-wide)", Counter, "1"),
        d(
            "flagged_kernel_rows",
            "Kernel rows flagged: a status that is not ok (unmeasured, a rotation's by design, is not flagged)",
            Counter,
            "1",
        ),
        d("warnings", "Distinct warnings of the streamed joins so far", Gauge, "1"),
        d("drains", "Streamed drains done", Counter, "1"),
        d("drain_failures", "Streamed drains that failed (their rows are lost)", Counter, "1"),
        d(
            "drain_seconds",
            "gmprof's overhead off the program's threads: time of the streamed drains (stream thread)",
            Counter,
            "s",
        ),
        d(
            "drain_lock_seconds",
            "gmprof's overhead on the program's threads, at most: time the drains held the session's lock, which \
             a kernel launch waits for",
            Counter,
            "s",
        ),
        d(
            "callback_seconds",
            "gmprof's time inside CUPTI's callbacks (callback=api: launch path, buffer: activity buffers), \
             process-wide; only with GMPROF_SELF_TIME=1",
            Counter,
            "s",
        ),
        d("otlp_pushes", "OTLP pushes the collector accepted", Counter, "1"),
        d("otlp_push_failures", "OTLP pushes that failed (collector down, refused, timed out)", Counter, "1"),
    ];
    debug_assert_eq!(defs.len(), Fam::ALL.len());
    defs
}

/// A series' labels besides the process's: each only where it applies.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    /// The CUDA device of the profiler that feeds it.
    pub device: Option<u32>,
    /// The range group.
    pub range: Option<String>,
    /// DRAM traffic's direction.
    pub direction: Option<&'static str>,
    /// A PC sampling stall reason.
    pub reason: Option<String>,
    /// Which callback.
    pub callback: Option<&'static str>,
}

impl SeriesKey {
    /// A series of device `device` only.
    pub fn device(device: Option<u32>) -> Self {
        Self { device, ..Self::default() }
    }

    /// Its labels, in order, those not set left out.
    pub fn pairs(&self) -> Vec<(&'static str, Cow<'_, str>)> {
        let mut out = Vec::with_capacity(3);
        if let Some(d) = self.device {
            out.push(("device", Cow::Owned(d.to_string())));
        }
        if let Some(r) = &self.range {
            out.push(("range", Cow::Borrowed(r.as_str())));
        }
        if let Some(d) = self.direction {
            out.push(("direction", Cow::Borrowed(d)));
        }
        if let Some(r) = &self.reason {
            out.push(("reason", Cow::Borrowed(r.as_str())));
        }
        if let Some(c) = self.callback {
            out.push(("callback", Cow::Borrowed(c)));
        }
        out
    }
}

/// The step wall time histogram's upper bounds, s: 1 ms to about 131 s, doubling (and +Inf
/// after them).
pub fn step_bounds() -> Vec<f64> {
    (0..18).map(|i| 0.001 * 2f64.powi(i)).collect()
}

/// A histogram's state: per-bucket counts (not cumulative; the last is +Inf's).
#[derive(Clone, Debug, PartialEq)]
pub struct Hist {
    /// The finite upper bounds.
    pub bounds: Arc<[f64]>,
    /// Observations per bucket, `bounds.len() + 1` of them.
    pub counts: Vec<u64>,
    /// Σ of the observations.
    pub sum: f64,
    /// Observations.
    pub count: u64,
}

impl Hist {
    fn new(bounds: Arc<[f64]>) -> Self {
        let counts = vec![0; bounds.len() + 1];
        Self { bounds, counts, sum: 0.0, count: 0 }
    }

    fn observe(&mut self, v: f64) {
        let i = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }
}

/// One series' value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A whole count.
    Count(u64),
    /// A gauge of whole numbers.
    Int(i64),
    /// Whole nanoseconds, exported in seconds (summed exactly, divided when encoded).
    Nanos(u64),
    /// A float.
    Float(f64),
    /// A histogram.
    Histogram(Hist),
}

impl Value {
    /// Nanoseconds in seconds, anything else as a float.
    pub fn as_f64(&self) -> f64 {
        match self {
            Value::Count(n) => *n as f64,
            Value::Int(n) => *n as f64,
            Value::Nanos(ns) => *ns as f64 / 1e9,
            Value::Float(f) => *f,
            Value::Histogram(h) => h.sum,
        }
    }
}

/// Every family's series; see the [module docs](self).
#[derive(Debug)]
pub struct Store {
    defs: Vec<FamilyDef>,
    series: Mutex<Vec<BTreeMap<SeriesKey, Value>>>,
    step_bounds: Arc<[f64]>,
}

impl Store {
    /// An empty store of the families `defs` (indexed by [`Fam`]).
    pub fn new(defs: Vec<FamilyDef>) -> Self {
        let series = Mutex::new(vec![BTreeMap::new(); defs.len()]);
        Self { defs, series, step_bounds: step_bounds().into() }
    }

    /// The description of `f`.
    pub fn def(&self, f: Fam) -> &FamilyDef {
        &self.defs[f as usize]
    }

    /// Changes the store under its lock once (a drain's every update).
    pub fn update<R>(&self, f: impl FnOnce(&mut Updates<'_>) -> R) -> R {
        let mut series = self.series.lock();
        f(&mut Updates { series: &mut series, step_bounds: &self.step_bounds })
    }

    /// Reads every family and its series, in order, under the lock.
    pub fn visit<E>(
        &self,
        mut f: impl FnMut(&FamilyDef, &BTreeMap<SeriesKey, Value>) -> Result<(), E>,
    ) -> Result<(), E> {
        let series = self.series.lock();
        for (def, s) in self.defs.iter().zip(series.iter()) {
            f(def, s)?;
        }
        Ok(())
    }

    /// The value of one series (tests, the end-of-run warning).
    pub fn get(&self, f: Fam, key: &SeriesKey) -> Option<Value> {
        self.series.lock()[f as usize].get(key).cloned()
    }
}

/// The store under its lock ([`Store::update`]).
pub struct Updates<'a> {
    series: &'a mut [BTreeMap<SeriesKey, Value>],
    step_bounds: &'a Arc<[f64]>,
}

impl Updates<'_> {
    fn entry(&mut self, f: Fam, key: &SeriesKey, init: impl FnOnce() -> Value) -> &mut Value {
        let family = &mut self.series[f as usize];
        if !family.contains_key(key) {
            family.insert(key.clone(), init());
        }
        family.get_mut(key).expect("inserted above")
    }

    /// Adds `n` to a counter of counts (created at 0).
    pub fn add(&mut self, f: Fam, key: &SeriesKey, n: u64) {
        if let Value::Count(c) = self.entry(f, key, || Value::Count(0)) {
            *c = c.saturating_add(n);
        }
    }

    /// Adds `ns` to a counter of nanoseconds.
    pub fn add_nanos(&mut self, f: Fam, key: &SeriesKey, ns: u64) {
        if let Value::Nanos(c) = self.entry(f, key, || Value::Nanos(0)) {
            *c = c.saturating_add(ns);
        }
    }

    /// Adds `v` to a float counter.
    pub fn add_float(&mut self, f: Fam, key: &SeriesKey, v: f64) {
        if let Value::Float(c) = self.entry(f, key, || Value::Float(0.0)) {
            *c += v;
        }
    }

    /// Sets a gauge (or any series) to `v`.
    pub fn set(&mut self, f: Fam, key: &SeriesKey, v: Value) {
        self.series[f as usize].insert(key.clone(), v);
    }

    /// Removes a series (its value is not measured any more).
    pub fn remove(&mut self, f: Fam, key: &SeriesKey) {
        self.series[f as usize].remove(key);
    }

    /// Observes `v` in the step histogram `f`.
    pub fn observe(&mut self, f: Fam, key: &SeriesKey, v: f64) {
        let bounds = Arc::clone(self.step_bounds);
        if let Value::Histogram(h) = self.entry(f, key, || Value::Histogram(Hist::new(bounds))) {
            h.observe(v);
        }
    }
}

/// The store as a `prometheus-client` collector: each family's descriptor, then its series.
#[derive(Debug)]
pub struct StoreCollector(pub Arc<Store>);

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.0.visit(|def, series| {
            if series.is_empty() {
                // Nothing measured yet: no family at all, as a metric not measured is absent.
                return Ok(());
            }
            let kind = match def.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut metric = encoder.encode_descriptor(def.name, &def.help, None, kind)?;
            for (key, value) in series {
                let labels = key.pairs();
                let mut m = metric.encode_family(&labels)?;
                match (def.kind, value) {
                    (Kind::Counter, Value::Count(n)) => m.encode_counter::<NoLabelSet, u64, u64>(n, None)?,
                    (Kind::Counter, v) => m.encode_counter::<NoLabelSet, f64, u64>(&v.as_f64(), None)?,
                    (Kind::Gauge, Value::Int(n)) => m.encode_gauge(n)?,
                    (Kind::Gauge, Value::Count(n)) => m.encode_gauge(n)?,
                    (_, Value::Histogram(h)) => {
                        let buckets: Vec<(f64, u64)> =
                            h.bounds.iter().copied().chain([f64::INFINITY]).zip(h.counts.iter().copied()).collect();
                        m.encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)?
                    }
                    (_, v) => m.encode_gauge(&v.as_f64())?,
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_each_observation_in_the_first_bucket_it_fits() {
        let mut h = Hist::new(vec![0.001, 0.002, 0.004].into());
        for v in [0.0005, 0.001, 0.0015, 0.004, 9.0] {
            h.observe(v);
        }
        // Upper bounds are inclusive, as Prometheus's `le` and OTLP's explicit bounds.
        assert_eq!(h.counts, vec![2, 1, 1, 1]);
        assert_eq!(h.count, 5);
        assert!((h.sum - 9.007).abs() < 1e-12);
        assert_eq!(step_bounds().len(), 18);
        assert!((step_bounds()[17] - 131.072).abs() < 1e-9);
    }
}
