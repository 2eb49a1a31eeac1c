//! The on-demand control protocol: one JSON object per line over a Unix stream socket.
//!
//! Layer 3, plain data (no socket here: [`super::server`] and [`super::client`] move the
//! lines). Every message carries `"gmprof": 1`, the protocol version: a server refuses a
//! request of another version with a message that names both, so a `gmprof capture` of another
//! release says so instead of misreading the run. A connection carries one request and its
//! response; a line is at most [`MAX_LINE`] bytes.
//!
//! ```text
//! → {"gmprof":1,"request":"status"}
//! ← {"gmprof":1,"ok":true,"status":{"pid":4242,"rank":0,"next_step":1234,"capture":{"state":"idle"},...}}
//! → {"gmprof":1,"request":"capture","id":3,"span":{"steps":3},"start":{"at_step":1236},
//!    "settings":{"mode":"per_kernel","metrics":null,"pm_sampling":null,"pm_interval":null}}
//! ← {"gmprof":1,"ok":true,"status":{...,"capture":{"state":"armed","id":3,...}}}
//! → {"gmprof":1,"request":"cancel","id":3}
//! ← {"gmprof":1,"ok":false,"error":"capture 5 is running (since step 80, 1 of 3 step(s) done): one capture at a time ..."}
//! ```

use std::io::{BufRead, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::ProfilingMode;

/// The protocol version every message carries.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest line either side reads.
pub const MAX_LINE: usize = 1 << 20;

/// What a capture collects: the `gmprof run` options of the same names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureSettings {
    /// `trace`, `per_kernel`, `per_range` or `kernel_replay` (`None`: the run's default).
    #[serde(default)]
    pub mode: Option<String>,
    /// Metric names (`None`: the run's, else the library's default).
    #[serde(default)]
    pub metrics: Option<Vec<String>>,
    /// PM sampling: `default` or metric names (an add-on to trace mode).
    #[serde(default)]
    pub pm_sampling: Option<String>,
    /// PM sampling interval (`100us`, `1ms`, `30000cycles`).
    #[serde(default)]
    pub pm_interval: Option<String>,
}

impl CaptureSettings {
    /// Checks what can be checked without a GPU: the mode's name, the PM interval, and that
    /// an interval comes with PM sampling.
    pub fn validate(&self) -> Result<()> {
        self.profiling_mode()?;
        if let Some(interval) = &self.pm_interval {
            if self.pm_sampling.is_none() {
                return Err(Error::InvalidConfig("--pm-interval needs --pm-sampling".into()));
            }
            crate::capture::pm_sampling::parse_interval_setting(interval)?;
        }
        if let Some(metrics) = &self.metrics {
            if metrics.iter().all(|m| m.trim().is_empty()) {
                return Err(Error::InvalidConfig("--metrics names no metric".into()));
            }
        }
        Ok(())
    }

    /// The mode asked for, parsed.
    pub fn profiling_mode(&self) -> Result<Option<ProfilingMode>> {
        self.mode.as_deref().map(str::parse).transpose()
    }

    /// These settings with every unset field taken from `defaults`.
    pub fn or(&self, defaults: &CaptureSettings) -> CaptureSettings {
        CaptureSettings {
            mode: self.mode.clone().or_else(|| defaults.mode.clone()),
            metrics: self.metrics.clone().or_else(|| defaults.metrics.clone()),
            pm_sampling: self.pm_sampling.clone().or_else(|| defaults.pm_sampling.clone()),
            pm_interval: self.pm_interval.clone().or_else(|| defaults.pm_interval.clone()),
        }
    }
}

/// How long a capture lasts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Span {
    /// This many whole steps (instances of the step range).
    Steps(u64),
    /// This many seconds; with a step range, up to the end of the step running then.
    Seconds(f64),
    /// Until the trigger that started it says stop (`cudaProfilerStop`, the end of the NVTX
    /// range, `gmprof_capture_stop`).
    UntilStopped,
}

impl Span {
    /// In words: `3 step(s)`, `10 s`, `until stopped`.
    pub fn describe(&self) -> String {
        match self {
            Span::Steps(n) => format!("{n} step(s)"),
            Span::Seconds(s) => format!("{s} s"),
            Span::UntilStopped => "until stopped".into(),
        }
    }

    /// Refuses a span of no steps, no time, or more time than a timer can wait.
    pub fn validate(&self) -> Result<()> {
        match self {
            Span::Steps(0) => Err(Error::InvalidConfig("--steps must be at least 1".into())),
            Span::Seconds(s) if !(s.is_finite() && *s > 0.0) => {
                Err(Error::InvalidConfig(format!("--duration must be a positive number of seconds, not {s}")))
            }
            // The capture's timer waits this long: a Duration holds up to 2^64 seconds.
            Span::Seconds(s) if std::time::Duration::try_from_secs_f64(*s).is_err() => Err(Error::InvalidConfig(
                format!("--duration {s:e} is longer than a capture can last (seconds, up to about 1.8e19)"),
            )),
            _ => Ok(()),
        }
    }
}

/// When a capture starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartAt {
    /// At the push of step `n` (steps are numbered from 0, by the process's own count of
    /// the step range's pushes): the same step on every rank.
    AtStep(u64),
    /// At the next step boundary when the run has a step range; otherwise at the next CUDA
    /// launch or copy the program makes (counter modes need the program's thread), or at
    /// once in trace mode.
    Next,
}

/// A request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// Who the process is and where its capture stands.
    Status,
    /// Start capture `id` (the `K` of `DIR/capture-K/`).
    Capture {
        /// The capture's number in the run.
        id: u64,
        /// What to collect.
        #[serde(default)]
        settings: CaptureSettings,
        /// How long.
        span: Span,
        /// When.
        start: StartAt,
    },
    /// Cancel capture `id` if it has not started yet.
    Cancel {
        /// The capture's number.
        id: u64,
    },
}

/// Where a process's capture stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CaptureState {
    /// Nothing collected: no activity, no counters.
    Idle,
    /// Waiting for its start.
    Armed {
        /// The capture's number.
        id: u64,
        /// When it starts.
        start: StartAt,
        /// How long it lasts.
        span: Span,
    },
    /// Its profiler is being started.
    Starting {
        /// The capture's number.
        id: u64,
    },
    /// Collecting.
    Running {
        /// The capture's number.
        id: u64,
        /// The step it started at, when it started at a step.
        first_step: Option<u64>,
        /// Steps completed inside it.
        steps_done: u64,
        /// How long it lasts.
        span: Span,
    },
    /// Ended; its outputs are being written.
    Finishing {
        /// The capture's number.
        id: u64,
    },
}

impl CaptureState {
    /// The capture this state is about, if any.
    pub fn id(&self) -> Option<u64> {
        match self {
            CaptureState::Idle => None,
            CaptureState::Armed { id, .. }
            | CaptureState::Starting { id }
            | CaptureState::Running { id, .. }
            | CaptureState::Finishing { id } => Some(*id),
        }
    }

    /// In words, for refusals and `gmprof capture --status`.
    pub fn describe(&self) -> String {
        match self {
            CaptureState::Idle => "idle".into(),
            CaptureState::Armed { id, start: StartAt::AtStep(s), span } => {
                format!("capture {id} waits for step {s} ({})", span.describe())
            }
            CaptureState::Armed { id, start: StartAt::Next, span } => {
                format!("capture {id} waits for its start ({})", span.describe())
            }
            CaptureState::Starting { id } => format!("capture {id} is starting"),
            CaptureState::Running { id, first_step, steps_done, span } => {
                let since = first_step.map(|s| format!("since step {s}, ")).unwrap_or_default();
                match span {
                    Span::Steps(n) => format!("capture {id} is running ({since}{steps_done} of {n} step(s) done)"),
                    other => format!("capture {id} is running ({since}{})", other.describe()),
                }
            }
            CaptureState::Finishing { id } => format!("capture {id} is writing its outputs"),
        }
    }
}

/// How a capture ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Its outputs are written.
    Written {
        /// Kernel rows.
        kernels: u64,
        /// Range rows.
        ranges: u64,
    },
    /// It could not start or finish.
    Failed {
        /// Why.
        error: String,
    },
    /// Cancelled before it started.
    Cancelled {
        /// Why.
        reason: String,
    },
}

/// A capture that ended: what `capture.json` in its directory holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaptureRecord {
    /// The capture's number (`K` of `capture-K`).
    pub id: u64,
    /// This process's directory of it.
    pub dir: PathBuf,
    /// What started it: `gmprof capture`, `signal SIGUSR2`, `cudaProfilerStart`,
    /// `nvtx range 'NAME'`, `gmprof_capture_start`.
    pub trigger: String,
    /// The settings it ran with (the run's defaults filled in).
    pub settings: CaptureSettings,
    /// How long it was asked to last.
    pub span: Span,
    /// The step range, when the run has one.
    pub step_range: Option<String>,
    /// The step it started at (blank when it did not start at a step).
    pub first_step: Option<u64>,
    /// Whole steps it holds.
    pub steps: u64,
    /// What ended it: `3 step(s)`, `duration`, `cudaProfilerStop`, `process exit`, ...
    pub ended_by: Option<String>,
    /// Unix time (ns) it started and ended (blank when it never started).
    pub started_unix_ns: Option<u64>,
    /// Unix time (ns) it ended.
    pub ended_unix_ns: Option<u64>,
    /// How it went.
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl CaptureRecord {
    /// One line: `capture 3: steps 1236-1238 (3), 512 kernels, ended by 3 step(s): DIR`.
    pub fn line(&self) -> String {
        let steps = match (self.first_step, self.steps) {
            (Some(first), n) if n > 0 => format!("steps {first}-{} ({n})", first + n - 1),
            (Some(first), _) => format!("from step {first}, no whole step"),
            (None, 0) => "no step range".into(),
            (None, n) => format!("{n} step(s)"),
        };
        let how = match &self.outcome {
            Outcome::Written { kernels, .. } => format!("{kernels} kernels"),
            Outcome::Failed { error } => format!("FAILED: {error}"),
            Outcome::Cancelled { reason } => format!("cancelled: {reason}"),
        };
        let end = self.ended_by.as_deref().map(|e| format!(", ended by {e}")).unwrap_or_default();
        format!("capture {}: {steps}, {how}{end}: {}", self.id, self.dir.display())
    }
}

/// One process of a run, as its status says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessStatus {
    /// Its pid.
    pub pid: u32,
    /// Its host.
    pub host: String,
    /// Its rank, when a rank variable is set.
    pub rank: Option<u32>,
    /// The name of its directory of each capture (`<host>-<rank>`, `<host>-pid<pid>`).
    pub process: String,
    /// The run's output directory, where `capture-K/` directories go.
    pub run_dir: PathBuf,
    /// The gmprof release.
    pub gmprof_version: String,
    /// The step range (`--step-range`, `--torch-steps`), if any.
    pub step_range: Option<String>,
    /// The number of the next step: the step range's pushes heard so far.
    pub next_step: u64,
    /// The settings a capture gets where a request leaves them out.
    pub defaults: CaptureSettings,
    /// Where its capture stands.
    pub capture: CaptureState,
    /// The last capture that ended.
    pub last: Option<CaptureRecord>,
}

impl ProcessStatus {
    /// `rank 1 (pid 4242 on node7)` or `pid 4242 on node7`.
    pub fn who(&self) -> String {
        match self.rank {
            Some(rank) => format!("rank {rank} (pid {} on {})", self.pid, self.host),
            None => format!("pid {} on {}", self.pid, self.host),
        }
    }

    /// One line for `gmprof capture --status`.
    pub fn line(&self) -> String {
        let steps = match &self.step_range {
            Some(name) => format!("step range '{name}', next step {}", self.next_step),
            None => "no step range".into(),
        };
        let last = self.last.as_ref().map(|l| format!("; last {}", l.line())).unwrap_or_default();
        format!("{}: {steps}, {}{last}", self.who(), self.capture.describe())
    }
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The protocol version.
    pub gmprof: u32,
    /// Whether the request was done.
    pub ok: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The process's status after the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ProcessStatus>,
}

impl Response {
    /// A success with the status.
    pub fn ok(status: ProcessStatus) -> Response {
        Response { gmprof: PROTOCOL_VERSION, ok: true, error: None, status: Some(status) }
    }

    /// A refusal or failure, with the status when there is one.
    pub fn refused(error: impl Into<String>, status: Option<ProcessStatus>) -> Response {
        Response { gmprof: PROTOCOL_VERSION, ok: false, error: Some(error.into()), status }
    }
}

/// A request as sent: the version beside the request's fields.
#[derive(Serialize)]
struct Envelope<'a> {
    gmprof: u32,
    #[serde(flatten)]
    request: &'a Request,
}

/// The line a client sends for `request` (no newline).
pub fn encode_request(request: &Request) -> String {
    serde_json::to_string(&Envelope { gmprof: PROTOCOL_VERSION, request })
        .unwrap_or_else(|e| format!("{{\"gmprof\":{PROTOCOL_VERSION},\"error\":\"{e}\"}}"))
}

/// The line a server sends (no newline).
pub fn encode_response(response: &Response) -> String {
    serde_json::to_string(response).unwrap_or_else(|e| {
        format!("{{\"gmprof\":{PROTOCOL_VERSION},\"ok\":false,\"error\":\"could not encode the response: {e}\"}}")
    })
}

/// The protocol version a message declares, checked against ours.
fn check_version(value: &serde_json::Value, what: &str) -> std::result::Result<(), String> {
    match value.get("gmprof").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => Ok(()),
        Some(v) => Err(format!(
            "{what} speaks gmprof control protocol version {v}; this gmprof speaks version {PROTOCOL_VERSION}: \
             use the gmprof of the same release as the run's"
        )),
        None => Err(format!("{what} is not a gmprof control message (no \"gmprof\" version field)")),
    }
}

/// Parses a request line; the error is the message for the client.
pub fn parse_request(line: &str) -> std::result::Result<Request, String> {
    let value: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| format!("the request is not JSON: {e}"))?;
    check_version(&value, "the request")?;
    serde_json::from_value(value).map_err(|e| format!("the request is not one this gmprof knows: {e}"))
}

/// Parses a response line.
pub fn parse_response(line: &str) -> Result<Response> {
    let value: serde_json::Value = serde_json::from_str(line.trim())
        .map_err(|e| Error::InvalidState(format!("the process answered something that is not JSON: {e}")))?;
    check_version(&value, "the process").map_err(Error::InvalidState)?;
    serde_json::from_value(value).map_err(|e| Error::InvalidState(format!("the process's answer is malformed: {e}")))
}

/// Reads one line of at most [`MAX_LINE`] bytes; `None` at the end of the stream.
pub fn read_line<R: BufRead>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = std::io::Read::take(&mut *reader, MAX_LINE as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.len() > MAX_LINE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line longer than {MAX_LINE} bytes"),
        ));
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "a line that is not UTF-8"))
}

/// Writes `line` and a newline, and flushes.
pub fn write_line(writer: &mut impl Write, line: &str) -> std::io::Result<()> {
    writer.write_all(line.as_bytes())?;
    writer.write_all(b"\n")?;
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CaptureSettings {
        CaptureSettings {
            mode: Some("per_kernel".into()),
            metrics: Some(vec!["dram__bytes_read.sum".into()]),
            pm_sampling: None,
            pm_interval: None,
        }
    }

    #[test]
    fn requests_round_trip_with_the_version() {
        let requests = [
            Request::Status,
            Request::Capture { id: 3, settings: settings(), span: Span::Steps(3), start: StartAt::AtStep(1236) },
            Request::Capture {
                id: 4,
                settings: CaptureSettings::default(),
                span: Span::Seconds(2.5),
                start: StartAt::Next,
            },
            Request::Cancel { id: 3 },
        ];
        for request in requests {
            let line = encode_request(&request);
            assert!(line.starts_with("{\"gmprof\":1,"), "{line}");
            assert!(!line.contains('\n'));
            assert_eq!(parse_request(&line).unwrap(), request, "{line}");
        }
        let line = encode_request(&Request::Capture {
            id: 3,
            settings: settings(),
            span: Span::Steps(3),
            start: StartAt::AtStep(1236),
        });
        assert!(line.contains("\"request\":\"capture\"") && line.contains("\"span\":{\"steps\":3}"), "{line}");
        assert!(line.contains("\"start\":{\"at_step\":1236}"), "{line}");
    }

    #[test]
    fn bad_requests_get_messages_that_say_what_is_wrong() {
        let e = parse_request("status please").unwrap_err();
        assert!(e.starts_with("the request is not JSON"), "{e}");
        let e = parse_request(r#"{"request":"status"}"#).unwrap_err();
        assert!(e.contains("no \"gmprof\" version field"), "{e}");
        let e = parse_request(r#"{"gmprof":2,"request":"status"}"#).unwrap_err();
        assert!(e.contains("version 2") && e.contains("speaks version 1"), "{e}");
        let e = parse_request(r#"{"gmprof":1,"request":"explode"}"#).unwrap_err();
        assert!(e.contains("not one this gmprof knows") && e.contains("explode"), "{e}");
        let e =
            parse_request(r#"{"gmprof":1,"request":"capture","id":1,"span":{"weeks":2},"start":"next"}"#).unwrap_err();
        assert!(e.contains("weeks"), "{e}");
    }

    fn status() -> ProcessStatus {
        ProcessStatus {
            pid: 4242,
            host: "node7".into(),
            rank: Some(1),
            process: "node7-1".into(),
            run_dir: PathBuf::from("/runs/a"),
            gmprof_version: "0.1.0".into(),
            step_range: Some("step".into()),
            next_step: 1234,
            defaults: CaptureSettings { mode: Some("trace".into()), ..Default::default() },
            capture: CaptureState::Running { id: 2, first_step: Some(1230), steps_done: 1, span: Span::Steps(3) },
            last: Some(CaptureRecord {
                id: 1,
                dir: PathBuf::from("/runs/a/capture-1/node7-1"),
                trigger: "gmprof capture".into(),
                settings: settings(),
                span: Span::Steps(3),
                step_range: Some("step".into()),
                first_step: Some(40),
                steps: 3,
                ended_by: Some("3 step(s)".into()),
                started_unix_ns: Some(1),
                ended_unix_ns: Some(2),
                outcome: Outcome::Written { kernels: 512, ranges: 9 },
            }),
        }
    }

    #[test]
    fn responses_round_trip_and_read_as_lines() {
        for response in [Response::ok(status()), Response::refused("no", None), Response::refused("no", Some(status()))]
        {
            let line = encode_response(&response);
            assert_eq!(parse_response(&line).unwrap(), response, "{line}");
        }
        let s = status();
        assert_eq!(
            s.line(),
            "rank 1 (pid 4242 on node7): step range 'step', next step 1234, capture 2 is running (since step 1230, \
             1 of 3 step(s) done); last capture 1: steps 40-42 (3), 512 kernels, ended by 3 step(s): \
             /runs/a/capture-1/node7-1"
        );
        let e = parse_response(r#"{"gmprof":7,"ok":true}"#).unwrap_err().to_string();
        assert!(e.contains("version 7"), "{e}");
        assert!(parse_response("<html>").unwrap_err().to_string().contains("not JSON"));
    }

    #[test]
    fn lines_are_bounded_and_utf8() {
        let mut two = std::io::Cursor::new(b"{\"a\":1}\n{\"b\":2}\n".to_vec());
        assert_eq!(read_line(&mut two).unwrap().unwrap(), "{\"a\":1}\n");
        assert_eq!(read_line(&mut two).unwrap().unwrap(), "{\"b\":2}\n");
        assert_eq!(read_line(&mut two).unwrap(), None);
        let mut long = std::io::Cursor::new(vec![b'x'; MAX_LINE + 10]);
        assert!(read_line(&mut long).unwrap_err().to_string().contains("longer than"));
        let mut bad = std::io::Cursor::new(vec![0xff, 0xfe, b'\n']);
        assert!(read_line(&mut bad).unwrap_err().to_string().contains("not UTF-8"));
        let mut out = Vec::new();
        write_line(&mut out, "{}").unwrap();
        assert_eq!(out, b"{}\n");
    }

    #[test]
    fn settings_and_spans_are_checked() {
        assert!(settings().validate().is_ok());
        let bad = CaptureSettings { mode: Some("fastest".into()), ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("unknown mode 'fastest'"));
        let lone = CaptureSettings { pm_interval: Some("10us".into()), ..Default::default() };
        assert!(lone.validate().unwrap_err().to_string().contains("--pm-interval needs --pm-sampling"));
        let empty = CaptureSettings { metrics: Some(vec![" ".into()]), ..Default::default() };
        assert!(empty.validate().is_err());
        assert!(Span::Steps(0).validate().is_err());
        assert!(Span::Seconds(0.0).validate().is_err());
        assert!(Span::Seconds(f64::NAN).validate().is_err());
        assert!(Span::Steps(3).validate().is_ok() && Span::Seconds(0.5).validate().is_ok());
        let defaults =
            CaptureSettings { mode: Some("trace".into()), metrics: Some(vec!["m".into()]), ..Default::default() };
        let asked = CaptureSettings { mode: Some("per_range".into()), ..Default::default() };
        let merged = asked.or(&defaults);
        assert_eq!(merged.mode.as_deref(), Some("per_range"));
        assert_eq!(merged.metrics, Some(vec!["m".to_owned()]));
    }
}
