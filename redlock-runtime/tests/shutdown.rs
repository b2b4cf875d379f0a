//! `LockClient::shutdown`: a graceful end on every backend (in memory,
//! one Redis, Redlock, Redis Cluster, Sentinel). What the client holds is
//! released (another client takes it at once), its guards say so, a body
//! run under a lock is cancelled, a waiting acquire gives up, and every
//! later call fails with `LockError::ShutDown`. With the store paused, the
//! shutdown still ends within its timeout and says what it left.

use std::future::pending;
use std::time::Duration;

use redlock_runtime::{LockError, LostReason};
use redlock_tests::{Backend, RedisServer};
use rstest::rstest;

/// Far above what any step takes on a loaded machine: a step that hangs
/// fails the test instead of hanging it.
const BOUND: Duration = Duration::from_secs(10);

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
fn shutdown_releases_what_the_client_holds_and_refuses_what_comes_after(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let locks = b.client().await;
        // Another process (the in-memory backend has one process's store,
        // whose clients share this one's books: no other).
        let other = match b.backend().topology() {
            Backend::Memory => None,
            _ => Some(b.client().await),
        };
        let ttl = Duration::from_secs(30);
        let guard = locks
            .lock("sd:lock")
            .ttl(ttl)
            .acquire()
            .await
            .expect("lock");
        let lost = guard.lost();
        let permits = if b.backend().topology() == Backend::Redlock {
            None // a Redlock client takes locks only
        } else {
            let jobs = locks.semaphore("sd:jobs", 2);
            Some(jobs.permits(2).ttl(ttl).acquire().await.expect("permits"))
        };
        // A body run under a lock, which never ends by itself.
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let body = tokio::spawn({
            let locks = locks.clone();
            async move {
                locks
                    .lock("sd:run")
                    .ttl(ttl)
                    .run(async move {
                        let _ = started_tx.send(());
                        pending::<()>().await;
                    })
                    .await
            }
        });
        tokio::time::timeout(BOUND, started)
            .await
            .expect("the body started in time")
            .expect("the body started");
        // An acquire waiting for a lock this client holds.
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move { locks.lock("sd:lock").wait(ttl).acquire().await }
        });
        // Let the waiter make its first attempt and start waiting.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "the waiter waits");

        let report = tokio::time::timeout(BOUND, locks.shutdown(Duration::from_secs(5)))
            .await
            .expect("the shutdown ends within its timeout");
        let mut released = report.released.clone();
        released.sort();
        let mut expected = vec!["sd:lock", "sd:run"];
        if permits.is_some() {
            expected.insert(0, "sd:jobs");
        }
        assert_eq!(released, expected, "{report}");
        assert!(report.is_complete(), "{report}");
        assert!(
            report.left.is_empty() && report.already_over.is_empty(),
            "{report}"
        );

        // The guard says so, and its lost() completed with why.
        assert!(!guard.is_held());
        let reason = tokio::time::timeout(BOUND, lost)
            .await
            .expect("lost() completes");
        assert_eq!(reason, LostReason::ClientShutDown);
        // The body was cancelled, the waiter gave up: both say why.
        let ran = tokio::time::timeout(BOUND, body)
            .await
            .expect("body ends")
            .expect("task");
        assert!(
            matches!(
                ran,
                Err(LockError::Lost {
                    reason: LostReason::ClientShutDown,
                    ..
                })
            ),
            "{ran:?}"
        );
        let waited = tokio::time::timeout(BOUND, waiter)
            .await
            .expect("waiter ends")
            .expect("task");
        assert!(
            matches!(waited, Err(LockError::ShutDown { .. })),
            "{waited:?}"
        );

        // Another client takes every name at once, not after the leases.
        if let Some(other) = &other {
            for key in ["sd:lock", "sd:run"] {
                let taken = other.lock(key).try_acquire().await.expect("try");
                assert!(taken.is_some(), "{key} is free after the shutdown");
            }
            if permits.is_some() {
                let jobs = other.semaphore("sd:jobs", 2);
                assert_eq!(jobs.available().await.expect("available"), 2);
            }
        }

        // Everything later is refused, typed; the guards' ends say why.
        let later = locks.lock("sd:new").acquire().await;
        assert!(
            matches!(later, Err(LockError::ShutDown { ref key }) if key == "sd:new"),
            "{later:?}"
        );
        let shown = later.expect_err("refused").to_string();
        assert!(shown.contains("shut down"), "{shown}");
        assert!(matches!(
            locks.inspect("sd:lock").await,
            Err(LockError::ShutDown { .. })
        ));
        // Not ready any more: a readiness probe's ping fails, saying why.
        let ping = locks.ping().await;
        let Err(LockError::ShutDown { ref key }) = ping else {
            panic!("a ping after the shutdown: {ping:?}");
        };
        assert!(key.is_empty(), "{key}");
        let shown = ping.expect_err("refused").to_string();
        assert!(
            shown.contains("shut down") && shown.contains("not ready"),
            "{shown}"
        );
        let released = guard.release().await;
        assert!(
            matches!(
                released,
                Err(LockError::Lost {
                    reason: LostReason::ClientShutDown,
                    ..
                })
            ),
            "{released:?}"
        );
        if let Some(permits) = permits {
            assert!(permits.release().await.is_err());
        }
        assert!(locks.held().is_empty(), "{:?}", locks.held());
        // Once more: nothing left to release.
        let again = locks.shutdown(Duration::from_secs(1)).await;
        assert!(again.released.is_empty() && again.is_complete(), "{again}");
    });
}

/// With its Redis paused, a shutdown ends at its timeout (not a command
/// timeout per lease, nor the leases' end), and says which lease it left;
/// the lease then runs out by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_with_redis_paused_ends_at_its_timeout_and_says_what_it_left() {
    let redis = RedisServer::start().await;
    let locks = redlock_runtime::LockClient::connect(redis.url())
        .await
        .expect("connect to the test Redis");
    let guard = locks
        .lock("sd:paused")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .expect("lock");
    redis.pause();
    let timeout = Duration::from_secs(2);
    let started = tokio::time::Instant::now();
    let report = tokio::time::timeout(BOUND, locks.shutdown(timeout))
        .await
        .expect("bounded by its timeout");
    let took = started.elapsed();
    redis.resume();
    assert!(took >= timeout - Duration::from_millis(500), "{took:?}");
    assert!(took < timeout + Duration::from_secs(3), "{took:?}");
    assert_eq!(report.left, ["sd:paused"], "{report}");
    assert!(!report.is_complete());
    assert!(report.to_string().contains("sd:paused"), "{report}");
    // The guard no longer claims the lock: the shutdown ended it.
    assert!(!guard.is_held());
}
