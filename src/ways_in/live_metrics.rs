//! Live metrics in a profiled process (issue 45): the settings ([`LiveExport`]: the
//! Prometheus endpoint's [`MetricsExport`], from `GMPROF_METRICS_PORT` and
//! `GMPROF_METRICS_BIND`, and the OTLP push's, from `GMPROF_OTLP_ENDPOINT` and
//! `GMPROF_OTLP_INTERVAL`, which `gmprof run --metrics-port`, `--metrics-bind`, `--otlp` and
//! `--otlp-interval` set), the process's labels from torchrun's environment
//! ([`process_labels`]), and the process's exporter, started once, by the first profiler
//! that streams ([`feed`]) or by an on-demand run's idle service ([`metrics`]); the run's
//! end pushes once more and says failed pushes in the report ([`at_run_end`]).
//!
//! **One port per process.** Every rank of a job gets the same `GMPROF_METRICS_PORT` from
//! its launcher; a process with `LOCAL_RANK` set serves on `PORT + LOCAL_RANK`
//! ([`MetricsExport::port_for`]), so the 8 ranks of a host serve on 8 ports in a row. A port
//! that cannot be had (in use, an address that does not resolve) is said once on stderr and
//! the run goes on without the endpoint (an OTLP push, when asked, still runs), its outputs as
//! they would be.
//!
//! **OTLP.** `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` are not
//! read: in a profiled program they configure the program's own telemetry, and gmprof
//! pushing to them unasked would mix its metrics into the program's pipeline.
//!
//! At the bottom of `ways_in` beside [`crate::ways_in::settings`]: imports
//! [`crate::ways_in::env_names`] and [`crate::ways_in::layout`] (the host name); imported by
//! [`crate::ways_in::injection`], [`crate::ways_in::injection_config`], the on-demand
//! service and the C ABI.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::report::live::push::{failures_warning, DEFAULT_INTERVAL};
use crate::report::live::{LiveFeed, LiveMetrics, MetricsServer, OtlpPusher, OtlpSettings, ProcessLabels};
use crate::report::Report;
use crate::ways_in::env_names::injection as env;
use crate::ways_in::layout;

/// The address the endpoint listens on by default: this host only.
pub const DEFAULT_BIND: &str = "127.0.0.1";

/// Whether and where the process serves its Prometheus endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsExport {
    /// The port asked for (`GMPROF_METRICS_PORT`); a process serves on it + `LOCAL_RANK`.
    pub port: u16,
    /// The address to listen on (`GMPROF_METRICS_BIND`, [`DEFAULT_BIND`] when unset).
    pub bind: String,
}

fn getter(lookup: impl Fn(&str) -> Option<String>) -> impl Fn(&str) -> Option<String> {
    move |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl MetricsExport {
    /// Reads the settings through `lookup` (an environment); `None` without a port.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let get = getter(lookup);
        let bind = get(env::METRICS_BIND);
        let Some(port) = get(env::METRICS_PORT) else {
            return match bind {
                Some(_) => Err(Error::InvalidConfig(format!(
                    "{} is set but {} is not: set the port too (--metrics-port)",
                    env::METRICS_BIND,
                    env::METRICS_PORT
                ))),
                None => Ok(None),
            };
        };
        match port.parse::<u16>() {
            Ok(port) if port > 0 => Ok(Some(Self { port, bind: bind.unwrap_or_else(|| DEFAULT_BIND.to_owned()) })),
            _ => Err(Error::InvalidConfig(format!(
                "{}={port}: use a port from 1 to 65535 (a process with LOCAL_RANK serves on it + LOCAL_RANK)",
                env::METRICS_PORT
            ))),
        }
    }

    /// The port a process with `local_rank` (`LOCAL_RANK`) serves on: the port + it.
    pub fn port_for(&self, local_rank: Option<u32>) -> Result<u16> {
        let offset = local_rank.unwrap_or(0);
        let port = u32::from(self.port).checked_add(offset).and_then(|p| u16::try_from(p).ok());
        port.ok_or_else(|| {
            Error::InvalidConfig(format!(
                "{}={} + LOCAL_RANK={offset} is past 65535: use a lower port",
                env::METRICS_PORT,
                self.port
            ))
        })
    }
}

/// Parses a push interval in seconds (`10`, `2.5`), above 0.
pub fn parse_interval(text: &str) -> Result<Duration> {
    let t = text.trim();
    match t.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err(Error::InvalidConfig(format!(
            "{}={t}: give the seconds between two OTLP pushes, above 0 (e.g. 10 or 2.5)",
            env::OTLP_INTERVAL
        ))),
    }
}

/// The OTLP push's settings read through `lookup`; `None` without an endpoint.
pub fn otlp_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<OtlpSettings>> {
    let get = getter(lookup);
    let interval = get(env::OTLP_INTERVAL).map(|v| parse_interval(&v)).transpose()?;
    let Some(endpoint) = get(env::OTLP_ENDPOINT) else {
        return match interval {
            Some(_) => Err(Error::InvalidConfig(format!(
                "{} is set but {} is not: give the collector's endpoint too (--otlp http://HOST:4318)",
                env::OTLP_INTERVAL,
                env::OTLP_ENDPOINT
            ))),
            None => Ok(None),
        };
    };
    OtlpSettings::new(&endpoint, interval.unwrap_or(DEFAULT_INTERVAL))
        .map(Some)
        .map_err(|e| Error::InvalidConfig(format!("{}: {e}", env::OTLP_ENDPOINT)))
}

/// Whether and how the process exports live metrics: a Prometheus endpoint, an OTLP push,
/// or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveExport {
    /// The Prometheus endpoint.
    pub endpoint: Option<MetricsExport>,
    /// The OTLP push.
    pub otlp: Option<OtlpSettings>,
}

impl LiveExport {
    /// Reads both through `lookup`; `None` when neither is asked for.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String> + Clone) -> Result<Option<Self>> {
        let endpoint = MetricsExport::from_lookup(lookup.clone())?;
        let otlp = otlp_from_lookup(lookup)?;
        Ok((endpoint.is_some() || otlp.is_some()).then_some(Self { endpoint, otlp }))
    }

    /// From the process's environment.
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }
}

/// The labels of this process: `RANK`, `LOCAL_RANK` and `WORLD_SIZE` where they hold whole
/// numbers (torchrun sets them), and `host`.
pub fn process_labels(lookup: &dyn Fn(&str) -> Option<String>, host: String) -> ProcessLabels {
    let number = |k: &str| lookup(k).and_then(|v| v.trim().parse::<u32>().ok());
    ProcessLabels {
        rank: number("RANK"),
        local_rank: number("LOCAL_RANK"),
        world_size: number("WORLD_SIZE"),
        host: Some(host),
    }
}

/// Starts the Prometheus endpoint of `export` for `metrics` (on `export`'s port + the local
/// rank of `labels`).
pub fn start(export: &MetricsExport, labels: &ProcessLabels, metrics: &Arc<LiveMetrics>) -> Result<MetricsServer> {
    let port = export.port_for(labels.local_rank)?;
    MetricsServer::start(&export.bind, port, Arc::clone(metrics))
}

/// The process's exporter: its values, its endpoint and its push, each where it started.
pub struct Exporter {
    metrics: Arc<LiveMetrics>,
    _server: Option<MetricsServer>,
    pusher: Mutex<Option<OtlpPusher>>,
}

impl Exporter {
    /// Starts what `export` asks for, for a process labelled `labels`; what cannot start is
    /// said on stderr, and the rest runs. `None` when nothing started.
    pub fn start(export: &LiveExport, labels: &ProcessLabels) -> Option<Exporter> {
        let metrics = Arc::new(LiveMetrics::new(labels));
        let server = export.endpoint.as_ref().and_then(|e| match start(e, labels, &metrics) {
            Ok(server) => {
                eprintln!("gmprof: live metrics at {}", server.url());
                Some(server)
            }
            Err(e) => {
                eprintln!("gmprof: {e}; the live metrics' endpoint is off, the run goes on");
                None
            }
        });
        let pusher = export.otlp.as_ref().and_then(|o| match OtlpPusher::start(o.clone(), Arc::clone(&metrics)) {
            Ok(p) => {
                eprintln!("gmprof: live metrics pushed to {} every {:?} (OTLP)", o.url, o.interval);
                Some(p)
            }
            Err(e) => {
                eprintln!("gmprof: {e}; the OTLP push is off, the run goes on");
                None
            }
        });
        (server.is_some() || pusher.is_some()).then(|| Exporter {
            metrics,
            _server: server,
            pusher: Mutex::new(pusher),
        })
    }

    /// The values.
    pub fn metrics(&self) -> &Arc<LiveMetrics> {
        &self.metrics
    }

    /// The run's end: the OTLP push, when there is one, pushes once more and stops; the
    /// warning of its failed pushes, if any. Later calls do nothing.
    pub fn finish(&self) -> Option<String> {
        let mut pusher = self.pusher.lock().take()?;
        let (accepted, failed) = pusher.finish();
        failures_warning(&pusher.settings().url, accepted, failed)
    }
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("server", &self._server).finish_non_exhaustive()
    }
}

static EXPORTER: OnceLock<Option<Exporter>> = OnceLock::new();

/// The process's exporter of `export`, started by the first call (labels from the
/// environment); `None` when live metrics are off or nothing of them could start.
fn exporter(export: Option<&LiveExport>) -> Option<&'static Exporter> {
    let export = export?;
    EXPORTER
        .get_or_init(|| {
            let lookup = |k: &str| std::env::var(k).ok();
            Exporter::start(export, &process_labels(&lookup, layout::host_name()))
        })
        .as_ref()
}

/// The live metrics' feed of the profiler of device `device`, when `export` asks for them:
/// the first call starts the process's exporter. `None` when they are off, or when nothing
/// of them could start (said once on stderr; the run goes on).
pub fn feed(export: Option<&LiveExport>, device: Option<u32>) -> Option<LiveFeed> {
    exporter(export).map(|e| e.metrics.feed(device))
}

/// The process's live metrics themselves, when `export` asks for them (an on-demand run's
/// idle steps): the first call starts the exporter.
pub fn metrics(export: Option<&LiveExport>) -> Option<Arc<LiveMetrics>> {
    exporter(export).map(|e| Arc::clone(&e.metrics))
}

/// The run's end, once its last drain is published: the OTLP push, when there is one,
/// pushes once more (waiting 2 s at most), and its failed pushes go to `report`'s warnings.
pub fn at_run_end(report: Option<&mut Report>) {
    let Some(Some(exporter)) = EXPORTER.get() else { return };
    if let Some(warning) = exporter.finish() {
        eprintln!("gmprof: {warning}");
        if let Some(report) = report {
            report.meta.warnings.push(warning);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(vars: &[(&str, &str)]) -> Result<Option<MetricsExport>> {
        MetricsExport::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn the_port_and_address_are_read_checked_and_offset_by_the_local_rank() {
        assert_eq!(export(&[]).unwrap(), None);
        let on = export(&[(env::METRICS_PORT, "9400")]).unwrap().unwrap();
        assert_eq!(on, MetricsExport { port: 9400, bind: "127.0.0.1".into() });
        let all = export(&[(env::METRICS_PORT, " 9400 "), (env::METRICS_BIND, "0.0.0.0")]).unwrap().unwrap();
        assert_eq!(all.bind, "0.0.0.0");
        for bad in ["0", "65536", "http", "-1"] {
            let e = export(&[(env::METRICS_PORT, bad)]).unwrap_err().to_string();
            assert!(e.contains(&format!("GMPROF_METRICS_PORT={bad}: use a port from 1 to 65535")), "{e}");
        }
        let e = export(&[(env::METRICS_BIND, "0.0.0.0")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_METRICS_BIND is set but GMPROF_METRICS_PORT is not"), "{e}");
        // 8 ranks per host: PORT + LOCAL_RANK.
        assert_eq!(on.port_for(None).unwrap(), 9400);
        assert_eq!((0..8).map(|r| on.port_for(Some(r)).unwrap()).collect::<Vec<_>>(), (9400..9408).collect::<Vec<_>>());
        let high = MetricsExport { port: 65530, bind: DEFAULT_BIND.into() };
        assert!(high.port_for(Some(7)).unwrap_err().to_string().contains("past 65535"));
        assert!(on.port_for(Some(u32::MAX)).unwrap_err().to_string().contains("past 65535"));
    }

    /// The process's exporter on a port another process holds: no feed (the run streams and
    /// writes its outputs as without live metrics), asked again the same, and no panic.
    #[test]
    fn a_port_in_use_leaves_live_metrics_off_and_the_run_going() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let local_rank = std::env::var("LOCAL_RANK").ok().and_then(|v| v.trim().parse::<u32>().ok());
        // The port this process would serve on is the one taken.
        let Some(asked) = port.checked_sub(u16::try_from(local_rank.unwrap_or(0)).unwrap_or(u16::MAX)) else { return };
        let endpoint = MetricsExport { port: asked, bind: DEFAULT_BIND.into() };
        assert_eq!(endpoint.port_for(local_rank).unwrap(), port);
        let export = LiveExport { endpoint: Some(endpoint), otlp: None };
        assert!(feed(Some(&export), Some(0)).is_none());
        assert!(feed(Some(&export), Some(1)).is_none(), "the exporter is tried once per process");
        assert!(feed(None, Some(0)).is_none());
        drop(taken);
    }

    #[test]
    fn the_otlp_endpoint_and_interval_are_read_and_checked() {
        let otlp = |vars: &[(&str, &str)]| {
            otlp_from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
        };
        assert_eq!(otlp(&[]).unwrap(), None);
        // The standard OpenTelemetry variables are the program's: not read.
        assert_eq!(otlp(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]).unwrap(), None);
        let on = otlp(&[(env::OTLP_ENDPOINT, "http://c:4318")]).unwrap().unwrap();
        assert_eq!((on.url.as_str(), on.interval), ("http://c:4318/v1/metrics", DEFAULT_INTERVAL));
        let fast = otlp(&[(env::OTLP_ENDPOINT, "http://c:4318"), (env::OTLP_INTERVAL, "0.5")]).unwrap().unwrap();
        assert_eq!(fast.interval, Duration::from_millis(500));
        for bad in ["0", "-1", "soon", "inf"] {
            let e = otlp(&[(env::OTLP_ENDPOINT, "http://c:4318"), (env::OTLP_INTERVAL, bad)]).unwrap_err().to_string();
            assert!(e.contains(&format!("GMPROF_OTLP_INTERVAL={bad}: give the seconds")), "{e}");
        }
        let e = otlp(&[(env::OTLP_INTERVAL, "5")]).unwrap_err().to_string();
        assert!(e.contains("GMPROF_OTLP_INTERVAL is set but GMPROF_OTLP_ENDPOINT is not"), "{e}");
        let e = otlp(&[(env::OTLP_ENDPOINT, "https://c")]).unwrap_err().to_string();
        assert!(
            e.starts_with("invalid configuration: GMPROF_OTLP_ENDPOINT: ") || e.contains("https is not supported"),
            "{e}"
        );
        let both = LiveExport::from_lookup(|k: &str| {
            [(env::METRICS_PORT, "9400"), (env::OTLP_ENDPOINT, "http://c:4318")]
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
        .unwrap()
        .unwrap();
        assert!(both.endpoint.is_some() && both.otlp.is_some());
    }

    /// An exporter whose collector is down: it starts (the push is its only part), the
    /// run's end pushes once more, and the failures make the report's warning.
    #[test]
    fn an_exporter_whose_collector_is_down_warns_at_the_end() {
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let otlp = OtlpSettings::new(&format!("http://{dead}"), Duration::from_millis(20)).unwrap();
        let export = LiveExport { endpoint: None, otlp: Some(otlp) };
        let exporter = Exporter::start(&export, &ProcessLabels::default()).expect("the push starts");
        std::thread::sleep(Duration::from_millis(100));
        let warning = exporter.finish().expect("failed pushes are said");
        let (accepted, failed) = exporter.metrics().otlp_counts();
        assert_eq!(accepted, 0);
        assert!(failed >= 2, "{failed}");
        assert!(
            warning.starts_with(&format!("{failed} of {failed} OTLP push(es) to http://{dead}/v1/metrics")),
            "{warning}"
        );
        assert_eq!(exporter.finish(), None, "the end is pushed once");
    }

    #[test]
    fn the_labels_come_from_torchruns_variables_where_set() {
        let vars = [("RANK", "11"), ("LOCAL_RANK", "3"), ("WORLD_SIZE", "16")];
        let lookup = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned());
        let labels = process_labels(&lookup, "node1".into());
        let want =
            ProcessLabels { rank: Some(11), local_rank: Some(3), world_size: Some(16), host: Some("node1".into()) };
        assert_eq!(labels, want);
        // Unset or not a number: the label is left out, never 0.
        let bad = |k: &str| (k == "RANK").then(|| "x".to_owned());
        assert_eq!(process_labels(&bad, "h".into()), ProcessLabels { host: Some("h".into()), ..Default::default() });
    }
}
