//! The idempotency layer over an in-memory `LockClient`: the same states
//! and answers as on Redis, kept in the process (for single-instance
//! services and for testing handlers without Redis).

mod support;

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use http::StatusCode;
use redlock_axum::IdempotencyLayer;
use redlock_runtime::LockClient;

use support::{Probe, post_ok, serve};

async fn handler(State(probe): State<Probe>, body: String) -> (StatusCode, String) {
    let run = probe.enter().await;
    probe.leave(run);
    if body == "fail" {
        return (StatusCode::SERVICE_UNAVAILABLE, "try later".to_owned());
    }
    (StatusCode::CREATED, format!("run {run}"))
}

fn app(probe: Probe, layer: IdempotencyLayer) -> Router {
    Router::new()
        .route("/orders", post(handler))
        .layer(layer)
        .with_state(probe)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_records_behave_as_on_redis() {
    let locks = LockClient::in_memory();
    let (probe, mut events) = Probe::new(true);
    let server = serve(app(
        probe.clone(),
        IdempotencyLayer::new(&locks).global_scope(),
    ))
    .await;
    let addr = server.addr;

    let first = tokio::spawn(async move { post_ok(addr, "/orders", Some("m-1"), "a").await });
    events.started().await;
    let duplicate = post_ok(addr, "/orders", Some("m-1"), "a").await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert!(duplicate.header("retry-after").is_some());
    assert_eq!(
        post_ok(addr, "/orders", Some("m-1"), "b").await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    probe.open(100);
    let first = first.await.expect("task");
    assert_eq!(first.status, StatusCode::CREATED);
    let retry = post_ok(addr, "/orders", Some("m-1"), "a").await;
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);

    // A 503 from the handler releases the key.
    assert_eq!(
        post_ok(addr, "/orders", Some("m-2"), "fail").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        post_ok(addr, "/orders", Some("m-2"), "fail").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(probe.runs(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_wait_for_result_is_woken_by_the_completion() {
    let locks = LockClient::in_memory();
    let (probe, mut events) = Probe::new(true);
    let layer = IdempotencyLayer::new(&locks)
        .global_scope()
        .wait_for_result(Duration::from_secs(5));
    let server = serve(app(probe.clone(), layer)).await;
    let addr = server.addr;
    let first = tokio::spawn(async move { post_ok(addr, "/orders", Some("w-1"), "a").await });
    events.started().await;
    let waiting = tokio::spawn(async move { post_ok(addr, "/orders", Some("w-1"), "a").await });
    probe.open(1);
    let first = first.await.expect("task");
    let waiting = waiting.await.expect("task");
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(waiting.status, StatusCode::CREATED);
    assert!(waiting.replayed());
    assert_eq!(waiting.body, first.body);
    assert_eq!(probe.runs(), 1);
}
