//! Plain redis-rs connections, for tests that look at Redis directly.

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// A plain connection to the Redis at `url` (no lock client in between).
///
/// # Panics
/// When the URL is bad or Redis does not answer.
pub async fn raw_connection(url: impl AsRef<str>) -> MultiplexedConnection {
    let url = url.as_ref();
    redis::Client::open(url)
        .unwrap_or_else(|e| panic!("bad Redis URL {url}: {e}"))
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("no raw connection to the test Redis at {url}: {e}"))
}

/// Whether `key` exists on the Redis at `url`.
///
/// # Panics
/// When Redis cannot be reached.
pub async fn key_exists(url: impl AsRef<str>, key: &str) -> bool {
    let mut conn = raw_connection(url).await;
    conn.exists(key).await.expect("EXISTS")
}
