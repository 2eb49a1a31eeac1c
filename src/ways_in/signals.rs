//! Signals that end a run: the outputs are written before the signal takes effect.
//!
//! [`install`] puts a handler on the terminating signals ([`HANDLED`]). The handler itself
//! does only what a signal handler may: it writes the signal's number to a pipe, which wakes
//! the `gmprof-signal` thread, where the real work runs (finishing the profiler and writing
//! files is far from async-signal-safe). What happens next depends on what the program had
//! for that signal before gmprof came:
//!
//! - **The default action, polite signals** (SIGTERM from `timeout`, a scheduler or a
//!   container stop; SIGINT; SIGHUP; SIGQUIT): the thread is asked for a [`Request::Final`]
//!   (finish and write) and the handler returns at once. The program runs on for the moment
//!   that takes: the signalled thread may be inside a CUDA call, holding the driver's locks
//!   and gmprof's launch gate, so blocking it there would deadlock the finish (seen on an H200
//!   in the counter modes). Then the thread puts the default action back and sends the signal
//!   again, so the process ends exactly as it would have (status "killed by SIGTERM"). After
//!   `timeout` it does that even if the outputs are not written.
//! - **The default action, `abort()` and crashes** (SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL):
//!   the handler cannot return into the fault (or abort goes on), so the signalled thread
//!   waits for the [`Request::Final`], at most `timeout`, then restores the default action and
//!   raises the signal again (a core for SIGSEGV). Best effort: a crash inside a locked
//!   section of gmprof or the driver can still stop the writer, which the timeout bounds.
//! - **A handler of the program's** (Python's SIGINT, a framework's SIGTERM): that handler
//!   runs at once, as if gmprof were not there, and the thread writes a
//!   [`Request::Checkpoint`] beside it. The program decides whether to end; if it exits, the
//!   exit path writes the final outputs.
//! - **Ignored** (`nohup`'s SIGHUP): gmprof installs nothing.
//!
//! If the program installs its own handler after gmprof, it replaces gmprof's: its choice.
//! A crash inside the writing thread itself does not wait for itself.

use std::ffi::c_int;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::error::{Error, Result};

/// The signals gmprof handles: the polite ends (TERM, INT, HUP, QUIT), `abort()`, and crashes.
pub const HANDLED: [c_int; 9] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
];

/// What the signal thread is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// The process is about to die of this signal: finish and write everything.
    Final(c_int),
    /// The program handles this signal itself and may go on: write what is complete.
    Checkpoint(c_int),
}

/// The signal's conventional name (`SIGTERM`), or `signal N`.
pub fn name(signal: c_int) -> String {
    match signal {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGFPE => "SIGFPE".into(),
        libc::SIGILL => "SIGILL".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGUSR1 => "SIGUSR1".into(),
        libc::SIGUSR2 => "SIGUSR2".into(),
        libc::SIGPIPE => "SIGPIPE".into(),
        libc::SIGALRM => "SIGALRM".into(),
        other => format!("signal {other}"),
    }
}

/// What a signal's earlier disposition means for gmprof (the decision [`install`] and the
/// handler make; a function so that it is tested).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// The default action ends the process: write, then let it.
    Default,
    /// The program's own handler: call it, and checkpoint beside it.
    Program,
    /// Ignored: leave it alone.
    Ignored,
}

/// Classifies a `sa_sigaction` value.
pub fn classify(handler: libc::sighandler_t) -> Disposition {
    if handler == libc::SIG_DFL {
        Disposition::Default
    } else if handler == libc::SIG_IGN {
        Disposition::Ignored
    } else {
        Disposition::Program
    }
}

/// The installed state the handler reads; set once, before any handler is installed.
struct Installed {
    previous: Vec<(c_int, libc::sigaction)>,
    request_write: c_int,
    done_read: c_int,
    timeout_ms: c_int,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();
/// The OS thread id of the `gmprof-signal` thread.
static WORKER_TID: AtomicI32 = AtomicI32::new(0);

/// Installs the handlers; `on_request` runs on the `gmprof-signal` thread. Once per process:
/// a second call is an error.
pub fn install(timeout: Duration, on_request: impl Fn(Request) + Send + 'static) -> Result<()> {
    let (request_read, request_write) = pipe()?;
    // The handler must never block on a full pipe (a storm of signals): its end is
    // non-blocking, and a request that does not fit is dropped (one is already queued).
    // SAFETY: fcntl on a descriptor this function just created.
    unsafe {
        let flags = libc::fcntl(request_write, libc::F_GETFL);
        libc::fcntl(request_write, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let (done_read, done_write) = pipe()?;
    let mut previous = Vec::new();
    for &signal in &HANDLED {
        // SAFETY: a zeroed sigaction is a valid out-value; a null new action only reads.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `old` is a valid out-pointer.
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } == 0 {
            previous.push((signal, old));
        }
    }
    let installed = Installed {
        previous,
        request_write,
        done_read,
        timeout_ms: timeout.as_millis().min(i32::MAX as u128) as c_int,
    };
    if INSTALLED.set(installed).is_err() {
        return Err(Error::InvalidState("gmprof's signal handlers are already installed".into()));
    }
    std::thread::Builder::new()
        .name("gmprof-signal".into())
        .spawn(move || worker(request_read, done_write, on_request))
        .map_err(|e| Error::InvalidState(format!("could not start gmprof's signal thread: {e}")))?;
    let Some(installed) = INSTALLED.get() else { return Ok(()) };
    for (signal, old) in &installed.previous {
        if classify(old.sa_sigaction) == Disposition::Ignored {
            continue;
        }
        // SAFETY: a zeroed sigaction with the fields set below is valid; `on_signal` has the
        // SA_SIGINFO signature and never unwinds.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // SA_ONSTACK: a stack overflow's SIGSEGV runs on the alternate stack when one exists.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | (old.sa_flags & libc::SA_RESTART);
        // SAFETY: `action.sa_mask` is a valid sigset.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialized; the old action was saved above.
        unsafe { libc::sigaction(*signal, &action, std::ptr::null_mut()) };
    }
    Ok(())
}

fn pipe() -> Result<(c_int, c_int)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::InvalidState(format!("pipe2 failed: {}", std::io::Error::last_os_error())));
    }
    Ok((fds[0], fds[1]))
}

fn worker(request_read: c_int, done_write: c_int, on_request: impl Fn(Request)) {
    // SAFETY: gettid takes no arguments and cannot fail.
    WORKER_TID.store(unsafe { libc::gettid() }, Ordering::Release);
    loop {
        let mut message = [0u8; 2];
        // SAFETY: `message` is a valid buffer of 2 bytes.
        let n = unsafe { libc::read(request_read, message.as_mut_ptr().cast(), 2) };
        if n != 2 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let signal = c_int::from(message[0]);
        let request = if message[1] == 1 { Request::Checkpoint(signal) } else { Request::Final(signal) };
        let deferred = request == Request::Final(signal) && is_polite(signal);
        if deferred {
            // Nobody waits in the handler: bound the finish here, then end the process.
            let timeout = INSTALLED.get().map_or(120_000, |i| i.timeout_ms);
            let watchdog = std::thread::Builder::new().name("gmprof-signal-timeout".into()).spawn(move || {
                std::thread::sleep(Duration::from_millis(timeout as u64));
                eprintln!("gmprof: writing the outputs took longer than {timeout} ms; ending the process");
                end_by(signal);
            });
            if watchdog.is_err() {
                eprintln!("gmprof: no timeout for the outputs: could not start a thread");
            }
        }
        if catch_unwind(AssertUnwindSafe(|| on_request(request))).is_err() {
            eprintln!("gmprof: internal error while handling {}", name(signal));
        }
        if deferred {
            end_by(signal);
        } else if let Request::Final(_) = request {
            // SAFETY: one byte from a valid buffer.
            unsafe { libc::write(done_write, [1u8].as_ptr().cast(), 1) };
        }
    }
}

/// Signals whose handler may return into the program (no fault, no abort in progress).
fn is_polite(signal: c_int) -> bool {
    matches!(signal, libc::SIGTERM | libc::SIGINT | libc::SIGHUP | libc::SIGQUIT)
}

/// Puts back the disposition gmprof found for `signal` and sends it to the process again.
fn end_by(signal: c_int) {
    if let Some((_, previous)) = INSTALLED.get().and_then(|i| i.previous.iter().find(|(s, _)| *s == signal)) {
        // SAFETY: restores the saved disposition (the default action), then signals this
        // process: it ends as the signal's default action ends it.
        unsafe {
            libc::sigaction(signal, previous, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
        }
    }
}

/// The handler. Async-signal-safe: pipe writes, poll, sigaction, raise, and the program's
/// own handler.
extern "C" fn on_signal(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let Some(installed) = INSTALLED.get() else { return };
    let Some((_, previous)) = installed.previous.iter().find(|(s, _)| *s == signal) else { return };
    let disposition = classify(previous.sa_sigaction);
    let message = [signal as u8, u8::from(disposition == Disposition::Program)];
    // SAFETY: write(2) on our pipe is async-signal-safe; a full pipe just drops the request.
    unsafe { libc::write(installed.request_write, message.as_ptr().cast(), 2) };
    if disposition == Disposition::Program {
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the program installed this handler with SA_SIGINFO: it has this type.
            let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                unsafe { std::mem::transmute(previous.sa_sigaction) };
            handler(signal, info, context);
        } else {
            // SAFETY: the program installed this handler without SA_SIGINFO: it has this type.
            let handler: extern "C" fn(c_int) = unsafe { std::mem::transmute(previous.sa_sigaction) };
            handler(signal);
        }
        return;
    }
    if is_polite(signal) {
        // The signal thread finishes, writes and sends the signal again (see the module docs).
        return;
    }
    // SAFETY: gettid is async-signal-safe.
    let on_worker = unsafe { libc::gettid() } == WORKER_TID.load(Ordering::Acquire);
    if !on_worker {
        let mut poll = libc::pollfd { fd: installed.done_read, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; poll and read are async-signal-safe.
        if unsafe { libc::poll(&mut poll, 1, installed.timeout_ms) } > 0 {
            let mut byte = 0u8;
            // SAFETY: one byte into a valid buffer.
            unsafe { libc::read(installed.done_read, (&mut byte as *mut u8).cast(), 1) };
        }
    }
    // SAFETY: restores the disposition saved at install (the default action); the signal is
    // blocked while this handler runs, so the raised one is delivered when it returns, and
    // the process ends as it would have without gmprof.
    unsafe {
        libc::sigaction(signal, previous, std::ptr::null_mut());
        libc::raise(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispositions_are_classified() {
        assert_eq!(classify(libc::SIG_DFL), Disposition::Default);
        assert_eq!(classify(libc::SIG_IGN), Disposition::Ignored);
        extern "C" fn handler(_: c_int) {}
        assert_eq!(classify(handler as *const () as libc::sighandler_t), Disposition::Program);
    }

    #[test]
    fn names() {
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
        assert_eq!(name(libc::SIGKILL), "SIGKILL");
        assert_eq!(name(64), "signal 64");
    }
}
