//! TLS (`rediss://`, the `tls` feature) against real `redis-server`s with a
//! TLS port and certificates made for the run: one server, a primary with a
//! replica (`.replicas(..)`), Redlock over three TLS servers, mutual TLS,
//! and a wrong CA, which fails at once with a typed error that carries no
//! certificate.

use std::time::{Duration, Instant};

use redlock_runtime::{ConnectFailure, LockClient, LockError, TlsCertificates};
use redlock_tests::{ClientAuth, TestCa, TlsRedis, start_replica};

fn trusting(ca_pem: &str) -> TlsCertificates {
    TlsCertificates::new().root_ca_pem(ca_pem)
}

/// A lock taken and released over TLS, with a waiter woken by the release
/// (the wake-up subscriber also speaks TLS).
async fn lock_round_trip(client: &LockClient, key: &str) {
    let guard = client
        .lock(key)
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .expect("a lock over TLS");
    assert!(guard.fencing_token().await.expect("fencing token") > 0);
    let waiter = {
        let client = client.clone();
        let key = key.to_owned();
        tokio::spawn(async move {
            client
                .lock(&key)
                .wait(Duration::from_secs(20))
                .acquire()
                .await
        })
    };
    guard.release().await.expect("released over TLS");
    let second = waiter
        .await
        .expect("the waiter task ran")
        .expect("the waiter takes the lock once it is released");
    second.release().await.expect("released over TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_the_servers_ca_locks() {
    let tls = TlsRedis::start(ClientAuth::Off).await;
    let client = LockClient::builder()
        .url(tls.url())
        .tls_certificates(trusting(&tls.ca_pem))
        .build()
        .await
        .expect("a client over TLS");
    assert!(
        client.target().starts_with("rediss://"),
        "{}",
        client.target()
    );
    lock_round_trip(&client, "tls:single").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_fails_at_once_with_a_typed_error() {
    let tls = TlsRedis::start(ClientAuth::Off).await;
    let stranger = TestCa::new("some other CA");
    let started = Instant::now();
    let error = LockClient::builder()
        .url(tls.url())
        .tls_certificates(trusting(&stranger.cert_pem))
        .connection_timeout(Duration::from_secs(20))
        .build()
        .await
        .expect_err("a server certificate of another CA is not trusted");
    let took = started.elapsed();
    match &error {
        LockError::Connect { failure, .. } => assert_eq!(*failure, ConnectFailure::Tls, "{error}"),
        other => panic!("expected LockError::Connect, got {other:?}"),
    }
    assert!(!error.is_transient(), "a TLS failure is permanent: {error}");
    // Permanent: not retried for the 20 s connection timeout.
    assert!(took < Duration::from_secs(10), "took {took:?}: {error}");
    let message = error.to_string();
    assert!(message.contains("TLS"), "{message}");
    assert!(
        !message.contains("BEGIN"),
        "a certificate leaked: {message}"
    );
    assert!(!message.contains(&stranger.cert_pem[30..60]), "{message}");

    // The same on an operation of a client built without the check.
    let client = LockClient::builder()
        .url(tls.url())
        .tls_certificates(trusting(&stranger.cert_pem))
        .connection_timeout(Duration::from_secs(20))
        .build_unchecked()
        .expect("the settings are valid");
    let started = Instant::now();
    let error = client
        .lock("tls:wrong-ca")
        .wait(Duration::from_secs(20))
        .acquire()
        .await
        .expect_err("no lock without a trusted server");
    assert!(
        matches!(
            error,
            LockError::Connection {
                failure: ConnectFailure::Tls,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_roots_do_not_trust_a_private_ca() {
    let tls = TlsRedis::start(ClientAuth::Off).await;
    let error = LockClient::builder()
        .url(tls.url())
        .build()
        .await
        .expect_err("the test CA is in no system store");
    assert!(
        matches!(
            error,
            LockError::Connect {
                failure: ConnectFailure::Tls,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_the_client_certificate() {
    let tls = TlsRedis::start(ClientAuth::Required).await;
    let without = LockClient::builder()
        .url(tls.url())
        .tls_certificates(trusting(&tls.ca_pem))
        .connection_timeout(Duration::from_secs(20))
        .build()
        .await
        .expect_err("the server asks for a client certificate");
    assert!(
        matches!(
            without,
            LockError::Connect {
                failure: ConnectFailure::Tls,
                ..
            }
        ),
        "{without:?}"
    );
    let with = LockClient::builder()
        .url(tls.url())
        .tls_certificates(
            trusting(&tls.ca_pem).client_cert_pem(tls.client.cert.clone(), tls.client.key.clone()),
        )
        .build()
        .await
        .expect("a client with the CA's client certificate");
    lock_round_trip(&with, "tls:mutual").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_acknowledge_a_lock_taken_over_tls() {
    let tls = TlsRedis::start(ClientAuth::Off).await;
    // The replica follows the primary over its plain port; the client
    // speaks TLS to the primary.
    let replica = start_replica(&tls.server).await;
    let client = LockClient::builder()
        .url(tls.url())
        .tls_certificates(trusting(&tls.ca_pem))
        .replicas(1, Duration::from_secs(5))
        .build()
        .await
        .expect("a client over TLS");
    let guard = client
        .lock("tls:replicas")
        .acquire()
        .await
        .expect("the replica acknowledges the lock");
    guard.release().await.expect("released");
    drop(replica);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_over_three_tls_servers() {
    let ca = TestCa::new("redlock nodes CA");
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(TlsRedis::start_signed_by(&ca, ClientAuth::Off).await);
    }
    let client = LockClient::builder()
        .redlock(nodes.iter().map(TlsRedis::url))
        .tls_certificates(trusting(&ca.cert_pem))
        .build()
        .await
        .expect("a Redlock client over TLS");
    let guard = client
        .lock("tls:redlock")
        .acquire()
        .await
        .expect("a majority over TLS");
    guard.release().await.expect("released");
}

#[test]
fn tls_certificates_want_rediss_urls() {
    let error = LockClient::builder()
        .url("redis://127.0.0.1:1")
        .tls_certificates(TlsCertificates::new().root_ca_pem("pem"))
        .build_unchecked()
        .expect_err("certificates with a plain URL are a mistake");
    assert!(error.to_string().contains("rediss://"), "{error}");
    let error = LockClient::builder()
        .in_memory()
        .tls_certificates(TlsCertificates::new())
        .build_unchecked()
        .expect_err("memory has no connection");
    assert!(error.to_string().contains("tls_certificates"), "{error}");
}

#[test]
fn a_ca_file_that_is_missing_empty_or_not_pem_fails_the_build_naming_it() {
    let dir = std::env::temp_dir().join(format!("redlock-tls-build-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let empty = dir.join("empty-ca.crt");
    std::fs::write(&empty, "").expect("write");
    for (file, says) in [
        (dir.join("no-such-ca.crt"), "cannot be read"),
        (empty, "is empty"),
    ] {
        let error = LockClient::builder()
            .url("rediss://127.0.0.1:1")
            .tls_certificates(TlsCertificates::new().root_ca_pem_file(&file))
            .build_unchecked()
            .expect_err("refused before connecting");
        assert!(
            matches!(
                &error,
                redlock_runtime::LockError::Config(
                    redlock_runtime::ConfigError::InvalidCertificate { .. }
                )
            ),
            "{error:?}"
        );
        let message = error.to_string();
        let name = file.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(
            message.contains(name) && message.contains(says),
            "{message}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
