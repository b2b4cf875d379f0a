//! `LockClient::ping` on every backend: each node of the topology answers
//! with its role and latency; a node that does not answer is named in a
//! typed error, within the command timeout (a paused Redlock node, a
//! killed Redis).

use std::time::Duration;

use redlock_runtime::{ConnectFailure, LockClient, LockError, NodeRole};
use redlock_tests::{Backend, REDLOCK_NODES, RedisServer};
use rstest::rstest;

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn every_node_answers_with_its_role(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let locks = b.client().await;
        let nodes = locks.ping().await.expect("every node answers");
        let (count, role) = match b.backend().topology() {
            Backend::Memory => (1, NodeRole::Memory),
            Backend::Redlock => (REDLOCK_NODES, NodeRole::Primary { replicas: 0 }),
            // 3 masters, no replicas.
            Backend::Cluster => (3, NodeRole::Primary { replicas: 0 }),
            // The primary and its one replica.
            Backend::Sentinel => (1, NodeRole::Primary { replicas: 1 }),
            _ => (1, NodeRole::Primary { replicas: 0 }),
        };
        assert_eq!(nodes.len(), count, "{nodes:?}");
        for node in &nodes {
            assert_eq!(node.role, role, "{node}");
            assert!(node.latency < Duration::from_secs(5), "{node}");
            if b.backend() != Backend::Memory {
                assert!(node.node.starts_with("redis://"), "{node}");
            }
        }
        // Each Redlock node and Cluster master is named once.
        let mut names: Vec<_> = nodes.iter().map(|n| n.node.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "{names:?}");
    });
}

/// A Redlock node that is paused: the ping names it, after no more than
/// the command timeout, and says how many others failed (none).
#[test]
fn a_paused_redlock_node_is_named() {
    Backend::Redlock.run_threaded(|b| async move {
        let locks = b.client().await;
        let paused = &b.servers()[1];
        paused.pause();
        let started = tokio::time::Instant::now();
        let err = locks.ping().await.expect_err("a node is paused");
        let took = started.elapsed();
        paused.resume();
        let LockError::NodeDown { node, others, .. } = &err else {
            panic!("NodeDown: {err:?}");
        };
        assert!(node.contains(&paused.port().to_string()), "{err}");
        assert_eq!(*others, 0, "{err}");
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert!(err.is_transient(), "{err}");
        // It answers again once resumed.
        assert_eq!(locks.ping().await.expect("all answer").len(), REDLOCK_NODES);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_is_gone_is_named_with_why() {
    let mut redis = RedisServer::start().await;
    let locks = LockClient::connect(redis.url())
        .await
        .expect("connect to the test Redis");
    redis.kill().await;
    let err = locks.ping().await.expect_err("Redis is gone");
    let LockError::NodeDown { node, failure, .. } = &err else {
        panic!("NodeDown: {err:?}");
    };
    assert!(node.contains(&redis.port().to_string()), "{err}");
    assert!(
        matches!(
            failure,
            ConnectFailure::Refused | ConnectFailure::Other | ConnectFailure::Timeout
        ),
        "{err}"
    );
    let shown = err.to_string();
    assert!(shown.contains("did not answer the ping"), "{shown}");
}
