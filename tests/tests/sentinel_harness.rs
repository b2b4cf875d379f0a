//! Self-tests for the Sentinel harness, on real processes: three Sentinels follow a
//! forced failover, and elect the replica when the primary is killed.

use std::time::Duration;

use redis::RedisError;
use redlock_tests::{SentinelSet, raw_connection};

async fn get(url: &str, key: &str) -> Result<Option<String>, RedisError> {
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut raw_connection(url).await)
        .await
}

#[tokio::test]
async fn sentinels_follow_a_forced_failover_to_the_replica() {
    let mut set = SentinelSet::start(1).await;
    assert_eq!(set.sentinel_urls().len(), 3);
    assert_eq!(set.master_name(), "mymaster");
    let old = set.current_primary_addr().await;
    assert_eq!(old, set.primary().addr());
    let replica = set.replicas()[0].addr();
    let mut conn = raw_connection(set.primary().url()).await;
    let () = redis::cmd("SET")
        .arg("harness:sentinel")
        .arg("kept")
        .query_async(&mut conn)
        .await
        .expect("SET");
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut conn)
        .await
        .expect("WAIT");

    let new = set.failover().await;

    assert_ne!(new, old);
    assert_eq!(new, replica);
    assert_eq!(set.primary().addr(), new);
    assert_eq!(set.current_primary_addr().await, new);
    for url in set.sentinel_urls() {
        let (host, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg("mymaster")
            .query_async(&mut raw_connection(&url).await)
            .await
            .expect("SENTINEL GET-MASTER-ADDR-BY-NAME");
        assert_eq!(format!("{host}:{port}"), new.to_string(), "{url}");
    }
    assert_eq!(
        get(&set.primary().url(), "harness:sentinel")
            .await
            .expect("GET"),
        Some("kept".to_owned())
    );
}

#[tokio::test]
async fn sentinels_elect_the_replica_when_the_primary_is_killed() {
    let mut set = SentinelSet::start(1).await;
    let replica = set.replicas()[0].addr();
    let started = tokio::time::Instant::now();

    let old = set.kill_primary().await;
    let new = set.wait_for_failover(old).await;

    assert_eq!(new, replica);
    assert!(
        started.elapsed() > Duration::from_millis(900),
        "the primary was declared down before down-after-milliseconds"
    );
    let role: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut raw_connection(set.primary().url()).await)
        .await
        .expect("INFO");
    assert!(role.contains("role:master"), "{role}");
}
