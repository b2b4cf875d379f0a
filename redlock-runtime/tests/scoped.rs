//! Scoped execution against real Redis: reentrancy, cancel-on-loss and the
//! minimum hold of scheduler jobs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::{LockClient, LockError, LostReason, current_lock};
use redlock_tests::RedisServer;

async fn client(url: &str) -> LockClient {
    LockClient::connect(url)
        .await
        .expect("connect to the test Redis")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_scopes_complete_in_one_task_while_another_task_waits() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
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
}

#[tokio::test]
async fn a_deleted_lock_cancels_the_body_within_ttl() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_at_least_keeps_other_nodes_out_for_the_minimum() {
    let server = RedisServer::start().await;
    let node_a = client(&server.url()).await;
    let node_b = client(&server.url()).await;
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
    assert!(
        free_after >= hold - Duration::from_millis(200)
            && free_after <= hold + Duration::from_millis(200),
        "released {free_after:?} after the acquire; minimum hold {hold:?}"
    );
    guard.release().await.expect("release");
}
