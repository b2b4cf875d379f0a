//! The idempotency layer (`redlock-axum`) end to end: real HTTP on loopback
//! ports, records in a `redis-server` started by the harness or in memory.
//! Each scenario that behaves the same on both runs over both (the cases of
//! a case list); what only Redis has (outages, what is stored, a bare bb8
//! pool) is Redis only.
//!
//! Handlers are held at a gate (a semaphore) and announce themselves on a
//! channel, so "while the first request runs" is an event, not a sleep.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use http::StatusCode;
use redis::AsyncCommands;
use redlock_axum::{IdempotencyContext, IdempotencyLayer};
use redlock_runtime::LockClient;
use redlock_tests::{Backend, RedisServer, Started};
use rstest::rstest;
use tokio::io::AsyncWriteExt;

use support::{Probe, Reply, post_ok, raw_redis, send, serve};

/// The authenticated user, as an auth layer would put it in extensions.
#[derive(Clone)]
struct User(String);

/// Stands in for an authentication layer: `x-user` names the user.
async fn fake_auth(mut req: Request, next: Next) -> Response {
    let user = req
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("alice")
        .to_owned();
    req.extensions_mut().insert(User(user));
    next.run(req).await
}

/// Counts its runs and holds at the probe's gate; `x-behave` picks what it
/// answers: `fail` (500), `unavailable` (503), `panic`, `big` (a 4 KiB
/// body), else 201 with JSON.
async fn create_order(
    State(probe): State<Probe>,
    Extension(user): Extension<User>,
    // Absent when the layer let the request through (no key, fail open).
    idem: Option<Extension<IdempotencyContext>>,
    headers: http::HeaderMap,
    body: String,
) -> Response {
    let run = probe.enter().await;
    let behave = headers
        .get("x-behave")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let response = match behave.as_str() {
        "fail" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(
                "x-fence",
                idem.as_ref().map_or(0, |i| i.fencing_token()).to_string(),
            )],
            "database down",
        )
            .into_response(),
        "unavailable" => (StatusCode::SERVICE_UNAVAILABLE, "try later").into_response(),
        "panic" => panic!("the handler panics (on purpose)"),
        "big" => (StatusCode::OK, "x".repeat(4096)).into_response(),
        _ => (
            StatusCode::CREATED,
            [
                ("location", format!("/orders/{run}")),
                ("set-cookie", format!("session={run}")),
                ("x-request-id", format!("req-{run}")),
                ("content-type", "application/json".to_owned()),
            ],
            serde_json::json!({
                "run": run,
                "user": user.0,
                "request": body,
                "fence": idem.as_ref().map(|i| i.fencing_token()),
                "key_hash": idem.as_ref().map(|i| i.key_hash().to_owned()),
            })
            .to_string(),
        )
            .into_response(),
    };
    probe.leave(run);
    response
}

fn app(probe: Probe, layer: IdempotencyLayer) -> Router {
    Router::new()
        .route("/orders", post(create_order).get(|| async { "list" }))
        .layer(layer)
        .layer(middleware::from_fn(fake_auth))
        .with_state(probe)
}

/// The layer as the suites use it: per-user scope.
fn layer(locks: &LockClient) -> IdempotencyLayer {
    IdempotencyLayer::scoped(locks, |parts| {
        parts.extensions.get::<User>().map(|u| u.0.clone())
    })
}

/// [`setup`] on any backend: the layer over a client of `backend`.
async fn setup_on(
    backend: Backend,
    gated: bool,
    configure: impl FnOnce(IdempotencyLayer) -> IdempotencyLayer,
) -> (
    Started,
    LockClient,
    Probe,
    support::ProbeEvents,
    support::Server,
) {
    let b = backend.start().await;
    let locks = b.client().await;
    let (probe, events) = Probe::new(gated);
    let server = serve(app(probe.clone(), configure(layer(&locks)))).await;
    (b, locks, probe, events, server)
}

/// The layer over a client of its own Redis, the app serving it.
async fn setup(
    gated: bool,
    configure: impl FnOnce(IdempotencyLayer) -> IdempotencyLayer,
) -> (
    RedisServer,
    LockClient,
    Probe,
    support::ProbeEvents,
    support::Server,
) {
    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url())
        .await
        .expect("connect to the test Redis");
    let (probe, events) = Probe::new(gated);
    let server = serve(app(probe.clone(), configure(layer(&locks)))).await;
    (redis, locks, probe, events, server)
}

fn assert_problem(reply: &Reply, status: StatusCode) -> serde_json::Value {
    assert_eq!(reply.status, status, "{reply:?}");
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let problem = reply.json();
    assert_eq!(problem["status"], status.as_u16());
    for member in ["type", "title", "detail"] {
        assert!(
            problem[member].is_string(),
            "problem without {member}: {problem}"
        );
    }
    problem
}

/// The `Retry-After` of a `409` sent while the handler behind `layer` runs.
async fn retry_after_while_running(
    backend: Backend,
    configure: impl FnOnce(IdempotencyLayer) -> IdempotencyLayer,
) -> u64 {
    let (_b, _locks, probe, mut events, server) = setup_on(backend, true, configure).await;
    let addr = server.addr;
    let first =
        tokio::spawn(async move { post_ok(addr, "/orders", Some("k-r"), r#"{"sku":"A"}"#).await });
    events.started().await;
    let second = post_ok(addr, "/orders", Some("k-r"), r#"{"sku":"A"}"#).await;
    assert_problem(&second, StatusCode::CONFLICT);
    probe.open(1);
    assert_eq!(first.await.expect("first").status, StatusCode::CREATED);
    second
        .header("retry-after")
        .expect("Retry-After on 409")
        .parse()
        .expect("Retry-After in seconds")
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_after_of_a_409_is_the_hint_capped_by_the_lease_left(#[case] backend: Backend) {
    let hinted = retry_after_while_running(backend, |l| l.retry_hint(Duration::from_secs(5))).await;
    assert_eq!(hinted, 5, "the configured hint");
    let capped = retry_after_while_running(backend, |l| {
        l.retry_hint(Duration::from_secs(60))
            .lease(Duration::from_secs(3))
    })
    .await;
    assert!(
        (1..=3).contains(&capped),
        "a hint longer than the lease left is cut to it: {capped}"
    );
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_posts_with_one_key_run_the_handler_once_and_the_other_gets_409(
    #[case] backend: Backend,
) {
    let (_b, _locks, probe, mut events, server) = setup_on(backend, true, |l| l).await;
    let addr = server.addr;
    let first =
        tokio::spawn(async move { post_ok(addr, "/orders", Some("k-1"), r#"{"sku":"A"}"#).await });
    events.started().await;

    let second = post_ok(addr, "/orders", Some("k-1"), r#"{"sku":"A"}"#).await;
    let problem = assert_problem(&second, StatusCode::CONFLICT);
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("processing")),
        "{problem}"
    );
    let retry_after: u64 = second
        .header("retry-after")
        .expect("Retry-After on 409")
        .parse()
        .expect("Retry-After in seconds");
    assert_eq!(
        retry_after, 1,
        "Retry-After is the 1 s hint, not the 30 s lease left"
    );
    // The key with another request while the first runs: a mismatch.
    let other = post_ok(addr, "/orders", Some("k-1"), r#"{"sku":"B"}"#).await;
    assert_problem(&other, StatusCode::UNPROCESSABLE_ENTITY);

    probe.open(1);
    let first = first.await.expect("first request");
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    assert_eq!(probe.runs(), 1);
    // Once it finished, the same request gets its response replayed.
    let retry = post_ok(addr, "/orders", Some("k-1"), r#"{"sku":"A"}"#).await;
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.body, first.body);
    assert_eq!(probe.runs(), 1);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_retry_gets_the_stored_response_replayed(#[case] backend: Backend) {
    let (_b, _locks, probe, _events, server) = setup_on(backend, false, |l| l).await;
    let first = post_ok(
        server.addr,
        "/orders",
        Some("\"retry-1\""),
        r#"{"sku":"B"}"#,
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.header("set-cookie"), Some("session=1"));
    assert!(
        first.json()["fence"].as_u64().is_some_and(|f| f > 0),
        "{first:?}"
    );

    let retry = post_ok(
        server.addr,
        "/orders",
        Some("\"retry-1\""),
        r#"{"sku":"B"}"#,
    )
    .await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.header("location"), Some("/orders/1"));
    assert_eq!(retry.header("content-type"), Some("application/json"));
    // Never replayed: cookies, dates and request ids belong to one response.
    assert_eq!(retry.header("set-cookie"), None);
    assert_eq!(retry.header("x-request-id"), None);
    assert_eq!(probe.runs(), 1);

    // The same key as a bare token is the same key.
    let bare = post_ok(server.addr, "/orders", Some("retry-1"), r#"{"sku":"B"}"#).await;
    assert!(bare.replayed());
    assert_eq!(probe.runs(), 1);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_with_a_different_body_is_422(#[case] backend: Backend) {
    let (_b, _locks, probe, _events, server) = setup_on(backend, false, |l| l).await;
    let first = post_ok(
        server.addr,
        "/orders",
        Some("k-422"),
        r#"{"sku":"C","qty":1}"#,
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let other = post_ok(
        server.addr,
        "/orders",
        Some("k-422"),
        r#"{"sku":"C","qty":2}"#,
    )
    .await;
    assert_problem(&other, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(probe.runs(), 1);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_empty_non_ascii_and_overlong_keys_are_400(#[case] backend: Backend) {
    let (_b, _locks, probe, _events, server) = setup_on(backend, false, |l| l).await;
    let long = "k".repeat(300);
    let bad: [&[u8]; 7] = [
        b"\"unterminated",
        b"\"\"",
        b"",
        b"caf\xc3\xa9",
        b"two words",
        b"\"bad \\x escape\"",
        long.as_bytes(),
    ];
    for key in bad {
        let reply = send(
            server.addr,
            support::post(server.addr, "/orders", Some(key), "{}"),
        )
        .await
        .expect("response");
        let problem = assert_problem(&reply, StatusCode::BAD_REQUEST);
        assert!(
            problem["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("InvalidKey")),
            "{problem}"
        );
    }
    assert_eq!(probe.runs(), 0, "no bad key reaches the handler");
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_scopes_with_the_same_key_do_not_see_each_other(#[case] backend: Backend) {
    let (_b, _locks, probe, mut events, server) = setup_on(backend, true, |l| l).await;
    let addr = server.addr;
    let as_user = |user: &'static str| {
        let mut req = support::post(addr, "/orders", Some(b"shared-key"), r#"{"sku":"D"}"#);
        req.headers_mut()
            .insert("x-user", http::HeaderValue::from_static(user));
        req
    };
    let alice = tokio::spawn(send(addr, as_user("alice")));
    assert_eq!(events.started().await, 1);
    // Bob's request with Alice's key, while Alice's still runs: not blocked.
    let bob = tokio::spawn(send(addr, as_user("bob")));
    assert_eq!(events.started().await, 2);
    probe.open(2);
    let alice = alice.await.expect("task").expect("alice's response");
    let bob = bob.await.expect("task").expect("bob's response");
    assert_eq!(alice.status, StatusCode::CREATED);
    assert_eq!(bob.status, StatusCode::CREATED);
    assert_eq!(alice.json()["user"], "alice");
    assert_eq!(bob.json()["user"], "bob");

    // Each one's retry replays their own response.
    probe.open(10);
    let bob_again = send(addr, as_user("bob")).await.expect("response");
    assert!(bob_again.replayed());
    assert_eq!(bob_again.json()["user"], "bob");
    assert_eq!(probe.runs(), 2);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_or_503_releases_the_key_and_the_retry_runs_again(#[case] backend: Backend) {
    let (_b, _locks, probe, _events, server) = setup_on(backend, false, |l| l).await;
    let mut failing = support::post(server.addr, "/orders", Some(b"k-500"), "{}");
    failing
        .headers_mut()
        .insert("x-behave", http::HeaderValue::from_static("fail"));
    let failed = send(server.addr, failing).await.expect("response");
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(failed.body, "database down");

    let retry = post_ok(server.addr, "/orders", Some("k-500"), "{}").await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(!retry.replayed());
    assert_eq!(probe.runs(), 2);
    let failed_fence: u64 = failed
        .header("x-fence")
        .and_then(|f| f.parse().ok())
        .expect("the failed run's token");
    assert!(
        retry.json()["fence"]
            .as_u64()
            .is_some_and(|f| f > failed_fence),
        "a new claim of the key, a higher fencing token than {failed_fence}: {retry:?}"
    );

    // A 503 is not stored either: each try runs the handler.
    for _ in 0..2 {
        let mut unavailable = support::post(server.addr, "/orders", Some(b"k-503"), "{}");
        unavailable
            .headers_mut()
            .insert("x-behave", http::HeaderValue::from_static("unavailable"));
        let reply = send(server.addr, unavailable).await.expect("response");
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!reply.replayed());
    }
    assert_eq!(probe.runs(), 4);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_releases_its_key(#[case] backend: Backend) {
    let (b, _locks, probe, _events, server) = setup_on(backend, false, |l| l).await;
    let mut panicking = support::post(server.addr, "/orders", Some(b"k-panic"), "{}");
    panicking
        .headers_mut()
        .insert("x-behave", http::HeaderValue::from_static("panic"));
    // Without a catch-panic layer, axum closes the connection.
    let outcome = send(server.addr, panicking).await;
    assert!(outcome.is_err(), "a panic gives no response: {outcome:?}");

    // Released before the panic reached the server: nothing left in Redis.
    for server in b.servers() {
        let mut raw = raw_redis(&server.url()).await;
        let left: Vec<String> = raw.keys("idem:*").await.expect("KEYS");
        assert!(
            left.iter().all(|k| k.ends_with(":fence")),
            "records left: {left:?}"
        );
    }

    let retry = post_ok(server.addr, "/orders", Some("k-panic"), "{}").await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(probe.runs(), 2);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_response_is_delivered_once_and_then_not_replayable(#[case] backend: Backend) {
    let (_b, _locks, probe, _events, server) =
        setup_on(backend, false, |l| l.store_limit(1024)).await;
    let big = || {
        let mut req = support::post(server.addr, "/orders", Some(b"k-big"), "{}");
        req.headers_mut()
            .insert("x-behave", http::HeaderValue::from_static("big"));
        req
    };
    let first = send(server.addr, big()).await.expect("response");
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body.len(), 4096, "the whole body reaches the client");

    let retry = send(server.addr, big()).await.expect("response");
    let problem = assert_problem(&retry, StatusCode::CONFLICT);
    assert_eq!(problem["original_status"], 200);
    assert!(
        problem["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("NotReplayable"))
    );
    assert!(retry.replayed());
    assert_eq!(probe.runs(), 1, "never run again");
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_disconnect_does_not_stop_the_handler_and_the_retry_is_replayed(
    #[case] backend: Backend,
) {
    // The retry waits for the result: it may arrive before the finished
    // handler's response is stored.
    let (_b, _locks, probe, mut events, server) =
        setup_on(backend, true, |l| l.wait_for_result(Duration::from_secs(5))).await;
    let body = r#"{"sku":"E"}"#;
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let request = format!(
        "POST /orders HTTP/1.1\r\nhost: {}\r\nidempotency-key: k-gone\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    events.started().await;
    drop(stream); // the client goes away mid-handler

    probe.open(1);
    assert_eq!(events.finished().await, 1, "the handler ran to its end");
    let retry = post_ok(server.addr, "/orders", Some("k-gone"), body).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.json()["run"], 1);
    assert_eq!(probe.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_paused_is_a_503_within_a_bounded_time() {
    let (redis, _locks, probe, _events, server) =
        setup(false, |l| l.redis_timeout(Duration::from_millis(300))).await;
    redis.pause();
    let started = Instant::now();
    let reply = post_ok(server.addr, "/orders", Some("k-503"), "{}").await;
    let took = started.elapsed();
    redis.resume();
    let problem = assert_problem(&reply, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        problem["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("Unavailable"))
    );
    assert!(reply.header("retry-after").is_some());
    assert!(took < Duration::from_secs(2), "503 after {took:?}");
    assert_eq!(probe.runs(), 0, "fail closed: the handler did not run");

    // Once Redis is back, the same request goes through.
    let reply = post_ok(server.addr, "/orders", Some("k-503"), "{}").await;
    assert_eq!(reply.status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_lost_to_a_pause_does_not_block_the_key_for_a_lease() {
    // The claim reaches the paused Redis and is applied when it resumes,
    // but its answer came too late: the layer gives it back.
    let (redis, _locks, probe, _events, server) =
        setup(false, |l| l.redis_timeout(Duration::from_millis(300))).await;
    // Open every connection first, so that the claim is sent at once (a new
    // connection's check-out PING would hang instead).
    for n in 0..8 {
        let key = format!("warm-{n}");
        assert_eq!(
            post_ok(server.addr, "/orders", Some(&key), "{}")
                .await
                .status,
            StatusCode::CREATED
        );
    }
    redis.pause();
    let reply = post_ok(server.addr, "/orders", Some("k-lost"), "{}").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    redis.resume();
    // The give-back runs in the background: retry until it has (bounded,
    // far below the 30 s lease the claim would otherwise hold the key for).
    let deadline = Instant::now() + Duration::from_secs(5);
    let reply = loop {
        let reply = post_ok(server.addr, "/orders", Some("k-lost"), "{}").await;
        if reply.status != StatusCode::CONFLICT || Instant::now() > deadline {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(reply.status, StatusCode::CREATED, "{reply:?}");
    assert_eq!(probe.runs(), 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_is_a_503_and_requests_go_through_once_it_is_back() {
    let (mut redis, _locks, probe, _events, server) =
        setup(false, |l| l.redis_timeout(Duration::from_millis(500))).await;
    redis.kill().await;
    let started = Instant::now();
    let reply = post_ok(server.addr, "/orders", Some("k-down"), "{}").await;
    assert_problem(&reply, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "503 after {:?}",
        started.elapsed()
    );
    redis.restart().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let reply = loop {
        let reply = post_ok(server.addr, "/orders", Some("k-down"), "{}").await;
        if reply.status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(reply.status, StatusCode::CREATED, "{reply:?}");
    assert_eq!(probe.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_lets_requests_through_while_redis_is_paused() {
    let (redis, _locks, probe, _events, server) = setup(false, |l| {
        l.redis_timeout(Duration::from_millis(300)).fail_open()
    })
    .await;
    redis.pause();
    let reply = post_ok(server.addr, "/orders", Some("k-open"), "{}").await;
    redis.resume();
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(
        reply.json()["fence"],
        serde_json::Value::Null,
        "no claim, no context"
    );
    assert_eq!(probe.runs(), 1);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_duplicates_run_the_handler_exactly_once(#[case] backend: Backend) {
    let (_b, _locks, probe, mut events, server) = setup_on(backend, true, |l| l).await;
    let addr = server.addr;
    let mut replies = futures_util::stream::FuturesUnordered::new();
    for _ in 0..100 {
        replies.push(tokio::spawn(async move {
            post_ok(addr, "/orders", Some("k-100"), r#"{"sku":"F"}"#).await
        }));
    }
    events.started().await;
    // All but the running one are answered while it is held at the gate.
    let mut statuses: HashMap<u16, usize> = HashMap::new();
    use futures_util::StreamExt;
    for _ in 0..99 {
        let reply = replies.next().await.expect("a reply").expect("task");
        *statuses.entry(reply.status.as_u16()).or_default() += 1;
    }
    assert_eq!(statuses, HashMap::from([(409, 99)]));
    probe.open(1);
    let last = replies.next().await.expect("the last reply").expect("task");
    assert_eq!(last.status, StatusCode::CREATED);
    assert_eq!(probe.runs(), 1);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_result_replays_the_first_result_to_a_waiting_duplicate(#[case] backend: Backend) {
    let (b, _locks, probe, mut events, server) =
        setup_on(backend, true, |l| l.wait_for_result(Duration::from_secs(5))).await;
    let addr = server.addr;
    let first = tokio::spawn(async move { post_ok(addr, "/orders", Some("k-wait"), "{}").await });
    events.started().await;
    let second = tokio::spawn(async move { post_ok(addr, "/orders", Some("k-wait"), "{}").await });
    // More waiters: one message wakes one, which passes it on.
    let more: Vec<_> = (0..3)
        .map(|_| tokio::spawn(async move { post_ok(addr, "/orders", Some("k-wait"), "{}").await }))
        .collect();
    // On Redis, the duplicate subscribes to the record's channel while it
    // waits (on a cluster, a sharded channel on the master of the record's
    // slot). (In memory it waits on the record itself, which nothing
    // outside shows: it may come in after the completion, and is replayed
    // as well.)
    let servers = b.servers();
    let needed = if b.cluster().is_some() {
        1
    } else {
        servers.len()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut subscribed = 0;
        for server in servers {
            let mut raw = raw_redis(&server.url()).await;
            let mut channels: Vec<String> = Vec::new();
            for kind in ["CHANNELS", "SHARDCHANNELS"] {
                let found: Vec<String> = redis::cmd("PUBSUB")
                    .arg(kind)
                    .arg("idem:*")
                    .query_async(&mut raw)
                    .await
                    .expect("PUBSUB CHANNELS");
                channels.extend(found);
            }
            subscribed += usize::from(!channels.is_empty());
        }
        if subscribed >= needed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the duplicate never waited on the record"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let opened = Instant::now();
    probe.open(1);
    let first = first.await.expect("task");
    let second = second.await.expect("task");
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(second.status, StatusCode::CREATED);
    assert!(second.replayed());
    assert_eq!(second.body, first.body);
    assert!(
        opened.elapsed() < Duration::from_millis(200),
        "woken by the completion, not by polling: {:?}",
        opened.elapsed()
    );
    for waiter in more {
        let reply = waiter.await.expect("task");
        assert!(reply.replayed(), "{reply:?}");
        assert_eq!(reply.body, first.body);
    }
    assert_eq!(probe.runs(), 1);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_optional_required_or_derived_and_other_methods_pass_through(
    #[case] backend: Backend,
) {
    let b = backend.start().await;
    let locks = b.client().await;
    let (probe, _events) = Probe::new(false);
    let optional = serve(app(probe.clone(), layer(&locks))).await;
    let required = serve(app(probe.clone(), layer(&locks).required())).await;
    let derived = serve(app(
        probe.clone(),
        layer(&locks).derive_key(Duration::from_secs(5)),
    ))
    .await;

    // Optional: no key, no idempotency.
    for _ in 0..2 {
        let r = post_ok(optional.addr, "/orders", None, "{}").await;
        assert_eq!(r.status, StatusCode::CREATED);
        assert!(!r.replayed());
    }
    assert_eq!(probe.runs(), 2);

    // Required: 400 without a key.
    let r = post_ok(required.addr, "/orders", None, "{}").await;
    let problem = assert_problem(&r, StatusCode::BAD_REQUEST);
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Idempotency-Key"))
    );
    assert_eq!(probe.runs(), 2);

    // Derived: a form posted twice runs once; another body runs.
    let form =
        |body: &'static str| async move { post_ok(derived.addr, "/orders", None, body).await };
    let a = form("sku=G").await;
    let b = form("sku=G").await;
    let c = form("sku=H").await;
    assert!(!a.replayed() && b.replayed() && !c.replayed());
    assert_eq!(a.body, b.body);
    assert_eq!(probe.runs(), 4);

    // GET is not covered: it runs every time, with or without a key.
    for _ in 0..2 {
        let req = http::Request::get(format!("http://{}/orders", required.addr))
            .header("host", required.addr.to_string())
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .expect("request");
        let r = send(required.addr, req).await.expect("response");
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body, "list");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_is_asked_for_where_the_layer_reads_it() {
    let b = Backend::Memory.start().await;
    let locks = b.client().await;
    let (probe, _events) = Probe::new(false);
    let detail = |r: &Reply| {
        let problem = assert_problem(r, StatusCode::BAD_REQUEST);
        problem["detail"].as_str().unwrap_or_default().to_owned()
    };
    // A header configured in lower case is spelled as the default one is.
    let custom = layer(&locks)
        .header(http::HeaderName::from_static("x-request-key"))
        .required();
    let custom = serve(app(probe.clone(), custom)).await;
    let said = detail(&post_ok(custom.addr, "/orders", None, "{}").await);
    assert!(said.contains("an `X-Request-Key` header"), "{said}");
    // A key from an extractor of one's own: no header to name.
    let own = layer(&locks)
        .extract_key(|_: &http::request::Parts| Ok(None))
        .required();
    let own = serve(app(probe.clone(), own)).await;
    let said = detail(&post_ok(own.addr, "/orders", None, "{}").await);
    assert!(said.contains("requires an idempotency key:"), "{said}");
    assert!(!said.contains("header"), "{said}");
    assert_eq!(probe.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_share_one_hash_tag_and_store_no_raw_key() {
    let (redis, _locks, _probe, _events, server) = setup(false, |l| l).await;
    let secret = "secret-key-7f3a";
    let r = post_ok(server.addr, "/orders", Some(secret), "{}").await;
    assert_eq!(r.status, StatusCode::CREATED);
    let mut raw = raw_redis(&redis.url()).await;
    let mut keys: Vec<String> = raw.keys("*").await.expect("KEYS");
    keys.sort();
    assert_eq!(keys.len(), 2, "a record and its fencing counter: {keys:?}");
    let tag = |k: &str| {
        let open = k.find('{').expect("a hash tag");
        let close = open + k[open..].find('}').expect("closed");
        k[open..=close].to_owned()
    };
    assert_eq!(tag(&keys[0]), tag(&keys[1]));
    for k in &keys {
        assert!(!k.contains(secret), "raw key in Redis key {k}");
        assert!(k.contains(r.json()["key_hash"].as_str().expect("key hash")));
    }
    let record = keys
        .iter()
        .find(|k| !k.ends_with(":fence"))
        .expect("record");
    let fields: HashMap<String, Vec<u8>> = raw.hgetall(record).await.expect("HGETALL");
    assert_eq!(fields.get("st").map(Vec::as_slice), Some(&b"c"[..]));
    assert!(!fields.contains_key("own"), "no owner once completed");
    let ttl: i64 = raw.pttl(record).await.expect("PTTL");
    assert!(ttl > 23 * 3600 * 1000, "kept 24 h, pttl {ttl}");
}

/// A scope that is missing is the server's error (`500`) by default, and
/// the client's when the layer is told so: a tenant header the client
/// forgot is a `400` saying what the request lacks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_scope_gets_the_status_the_layer_chose() {
    let b = Backend::Memory.start().await;
    let locks = b.client().await;
    let (probe, _events) = Probe::new(false);
    let by_tenant = || {
        IdempotencyLayer::scoped(&locks, |parts| {
            let tenant = parts.headers.get("x-tenant")?;
            tenant.to_str().ok().map(str::to_owned)
        })
    };
    let default = serve(app(probe.clone(), by_tenant())).await;
    let client = serve(app(
        probe.clone(),
        by_tenant().missing_scope_status(StatusCode::BAD_REQUEST),
    ))
    .await;

    let r = post_ok(default.addr, "/orders", Some("k-scope"), "{}").await;
    let problem = assert_problem(&r, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        problem["type"],
        "tag:redlock-axum,2026:problem:MissingScope"
    );

    let r = post_ok(client.addr, "/orders", Some("k-scope"), "{}").await;
    let problem = assert_problem(&r, StatusCode::BAD_REQUEST);
    assert_eq!(problem["type"], "tag:redlock-axum,2026:problem:NoOwner");
    assert_eq!(problem["status"], 400);
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(!detail.contains("server configuration"), "{detail}");
    assert_eq!(probe.runs(), 0);

    // With the header, the same layer runs the handler.
    let mut req = support::post(client.addr, "/orders", Some(b"k-scope"), "{}");
    req.headers_mut()
        .insert("x-tenant", http::HeaderValue::from_static("acme"));
    let r = send(client.addr, req).await.expect("response");
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(probe.runs(), 1);
}

#[tokio::test]
#[should_panic(expected = "missing_scope_status takes a client error")]
async fn missing_scope_status_takes_only_a_client_error() {
    let locks = LockClient::in_memory();
    let _ = IdempotencyLayer::scoped(&locks, |_| None)
        .missing_scope_status(StatusCode::SERVICE_UNAVAILABLE);
}

/// `fingerprint(..)` chooses what makes two requests the same: here a
/// JSON body less its `sent_at`, which changes on every retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fingerprint_covers_what_the_layer_chooses() {
    let b = Backend::Memory.start().await;
    let locks = b.client().await;
    let (probe, _events) = Probe::new(false);
    let chosen = layer(&locks).fingerprint(|_, body| {
        let mut json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        if let Some(fields) = json.as_object_mut() {
            fields.remove("sent_at");
        }
        json.to_string().into_bytes()
    });
    let server = serve(app(probe.clone(), chosen)).await;
    let whole = serve(app(probe.clone(), layer(&locks))).await;
    let order = |addr, key, body| post_ok(addr, "/orders", Some(key), body);

    let first = order(server.addr, "k-fp", r#"{"amount":5,"sent_at":1}"#).await;
    assert_eq!(first.status, StatusCode::CREATED);
    // A retry whose timestamp changed: the same request, replayed.
    let retry = order(server.addr, "k-fp", r#"{"sent_at":2,"amount":5}"#).await;
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.body, first.body);
    // Another amount under the same key: another request.
    let other = order(server.addr, "k-fp", r#"{"amount":6,"sent_at":3}"#).await;
    assert_problem(&other, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(probe.runs(), 1);

    // The default fingerprint (the whole body) tells the retry apart.
    let a = order(whole.addr, "k-whole", r#"{"amount":5,"sent_at":1}"#).await;
    let b = order(whole.addr, "k-whole", r#"{"amount":5,"sent_at":2}"#).await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_problem(&b, StatusCode::UNPROCESSABLE_ENTITY);
}

/// A completed record that does not decode (written by another program,
/// or damaged) is a store failure: `503` without running the handler, or
/// the request let through with `fail_open`; never a replay of garbage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_does_not_decode_is_a_store_failure() {
    let (redis, locks, probe, _events, server) = setup(false, |l| l).await;
    let first = post_ok(server.addr, "/orders", Some("k-bad"), "{}").await;
    assert_eq!(first.status, StatusCode::CREATED);
    let mut raw = raw_redis(&redis.url()).await;
    let keys: Vec<String> = raw.keys("idem:*").await.expect("KEYS");
    let record = keys
        .iter()
        .find(|k| !k.ends_with(":fence"))
        .expect("record");
    let () = raw
        .hset(record, "hdr", "a header line without a colon\n")
        .await
        .expect("HSET");

    let strict = post_ok(server.addr, "/orders", Some("k-bad"), "{}").await;
    assert_problem(&strict, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(probe.runs(), 1);

    let open = serve(app(probe.clone(), layer(&locks).fail_open())).await;
    let through = post_ok(open.addr, "/orders", Some("k-bad"), "{}").await;
    assert_eq!(through.status, StatusCode::CREATED);
    assert!(!through.replayed());
    assert_eq!(probe.runs(), 2);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_limit_is_413(#[case] backend: Backend) {
    let (_b, _locks, probe, _events, server) = setup_on(backend, false, |l| l.body_limit(64)).await;
    let r = post_ok(server.addr, "/orders", Some("k-413"), &"x".repeat(65)).await;
    assert_problem(&r, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(probe.runs(), 0);
    let r = post_ok(server.addr, "/orders", Some("k-413"), &"x".repeat(64)).await;
    assert_eq!(r.status, StatusCode::CREATED);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_methods_store_policy_mismatch_status_and_rejections_are_configurable(
    #[case] backend: Backend,
) {
    let b = backend.start().await;
    let locks = b.client().await;
    let (probe, _events) = Probe::new(false);
    let layer = layer(&locks)
        .header(http::HeaderName::from_static("x-request-key"))
        .methods([http::Method::PUT])
        .mismatch_status(StatusCode::CONFLICT)
        // Store 2xx only: a 4xx runs again.
        .store_if(|status| status.is_success())
        .map_rejection(|rejection| {
            (rejection.status(), format!("custom: {}", rejection.title())).into_response()
        });
    let app = Router::new()
        .route(
            "/orders",
            axum::routing::put(create_order).post(create_order),
        )
        .route(
            "/bad",
            axum::routing::put(|State(probe): State<Probe>| async move {
                let run = probe.enter().await;
                probe.leave(run);
                StatusCode::BAD_REQUEST
            }),
        )
        .layer(layer)
        .layer(middleware::from_fn(fake_auth))
        .with_state(probe.clone());
    let server = serve(app).await;
    let put = |path: &str, key: &'static str, body: &'static str| {
        http::Request::put(format!("http://{}{path}", server.addr))
            .header("host", server.addr.to_string())
            .header("x-request-key", key)
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                body.as_bytes(),
            )))
            .expect("request")
    };

    let first = send(server.addr, put("/orders", "c-1", "a"))
        .await
        .expect("response");
    assert_eq!(first.status, StatusCode::CREATED);
    let again = send(server.addr, put("/orders", "c-1", "a"))
        .await
        .expect("response");
    assert!(again.replayed(), "the key is read from x-request-key");
    let other = send(server.addr, put("/orders", "c-1", "b"))
        .await
        .expect("response");
    assert_eq!(other.status, StatusCode::CONFLICT);
    assert_eq!(
        other.body,
        "custom: Idempotency key reused with a different request"
    );
    assert_eq!(probe.runs(), 1);

    // POST is not covered any more: the same key runs every time.
    for _ in 0..2 {
        let r = post_ok(server.addr, "/orders", Some("c-1"), "a").await;
        assert!(!r.replayed());
    }
    assert_eq!(probe.runs(), 3);

    // A 400 is not stored under this policy: the retry runs.
    for _ in 0..2 {
        let r = send(server.addr, put("/bad", "c-2", ""))
            .await
            .expect("response");
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(!r.replayed());
    }
    assert_eq!(probe.runs(), 5);
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_running_past_its_lease_keeps_its_key_while_renewed(#[case] backend: Backend) {
    let lease = Duration::from_millis(300);
    let (_b, _locks, probe, mut events, server) = setup_on(backend, true, |l| l.lease(lease)).await;
    let addr = server.addr;
    let first = tokio::spawn(async move { post_ok(addr, "/orders", Some("k-long"), "{}").await });
    events.started().await;
    // The subject here is time passing: three leases, renewed every lease/3.
    tokio::time::sleep(lease * 3).await;
    let duplicate = post_ok(addr, "/orders", Some("k-long"), "{}").await;
    assert_eq!(
        duplicate.status,
        StatusCode::CONFLICT,
        "the renewed lease still holds the key"
    );
    assert_eq!(duplicate.header("retry-after"), Some("1"));
    probe.open(1);
    assert_eq!(first.await.expect("task").status, StatusCode::CREATED);
    let retry = post_ok(addr, "/orders", Some("k-long"), "{}").await;
    assert!(retry.replayed());
    assert_eq!(probe.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_bb8_pool_works_and_waiting_duplicates_poll() {
    let redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url()).await.expect("connect");
    let pool = locks.pool().expect("a Redis client has a pool").clone();
    let (probe, mut events) = Probe::new(true);
    let layer = IdempotencyLayer::scoped(pool, |parts| {
        parts.extensions.get::<User>().map(|u| u.0.clone())
    })
    .wait_for_result(Duration::from_secs(5));
    let server = serve(app(probe.clone(), layer)).await;
    let addr = server.addr;
    let first = tokio::spawn(async move { post_ok(addr, "/orders", Some("k-pool"), "{}").await });
    events.started().await;
    // No subscriber without a URL: the duplicate polls the record.
    let waiting = tokio::spawn(async move { post_ok(addr, "/orders", Some("k-pool"), "{}").await });
    probe.open(1);
    let first = first.await.expect("task");
    let waiting = waiting.await.expect("task");
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(waiting.status, StatusCode::CREATED);
    assert!(waiting.replayed());
    assert_eq!(waiting.body, first.body);
    assert_eq!(probe.runs(), 1);
}

/// On a cluster, a double submit gives 201 + 409, the retry replays, and
/// every key of the record (the record, its fencing counter) is in one
/// slot on one master, so no script touching them can be CROSSSLOT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_records_keys_share_one_slot_and_one_master() {
    let (b, _locks, probe, mut events, server) = setup_on(Backend::Cluster, true, |l| l).await;
    let addr = server.addr;
    let first =
        tokio::spawn(
            async move { post_ok(addr, "/orders", Some("k-slot"), r#"{"sku":"A"}"#).await },
        );
    events.started().await;
    let second = post_ok(addr, "/orders", Some("k-slot"), r#"{"sku":"A"}"#).await;
    assert_eq!(second.status, StatusCode::CONFLICT);
    probe.open(1);
    assert_eq!(first.await.expect("first").status, StatusCode::CREATED);
    let retry = post_ok(addr, "/orders", Some("k-slot"), r#"{"sku":"A"}"#).await;
    assert!(retry.replayed(), "{retry:?}");

    let mut found: Vec<(u16, String)> = Vec::new();
    for node in b.servers() {
        let mut raw = raw_redis(&node.url()).await;
        let keys: Vec<String> = raw.keys("idem:*").await.expect("KEYS");
        for key in keys {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&key)
                .query_async(&mut raw)
                .await
                .expect("KEYSLOT");
            found.push((slot, node.url()));
        }
    }
    assert!(found.len() >= 2, "the record and its counter: {found:?}");
    assert!(
        found.windows(2).all(|w| w[0] == w[1]),
        "the record's keys are in one slot on one master: {found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_32_a_response_goes_out_in_time_when_redis_dies_while_the_handler_runs() {
    // The handler finishes after Redis was killed: the response must not
    // wait for the record's lease (6 s here) or the store's retries beyond
    // `redis_timeout × attempts` (with their pauses), and a retry once
    // Redis is back gets a correct answer without two runs at once.
    let redis_timeout = Duration::from_millis(400);
    let (mut redis, _locks, probe, mut events, server) = setup(true, |l| {
        l.redis_timeout(redis_timeout).lease(Duration::from_secs(6))
    })
    .await;
    let addr = server.addr;
    let first = tokio::spawn(async move { post_ok(addr, "/orders", Some("k-dies"), "{}").await });
    events.started().await;
    redis.kill().await;
    // The handler runs on for half a lease with Redis gone (the watchdog's
    // renewals fail meanwhile), then ends.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let done = Instant::now();
    probe.open(1);
    let reply = first.await.expect("first");
    let took = done.elapsed();
    // `redis_timeout × attempts` (three), and a margin for a loaded
    // machine.
    let bound = redis_timeout * 3 + Duration::from_millis(300);
    assert!(
        took <= bound,
        "the response took {took:?} after the handler ended (bound {bound:?})"
    );
    assert_eq!(reply.status, StatusCode::CREATED, "{reply:?}");
    redis.restart().await;
    // The record was never completed (Redis died) and Redis restarted
    // empty: a retry runs the handler again, once, and never while another
    // run of the same key goes on.
    probe.open(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let retry = loop {
        let retry = post_ok(addr, "/orders", Some("k-dies"), "{}").await;
        if retry.status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            break retry;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(retry.status, StatusCode::CREATED, "{retry:?}");
    assert_eq!(probe.runs(), 2);
    let again = post_ok(addr, "/orders", Some("k-dies"), "{}").await;
    assert_eq!(again.status, StatusCode::CREATED, "{again:?}");
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(probe.runs(), 2, "the completed retry is replayed");
}
