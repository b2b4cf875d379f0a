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

/// Starts a replica of `primary` (the same program: Redis or Valkey) and
/// returns once it has loaded the primary's data and follows its writes:
/// it says its link is up with no sync in progress, and a write made after
/// that, followed by `WAIT 1`, is acknowledged.
///
/// The replica's own word is needed: a Valkey 9 replica acknowledges the
/// offset of its full sync before it has loaded the data (a bio thread
/// downloads it, the main thread notices on its next tick, up to a second
/// later), so a `WAIT` alone can succeed for a write the snapshot held,
/// and the next writes then wait that long for their acknowledgement.
///
/// # Panics
/// When the replica does not follow the primary within 10 s.
pub async fn start_replica(primary: &crate::RedisServer) -> crate::RedisServer {
    let replica = crate::RedisServer::start_on(
        primary.server(),
        &["--replicaof", "127.0.0.1", &primary.port().to_string()],
    )
    .await;
    let mut conn = raw_connection(primary.url()).await;
    let mut on_replica = raw_connection(replica.url()).await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut on_replica)
            .await
            .expect("INFO replication on the replica");
        let following =
            info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0");
        let _: () = conn.set("replica-sync-probe", 1).await.expect("SET");
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(100)
            .query_async(&mut conn)
            .await
            .expect("WAIT");
        if following && acked == 1 {
            let _: () = conn.del("replica-sync-probe").await.expect("DEL");
            return replica;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replica on port {} never acknowledged a write",
            replica.port()
        );
    }
}

/// Makes the Redis at `url` require `password` (`CONFIG SET requirepass`,
/// after the start: the harness sees a server is up with a plain `PING`).
///
/// # Panics
/// When Redis cannot be reached or refuses the setting.
pub async fn require_password(url: impl AsRef<str>, password: &str) {
    let mut conn = raw_connection(url).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(password)
        .query_async(&mut conn)
        .await
        .expect("CONFIG SET requirepass");
}
