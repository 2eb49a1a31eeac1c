//! Headless Chromium for the figures: which browser ([`find`]: `GMPROF_CHROMIUM`, else
//! `chromium`, `chromium-browser` or `google-chrome` on `PATH`) and one run of it on a page
//! ([`dump_dom`]): offline (no host name resolves, no proxy answers), in a profile of its own,
//! under a time limit, returning the page as its scripts left it (`--dump-dom`) and the
//! browser's console lines.
//!
//! Imports nothing of gmprof but its errors.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The variable that names the browser, or `none` for no browser.
pub const ENV: &str = "GMPROF_CHROMIUM";
/// The browsers looked for on `PATH`, in order.
pub const NAMES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];
/// How long one browser run may take (a report's figures take a few seconds).
pub const TIMEOUT: Duration = Duration::from_secs(120);
/// How the user gets a browser, for messages.
pub const HOW: &str = "install Chromium (Debian/Ubuntu: apt-get install chromium) or set GMPROF_CHROMIUM to a \
                       Chromium or Chrome binary";

/// The browser the figures are drawn in, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Browser {
    /// This binary.
    At(PathBuf),
    /// `GMPROF_CHROMIUM=none`: no browser is wanted.
    Off,
    /// `GMPROF_CHROMIUM` is not set and none of [`NAMES`] is on `PATH`.
    Missing,
}

fn executable(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The browser named by `GMPROF_CHROMIUM` (a path, a name on `PATH`, or `none`), else the
/// first of [`NAMES`] on `PATH`. A `GMPROF_CHROMIUM` that names no executable is an error.
pub fn find() -> Result<Browser> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = |name: &str| std::env::split_paths(&path).map(|d| d.join(name)).find(|p| executable(p));
    match std::env::var(ENV) {
        Ok(v) if v.trim().is_empty() => {}
        Ok(v) if v.trim().eq_ignore_ascii_case("none") => return Ok(Browser::Off),
        Ok(v) => {
            let named = Path::new(v.trim());
            let found = if named.components().count() > 1 {
                executable(named).then(|| named.to_owned())
            } else {
                on_path(v.trim())
            };
            return found.map(Browser::At).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "{ENV}={v} names no executable file: set it to a Chromium or Chrome binary (e.g. /usr/bin/chromium), \
                     or to none for the figures gmprof draws itself (SVG, no PNG)"
                ))
            });
        }
        Err(_) => {}
    }
    Ok(NAMES.iter().find_map(|n| on_path(n)).map_or(Browser::Missing, Browser::At))
}

/// A `file://` URL of `path` (absolute) with `fragment`.
pub fn file_url(path: &Path, fragment: &str) -> String {
    let mut url = String::from("file://");
    for b in path.as_os_str().as_encoded_bytes() {
        match *b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => url.push(char::from(*b)),
            b => url.push_str(&format!("%{b:02X}")),
        }
    }
    url.push('#');
    url.push_str(fragment);
    url
}

/// What a browser run left: the page's DOM and the browser's console lines.
#[derive(Clone, Debug)]
pub struct Dump {
    pub dom: String,
    /// Chromium's log lines of the page's console (`CONSOLE`): a page that runs cleanly has none.
    pub console: Vec<String>,
}

/// Kills `child` and every process of its group (it leads one), and reaps it.
fn kill_group(child: &mut Child) {
    if let Ok(group) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the process group `group`, which the
        // child leads (it was started with process_group(0) and is not yet reaped, so the id
        // is still its own); it takes no pointers.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Loads the page file `page` at `#fragment` in headless `browser`, offline, and returns its
/// DOM once its scripts ran; the browser (and all it started) is killed after `timeout`.
pub fn dump_dom(browser: &Path, page: &Path, fragment: &str, timeout: Duration) -> Result<Dump> {
    let tmp = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let (out_path, err_path) = (tmp.path().join("dom.html"), tmp.path().join("browser.log"));
    let out = File::create(&out_path).map_err(|e| Error::io(&out_path, e))?;
    let err = File::create(&err_path).map_err(|e| Error::io(&err_path, e))?;
    let mut command = Command::new(browser);
    command
        .args([
            "--headless",
            // The page is gmprof's own, loaded offline; the sandbox needs privileges that
            // containers and root lack.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=10000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", tmp.path().join("profile").display()))
        .arg("--dump-dom")
        .arg(file_url(page, fragment))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Its own process group, so that a browser past its time goes with all it started.
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| Error::InvalidConfig(format!("could not start the browser {}: {e}; {HOW}", browser.display())))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(20)),
            waited => {
                kill_group(&mut child);
                return Err(Error::InvalidState(match waited {
                    Err(e) => format!("could not wait for the browser {}: {e} (killed)", browser.display()),
                    _ => format!(
                        "the browser {} did not finish drawing the figures within {} s (killed); run again, or set \
                         {ENV}=none for the figures gmprof draws itself (SVG, no PNG)",
                        browser.display(),
                        timeout.as_secs()
                    ),
                }));
            }
        }
    };
    let dom = std::fs::read(&out_path).map_err(|e| Error::io(&out_path, e))?;
    let log = String::from_utf8_lossy(&std::fs::read(&err_path).unwrap_or_default()).into_owned();
    if !status.success() && dom.is_empty() {
        let tail: Vec<&str> = log.lines().rev().take(8).collect();
        return Err(Error::InvalidState(format!(
            "the browser {} failed ({status}) without a page; its last lines:\n{}",
            browser.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )));
    }
    let console = log.lines().filter(|l| l.contains("CONSOLE")).map(str::to_owned).collect();
    Ok(Dump { dom: String::from_utf8_lossy(&dom).into_owned(), console })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_url_escapes_what_is_not_a_plain_path_character() {
        assert_eq!(file_url(Path::new("/tmp/a b/r%.html"), "figures"), "file:///tmp/a%20b/r%25.html#figures");
        assert_eq!(file_url(Path::new("/tmp/é.html"), "x"), "file:///tmp/%C3%A9.html#x");
    }
}
