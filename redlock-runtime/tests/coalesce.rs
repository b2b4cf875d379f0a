//! Coalesced calls (`store/server/coalesce.rs`) on real Redis processes:
//! the concurrent acquires and releases of fenced locks that one client
//! sends on one connection go out as batches, and nothing about a lock
//! changes for it.
//!
//! A latency proxy between client and Redis makes the batches certain:
//! while two calls are on their way, every other call waits for the next
//! batch. Each test checks that batches were sent, then what the hostile
//! tester would: each call answered as if alone (a failing call fails
//! alone), mutual exclusion and token order under contention, and nothing
//! left held when callers leave at any point, the connection is cut or
//! Redis is paused with calls in the queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::test_util::coalesced_batches;
use redlock_runtime::{LockClient, LockError};
use redlock_tests::{FaultProxy, FencedStore, RedisServer, raw_connection};
use tokio::task::JoinSet;

/// A fenced client (every acquire issues its token, so its calls are
/// coalesced) with one connection.
async fn fenced(url: &str) -> LockClient {
    fenced_with(url, |b| b).await
}

async fn fenced_with(
    url: &str,
    more: impl FnOnce(redlock_runtime::LockClientBuilder) -> redlock_runtime::LockClientBuilder,
) -> LockClient {
    more(LockClient::builder().url(url).pool_size(1).fenced(true))
        .build()
        .await
        .expect("connect")
}

/// A Redis behind a latency proxy, and a fenced client of it (warmed up).
async fn proxied() -> (RedisServer, FaultProxy, LockClient) {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let locks = fenced(&proxy.url()).await;
    warm_up(&locks).await;
    (server, proxy, locks)
}

/// One acquire and release, so the scripts are in Redis's cache.
async fn warm_up(locks: &LockClient) {
    let guard = locks.lock("warm-up").acquire().await.expect("warm-up");
    guard.release().await.expect("warm-up release");
}

/// The lock keys held on the server at `url` (fencing counters left out).
async fn held(url: &str) -> Vec<String> {
    let mut conn = raw_connection(url).await;
    let keys: Vec<String> = conn.keys("lock:*").await.expect("KEYS");
    keys.into_iter()
        .filter(|k| !k.ends_with(":fence"))
        .collect()
}

/// Waits (bounded) until no lock is held on the server; what is still
/// held after `limit`.
async fn none_held_within(url: &str, limit: Duration) -> Vec<String> {
    let started = Instant::now();
    loop {
        let left = held(url).await;
        if left.is_empty() || started.elapsed() >= limit {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `n` tasks at once, each taking and releasing a lock of its own
/// (`{prefix}:{i}`); panics, saying `what`, on a failure.
async fn wave(locks: &LockClient, prefix: &str, n: usize, what: &str) {
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let (locks, key) = (locks.clone(), format!("{prefix}:{i}"));
        tasks.spawn(async move {
            let guard = locks.lock(key).acquire().await?;
            guard.release().await
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task")
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// Once everything on its way through `proxy` has landed (the calls cut
/// short, the give-backs and releases that follow them), no lock is held.
async fn all_given_back(server: &RedisServer, proxy: &FaultProxy) {
    assert!(
        proxy
            .await_quiet(Duration::from_millis(200), Duration::from_secs(20))
            .await,
        "the proxy went quiet"
    );
    let left = none_held_within(&server.url(), Duration::from_secs(2)).await;
    assert!(left.is_empty(), "still held: {left:?}");
}

/// `EVALSHA` calls the server counted so far.
async fn evalsha_calls(url: &str) -> u64 {
    let mut conn = raw_connection(url).await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|rest| rest.split(',').find_map(|f| f.strip_prefix("calls=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fenced_locks_go_out_in_batches_and_keep_their_guarantees() {
    let (server, proxy, locks) = proxied().await;
    proxy.set_latency(Duration::from_millis(10));
    let evalsha_before = evalsha_calls(&server.url()).await;

    // 32 tasks on keys of their own, 16 contending for one key whose
    // holders write to a fenced store.
    let store = Arc::new(std::sync::Mutex::new(FencedStore::default()));
    let sections = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = JoinSet::new();
    for task in 0..48usize {
        let (locks, store, sections) = (locks.clone(), store.clone(), sections.clone());
        tasks.spawn(async move {
            for round in 0..6 {
                if task < 32 {
                    let key = format!("own:{task}:{round}");
                    let guard = locks.lock(key.as_str()).acquire().await.expect("own key");
                    let token = guard.fencing_token().await.expect("token");
                    assert!(token > 0, "{key}: a fenced acquire issues a token");
                    guard.release().await.expect("release");
                } else {
                    let guard = locks
                        .lock("shared")
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await
                        .expect("the shared key, waited for");
                    let token = guard.fencing_token().await.expect("token");
                    let begin = Instant::now();
                    assert!(store.lock().expect("store").write(token, task));
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    assert!(store.lock().expect("store").write(token, task));
                    sections
                        .lock()
                        .expect("sections")
                        .push((begin, Instant::now(), token));
                    guard.release().await.expect("release");
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }

    let (batches, calls) = coalesced_batches(&locks);
    println!("{batches} batches carried {calls} calls");
    assert!(batches > 0, "no call was coalesced");
    // 288 acquires and 288 releases went out; the server ran fewer scripts.
    let scripts = evalsha_calls(&server.url()).await - evalsha_before;
    assert!(scripts < 576, "{scripts} EVALSHA for 576 calls");

    {
        let store = store.lock().expect("store");
        assert_eq!(store.rejected + store.stale_accepted, 0, "{store:?}");
    }
    let mut sections = sections.lock().expect("sections").clone();
    sections.sort_by_key(|s| s.0);
    assert_eq!(sections.len(), 96);
    for pair in sections.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        assert!(after.0 >= before.1, "two holders of `shared` at once");
        assert!(after.2 > before.2, "a later holder has a smaller token");
    }
    assert!(held(&server.url()).await.is_empty(), "a lock stayed held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_fails_in_a_batch_fails_alone() {
    let (server, proxy, locks) = proxied().await;
    // A lock key that holds a hash: its acquire fails with WRONGTYPE.
    let mut raw = raw_connection(server.url()).await;
    let _: () = raw
        .hset("lock:{taken-by-a-hash}", "f", 1)
        .await
        .expect("HSET");
    proxy.set_latency(Duration::from_millis(30));

    let mut tasks = JoinSet::new();
    // Two calls on their way first: the rest queue into one batch.
    for i in 0..2 {
        let locks = locks.clone();
        tasks.spawn(async move { locks.lock(format!("first:{i}")).acquire().await.map(drop) });
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let batches_before = coalesced_batches(&locks).0;
    let bad = {
        let locks = locks.clone();
        tokio::spawn(async move { locks.lock("taken-by-a-hash").acquire().await.map(drop) })
    };
    for i in 0..10 {
        let locks = locks.clone();
        tasks.spawn(async move { locks.lock(format!("good:{i}")).acquire().await.map(drop) });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task")
            .expect("every other acquire in the batch succeeds");
    }
    match bad.await.expect("task") {
        Err(e @ LockError::Redis { .. }) => {
            assert!(e.to_string().contains("WRONGTYPE"), "{e}");
        }
        other => panic!("the acquire of a hash key: {other:?}"),
    }
    assert!(
        coalesced_batches(&locks).0 > batches_before,
        "the failing call was in a batch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_cut_short_queued_or_in_a_batch_leave_nothing_held() {
    let (server, proxy, locks) = proxied().await;
    // A round trip takes 100 ms: 2 calls go out alone, the rest wait in
    // the queue for 100 ms, then go out as a batch answered 100 ms later.
    proxy.set_latency(Duration::from_millis(50));
    let batches_before = coalesced_batches(&locks).0;
    for cut in [1u64, 50, 99, 101, 150, 199, 201, 250, 350] {
        let mut tasks = JoinSet::new();
        for i in 0..24 {
            let locks = locks.clone();
            tasks.spawn(async move {
                let acquire = locks
                    .lock(format!("cut:{cut}:{i}"))
                    .ttl(Duration::from_secs(30))
                    .acquire();
                // A guard that came back is dropped: released from a task.
                let _ = tokio::time::timeout(Duration::from_millis(cut), acquire).await;
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("task");
        }
    }
    assert!(
        coalesced_batches(&locks).0 > batches_before,
        "calls were batched"
    );
    // Everything the cut-short acquires sent, and their give-backs, lands.
    all_given_back(&server, &proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_under_batches_leaves_nothing_held() {
    let (server, proxy, locks) = proxied().await;
    proxy.set_latency(Duration::from_millis(40));
    let mut tasks = JoinSet::new();
    for i in 0..32 {
        let locks = locks.clone();
        tasks.spawn(async move {
            let acquired = locks
                .lock(format!("cut-connection:{i}"))
                .ttl(Duration::from_secs(30))
                .acquire()
                .await;
            // A release cut short goes on in the background.
            if let Ok(guard) = acquired {
                let _ = guard.release().await;
            }
        });
    }
    // Two calls out alone, a batch on its way: cut them all.
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.cut_all();
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    all_given_back(&server, &proxy).await;

    // The client carries on, batching again.
    proxy.set_latency(Duration::from_millis(10));
    let before = coalesced_batches(&locks).0;
    wave(&locks, "after", 16, "acquire and release after the cut").await;
    assert!(coalesced_batches(&locks).0 > before, "batching again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_with_calls_queued_is_left_nothing_held_once_it_resumes() {
    let server = RedisServer::start().await;
    let locks = fenced_with(&server.url(), |b| {
        b.command_timeout(Duration::from_millis(300))
    })
    .await;
    warm_up(&locks).await;
    server.pause();
    let mut tasks = JoinSet::new();
    for i in 0..32 {
        let locks = locks.clone();
        tasks.spawn(async move {
            locks
                .lock(format!("paused:{i}"))
                .ttl(Duration::from_secs(30))
                .acquire()
                .await
                .map(drop)
        });
    }
    let mut timeouts = 0;
    while let Some(done) = tasks.join_next().await {
        match done.expect("task") {
            Err(LockError::Timeout { .. }) => timeouts += 1,
            other => panic!("an acquire while Redis is paused: {other:?}"),
        }
    }
    assert_eq!(timeouts, 32);
    server.resume();
    // The two calls that were sent land now; their give-backs follow.
    let left = none_held_within(&server.url(), Duration::from_secs(5)).await;
    assert!(left.is_empty(), "still held: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_after_a_script_flush_loads_its_script_again() {
    let (server, proxy, locks) = proxied().await;
    let mut raw = raw_connection(server.url()).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .expect("SCRIPT FLUSH");
    proxy.set_latency(Duration::from_millis(20));
    wave(
        &locks,
        "flushed",
        24,
        "acquire and release after SCRIPT FLUSH",
    )
    .await;
    assert!(coalesced_batches(&locks).0 > 0, "calls were batched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_scripts_over_several_slots_gets_each_call_alone() {
    // A cluster node that serves every slot: one-key calls work, and a
    // batch (keys of several slots) is refused with CROSSSLOT, as a proxy
    // in front of several shards would refuse it.
    let server = RedisServer::start_with_args(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ])
    .await;
    let mut raw = raw_connection(server.url()).await;
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query_async(&mut raw)
        .await
        .expect("CLUSTER ADDSLOTSRANGE");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut raw)
            .await
            .expect("CLUSTER INFO");
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(Instant::now() < deadline, "the one-node cluster came up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let proxy = FaultProxy::start(server.addr()).await;
    let locks = fenced(&proxy.url()).await;
    warm_up(&locks).await;
    proxy.set_latency(Duration::from_millis(20));
    wave(&locks, "refused", 16, "every call succeeds, alone").await;
    let (batches, _) = coalesced_batches(&locks);
    assert!(batches >= 1, "a batch was tried");
    wave(&locks, "alone", 16, "every call succeeds, alone").await;
    assert_eq!(
        coalesced_batches(&locks).0,
        batches,
        "no batch after the refusal"
    );
    assert!(held(&server.url()).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalescing_turned_off_sends_every_call_alone() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let locks = fenced_with(&proxy.url(), |b| b.coalesce(false)).await;
    warm_up(&locks).await;
    proxy.set_latency(Duration::from_millis(10));
    let before = evalsha_calls(&server.url()).await;
    let mut tasks = JoinSet::new();
    for i in 0..24 {
        let locks = locks.clone();
        tasks.spawn(async move {
            let guard = locks.lock(format!("off:{i}")).acquire().await?;
            guard.release().await
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task").expect("acquire and release");
    }
    assert_eq!(coalesced_batches(&locks), (0, 0));
    assert_eq!(evalsha_calls(&server.url()).await - before, 48);
}
