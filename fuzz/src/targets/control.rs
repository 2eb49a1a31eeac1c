//! `control`: the on-demand control protocol on the server's side, in the profiled program:
//! a connection's bytes read as the control thread reads them and answered by the process's
//! on-demand service ([`server::respond`]: one line of at most `MAX_LINE` bytes, parsed,
//! checked and handled by a real [`Service`] whose CUPTI backend is a stand-in that arms and
//! fails to start). The input is up to [`MAX_REQUESTS`] lines, one connection each, served by
//! a process with a step range and by one without; steps pass between requests. Each answer
//! is also read back as `gmprof capture` reads it ([`protocol::parse_response`]).

use std::io::BufRead as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gmprof::ways_in::on_demand::backend::{CaptureBackend, LiveCapture};
use gmprof::ways_in::on_demand::protocol::{self, CaptureSettings, Request, Span};
use gmprof::ways_in::on_demand::server;
use gmprof::ways_in::on_demand::service::{ProcessInfo, Service};
use gmprof::ways_in::on_demand::steps::StepRange;
use gmprof::ways_in::on_demand::OnDemandConfig;
use gmprof::Error;

/// Connections per input at most.
pub const MAX_REQUESTS: usize = 8;

/// CUPTI's stand-in: arming works, starting fails (so no capture runs and no timer thread
/// is left behind; a failed start is recorded like a real one).
struct Backend;

impl CaptureBackend for Backend {
    fn arm(&self, _at_next_call: bool) -> gmprof::Result<()> {
        Ok(())
    }

    fn start(&self, _settings: &CaptureSettings, _dir: &Path) -> gmprof::Result<Arc<dyn LiveCapture>> {
        Err(Error::InvalidState("no GPU in the fuzz target".into()))
    }

    fn disarm(&self) {}
}

fn service(step_range: Option<&str>, run_dir: &Path) -> Arc<Service> {
    let config = OnDemandConfig {
        on_demand: true,
        step_range: step_range.map(|s| StepRange::new(s).expect("a valid step range")),
        capture_range: None,
        range_captures: Some(1),
        signal: None,
        defaults: CaptureSettings { mode: Some("trace".into()), ..Default::default() },
        signal_span: Span::Steps(3),
        nvtx_include: Vec::new(),
    };
    let service = Service::new(config);
    let process = ProcessInfo {
        pid: 4242,
        host: "node7".into(),
        rank: Some(0),
        process: "node7-0".into(),
        run_dir: run_dir.to_owned(),
    };
    service.attach(process, Arc::new(Backend));
    service
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let dir = super::scratch_dir().join("control");
    let _ = std::fs::remove_dir_all(&dir);
    for step_range in [Some("step"), None] {
        let service = service(step_range, &dir);
        let mut reader = std::io::Cursor::new(data);
        for _ in 0..MAX_REQUESTS {
            if reader.fill_buf().map_or(true, |b| b.is_empty()) {
                break;
            }
            // What the request asked for, when it is one (the answer must agree).
            let asked = {
                let rest = reader.fill_buf().unwrap_or(&[]);
                let line = rest.split(|&b| b == b'\n').next().unwrap_or(&[]);
                std::str::from_utf8(line).ok().and_then(|l| protocol::parse_request(l).ok())
            };
            let Some(response) = server::respond(&mut reader, service.as_ref()) else { break };
            if let (true, Some(Request::Capture { span: Span::Seconds(seconds), .. })) = (response.ok, &asked) {
                // A capture of seconds gets a timer thread that sleeps that long.
                assert!(
                    Duration::try_from_secs_f64(*seconds).is_ok(),
                    "a capture of {seconds} s was accepted, but no timer waits that long"
                );
            }
            let line = protocol::encode_response(&response);
            let back = protocol::parse_response(&line).expect("an answer reads back");
            assert_eq!(back.ok, response.ok);
            if let Some(status) = &back.status {
                let _ = status.line();
            }
            service.on_push("step");
            service.on_pop();
        }
        let _ = service.state().describe();
    }
    // What `gmprof capture` reads: the line as a response.
    if let Ok(line) = std::str::from_utf8(data) {
        if let Ok(response) = protocol::parse_response(line.lines().next().unwrap_or("")) {
            if let Some(status) = response.status {
                let _ = status.line();
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
