//! The in-memory backend: the same lock semantics as on Redis, inside one
//! process. Time is tokio's paused clock, so ttl and wait are exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redlock_runtime::{ConfigError, LockClient, LockError, LostReason};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn acquire_busy_release() {
    let client = LockClient::in_memory();
    let guard = client.lock("a").acquire().await.expect("free lock");
    assert!(guard.is_held());
    assert_eq!(guard.key(), "a");

    let err = client.lock("a").acquire().await.expect_err("held");
    assert!(
        matches!(err, LockError::Busy { ref key } if key == "a"),
        "{err}"
    );
    assert!(err.is_busy() && !err.is_transient());
    assert!(
        client
            .lock("a")
            .try_acquire()
            .await
            .expect("no error")
            .is_none()
    );
    // Another key is independent.
    let other = client.lock("b").acquire().await.expect("other key");
    other.release().await.expect("release b");

    guard.release().await.expect("release a");
    client.lock("a").acquire().await.expect("free again");
}

#[tokio::test(start_paused = true)]
async fn wait_times_out_after_the_wait() {
    let client = LockClient::in_memory();
    let _holder = client.lock("w").acquire().await.expect("holder");
    let started = Instant::now();
    let err = client
        .lock("w")
        .wait(Duration::from_millis(750))
        .acquire()
        .await
        .expect_err("held the whole wait");
    let waited = started.elapsed();
    assert!(
        matches!(err, LockError::WaitTimeout { waited, .. } if waited == Duration::from_millis(750)),
        "{err}"
    );
    assert!(
        waited >= Duration::from_millis(750) && waited <= Duration::from_millis(800),
        "{waited:?}"
    );
    assert!(
        err.to_string().contains("`w`"),
        "message names the key: {err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiter_gets_the_lock_when_the_holder_releases() {
    let client = LockClient::in_memory();
    let holder = client.lock("h").acquire().await.expect("holder");
    let c = client.clone();
    let waiter =
        tokio::spawn(async move { c.lock("h").wait(Duration::from_secs(10)).acquire().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());
    holder.release().await.expect("release");
    let guard = waiter.await.expect("task").expect("waiter acquires");
    assert!(guard.is_held());
}

#[tokio::test(start_paused = true)]
async fn without_watchdog_the_lease_expires_and_lost_fires() {
    let client = LockClient::in_memory();
    let guard = client
        .lock("e")
        .ttl(Duration::from_secs(2))
        .renew(false)
        .acquire()
        .await
        .expect("acquire");
    let started = Instant::now();
    assert_eq!(guard.lost().await, LostReason::Expired);
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert!(!guard.is_held());
    // Someone else can take it now, with a higher fencing token.
    let next = client
        .lock("e")
        .acquire()
        .await
        .expect("expired lock is free");
    assert!(next.fencing_token() > guard.fencing_token());
    assert!(
        guard
            .release()
            .await
            .expect_err("not ours any more")
            .is_lost()
    );
}

#[tokio::test(start_paused = true)]
async fn the_watchdog_keeps_a_lock_past_its_ttl() {
    let client = LockClient::in_memory();
    let guard = client
        .lock("wd")
        .ttl(Duration::from_secs(1))
        .acquire()
        .await
        .expect("acquire");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(guard.is_held());
    assert!(client.lock("wd").try_acquire().await.expect("ok").is_none());
    guard.release().await.expect("still ours");
}

#[tokio::test(start_paused = true)]
async fn extend_changes_the_lease() {
    let client = LockClient::in_memory();
    let guard = client
        .lock("x")
        .ttl(Duration::from_secs(1))
        .renew(false)
        .acquire()
        .await
        .expect("acquire");
    guard.extend(Duration::from_secs(10)).await.expect("extend");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(guard.is_held());
    assert!(guard.remaining() <= Duration::from_secs(5));
    assert!(client.lock("x").try_acquire().await.expect("ok").is_none());
    // A shorter ttl shortens the lease, and the watchdog-less lock then ends.
    guard.extend(Duration::from_secs(1)).await.expect("extend");
    assert_eq!(guard.lost().await, LostReason::Expired);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_guard_releases_it() {
    let client = LockClient::in_memory();
    let guard = client.lock("d").acquire().await.expect("acquire");
    drop(guard);
    // The release runs on a spawned task: let it.
    tokio::task::yield_now().await;
    client.lock("d").acquire().await.expect("released on drop");
}

#[test]
fn dropping_a_guard_after_its_runtime_is_gone_does_not_panic() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let guard = rt
        .block_on(async { LockClient::in_memory().lock("rt").acquire().await })
        .expect("acquire");
    drop(rt);
    drop(guard);
}

#[tokio::test(start_paused = true)]
async fn fencing_tokens_increase_per_key() {
    let client = LockClient::in_memory();
    let mut last = 0;
    for _ in 0..5 {
        let g = client.lock("f").acquire().await.expect("acquire");
        assert!(g.fencing_token() > last);
        last = g.fencing_token();
        g.release().await.expect("release");
    }
    assert_eq!(last, 5);
}

#[tokio::test(start_paused = true)]
async fn bad_input_is_a_clear_error() {
    let client = LockClient::in_memory();
    let err = client.lock("").acquire().await.expect_err("empty key");
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    let err = client
        .lock("k".repeat(1025))
        .acquire()
        .await
        .expect_err("long key");
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    client
        .lock("k".repeat(1024))
        .acquire()
        .await
        .expect("1024 bytes is fine");
    let err = client
        .lock("z")
        .ttl(Duration::ZERO)
        .acquire()
        .await
        .expect_err("zero ttl");
    assert!(
        matches!(
            err,
            LockError::Config(ConfigError::InvalidDuration { name: "ttl", .. })
        ),
        "{err}"
    );
    let err = LockClient::builder()
        .default_ttl(Duration::ZERO)
        .in_memory()
        .build_unchecked()
        .expect_err("zero default ttl");
    assert!(err.to_string().contains("default_ttl"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_under_contention() {
    let client = LockClient::in_memory();
    let inside = Arc::new(AtomicBool::new(false));
    let last_fence = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (client, inside, last_fence) = (client.clone(), inside.clone(), last_fence.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let g = client
                    .lock("mx")
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await
                    .expect("acquire within the wait");
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                let prev = last_fence.swap(g.fencing_token(), Ordering::SeqCst);
                assert!(g.fencing_token() > prev, "fencing token went back");
                tokio::task::yield_now().await;
                inside.store(false, Ordering::SeqCst);
                g.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(last_fence.load(Ordering::SeqCst), 400);
}

mod scoped {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use redlock_runtime::{LockClient, LockError, LostReason, OnLost, current_lock};
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn run_holds_the_lock_for_the_body_and_releases_after() {
        let client = LockClient::in_memory();
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
                held.fencing_token()
            })
            .await
            .expect("run");
        assert_eq!(value, 1);
        assert!(current_lock().is_none());
        client
            .lock("r")
            .acquire()
            .await
            .expect("released after the body");
    }

    #[tokio::test(start_paused = true)]
    async fn nested_scopes_on_one_key_reenter_and_release_at_the_outer_end() {
        let client = LockClient::in_memory();
        let depth = client
            .lock("n")
            .run(async {
                let outer = current_lock().expect("outer").fencing_token();
                let inner = client
                    .lock("n")
                    .run(async {
                        let inner = current_lock().expect("inner");
                        assert_eq!(inner.fencing_token(), outer, "same acquisition");
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
        // A different key inside a scope is a normal acquisition.
        let g = client
            .lock("n")
            .acquire()
            .await
            .expect("released by the outer scope");
        assert!(!g.is_reentrant());
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_run_is_an_error_and_try_run_skips_the_body() {
        let client = LockClient::in_memory();
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
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_lock_cancels_the_body() {
        let client = LockClient::in_memory();
        let reached_end = Arc::new(AtomicBool::new(false));
        let flag = reached_end.clone();
        let started = Instant::now();
        let err = client
            .lock("c")
            .ttl(Duration::from_secs(1))
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
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(1),
            "cancelled at the loss"
        );
        assert!(!reached_end.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn with_on_lost_signal_the_body_runs_on_and_sees_the_loss() {
        let client = LockClient::in_memory();
        let saw = client
            .lock("s")
            .ttl(Duration::from_secs(1))
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
    }

    #[tokio::test(start_paused = true)]
    async fn hold_at_least_keeps_others_out_until_the_minimum_ends() {
        let client = LockClient::in_memory();
        let started = Instant::now();
        client
            .lock("h")
            .hold_at_least(Duration::from_secs(2))
            .run(async { tokio::time::sleep(Duration::from_millis(10)).await })
            .await
            .expect("run");
        assert!(client.lock("h").try_acquire().await.expect("ok").is_none());
        let g = client
            .lock("h")
            .wait(Duration::from_secs(5))
            .acquire()
            .await
            .expect("free after the hold");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(2) && took <= Duration::from_millis(2_050),
            "{took:?}"
        );
        drop(g);
        // A job longer than its minimum hold releases at once.
        client
            .lock("h2")
            .hold_at_least(Duration::from_millis(100))
            .run(tokio::time::sleep(Duration::from_millis(300)))
            .await
            .expect("run");
        client
            .lock("h2")
            .acquire()
            .await
            .expect("deleted at the end");
    }
}

mod fair {
    use std::time::Duration;

    use redlock_runtime::LockClient;
    use tokio::sync::mpsc;

    #[tokio::test(start_paused = true)]
    async fn fair_waiters_are_served_in_arrival_order_and_give_up_cleanly() {
        let client = LockClient::in_memory();
        let holder = client.lock("f").fair().acquire().await.expect("holder");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for id in 0..3 {
            let (client, tx) = (client.clone(), tx.clone());
            // Waiter 1 gives up before the release; 0 and 2 keep their turns.
            let wait = if id == 1 {
                Duration::from_millis(500)
            } else {
                Duration::from_secs(10)
            };
            tasks.push(tokio::spawn(async move {
                if let Ok(guard) = client.lock("f").fair().wait(wait).acquire().await {
                    tx.send(id).expect("test listens");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    guard.release().await.expect("release");
                }
            }));
            tokio::time::sleep(Duration::from_millis(50)).await; // arrival order
        }
        drop(tx);
        tokio::time::sleep(Duration::from_secs(1)).await;
        holder.release().await.expect("release");
        for task in tasks {
            task.await.expect("waiter");
        }
        let mut order = Vec::new();
        while let Some(id) = rx.recv().await {
            order.push(id);
        }
        assert_eq!(order, vec![0, 2]);
    }
}
