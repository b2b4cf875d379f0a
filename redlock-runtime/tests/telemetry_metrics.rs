//! The `metrics` feature against a real Redis: every counter and histogram
//! the runtime documents, read back from a Prometheus recorder installed
//! for this test binary (the idempotency layer's: redlock-axum's
//! `tests/telemetry_metrics.rs`).
//!
//! The recorder is global, so each test uses its own `lock` labels.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redlock_runtime::{LockClient, LockError, LostReason, distributed_lock};
use redlock_tests::{RedisServer, series_value};

fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .install_recorder()
            .expect("install the Prometheus recorder")
    })
}

/// The value of the series `name{labels..}` (0 when absent).
fn value(name: &str, labels: &[(&str, &str)]) -> f64 {
    series_value(&recorder().render(), name, labels)
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

    // The key deleted and taken by another owner before the next renewal:
    // counted under the reason the client read (issue 32).
    let guard = a
        .lock("mx:5")
        .ttl(Duration::from_secs(3))
        .acquire()
        .await
        .expect("acquire");
    let mut raw = redlock_tests::raw_connection(redis.url()).await;
    let _: i64 = redis::cmd("DEL")
        .arg("lock:{mx:5}")
        .query_async(&mut raw)
        .await
        .expect("DEL");
    let taker = b.lock("mx:5").acquire().await.expect("free after the DEL");
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("lost by the next renewal");
    assert_eq!(reason, LostReason::TakenOver);
    assert_eq!(
        value(
            "redlock_lock_lost_total",
            &[("lock", "mx"), ("reason", "taken_over")]
        ),
        1.0
    );
    drop((guard, taker));

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
    let kind = ["redis", "timeout", "pool", "connection"]
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
