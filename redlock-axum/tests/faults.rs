//! The idempotency layer under the hostile tester's faults (issue 12,
//! defects 6 and 11, and the 401/403 policy), real HTTP and a real Redis:
//! - a server cut off from Redis loses its lease; the retry that takes the
//!   key over on another server runs with a larger fencing token, whatever
//!   the retention and the handler's time;
//! - a compressed response is replayed with its `content-encoding`;
//! - a 401 is not stored: the retry with fixed credentials runs.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use axum::{Extension, Router};
use http::StatusCode;
use redlock_axum::{IdempotencyContext, IdempotencyLayer};
use redlock_runtime::LockClient;
use redlock_tests::{FaultProxy, RedisServer};

use support::{post_ok, serve};

type Tokens = Arc<Mutex<Vec<(&'static str, u64)>>>;

/// A server whose handler records its fencing token, then works `work`.
async fn server(
    name: &'static str,
    url: String,
    work: Duration,
    tokens: Tokens,
) -> support::Server {
    let locks = LockClient::connect(url).await.expect("connect");
    let layer = IdempotencyLayer::global(&locks)
        .lease(Duration::from_secs(1))
        .retention(Duration::from_millis(100));
    let app = Router::new()
        .route(
            "/pay",
            post(move |Extension(idem): Extension<IdempotencyContext>| {
                let tokens = Arc::clone(&tokens);
                async move {
                    tokens
                        .lock()
                        .expect("tokens")
                        .push((name, idem.fencing_token()));
                    tokio::time::sleep(work).await;
                    (StatusCode::CREATED, "paid")
                }
            }),
        )
        .layer(layer);
    serve(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_over_after_a_partition_gets_a_larger_fencing_token() {
    let redis = RedisServer::start().await;
    let proxy = FaultProxy::start(redis.addr()).await;
    let tokens: Tokens = Arc::default();
    let a = server(
        "a",
        proxy.url(),
        Duration::from_secs(3),
        Arc::clone(&tokens),
    )
    .await;
    let b = server("b", redis.url(), Duration::ZERO, Arc::clone(&tokens)).await;

    let first = tokio::spawn(post_ok(a.addr, "/pay", Some("\"pay-1\""), "{}"));
    // Once A's handler runs, cut A off from Redis: its lease runs out.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokens.lock().expect("tokens").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "A's handler never ran"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.blackhole(true);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let retry = post_ok(b.addr, "/pay", Some("\"pay-1\""), "{}").await;
    assert_eq!(retry.status, StatusCode::CREATED, "B took the key over");
    proxy.blackhole(false);
    let _ = first.await;
    let tokens = tokens.lock().expect("tokens").clone();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert_eq!((tokens[0].0, tokens[1].0), ("a", "b"));
    assert!(
        tokens[1].1 > tokens[0].1,
        "the takeover reused a token: {tokens:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_response_is_replayed_with_its_content_encoding() {
    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url()).await.expect("connect");
    // Bytes as a compression layer inside the idempotency layer leaves them.
    let gzip: &[u8] = &[
        0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x4b, 4, 0, 0x43, 0xbe, 0xb7, 0xe8, 1, 0, 0, 0,
    ];
    let app = Router::new()
        .route(
            "/report",
            post(move || async move {
                (
                    StatusCode::OK,
                    [("content-encoding", "gzip"), ("content-type", "text/plain")],
                    gzip,
                )
            }),
        )
        // An allow-list without content-encoding: it goes with the bytes anyway.
        .layer(IdempotencyLayer::global(&locks).replay_headers([http::header::CONTENT_TYPE]));
    let server = serve(app).await;
    let first = post_ok(server.addr, "/report", Some("\"r-1\""), "{}").await;
    let replay = post_ok(server.addr, "/report", Some("\"r-1\""), "{}").await;
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body);
    assert_eq!(&replay.body[..], gzip);
    assert_eq!(replay.header("content-encoding"), Some("gzip"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorized_answer_is_not_replayed_to_the_fixed_retry() {
    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url()).await.expect("connect");
    let app = Router::new()
        .route(
            "/orders",
            post(|headers: http::HeaderMap| async move {
                if headers.contains_key("authorization") {
                    (StatusCode::CREATED, "created")
                } else {
                    (StatusCode::UNAUTHORIZED, "log in first")
                }
            }),
        )
        .layer(IdempotencyLayer::global(&locks));
    let server = serve(app).await;
    let first = post_ok(server.addr, "/orders", Some("\"o-1\""), "{}").await;
    assert_eq!(first.status, StatusCode::UNAUTHORIZED);
    let mut retry = support::post(server.addr, "/orders", Some(b"\"o-1\""), "{}");
    retry
        .headers_mut()
        .insert("authorization", http::HeaderValue::from_static("Bearer x"));
    let retry = support::send(server.addr, retry).await.expect("retry");
    assert_eq!(retry.status, StatusCode::CREATED, "the handler ran again");
    assert!(!retry.replayed());
}
