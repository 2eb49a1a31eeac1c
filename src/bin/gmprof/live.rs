//! What rides on the streamed drains in `gmprof run`: the flight recorder (`flight.rs`:
//! `--slow-step`, `--group-jump`, `--flight-signal`) and the live metrics
//! (`--metrics-port`, `--metrics-bind`), checked before the program starts and passed to
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
}

impl LiveArgs {
    /// The run's mode with live metrics: trace when none is given; kernel_replay, which does
    /// not stream, is an error, and so is a run that starts idle (`idle_start`). Without live
    /// metrics, `mode` as it is.
    pub fn mode(&self, mode: Option<String>, idle_start: bool) -> gmprof::Result<Option<String>> {
        if self.metrics_port.is_none() {
            return Ok(mode);
        }
        if idle_start {
            return Err(gmprof::Error::InvalidConfig(
                "--metrics-port exports the whole run's drains: it does not run beside --on-demand or \
                 --capture-range (captures do not stream)"
                    .into(),
            ));
        }
        match mode.as_deref().map(str::parse::<ProfilingMode>).transpose()? {
            None => Ok(Some(ProfilingMode::Trace.as_str().to_owned())),
            Some(ProfilingMode::KernelReplay) => Err(gmprof::Error::InvalidConfig(
                "--metrics-port needs a mode that streams: trace (the default with it), per_kernel or per_range, \
                 not kernel_replay"
                    .into(),
            )),
            Some(_) => Ok(mode),
        }
    }

    /// The environment variables they set.
    pub fn env(&self) -> Vec<(String, OsString)> {
        let port = self.metrics_port.map(|p| (env::METRICS_PORT.to_owned(), p.to_string().into()));
        let bind = self.metrics_bind.as_ref().map(|b| (env::METRICS_BIND.to_owned(), b.into()));
        port.into_iter().chain(bind).collect()
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
        LiveArgs { metrics_port: port, metrics_bind: None }
    }

    #[test]
    fn live_metrics_pick_trace_refuse_kernel_replay_and_idle_starts_and_set_their_variables() {
        assert_eq!(live(None).mode(None, true).unwrap(), None);
        assert_eq!(live(Some(9400)).mode(None, false).unwrap().as_deref(), Some("trace"));
        assert_eq!(live(Some(9400)).mode(Some("per_range".into()), false).unwrap().as_deref(), Some("per_range"));
        let e = live(Some(9400)).mode(Some("kernel_replay".into()), false).unwrap_err().to_string();
        assert!(e.contains("not kernel_replay"), "{e}");
        let e = live(Some(9400)).mode(None, true).unwrap_err().to_string();
        assert!(e.contains("--on-demand"), "{e}");
        let args = LiveArgs { metrics_port: Some(9400), metrics_bind: Some("0.0.0.0".into()) };
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
