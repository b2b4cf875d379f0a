//! A request that loses its lease while its handler runs: its response
//! still reaches the client, the record (now another request's) is not
//! overwritten, and the loss is logged, with the key's hash and never the
//! key itself.
//!
//! A test binary of its own: it installs a global `tracing` subscriber.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use http::StatusCode;
use redis::AsyncCommands;
use redlock_axum::IdempotencyLayer;
use redlock_runtime::LockClient;
use redlock_tests::RedisServer;

use support::{Probe, post_ok, raw_redis, serve};

/// Collects everything the `tracing` subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn handler(State(probe): State<Probe>) -> (StatusCode, String) {
    let run = probe.enter().await;
    probe.leave(run);
    (StatusCode::CREATED, format!("run {run}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_delivers_the_response_leaves_the_record_alone_and_logs_the_key_hash() {
    let captured = Captured::default();
    let sink = captured.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish(),
    )
    .expect("the only subscriber of this test binary");

    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url()).await.expect("connect");
    let (probe, mut events) = Probe::new(true);
    let layer = IdempotencyLayer::global(&locks).lease(Duration::from_millis(300));
    let app = Router::new()
        .route("/orders", post(handler))
        .layer(layer)
        .with_state(probe.clone());
    let server = serve(app).await;
    let addr = server.addr;
    let key = "raw-secret-key-0042";

    let first = tokio::spawn(async move { post_ok(addr, "/orders", Some(key), "{}").await });
    assert_eq!(events.started().await, 1);
    let duplicate = post_ok(addr, "/orders", Some(key), "{}").await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);

    // The first request's record goes away (as if its lease ran out), and
    // a retry claims the key and runs.
    let mut raw = raw_redis(&redis.url()).await;
    let records: Vec<String> = raw.keys("idem:*").await.expect("KEYS");
    let record = records
        .iter()
        .find(|k| !k.ends_with(":fence"))
        .expect("the in-progress record")
        .clone();
    let _: i64 = raw.del(&record).await.expect("DEL");
    let second = tokio::spawn(async move { post_ok(addr, "/orders", Some(key), "{}").await });
    assert_eq!(events.started().await, 2);

    // The first handler finishes after losing its lease: its response
    // still goes to its client...
    probe.open(1);
    let first = first.await.expect("task");
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.body, "run 1");
    // ...and the record is still the second request's, in progress.
    let state: Option<String> = raw.hget(&record, "st").await.expect("HGET");
    assert_eq!(
        state.as_deref(),
        Some("p"),
        "the lost request overwrote the record"
    );

    probe.open(1);
    let second = second.await.expect("task");
    assert_eq!(second.body, "run 2");
    let retry = post_ok(addr, "/orders", Some(key), "{}").await;
    assert!(retry.replayed());
    assert_eq!(retry.body, "run 2", "the second request's result stands");
    assert_eq!(probe.runs(), 2);

    drop(server);
    let logs = String::from_utf8(captured.0.lock().expect("log buffer").clone()).expect("utf-8");
    assert!(
        logs.contains("lease") && logs.contains("lost"),
        "the lost lease is logged:\n{logs}"
    );
    assert!(
        logs.contains("key_hash="),
        "events carry the key's hash:\n{logs}"
    );
    assert!(!logs.contains(key), "the raw key was logged:\n{logs}");
}
