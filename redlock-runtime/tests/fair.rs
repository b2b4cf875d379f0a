//! Fair mode: arrival order, and waiters that give up or are cancelled
//! never block the line for long, each scenario run in memory and on one
//! Redis. (A waiter whose process dies: the harness crate's
//! `tests/crash.rs`.) A release hands the lock to the first waiter (a
//! grant), in memory as on Redis: no one takes it in between; the last
//! tests here check on Redis that the grant saves the waiter's round trip,
//! and what becomes of a grant its waiter does not take.

use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;
use redlock_runtime::bb8_redis::{RedisConnectionManager, bb8};
use redlock_runtime::{LockClient, LockError, RetryPolicy};
use redlock_tests::{
    Backend, FaultProxy, RedisServer, Started, fair_waiter, wait_for_fair_waiters,
};
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

/// The release hands the lock to the waiter in the same step
/// (`fair/release.lua`, and since issue 35 the memory store's twin of
/// it): a plain `try_acquire` right after the release finds it taken,
/// and the waiter holds it.
#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
fn a_release_hands_the_lock_to_the_waiter_with_no_gap(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let holder = client.lock("handed").fair().acquire().await;
        let holder = holder.expect("holder");
        let waiter_client = b.client().await;
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let waiter = tokio::spawn(async move {
            let waiting = waiter_client.lock("handed").fair();
            let guard = waiting.wait(Duration::from_secs(10)).acquire().await;
            let guard = guard.expect("granted");
            // Held until the test has tried to take it.
            done_rx.await.expect("the test answers");
            guard.release().await.expect("release");
        });
        queued(&b, "handed", 1).await;
        holder.release().await.expect("release");
        let sneaking = client.lock("handed").try_acquire().await.expect("try");
        assert!(sneaking.is_none(), "the lock was free between two holders");
        done_tx.send(()).expect("the waiter holds the lock");
        waiter.await.expect("waiter");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
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
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
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

/// A waiter whose wait ran out (or a fair `try_acquire` that found the
/// lock held) has left the line when it answers: `inspect` right after
/// shows no waiter, with no wait in between (the differential suite found
/// it still in line for a moment, its place given back from a spawned
/// task).
#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn a_waiter_that_gave_up_has_left_the_line_when_it_answers(#[case] backend: Backend) {
    backend.run(|b| async move {
        let holder_client = b.client().await;
        let holder = holder_client
            .lock("gave-up")
            .fair()
            .acquire()
            .await
            .expect("holder");
        let waiter = b.client().await;
        for wait in [Duration::ZERO, Duration::from_millis(50)] {
            let taken = waiter
                .lock("gave-up")
                .fair()
                .wait(wait)
                .try_acquire()
                .await
                .expect("try");
            assert!(taken.is_none(), "the lock is held");
            let info = waiter.inspect("gave-up").await.expect("inspect");
            assert_eq!(
                info.waiters, 0,
                "a waiter that gave up after {wait:?} is still in line"
            );
        }
        holder.release().await.expect("release");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
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
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
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

/// A client that waits with a fixed 2 s backoff and no wake-ups (built over
/// a pool alone, it has no subscriber): it sees a grant only by asking, as
/// a waiter of an earlier version does. Its place in a line lasts
/// 3 × 2 s + 0.5 s.
async fn polling_client(url: &str, name: &str) -> LockClient {
    let manager = RedisConnectionManager::new(url).expect("manager");
    let pool = bb8::Pool::builder()
        .max_size(2)
        .build(manager)
        .await
        .expect("pool");
    LockClient::builder()
        .pool(pool)
        .client_name(name)
        .retry(RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(2)).jitter(false))
        .build()
        .await
        .expect("polling client")
}

/// Who holds `key` now, by client name.
async fn holder_name(locks: &LockClient, key: &str) -> Option<String> {
    locks
        .inspect(key)
        .await
        .expect("inspect")
        .holder
        .and_then(|h| h.client_name)
}

/// The waiter's link is slow (500 ms each way): asking after the release's
/// message would take three crossings (1.5 s), the grant takes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_lock_to_the_first_waiter_without_another_ask() {
    let server = RedisServer::start().await;
    let url = server.url();
    let proxy = FaultProxy::start(server.addr()).await;
    let holder_client = LockClient::connect(&url).await.expect("connect");
    let waiter_client = LockClient::builder()
        .url(proxy.url())
        .client_name("slow-link")
        .command_timeout(Duration::from_secs(3))
        .retry(RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(2)).jitter(false))
        .build()
        .await
        .expect("waiter client");
    let holder = holder_client
        .lock("grant")
        .fair()
        .acquire()
        .await
        .expect("holder");
    let before = holder.fencing_token().await.expect("holder's token");
    let waiter = tokio::spawn(async move {
        waiter_client
            .lock("grant")
            .fair()
            .ttl(Duration::from_secs(20))
            .wait(Duration::from_secs(30))
            .acquire()
            .await
    });
    wait_for_fair_waiters(&url, "grant", 1).await;
    // Its subscriber listens, and its asks are done (the next is 2 s away).
    let mut redis = redlock_tests::raw_connection(&url).await;
    let started = Instant::now();
    loop {
        let (_, subscribers): (String, usize) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("lock:{grant}")
            .query_async(&mut redis)
            .await
            .expect("PUBSUB NUMSUB");
        if subscribers > 0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no subscriber");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_latency(Duration::from_millis(500));

    holder.release().await.expect("release");
    let released = Instant::now();
    let guard = waiter
        .await
        .expect("task")
        .expect("the waiter holds the lock");
    let took = released.elapsed();
    // One crossing (500 ms); two should an ask have been in flight; an ask
    // after the message, three.
    assert!(
        took < Duration::from_millis(1250),
        "the waiter took {took:?}: it asked again"
    );
    assert_eq!(
        holder_name(&holder_client, "grant").await.as_deref(),
        Some("slow-link")
    );
    let token = guard.fencing_token().await.expect("token");
    assert!(token > before, "{token} after {before}");
    // Granted for what was left of its place in the line (3 × 2 s + 3 s);
    // its watchdog renews it to its ttl (20 s) at once.
    let started = Instant::now();
    loop {
        let pttl: i64 = redis.pttl("lock:{grant}").await.expect("PTTL");
        if pttl > 12_000 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the lease was not renewed to the ttl (pttl {pttl} ms)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.set_latency(Duration::ZERO);
    guard.release().await.expect("release");
}

/// A waiter that does not take grants (it polls) finds the lock its own at
/// its next ask; the line and the token are as if it had asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_waiter_finds_the_granted_lock_its_own_at_its_next_ask() {
    let server = RedisServer::start().await;
    let url = server.url();
    let holder_client = LockClient::connect(&url).await.expect("connect");
    let holder = holder_client
        .lock("poll")
        .fair()
        .acquire()
        .await
        .expect("holder");
    let before = holder.fencing_token().await.expect("holder's token");
    let polling = polling_client(&url, "poller").await;
    let waiter = tokio::spawn(async move {
        polling
            .lock("poll")
            .fair()
            .wait(Duration::from_secs(30))
            .acquire()
            .await
    });
    wait_for_fair_waiters(&url, "poll", 1).await;
    holder.release().await.expect("release");
    // Granted at once, though the waiter does not know yet.
    assert_eq!(
        holder_name(&holder_client, "poll").await.as_deref(),
        Some("poller")
    );
    let info = holder_client.inspect("poll").await.expect("inspect");
    assert_eq!(info.waiters, 0, "the grant took it out of the line");
    let granted = info.fencing_token.expect("a token was issued");
    assert!(granted > before);
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("found at its next ask (2 s backoff)")
        .expect("task")
        .expect("acquired");
    assert_eq!(guard.fencing_token().await.expect("token"), granted);
    guard.release().await.expect("release");
    assert!(
        !holder_client
            .inspect("poll")
            .await
            .expect("inspect")
            .is_held()
    );
}

/// Waiter handles: the first in line (it polls) and the next (woken).
type Waiter = tokio::task::JoinHandle<Result<redlock_runtime::LockGuard, LockError>>;

/// A line of two behind a holder of `key`: first a polling waiter on a
/// client named `name`, then a woken one; then the holder's release, which
/// grants the lock to the poller (checked), who does not know it yet.
/// Returns a client to look with, the poller and the next waiter.
async fn granted_to_a_poller(
    url: &str,
    key: &'static str,
    name: &str,
) -> (LockClient, Waiter, Waiter) {
    let looking = LockClient::connect(url).await.expect("connect");
    let holder = looking.lock(key).fair().acquire().await.expect("holder");
    let polling = polling_client(url, name).await;
    let poller = tokio::spawn(async move {
        polling
            .lock(key)
            .fair()
            .wait(Duration::from_secs(30))
            .acquire()
            .await
    });
    wait_for_fair_waiters(url, key, 1).await;
    let next = fair_waiter(
        LockClient::connect(url).await.expect("connect"),
        key,
        Duration::from_secs(30),
    );
    wait_for_fair_waiters(url, key, 2).await;
    holder.release().await.expect("release");
    assert_eq!(holder_name(&looking, key).await.as_deref(), Some(name));
    (looking, poller, next)
}

/// A grant to a waiter that is cancelled before it sees it goes to the
/// next waiter at once (the cancelled waiter's give-back releases with its
/// token, which grants the next), not after the cancelled one's place ran
/// out (6.5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_to_a_cancelled_waiter_passes_to_the_next_at_once() {
    let server = RedisServer::start().await;
    let url = server.url();
    let (holder_client, cancelled, next) = granted_to_a_poller(&url, "pass", "cancelled").await;
    let granted = holder_client
        .inspect("pass")
        .await
        .expect("inspect")
        .fencing_token
        .expect("issued");
    cancelled.abort();
    let aborted = Instant::now();
    let guard = next.await.expect("task").expect("the next waiter");
    let took = aborted.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the cancelled waiter's grant blocked the line for {took:?}"
    );
    assert!(guard.fencing_token().await.expect("token") > granted);
    guard.release().await.expect("release");
    let mut redis = redlock_tests::raw_connection(&url).await;
    let len: usize = redis.llen("lock:{pass}:queue").await.expect("LLEN");
    assert_eq!(len, 0, "no one left in line");
}

/// A waiter leaves while a release has granted it the lock (its wait ran
/// out, or it was cancelled, just as the grant landed): its give-back,
/// `FAIR_LEAVE`, passes the lock on to the next waiter, rather than
/// leaving it held by no one until the place runs out. (The leave is run
/// here by hand, between the grant and the waiter's next ask, to pin that
/// order.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_leaves_holding_a_grant_passes_it_on() {
    let server = RedisServer::start().await;
    let url = server.url();
    let (_, leaving, next) = granted_to_a_poller(&url, "race", "leaving").await;
    let mut redis = redlock_tests::raw_connection(&url).await;
    let granted_to: String = redis.get("lock:{race}").await.expect("GET");
    let left = Instant::now();
    let held: i64 = redis::Script::new(&redlock_runtime::test_util::fair_leave_lua())
        .key("lock:{race}")
        .key("lock:{race}:queue")
        .key("lock:{race}:waiters")
        .key("lock:{race}:fence")
        .arg(&granted_to)
        .arg(86_400_000)
        .invoke_async(&mut redis)
        .await
        .expect("FAIR_LEAVE");
    assert_eq!(held, 1, "the leave found the lock granted to its waiter");
    let guard = next.await.expect("task").expect("the next waiter");
    assert!(
        left.elapsed() < Duration::from_secs(2),
        "the lock reached the next waiter {:?} after the leave",
        left.elapsed()
    );
    leaving.abort();
    guard.release().await.expect("release");
}

/// `redis.sha1hex(text)`, as the scripts compute a waiter's id on this
/// Redis.
async fn sha1hex(redis: &mut redis::aio::MultiplexedConnection, text: &str) -> String {
    redis::Script::new("return redis.sha1hex(ARGV[1])")
        .arg(text)
        .invoke_async(redis)
        .await
        .expect("redis.sha1hex")
}

/// Issue 32, part 5: an outsider that may only subscribe to a fair lock's
/// channel learns no owner token. A fair release that hands the lock over
/// (a grant) and the release that ends a `hold_at_least` each name the
/// next waiter, by its id (`redis.sha1hex` of its token), never by the
/// token, which would let the outsider release or extend that waiter's
/// lock. The messages are checked against every token of the scenario.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_32_the_lock_channel_carries_no_owner_token() {
    let server = RedisServer::start().await;
    let url = server.url();
    let mut outsider = redis::Client::open(url.as_str())
        .expect("client")
        .get_async_pubsub()
        .await
        .expect("the outsider's subscriber connection");
    outsider
        .subscribe("lock:{secret}")
        .await
        .expect("SUBSCRIBE");
    let (heard_tx, mut heard) = mpsc::unbounded_channel::<String>();
    let listener = tokio::spawn(async move {
        let mut messages = outsider.into_on_message();
        while let Some(message) = messages.next().await {
            let text = String::from_utf8_lossy(message.get_payload_bytes()).into_owned();
            if heard_tx.send(text).is_err() {
                return;
            }
        }
    });
    let token_of = |guard: &redlock_runtime::LockGuard| {
        redlock_runtime::test_util::owner_token(guard).to_owned()
    };
    let mut tokens = Vec::new();
    let locks = LockClient::connect(&url).await.expect("connect");

    // A grant: the release hands the lock to the waiter in line.
    let holder = locks.lock("secret").fair().acquire().await.expect("holder");
    tokens.push(token_of(&holder));
    let waiter = fair_waiter(
        LockClient::connect(&url).await.expect("connect"),
        "secret",
        Duration::from_secs(10),
    );
    wait_for_fair_waiters(&url, "secret", 1).await;
    holder.release().await.expect("release: a grant");
    let granted = waiter.await.expect("task").expect("the granted waiter");
    let granted_token = token_of(&granted);
    tokens.push(granted_token.clone());
    granted.release().await.expect("release");

    // The end of a minimum hold, with a waiter in line: it is named.
    let holding = locks
        .lock("secret")
        .fair()
        .hold_at_least(Duration::from_millis(200))
        .acquire()
        .await
        .expect("a holder with a minimum hold");
    tokens.push(token_of(&holding));
    let next = fair_waiter(
        LockClient::connect(&url).await.expect("connect"),
        "secret",
        Duration::from_secs(10),
    );
    wait_for_fair_waiters(&url, "secret", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // the hold is over
    holding.release().await.expect("release: the hold is over");
    let next = next.await.expect("task").expect("the woken waiter");
    let next_token = token_of(&next);
    tokens.push(next_token.clone());
    next.release().await.expect("release");

    // Both messages name their waiter by its id: the outsider heard them.
    let mut redis = redlock_tests::raw_connection(&url).await;
    let grant = format!("{}\u{1f}", sha1hex(&mut redis, &granted_token).await);
    let woken = sha1hex(&mut redis, &next_token).await;
    let mut messages: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(messages.iter().any(|m| m.starts_with(&grant)) && messages.contains(&woken)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, heard.recv()).await {
            Ok(Some(message)) => messages.push(message),
            _ => panic!("heard {messages:?}, not the grant {grant:?} and the wake-up {woken:?}"),
        }
    }
    // And whatever else came (the releases no one waited for).
    tokio::time::sleep(Duration::from_millis(100)).await;
    while let Ok(message) = heard.try_recv() {
        messages.push(message);
    }
    for token in &tokens {
        for message in &messages {
            assert!(
                !message.contains(token.as_str()),
                "the lock's channel carried an owner token: {message:?}"
            );
        }
    }
    listener.abort();
}
