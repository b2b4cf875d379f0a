//! Self-tests for the harness: real `redis-server` processes and the fault proxy.
//!
//! Talks raw RESP over `TcpStream` so that timeouts and connection state are exactly
//! what the test sees, with no client library reconnecting behind its back.

use std::ffi::OsStr;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal;
use nix::unistd::Pid;
use redlock_tests::{FaultProxy, RedisServer, find_redis_server};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Generous bound for anything that should work.
const OK_WITHIN: Duration = Duration::from_secs(5);

/// A raw RESP connection.
struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = timeout(OK_WITHIN, TcpStream::connect(addr)).await??;
        Ok(Conn {
            stream: BufReader::new(stream),
        })
    }

    /// Sends a command and reads one reply: simple strings, integers and bulk strings
    /// as text, nil as "(nil)", error replies as `Err`.
    async fn cmd(&mut self, args: &[&str]) -> io::Result<String> {
        let mut out = format!("*{}\r\n", args.len());
        for arg in args {
            out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.stream.get_mut().write_all(out.as_bytes()).await?;

        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" | ":" => Ok(rest.to_owned()),
            "-" => Err(io::Error::other(rest.to_owned())),
            "$" if rest == "-1" => Ok("(nil)".to_owned()),
            "$" => {
                let len: usize = rest.parse().map_err(io::Error::other)?;
                let mut body = vec![0; len + 2];
                self.stream.read_exact(&mut body).await?;
                body.truncate(len);
                String::from_utf8(body).map_err(io::Error::other)
            }
            _ => Err(io::Error::other(format!("unsupported reply {line:?}"))),
        }
    }

    async fn ping(&mut self) -> io::Result<()> {
        match self.cmd(&["PING"]).await?.as_str() {
            "PONG" => Ok(()),
            other => Err(io::Error::other(format!("PING answered {other:?}"))),
        }
    }

    /// Reads whatever arrives next: `Ok(0)` is EOF.
    async fn read_some(&mut self) -> io::Result<usize> {
        let mut buf = [0u8; 64];
        self.stream.read(&mut buf).await
    }
}

/// PING on a fresh connection, bounded.
async fn ping(addr: SocketAddr) {
    timeout(OK_WITHIN, async { Conn::open(addr).await?.ping().await })
        .await
        .expect("PING timed out")
        .expect("PING failed");
}

async fn open(addr: SocketAddr) -> Conn {
    Conn::open(addr).await.expect("connect")
}

async fn cmd(conn: &mut Conn, args: &[&str]) -> String {
    timeout(OK_WITHIN, conn.cmd(args))
        .await
        .unwrap_or_else(|_| panic!("{args:?} timed out"))
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Whether a process with this pid exists (a zombie counts).
fn process_exists(pid: u32) -> bool {
    let pid = Pid::from_raw(i32::try_from(pid).expect("pid fits in i32"));
    match signal::kill(pid, None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(e) => panic!("kill(pid {pid}, 0) failed: {e}"),
    }
}

/// Polls `cond` every 10 ms until it holds, or panics after `within`.
async fn eventually(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn start_answers_ping_and_drop_kills_the_process() {
    let a = RedisServer::start().await;
    let b = RedisServer::start().await;
    assert_ne!(a.port(), b.port(), "two servers must get different ports");
    assert_eq!(a.url(), format!("redis://127.0.0.1:{}", a.port()));
    assert_eq!(a.addr().port(), a.port());
    assert!(a.is_running());
    ping(a.addr()).await;
    ping(b.addr()).await;

    // Persistence is off.
    let mut conn = open(a.addr()).await;
    conn.stream
        .get_mut()
        .write_all(b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nsave\r\n")
        .await
        .expect("send CONFIG GET");
    let mut reply = String::new();
    for _ in 0..5 {
        timeout(OK_WITHIN, conn.stream.read_line(&mut reply))
            .await
            .expect("CONFIG GET timed out")
            .expect("CONFIG GET");
    }
    assert_eq!(
        reply, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n",
        "save must be disabled"
    );

    let pid_a = a.pid().expect("a running server has a pid");
    let pid_b = b.pid().expect("a running server has a pid");
    assert!(process_exists(pid_a));
    drop(a);
    assert!(
        !process_exists(pid_a),
        "redis-server {pid_a} must be killed and reaped on drop"
    );
    ping(b.addr()).await;
    drop(b);
    assert!(
        !process_exists(pid_b),
        "redis-server {pid_b} must be killed and reaped on drop"
    );
}

#[tokio::test]
async fn kill_refuses_connections_and_restart_comes_back_empty_on_the_same_port() {
    let mut server = RedisServer::start().await;
    let port = server.port();
    let mut conn = open(server.addr()).await;
    assert_eq!(cmd(&mut conn, &["SET", "k", "v"]).await, "OK");
    // Even data saved to disk must not survive a restart.
    assert_eq!(cmd(&mut conn, &["SAVE"]).await, "OK");
    let old_pid = server.pid().expect("running");

    server.kill().await;
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    assert!(!process_exists(old_pid));
    let err = TcpStream::connect(server.addr())
        .await
        .expect_err("a killed server must refuse connections");
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
    let after_kill = timeout(OK_WITHIN, conn.read_some())
        .await
        .expect("old connection must be closed");
    assert!(
        matches!(after_kill, Ok(0) | Err(_)),
        "old connection got data: {after_kill:?}"
    );
    server.kill().await; // killing twice is fine

    server.restart().await;
    assert_eq!(server.port(), port, "restart keeps the port");
    assert!(server.is_running());
    assert_ne!(server.pid(), Some(old_pid));
    let mut conn = open(server.addr()).await;
    conn.ping().await.expect("PING after restart");
    assert_eq!(
        cmd(&mut conn, &["GET", "k"]).await,
        "(nil)",
        "data must not survive a restart"
    );

    // Restart of a running server kills it first.
    let pid = server.pid().expect("running");
    server.restart().await;
    assert!(!process_exists(pid));
    ping(server.addr()).await;
}

#[tokio::test]
async fn pause_stops_answers_until_resume() {
    let server = RedisServer::start().await;
    let mut conn = open(server.addr()).await;
    conn.ping().await.expect("PING before pause");

    server.pause();
    assert!(server.is_paused());
    assert!(server.is_running(), "a paused server is still running");
    let paused = timeout(Duration::from_millis(300), conn.ping()).await;
    assert!(
        paused.is_err(),
        "a paused server must not answer: {paused:?}"
    );
    // New connections are accepted by the kernel but not answered either.
    let fresh = timeout(Duration::from_millis(300), async {
        Conn::open(server.addr()).await?.ping().await
    })
    .await;
    assert!(fresh.is_err(), "a paused server must not answer: {fresh:?}");

    server.resume();
    assert!(!server.is_paused());
    ping(server.addr()).await;
    // The PING sent while paused is answered now, then the next one.
    assert_eq!(cmd(&mut conn, &["ECHO", "after"]).await, "PONG");
    assert_eq!(cmd(&mut conn, &["ECHO", "after"]).await, "after");

    // Dropping a paused server still kills and reaps it.
    server.pause();
    let pid = server.pid().expect("running");
    drop(server);
    assert!(
        !process_exists(pid),
        "a paused redis-server {pid} must be killed and reaped on drop"
    );
}

#[test]
fn missing_binary_message_says_how_to_install() {
    let message = find_redis_server(Some(OsStr::new("/nonexistent/bogus-redis-server")))
        .expect_err("a bogus override must not be found");
    assert!(
        message.contains("apt-get install redis-server"),
        "{message}"
    );
    assert!(
        message.contains("/nonexistent/bogus-redis-server"),
        "{message}"
    );

    // This machine has redis-server on PATH (the other tests need it anyway).
    let found = find_redis_server(None).expect("redis-server on PATH");
    assert!(found.ends_with("redis-server"), "{}", found.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_forwards_and_adds_latency() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}", proxy.port()));
    assert_eq!(proxy.target(), server.addr());

    let mut conn = open(proxy.addr()).await;
    let start = Instant::now();
    conn.ping().await.expect("PING through the proxy");
    let baseline = start.elapsed();
    eventually(OK_WITHIN, "one proxied connection", || {
        proxy.connections() == 1
    })
    .await;

    proxy.set_latency(Duration::from_millis(200));
    let start = Instant::now();
    timeout(OK_WITHIN, conn.ping())
        .await
        .expect("PING timed out")
        .expect("PING with latency");
    let slow = start.elapsed();
    assert!(
        slow >= Duration::from_millis(200),
        "latency not applied: {slow:?}"
    );
    assert!(
        slow < Duration::from_secs(2),
        "latency far too high: {slow:?}"
    );

    proxy.set_latency(Duration::ZERO);
    let start = Instant::now();
    conn.ping().await.expect("PING without latency");
    let fast = start.elapsed();
    assert!(
        fast < Duration::from_millis(150),
        "latency not removed: {fast:?} (baseline {baseline:?})"
    );
}

#[tokio::test]
async fn proxy_latency_keeps_pipelined_order() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let mut conn = open(proxy.addr()).await;
    proxy.set_latency(Duration::from_millis(20));
    let start = Instant::now();
    for i in 0..10 {
        assert_eq!(
            cmd(&mut conn, &["ECHO", &i.to_string()]).await,
            i.to_string()
        );
    }
    assert!(
        start.elapsed() >= Duration::from_millis(400),
        "each round trip is delayed both ways"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_blackhole_stalls_traffic_until_healed() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let mut conn = open(proxy.addr()).await;
    conn.ping().await.expect("PING before the partition");

    proxy.blackhole(true);
    let lost = timeout(Duration::from_millis(500), conn.ping()).await;
    assert!(
        lost.is_err(),
        "a black-holed PING must get no answer: {lost:?}"
    );
    // New connections are accepted, and black-holed as well.
    let mut during = open(proxy.addr()).await;
    let lost = timeout(Duration::from_millis(300), during.ping()).await;
    assert!(
        lost.is_err(),
        "a black-holed PING must get no answer: {lost:?}"
    );
    assert_eq!(proxy.connections(), 2, "black-holed connections stay open");

    proxy.blackhole(false);
    ping(proxy.addr()).await;
    // Nothing was dropped: the PING held back during the partition is answered on
    // its connection once it heals, as TCP would deliver it.
    let mut line = String::new();
    timeout(OK_WITHIN, during.stream.read_line(&mut line))
        .await
        .expect("the held-back PING is answered after healing")
        .expect("read");
    assert_eq!(line, "+PONG\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_cut_all_and_refuse() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let mut first = open(proxy.addr()).await;
    let mut second = open(proxy.addr()).await;
    first.ping().await.expect("PING before the cut");
    second.ping().await.expect("PING before the cut");

    proxy.cut_all();
    for conn in [&mut first, &mut second] {
        let read = timeout(Duration::from_secs(1), conn.read_some())
            .await
            .expect("a cut connection must be closed within 1 s");
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "a cut connection must see EOF or an error, got {read:?}"
        );
    }
    eventually(OK_WITHIN, "cut connections to be gone", || {
        proxy.connections() == 0
    })
    .await;
    ping(proxy.addr()).await;

    proxy.refuse(true);
    let mut refused = open(proxy.addr()).await;
    let read = timeout(Duration::from_secs(1), refused.read_some())
        .await
        .expect("a refused connection must be closed at once");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "a refused connection must see EOF or an error, got {read:?}"
    );
    proxy.refuse(false);
    ping(proxy.addr()).await;
}

#[tokio::test]
async fn proxy_drop_closes_connections_and_listener() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let addr = proxy.addr();
    let mut conn = open(addr).await;
    conn.ping().await.expect("PING through the proxy");

    drop(proxy);
    let read = timeout(Duration::from_secs(1), conn.read_some())
        .await
        .expect("dropping the proxy must close its connections");
    assert!(matches!(read, Ok(0) | Err(_)), "got {read:?}");
    // The listener is closed once the aborted accept task is dropped.
    let deadline = Instant::now() + OK_WITHIN;
    loop {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
            _ => assert!(
                Instant::now() < deadline,
                "the dropped proxy's port still accepts connections"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_follows_primary() {
    let primary = RedisServer::start().await;
    let primary_port = primary.port().to_string();
    let replica = RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &primary_port]).await;

    let mut conn = open(replica.addr()).await;
    let deadline = Instant::now() + OK_WITHIN;
    loop {
        let info = cmd(&mut conn, &["INFO", "replication"]).await;
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica link not up after {OK_WITHIN:?}:\n{info}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut primary_conn = open(primary.addr()).await;
    assert_eq!(
        cmd(&mut primary_conn, &["SET", "k", "replicated"]).await,
        "OK"
    );
    let deadline = Instant::now() + OK_WITHIN;
    while cmd(&mut conn, &["GET", "k"]).await != "replicated" {
        assert!(Instant::now() < deadline, "write did not reach the replica");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
