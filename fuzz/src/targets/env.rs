//! `env`: the `GMPROF_*` environment variables (and the rank variables) as the injected
//! library, the C ABI and `gmprof run` read them: [`InjectionConfig::from_lookup`] (with
//! the end settings, PM and PC sampling), [`OnDemandConfig::from_lookup`],
//! [`probe_run::config_from`] (`--probe`), [`OutputFormats::from_lookup`], and the output
//! directory's template and rank ([`layout`]), and the caches `--probe` searches
//! ([`select::cache_dirs`]). The input is `NAME=VALUE` lines; a name set
//! twice takes its last value.
//!
//! `GMPROF_PROBE`'s `.toml` items are left out: they name files to read, which the
//! `probe_spec` target covers.

use std::path::Path;
use std::time::Duration;

use gmprof::probe::select;
use gmprof::report::tables::formats::OutputFormats;
use gmprof::ways_in::injection_config::InjectionConfig;
use gmprof::ways_in::layout::{self, ProcessIdentity, Target};
use gmprof::ways_in::on_demand::protocol::Span;
use gmprof::ways_in::on_demand::OnDemandConfig;
use gmprof::ways_in::probe_run;
use gmprof::ways_in::settings::EndSettings;

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let vars: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let lookup = |key: &str| -> Option<String> {
        let value = vars.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v.to_string())?;
        if key == probe_run::PROBE_ENV {
            return Some(value.split(',').filter(|item| !item.trim().ends_with(".toml")).collect::<Vec<_>>().join(","));
        }
        Some(value)
    };
    if let Ok(config) = InjectionConfig::from_lookup(lookup) {
        let _ = format!("{config:?}");
    }
    let _ = EndSettings::from_lookup(lookup);
    if let Ok(Some(config)) = OnDemandConfig::from_lookup(&lookup) {
        let _ = config.capture_range.as_ref().map(|r| r.describe());
        let _ = config.signal_span.describe();
        // A signal's capture of seconds gets a timer thread that sleeps that long.
        if let Span::Seconds(seconds) = config.signal_span {
            assert!(
                Duration::try_from_secs_f64(seconds).is_ok(),
                "{}={seconds} was accepted, but no timer waits that long",
                gmprof::ways_in::on_demand::env::CAPTURE_DURATION
            );
        }
    }
    let _ = probe_run::config_from(lookup);
    let _ = OutputFormats::from_lookup(lookup);
    // Where `--probe` looks for Triton's and Inductor's PTX.
    let _ = select::cache_dirs(&|k: &str| lookup(k).map(std::ffi::OsString::from));
    // The process's directory: its rank, the template of `GMPROF_OUT`.
    let rank = layout::detect_rank(&lookup);
    let id = ProcessIdentity { host: "node7".into(), pid: 4242, parent_pid: 100, rank };
    let _ = id.dir_name();
    if let Some(out) = lookup(gmprof::ways_in::env_names::injection::OUT) {
        let launcher = lookup(layout::LAUNCHER_PID_ENV).and_then(|v| v.trim().parse::<u32>().ok());
        let _ = layout::expand_template(&out, &id, &lookup);
        let _ = Target::resolve(Path::new(&out), &id, launcher, &lookup);
        let _ = layout::template_root(Path::new(&out));
    }
}
