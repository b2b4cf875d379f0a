//! The `metrics` feature against a real Redis: every counter and histogram
//! the runtime and the idempotency layer document, read back from a
//! Prometheus recorder installed for this test binary.
//!
//! The recorder is global, so each test uses its own `lock` labels (and the
//! idempotency test runs alone in its own assertions on `outcome` deltas).

mod axum_support;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redlock_runtime::{LockClient, LockError, LostReason, distributed_lock};
use redlock_tests::RedisServer;

use axum_support::{post_ok, serve};

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

/// The value of the series `name{labels..}` in the rendered text (0 when
/// absent). Every given label must match; others are ignored.
fn value(name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = recorder().render();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (series_labels, number) = match rest.strip_prefix('{') {
            Some(rest) => match rest.split_once("} ") {
                Some(split) => split,
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(number) => ("", number),
                None => continue, // a longer name
            },
        };
        if labels
            .iter()
            .all(|(k, v)| series_labels.contains(&format!("{k}=\"{v}\"")))
        {
            return number.trim().parse().expect("a number");
        }
    }
    0.0
}

/// Waits (bounded, 5 s) until the series reaches `want`: for what a
/// spawned task records.
async fn eventually(name: &str, labels: &[(&str, &str)], want: f64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while value(name, labels) < want {
        assert!(
            Instant::now() < deadline,
            "{name}{labels:?} stayed at {} (want {want}); rendered:\n{}",
            value(name, labels),
            recorder().render()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_counters_and_histograms() {
    recorder();
    let redis = RedisServer::start().await;
    let a = LockClient::connect(redis.url()).await.expect("connect");
    let b = LockClient::connect(redis.url()).await.expect("connect");
    let lock = [("lock", "mx"), ("backend", "redis")];

    // Acquired, then released by release(): one hold recorded.
    let guard = a.lock("mx:1").acquire().await.expect("acquire");
    assert_eq!(value("redlock_lock_acquired_total", &lock), 1.0);
    // Busy (no wait) and a wait timeout, while `a` holds it.
    assert!(b.lock("mx:1").try_acquire().await.expect("try").is_none());
    assert_eq!(value("redlock_lock_busy_total", &lock), 1.0);
    let err = b
        .lock("mx:1")
        .wait(Duration::from_millis(100))
        .acquire()
        .await
        .expect_err("held by a");
    assert!(matches!(err, LockError::WaitTimeout { .. }), "{err}");
    assert_eq!(value("redlock_lock_wait_timeouts_total", &lock), 1.0);
    guard.release().await.expect("release");
    assert_eq!(
        value(
            "redlock_lock_released_total",
            &[("lock", "mx"), ("how", "release")]
        ),
        1.0
    );
    assert_eq!(value("redlock_lock_hold_seconds_count", &lock), 1.0);
    assert_eq!(
        value(
            "redlock_lock_wait_seconds_count",
            &[("lock", "mx"), ("outcome", "acquired")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "redlock_lock_wait_seconds_count",
            &[("lock", "mx"), ("outcome", "busy")]
        ),
        1.0
    );
    let timeout_sum = value(
        "redlock_lock_wait_seconds_sum",
        &[("lock", "mx"), ("outcome", "timeout")],
    );
    assert!(
        (0.09..5.0).contains(&timeout_sum),
        "the timed-out wait took about 100 ms, recorded {timeout_sum} s"
    );

    // A dropped guard: released from a spawned task, counted as `drop`.
    drop(a.lock("mx:2").acquire().await.expect("acquire"));
    eventually(
        "redlock_lock_released_total",
        &[("lock", "mx"), ("how", "drop")],
        1.0,
    )
    .await;
    assert_eq!(value("redlock_lock_hold_seconds_count", &lock), 2.0);

    // An explicit label, and a lease that runs out without the watchdog.
    let guard = a
        .lock("mx:3")
        .label("expiring")
        .ttl(Duration::from_millis(100))
        .renew(false)
        .acquire()
        .await
        .expect("acquire");
    assert_eq!(guard.lost().await, LostReason::Expired);
    assert_eq!(
        value(
            "redlock_lock_lost_total",
            &[("lock", "expiring"), ("reason", "expired")]
        ),
        1.0
    );
    drop(guard);

    // Renewals failing while Redis is paused: counted, then the lock is
    // presumed lost.
    let guard = a
        .lock("mx:4")
        .ttl(Duration::from_millis(600))
        .acquire()
        .await
        .expect("acquire");
    redis.pause();
    let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost within 5 s of pausing Redis");
    redis.resume();
    assert_eq!(reason, LostReason::Unconfirmed);
    assert!(value("redlock_lock_renew_failures_total", &lock) >= 1.0);
    assert_eq!(
        value(
            "redlock_lock_lost_total",
            &[("lock", "mx"), ("reason", "unconfirmed")]
        ),
        1.0
    );
    drop(guard);

    // An acquire error, by kind.
    let err = a.lock("").acquire().await.expect_err("empty key");
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    assert_eq!(
        value(
            "redlock_lock_acquire_errors_total",
            &[("lock", ""), ("error", "invalid_key")]
        ),
        1.0
    );
}

#[distributed_lock(key = "mjob:<n>", on_busy = "skip", client = locks)]
async fn job(locks: &LockClient, n: u32) -> Option<u32> {
    Some(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attribute_labels_by_key_template_and_a_dead_redis_is_an_error_kind() {
    recorder();
    let mut redis = RedisServer::start().await;
    let locks = LockClient::builder()
        .url(redis.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("connect");
    let template = [("lock", "mjob:<n>"), ("backend", "redis")];
    assert_eq!(job(&locks, 1).await, Some(1));
    assert_eq!(job(&locks, 2).await, Some(2));
    assert_eq!(value("redlock_lock_acquired_total", &template), 2.0);
    assert_eq!(
        value(
            "redlock_lock_released_total",
            &[("lock", "mjob:<n>"), ("how", "release")]
        ),
        2.0
    );
    // Held elsewhere: the call is skipped and counted busy.
    let held = locks.lock("mjob:3").acquire().await.expect("acquire");
    let other = LockClient::connect(redis.url()).await.expect("connect");
    assert_eq!(job(&other, 3).await, None);
    assert_eq!(value("redlock_lock_busy_total", &template), 1.0);
    drop(held);

    redis.kill().await;
    let err = locks
        .lock("dead:1")
        .acquire()
        .await
        .expect_err("Redis is down");
    let kind = ["redis", "timeout", "pool", "connect"]
        .into_iter()
        .find(|kind| {
            value(
                "redlock_lock_acquire_errors_total",
                &[("lock", "dead"), ("error", kind)],
            ) == 1.0
        });
    assert!(
        kind.is_some(),
        "one acquire error counted for `{err}`; rendered:\n{}",
        recorder().render()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_outcomes() {
    use axum::Router;
    use axum::routing::post;
    use http::StatusCode;
    use redlock_axum::IdempotencyLayer;

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
