//! The command's standard output, closed quietly.
//!
//! `println!` panics when standard output is gone (`gmprof report OUT | head -1`: "failed
//! printing to stdout: Broken pipe"). Every line the command prints goes through [`outln!`]
//! instead, and tables go through [`Quiet`]: a write that fails because the reader left (`BrokenPipe`) marks standard output
//! closed, and the lines after it are dropped without a word. The command goes on with its
//! work (`gmprof merge` still writes its files, `gmprof run` still waits for its program)
//! and exits with the status it would have had, as ripgrep does. Any other write error is
//! said once on standard error. The command's panic hook lives here too
//! ([`quiet_caught_decoder_panics`]): a corrupt Parquet file reads as one error line.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);
static SAID: AtomicBool = AtomicBool::new(false);

/// Writes one line to standard output through [`Quiet`].
pub fn line(args: fmt::Arguments<'_>) {
    let mut out = Quiet;
    if let Err(e) = out.write_fmt(format_args!("{args}\n")).and_then(|()| out.flush()) {
        if !SAID.swap(true, Ordering::Relaxed) {
            eprintln!("gmprof: could not write to standard output: {e}");
        }
    }
}

/// Standard output as a writer for the library's table writers (`gmprof report --csv`): once
/// the reader has left, writes succeed and go nowhere, as [`line`]'s do.
pub struct Quiet;

impl Write for Quiet {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if CLOSED.load(Ordering::Relaxed) {
            return Ok(buf.len());
        }
        gone_is_fine(std::io::stdout().lock().write(buf), buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if CLOSED.load(Ordering::Relaxed) {
            return Ok(());
        }
        gone_is_fine(std::io::stdout().lock().flush(), ())
    }
}

/// A write that failed because the reader left marks standard output closed and counts as
/// done (`done`); any other result is passed on.
fn gone_is_fine<T>(result: std::io::Result<T>, done: T) -> std::io::Result<T> {
    match result {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(done)
        }
        other => other,
    }
}

/// `println!` for the command: a closed standard output ends the printing, not the command.
macro_rules! outln {
    () => {
        $crate::stdout::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdout::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// The command's panic hook, installed once at the start of `main`: a panic that gmprof's
/// Parquet reader catches and turns into the file's error (the `parquet` crate asserts on some
/// malformed data; see `gmprof::report::parquet::read`) prints nothing of its own, so a
/// corrupt file reads as one error line on stderr. Every other panic prints as before, and
/// `main` reports it as a bug.
pub fn quiet_caught_decoder_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !gmprof::report::parquet::read::in_guarded_decode() {
            default(info);
        }
    }));
}
