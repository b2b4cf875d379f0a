//! Scoped execution (`run`, `try_run`, `current_lock`): the lock held for
//! the body, reentrancy, cancel-on-loss and the minimum hold of scheduler
//! jobs, each scenario run over every backend where it behaves the same
//! (in memory, one Redis, Redlock); a lock deleted in Redis is Redis only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use redlock_runtime::{LockClient, LockError, LostReason, OnLost, current_lock};
use redlock_tests::{Backend, RedisServer};
use rstest::rstest;
use tokio::time::Instant;

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn run_holds_the_lock_for_the_body_and_releases_after(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let other = client.clone();
        let value = client
            .lock("r")
            .run(async {
                let held = current_lock().expect("in scope");
                assert_eq!((held.key(), held.depth()), ("r", 1));
                assert!(held.is_held());
                // Another task is another owner: it finds the lock busy.
                let busy = tokio::spawn(async move { other.lock("r").try_acquire().await })
                    .await
                    .expect("task")
                    .expect("no error");
                assert!(busy.is_none());
                held.fencing_token().await.expect("fencing token")
            })
            .await
            .expect("run");
        // In memory on tokio's paused clock the store's fencing clock stands
        // still at its start, so the first token is the counter's 1; Redis's
        // starts from its clock.
        if b.backend() == Backend::Memory {
            assert_eq!(value, 1);
        } else {
            assert!(value > 0);
        }
        assert!(current_lock().is_none());
        client
            .lock("r")
            .acquire()
            .await
            .expect("released after the body");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn nested_scopes_on_one_key_reenter_and_release_at_the_outer_end(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let depth = client
            .lock("n")
            .run(async {
                let outer = current_lock()
                    .expect("outer")
                    .fencing_token()
                    .await
                    .expect("fencing token");
                let inner = client
                    .lock("n")
                    .run(async {
                        let inner = current_lock().expect("inner");
                        assert_eq!(
                            inner.fencing_token().await.expect("fencing token"),
                            outer,
                            "same acquisition"
                        );
                        // A reentrant guard: releasing it leaves the lock alone.
                        let g = client.lock("n").acquire().await.expect("reenter");
                        assert!(g.is_reentrant());
                        g.release().await.expect("no-op");
                        inner.depth()
                    })
                    .await
                    .expect("inner run");
                // Still held after the inner scope ended.
                assert!(
                    client
                        .lock("n")
                        .try_acquire()
                        .await
                        .expect("ok")
                        .is_some_and(|g| g.is_reentrant())
                );
                inner
            })
            .await
            .expect("outer run");
        assert_eq!(depth, 2);
        let g = client
            .lock("n")
            .acquire()
            .await
            .expect("released by the outer scope");
        assert!(!g.is_reentrant());
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
fn nested_scopes_complete_in_one_task_while_another_task_waits(#[case] backend: Backend) {
    backend.run(|b| async move {
        let locks = b.client().await;
        let (inside_tx, inside_rx) = tokio::sync::oneshot::channel();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let outer = tokio::spawn({
            let locks = locks.clone();
            async move {
                locks
                    .lock("account:1")
                    .run(async {
                        // A locked method calling another locked method on the key.
                        let depth = locks
                            .lock("account:1")
                            .run(async {
                                locks
                                    .lock("account:1")
                                    .run(async { current_lock().expect("scope").depth() })
                                    .await
                            })
                            .await
                            .expect("second level")
                            .expect("third level");
                        inside_tx.send(depth).expect("test listens");
                        go_rx.await.expect("test says go");
                    })
                    .await
            }
        });
        assert_eq!(inside_rx.await.expect("nested scopes ran"), 3);
        // Another task (same client) is another owner: it waits.
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move {
                let started = Instant::now();
                let guard = locks
                    .lock("account:1")
                    .wait(Duration::from_secs(5))
                    .acquire()
                    .await
                    .expect("acquires once the outer scope ends");
                (started.elapsed(), guard.is_reentrant())
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "the other task must wait");
        go_tx.send(()).expect("outer scope listens");
        outer.await.expect("task").expect("outer run");
        let (waited, reentrant) = waiter.await.expect("waiter");
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(!reentrant);
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn a_busy_run_is_an_error_and_try_run_skips_the_body(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let _held = client.lock("j").acquire().await.expect("holder");
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let skipped = client
            .lock("j")
            .try_run(async move { flag.store(true, Ordering::SeqCst) })
            .await
            .expect("busy is not an error");
        assert!(skipped.is_none());
        assert!(!ran.load(Ordering::SeqCst), "the body must not run");
        let err = client.lock("j").run(async {}).await.expect_err("busy");
        assert!(matches!(err, LockError::Busy { .. }), "{err}");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn a_lost_lock_cancels_the_body(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let reached_end = Arc::new(AtomicBool::new(false));
        let flag = reached_end.clone();
        let ttl = Duration::from_millis(400);
        let started = Instant::now();
        let err = client
            .lock("c")
            .ttl(ttl)
            .renew(false)
            .run(async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                flag.store(true, Ordering::SeqCst);
            })
            .await
            .expect_err("lost");
        assert!(
            matches!(
                err,
                LockError::Lost {
                    reason: LostReason::Expired,
                    ..
                }
            ),
            "{err}"
        );
        let took = started.elapsed();
        assert!(
            took <= ttl + b.slack() && took + b.slack() >= ttl,
            "{}: cancelled {took:?} after the start, not at the loss ({ttl:?})",
            b.name()
        );
        assert!(!reached_end.load(Ordering::SeqCst));
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn with_on_lost_signal_the_body_runs_on_and_sees_the_loss(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let saw = client
            .lock("s")
            .ttl(Duration::from_millis(400))
            .renew(false)
            .on_lost(OnLost::Signal)
            .run(async {
                let held = current_lock().expect("scope");
                let reason = held.lost().await;
                (reason, held.is_held())
            })
            .await
            .expect("signal mode returns the body's value");
        assert_eq!(saw, (LostReason::Expired, false));
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn hold_at_least_keeps_other_nodes_out_for_the_minimum(#[case] backend: Backend) {
    backend.run(|b| async move {
        let node_a = b.client().await;
        let node_b = b.client().await;
        let hold = Duration::from_secs(2);
        let started = Instant::now();
        let ran = node_a
            .lock("job:report")
            .hold_at_least(hold)
            .try_run(tokio::time::sleep(Duration::from_millis(10)))
            .await
            .expect("no error");
        assert!(ran.is_some(), "node A runs the job");
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "the job itself is short"
        );
        assert_eq!(
            node_a.held_locks(),
            0,
            "node A no longer holds or renews it"
        );
        // Node B's tick finds it taken while the minimum hold lasts.
        assert!(
            node_b
                .lock("job:report")
                .try_run(async {})
                .await
                .expect("ok")
                .is_none()
        );
        let guard = node_b
            .lock("job:report")
            .wait(Duration::from_secs(5))
            .acquire()
            .await
            .expect("free after the minimum hold");
        let free_after = started.elapsed();
        // Memory: exact (the paused clock) up to the waiter's wake-up; Redis:
        // the lease began on Redis, within a round trip of `started`.
        let (early, late) = if b.backend() == Backend::Memory {
            (Duration::ZERO, Duration::from_millis(50))
        } else {
            (b.slack() * 2, b.slack() * 2)
        };
        assert!(
            free_after + early >= hold && free_after <= hold + late,
            "{}: released {free_after:?} after the acquire; minimum hold {hold:?}",
            b.name()
        );
        guard.release().await.expect("release");

        // A job longer than its minimum hold releases at once.
        node_a
            .lock("h2")
            .hold_at_least(Duration::from_millis(100))
            .run(tokio::time::sleep(Duration::from_millis(300)))
            .await
            .expect("run");
        node_b
            .lock("h2")
            .acquire()
            .await
            .expect("deleted at the end");
    });
}

#[tokio::test]
async fn a_deleted_lock_cancels_the_body_within_ttl() {
    let server = RedisServer::start().await;
    let locks = LockClient::connect(server.url())
        .await
        .expect("connect to the test Redis");
    let mut redis = redlock_tests::raw_connection(server.url()).await;
    let ttl = Duration::from_millis(900);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let finished = Arc::new(AtomicBool::new(false));
    let flag = finished.clone();
    let run = tokio::spawn({
        let locks = locks.clone();
        async move {
            locks
                .lock("cancel-me")
                .ttl(ttl)
                .run(async move {
                    started_tx.send(()).expect("test listens");
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    flag.store(true, Ordering::SeqCst);
                })
                .await
        }
    });
    started_rx.await.expect("body started");
    let _: () = redis.del("lock:{cancel-me}").await.expect("DEL");
    let deleted = Instant::now();
    let result = tokio::time::timeout(ttl, run)
        .await
        .expect("run must end within ttl of the deletion")
        .expect("task");
    let err = result.expect_err("lost");
    assert!(
        matches!(
            err,
            LockError::Lost {
                reason: LostReason::TokenGone,
                ..
            }
        ),
        "{err}"
    );
    assert!(deleted.elapsed() < ttl);
    assert!(
        !finished.load(Ordering::SeqCst),
        "the body was dropped, not finished"
    );
}
