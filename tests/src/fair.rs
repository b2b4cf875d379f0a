//! Fair-mode helpers shared by the suites: a waiter on its own client, and
//! waiting until a key's line holds so many waiters.

use std::time::Duration;

use redis::AsyncCommands;
use redlock_runtime::{LockClient, LockError, LockGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A fair waiter on its own client (its own "node"), waiting up to `wait`.
pub fn fair_waiter(
    client: LockClient,
    key: &'static str,
    wait: Duration,
) -> JoinHandle<Result<LockGuard, LockError>> {
    tokio::spawn(async move { client.lock(key).fair().wait(wait).acquire().await })
}

/// Waits (bounded, 5 s) until `n` waiters are in the fair line of `key`
/// (default prefix) on the Redis at `url`.
///
/// # Panics
/// When the line does not reach `n` within 5 s.
pub async fn wait_for_fair_waiters(url: &str, key: &str, n: usize) {
    let mut redis = crate::raw_connection(url).await;
    let queue = format!("lock:{{{key}}}:queue");
    let started = Instant::now();
    loop {
        let len: usize = redis.llen(&queue).await.expect("LLEN");
        if len == n {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "expected {n} queued waiters for {key}, found {len}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
