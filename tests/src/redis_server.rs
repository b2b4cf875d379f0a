//! [`RedisServer`]: a throwaway `redis-server` child process on a free loopback port.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Server;
use crate::server::{INSTALL_HINT, REDIS_SERVER_ENV};

/// How many fresh ports [`RedisServer::start_with_args`] tries before giving up.
const START_ATTEMPTS: u32 = 5;
/// Hard deadline for one `redis-server` process to answer PING.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Delay between two readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Bound on one readiness probe (connect + PING + INFO).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long [`RedisServer::restart`] keeps retrying when the old port is briefly unavailable.
const RESTART_BIND_WINDOW: Duration = Duration::from_secs(2);
/// Bound on waiting for a SIGKILLed process to be reaped, or a signalled one to change state.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);
/// The log file and the stderr file, inside the server's temporary directory.
const LOG_FILE: &str = "redis.log";
const STDERR_FILE: &str = "stderr.log";
/// Bytes of each log file quoted in panic messages.
const LOG_TAIL_BYTES: usize = 4096;

/// A `redis-server` child process listening on `127.0.0.1` on a free port, with no
/// persistence, its own temporary directory, and its log in that directory.
///
/// The process is SIGKILLed and reaped when the value is dropped, so no server
/// outlives its test (unless the test process itself is killed).
///
/// The server runs with `--save "" --appendonly no` and also
/// `--repl-diskless-sync-delay 0`, so that a replica started with
/// [`RedisServer::start_with_args`] syncs at once instead of after Redis's default
/// 5 s delay. Extra arguments come last and override these.
///
/// Drive it from a Tokio runtime (current-thread or multi-thread), not one with a
/// paused clock: readiness polling uses Tokio timers.
pub struct RedisServer {
    server: Server,
    binary: PathBuf,
    port: u16,
    /// The configuration file passed first on the command line (a sentinel's).
    config_file: Option<PathBuf>,
    extra_args: Vec<OsString>,
    dir: TempDir,
    /// `None` after [`RedisServer::kill`]. Behind a mutex so `&self` methods can
    /// check for (and reap) a process that exited on its own.
    child: Mutex<Option<Child>>,
    paused: AtomicBool,
}

/// Why one `redis-server` process did not become ready.
enum NotReady {
    Exited(ExitStatus),
    TimedOut,
}

impl RedisServer {
    /// Starts a `redis-server` on a free loopback port and waits until it answers PING.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found or executed (the message says how to install
    /// it), or if it does not come up after 5 attempts on fresh ports (the message
    /// quotes its log).
    pub async fn start() -> RedisServer {
        Self::start_with_args(&[]).await
    }

    /// Like [`RedisServer::start`], with `extra` appended to the command line, e.g.
    /// `["--replicaof", "127.0.0.1", "6380"]`. The same arguments are used again by
    /// [`RedisServer::restart`].
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`]; also if the extra arguments make `redis-server` exit
    /// at startup (the log says why).
    pub async fn start_with_args(extra: &[&str]) -> RedisServer {
        Self::start_inner(Server::Redis, None, extra).await
    }

    /// Like [`RedisServer::start_with_args`], for arguments that name a second
    /// port of the server's own (a `--tls-port`): `extra` gets a fresh free
    /// port on each attempt, so a second port taken between probing and
    /// binding is retried like the main one. Returns the server and the
    /// second port it listens on.
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start_with_args`].
    pub async fn start_with_second_port(extra: impl Fn(u16) -> Vec<String>) -> (RedisServer, u16) {
        Self::start_attempts(Server::Redis, None, &|second| {
            extra(second).into_iter().map(OsString::from).collect()
        })
        .await
    }

    /// Like [`RedisServer::start_with_args`], running `server`'s program
    /// (`valkey-server` for [`Server::Valkey`]).
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`]; the message says how to install the
    /// program when it is missing.
    pub async fn start_on(server: Server, extra: &[&str]) -> RedisServer {
        Self::start_inner(server, None, extra).await
    }

    /// Which program this server runs.
    pub fn server(&self) -> Server {
        self.server
    }

    /// Starts a Sentinel: `redis-server <config_file> --sentinel`, with the same
    /// command-line options as [`RedisServer::start`] (port, loopback bind, directory,
    /// log file), and waits until it answers PING.
    ///
    /// `config_file` must be an absolute path to a writable file (Sentinel rewrites it
    /// with what it learns); it holds the `sentinel monitor ..` lines. The port comes
    /// from the command line, not from the file. [`RedisServer::restart`] keeps the file
    /// (it lives outside the server's directory), so a restarted sentinel remembers what
    /// it knew.
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`].
    pub async fn start_sentinel(config_file: &Path) -> RedisServer {
        Self::start_sentinel_on(Server::Redis, config_file).await
    }

    /// Like [`RedisServer::start_sentinel`], running `server`'s program
    /// (`valkey-server <config_file> --sentinel` for [`Server::Valkey`]).
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`].
    pub async fn start_sentinel_on(server: Server, config_file: &Path) -> RedisServer {
        Self::start_inner(server, Some(config_file.to_path_buf()), &["--sentinel"]).await
    }

    async fn start_inner(
        server: Server,
        config_file: Option<PathBuf>,
        extra: &[&str],
    ) -> RedisServer {
        let extra: Vec<OsString> = extra.iter().map(OsString::from).collect();
        Self::start_attempts(server, config_file, &|_| extra.clone())
            .await
            .0
    }

    /// Starts the server, each attempt on fresh ports: its own, and a second
    /// one that `extra` may name in the arguments it returns.
    async fn start_attempts(
        server: Server,
        config_file: Option<PathBuf>,
        extra: &dyn Fn(u16) -> Vec<OsString>,
    ) -> (RedisServer, u16) {
        let binary = server
            .binary()
            .unwrap_or_else(|message| panic!("{message}"));
        let dir = tempfile::Builder::new()
            .prefix("redlock-redis-")
            .tempdir()
            .expect("could not create a temporary directory for redis-server; check that TMPDIR is writable");
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let second = free_port();
            let extra_args = extra(second);
            let mut child = spawn(
                &binary,
                config_file.as_deref(),
                port,
                dir.path(),
                &extra_args,
            );
            match wait_ready(&mut child, loopback(port)).await {
                Ok(()) => {
                    let started = RedisServer {
                        server,
                        binary,
                        port,
                        config_file,
                        extra_args,
                        dir,
                        child: Mutex::new(Some(child)),
                        paused: AtomicBool::new(false),
                    };
                    return (started, second);
                }
                // Most likely a port was taken between probing and binding (another
                // test, or an outgoing connection); try fresh ones.
                Err(NotReady::Exited(status)) => {
                    failures.push(format!("port {port}: exited with {status}"))
                }
                Err(NotReady::TimedOut) => {
                    kill_and_reap_blocking(&mut child);
                    panic!(
                        "redis-server on port {port} did not answer PING within {READY_TIMEOUT:?}.\n{}",
                        log_report(dir.path())
                    );
                }
            }
        }
        panic!(
            "redis-server failed to start after {START_ATTEMPTS} attempts ({}).\n{}",
            failures.join("; "),
            log_report(dir.path())
        );
    }

    /// The port the server listens on (kept across [`RedisServer::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's address, `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        loopback(self.port)
    }

    /// The connection URL, `redis://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id, or `None` when the server is not running (killed, or exited).
    pub fn pid(&self) -> Option<u32> {
        running_pid(&mut self.lock_child()).and_then(|pid| u32::try_from(pid.as_raw()).ok())
    }

    /// Whether the process is alive (a paused server counts as running).
    pub fn is_running(&self) -> bool {
        running_pid(&mut self.lock_child()).is_some()
    }

    /// Whether the server is stopped by [`RedisServer::pause`].
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// The server's log file (inside its temporary directory).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join(LOG_FILE)
    }

    /// The last few KiB of the server's log and stderr, headed by their paths: for
    /// panic messages that should say what the server saw.
    pub fn log_tail(&self) -> String {
        log_report(self.dir.path())
    }

    /// Kills the server with SIGKILL (no shutdown, no save) and waits until the process
    /// is gone. Afterwards connections to [`RedisServer::port`] are refused. Does
    /// nothing if it is not running.
    ///
    /// # Panics
    ///
    /// If the process has not exited 5 s after SIGKILL.
    pub async fn kill(&mut self) {
        let taken = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.paused.store(false, Ordering::SeqCst);
        let Some(mut child) = taken else { return };
        // SIGKILL (std does not signal a child it has already reaped, so a reused pid is
        // never hit). It also ends a SIGSTOPped process. The only error is "already
        // exited", which is what we want anyway.
        let _ = child.kill();
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                Ok(None) => panic!(
                    "redis-server (pid {}) did not exit within {EXIT_TIMEOUT:?} of SIGKILL",
                    child.id()
                ),
                Err(e) => panic!("could not wait for redis-server (pid {}): {e}", child.id()),
            }
        }
    }

    /// Starts the server again on the same port, with the same arguments and empty data,
    /// and waits until it answers PING. Kills it first if it is running (or paused).
    ///
    /// Any RDB/AOF files in the server's directory (written by `SAVE`, or received by a
    /// replica) are deleted first, so the restarted server really starts empty.
    ///
    /// # Panics
    ///
    /// If the port stays unavailable for 2 s, or the server does not answer PING within
    /// 10 s (the message quotes the log).
    pub async fn restart(&mut self) {
        self.kill().await;
        clear_data_files(self.dir.path());
        self.start_again().await;
    }

    /// Kills the server (SIGKILL: no shutdown save) and starts it again on
    /// the same port from the data files in its directory: the RDB snapshot
    /// written by the last `SAVE`/`BGSAVE`, or the AOF of a server started
    /// with `--appendonly yes`. So the data comes back as of that snapshot
    /// (a rollback), or whole (AOF with `--appendfsync always`).
    ///
    /// # Panics
    ///
    /// As [`RedisServer::restart`].
    pub async fn restart_keeping_data(&mut self) {
        self.kill().await;
        self.start_again().await;
    }

    /// Starts the (killed) server again on its port, with its arguments.
    async fn start_again(&mut self) {
        let deadline = Instant::now() + RESTART_BIND_WINDOW;
        loop {
            let mut child = spawn(
                &self.binary,
                self.config_file.as_deref(),
                self.port,
                self.dir.path(),
                &self.extra_args,
            );
            match wait_ready(&mut child, self.addr()).await {
                Ok(()) => {
                    *self.child.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(child);
                    return;
                }
                // The port may still be held briefly; redis sets SO_REUSEADDR, so this is rare.
                Err(NotReady::Exited(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(NotReady::Exited(status)) => panic!(
                    "redis-server could not restart on port {} within {RESTART_BIND_WINDOW:?} (last exit: \
                     {status}); is something else listening on it?\n{}",
                    self.port,
                    log_report(self.dir.path())
                ),
                Err(NotReady::TimedOut) => {
                    kill_and_reap_blocking(&mut child);
                    panic!(
                        "restarted redis-server on port {} did not answer PING within {READY_TIMEOUT:?}.\n{}",
                        self.port,
                        log_report(self.dir.path())
                    );
                }
            }
        }
    }

    /// Freezes the server with SIGSTOP: connections still open (the kernel accepts
    /// them) but nothing is answered, like a hung host. Returns once the process is
    /// stopped. Undo with [`RedisServer::resume`]; dropping a paused server is fine.
    ///
    /// # Panics
    ///
    /// If the server is not running.
    pub fn pause(&self) {
        let mut child = self.lock_child();
        let pid = running_pid(&mut child)
            .expect("RedisServer::pause: the server is not running (killed or exited)");
        signal::kill(pid, Signal::SIGSTOP)
            .expect("RedisServer::pause: could not send SIGSTOP to redis-server");
        self.paused.store(true, Ordering::SeqCst);
        wait_for_stopped_state(pid, true);
    }

    /// Pauses the server for `pause` (SIGSTOP), then resumes it.
    ///
    /// # Panics
    ///
    /// If the server is not running.
    pub async fn pause_for(&self, pause: Duration) {
        self.pause();
        tokio::time::sleep(pause).await;
        self.resume();
    }

    /// Continues a server frozen by [`RedisServer::pause`] (SIGCONT). Does nothing if
    /// the server is not running.
    pub fn resume(&self) {
        let mut child = self.lock_child();
        let Some(pid) = running_pid(&mut child) else {
            return;
        };
        signal::kill(pid, Signal::SIGCONT)
            .expect("RedisServer::resume: could not send SIGCONT to redis-server");
        self.paused.store(false, Ordering::SeqCst);
        wait_for_stopped_state(pid, false);
    }

    fn lock_child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisServer")
            .field("server", &self.server)
            .field("port", &self.port)
            .field("pid", &self.pid())
            .field("paused", &self.is_paused())
            .field("config_file", &self.config_file)
            .field("extra_args", &self.extra_args)
            .field("dir", &self.dir.path())
            .field("binary", &self.binary)
            .finish()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            // SIGKILL also ends a paused (SIGSTOPped) process.
            kill_and_reap_blocking(child);
        }
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A port that was free a moment ago. Someone may take it before redis binds it; the
/// caller retries in that case.
pub(crate) fn free_port() -> u16 {
    StdTcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("could not bind a loopback port to find a free one; is the loopback interface up?")
        .port()
}

/// Where `redis-server`'s stderr goes: a file next to the log, because errors in the
/// command line are reported there (before the log file is opened). Null if the file
/// cannot be opened.
fn stderr_file(dir: &Path) -> Stdio {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(STDERR_FILE))
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

fn spawn(
    binary: &Path,
    config_file: Option<&Path>,
    port: u16,
    dir: &Path,
    extra_args: &[OsString],
) -> Child {
    // A configuration file must be the first argument.
    Command::new(binary)
        .args(config_file)
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1"])
        .arg("--save")
        .arg("")
        .args(["--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join(LOG_FILE))
        .args(["--daemonize", "no"])
        .args(["--repl-diskless-sync-delay", "0"])
        .args(extra_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr_file(dir))
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "could not execute redis-server at `{}`: {e}. Set {REDIS_SERVER_ENV} to a working \
                 redis-server, or install it. {INSTALL_HINT}",
                binary.display()
            )
        })
}

/// Polls until `child` answers PING on `addr` (and is the process answering), exits, or
/// [`READY_TIMEOUT`] passes.
async fn wait_ready(child: &mut Child, addr: SocketAddr) -> Result<(), NotReady> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Err(NotReady::Exited(status)),
            Ok(None) => {}
            Err(e) => panic!("could not check on redis-server (pid {}): {e}", child.id()),
        }
        // The process id check guards against a different server that got the port
        // first: ours then fails to bind and exits, which the next round notices.
        if let Ok(Ok(pid)) = tokio::time::timeout(PROBE_TIMEOUT, probe(addr)).await
            && pid == child.id()
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(NotReady::TimedOut);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Sends PING (expects `+PONG`) and then `INFO server`; returns the `process_id` of
/// whatever answers on `addr`.
async fn probe(addr: SocketAddr) -> io::Result<u32> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
    let mut buf = Vec::new();
    read_until(&mut stream, &mut buf, |b| b.ends_with(b"\r\n")).await?;
    if buf != b"+PONG\r\n" {
        return Err(io::Error::other(format!(
            "unexpected PING reply {:?}",
            String::from_utf8_lossy(&buf)
        )));
    }

    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .await?;
    buf.clear();
    read_until(&mut stream, &mut buf, |b| {
        bulk_len(b).is_some_and(|(head, len)| b.len() >= head + len + 2)
    })
    .await?;
    let (head, len) =
        bulk_len(&buf).ok_or_else(|| io::Error::other("INFO reply is not a bulk string"))?;
    let info = String::from_utf8_lossy(&buf[head..head + len]);
    info.lines()
        .find_map(|line| line.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
        .ok_or_else(|| io::Error::other("INFO server has no process_id"))
}

/// For a buffer starting with a complete `$<len>\r\n` header: (header length, len).
fn bulk_len(buf: &[u8]) -> Option<(usize, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let len = std::str::from_utf8(buf.strip_prefix(b"$")?.get(..end - 1)?)
        .ok()?
        .parse()
        .ok()?;
    Some((end + 2, len))
}

async fn read_until(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    done: impl Fn(&[u8]) -> bool,
) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    while !done(buf) {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}

/// The pid of a child that has not been reaped yet (so the pid is still ours), or `None`.
/// Reaps a child that exited on its own.
fn running_pid(child: &mut Option<Child>) -> Option<Pid> {
    let child = child.as_mut()?;
    match child.try_wait() {
        Ok(None) => i32::try_from(child.id()).ok().map(Pid::from_raw),
        Ok(Some(_)) | Err(_) => None,
    }
}

fn kill_and_reap_blocking(child: &mut Child) {
    // Errors mean "already exited" (kill) or "already reaped" (wait): nothing left to do.
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits (bounded) until the process is, or is no longer, in the stopped state, so that
/// `pause()` and `resume()` have taken effect when they return. Linux only (reads
/// `/proc`); elsewhere it returns at once.
fn wait_for_stopped_state(pid: Pid, stopped: bool) {
    let stat_path = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + EXIT_TIMEOUT;
    while Instant::now() < deadline {
        let Ok(stat) = std::fs::read_to_string(&stat_path) else {
            return;
        };
        // Format: "pid (comm) S ...": the state follows the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        match state {
            Some(s) if (s == 'T') == stopped => return,
            None => return,
            Some(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Deletes persistence files so a restarted server starts empty. The logs are kept.
fn clear_data_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name() == LOG_FILE || entry.file_name() == STDERR_FILE {
            continue;
        }
        let path = entry.path();
        // Best effort: a file we cannot delete will show up as unexpected data in the test.
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// The tails of the server's log and stderr, for panic messages.
fn log_report(dir: &Path) -> String {
    let mut report = String::new();
    for name in [LOG_FILE, STDERR_FILE] {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(log) if log.is_empty() => {}
            Ok(log) => {
                let tail = &log[log.len().saturating_sub(LOG_TAIL_BYTES)..];
                report.push_str(&format!(
                    "--- {} (last {} bytes) ---\n{}\n",
                    path.display(),
                    tail.len(),
                    String::from_utf8_lossy(tail)
                ));
            }
            Err(e) => report.push_str(&format!("(could not read {}: {e})\n", path.display())),
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_header_parsing() {
        assert_eq!(bulk_len(b"$5\r\nhello\r\n"), Some((4, 5)));
        assert_eq!(bulk_len(b"$12"), None);
        assert_eq!(bulk_len(b"+OK\r\n"), None);
    }
}
