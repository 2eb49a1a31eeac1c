//! OTLP push of the live metrics ([`OtlpPusher`]): every [`OtlpSettings::interval`] a
//! `gmprof-otlp` thread encodes the values (`otlp`) and POSTs them to the collector's
//! OTLP/HTTP endpoint (`Content-Type: application/x-protobuf`), with `ureq`, a blocking
//! client: no async runtime is started in the profiled process. [`OtlpPusher::finish`] pushes
//! once more at the end of the run, after the last drain.
//!
//! A collector that is down, refuses (any status but 2xx) or does not answer within
//! [`OtlpSettings::timeout`] never blocks nor fails the program: the push is counted as failed
//! (`gmprof_otlp_push_failures_total`, the end-of-run warning), the first failure is said once
//! on stderr, and the next interval tries again. Plain HTTP only: this build carries no TLS
//! stack, so an `https://` endpoint is refused when the settings are read.
//!
//! Imports `otlp` and `values`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;

use super::otlp;
use super::values::LiveMetrics;
use crate::error::{Error, Result};

/// The path OTLP/HTTP takes metrics at, added to an endpoint given without one.
pub const METRICS_PATH: &str = "/v1/metrics";

/// The interval between pushes unless asked.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// How long the push at the end of the run waits at most (the program's exit waits for it).
pub const FINAL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the end waits at most for a periodic push in flight (then leaves it to its
/// timeout, on its own thread).
pub const STOP_WAIT: Duration = Duration::from_secs(1);

/// Where and how often to push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The full URL pushes go to (`http://HOST:PORT/v1/metrics`).
    pub url: String,
    /// Time between two pushes.
    pub interval: Duration,
    /// How long one push waits at most (connection and answer).
    pub timeout: Duration,
}

impl OtlpSettings {
    /// Settings for `endpoint` (`http://HOST:PORT`, to which [`METRICS_PATH`] is added, or
    /// a full URL with its own path), pushing every `interval`. An error says what to give.
    pub fn new(endpoint: &str, interval: Duration) -> Result<Self> {
        let endpoint = endpoint.trim();
        let bad = |why: &str| {
            Error::InvalidConfig(format!(
                "OTLP endpoint '{endpoint}': {why}; give the collector's OTLP/HTTP receiver, e.g. \
                 http://collector:4318 (metrics go to its {METRICS_PATH})"
            ))
        };
        if endpoint.starts_with("https://") {
            return Err(bad(
                "https is not supported (gmprof carries no TLS stack into the profiled process); use a collector's \
                 plain-HTTP receiver, e.g. a collector on the same host or pod",
            ));
        }
        let Some(rest) = endpoint.strip_prefix("http://") else {
            return Err(bad("it does not start with http://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains(char::is_whitespace) {
            return Err(bad("it names no host"));
        }
        if interval.is_zero() {
            return Err(Error::InvalidConfig("the OTLP push interval is 0: give a number of seconds above 0".into()));
        }
        let path = if path.is_empty() || path == "/" { METRICS_PATH } else { path };
        let timeout = interval.min(Duration::from_secs(5));
        Ok(Self { url: format!("http://{authority}{path}"), interval, timeout })
    }
}

/// The process's OTLP push; see the [module docs](self).
pub struct OtlpPusher {
    settings: OtlpSettings,
    metrics: Arc<LiveMetrics>,
    warned: Arc<AtomicBool>,
    thread: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
}

impl std::fmt::Debug for OtlpPusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpPusher").field("settings", &self.settings).finish_non_exhaustive()
    }
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .new_agent()
}

/// One push: `Err` says why it failed.
fn push_once(agent: &ureq::Agent, url: &str, metrics: &LiveMetrics) -> std::result::Result<(), String> {
    let body = otlp::request(metrics, unix_ns()).encode_to_vec();
    let response =
        agent.post(url).header("Content-Type", "application/x-protobuf").send(&body[..]).map_err(|e| e.to_string())?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the collector answered HTTP {}", status.as_u16()))
    }
}

/// Pushes once and counts it; says the first failure on stderr.
fn push_counted(agent: &ureq::Agent, settings: &OtlpSettings, metrics: &LiveMetrics, warned: &AtomicBool) {
    // A panic in the encoder or the client is a failed push, not the program's end.
    let pushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| push_once(agent, &settings.url, metrics)))
        .unwrap_or_else(|_| Err("an internal error in gmprof's OTLP push".into()));
    metrics.otlp_pushed(pushed.is_ok());
    if let Err(e) = pushed {
        if !warned.swap(true, Ordering::Relaxed) {
            eprintln!(
                "gmprof: OTLP push to {} failed ({e}); gmprof tries again every {:?} and counts the failures \
                 (gmprof_otlp_push_failures_total, the report's warnings); the run goes on",
                settings.url, settings.interval
            );
        } else {
            tracing::debug!("gmprof: OTLP push to {} failed: {e}", settings.url);
        }
    }
}

impl OtlpPusher {
    /// Starts pushing `metrics` as `settings` say, on a thread of its own.
    pub fn start(settings: OtlpSettings, metrics: Arc<LiveMetrics>) -> Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let warned = Arc::new(AtomicBool::new(false));
        let (s, m, w) = (settings.clone(), Arc::clone(&metrics), Arc::clone(&warned));
        let thread = std::thread::Builder::new()
            .name("gmprof-otlp".into())
            .spawn(move || {
                let agent = agent(s.timeout);
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(s.interval) {
                    push_counted(&agent, &s, &m, &w);
                }
            })
            .map_err(|e| Error::InvalidState(format!("could not start the OTLP push thread: {e}")))?;
        Ok(Self { settings, metrics, warned, thread: Some((stop, thread)) })
    }

    /// The settings.
    pub fn settings(&self) -> &OtlpSettings {
        &self.settings
    }

    /// Stops the thread (waiting [`STOP_WAIT`] at most for a push in flight) and pushes once
    /// more (waiting [`FINAL_TIMEOUT`] at most): the run's last values. Returns the pushes
    /// accepted and failed over the run.
    pub fn finish(&mut self) -> (u64, u64) {
        if let Some((stop, thread)) = self.thread.take() {
            let _ = stop.send(());
            let waited = std::time::Instant::now();
            while !thread.is_finished() && waited.elapsed() < STOP_WAIT {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
            push_counted(&agent(FINAL_TIMEOUT.min(self.settings.timeout)), &self.settings, &self.metrics, &self.warned);
        }
        self.metrics.otlp_counts()
    }
}

impl Drop for OtlpPusher {
    fn drop(&mut self) {
        if let Some((stop, _)) = self.thread.take() {
            // Not joined: a push in flight ends by its timeout, on its own thread.
            let _ = stop.send(());
        }
    }
}

/// The end-of-run warning of `failed` failed pushes of `pushes` to `url`; `None` when none
/// failed.
pub fn failures_warning(url: &str, accepted: u64, failed: u64) -> Option<String> {
    (failed > 0).then(|| {
        format!(
            "{failed} of {} OTLP push(es) to {url} failed (collector down, refused or too slow): the live metrics \
             it has stop at the last accepted push; the run's own outputs are complete",
            accepted + failed
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_get_the_metrics_path_and_https_or_no_scheme_is_refused() {
        let s = OtlpSettings::new("http://collector:4318", Duration::from_secs(10)).unwrap();
        assert_eq!(s.url, "http://collector:4318/v1/metrics");
        assert_eq!(s.timeout, Duration::from_secs(5));
        let s = OtlpSettings::new(" http://127.0.0.1:4318/ ", Duration::from_secs(1)).unwrap();
        assert_eq!((s.url.as_str(), s.timeout), ("http://127.0.0.1:4318/v1/metrics", Duration::from_secs(1)));
        let s = OtlpSettings::new("http://c:4318/otlp/v1/metrics", Duration::from_secs(10)).unwrap();
        assert_eq!(s.url, "http://c:4318/otlp/v1/metrics");
        let e = OtlpSettings::new("https://c:4318", Duration::from_secs(10)).unwrap_err().to_string();
        assert!(e.contains("https is not supported") && e.contains("http://collector:4318"), "{e}");
        let e = OtlpSettings::new("collector:4318", Duration::from_secs(10)).unwrap_err().to_string();
        assert!(e.contains("does not start with http://"), "{e}");
        let e = OtlpSettings::new("http:///v1/metrics", Duration::from_secs(10)).unwrap_err().to_string();
        assert!(e.contains("names no host"), "{e}");
        assert!(OtlpSettings::new("http://c:1", Duration::ZERO).is_err());
        assert_eq!(failures_warning("u", 3, 0), None);
        assert!(failures_warning("u", 3, 2).unwrap().starts_with("2 of 5 OTLP push(es) to u failed"));
    }
}
