//! Connection failures are told apart and typed (`ConnectFailure`): a
//! refused connection, a wrong or missing password and a server that does
//! not answer, each at build time (`LockError::Connect`) and on an
//! operation (`LockError::Connection`); the permanent ones (authentication,
//! TLS: see tests/tls.rs) fail at once instead of being retried for the
//! whole connection timeout or wait. Real `redis-server` processes.

use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use redlock_runtime::{ConnectFailure, LockClient, LockError};
use redlock_tests::{RedisServer, require_password};

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free loopback port");
    listener.local_addr().expect("its address").port()
}

fn failure_of(error: &LockError) -> ConnectFailure {
    match error {
        LockError::Connect { failure, .. } | LockError::Connection { failure, .. } => *failure,
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_refused_not_a_timeout() {
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let error = LockClient::builder()
        .url(&url)
        .connection_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect_err("nothing listens there");
    assert_eq!(failure_of(&error), ConnectFailure::Refused, "{error}");
    assert!(error.is_transient(), "Redis may come back: {error}");
    assert!(error.to_string().contains("connection refused"), "{error}");

    // An operation: refused too, within the command timeout, never
    // "did not answer".
    let client = LockClient::builder()
        .url(&url)
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
