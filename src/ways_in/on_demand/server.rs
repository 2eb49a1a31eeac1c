//! Each process's control socket: a Unix stream socket in its run directory that only its
//! owner may use.
//!
//! Layer 3. [`ControlSocket::bind`] creates `<process dir>/gmprof-control/` (mode 0700) and the
//! socket `socket` in it (mode 0600): another user can neither reach nor open it. The server
//! also asks the kernel who connected (`SO_PEERCRED`) and answers anyone but the owner with a
//! refusal that says so ([`check_peer`]), root included. One thread (`gmprof-control`) serves
//! one request per connection ([`super::protocol`]).
//!
//! Socket paths are limited to 107 bytes; run directories are often longer. Both sides then
//! reach the socket through `/proc/self/fd/N/socket`, `N` a descriptor of its directory.
//!
//! For `gmprof capture PID`, each process also links its socket from a per-user directory
//! ([`registry_dirs`]: `/tmp/gmprof-<uid>` and `$XDG_RUNTIME_DIR/gmprof`, mode 0700, owned
//! by the user or not used) under its pid.

use std::io::BufReader;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::ways_in::on_demand::protocol::{self, Request, Response};

/// The directory of the socket, inside the process's directory.
pub const CONTROL_DIR: &str = "gmprof-control";
/// The socket's name in it.
pub const SOCKET_NAME: &str = "socket";
/// The longest path `sun_path` holds.
const SUN_PATH_MAX: usize = 107;
/// How long a connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What serves requests.
pub trait Handler: Send + Sync {
    /// Answers one request.
    fn handle(&self, request: Request) -> Response;
}

impl Handler for crate::ways_in::on_demand::service::Service {
    fn handle(&self, request: Request) -> Response {
        crate::ways_in::on_demand::service::Service::handle(self, request)
    }
}

/// This process's real user id.
pub fn own_uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    unsafe { libc::getuid() }
}

/// Whether a peer of user `peer` may use a socket of user `owner`; the refusal says who is
/// who and what to do.
pub fn check_peer(peer: u32, owner: u32) -> std::result::Result<(), String> {
    if peer == owner {
        return Ok(());
    }
    Err(format!(
        "refused: this process belongs to uid {owner} and you are uid {peer}; only the user who started the run may \
         capture it (run gmprof capture as uid {owner})"
    ))
}

/// The user id of the peer of `stream` (`SO_PEERCRED`).
pub fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    // SAFETY: ucred is plain integers; all zeros is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor, an out-buffer of `len` bytes and its length.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// A path to `dir/name` short enough for a socket address, and the descriptor of `dir` that
/// keeps it valid when it goes through `/proc/self/fd`.
pub fn short_path(dir: &Path, name: &str) -> std::io::Result<(PathBuf, Option<std::fs::File>)> {
    let direct = dir.join(name);
    if direct.as_os_str().len() <= SUN_PATH_MAX {
        return Ok((direct, None));
    }
    let handle = std::fs::File::open(dir)?;
    Ok((PathBuf::from(format!("/proc/self/fd/{}/{name}", handle.as_raw_fd())), Some(handle)))
}

/// Creates `dir` (and its parents) if needed; the last component mode 0700 and owned by us.
fn private_dir(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(dir, e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !meta.is_dir() || meta.uid() != own_uid() {
        return Err(Error::InvalidConfig(format!(
            "{} is not a directory of this user's: gmprof does not put its control socket there",
            dir.display()
        )));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| Error::io(dir, e))
}

/// A bound control socket.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    /// Refusals are checked against this user (the process's own; a test's other one).
    owner: u32,
}

impl ControlSocket {
    /// Binds `process_dir/gmprof-control/socket` (a stale socket there is replaced).
    pub fn bind(process_dir: &Path) -> Result<ControlSocket> {
        std::fs::create_dir_all(process_dir).map_err(|e| Error::io(process_dir, e))?;
        let dir = process_dir.join(CONTROL_DIR);
        private_dir(&dir)?;
        let path = dir.join(SOCKET_NAME);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
        let (address, _dir_handle) = short_path(&dir, SOCKET_NAME).map_err(|e| Error::io(&dir, e))?;
        let listener = UnixListener::bind(&address).map_err(|e| Error::io(&path, e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(|e| Error::io(&path, e))?;
        Ok(ControlSocket { listener, path, owner: own_uid() })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks peers against `uid` instead of this process's user (the tests' other user).
    pub fn with_owner(mut self, uid: u32) -> ControlSocket {
        self.owner = uid;
        self
    }

    /// Serves requests on a `gmprof-control` thread for the rest of the process.
    pub fn serve(self, handler: Arc<dyn Handler>) -> Result<()> {
        std::thread::Builder::new()
            .name("gmprof-control".into())
            .spawn(move || {
                for stream in self.listener.incoming() {
                    match stream {
                        Ok(stream) => serve_one(stream, self.owner, handler.as_ref()),
                        Err(e) => tracing::debug!("gmprof: control socket: {e}"),
                    }
                }
            })
            .map(|_| ())
            .map_err(|e| Error::InvalidState(format!("could not start the control thread: {e}")))
    }
}

/// Sends `line` and a newline with `MSG_NOSIGNAL`: a peer that went away is an error here,
/// never a SIGPIPE (the server runs inside the program, whose SIGPIPE may end it).
fn send_line(stream: &UnixStream, line: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let mut sent = 0;
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        // SAFETY: a valid socket and `rest.len()` readable bytes.
        let n = unsafe { libc::send(stream.as_raw_fd(), rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

/// Answers one connection: the peer check, one request, one response.
fn serve_one(stream: UnixStream, owner: u32, handler: &dyn Handler) {
    let answer = |stream: &UnixStream, response: &Response| {
        let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
        let _ = send_line(stream, &protocol::encode_response(response));
    };
    match peer_uid(&stream).map_err(|e| format!("could not tell who connected: {e}")).and_then(|p| check_peer(p, owner))
    {
        Ok(()) => {}
        Err(refusal) => return answer(&stream, &Response::refused(refusal, None)),
    }
    let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
    if let Some(response) = respond(&mut BufReader::new(&stream), handler) {
        answer(&stream, &response);
    }
}

/// What a connection's owner is answered: its request line read from `reader`
/// ([`protocol::read_line`]), parsed and handed to `handler`, or the refusal of a line that
/// is too long, not UTF-8 or not a request; `None` when the peer sent nothing.
pub fn respond<R: std::io::BufRead>(reader: &mut R, handler: &dyn Handler) -> Option<Response> {
    let line = match protocol::read_line(reader) {
        Ok(Some(line)) => line,
        Ok(None) => return None,
        Err(e) => return Some(Response::refused(format!("could not read the request: {e}"), None)),
    };
    Some(match protocol::parse_request(&line) {
        Ok(request) => handler.handle(request),
        Err(e) => Response::refused(e, None),
    })
}

/// Sends `request` to the socket at `path` and reads the answer. A socket of another user
/// says so.
pub fn ask(path: &Path, request: &Request, timeout: Duration) -> Result<Response> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (address, _dir_handle) = short_path(dir, &name).map_err(|e| connect_error(path, e))?;
    let stream = UnixStream::connect(&address).map_err(|e| connect_error(path, e))?;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    // A server that refuses (another user) answers and closes before it reads: the answer
    // is still there to read when sending failed.
    let sent = send_line(&stream, &protocol::encode_request(request));
    let mut reader = BufReader::new(&stream);
    match (protocol::read_line(&mut reader), sent) {
        (Ok(Some(line)), _) => protocol::parse_response(&line),
        (_, Err(e)) => Err(Error::io(path, e)),
        (Ok(None), Ok(())) => {
            Err(Error::InvalidState(format!("{}: the process closed the connection without an answer", path.display())))
        }
        (Err(e), Ok(())) => Err(Error::io(path, e)),
    }
}

/// What to tell a user who may not reach `path` (another user's socket, its `0700` directory,
/// or a run directory closed to others): the nearest of `path` and its directories that this
/// user can see, whose it is, and what to do.
pub fn permission_denied(path: &Path) -> String {
    let me = own_uid();
    let seen = path.ancestors().find_map(|p| {
        let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
        std::fs::symlink_metadata(p).ok().map(|m| (p, m.uid(), m.mode() & 0o7777))
    });
    match seen {
        Some((p, owner, mode)) if owner != me => format!(
            "permission denied: {} belongs to uid {owner} (mode {mode:04o}) and you are uid {me}; only the user who \
             started the run may capture it (run gmprof capture as uid {owner})",
            p.display()
        ),
        Some((p, _, mode)) => {
            format!("permission denied: {} is yours but closed to you (mode {mode:04o})", p.display())
        }
        None => "permission denied".to_owned(),
    }
}

fn connect_error(path: &Path, e: std::io::Error) -> Error {
    let why = match e.kind() {
        std::io::ErrorKind::PermissionDenied => permission_denied(path),
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound => {
            "nobody listens there: the process has ended".to_owned()
        }
        _ => e.to_string(),
    };
    Error::InvalidState(format!("could not reach {}: {why}", path.display()))
}

/// The per-user directories where processes link their sockets by pid:
/// `$XDG_RUNTIME_DIR/gmprof` when that is set, and `/tmp/gmprof-<uid>` (not `$TMPDIR`, which a
/// batch job often has of its own).
pub fn registry_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(runtime).join("gmprof"));
    }
    dirs.push(PathBuf::from(format!("/tmp/gmprof-{}", own_uid())));
    dirs
}

/// Links `socket` as `<registry>/<pid>` in every registry directory that is this user's (a
/// shell with or without `XDG_RUNTIME_DIR` finds it); the links are removed by [`unregister`].
/// Best effort: with none, `gmprof capture PID` cannot find the process (the run directory
/// still works).
pub fn register(pid: u32, socket: &Path) -> Vec<PathBuf> {
    let mut links = Vec::new();
    for dir in registry_dirs() {
        if private_dir(&dir).is_err() {
            continue;
        }
        let link = dir.join(pid.to_string());
        let _ = std::fs::remove_file(&link);
        if std::os::unix::fs::symlink(socket, &link).is_ok() {
            links.push(link);
        }
    }
    if links.is_empty() {
        tracing::debug!("gmprof: no registry directory for gmprof capture PID");
    }
    links
}

/// Removes the links [`register`] made.
pub fn unregister(links: &[PathBuf]) {
    for link in links {
        let _ = std::fs::remove_file(link);
    }
}

/// The socket a pid registered, if any.
pub fn registered(pid: u32) -> Option<PathBuf> {
    registry_dirs().into_iter().find_map(|dir| std::fs::read_link(dir.join(pid.to_string())).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;
    impl Handler for Echo {
        fn handle(&self, request: Request) -> Response {
            Response::refused(format!("echo {request:?}"), None)
        }
    }

    #[test]
    fn peers_of_another_user_are_refused_and_told_why() {
        assert!(check_peer(1000, 1000).is_ok());
        let e = check_peer(1001, 1000).unwrap_err();
        assert!(e.starts_with("refused: this process belongs to uid 1000 and you are uid 1001"), "{e}");
        assert!(check_peer(0, 1000).is_err(), "root is another user too");
    }

    #[test]
    fn a_connection_is_answered_from_its_first_line() {
        let answer = |bytes: &[u8]| respond(&mut std::io::Cursor::new(bytes.to_vec()), &Echo);
        assert_eq!(answer(b""), None, "a peer that sent nothing gets nothing");
        let echoed = answer(b"{\"gmprof\":1,\"request\":\"cancel\",\"id\":7}\n{\"gmprof\":1}\n").unwrap();
        assert_eq!(echoed.error.as_deref(), Some("echo Cancel { id: 7 }"));
        let e = answer(b"hello\n").unwrap().error.unwrap();
        assert!(e.starts_with("the request is not JSON"), "{e}");
        let e = answer(&[0xff, b'\n']).unwrap().error.unwrap();
        assert_eq!(e, "could not read the request: a line that is not UTF-8");
        let e = answer(&vec![b' '; protocol::MAX_LINE + 1]).unwrap().error.unwrap();
        assert_eq!(e, format!("could not read the request: a line longer than {} bytes", protocol::MAX_LINE));
    }

    #[test]
    fn the_socket_is_private_and_answers_its_owner() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = ControlSocket::bind(tmp.path()).unwrap();
        let path = socket.path().to_owned();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&tmp.path().join(CONTROL_DIR)), 0o700);
        socket.serve(Arc::new(Echo)).unwrap();
        let r = ask(&path, &Request::Cancel { id: 9 }, Duration::from_secs(5)).unwrap();
        assert_eq!(r.error.as_deref(), Some("echo Cancel { id: 9 }"));
        // A line that is not a request gets a message, not a hang.
        let stream = UnixStream::connect(&path).unwrap();
        let mut w = &stream;
        protocol::write_line(&mut w, "hello").unwrap();
        let line = protocol::read_line(&mut BufReader::new(&stream)).unwrap().unwrap();
        assert!(protocol::parse_response(&line).unwrap().error.unwrap().contains("not JSON"));
    }

    #[test]
    fn another_user_gets_a_refusal_from_the_server() {
        let tmp = tempfile::tempdir().unwrap();
        // The server believes it belongs to the next uid: this test's user is "another".
        let socket = ControlSocket::bind(tmp.path()).unwrap().with_owner(own_uid() + 1);
        let path = socket.path().to_owned();
        socket.serve(Arc::new(Echo)).unwrap();
        let r = ask(&path, &Request::Status, Duration::from_secs(5)).unwrap();
        assert!(!r.ok);
        let e = r.error.unwrap();
        assert!(e.contains(&format!("you are uid {}", own_uid())) && e.contains("only the user who started"), "{e}");
    }

    #[test]
    fn long_run_directories_are_reached_through_their_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a-rather-long-directory-name-for-a-training-run".repeat(3)).join("node7-0");
        std::fs::create_dir_all(&deep).unwrap();
        let socket = ControlSocket::bind(&deep).unwrap();
        assert!(socket.path().as_os_str().len() > SUN_PATH_MAX);
        let path = socket.path().to_owned();
        socket.serve(Arc::new(Echo)).unwrap();
        assert!(ask(&path, &Request::Status, Duration::from_secs(5)).unwrap().error.unwrap().starts_with("echo"));
    }

    #[test]
    fn an_ended_process_is_named_as_ended() {
        let tmp = tempfile::tempdir().unwrap();
        let e = ask(&tmp.path().join("socket"), &Request::Status, Duration::from_secs(1)).unwrap_err().to_string();
        assert!(e.contains("the process has ended"), "{e}");
        // A socket file nobody listens on (the process was killed).
        let path = tmp.path().join("dead");
        drop(UnixListener::bind(&path).unwrap());
        let e = ask(&path, &Request::Status, Duration::from_secs(1)).unwrap_err().to_string();
        assert!(e.contains("the process has ended"), "{e}");
    }

    #[test]
    fn pids_are_registered_and_found() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("s");
        // A pid no process of this test uses.
        let pid = u32::MAX - 7;
        let links = register(pid, &socket);
        if links.is_empty() {
            return; // no registry directory of this user's on this machine
        }
        assert_eq!(registered(pid), Some(socket));
        unregister(&links);
        assert_eq!(registered(pid), None);
    }
}
