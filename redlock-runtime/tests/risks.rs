//! The risks the hostile review found by reading (issue 12), each checked
//! on a real Redis:
//! - a Redis that refuses for now (`BUSY` with a slow script) is retried
//!   within the wait, not reported at once;
//! - a `maxmemory-policy` that may evict lock keys is warned about, or
//!   refused on request;
//! - a watchdog renewal never shortens a lease a manual extend set;
//! - a fair waiter is woken by name when a minimum hold ends.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::{ConfigError, LockClient, LockError, RetryPolicy};
use redlock_tests::{LogCapture, RedisServer, raw_connection};

/// A script that keeps Redis busy for `ms` milliseconds.
const SPIN: &str = r"
local t = redis.call('TIME')
local start = tonumber(t[1]) * 1000000 + tonumber(t[2])
while true do
  t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) - start > tonumber(ARGV[1]) * 1000 then break end
end
return 1
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_waits_through_a_busy_script() {
    let server = RedisServer::start_with_args(&["--busy-reply-threshold", "100"]).await;
    let locks = LockClient::connect(server.url()).await.expect("connect");
    let mut spinner = raw_connection(server.url()).await;
    let busy = tokio::spawn(async move {
        // Its answer may come after the connection's own response timeout;
        // that Redis ran it shows in the BUSY answers below.
        let _: redis::RedisResult<i64> = redis::cmd("EVAL")
            .arg(SPIN)
            .arg(0)
            .arg(1500)
            .query_async(&mut spinner)
            .await;
    });
    // Redis answers BUSY once the script has run past the threshold.
    let mut probe = raw_connection(server.url()).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let reply: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut probe).await;
        if reply.as_ref().is_err_and(|e| e.code() == Some("BUSY")) {
            break;
        }
        assert!(Instant::now() < deadline, "Redis never got busy: {reply:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = locks
        .lock("report")
        .acquire()
        .await
        .expect_err("busy, no wait");
    assert!(err.is_transient() && !err.is_busy(), "{err}");
    let guard = locks
        .lock("report")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("retried until the script ended");
    guard.release().await.expect("release");
    busy.await.expect("spinner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicting_memory_policy_is_warned_about_or_refused() {
    let (logs, _guard) = LogCapture::start();
    let evicting = RedisServer::start_with_args(&[
        "--maxmemory",
        "100mb",
        "--maxmemory-policy",
        "volatile-lru",
    ])
    .await;
    let fine = RedisServer::start().await;

    LockClient::connect(fine.url()).await.expect("connect");
    assert!(!logs.text().contains("evict"), "{}", logs.text());

    LockClient::connect(evicting.url())
        .await
        .expect("a warning only");
    let text = logs.text();
    assert!(
        text.contains("WARN") && text.contains("maxmemory-policy volatile-lru"),
        "{text}"
    );
    let err = LockClient::builder()
        .url(evicting.url())
        .require_noeviction(true)
        .build()
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, LockError::Config(ConfigError::EvictingPolicy { policy, .. }) if policy == "volatile-lru"),
        "{err}"
    );
    assert!(
        err.to_string().contains("maxmemory-policy noeviction"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_never_shortens_a_longer_lease() {
    let server = RedisServer::start().await;
    let locks = LockClient::connect(server.url()).await.expect("connect");
    let guard = locks
        .lock("lease")
        .ttl(Duration::from_millis(900))
        .acquire()
        .await
        .expect("acquire");
    // A manual extend on another connection that landed before a renewal
    // still on its way: the lease is longer than the renewal's ttl.
    let mut conn = raw_connection(server.url()).await;
    let _: bool = conn.pexpire("lock:{lease}", 20_000).await.expect("PEXPIRE");
    let before = redlock_runtime::test_util::renewal_round_trips(&locks);
    let deadline = Instant::now() + Duration::from_secs(5);
    while redlock_runtime::test_util::renewal_round_trips(&locks) < before + 2 {
        assert!(Instant::now() < deadline, "no renewal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pttl: i64 = conn.pttl("lock:{lease}").await.expect("PTTL");
    assert!(pttl > 18_000, "a renewal shortened the lease to {pttl} ms");
    assert!(guard.is_held() && guard.remaining() <= Duration::from_millis(900));
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_is_woken_by_name_when_a_minimum_hold_ends() {
    let server = RedisServer::start().await;
    // Slow polling: only a wake-up gets the waiter in quickly.
    let slow_poll = || {
        LockClient::builder()
            .url(server.url())
            .retry(RetryPolicy::new(
                Duration::from_secs(3),
                Duration::from_secs(3),
            ))
            .build()
    };
    let (holder, waiter) = (
        slow_poll().await.expect("holder"),
        slow_poll().await.expect("waiter"),
    );
    let guard = holder
        .lock("job")
        .fair()
        .hold_at_least(Duration::from_millis(300))
        .acquire()
        .await
        .expect("holder");
    let waiting = tokio::spawn(async move {
        let guard = waiter
            .lock("job")
            .fair()
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .expect("waiter");
        (Instant::now(), guard)
    });
    tokio::time::sleep(Duration::from_millis(500)).await; // the hold is over
    guard
        .release()
        .await
        .expect("release deletes: the hold ended");
    let released = Instant::now();
    let (got, guard) = waiting.await.expect("waiter task");
    let after = got.saturating_duration_since(released);
    assert!(
        after < Duration::from_millis(1500),
        "woken {after:?} after the release"
    );
    guard.release().await.expect("release");
}
