//! A server killed while its handler runs: the key stays in progress (409)
//! until the request's lease runs out, then a retry on another server runs
//! the handler. The dead server is a child process (`idempotent_server`).

use std::io::{BufRead, BufReader, Lines};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use http::StatusCode;
use redlock_axum::IdempotencyLayer;
use redlock_runtime::LockClient;
use redlock_tests::RedisServer;
use redlock_tests::http::{post_ok, send, serve};

/// Kills the child on drop, so a failing test leaves no process behind.
struct ChildServer(Child);

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    // Bounded: the child prints within its connection timeout or exits.
    lines
        .next()
        .expect("idempotent_server printed nothing (did it fail to start?)")
        .expect("read idempotent_server's output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_servers_key_frees_after_one_lease_and_a_retry_runs() {
    let redis = RedisServer::start().await;
    let lease = Duration::from_millis(1_500);
    let mut child = Command::new(env!("CARGO_BIN_EXE_idempotent_server"))
        .args([redis.url(), lease.as_millis().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the idempotent_server child process");
    let stdout = child.stdout.take().expect("child stdout");
    let mut child = ChildServer(child);
    let mut lines = BufReader::new(stdout).lines();
    let line = next_line(&mut lines);
    let child_addr: SocketAddr = line
        .strip_prefix("LISTENING ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected idempotent_server output {line:?}"));

    // The first request reaches the child's handler, which never finishes.
    let body = r#"{"sku":"crash"}"#;
    let in_flight = tokio::spawn(async move {
        send(
            child_addr,
            redlock_tests::http::post(child_addr, "/orders", Some(b"k-crash"), body),
        )
        .await
    });
    let lines = tokio::task::spawn_blocking(move || {
        let started = next_line(&mut lines);
        (started, lines)
    });
    let (started, _lines) = lines.await.expect("reader");
    assert_eq!(started, "STARTED");
    // Let its lease be renewed once, so the lease measured is a renewed one.
    tokio::time::sleep(lease / 2).await;
    child.0.kill().expect("SIGKILL the server");
    child.0.wait().expect("reap the server");
    let killed = Instant::now();
    assert!(
        in_flight.await.expect("task").is_err(),
        "the killed server's client gets no response"
    );

    // Another server, same Redis and layer settings.
    let locks = LockClient::connect(redis.url()).await.expect("connect");
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let app = Router::new()
        .route(
            "/orders",
            post(move || {
                let counted = Arc::clone(&counted);
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    (StatusCode::CREATED, "created after the crash")
                }
            }),
        )
        .layer(IdempotencyLayer::global(locks).lease(lease));
    let survivor = serve(app).await;

    let first_retry = post_ok(survivor.addr, "/orders", Some("k-crash"), body).await;
    assert_eq!(
        first_retry.status,
        StatusCode::CONFLICT,
        "the dead server's lease still holds the key"
    );
    let retry_after: u64 = first_retry
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!(
        retry_after <= 2,
        "Retry-After {retry_after} s for a {lease:?} lease"
    );

    // Retry as a client would, until the key frees (bounded).
    let deadline = killed + lease + Duration::from_secs(2);
    let reply = loop {
        let reply = post_ok(survivor.addr, "/orders", Some("k-crash"), body).await;
        if reply.status != StatusCode::CONFLICT {
            break reply;
        }
        assert!(
            Instant::now() < deadline,
            "the key was still in progress {:?} after the kill",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let freed_after = killed.elapsed();
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.body, "created after the crash");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(
        freed_after <= lease + Duration::from_millis(500),
        "freed {freed_after:?} after the kill; lease {lease:?}"
    );
}
