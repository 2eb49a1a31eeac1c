//! Live metrics in a profiled process (issue 45): the settings ([`MetricsExport`], from
//! `GMPROF_METRICS_PORT` and `GMPROF_METRICS_BIND`, which `gmprof run --metrics-port` and
//! `--metrics-bind` set), the process's labels from torchrun's environment
//! ([`process_labels`]), and the process's exporter, started once, by the first profiler
//! that streams ([`feed`]).
//!
//! **One port per process.** Every rank of a job gets the same `GMPROF_METRICS_PORT` from
//! its launcher; a process with `LOCAL_RANK` set serves on `PORT + LOCAL_RANK`
//! ([`MetricsExport::port_for`]), so the 8 ranks of a host serve on 8 ports in a row. A port
//! that cannot be had (in use, an address that does not resolve) is said once on stderr and
//! the run goes on without live metrics, its outputs as they would be.
//!
//! At the bottom of `ways_in` beside [`crate::ways_in::settings`]: imports
//! [`crate::ways_in::env_names`] and [`crate::ways_in::layout`] (the host name); imported by
//! [`crate::ways_in::injection`], [`crate::ways_in::injection_config`] and the C ABI.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::report::live::{LiveFeed, LiveMetrics, MetricsServer, ProcessLabels};
use crate::ways_in::env_names::injection as env;
use crate::ways_in::layout;

/// The address the endpoint listens on by default: this host only.
pub const DEFAULT_BIND: &str = "127.0.0.1";

/// Whether and where the process exports live metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsExport {
    /// The port asked for (`GMPROF_METRICS_PORT`); a process serves on it + `LOCAL_RANK`.
    pub port: u16,
    /// The address to listen on (`GMPROF_METRICS_BIND`, [`DEFAULT_BIND`] when unset).
    pub bind: String,
}

impl MetricsExport {
    /// Reads the settings through `lookup` (an environment); `None` without a port.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
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

/// Starts an exporter of `export` for a process labelled `labels`: the metrics and their
/// endpoint (on `export`'s port + the local rank).
pub fn start(export: &MetricsExport, labels: &ProcessLabels) -> Result<(Arc<LiveMetrics>, MetricsServer)> {
    let port = export.port_for(labels.local_rank)?;
    let metrics = Arc::new(LiveMetrics::new(labels));
    let server = MetricsServer::start(&export.bind, port, Arc::clone(&metrics))?;
    Ok((metrics, server))
}

/// The process's exporter: `None` when it could not start.
struct Exporter {
    metrics: Arc<LiveMetrics>,
    _server: MetricsServer,
}

static EXPORTER: OnceLock<Option<Exporter>> = OnceLock::new();

/// The live metrics' feed of the profiler of device `device`, when `export` asks for them:
/// the first call starts the process's exporter (labels from the environment). `None` when
/// they are off, or when the endpoint could not start (said once on stderr; the run goes on).
pub fn feed(export: Option<&MetricsExport>, device: Option<u32>) -> Option<LiveFeed> {
    let export = export?;
    let exporter = EXPORTER.get_or_init(|| {
        let lookup = |k: &str| std::env::var(k).ok();
        let labels = process_labels(&lookup, layout::host_name());
        match start(export, &labels) {
            Ok((metrics, server)) => {
                eprintln!("gmprof: live metrics at {}", server.url());
                Some(Exporter { metrics, _server: server })
            }
            Err(e) => {
                eprintln!("gmprof: {e}; live metrics are off, the run goes on");
                None
            }
        }
    });
    exporter.as_ref().map(|e| e.metrics.feed(device))
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
        let export = MetricsExport { port: asked, bind: DEFAULT_BIND.into() };
        assert_eq!(export.port_for(local_rank).unwrap(), port);
        assert!(feed(Some(&export), Some(0)).is_none());
        assert!(feed(Some(&export), Some(1)).is_none(), "the exporter is tried once per process");
        assert!(feed(None, Some(0)).is_none());
        drop(taken);
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
