//! What rides on the streamed drains in `gmprof run`: the flight recorder (`flight.rs`:
//! `--slow-step`, `--group-jump`, `--flight-signal`) and the live metrics
//! (`--metrics-port`, `--metrics-bind`, `--otlp`, `--otlp-interval`), checked before the
//! program starts and passed to
//! the injected library as `GMPROF_*` variables. The work is the library's
//! (`gmprof::analysis::online::flight`, `gmprof::report::live`).

use std::ffi::OsString;

use gmprof::injection::env;
use gmprof::model::ProfilingMode;

#[path = "flight.rs"]
pub mod flight;

/// `gmprof run`'s live metrics options.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LiveArgs {
    /// Live metrics: the program serves Prometheus's endpoint http://127.0.0.1:PORT/metrics
    /// while it runs (step time, GPU time per range group, transfers, DRAM traffic, gmprof's
    /// own health), updated at each streamed drain. A process with LOCAL_RANK (torchrun)
    /// serves on PORT + LOCAL_RANK. The run streams from its start (README, "Live metrics").
    #[arg(long = "metrics-port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub metrics_port: Option<u16>,
    /// The address the live metrics' endpoint listens on (default 127.0.0.1, this host only;
    /// 0.0.0.0 for every interface).
    #[arg(long = "metrics-bind", value_name = "ADDR", requires = "metrics_port")]
    pub metrics_bind: Option<String>,
    /// Live metrics pushed over OTLP/HTTP (protobuf) to a collector, e.g.
    /// http://collector:4318 (/v1/metrics is added when no path is given; plain HTTP only):
    /// the same values as --metrics-port, every --otlp-interval seconds and once more at the
    /// end. A collector down or refusing never stops the run; failed pushes are counted.
    #[arg(long = "otlp", value_name = "ENDPOINT")]
    pub otlp: Option<String>,
    /// Seconds between two OTLP pushes (default 10; fractions allowed).
    #[arg(long = "otlp-interval", value_name = "SECS", requires = "otlp")]
    pub otlp_interval: Option<String>,
}

impl LiveArgs {
    /// The flag that asks for live metrics, for the errors (`None`: not asked).
    fn asked(&self) -> Option<&'static str> {
        match (self.metrics_port, &self.otlp) {
            (Some(_), _) => Some("--metrics-port"),
            (None, Some(_)) => Some("--otlp"),
            (None, None) => None,
        }
    }

    /// The run's mode with live metrics: trace when none is given; kernel_replay, which does
    /// not stream, is an error. A run that starts idle (`idle_start`: `--on-demand`,
    /// `--capture-range`) keeps its mode: its live metrics are the steps it hears. The OTLP
    /// endpoint and interval are checked here. Without live metrics, `mode` as it is.
    pub fn mode(&self, mode: Option<String>, idle_start: bool) -> gmprof::Result<Option<String>> {
        let Some(flag) = self.asked() else { return Ok(mode) };
        if let Some(endpoint) = &self.otlp {
            let interval = match &self.otlp_interval {
                Some(i) => gmprof::ways_in::live_metrics::parse_interval(i)
                    .map_err(|_| gmprof::Error::InvalidConfig(format!("--otlp-interval {i}: give seconds above 0")))?,
                None => gmprof::report::live::push::DEFAULT_INTERVAL,
            };
            gmprof::report::live::OtlpSettings::new(endpoint, interval)
                .map_err(|e| gmprof::Error::InvalidConfig(format!("--otlp: {e}")))?;
        }
        if idle_start {
            return Ok(mode);
        }
        match mode.as_deref().map(str::parse::<ProfilingMode>).transpose()? {
            None => Ok(Some(ProfilingMode::Trace.as_str().to_owned())),
            Some(ProfilingMode::KernelReplay) => Err(gmprof::Error::InvalidConfig(format!(
                "{flag} needs a mode that streams: trace (the default with it), per_kernel or per_range, not \
                 kernel_replay"
            ))),
            Some(_) => Ok(mode),
        }
    }

    /// The environment variables they set.
    pub fn env(&self) -> Vec<(String, OsString)> {
        let port = self.metrics_port.map(|p| (env::METRICS_PORT.to_owned(), p.to_string().into()));
        let bind = self.metrics_bind.as_ref().map(|b| (env::METRICS_BIND.to_owned(), b.into()));
        let otlp = self.otlp.as_ref().map(|e| (env::OTLP_ENDPOINT.to_owned(), e.into()));
        let interval = self.otlp_interval.as_ref().map(|i| (env::OTLP_INTERVAL.to_owned(), i.into()));
        port.into_iter().chain(bind).chain(otlp).chain(interval).collect()
    }
}

/// The flight recorder's and the live metrics' options of `gmprof run`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct StreamArgs {
    #[command(flatten)]
    pub flight: flight::FlightArgs,
    #[command(flatten)]
    pub live: LiveArgs,
}

impl StreamArgs {
    /// The run's mode with them ([`flight::FlightArgs::mode`], [`LiveArgs::mode`]).
    pub fn mode(&self, mode: Option<String>, idle_start: bool) -> gmprof::Result<Option<String>> {
        self.live.mode(self.flight.mode(mode, idle_start)?, idle_start)
    }

    /// The environment variables they set.
    pub fn env(&self) -> Vec<(String, OsString)> {
        let mut vars = self.flight.env();
        vars.extend(self.live.env());
        vars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(port: Option<u16>) -> LiveArgs {
        LiveArgs { metrics_port: port, ..LiveArgs::default() }
    }

    #[test]
    fn live_metrics_pick_trace_refuse_kernel_replay_keep_idle_starts_and_set_their_variables() {
        assert_eq!(live(None).mode(None, true).unwrap(), None);
        assert_eq!(live(Some(9400)).mode(None, false).unwrap().as_deref(), Some("trace"));
        assert_eq!(live(Some(9400)).mode(Some("per_range".into()), false).unwrap().as_deref(), Some("per_range"));
        let e = live(Some(9400)).mode(Some("kernel_replay".into()), false).unwrap_err().to_string();
        assert!(e.contains("--metrics-port needs a mode that streams") && e.contains("not kernel_replay"), "{e}");
        // An idle start keeps its mode: its live metrics are the steps it hears.
        assert_eq!(live(Some(9400)).mode(None, true).unwrap(), None);
        let otlp = |e: &str, i: Option<&str>| LiveArgs {
            otlp: Some(e.into()),
            otlp_interval: i.map(Into::into),
            ..LiveArgs::default()
        };
        assert_eq!(otlp("http://c:4318", None).mode(None, false).unwrap().as_deref(), Some("trace"));
        let e = otlp("http://c:4318", None).mode(Some("kernel_replay".into()), false).unwrap_err().to_string();
        assert!(e.contains("--otlp needs a mode that streams"), "{e}");
        let e = otlp("https://c:4318", None).mode(None, false).unwrap_err().to_string();
        assert!(e.contains("--otlp: ") && e.contains("https is not supported"), "{e}");
        let e = otlp("http://c:4318", Some("0")).mode(None, false).unwrap_err().to_string();
        assert!(e.contains("--otlp-interval 0"), "{e}");
        let vars = otlp("http://c:4318", Some("2.5")).env();
        assert_eq!(
            vars,
            vec![
                ("GMPROF_OTLP_ENDPOINT".to_owned(), OsString::from("http://c:4318")),
                ("GMPROF_OTLP_INTERVAL".to_owned(), OsString::from("2.5"))
            ]
        );
        let args = LiveArgs { metrics_port: Some(9400), metrics_bind: Some("0.0.0.0".into()), ..LiveArgs::default() };
        let vars = args.env();
        assert_eq!(
            vars,
            vec![
                ("GMPROF_METRICS_PORT".to_owned(), OsString::from("9400")),
                ("GMPROF_METRICS_BIND".to_owned(), OsString::from("0.0.0.0"))
            ]
        );
        assert!(live(None).env().is_empty());
    }
}
