//! Connection failures are told apart and typed (`ConnectFailure`) the same
//! way on every topology (one Redis, one with replicas, Redlock, Cluster,
//! Sentinel), each provoked for real: a wrong password, a closed port, a
//! name that does not resolve, a server that never answers, and `rediss://`
//! to a plain-text port. At build time (`LockError::Connect`) and on an
//! operation (`LockError::Connection`), the permanent ones (authentication,
//! TLS) fail at once instead of being retried for the whole connection
//! timeout or wait. Real `redis-server` processes (and Sentinels).

use std::future::Future;
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use redlock_runtime::{ConnectFailure, LockClient, LockClientBuilder, LockError};
use redlock_tests::{LoneSentinel, MASTER_NAME, RedisServer, raw_connection, require_password};
use rstest::rstest;

/// The connection timeout and the wait of the cases whose failure is
/// permanent: a build or an acquire that took anywhere near them retried.
const PATIENT: Duration = Duration::from_secs(20);
/// How soon a permanent failure must be reported (the TLS cases wait for
/// one handshake to time out, 1 s, per node asked in turn), with room for a
/// loaded machine.
const AT_ONCE: Duration = Duration::from_secs(10);
/// The connection timeout of the cases whose failure is transient: a
/// build waits this long before it reports one on one Redis.
const BRIEF: Duration = Duration::from_secs(2);
/// The password the servers want, and the one the URLs give.
const RIGHT: &str = "right-Zq9";
const WRONG: &str = "wrong-Zq9";

/// How the client under test reaches Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topology {
    /// One Redis (`.url(..)`).
    Redis,
    /// One Redis whose writes wait for a replica (`.replicas(1, ..)`).
    Replicas,
    /// Redlock over three nodes.
    Redlock,
    /// Redis Cluster, three nodes listed.
    Cluster,
    /// Three Sentinels.
    Sentinel,
}

impl Topology {
    /// How many servers (or Sentinels) the client is given.
    fn servers(self) -> usize {
        match self {
            Topology::Redis | Topology::Replicas => 1,
            Topology::Redlock | Topology::Cluster | Topology::Sentinel => 3,
        }
    }

    /// A running server of the kind the client is given: a cluster-mode
    /// node, a Sentinel, or a plain Redis. The nodes are not joined into a
    /// cluster, nor does the Sentinel monitor anything: each failure here
    /// comes before the client's first command.
    async fn start_server(self) -> Held {
        match self {
            Topology::Redis | Topology::Replicas | Topology::Redlock => {
                Held::Redis(RedisServer::start().await)
            }
            Topology::Cluster => Held::Redis(
                RedisServer::start_with_args(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
                .await,
            ),
            Topology::Sentinel => Held::Sentinel(LoneSentinel::start().await),
        }
    }

    fn builder(self, urls: Vec<String>) -> LockClientBuilder {
        let builder = LockClient::builder();
        match self {
            Topology::Redis => builder.url(urls[0].clone()),
            Topology::Replicas => builder
                .url(urls[0].clone())
                .replicas(1, Duration::from_millis(500)),
            Topology::Redlock => builder.redlock(urls),
            Topology::Cluster => builder.cluster(urls),
            Topology::Sentinel => builder.sentinel(urls, MASTER_NAME),
        }
    }
}

/// What a case keeps running while its client tries to connect.
#[derive(Debug)]
enum Held {
    Redis(RedisServer),
    Sentinel(LoneSentinel),
    /// A loopback port whose connections are never accepted: the kernel
    /// completes them, and nothing ever answers.
    Silent(TcpListener),
}

impl Held {
    fn port(&self) -> u16 {
        match self {
            Held::Redis(server) => server.port(),
            Held::Sentinel(sentinel) => sentinel.server.port(),
            Held::Silent(listener) => listener.local_addr().expect("its address").port(),
        }
    }

    /// Makes the server want [`RIGHT`] as the default user's password (a
    /// Sentinel has no `CONFIG SET`: `ACL SETUSER` there).
    async fn require_password(&self) {
        match self {
            Held::Redis(server) => require_password(server.url(), RIGHT).await,
            Held::Sentinel(sentinel) => {
                let mut conn = raw_connection(sentinel.server.url()).await;
                let _: () = redis::cmd("ACL")
                    .arg("SETUSER")
                    .arg("default")
                    .arg("resetpass")
                    .arg(format!(">{RIGHT}"))
                    .query_async(&mut conn)
                    .await
                    .expect("ACL SETUSER on the Sentinel");
            }
            Held::Silent(_) => unreachable!("a silent port has no password"),
        }
    }
}

/// A failure provoked for real.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provoked {
    /// The servers want a password; the URLs give another.
    WrongPassword,
    /// Nothing listens on the ports.
    ClosedPort,
    /// The host names do not resolve (`.invalid`, RFC 6761).
    UnresolvableName,
    /// The connections are made, and nothing ever answers.
    SilentServer,
    /// `rediss://` URLs to the servers' plain-text ports.
    TlsToPlainPort,
}

impl Provoked {
    /// How it must be classified.
    fn failure(self) -> ConnectFailure {
        match self {
            Provoked::WrongPassword => ConnectFailure::Auth,
            Provoked::ClosedPort => ConnectFailure::Refused,
            Provoked::UnresolvableName => ConnectFailure::Unreachable,
            Provoked::SilentServer => ConnectFailure::Timeout,
            Provoked::TlsToPlainPort => ConnectFailure::Tls,
        }
    }

    /// The URLs of `topology`'s servers, failing this way, and what must
    /// keep running meanwhile.
    async fn provoke(self, topology: Topology) -> (Vec<String>, Vec<Held>) {
        let n = topology.servers();
        let mut held = Vec::with_capacity(n);
        let urls = match self {
            Provoked::WrongPassword | Provoked::TlsToPlainPort => {
                for _ in 0..n {
                    let server = topology.start_server().await;
                    if self == Provoked::WrongPassword {
                        server.require_password().await;
                    }
                    held.push(server);
                }
                held.iter()
                    .map(|server| match self {
                        Provoked::WrongPassword => {
                            format!("redis://:{WRONG}@127.0.0.1:{}", server.port())
                        }
                        _ => format!("rediss://127.0.0.1:{}", server.port()),
                    })
                    .collect()
            }
            Provoked::ClosedPort => {
                // All bound at once, so that no two are the same port.
                let listeners: Vec<TcpListener> = (0..n).map(|_| loopback_listener()).collect();
                let ports: Vec<u16> = listeners
                    .iter()
                    .map(|l| l.local_addr().expect("its address").port())
                    .collect();
                drop(listeners);
                ports
                    .into_iter()
                    .map(|port| format!("redis://127.0.0.1:{port}"))
                    .collect()
            }
            Provoked::UnresolvableName => (0..n)
                .map(|i| format!("redis://node-{i}.nonexistent.invalid:6379"))
                .collect(),
            Provoked::SilentServer => {
                held.extend((0..n).map(|_| Held::Silent(loopback_listener())));
                held.iter()
                    .map(|silent| format!("redis://127.0.0.1:{}", silent.port()))
                    .collect()
            }
        };
        (urls, held)
    }

    /// Checks that `error`'s message says what to do about this failure
    /// (a TLS one must point at TLS), and shows no password.
    fn assert_told(self, case: &str, error: &LockError) {
        let message = error.to_string();
        let words: &[&str] = match self {
            Provoked::WrongPassword => &["authentication failed", "password"],
            Provoked::ClosedPort => &["connection refused", "listens"],
            Provoked::UnresolvableName => &["host unreachable", "host name"],
            Provoked::SilentServer => &["connect timed out", "connection_timeout"],
            Provoked::TlsToPlainPort => &["TLS handshake failed", "rediss://", "plain-text"],
        };
        for word in words {
            assert!(message.contains(word), "{case}: no {word:?} in: {message}");
        }
        let shown = format!("{error} {error:?}");
        assert!(
            !shown.contains(WRONG),
            "{case}: the password leaked: {shown}"
        );
    }
}

/// A loopback port, bound.
fn loopback_listener() -> TcpListener {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free loopback port")
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    loopback_listener()
        .local_addr()
        .expect("its address")
        .port()
}

fn failure_of(error: &LockError) -> ConnectFailure {
    match error {
        LockError::Connect { failure, .. } | LockError::Connection { failure, .. } => *failure,
        other => panic!("expected a connection error, got {other:?}"),
    }
}

/// Runs `test` on a runtime of its own: two worker threads, the real clock.
fn run(test: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(test);
}

/// Issue 32: every topology classifies each failure alike. A checked
/// build fails with `LockError::Connect` of its kind (at once when it is
/// permanent); on a client built unchecked, an acquire that may wait 20 s
/// fails at once with `LockError::Connection` of that kind when it is
/// permanent, and with an error a retry may pass when it is not.
#[rstest]
fn issue_32_each_connect_failure_is_classified_alike_on_every_topology(
    #[values(
        Topology::Redis,
        Topology::Replicas,
        Topology::Redlock,
        Topology::Cluster,
        Topology::Sentinel
    )]
    topology: Topology,
    #[values(
        Provoked::WrongPassword,
        Provoked::ClosedPort,
        Provoked::UnresolvableName,
        Provoked::SilentServer,
        Provoked::TlsToPlainPort
    )]
    provoked: Provoked,
) {
    run(async move {
        let case = format!("{topology:?}, {provoked:?}");
        let (urls, _held) = provoked.provoke(topology).await;
        let want = provoked.failure();
        let permanent = want.is_permanent();
        let connection_timeout = if permanent { PATIENT } else { BRIEF };

        let started = Instant::now();
        let error = topology
            .builder(urls.clone())
            .connection_timeout(connection_timeout)
            .build()
            .await
            .expect_err(&case);
        let took = started.elapsed();
        assert!(
            matches!(error, LockError::Connect { failure, .. } if failure == want),
            "{case}: {error:?}"
        );
        assert_eq!(error.is_transient(), !permanent, "{case}: {error}");
        provoked.assert_told(&case, &error);
        if permanent {
            assert!(took < AT_ONCE, "{case}: retried for {took:?}: {error}");
        }

        let client = topology
            .builder(urls)
            .connection_timeout(connection_timeout)
            .build_unchecked()
            .expect("valid settings");
        let mut request = client.lock("connect-errors");
        if permanent {
            request = request.wait(PATIENT);
        }
        let started = Instant::now();
        let error = request.acquire().await.expect_err(&case);
        let took = started.elapsed();
        if permanent {
            assert!(
                matches!(error, LockError::Connection { failure, .. } if failure == want),
                "{case}: {error:?}"
            );
            assert!(!error.is_transient(), "{case}: {error}");
            assert!(took < AT_ONCE, "{case}: waited {took:?}: {error}");
            provoked.assert_told(&case, &error);
        } else {
            assert!(error.is_transient(), "{case}: {error:?}");
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_operation_is_refused_not_a_timeout() {
    // An operation on one Redis: refused, within the command timeout,
    // never "did not answer".
    let client = LockClient::builder()
        .url(format!("redis://127.0.0.1:{}", closed_port()))
        .build_unchecked()
        .expect("valid settings");
    let error = client
        .lock("refused")
        .acquire()
        .await
        .expect_err("nothing listens there");
    assert!(
        matches!(
            error,
            LockError::Connection {
                failure: ConnectFailure::Refused,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(!error.to_string().contains("did not answer"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_fails_at_once() {
    let redis = RedisServer::start().await;
    require_password(redis.url(), "right-secret").await;
    let port = redis.port();
    for (url, what) in [
        (
            format!("redis://:wrong-Zq9@127.0.0.1:{port}"),
            "a wrong password",
        ),
        (format!("redis://127.0.0.1:{port}"), "no password"),
    ] {
        let started = Instant::now();
        let error = LockClient::builder()
            .url(&url)
            .connection_timeout(Duration::from_secs(20))
            .build()
            .await
            .expect_err(what);
        assert_eq!(failure_of(&error), ConnectFailure::Auth, "{what}: {error}");
        assert!(!error.is_transient(), "{what}: {error}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: retried for {:?}: {error}",
            started.elapsed()
        );
        let message = error.to_string();
        assert!(
            !message.contains("wrong-Zq9"),
            "the password leaked: {message}"
        );
        assert!(message.contains("password"), "{message}");

        // An acquire that may wait 20 s does not wait for a password.
        let client = LockClient::builder()
            .url(&url)
            .connection_timeout(Duration::from_secs(20))
            .build_unchecked()
            .expect("valid settings");
        let started = Instant::now();
        let error = client
            .lock("auth")
            .wait(Duration::from_secs(20))
            .acquire()
            .await
            .expect_err(what);
        assert_eq!(failure_of(&error), ConnectFailure::Auth, "{what}: {error}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: waited {:?}: {error}",
            started.elapsed()
        );
        assert!(!format!("{error:?}").contains("wrong-Zq9"), "{error:?}");
    }
    // The right password works.
    let client = LockClient::connect(format!("redis://:right-secret@127.0.0.1:{port}"))
        .await
        .expect("the right password");
    client
        .lock("auth")
        .acquire()
        .await
        .expect("a lock")
        .release()
        .await
        .expect("released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_answer_is_a_connect_timeout() {
    let redis = RedisServer::start().await;
    redis.pause();
    let error = LockClient::builder()
        .url(redis.url())
        .connection_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect_err("a paused server answers nothing");
    redis.resume();
    assert_eq!(failure_of(&error), ConnectFailure::Timeout, "{error}");
    assert!(error.is_transient(), "{error}");
}

#[test]
fn every_failure_says_what_to_do() {
    for (failure, words) in [
        (ConnectFailure::Refused, "listens"),
        (ConnectFailure::Unreachable, "host name"),
        (ConnectFailure::Auth, "password"),
        (ConnectFailure::Tls, "rediss://"),
        (ConnectFailure::Timeout, "connection_timeout"),
    ] {
        let error = LockError::Connection {
            key: "k".to_owned(),
            op: redlock_runtime::Operation::Acquire,
            failure,
            detail: "detail".to_owned(),
        };
        assert!(error.to_string().contains(words), "{failure:?}: {error}");
        assert_eq!(error.is_transient(), !failure.is_permanent());
    }
}
