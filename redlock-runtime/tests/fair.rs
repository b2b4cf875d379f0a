//! Fair mode: arrival order, and waiters that give up or are cancelled
//! never block the line for long, each scenario run in memory and on one
//! Redis. (A waiter whose process dies: the harness crate's
//! `tests/crash.rs`.)

use std::time::Duration;

use redlock_runtime::LockError;
use redlock_tests::{Backend, Started, fair_waiter, wait_for_fair_waiters};
use rstest::rstest;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Waits until `n` waiters are in `key`'s line. On Redis it polls the
/// line's length (bounded, 5 s). The in-memory line cannot be looked at:
/// on the paused clock, a short sleep lets every task run until it waits.
async fn queued(b: &Started, key: &str, n: usize) {
    let [server] = b.servers() else {
        tokio::time::sleep(Duration::from_millis(50)).await;
        return;
    };
    wait_for_fair_waiters(&server.url(), key, n).await;
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::cluster(Backend::Cluster)]
fn waiters_are_served_in_arrival_order(#[case] backend: Backend) {
    backend.run(|b| async move {
        let holder_client = b.client().await;
        let holder = holder_client
            .lock("line")
            .fair()
            .acquire()
            .await
            .expect("holder");
        let (order_tx, mut order_rx) = mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for id in 0..4 {
            let client = b.client().await;
            let order_tx = order_tx.clone();
            tasks.push(tokio::spawn(async move {
                let guard = client
                    .lock("line")
                    .fair()
                    .wait(Duration::from_secs(10))
                    .acquire()
                    .await
                    .expect("acquire in turn");
                order_tx.send(id).expect("test listens");
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.release().await.expect("release");
            }));
            // Arrival order: each is in the line before the next one asks.
            queued(&b, "line", id + 1).await;
        }
        drop(order_tx);
        holder.release().await.expect("release");
        for task in tasks {
            task.await.expect("waiter");
        }
        let mut order = Vec::new();
        while let Some(id) = order_rx.recv().await {
            order.push(id);
        }
        assert_eq!(order, vec![0, 1, 2, 3], "served in arrival order");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::cluster(Backend::Cluster)]
fn a_waiter_that_gives_up_leaves_the_line_at_once(#[case] backend: Backend) {
    backend.run(|b| async move {
        let holder_client = b.client().await;
        let holder = holder_client
            .lock("give-up")
            .fair()
            .acquire()
            .await
            .expect("holder");
        let impatient = fair_waiter(b.client().await, "give-up", Duration::from_millis(400));
        queued(&b, "give-up", 1).await;
        let patient = fair_waiter(b.client().await, "give-up", Duration::from_secs(10));
        queued(&b, "give-up", 2).await;
        let err = impatient
            .await
            .expect("task")
            .expect_err("its wait runs out");
        assert!(err.is_busy(), "{err}");
        // It left the line, not just stopped asking.
        queued(&b, "give-up", 1).await;
        holder.release().await.expect("release");
        let released = Instant::now();
        let guard = patient.await.expect("task").expect("next in line");
        assert!(
            released.elapsed() < Duration::from_millis(100),
            "the next waiter got it {:?} after the release",
            released.elapsed()
        );
        guard.release().await.expect("release");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::cluster(Backend::Cluster)]
fn a_cancelled_waiter_leaves_the_line(#[case] backend: Backend) {
    backend.run(|b| async move {
        let holder_client = b.client().await;
        let holder = holder_client
            .lock("cancel")
            .fair()
            .acquire()
            .await
            .expect("holder");
        let cancelled = fair_waiter(b.client().await, "cancel", Duration::from_secs(30));
        queued(&b, "cancel", 1).await;
        let next = fair_waiter(b.client().await, "cancel", Duration::from_secs(10));
        queued(&b, "cancel", 2).await;
        cancelled.abort();
        queued(&b, "cancel", 1).await;
        holder.release().await.expect("release");
        let released = Instant::now();
        let guard = next.await.expect("task").expect("next in line");
        assert!(released.elapsed() < Duration::from_millis(100));
        guard.release().await.expect("release");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::cluster(Backend::Cluster)]
fn fair_waiters_are_served_in_arrival_order_and_give_up_cleanly(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let holder = client.lock("f").fair().acquire().await.expect("holder");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for id in 0..3 {
            let (client, tx) = (b.client().await, tx.clone());
            // Waiter 1 gives up before the release; 0 and 2 keep their turns.
            let wait = if id == 1 {
                Duration::from_millis(500)
            } else {
                Duration::from_secs(10)
            };
            tasks.push(tokio::spawn(async move {
                let guard = client.lock("f").fair().wait(wait).acquire().await?;
                tx.send(id).expect("test listens");
                tokio::time::sleep(Duration::from_millis(10)).await;
                guard.release().await.expect("release");
                Ok::<(), LockError>(())
            }));
            queued(&b, "f", id + 1).await; // arrival order
        }
        drop(tx);
        let gave_up = tasks
            .remove(1)
            .await
            .expect("waiter")
            .expect_err("its wait runs out");
        assert!(gave_up.is_busy(), "{gave_up}");
        queued(&b, "f", 2).await;
        holder.release().await.expect("release");
        for task in tasks {
            task.await.expect("waiter").expect("served in its turn");
        }
        let mut order = Vec::new();
        while let Some(id) = rx.recv().await {
            order.push(id);
        }
        assert_eq!(order, vec![0, 2]);
    });
}
