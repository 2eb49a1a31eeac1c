//! The live metrics' HTTP endpoint ([`MetricsServer`]): `GET /metrics` answers
//! [`LiveMetrics::encode`]'s text, anything else 404. `tiny_http` accepts and reads the
//! requests on threads of its own; one `gmprof-metrics` thread encodes and answers them, so
//! a scrape never runs on the program's threads, and the only lock it shares with the run
//! is the store's (one for every family), which the stream thread takes once per drain.
//!
//! A server that cannot start (the port in use, an address that does not resolve) is an
//! error for the caller to say; nothing here panics or ends the program.
//!
//! Imports `values`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::values::{LiveMetrics, CONTENT_TYPE};
use crate::error::{Error, Result};

/// The path Prometheus scrapes.
pub const METRICS_PATH: &str = "/metrics";

/// The endpoint of a process's [`LiveMetrics`]; see the [module docs](self).
pub struct MetricsServer {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves `metrics` at `http://BIND:PORT/metrics` (`port` 0: one the system picks, see
    /// [`MetricsServer::addr`]).
    pub fn start(bind: &str, port: u16, metrics: Arc<LiveMetrics>) -> Result<Self> {
        let unusable = |why: String| Error::InvalidConfig(format!("live metrics on {bind} port {port}: {why}"));
        let addr = (bind, port)
            .to_socket_addrs()
            .map_err(|e| unusable(format!("the address does not resolve ({e})")))?
            .next()
            .ok_or_else(|| unusable("the address does not resolve".into()))?;
        // tiny_http starts its accept thread with `thread::spawn`, which panics when the
        // system has no thread to give: an error here, not a panic in the program.
        let started = std::panic::catch_unwind(|| tiny_http::Server::http(addr))
            .map_err(|_| unusable("its HTTP server could not start (no thread?)".into()))?;
        let server = started.map_err(|e| {
            let in_use =
                e.downcast_ref::<std::io::Error>().map(std::io::Error::kind) == Some(std::io::ErrorKind::AddrInUse);
            if in_use {
                unusable(format!("{addr} is in use ({e}): another process (another rank?) serves on it"))
            } else {
                unusable(format!("could not listen on {addr}: {e}"))
            }
        })?;
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("gmprof-metrics".into())
            .spawn(move || serve(&serving, &metrics))
            .map_err(|e| unusable(format!("could not start its thread: {e}")))?;
        Ok(Self { addr, server, thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL Prometheus scrapes.
    pub fn url(&self) -> String {
        format!("http://{}{METRICS_PATH}", self.addr)
    }

    /// Stops serving and waits for its thread.
    pub fn stop(mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

/// Answers requests until the server is unblocked.
fn serve(server: &tiny_http::Server, metrics: &LiveMetrics) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or_default();
        let get = matches!(request.method(), tiny_http::Method::Get | tiny_http::Method::Head);
        let response = if !get {
            tiny_http::Response::from_string("use GET\n").with_status_code(405)
        } else if path == METRICS_PATH {
            // An encoding that fails (or panics) answers 500; the next scrape tries again.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| metrics.encode())) {
                Ok(Ok(text)) => match tiny_http::Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes()) {
                    Ok(header) => tiny_http::Response::from_string(text).with_header(header),
                    Err(()) => tiny_http::Response::from_string(text),
                },
                _ => tiny_http::Response::from_string("gmprof could not encode its metrics\n").with_status_code(500),
            }
        } else {
            tiny_http::Response::from_string(format!("gmprof serves its live metrics at {METRICS_PATH}\n"))
                .with_status_code(404)
        };
        if let Err(e) = request.respond(response) {
            tracing::debug!("gmprof: a metrics scrape was not answered: {e}");
        }
    }
}
