//! Push wake-ups: a release wakes a waiter at once; when no message comes
//! (pub/sub unavailable, a lease that ran out), polling still gets it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;

use redlock_runtime::{LockClient, LockClientBuilder, RetryPolicy};
use redlock_tests::{Backend, RedisServer, Started};
use rstest::rstest;

/// A client whose backoff alone sleeps exactly 2 s between attempts.
async fn slow_poller(builder: LockClientBuilder) -> LockClient {
    builder
        .retry(RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(2)).jitter(false))
        .build()
        .await
        .expect("connect to the test Redis")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_within_50ms() {
    let server = RedisServer::start().await;
    let holder_client = LockClient::connect(server.url()).await.expect("connect");
    let waiter_client = slow_poller(LockClient::builder().url(server.url())).await;
    let holder = holder_client.lock("push").acquire().await.expect("holder");
    let waiter = tokio::spawn(async move {
        let guard = waiter_client
            .lock("push")
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .expect("acquire");
        (Instant::now(), guard)
    });
    // Let the waiter take its first busy answer and subscribe: polling
    // would now sleep 2 s.
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.release().await.expect("release");
    let released = Instant::now();
    let (acquired, _guard) = waiter.await.expect("waiter");
    let delay = acquired.saturating_duration_since(released);
    assert!(
        delay <= Duration::from_millis(50),
        "woken {delay:?} after the release; its backoff alone would have slept 2 s"
    );
}

/// How many EVALSHA calls Redis has served.
async fn evalsha_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_waiters_on_the_released_key_wake() {
    let server = RedisServer::start().await;
    let mut admin = redlock_tests::raw_connection(server.url()).await;
    let holders = LockClient::connect(server.url()).await.expect("connect");
    let waiters = slow_poller(LockClient::builder().url(server.url())).await;
    // Load the scripts, so no NOSCRIPT retry adds to the count below.
    holders
        .lock("warm-up")
        .acquire()
        .await
        .expect("warm-up")
        .release()
        .await
        .expect("warm-up release");
    let a = holders.lock("key-a").acquire().await.expect("a");
    let _b = holders.lock("key-b").acquire().await.expect("b");
    let on_b = tokio::spawn({
        let waiters = waiters.clone();
        async move {
            waiters
                .lock("key-b")
                .wait(Duration::from_secs(3))
                .try_acquire()
                .await
        }
    });
    let on_a = tokio::spawn({
        let waiters = waiters.clone();
        async move {
            waiters
                .lock("key-a")
                .wait(Duration::from_secs(10))
                .acquire()
                .await
        }
    });
    // Both waiters have taken their busy answers and sleep their 2 s backoff.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = evalsha_calls(&mut admin).await;
    a.release().await.expect("release a");
    // Held until the count is taken: its release would be counted too.
    let _guard_a = on_a.await.expect("task").expect("the key-a waiter wakes");
    let after = evalsha_calls(&mut admin).await;
    assert_eq!(
        after - before,
        2,
        "the release and the key-a waiter's acquire only: a woken key-b waiter would add an attempt"
    );
    assert!(on_b.await.expect("task").expect("no error").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pub_sub_cut_the_waiter_still_acquires_by_polling() {
    let server = RedisServer::start().await;
    // The waiter's user may not subscribe to anything: no push can reach it.
    let mut admin = redlock_tests::raw_connection(server.url()).await;
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "waiter",
            "on",
            ">pw",
            "~*",
            "resetchannels",
            "+@all",
        ])
        .query_async(&mut admin)
        .await
        .expect("ACL SETUSER");
    let holder_client = LockClient::connect(server.url()).await.expect("connect");
    let waiter_client = LockClient::builder()
        .url(format!("redis://waiter:pw@127.0.0.1:{}", server.port()))
        .retry(
            RetryPolicy::new(Duration::from_millis(300), Duration::from_millis(300)).jitter(false),
        )
        .build()
        .await
        .expect("waiter connects");
    let holder = holder_client.lock("cut").acquire().await.expect("holder");
    let waiter = tokio::spawn(async move {
        let guard = waiter_client
            .lock("cut")
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .expect("acquire");
        (Instant::now(), guard)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    holder.release().await.expect("release");
    let released = Instant::now();
    let (acquired, _guard) = waiter.await.expect("waiter");
    let delay = acquired.saturating_duration_since(released);
    assert!(
        delay <= Duration::from_millis(300 + 100),
        "polling got it {delay:?} after the release (one backoff step is 300 ms)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_found_by_polling_capped_by_its_pttl() {
    let server = RedisServer::start().await;
    let holder_client = LockClient::connect(server.url()).await.expect("connect");
    let waiter_client = slow_poller(LockClient::builder().url(server.url())).await;
    // The holder dies (no release, no message): its lease runs out.
    let holder = holder_client
        .lock("expires")
        .ttl(Duration::from_millis(700))
        .renew(false)
        .acquire()
        .await
        .expect("holder");
    let expires_at = Instant::now() + Duration::from_millis(700);
    std::mem::forget(holder);
    let guard = waiter_client
        .lock("expires")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("acquire");
    let late = Instant::now().saturating_duration_since(expires_at);
    assert!(
        late <= Duration::from_millis(100),
        "acquired {late:?} after the lease ran out; a 2 s backoff is capped by the holder's PTTL"
    );
    drop(guard);
}

/// `PUBLISH` and `SPUBLISH` calls served, summed over the case's servers.
async fn publishes(b: &Started) -> u64 {
    let mut total = 0;
    for url in b.urls() {
        let mut conn = redlock_tests::raw_connection(url).await;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .expect("INFO commandstats");
        for name in ["publish", "spublish"] {
            total += info
                .lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// Counts the hello messages Sentinels publish (every 2 s each) on the
/// case's servers, from subscriptions on each.
struct Hellos {
    heard: std::sync::Arc<AtomicU64>,
    listeners: Vec<tokio::task::JoinHandle<()>>,
}

impl Hellos {
    async fn listen(urls: &[String]) -> Self {
        let heard = std::sync::Arc::new(AtomicU64::new(0));
        let mut listeners = Vec::new();
        for url in urls {
            let client = redis::Client::open(url.as_str()).expect("the case's URL");
            let mut pubsub = client
                .get_async_pubsub()
                .await
                .expect("a pub/sub connection");
            pubsub
                .subscribe("__sentinel__:hello")
                .await
                .expect("subscribe to the Sentinels' hellos");
            let heard = std::sync::Arc::clone(&heard);
            listeners.push(tokio::spawn(async move {
                let mut messages = pubsub.into_on_message();
                while messages.next().await.is_some() {
                    heard.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        Self { heard, listeners }
    }

    fn heard(&self) -> u64 {
        self.heard.load(Ordering::SeqCst)
    }
}

impl Drop for Hellos {
    fn drop(&mut self) {
        for listener in &self.listeners {
            listener.abort();
        }
    }
}

/// Whether a waiter signalled that it waits for the lock `key` on any of
/// the case's servers: the waiters' own key `lock:{key}:waited` is there
/// (a cluster node that does not own the key answers MOVED, counted as
/// no).
async fn signalled(urls: &[String], key: &str) -> bool {
    for url in urls {
        let mut conn = redlock_tests::raw_connection(url).await;
        let there: redis::RedisResult<i64> = redis::cmd("EXISTS")
            .arg(format!("lock:{{{key}}}:waited"))
            .query_async(&mut conn)
            .await;
        if there == Ok(1) {
            return true;
        }
    }
    false
}

/// Waits (up to 10 s) until a waiter's busy attempt signalled that it
/// waits for the lock `key` on one of the servers at `urls`.
async fn until_signalled(urls: &[String], key: &str) {
    let started = Instant::now();
    while !signalled(urls, key).await {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{urls:?}: the waiter's busy attempts never signalled that they wait for {key}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The values the lock `key` holds on the case's servers (those that hold
/// it).
async fn values(urls: &[String], key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for url in urls {
        let mut conn = redlock_tests::raw_connection(url).await;
        let value: redis::RedisResult<Option<String>> = redis::cmd("GET")
            .arg(format!("lock:{{{key}}}"))
            .query_async(&mut conn)
            .await;
        if let Ok(Some(value)) = value {
            out.push(value);
        }
    }
    out
}

/// How long after `released` the waiter in `waiting` took its lock (it
/// must take it): its task returns when its acquire ended, and whether it
/// took the lock.
async fn taken_after(
    waiting: tokio::task::JoinHandle<(Instant, Result<(), redlock_runtime::LockError>)>,
    released: Instant,
) -> Duration {
    let (acquired, taken) = waiting.await.expect("waiter task");
    taken.expect("the waiter takes the lock");
    acquired.saturating_duration_since(released)
}

/// A release that no one waited for publishes nothing (the cost rslock's
/// release has: `GET`, `DEL`); a waiter's busy attempt signals that it
/// waits on a key of its own, never on the lock's value, which stays
/// exactly its holder's token, to extend, fence, inspect and release; and
/// that release publishes.
#[rstest]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn a_release_publishes_only_when_someone_waited(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let name = b.name();
        let holder = b.client().await;
        let waiter = b.client().await;
        // Scripts loaded and connections open before anything is counted.
        for locks in [&holder, &waiter] {
            let warm = locks.lock("warm-up").fenced().acquire().await;
            warm.expect("warm-up")
                .release()
                .await
                .expect("warm-up release");
        }
        // Sentinels publish hellos on the servers they watch, which
        // `INFO commandstats` counts with ours: count in a window none fell in.
        let hellos = Hellos::listen(&b.urls()).await;
        let mut window = 0;
        let published = loop {
            window += 1;
            let heard = hellos.heard();
            let before = publishes(&b).await;
            for i in 0..10 {
                let plain = holder.lock(format!("alone:{window}:{i}")).acquire().await;
                let fenced = holder
                    .lock(format!("fenced:{window}:{i}"))
                    .fenced()
                    .acquire()
                    .await;
                plain.expect("free").release().await.expect("release");
                fenced.expect("free").release().await.expect("release");
            }
            let published = publishes(&b).await - before;
            // A hello published in the window has reached the listener by then.
            tokio::time::sleep(Duration::from_millis(500)).await;
            if hellos.heard() == heard {
                break published;
            }
            assert!(
                window < 8,
                "{name}: a Sentinel hello fell in each of {window} windows"
            );
        };
        assert_eq!(published, 0, "{name}: releases no one waited for published");

        let guard = holder.lock("waited").acquire().await.expect("free");
        let waiting = tokio::spawn(async move {
            let taken = waiter
                .lock("waited")
                .wait(Duration::from_secs(30))
                .acquire()
                .await;
            taken.map(drop)
        });
        until_signalled(&b.urls(), "waited").await;
        let token = redlock_runtime::test_util::owner_token(&guard).to_owned();
        let held = values(&b.urls(), "waited").await;
        assert!(
            !held.is_empty() && held.iter().all(|v| *v == token),
            "{name}: a waiter wrote to the holder's value: {} values, {} of them the token",
            held.len(),
            held.iter().filter(|v| **v == token).count()
        );
        guard
            .extend(Duration::from_secs(20))
            .await
            .unwrap_or_else(|e| {
                panic!("{name}: a waited-for lock is still its holder's to extend: {e}")
            });
        guard
            .fencing_token()
            .await
            .unwrap_or_else(|e| panic!("{name}: and to fence: {e}"));
        let info = holder.inspect("waited").await.expect("inspect");
        let shown = info.holder.expect("held").client_name;
        assert_eq!(
            shown.as_deref(),
            Some(holder.client_name()),
            "{name}: the holder is shown"
        );
        let before = publishes(&b).await;
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("{name}: and to release: {e}"));
        waiting
            .await
            .expect("task")
            .expect("the waiter takes the lock");
        assert!(
            publishes(&b).await > before,
            "{name}: the release of a lock someone waited for published nothing"
        );
    });
}

/// However the release falls against the waiter's first busy answer,
/// its subscription and its signalling attempt, the waiter is woken by a
/// push (its backoff alone sleeps 2 s): a release before the signal leaves
/// the lock free for the signalling attempt, one after it publishes.
#[rstest]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn a_release_racing_the_waiters_subscription_still_wakes_it(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let name = b.name();
        let holder = b.client().await;
        let waiter = slow_poller(b.builder()).await;
        for round in 0..20u64 {
            let key = format!("race:{round}");
            let guard = holder.lock(key.as_str()).acquire().await.expect("free");
            let waiting = tokio::spawn({
                let (waiter, key) = (waiter.clone(), key.clone());
                async move {
                    let taken = waiter
                        .lock(key)
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await;
                    (Instant::now(), taken.map(drop))
                }
            });
            // Each round releases a little later: from before the waiter's
            // first attempt to after its subscription and signal.
            tokio::time::sleep(Duration::from_millis(round * 3)).await;
            guard.release().await.expect("release");
            let delay = taken_after(waiting, Instant::now()).await;
            assert!(
                delay < Duration::from_secs(1),
                "{name}, round {round}: taken {delay:?} after the release, a missed wake-up"
            );
        }
    });
}

/// A rolling upgrade: a lock held by a client of an older version (its
/// token starts with the UUID; its scripts compare the value exactly) is
/// never written to by a waiter of this one, so the old holder keeps its
/// renewals and its release, and its release (which always publishes)
/// wakes the new waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_leaves_an_older_clients_lock_unmarked() {
    let server = RedisServer::start().await;
    let mut old = redlock_tests::raw_connection(server.url()).await;
    let waiters = slow_poller(LockClient::builder().url(server.url())).await;
    let old_token = "0b7e4c1a-5d2f-4c3e-9a1b-2f6d8e0c4a7b.1700000000000.old-node:7";
    let taken: Option<String> = redis::cmd("SET")
        .arg(&["lock:{upgrade}", old_token, "NX", "PX", "30000"])
        .query_async(&mut old)
        .await
        .expect("the old client's SET NX");
    assert!(taken.is_some());
    let before = evalsha_calls(&mut old).await;
    let waiting = tokio::spawn(async move {
        let taken = waiters
            .lock("upgrade")
            .wait(Duration::from_secs(30))
            .acquire()
            .await;
        (Instant::now(), taken.map(drop))
    });
    // The waiter's first attempt is a plain SET NX; the next, after it
    // subscribed, is the script that signals.
    let started = Instant::now();
    while evalsha_calls(&mut old).await == before {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no second attempt"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let value: String = redis::cmd("GET")
        .arg("lock:{upgrade}")
        .query_async(&mut old)
        .await
        .expect("GET");
    assert_eq!(value, old_token, "an older client's lock was marked");
    // The older version's release, as it was: exact compare, always publish.
    let released: i64 = redis::cmd("EVAL")
        .arg(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) \
             redis.call('PUBLISH', KEYS[1], '') return 1 end return 0",
        )
        .arg(1)
        .arg("lock:{upgrade}")
        .arg(old_token)
        .query_async(&mut old)
        .await
        .expect("the old client's release");
    assert_eq!(released, 1, "the old holder could not release its lock");
    let delay = taken_after(waiting, Instant::now()).await;
    assert!(
        delay < Duration::from_secs(1),
        "woken {delay:?} after the old release (its backoff alone sleeps 2 s)"
    );
}

/// A multi-lock whose keys share a hash tag waits like a lock: its group
/// script signals that it waits for the busy key, so that key's release
/// wakes it by a push.
#[rstest]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn a_multi_lock_group_waiter_signals_on_the_busy_key_and_is_woken(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let name = b.name();
        let holder = b.client().await;
        let waiter = slow_poller(b.builder()).await;
        let guard = holder.lock("{acct:1}:to").acquire().await.expect("free");
        let waiting = tokio::spawn(async move {
            let both = waiter
                .multi_lock(["{acct:1}:from", "{acct:1}:to"])
                .wait(Duration::from_secs(30))
                .acquire()
                .await;
            (Instant::now(), both.map(drop))
        });
        until_signalled(&b.urls(), "{acct:1}:to").await;
        guard.release().await.expect("a waited-for lock is its holder's to release");
        let delay = taken_after(waiting, Instant::now()).await;
        assert!(
            delay < Duration::from_secs(1),
            "{name}: the group took its locks {delay:?} after the release (its backoff alone sleeps 2 s)"
        );
    });
}

/// A restart from a snapshot taken before the waiter's signal brings the
/// lock back without it: its holder still renews and releases it, and the
/// waiter still gets it, by its next attempt (which signals again) or its
/// polling, never stranded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_rolled_back_by_a_snapshot_loses_no_lock_and_strands_no_waiter() {
    let mut server = RedisServer::start().await;
    let urls = [server.url()];
    let holders = LockClient::connect(server.url()).await.expect("connect");
    let waiters = slow_poller(LockClient::builder().url(server.url())).await;
    let guard = holders
        .lock("rolled")
        .ttl(Duration::from_secs(20))
        .acquire()
        .await
        .expect("free");
    let mut admin = redlock_tests::raw_connection(server.url()).await;
    let _: () = redis::cmd("SAVE")
        .query_async(&mut admin)
        .await
        .expect("SAVE");
    let waiting = tokio::spawn(async move {
        let taken = waiters
            .lock("rolled")
            .wait(Duration::from_secs(30))
            .acquire()
            .await;
        (Instant::now(), taken.map(drop))
    });
    until_signalled(&urls, "rolled").await;
    server.restart_keeping_data().await; // the snapshot has no signal
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("the holder still extends its lock after the rollback");
    guard.release().await.expect("and releases it");
    let delay = taken_after(waiting, Instant::now()).await;
    assert!(
        delay < Duration::from_secs(3),
        "taken {delay:?} after the release: its backoff alone sleeps 2 s"
    );
}
