//! The capture signal (SIGUSR2 by default): a capture where no shell reaches the run
//! directory (`scancel --signal=USR2`, `kill -USR2`, a scheduler's hook).
//!
//! Layer 3. The handler only writes a byte to a pipe, which wakes the `gmprof-capture-signal`
//! thread where the capture is asked for ([`super::service::Service::on_signal`]). Installed
//! only over the default action: a program that handles the signal itself keeps it, and
//! gmprof says to choose another (`--capture-signal`). A forked child inherits the handler but
//! not the thread: the signal is then ignored there (its default action would have killed the
//! child), never handed to the parent.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use crate::error::{Error, Result};

/// The pipe's write end (-1: not installed).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the handler.
static OWNER: AtomicU32 = AtomicU32::new(0);

/// Installs the handler for `signal`; `on_signal` runs on the `gmprof-capture-signal` thread.
/// Once per process. `option` is the setting that chose the signal (`--capture-signal`,
/// `GMPROF_FLIGHT_SIGNAL`), for the errors.
pub fn install(signal: c_int, option: &str, on_signal: impl Fn() + Send + 'static) -> Result<()> {
    // SAFETY: a zeroed sigaction is a valid out-value; a null new action only reads.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a valid out-pointer.
    if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0 {
        return Err(Error::InvalidConfig(format!(
            "{option} {}: {}",
            crate::ways_in::signals::name(signal),
            std::io::Error::last_os_error()
        )));
    }
    if old.sa_sigaction != libc::SIG_DFL {
        return Err(Error::InvalidConfig(format!(
            "the program handles or ignores {} itself, so gmprof leaves it alone: choose another signal \
             ({option} SIGUSR1)",
            crate::ways_in::signals::name(signal)
        )));
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(Error::InvalidState(format!("pipe2 failed: {}", std::io::Error::last_os_error())));
    }
    let [read_end, write_end] = fds;
    // The reading end blocks: the thread sleeps in read(2).
    // SAFETY: fcntl on a descriptor created above.
    unsafe {
        let flags = libc::fcntl(read_end, libc::F_GETFL);
        libc::fcntl(read_end, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    if PIPE.compare_exchange(-1, write_end, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // SAFETY: closing the descriptors this call created and nobody else has.
        unsafe {
            libc::close(read_end);
            libc::close(write_end);
        }
        return Err(Error::InvalidState(format!(
            "{option}: gmprof's handler of a signal is already installed (the on-demand capture signal and the \
             flight recorder's share one)"
        )));
    }
    OWNER.store(std::process::id(), Ordering::Release);
    std::thread::Builder::new()
        .name("gmprof-capture-signal".into())
        .spawn(move || loop {
            let mut byte = 0u8;
            // SAFETY: one byte into a valid buffer.
            let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(&on_signal)).is_err() {
                    eprintln!("gmprof: internal error while handling the capture signal");
                }
            } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            } else {
                return;
            }
        })
        .map_err(|e| Error::InvalidState(format!("could not start the capture signal's thread: {e}")))?;
    // SAFETY: a zeroed sigaction with the fields set below is valid; `on_capture_signal` has the
    // plain handler signature and never unwinds.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_capture_signal as *const () as libc::sighandler_t;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: `action.sa_mask` is a valid sigset.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `action` is fully initialized.
    if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
        return Err(Error::InvalidState(format!(
            "could not install the capture signal's handler: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// The handler: async-signal-safe (getpid, write; nothing in it allocates or can panic, and
/// the unwind guard costs nothing unless one did).
extern "C" fn on_capture_signal(_signal: c_int) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: getpid is async-signal-safe.
        if unsafe { libc::getpid() } as u32 != OWNER.load(Ordering::Acquire) {
            return;
        }
        let fd = PIPE.load(Ordering::Acquire);
        if fd >= 0 {
            // SAFETY: write(2) of one byte on our pipe; a full pipe drops it (a capture is asked already).
            unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// One test installs the handler (once per process): a real-time signal nothing else here uses.
    #[test]
    fn the_signal_reaches_the_thread_and_a_second_install_is_refused() {
        let signal = libc::SIGRTMIN() + 3;
        let (tx, rx) = mpsc::channel();
        install(signal, "--capture-signal", move || {
            let _ = tx.send(());
        })
        .unwrap();
        // SAFETY: raise sends the signal to this thread; the handler above is installed.
        unsafe { libc::raise(signal) };
        rx.recv_timeout(Duration::from_secs(5)).expect("the capture thread heard the signal");
        let e = install(signal + 1, "--capture-signal", || {}).unwrap_err().to_string();
        assert!(e.contains("already installed"), "{e}");
    }

    #[test]
    fn a_signal_the_program_handles_is_left_alone() {
        let signal = libc::SIGRTMIN() + 5;
        extern "C" fn programs_own(_: c_int) {}
        // SAFETY: installing a plain handler for a real-time signal of this test only.
        unsafe { libc::signal(signal, programs_own as *const () as libc::sighandler_t) };
        let e = install(signal, "--capture-signal", || {}).unwrap_err().to_string();
        assert!(e.contains("handles or ignores") && e.contains("--capture-signal"), "{e}");
    }
}
