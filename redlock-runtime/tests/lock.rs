//! The lock runtime: acquire, wait, release, the watchdog, lost locks,
//! fencing tokens, mutual exclusion and bad input, each scenario run over
//! every backend where it behaves the same (in memory, one Redis, Redlock:
//! the cases of a case list); then what only Redis has: what is stored,
//! cancellation, Redis paused, slow, going away and coming back, pools and
//! scripts.
//!
//! Each test (each case) starts its own servers, so they run in parallel
//! without sharing keys.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use redlock_runtime::{ConfigError, LockClient, LockError, LostReason};
use redlock_tests::{Backend, FaultProxy, RedisServer};
use rstest::rstest;
use tokio::time::Instant;

async fn client(url: &str) -> LockClient {
    LockClient::connect(url)
        .await
        .expect("connect to the test Redis")
}

// One scenario, every backend where it behaves the same: each case starts
// its backend (a paused clock for memory, so its times are exact).

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn acquire_busy_release(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let guard = client.lock("a").acquire().await.expect("free lock");
        assert!(guard.is_held());
        assert_eq!(guard.key(), "a");

        let err = client.lock("a").acquire().await.expect_err("held");
        assert!(
            matches!(err, LockError::Busy { ref key, .. } if key == "a"),
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
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn wait_is_honoured_while_another_owner_holds_the_lock(#[case] backend: Backend) {
    backend.run(|b| async move {
        let locks = b.client().await;
        let _holder = locks.lock("busy").acquire().await.expect("holder");
        let wait = Duration::from_millis(750);
        let started = Instant::now();
        let err = locks
            .lock("busy")
            .wait(wait)
            .acquire()
            .await
            .expect_err("held the whole wait");
        let took = started.elapsed();
        assert!(
            matches!(err, LockError::WaitTimeout { waited, .. } if waited == wait),
            "busy is reported as busy, with the wait: {err}"
        );
        assert!(
            took >= wait && took <= wait + b.slack().max(Duration::from_millis(50)),
            "{}: took {took:?} for a wait of {wait:?}",
            b.name()
        );
        assert!(
            err.to_string().contains("`busy`"),
            "message names the key: {err}"
        );
        let err = locks.lock("busy").acquire().await.expect_err("held");
        assert!(matches!(err, LockError::Busy { .. }), "{err}");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn a_waiter_gets_the_lock_when_the_holder_releases(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let holder = client.lock("h").acquire().await.expect("holder");
        let c = client.clone();
        let waiter =
            tokio::spawn(async move { c.lock("h").wait(Duration::from_secs(10)).acquire().await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished());
        holder.release().await.expect("release");
        let guard = waiter.await.expect("task").expect("waiter acquires");
        assert!(guard.is_held());
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn without_watchdog_the_lease_runs_out_lost_fires_and_a_waiter_gets_the_lock(
    #[case] backend: Backend,
) {
    backend.run(|b| async move {
        let locks = b.client().await;
        let ttl = Duration::from_millis(800);
        let holder = locks
            .lock("expire")
            .ttl(ttl)
            .renew(false)
            .fenced()
            .acquire()
            .await
            .expect("holder");
        // Fenced: the token came with the acquire, so the holder still has
        // it after its lease ran out (a token asked for only then is Lost).
        let holder_token = holder.fencing_token().await.expect("fencing token");
        let started = Instant::now();
        let ((reason, lost_after), (next, took)) =
            tokio::join!(async { (holder.lost().await, started.elapsed()) }, async {
                let next = locks
                    .lock("expire")
                    .wait(Duration::from_secs(5))
                    .acquire()
                    .await
                    .expect("the lease runs out within the wait");
                (next, started.elapsed())
            },);
        assert_eq!(reason, LostReason::Expired);
        // The holder's lease began before its acquire returned.
        assert!(
            lost_after <= ttl + b.slack() && lost_after + b.slack() >= ttl,
            "{}: lost() fired {lost_after:?} after the acquire; ttl {ttl:?}",
            b.name()
        );
        assert!(!holder.is_held());
        // The lease is over once its last millisecond passed: a waiter's
        // timer fires one tick (1 ms) later.
        assert!(
            took <= ttl + b.slack() + Duration::from_millis(1),
            "{}: waiter woke {took:?} after the request; ttl {ttl:?}",
            b.name()
        );
        assert!(next.fencing_token().await.expect("fencing token") > holder_token);
        // The old owner's release must not delete the new owner's lock.
        let err = holder.release().await.expect_err("lost");
        assert!(err.is_lost(), "{err}");
        assert!(next.is_held());
        if let [server] = b.servers() {
            let mut redis = redlock_tests::raw_connection(server.url()).await;
            let stored: String = redis.get("lock:{expire}").await.expect("GET");
            assert_eq!(
                stored,
                redlock_runtime::test_util::owner_token(&next),
                "the new owner's lock is untouched"
            );
        }
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn the_watchdog_keeps_a_lock_past_its_ttl(#[case] backend: Backend) {
    backend.run(|b| async move {
        let locks = b.client().await;
        let other = b.client().await;
        let ttl = Duration::from_millis(400);
        let guard = locks
            .lock("long-job")
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        let lost = guard.lost();
        tokio::select! {
            reason = lost => panic!("lock lost while the watchdog ran: {reason}"),
            () = tokio::time::sleep(ttl * 5) => {}
        }
        assert!(guard.is_held());
        assert!(
            other
                .lock("long-job")
                .try_acquire()
                .await
                .expect("no error")
                .is_none(),
            "another client must still find it held after 5 x ttl"
        );
        guard.release().await.expect("still ours to release");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn extend_changes_the_lease(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let ttl = Duration::from_millis(200);
        let guard = client
            .lock("x")
            .ttl(ttl)
            .renew(false)
            .acquire()
            .await
            .expect("acquire");
        guard.extend(ttl * 10).await.expect("extend");
        tokio::time::sleep(ttl * 5).await;
        assert!(guard.is_held());
        assert!(guard.remaining() <= ttl * 5);
        assert!(client.lock("x").try_acquire().await.expect("ok").is_none());
        // A shorter ttl shortens the lease, and the watchdog-less lock then ends.
        guard.extend(ttl).await.expect("extend");
        assert_eq!(guard.lost().await, LostReason::Expired);
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn dropping_a_guard_releases_it(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let guard = client.lock("d").acquire().await.expect("acquire");
        drop(guard);
        // The release runs on a spawned task: let it.
        tokio::task::yield_now().await;
        let started = Instant::now();
        client
            .lock("d")
            .wait(Duration::from_secs(1))
            .acquire()
            .await
            .expect("released on drop");
        // In memory at once (no time passed); on Redis within a round trip.
        assert!(started.elapsed() <= b.slack(), "{:?}", started.elapsed());
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn fencing_tokens_increase_per_key(#[case] backend: Backend) {
    backend.run(|b| async move {
        let client = b.client().await;
        let mut last = 0;
        for _ in 0..5 {
            let g = client.lock("f").acquire().await.expect("acquire");
            assert!(g.fencing_token().await.expect("fencing token") > last);
            last = g.fencing_token().await.expect("fencing token");
            g.release().await.expect("release");
        }
        // Tokens are max(counter + 1, the store's clock in µs) on every
        // backend. In memory on tokio's paused clock the store's clock
        // stands still at its start, so there they count acquisitions.
        if b.backend() == Backend::Memory {
            assert_eq!(last, 5);
        }
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn bad_input_gives_clear_typed_errors(#[case] backend: Backend) {
    backend.run(|b| async move {
        let locks = b.client().await;

        let err = locks.lock("").acquire().await.expect_err("empty key");
        assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
        assert!(err.to_string().contains("empty"), "{err}");

        let err = locks
            .lock("x".repeat(1025))
            .acquire()
            .await
            .expect_err("oversized key");
        assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
        assert!(err.to_string().contains("1024"), "{err}");

        let err = locks
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

        // Nothing was written by the rejected requests.
        for server in b.servers() {
            let mut redis = redlock_tests::raw_connection(server.url()).await;
            let keys: Vec<String> = redis.keys("*").await.expect("KEYS");
            assert!(keys.is_empty(), "{keys:?}");
        }

        locks
            .lock("k".repeat(1024))
            .acquire()
            .await
            .expect("1024 bytes is fine");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::manager(Backend::Manager)]
#[case::valkey_manager(Backend::ValkeyManager)]
fn mutual_exclusion_four_nodes_sixteen_tasks_two_thousand_acquisitions(#[case] backend: Backend) {
    const NODES: usize = 4;
    const TASKS: usize = 16;
    const EACH: usize = 32;
    const TOTAL: usize = NODES * TASKS * EACH;
    // Tasks on two worker threads, so holders could really overlap.
    backend.run_threaded(|b| async move {
        let inside = Arc::new(AtomicBool::new(false));
        let fences = Arc::new(std::sync::Mutex::new(Vec::with_capacity(TOTAL)));
        let mut tasks = Vec::new();
        for _node in 0..NODES {
            // Each "node" has its own client: separate connections (in
            // memory, clients of one store).
            let client = b.client().await;
            for _task in 0..TASKS {
                let (client, inside, fences) = (client.clone(), inside.clone(), fences.clone());
                tasks.push(tokio::spawn(async move {
                    for _ in 0..EACH {
                        let guard = client
                            .lock("contended")
                            .ttl(Duration::from_secs(5))
                            .wait(Duration::from_secs(60))
                            .acquire()
                            .await
                            .expect("acquire within the wait");
                        assert!(
                            !inside.swap(true, Ordering::SeqCst),
                            "two holders inside the critical section at once"
                        );
                        let token = guard.fencing_token().await.expect("fencing token");
                        fences.lock().expect("fence log").push(token);
                        // Give another holder every chance to overlap.
                        tokio::task::yield_now().await;
                        inside.store(false, Ordering::SeqCst);
                        guard.release().await.expect("release while held");
                    }
                }));
            }
        }
        for task in tasks {
            task.await.expect("contending task");
        }
        let fences = fences.lock().expect("fence log");
        assert_eq!(fences.len(), TOTAL, "{} acquisitions", fences.len());
        for pair in fences.windows(2) {
            assert!(
                pair[1] > pair[0],
                "fencing tokens must strictly increase in lock order: {} then {}",
                pair[0],
                pair[1]
            );
        }
    });
}

/// One scenario over every topology: 3 clients (service nodes) x 8 tasks
/// on keys that, on a cluster, land on every master; per key, one holder at
/// a time and fencing tokens strictly increasing in lock order.
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
fn three_clients_eight_tasks_on_keys_over_every_master_exclude_and_fence(#[case] backend: Backend) {
    const CLIENTS: usize = 3;
    const TASKS: usize = 8;
    const EACH: usize = 24;
    const KEYS: usize = 9;
    backend.run_threaded(|b| async move {
        let keys: Vec<String> = (0..KEYS).map(|i| format!("account:{i}")).collect();
        if let Some(cluster) = b.cluster() {
            let mut masters = std::collections::BTreeSet::new();
            for key in &keys {
                let slot = cluster.slot_of(&format!("lock:{{{key}}}")).await;
                masters.insert(cluster.master_of_slot(slot).await);
            }
            assert_eq!(masters.len(), 3, "the keys must cover all three masters");
        }
        let inside: Arc<Vec<AtomicBool>> =
            Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
        let fences: Arc<Vec<std::sync::Mutex<Vec<u64>>>> = Arc::new(
            (0..KEYS)
                .map(|_| std::sync::Mutex::new(Vec::new()))
                .collect(),
        );
        let mut tasks = Vec::new();
        for _ in 0..CLIENTS {
            let client = b.client().await;
            for task in 0..TASKS {
                let (client, inside, fences, keys) =
                    (client.clone(), inside.clone(), fences.clone(), keys.clone());
                tasks.push(tokio::spawn(async move {
                    for i in 0..EACH {
                        let k = (task * 7 + i) % KEYS;
                        let guard = client
                            .lock(keys[k].clone())
                            .ttl(Duration::from_secs(5))
                            .wait(Duration::from_secs(60))
                            .acquire()
                            .await
                            .expect("acquire within the wait");
                        assert!(
                            !inside[k].swap(true, Ordering::SeqCst),
                            "two holders of {} at once",
                            keys[k]
                        );
                        let token = guard.fencing_token().await.expect("fencing token");
                        fences[k].lock().expect("fence log").push(token);
                        tokio::task::yield_now().await;
                        inside[k].store(false, Ordering::SeqCst);
                        guard.release().await.expect("release while held");
                    }
                }));
            }
        }
        for task in tasks {
            task.await.expect("contending task");
        }
        let mut total = 0;
        for (key, log) in keys.iter().zip(fences.iter()) {
            let log = log.lock().expect("fence log");
            total += log.len();
            for pair in log.windows(2) {
                assert!(
                    pair[1] > pair[0],
                    "{}: fencing tokens of {key} must strictly increase: {} then {}",
                    b.name(),
                    pair[0],
                    pair[1]
                );
            }
        }
        assert_eq!(total, CLIENTS * TASKS * EACH);
    });
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

/// The settings half of the bad-input checks: no backend involved.
#[tokio::test]
async fn bad_settings_give_clear_errors() {
    let err = LockClient::builder()
        .default_ttl(Duration::ZERO)
        .in_memory()
        .build_unchecked()
        .expect_err("zero default ttl");
    assert!(err.to_string().contains("default_ttl"), "{err}");

    // An unreachable server: a port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let started = Instant::now();
    let err = LockClient::builder()
        .url(format!("redis://:hunter2@127.0.0.1:{port}"))
        .connection_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect_err("nothing listens there");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(err, LockError::Connect { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&port.to_string()), "names the server: {msg}");
    assert!(msg.to_lowercase().contains("refused"), "says why: {msg}");
    assert!(!msg.contains("hunter2"), "password leaked: {msg}");
    assert!(!format!("{err:?}").contains("hunter2"));

    let err = LockClient::connect("http://:hunter2@example")
        .await
        .expect_err("not a redis URL");
    assert!(
        matches!(err, LockError::Config(ConfigError::InvalidUrl { .. })),
        "{err:?}"
    );
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

// Redis only: what is stored in Redis, and Redis's own failures.

#[tokio::test]
async fn acquire_writes_token_and_fence_beside_each_other() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let guard = locks
        .lock("order:42")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .expect("acquire");
    let stored: String = redis.get("lock:{order:42}").await.expect("GET");
    assert_eq!(stored, redlock_runtime::test_util::owner_token(&guard));
    // `=uuid.since.name`: a plain token (`=`: no waiter of any version
    // writes to its value), a random secret, the acquire time and the
    // name.
    let token = redlock_runtime::test_util::owner_token(&guard);
    let (secret, rest) = token.split_once('.').expect("uuid first");
    let secret = secret.strip_prefix('=').expect("a plain token");
    assert!(uuid::Uuid::parse_str(secret).is_ok_and(|u| u.get_version_num() == 4));
    let (since, name) = rest.split_once('.').expect("then the time");
    assert!(since.parse::<u64>().is_ok(), "{since}");
    assert_eq!(name, locks.client_name());
    let pttl: i64 = redis.pttl("lock:{order:42}").await.expect("PTTL");
    assert!(pttl > 9_000 && pttl <= 10_000, "pttl {pttl}");
    let token = guard.fencing_token().await.expect("fencing token");
    let fence: u64 = redis.get("lock:{order:42}:fence").await.expect("GET fence");
    assert_eq!(fence, token);
    guard.release().await.expect("release");
    let exists: bool = redis.exists("lock:{order:42}").await.expect("EXISTS");
    assert!(!exists, "released lock is deleted");
    let fence_after: u64 = redis.get("lock:{order:42}:fence").await.expect("GET fence");
    assert_eq!(fence_after, fence, "the fencing counter outlives the lock");
}

#[tokio::test]
async fn deleting_the_key_makes_lost_fire_within_ttl() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let ttl = Duration::from_millis(900);
    let guard = locks.lock("del").ttl(ttl).acquire().await.expect("acquire");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let _: () = redis.del("lock:{del}").await.expect("DEL");
    let started = Instant::now();
    let reason = tokio::time::timeout(ttl, guard.lost())
        .await
        .expect("lost() must fire within ttl of the key's deletion");
    assert_eq!(reason, LostReason::TokenGone);
    assert!(!guard.is_held());
    assert!(started.elapsed() < ttl);
    let err = guard.release().await.expect_err("releasing a lost lock");
    assert!(matches!(err, LockError::Lost { .. }), "{err}");
}

#[tokio::test]
async fn restarting_redis_makes_lost_fire_within_ttl() {
    let mut server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let ttl = Duration::from_millis(1_500);
    let guard = locks
        .lock("restart")
        .ttl(ttl)
        .acquire()
        .await
        .expect("acquire");
    let started = Instant::now();
    server.restart().await;
    let reason = tokio::time::timeout(ttl.saturating_sub(started.elapsed()), guard.lost())
        .await
        .expect("lost() must fire within ttl of a restart that emptied Redis");
    assert_eq!(reason, LostReason::TokenGone);
    // The same client works again after the restart.
    let again = locks
        .lock("restart")
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("acquire after restart");
    again.release().await.expect("release");
}

#[tokio::test]
async fn black_holed_connection_makes_lost_fire_within_ttl() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let locks = client(&proxy.url()).await;
    let ttl = Duration::from_millis(1_200);
    let guard = locks
        .lock("partition")
        .ttl(ttl)
        .acquire()
        .await
        .expect("acquire");
    proxy.blackhole(true);
    let started = Instant::now();
    let reason = tokio::time::timeout(ttl + Duration::from_millis(100), guard.lost())
        .await
        .expect("lost() must fire within ttl when Redis stops answering");
    assert_eq!(reason, LostReason::Unconfirmed);
    assert!(!guard.is_held());
    // Presumed lost no later than the lease could have ended on Redis.
    assert!(started.elapsed() <= ttl + Duration::from_millis(100));
}

#[tokio::test]
async fn aborting_a_task_that_holds_a_guard_frees_the_key_within_200ms() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn({
        let locks = locks.clone();
        async move {
            let _guard = locks
                .lock("cancel")
                .ttl(Duration::from_secs(30))
                .acquire()
                .await
                .expect("acquire");
            held_tx.send(()).expect("test is listening");
            std::future::pending::<()>().await;
        }
    });
    held_rx.await.expect("holder acquired");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let exists: bool = redis.exists("lock:{cancel}").await.expect("EXISTS");
    assert!(exists);
    holder.abort();
    let aborted = Instant::now();
    let mut gone = false;
    // Bounded poll: at most 200 ms in 5 ms steps.
    while aborted.elapsed() < Duration::from_millis(200) {
        let exists: bool = redis.exists("lock:{cancel}").await.expect("EXISTS");
        if !exists {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        gone,
        "the key must be deleted within 200 ms of the abort (ttl was 30 s)"
    );
}

#[tokio::test]
async fn wait_is_honoured_while_redis_is_paused() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let wait = Duration::from_millis(1_200);
    server.pause();
    let started = Instant::now();
    let result = locks.lock("paused").wait(wait).acquire().await;
    let took = started.elapsed();
    server.resume();
    let err = result.expect_err("Redis is paused");
    assert!(
        took >= wait - Duration::from_millis(100) && took <= wait + Duration::from_millis(100),
        "acquire took {took:?} for a wait of {wait:?}"
    );
    assert!(
        err.is_transient() && !err.is_busy(),
        "an outage is not busy: {err}"
    );
    assert!(err.to_string().contains("`paused`"), "{err}");
}

#[tokio::test]
async fn redis_down_fails_fast_and_the_client_recovers() {
    let mut server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    locks
        .lock("warm")
        .acquire()
        .await
        .expect("works before the kill")
        .release()
        .await
        .expect("release");
    server.kill().await;
    let started = Instant::now();
    let err = locks
        .lock("down")
        .acquire()
        .await
        .expect_err("Redis is down");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "failed after {:?}",
        started.elapsed()
    );
    assert!(err.is_transient(), "a typed transient error: {err:?}");
    server.restart().await;
    let guard = locks
        .lock("down")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the same client works once Redis is back");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn debug_output_never_shows_the_password() {
    let server = RedisServer::start().await;
    let client = LockClient::builder()
        .url(format!(
            "redis://default:hunter2@127.0.0.1:{}",
            server.port()
        ))
        .build_unchecked()
        .expect("valid settings");
    let debug = format!("{client:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("***"), "{debug}");
    let builder = LockClient::builder().url("redis://:hunter2@127.0.0.1:1");
    assert!(!format!("{builder:?}").contains("hunter2"));
}

#[tokio::test]
async fn extend_and_release_are_checked_against_the_token() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let guard = locks
        .lock("ext")
        .ttl(Duration::from_secs(2))
        .renew(false)
        .acquire()
        .await
        .expect("acquire");
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("extend while held");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let pttl: i64 = redis.pttl("lock:{ext}").await.expect("PTTL");
    assert!(pttl > 19_000, "extended: {pttl}");
    // Someone else's value under the key: extend and release refuse to act.
    let _: () = redis.set("lock:{ext}", "someone-else").await.expect("SET");
    let err = guard
        .extend(Duration::from_secs(5))
        .await
        .expect_err("lost");
    assert!(err.is_lost(), "{err}");
    let err = guard.release().await.expect_err("lost");
    assert!(err.is_lost(), "{err}");
    let stored: String = redis.get("lock:{ext}").await.expect("GET");
    assert_eq!(
        stored, "someone-else",
        "another owner's lock is never deleted"
    );
}

#[tokio::test]
async fn key_prefix_and_from_pool() {
    let server = RedisServer::start().await;
    let manager =
        redlock_runtime::bb8_redis::RedisConnectionManager::new(server.url()).expect("manager");
    let pool = redlock_runtime::bb8_redis::bb8::Pool::builder()
        .max_size(2)
        .build(manager)
        .await
        .expect("pool");
    let locks = LockClient::builder()
        .pool(pool)
        .key_prefix("app:locks:")
        .build()
        .await
        .expect("client over the pool");
    let guard = locks.lock("k").acquire().await.expect("acquire");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let exists: bool = redis.exists("app:locks:{k}").await.expect("EXISTS");
    assert!(exists);
    guard.release().await.expect("release");
    let plain = LockClient::from_pool(locks.pool().expect("redis client").clone());
    plain
        .lock("k")
        .acquire()
        .await
        .expect("from_pool")
        .release()
        .await
        .expect("release");
}

#[tokio::test]
async fn scripts_are_reloaded_after_script_flush() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    locks
        .lock("s")
        .acquire()
        .await
        .expect("loads the scripts")
        .release()
        .await
        .expect("release");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    // EVALSHA now answers NOSCRIPT; the client loads the script and retries.
    let guard = locks
        .lock("s")
        .acquire()
        .await
        .expect("acquire after flush");
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    guard
        .extend(Duration::from_secs(5))
        .await
        .expect("extend after flush");
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    guard.release().await.expect("release after flush");
}

#[tokio::test]
async fn a_slow_redis_gives_a_typed_timeout_within_the_command_timeout() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let locks = LockClient::builder()
        .url(proxy.url())
        .command_timeout(Duration::from_millis(200))
        .build()
        .await
        .expect("client through the proxy");
    proxy.set_latency(Duration::from_millis(400));
    let started = Instant::now();
    let err = locks.lock("slow").acquire().await.expect_err("too slow");
    let took = started.elapsed();
    assert!(
        matches!(err, LockError::Timeout { .. }),
        "a slow Redis is a timeout: {err:?}"
    );
    assert!(took < Duration::from_millis(400), "took {took:?}");
    assert!(err.to_string().contains("`slow`"), "{err}");
    proxy.set_latency(Duration::ZERO);
    let guard = locks
        .lock("slow")
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("works again once Redis is fast");
    // A release is bounded the same way (its commands on the cached
    // connection run under the driver's timeout, set to the time left:
    // `store/server/bounded.rs`), and goes on in the background.
    proxy.set_latency(Duration::from_millis(400));
    let started = Instant::now();
    let err = guard.release().await.expect_err("too slow");
    let took = started.elapsed();
    assert!(matches!(err, LockError::Timeout { .. }), "{err:?}");
    assert!(took < Duration::from_millis(400), "took {took:?}");
    proxy.set_latency(Duration::ZERO);
    let again = locks
        .lock("slow")
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("the background release (or the lease) frees it");
    again.release().await.expect("release");
}

#[tokio::test]
async fn an_exhausted_pool_is_a_clear_error() {
    let server = RedisServer::start().await;
    let manager =
        redlock_runtime::bb8_redis::RedisConnectionManager::new(server.url()).expect("manager");
    let pool = redlock_runtime::bb8_redis::bb8::Pool::builder()
        .max_size(1)
        .connection_timeout(Duration::from_millis(300))
        .build(manager)
        .await
        .expect("pool");
    // The application holds the only connection.
    let held = pool.get_owned().await.expect("the one connection");
    let locks = LockClient::from_pool(pool.clone());
    let started = Instant::now();
    let err = locks
        .lock("p")
        .acquire()
        .await
        .expect_err("no connection to be had");
    assert!(matches!(err, LockError::Pool { .. }), "{err:?}");
    assert!(err.is_transient());
    assert!(
        err.to_string().contains("pool is exhausted"),
        "says what to look at: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    drop(held);
    locks
        .lock("p")
        .acquire()
        .await
        .expect("works once a connection is free")
        .release()
        .await
        .expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_renewal_keeps_a_thousand_locks_alive_in_few_round_trips() {
    const LOCKS: usize = 1_000;
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let ttl = Duration::from_millis(900);
    let mut guards = Vec::with_capacity(LOCKS);
    // Taken over ~ a third of the ttl, so their renewals are not naturally aligned.
    for i in 0..LOCKS {
        guards.push(
            locks
                .lock(format!("batch:{i}"))
                .ttl(ttl)
                .acquire()
                .await
                .expect("acquire"),
        );
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    assert_eq!(locks.held_locks(), LOCKS);
    let before = redlock_runtime::test_util::renewal_round_trips(&locks);
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let hold = ttl * 3;
    let started = Instant::now();
    tokio::time::sleep(hold / 2).await;
    // The renewal pipeline recovers from a flushed script cache (NOSCRIPT).
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    tokio::time::sleep(hold.saturating_sub(started.elapsed())).await;
    let round_trips = redlock_runtime::test_util::renewal_round_trips(&locks) - before;
    eprintln!("{LOCKS} locks, {hold:?} hold: {round_trips} renewal round trips");

    let lost: Vec<_> = guards
        .iter()
        .filter(|g| !g.is_held())
        .map(|g| g.key())
        .collect();
    assert!(lost.is_empty(), "locks lost while renewed: {lost:?}");
    let mut pipe = redis::pipe();
    for i in 0..LOCKS {
        pipe.get(format!("lock:{{batch:{i}}}"));
    }
    let stored: Vec<Option<String>> = pipe.query_async(&mut redis).await.expect("GETs");
    for (guard, stored) in guards.iter().zip(&stored) {
        assert_eq!(
            stored.as_deref(),
            Some(redlock_runtime::test_util::owner_token(guard)),
            "{} in Redis",
            guard.key()
        );
    }
    // Renewal period is ttl/3; at most two cohorts per period, plus the
    // round trip that reloaded the flushed script.
    let periods = hold.as_secs_f64() / (ttl / 3).as_secs_f64();
    let allowed = (2.0 * periods).ceil() as u64 + 2;
    assert!(
        round_trips <= allowed,
        "{round_trips} renewal round trips for {LOCKS} locks over {periods:.0} periods (allowed {allowed})"
    );
    assert!(
        round_trips >= periods as u64 / 2,
        "renewals happened: {round_trips}"
    );
    for guard in guards {
        guard.release().await.expect("release");
    }
    assert_eq!(locks.held_locks(), 0);
}

/// A client over the user's `ConnectionManager` takes locks again once a
/// restarted Redis is back: the manager reconnects by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_manager_client_recovers_after_a_restart() {
    let mut server = RedisServer::start().await;
    let client = redis::Client::open(server.url()).expect("a valid URL");
    let manager = redis::aio::ConnectionManager::new(client)
        .await
        .expect("a ConnectionManager");
    let locks = LockClient::from_connection_manager(manager);
    assert_eq!(locks.target(), "ConnectionManager");
    let guard = locks.lock("manager:restart").acquire().await.expect("free");
    guard.release().await.expect("released");
    server.restart().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match locks.lock("manager:restart").acquire().await {
            Ok(guard) => {
                guard.release().await.expect("released");
                break;
            }
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "not back after 10 s: {e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// `WAIT` on a `ConnectionManager`'s one connection would hold up every
/// other command: `.replicas(..)` is refused with one, as are the settings
/// of connections the client opens itself.
#[tokio::test]
async fn a_connection_manager_refuses_replicas_and_pool_settings() {
    let server = RedisServer::start().await;
    let manager = || async {
        let client = redis::Client::open(server.url()).expect("a valid URL");
        redis::aio::ConnectionManager::new(client)
            .await
            .expect("a ConnectionManager")
    };
    let refused = |builder: redlock_runtime::LockClientBuilder| match builder.build_unchecked() {
        Err(LockError::Config(ConfigError::NotForTarget { setting, .. })) => setting,
        other => panic!("expected NotForTarget, got {other:?}"),
    };
    let with = |m| LockClient::builder().connection_manager(m);
    assert_eq!(
        refused(with(manager().await).replicas(1, Duration::from_millis(50))),
        "replicas"
    );
    assert_eq!(refused(with(manager().await).pool_size(2)), "pool_size");
    assert_eq!(
        refused(with(manager().await).connection_timeout(Duration::from_secs(1))),
        "connection_timeout"
    );
}

/// By default the acquire is a plain `SET NX` and the fencing token is
/// issued on first ask, once; `.fenced()` issues it with the acquire; a
/// holder that lost its lock before asking gets `Lost`, never a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fencing_token_is_issued_on_first_ask_unless_fenced() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let fence_key = "lock:{lazy}:fence";
    let guard = locks.lock("lazy").acquire().await.expect("acquire");
    let exists: bool = redis.exists(fence_key).await.expect("EXISTS");
    assert!(!exists, "no token issued by a plain acquire");
    let token = guard.fencing_token().await.expect("issued now");
    let stored: u64 = redis.get(fence_key).await.expect("GET fence");
    assert_eq!(stored, token);
    assert_eq!(guard.fencing_token().await.expect("again"), token, "once");
    let again: u64 = redis.get(fence_key).await.expect("GET fence");
    assert_eq!(again, token, "no second issue");
    guard.release().await.expect("release");

    // The next holder's token, issued later, is larger.
    let next = locks.lock("lazy").acquire().await.expect("acquire");
    assert!(next.fencing_token().await.expect("token") > token);
    // Its lock is deleted behind its back: asking for a token now is Lost.
    // (Taken at the first try: an acquire that had to retry went through
    // the script, which issues the token with the lock.)
    next.release().await.expect("release");
    let lost = locks.lock("lazy").acquire().await.expect("acquire");
    let _: () = redis.del("lock:{lazy}").await.expect("DEL");
    let err = lost.fencing_token().await.expect_err("no longer held");
    assert!(err.is_lost(), "{err}");
    let fired = tokio::time::timeout(Duration::from_millis(100), lost.lost()).await;
    assert!(fired.is_ok(), "the guard knows it lost the lock");

    // Fenced: the acquire issues it, in the same round trip.
    let fenced = locks
        .lock("eager")
        .fenced()
        .acquire()
        .await
        .expect("acquire");
    let stored: u64 = redis
        .get("lock:{eager}:fence")
        .await
        .expect("issued with the acquire");
    assert_eq!(fenced.fencing_token().await.expect("token"), stored);
}
