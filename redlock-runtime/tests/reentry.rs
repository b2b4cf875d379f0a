//! Re-entry under adversarial use (issue 12, defects 5, 9 and 10), each
//! scenario run on the in-memory backend and on a real Redis (the cases
//! of a case list):
//! - a lost or released lock cannot be re-entered, and views of it that
//!   escaped their scope say it is not held;
//! - concurrent re-entries in one task (`join!`, `join_all`) take turns;
//! - nested locked calls do not multiply the size of their futures, and 8
//!   levels awaiting a large future run on a default worker's stack.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redlock_runtime::{LockClient, LockError, LostReason, OnLost, current_lock, distributed_lock};
use redlock_tests::Backend;
use rstest::rstest;

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
fn a_lost_lock_cannot_be_reentered(#[case] backend: Backend) {
    // On two worker threads and the real clock, memory too.
    backend.run_threaded(|b| async move {
        let (name, locks) = (b.name(), b.client().await);
        let other = locks.clone();
        let outcome = locks
            .lock("lost-reentry")
            .ttl(Duration::from_millis(300))
            .renew(false)
            .on_lost(OnLost::Signal)
            .run(async {
                let held = current_lock().expect("inside the scope");
                // Asked while held: a token asked for after the lease ran
                // out would be refused (Lost).
                let token = held.fencing_token().await.expect("fencing token");
                assert_eq!(held.lost().await, LostReason::Expired, "{name}");
                // Another owner takes the key in another task.
                let taker = tokio::spawn(async move {
                    let guard = other
                        .lock("lost-reentry")
                        .wait(Duration::from_secs(5))
                        .acquire()
                        .await
                        .expect("the lease ended: another owner gets the key");
                    let fence = guard.fencing_token().await.expect("fencing token");
                    std::mem::forget(guard); // keeps the key taken for this test
                    fence
                })
                .await
                .expect("taker task");
                assert!(taker > token, "{name}");
                assert!(
                    held.fencing_token().await.is_ok_and(|t| t == token),
                    "{name}: the token issued stays the scope's"
                );
                let nested = locks.lock("lost-reentry").run(async { "ran" }).await;
                let acquired = locks.lock("lost-reentry").acquire().await;
                (nested, acquired.map(|g| g.is_held()))
            })
            .await
            .expect("Signal mode returns the body's value");
        for err in [
            outcome.0.map(|_| ()).expect_err("nested run"),
            outcome.1.map(|_| ()).expect_err("nested acquire"),
        ] {
            assert!(
                matches!(
                    err,
                    LockError::Lost {
                        reason: LostReason::Expired,
                        ..
                    }
                ),
                "{name}: {err:?}"
            );
        }
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
fn escaped_guards_and_current_locks_say_not_held_after_the_release(#[case] backend: Backend) {
    // On two worker threads and the real clock, memory too.
    backend.run_threaded(|b| async move {
        let (name, locks) = (b.name(), b.client().await);
        let (guard, current) = locks
            .lock("escaped")
            .ttl(Duration::from_secs(30))
            .run(async {
                let guard = locks.lock("escaped").acquire().await.expect("re-entry");
                assert!(guard.is_reentrant() && guard.is_held(), "{name}");
                let current = current_lock().expect("inside the scope");
                assert!(current.is_held() && current.remaining() > Duration::from_secs(20));
                (guard, current)
            })
            .await
            .expect("run");
        assert!(
            !guard.is_held(),
            "{name}: a reentrant guard outlived its scope"
        );
        assert_eq!(guard.remaining(), Duration::ZERO, "{name}");
        assert!(!current.is_held(), "{name}: CurrentLock outlived its scope");
        assert_eq!(current.remaining(), Duration::ZERO, "{name}");
        // The key is free for others.
        let next = locks.lock("escaped").acquire().await.expect("free again");
        next.release().await.expect("release");
    });
}

/// Runs `n` re-entries of `key` at once inside a scope holding it, each
/// with `wait`; returns how many ran and the most bodies seen at once.
async fn concurrent_reentries(locks: &LockClient, n: usize, wait: Duration) -> (usize, usize) {
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let results = locks
        .lock("join")
        .ttl(Duration::from_secs(30))
        .run(async {
            let reentry = || {
                let (inside, most) = (Arc::clone(&inside), Arc::clone(&most));
                locks.lock("join").wait(wait).run(async move {
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            };
            let (a, b) = tokio::join!(reentry(), reentry());
            let mut all = vec![a, b];
            all.extend(futures_util::future::join_all((2..n).map(|_| reentry())).await);
            all
        })
        .await
        .expect("outer run");
    let ran = results.iter().filter(|r| r.is_ok()).count();
    for r in &results {
        if let Err(e) = r {
            assert!(e.is_busy(), "a re-entry that lost its turn is busy: {e:?}");
        }
    }
    (ran, most.load(Ordering::SeqCst))
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
fn concurrent_reentries_in_one_task_take_turns(#[case] backend: Backend) {
    // On two worker threads and the real clock, memory too.
    backend.run_threaded(|b| async move {
        let (name, locks) = (b.name(), b.client().await);
        let (ran, most) = concurrent_reentries(&locks, 6, Duration::from_secs(5)).await;
        assert_eq!(
            (ran, most),
            (6, 1),
            "{name}: with a wait, all run, one at a time"
        );
        let (ran, most) = concurrent_reentries(&locks, 6, Duration::ZERO).await;
        assert_eq!(most, 1, "{name}: never two bodies at once");
        assert!(
            (1..6).contains(&ran),
            "{name}: without a wait the others are busy ({ran} ran)"
        );
    });
}

// Eight levels of annotated functions, as a handler -> service -> repository
// chain would nest them, the last one awaiting a large future.
#[distributed_lock(key = "nest", client = locks)]
async fn level8(locks: &LockClient) -> Result<usize, LockError> {
    let big = [1u8; 64 * 1024];
    tokio::task::yield_now().await;
    Ok(usize::from(big[1000]) + 1)
}
#[distributed_lock(key = "nest", client = locks)]
async fn level7(locks: &LockClient) -> Result<usize, LockError> {
    Ok(level8(locks).await? + 1)
}
#[distributed_lock(key = "nest", client = locks)]
async fn level6(locks: &LockClient) -> Result<usize, LockError> {
    Ok(level7(locks).await? + 1)
}
#[distributed_lock(key = "nest", client = locks)]
async fn level5(locks: &LockClient) -> Result<usize, LockError> {
    Ok(level6(locks).await? + 1)
}
#[distributed_lock(key = "nest", client = locks)]
async fn level4(locks: &LockClient) -> Result<usize, LockError> {
    Ok(level5(locks).await? + 1)
}
#[distributed_lock(key = "nest", client = locks)]
async fn level3(locks: &LockClient) -> Result<usize, LockError> {
    Ok(level4(locks).await? + 1)
}
#[distributed_lock(key = "nest", client = locks)]
async fn level2(locks: &LockClient) -> Result<usize, LockError> {
    Ok(level3(locks).await? + 1)
}
#[distributed_lock(key = "nest", client = locks)]
async fn level1(locks: &LockClient) -> Result<usize, LockError> {
    Ok(level2(locks).await? + 1)
}

/// `depth` nested `LockRequest::run` calls around a large future.
fn nested_runs(
    locks: LockClient,
    depth: usize,
) -> std::pin::Pin<Box<dyn Future<Output = Result<usize, LockError>> + Send>> {
    Box::pin(async move {
        if depth == 0 {
            let big = [1u8; 64 * 1024];
            tokio::task::yield_now().await;
            return Ok(usize::from(big[1000]));
        }
        let inner = locks.clone();
        locks
            .lock("nest-run")
            .run(async move { nested_runs(inner, depth - 1).await.map(|n| n + 1) })
            .await?
    })
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
fn eight_nested_locked_levels_run_on_a_default_worker(#[case] backend: Backend) {
    // A default multi-thread runtime: 2 MiB worker stacks. Before the fix,
    // four levels overflowed one in release and two in debug.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let b = backend.start().await;
        let (name, locks) = (b.name(), b.client().await);
        let task = tokio::spawn({
            let locks = locks.clone();
            async move { level1(&locks).await }
        });
        assert_eq!(
            task.await.expect("no stack overflow").expect("locked"),
            9,
            "{name}"
        );
        let task = tokio::spawn(nested_runs(locks.clone(), 8));
        assert_eq!(
            task.await.expect("no stack overflow").expect("locked"),
            9,
            "{name}"
        );
    });
}

#[test]
fn a_locked_future_does_not_grow_with_its_body_or_its_nesting() {
    let locks = LockClient::in_memory();
    let run_of = |body_bytes: usize| match body_bytes {
        0 => std::mem::size_of_val(&locks.lock("k").run(async { 1u8 })),
        _ => {
            let big = [0u8; 16 * 1024];
            std::mem::size_of_val(&locks.lock("k").run(async move {
                tokio::task::yield_now().await;
                big[0]
            }))
        }
    };
    let small = run_of(0);
    let large = run_of(16 * 1024);
    assert_eq!(small, large, "the body is boxed, not held by value");
    assert!(small <= 4096, "a run future is {small} bytes");

    let sizes = [
        std::mem::size_of_val(&level8(&locks)),
        std::mem::size_of_val(&level7(&locks)),
        std::mem::size_of_val(&level4(&locks)),
        std::mem::size_of_val(&level1(&locks)),
    ];
    // level8's own body holds 64 KiB across an await; each level above it
    // holds only the next level's (boxed) call.
    for size in &sizes[1..] {
        assert!(
            *size <= small + 512,
            "an annotated function's future is {size} bytes: {sizes:?}"
        );
    }
    assert_eq!(sizes[1], sizes[3], "no growth per level: {sizes:?}");
}
