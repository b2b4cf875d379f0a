//! The `metrics` feature of the idempotency layer against a real Redis:
//! every outcome it counts, read back from a Prometheus recorder installed
//! for this test binary (the lock runtime's metrics: redlock-runtime's
//! `tests/telemetry_metrics.rs`).
//!
//! The recorder is global: one test, so its assertions on `outcome`
//! deltas see only its own requests.

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redlock_axum::IdempotencyLayer;
use redlock_runtime::LockClient;
use redlock_tests::http::{post_ok, serve};
use redlock_tests::{RedisServer, series_value};

fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .install_recorder()
            .expect("install the Prometheus recorder");
        redlock_axum::metrics::describe();
        handle
    })
}

/// The value of the series `name{labels..}` (0 when absent).
fn value(name: &str, labels: &[(&str, &str)]) -> f64 {
    series_value(&recorder().render(), name, labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_outcomes() {
    recorder();
    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url()).await.expect("connect");
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel::<()>();
    let handler_gate = gate.clone();
    let app = Router::new()
        .route(
            "/orders",
            post(move |body: String| {
                let gate = handler_gate.clone();
                let started = started_tx.clone();
                async move {
                    let _ = started.send(());
                    if body.contains("slow") {
                        gate.acquire().await.expect("gate").forget();
                    }
                    (StatusCode::CREATED, body)
                }
            }),
        )
        .layer(IdempotencyLayer::global(locks).required());
    let server = serve(app).await;
    let addr = server.addr;

    let outcome = |o: &str| value("redlock_idempotency_requests_total", &[("outcome", o)]);
    let post = |key: Option<&'static str>, body: &'static str| async move {
        post_ok(addr, "/orders", key, body).await.status
    };

    assert_eq!(post(Some("\"k1\""), "a").await, StatusCode::CREATED);
    started.recv().await.expect("the k1 run announced itself");
    assert_eq!(post(Some("\"k1\""), "a").await, StatusCode::CREATED); // replayed
    assert_eq!(
        post(Some("\"k1\""), "b").await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(post(None, "a").await, StatusCode::BAD_REQUEST);
    assert_eq!(post(Some("two words"), "a").await, StatusCode::BAD_REQUEST);
    // A duplicate while the first is held at the gate.
    let first = tokio::spawn(post(Some("\"k2\""), "slow"));
    tokio::time::timeout(Duration::from_secs(5), started.recv())
        .await
        .expect("the first request reached the handler")
        .expect("handler alive");
    assert_eq!(post(Some("\"k2\""), "slow").await, StatusCode::CONFLICT);
    gate.add_permits(1);
    assert_eq!(first.await.expect("first"), StatusCode::CREATED);

    assert_eq!(outcome("claimed"), 2.0);
    assert_eq!(outcome("replayed"), 1.0);
    assert_eq!(outcome("mismatch"), 1.0);
    assert_eq!(outcome("missing"), 1.0);
    assert_eq!(outcome("invalid"), 1.0);
    assert_eq!(outcome("in_progress"), 1.0);
    assert_eq!(outcome("store_error"), 0.0);

    // Redis gone: the layer fails closed with 503, counted as a store error.
    drop(redis);
    assert_eq!(
        post(Some("\"k3\""), "a").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(outcome("store_error"), 1.0);
    drop(server);

    // Help texts are there.
    assert!(
        recorder()
            .render()
            .contains("# HELP redlock_idempotency_requests_total"),
        "described"
    );
}
