//! Self-tests for the cluster harness, on real processes: the cluster forms, a moved
//! slot takes its keys along (MOVED, and ASK half-way), and a replica takes over (also
//! when Redis gave up on the first request for it).
//!
//! Clients here are plain connections that follow redirects by hand, so each test
//! sees exactly which node answers what.

use redis::RedisError;
use redis::aio::MultiplexedConnection;
use redlock_tests::{RedisCluster, raw_connection};

/// The node a MOVED or ASK error points to, as a URL, with the error's code.
fn redirect(err: &RedisError) -> Option<(String, String)> {
    let code = err.code()?.to_owned();
    let (addr, _slot) = err.redirect_node()?;
    Some((code, format!("redis://{addr}")))
}

async fn get(url: &str, key: &str) -> Result<Option<String>, RedisError> {
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut raw_connection(url).await)
        .await
}

/// SET through the cluster, as a cluster client does: any node, then follow MOVED.
async fn cluster_set(cluster: &RedisCluster, key: &str, value: &str) {
    let mut url = cluster.urls()[0].clone();
    for _ in 0..3 {
        let mut conn: MultiplexedConnection = raw_connection(&url).await;
        match redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async::<()>(&mut conn)
            .await
        {
            Ok(()) => return,
            Err(e) => match redirect(&e) {
                Some((code, to)) if code == "MOVED" => url = to,
                _ => panic!("SET {key} on {url}: {e}"),
            },
        }
    }
    panic!("SET {key}: more than 3 redirects");
}

/// GET through the cluster: any node, then follow MOVED (not ASK: see the ASK test).
async fn cluster_get(cluster: &RedisCluster, key: &str) -> Option<String> {
    let mut url = cluster.urls()[0].clone();
    for _ in 0..3 {
        match get(&url, key).await {
            Ok(value) => return value,
            Err(e) => match redirect(&e) {
                Some((code, to)) if code == "MOVED" => url = to,
                _ => panic!("GET {key} on {url}: {e}"),
            },
        }
    }
    panic!("GET {key}: more than 3 redirects");
}

#[tokio::test]
async fn three_masters_come_up_ok_and_cover_every_slot() {
    let cluster = RedisCluster::start(3, 0).await;
    assert_eq!(cluster.nodes().len(), 3);
    assert_eq!(cluster.master_indices().await, vec![0, 1, 2]);
    assert_eq!(cluster.master_urls().await, cluster.urls());
    for url in cluster.urls() {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut raw_connection(&url).await)
            .await
            .expect("CLUSTER INFO");
        assert!(info.contains("cluster_state:ok"), "{url}: {info}");
        assert!(info.contains("cluster_slots_ok:16384"), "{url}: {info}");
        assert!(info.contains("cluster_known_nodes:3"), "{url}: {info}");
    }
    // The standard split: node 0 serves slot 0, node 2 the last slot.
    assert_eq!(cluster.master_of_slot(0).await, 0);
    assert_eq!(cluster.master_of_slot(16383).await, 2);
    // CRC16 of "foo" (the Cluster specification's example), and hash tags.
    assert_eq!(cluster.slot_of("foo").await, 12182);
    assert_eq!(
        cluster.slot_of("lock:{foo}").await,
        cluster.slot_of("{foo}:fence").await
    );
}

#[tokio::test]
async fn a_migrated_slot_takes_its_key_along_and_the_old_owner_answers_moved() {
    let cluster = RedisCluster::start(3, 0).await;
    let key = "harness:{migrate}";
    cluster_set(&cluster, key, "v1").await;
    let slot = cluster.slot_of(key).await;
    let from = cluster.master_of_slot(slot).await;
    let to = (from + 1) % 3;

    cluster.migrate_slot(slot, to).await;

    assert_eq!(cluster.master_of_slot(slot).await, to);
    let old_url = cluster.node(from).url();
    let err = get(&old_url, key)
        .await
        .expect_err("the old owner must redirect");
    assert_eq!(
        redirect(&err),
        Some(("MOVED".to_owned(), cluster.node(to).url())),
        "{err}"
    );
    assert_eq!(
        get(&cluster.node(to).url(), key).await.expect("GET"),
        Some("v1".to_owned())
    );
    assert_eq!(cluster_get(&cluster, key).await, Some("v1".to_owned()));
    // Every node agrees, and the cluster is still ok.
    cluster.wait_ok().await;
    // Moving to the owner is a no-op.
    cluster.migrate_slot(slot, to).await;
}

#[tokio::test]
async fn a_slot_left_mid_migration_answers_ask_for_moved_keys() {
    let cluster = RedisCluster::start(3, 0).await;
    let moved = "harness:{ask}:moved";
    let stays = "harness:{ask}:stays";
    cluster_set(&cluster, moved, "m").await;
    cluster_set(&cluster, stays, "s").await;
    let slot = cluster.slot_of(moved).await;
    let from = cluster.master_of_slot(slot).await;
    let to = (from + 2) % 3;
    let (from_url, to_url) = (cluster.node(from).url(), cluster.node(to).url());

    let migration = cluster.begin_migration(slot, to).await;
    assert_eq!(
        (migration.slot(), migration.from(), migration.to()),
        (slot, from, to)
    );
    migration.move_key(&cluster, moved).await;

    // The source still serves what it has, and sends the rest with ASK.
    assert_eq!(
        get(&from_url, stays).await.expect("GET"),
        Some("s".to_owned())
    );
    let err = get(&from_url, moved).await.expect_err("the key has left");
    assert_eq!(
        redirect(&err),
        Some(("ASK".to_owned(), to_url.clone())),
        "{err}"
    );
    // The destination answers only after ASKING; otherwise it sends MOVED back.
    let err = get(&to_url, moved).await.expect_err("not without ASKING");
    assert_eq!(
        redirect(&err),
        Some(("MOVED".to_owned(), from_url.clone())),
        "{err}"
    );
    let mut conn = raw_connection(&to_url).await;
    let ((), value): ((), Option<String>) = redis::pipe()
        .cmd("ASKING")
        .cmd("GET")
        .arg(moved)
        .query_async(&mut conn)
        .await
        .expect("ASKING + GET");
    assert_eq!(value, Some("m".to_owned()));
    assert_eq!(cluster.master_of_slot(slot).await, from, "not moved yet");

    migration.finish(&cluster).await;
    assert_eq!(cluster.master_of_slot(slot).await, to);
    assert_eq!(cluster_get(&cluster, moved).await, Some("m".to_owned()));
    assert_eq!(cluster_get(&cluster, stays).await, Some("s".to_owned()));
    cluster.wait_ok().await;
}

/// The node that replicates node `master` (its `INFO replication` names the master's
/// port).
async fn replica_of(cluster: &RedisCluster, master: usize) -> usize {
    let master_port = format!("master_port:{}", cluster.node(master).port());
    let mut replica = None;
    for (i, node) in cluster.nodes().iter().enumerate() {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut raw_connection(node.url()).await)
            .await
            .expect("INFO");
        if info.lines().any(|l| l.trim() == master_port) {
            replica = Some(i);
        }
    }
    replica.expect("the master has a replica")
}

#[tokio::test]
async fn a_replica_takes_over_its_masters_slots_with_failover() {
    let cluster = RedisCluster::start(3, 1).await;
    assert_eq!(cluster.master_indices().await.len(), 3);
    let key = "harness:{failover}";
    cluster_set(&cluster, key, "kept").await;
    let slot = cluster.slot_of(key).await;
    let master = cluster.master_of_slot(slot).await;
    // Wait until the replica has the write, then find it.
    let mut conn = raw_connection(cluster.node(master).url()).await;
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut conn)
        .await
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica did not acknowledge the write");
    let replica = replica_of(&cluster, master).await;

    cluster.failover(replica).await;

    assert_eq!(cluster.master_of_slot(slot).await, replica);
    assert!(!cluster.master_indices().await.contains(&master));
    assert_eq!(cluster_get(&cluster, key).await, Some("kept".to_owned()));
    let err = get(&cluster.node(master).url(), key)
        .await
        .expect_err("the old master is a replica now");
    assert_eq!(
        redirect(&err),
        Some(("MOVED".to_owned(), cluster.node(replica).url())),
        "{err}"
    );
}

#[tokio::test]
async fn a_killed_master_is_replaced_and_rejoins_as_a_replica() {
    let mut cluster = RedisCluster::start(3, 1).await;
    let slot = cluster.slot_of("harness:{crash}").await;
    let master = cluster.master_of_slot(slot).await;

    cluster.node_mut(master).kill().await;
    // Its replica takes over after the node timeout (1 s); the dead node is left out.
    cluster.wait_ok().await;
    let successor = cluster.master_of_slot(slot).await;
    assert_ne!(successor, master);

    // Restarted with its nodes.conf, it rejoins and follows its successor.
    cluster.node_mut(master).restart_keeping_data().await;
    cluster.wait_ok().await;
    assert_eq!(cluster.master_of_slot(slot).await, successor);
    assert!(!cluster.master_indices().await.contains(&master));
}

#[tokio::test]
async fn a_manual_failover_that_redis_gave_up_on_is_asked_for_again() {
    // A long node timeout: the master's pause below must not set off an automatic
    // failover, which would promote the replica without a second request.
    let cluster = RedisCluster::start_with_args(3, 1, &["--cluster-node-timeout", "60000"]).await;
    let slot = cluster.slot_of("harness:{again}").await;
    let master = cluster.master_of_slot(slot).await;
    let replica = replica_of(&cluster, master).await;

    // The master sleeps through the first request, so the replica gives it up (after
    // Redis's 5 s); the master wakes once the replica says so, and only a second
    // request can promote the replica.
    cluster.node(master).pause();
    let log = cluster.node(replica).log_path();
    let resume = async {
        let gave_up = async {
            while !std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("Manual failover timed out")
            {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        };
        let waited = tokio::time::timeout(std::time::Duration::from_secs(20), gave_up).await;
        cluster.node(master).resume();
        waited
    };
    let ((), gave_up) = tokio::join!(cluster.failover(replica), resume);
    assert!(
        gave_up.is_ok(),
        "the replica never gave up the first request, so the second was not tested\n{}",
        cluster.logs()
    );
    assert_eq!(cluster.master_of_slot(slot).await, replica);
    assert!(!cluster.master_indices().await.contains(&master));
}
