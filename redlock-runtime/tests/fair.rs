//! Fair mode against real Redis: arrival order, and waiters that give up
//! or are cancelled never block the line for long. (A waiter whose process
//! dies: the harness crate's `tests/crash.rs`.)

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redlock_runtime::{LockClient, LockGuard};
use redlock_tests::RedisServer;
use tokio::sync::mpsc;

/// Waits (bounded, 5 s) until `n` waiters are queued for `key`.
async fn queued(redis: &mut MultiplexedConnection, key: &str, n: usize) {
    let queue = format!("lock:{{{key}}}:queue");
    let started = Instant::now();
    loop {
        let len: usize = redis.llen(&queue).await.expect("LLEN");
        if len == n {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "expected {n} queued waiters for {key}, found {len}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A fair waiter on its own client (its own "node").
fn fair_waiter(
    client: LockClient,
    key: &'static str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<LockGuard, redlock_runtime::LockError>> {
    tokio::spawn(async move { client.lock(key).fair().wait(wait).acquire().await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let server = RedisServer::start().await;
    let url = server.url();
    let mut redis = redlock_tests::raw_connection(&url).await;
    let holder_client = LockClient::connect(&url).await.expect("connect");
    let holder = holder_client
        .lock("line")
        .fair()
        .acquire()
        .await
        .expect("holder");
    let (order_tx, mut order_rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for id in 0..4 {
        let client = LockClient::connect(&url).await.expect("connect");
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
        queued(&mut redis, "line", id + 1).await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_the_line_at_once() {
    let server = RedisServer::start().await;
    let url = server.url();
    let mut redis = redlock_tests::raw_connection(&url).await;
    let holder_client = LockClient::connect(&url).await.expect("connect");
    let holder = holder_client
        .lock("give-up")
        .fair()
        .acquire()
        .await
        .expect("holder");
    let impatient = fair_waiter(
        LockClient::connect(&url).await.expect("connect"),
        "give-up",
        Duration::from_millis(400),
    );
    queued(&mut redis, "give-up", 1).await;
    let patient = fair_waiter(
        LockClient::connect(&url).await.expect("connect"),
        "give-up",
        Duration::from_secs(10),
    );
    queued(&mut redis, "give-up", 2).await;
    let err = impatient
        .await
        .expect("task")
        .expect_err("its wait runs out");
    assert!(err.is_busy(), "{err}");
    // It left the line, not just stopped asking.
    queued(&mut redis, "give-up", 1).await;
    holder.release().await.expect("release");
    let released = Instant::now();
    let guard = patient.await.expect("task").expect("next in line");
    assert!(
        released.elapsed() < Duration::from_millis(100),
        "the next waiter got it {:?} after the release",
        released.elapsed()
    );
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_leaves_the_line() {
    let server = RedisServer::start().await;
    let url = server.url();
    let mut redis = redlock_tests::raw_connection(&url).await;
    let holder_client = LockClient::connect(&url).await.expect("connect");
    let holder = holder_client
        .lock("cancel")
        .fair()
        .acquire()
        .await
        .expect("holder");
    let cancelled = fair_waiter(
        LockClient::connect(&url).await.expect("connect"),
        "cancel",
        Duration::from_secs(30),
    );
    queued(&mut redis, "cancel", 1).await;
    let next = fair_waiter(
        LockClient::connect(&url).await.expect("connect"),
        "cancel",
        Duration::from_secs(10),
    );
    queued(&mut redis, "cancel", 2).await;
    cancelled.abort();
    queued(&mut redis, "cancel", 1).await;
    holder.release().await.expect("release");
    let released = Instant::now();
    let guard = next.await.expect("task").expect("next in line");
    assert!(released.elapsed() < Duration::from_millis(100));
    guard.release().await.expect("release");
}
