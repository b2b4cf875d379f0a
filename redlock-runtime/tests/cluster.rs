//! Redis Cluster through real faults: slot migration (ASK then MOVED) under a
//! held, renewed and awaited lock, failover with and without `WAIT`, a
//! majority of masters down, wake-up latency per master, the watchdog's
//! pipelines per master, and misconfiguration. The scenarios that behave as
//! on one Redis run over every backend in the other suites (`lock.rs`,
//! `scoped.rs`, `fair.rs`, `reentry.rs`, the idempotency layer's).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redlock_runtime::{
    ConfigError, LockClient, LockError, RetryPolicy, current_lock, distributed_lock,
};
use redlock_tests::{RedisCluster, RedisServer, Server};
use rstest::rstest;
use tokio::time::Instant;

/// The client's debug logs, shown with a failing test's output.
fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("redlock=debug")
        .with_ansi(false)
        .with_test_writer()
        .try_init();
}

/// The key the client stores for lock key `key` (default prefix).
fn stored(key: &str) -> String {
    format!("lock:{{{key}}}")
}

/// A lock key whose slot the master `master` serves now.
async fn key_on(cluster: &RedisCluster, master: usize, stem: &str) -> String {
    for i in 0..10_000 {
        let key = format!("{stem}:{i}");
        let slot = cluster.slot_of(&stored(&key)).await;
        if cluster.master_of_slot(slot).await == master {
            return key;
        }
    }
    panic!("no key of {stem}:* hashes to master {master}");
}

/// A cluster client whose waiters back off 2 s between attempts: only a
/// push wakes them sooner.
async fn slow_backoff(urls: Vec<String>) -> LockClient {
    LockClient::builder()
        .cluster(urls)
        .retry(RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(2)).jitter(false))
        .build()
        .await
        .expect("waiter client")
}

async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

/// A lock key on the first master, its slot, and another master to move
/// the slot to.
async fn key_to_move(cluster: &RedisCluster, stem: &str) -> (String, u16, usize) {
    let from = cluster.master_indices().await[0];
    let key = key_on(cluster, from, stem).await;
    let slot = cluster.slot_of(&stored(&key)).await;
    let to = cluster
        .master_indices()
        .await
        .into_iter()
        .find(|&m| m != from)
        .expect("another master");
    (key, slot, to)
}

/// A third client trying the key every 20 ms until `stop`: counts the times
/// it got the lock (which must stay zero).
fn intruder(locks: LockClient, key: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut got = 0;
        while !stop.load(Ordering::SeqCst) {
            if let Ok(Some(guard)) = locks.lock(key.clone()).try_acquire().await {
                got += 1;
                let _ = guard.release().await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        got
    })
}

#[rstest]
#[case::redis(Server::Redis)]
#[case::valkey(Server::Valkey)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_survives_its_slot_moving_while_renewed_and_awaited(#[case] server: Server) {
    logs();
    let cluster = RedisCluster::start_on(server, 3, 0, &[]).await;
    let urls = cluster.urls();
    let holder = LockClient::cluster(urls.clone()).await.expect("holder");
    let waiter_client = slow_backoff(urls.clone()).await;
    let other = LockClient::cluster(urls.clone()).await.expect("intruder");
    let (key, slot, to) = key_to_move(&cluster, "moving").await;

    // A short ttl: the watchdog renews every ~330 ms, many times during the move.
    let guard = holder
        .lock(key.clone())
        .ttl(Duration::from_secs(1))
        .acquire()
        .await
        .expect("acquire");
    let waiter = {
        let key = key.clone();
        tokio::spawn(async move {
            let guard = waiter_client
                .lock(key)
                .wait(Duration::from_secs(60))
                .acquire()
                .await;
            (Instant::now(), guard)
        })
    };
    let stop = Arc::new(AtomicBool::new(false));
    let intruding = intruder(other, key.clone(), Arc::clone(&stop));

    // Half-way: the lock's keys are on the destination, the slot still on
    // the source, which answers ASK.
    let migration = cluster.begin_migration(slot, to).await;
    migration.move_all_keys(&cluster).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        guard.is_held(),
        "the lock was lost while its slot was half-way moved"
    );
    // Done: the source answers MOVED.
    migration.finish(&cluster).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(guard.is_held(), "the lock was lost after its slot moved");
    let mut dest = raw(&cluster.node(to).url()).await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(stored(&key))
        .query_async(&mut dest)
        .await
        .expect("PTTL");
    assert!(
        pttl > 0,
        "the lock is on the new master and renewed (pttl {pttl})"
    );

    // Nobody else got the lock while it was held. The intruder stops
    // before the release: after it, taking the lock is fair game (CI once
    // saw the intruder win the release's race against the waiter).
    stop.store(true, Ordering::SeqCst);
    assert_eq!(
        intruding.await.expect("intruder"),
        0,
        "someone else held the lock"
    );

    // Let the waiter sleep into its 2 s backoff, then release: the push
    // (SPUBLISH on the new master) wakes it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    guard.release().await.expect("release after the move");
    let released = Instant::now();
    let (acquired_at, got) = waiter.await.expect("waiter task");
    let got = got.expect("the waiter gets the lock");
    let latency = acquired_at.saturating_duration_since(released);
    eprintln!("migration: waiter got the lock {latency:?} after the release on the new master");
    assert!(
        latency <= Duration::from_millis(100),
        "the waiter took {latency:?} after the release (its backoff is 2 s: the wake-up did not \
         follow the slot)"
    );
    drop(got);
}

/// A live reshard moves keys in batches, so a lock's key may already be on
/// the destination while its fencing counter is not: Redis answers a
/// script on both (the token issued on first ask) `TRYAGAIN` until the
/// slot is served whole again. The call is sent again within its command
/// timeout and succeeds once the migration ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_asked_for_during_a_split_move_retries_tryagain_within_its_timeout() {
    logs();
    let cluster = RedisCluster::start(3, 0).await;
    let locks = LockClient::builder()
        .cluster(cluster.urls())
        .command_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect("client");
    let (key, slot, to) = key_to_move(&cluster, "split").await;
    // A plain acquire: the counter does not exist yet.
    let guard = locks.lock(key.clone()).acquire().await.expect("acquire");
    let migration = cluster.begin_migration(slot, to).await;
    migration.move_key(&cluster, &stored(&key)).await;
    let started = Instant::now();
    let asked = tokio::spawn(async move {
        let token = guard.fencing_token().await;
        (guard, token)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !asked.is_finished(),
        "no token can be issued while the lock and its counter are split"
    );
    migration.finish(&cluster).await;
    let (guard, token) = asked.await.expect("task");
    let token = token.expect("issued once the slot is whole");
    let took = started.elapsed();
    eprintln!("split move: the token was issued after {took:?} of TRYAGAIN");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(token > 0);
    guard.release().await.expect("release on the destination");
    // The next holder finds it free on the destination.
    locks
        .lock(key)
        .try_acquire()
        .await
        .expect("try")
        .expect("free after the release");
}

/// `waiter`, checked to be still waiting: it panics with the waiter's end
/// (`when` says what it gave up on) if it is not.
async fn still_waiting<T: std::fmt::Debug>(
    waiter: tokio::task::JoinHandle<T>,
    when: &str,
) -> tokio::task::JoinHandle<T> {
    if waiter.is_finished() {
        panic!("the waiter gave up {when}: {:?}", waiter.await);
    }
    waiter
}

/// A migration begun at the source (`MIGRATING` before the destination is
/// `IMPORTING`) sends a call for a key the source lacks back and forth: `ASK`
/// to the destination, `MOVED` back; once the destination imports, the
/// acquire script gets `ASK`, then `TRYAGAIN`, until the slot has moved. An
/// attempt that runs out of time so is a transient, typed error, and a
/// waiting acquire keeps waiting through it (CI once saw a waiter end on
/// the `ASK` of an attempt that ran out of time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_rides_out_a_slot_that_bounces_between_source_and_destination() {
    logs();
    let cluster = RedisCluster::start(3, 0).await;
    let locks = LockClient::cluster(cluster.urls()).await.expect("client");
    let (key, slot, to) = key_to_move(&cluster, "bounce").await;
    let migration = cluster.begin_migration_from_source(slot, to).await;

    // Without a wait: the typed, transient error, after the command timeout.
    let started = Instant::now();
    let err = locks
        .lock(key.clone())
        .try_acquire()
        .await
        .expect_err("no node serves the key while it bounces");
    assert!(
        matches!(err, LockError::Redirected { .. }) && err.is_transient(),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "within the command timeout, not spinning on: {:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(
        text.contains("redirecting") && text.contains(&key),
        "{text}"
    );

    // With a wait: still waiting after three attempts' time limits...
    let waiter = {
        let locks = locks.clone();
        let key = key.clone();
        tokio::spawn(async move {
            locks
                .lock(key)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let waiter = still_waiting(waiter, "on a redirection").await;
    // Once the destination imports the slot, an acquire script (the lock's
    // two keys, neither there) gets `ASK` from the source and `TRYAGAIN`
    // from the destination until the migration ends; an attempt ends on
    // either. This is what CI saw: the `ASK` ended a 60 s wait.
    migration.import(&cluster).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let waiter = still_waiting(waiter, "while the slot was being imported").await;
    // ...and it gets the lock once the slot has moved.
    migration.finish(&cluster).await;
    let guard = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter gets the lock after the move")
        .expect("task")
        .expect("acquired on the destination");
    let mut dest = raw(&cluster.node(to).url()).await;
    let on_dest: bool = redis::cmd("EXISTS")
        .arg(stored(&key))
        .query_async(&mut dest)
        .await
        .expect("EXISTS");
    assert!(on_dest, "the lock was taken on the destination");
    guard.release().await.expect("release after the move");
}

/// Kills the master of `key` and waits until its replica serves the slot.
async fn kill_master_of(cluster: &mut RedisCluster, key: &str) -> usize {
    let slot = cluster.slot_of(&stored(key)).await;
    let master = cluster.master_of_slot(slot).await;
    cluster.node_mut(master).kill().await;
    cluster.wait_ok().await;
    master
}

#[rstest]
#[case::redis(Server::Redis)]
#[case::valkey(Server::Valkey)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replicas_a_lock_survives_the_failover_of_its_master(#[case] server: Server) {
    logs();
    const TTL: Duration = Duration::from_secs(9);
    let mut cluster = RedisCluster::start_on(server, 3, 1, &[]).await;
    let urls = cluster.urls();
    let holder = LockClient::builder()
        .cluster(urls.clone())
        .replicas(1, Duration::from_millis(500))
        .build()
        .await
        .expect("holder");
    let other = LockClient::cluster(urls.clone()).await.expect("intruder");
    let key = "failover:1".to_owned();
    let guard = holder
        .lock(key.clone())
        .ttl(TTL)
        .acquire()
        .await
        .expect("acquire, acknowledged by the replica");
    let token = guard.fencing_token().await.expect("fencing token");
    let stop = Arc::new(AtomicBool::new(false));
    let intruding = intruder(other.clone(), key.clone(), Arc::clone(&stop));

    let killed_at = Instant::now();
    let killed = kill_master_of(&mut cluster, &key).await;
    eprintln!(
        "failover (WAIT): master {killed} killed; the cluster was ok again after {:?}",
        killed_at.elapsed()
    );
    // The promoted replica has no replica of its own, so `WAIT 1` cannot
    // be met until the old master rejoins as its replica (as it would in
    // production, or keep two replicas per master): renewals wait for it.
    cluster.node_mut(killed).restart_keeping_data().await;
    cluster.wait_ok().await;
    eprintln!(
        "failover (WAIT): the old master rejoined as a replica {:?} after the kill",
        killed_at.elapsed()
    );
    // Past a whole ttl after the kill, the lock is held only if renewals
    // went on on the promoted replica.
    let renewed_from = Instant::now();
    tokio::time::sleep_until(killed_at + TTL + Duration::from_secs(1)).await;
    assert!(
        guard.is_held(),
        "the holder lost the lock through the failover"
    );
    stop.store(true, Ordering::SeqCst);
    assert_eq!(
        intruding.await.expect("intruder"),
        0,
        "another client acquired the key during the failover"
    );
    eprintln!(
        "failover (WAIT): the lock was held and renewed for {:?} after the failover",
        renewed_from.elapsed()
    );
    guard.release().await.expect("release on the new master");
    let next = other
        .lock(key.clone())
        .try_acquire()
        .await
        .expect("try")
        .expect("free once released");
    assert!(
        next.fencing_token().await.expect("fencing token") > token,
        "tokens go on increasing after the failover"
    );
}

/// How many of 20 locks taken without `WAIT` survive a kill of their
/// master right after the acquire: an honest figure for the docs (async
/// replication may lose the newest write), not an assertion of zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_replicas_twenty_kills_report_how_many_locks_were_lost() {
    logs();
    const KILLS: usize = 20;
    let mut cluster = RedisCluster::start(3, 1).await;
    let urls = cluster.urls();
    let holder = LockClient::cluster(urls.clone()).await.expect("holder");
    let other = LockClient::cluster(urls.clone()).await.expect("other");
    let mut lost = 0;
    for round in 0..KILLS {
        let key = format!("kill:{round}");
        let guard = holder
            .lock(key.clone())
            .ttl(Duration::from_secs(30))
            .acquire()
            .await
            .expect("acquire");
        let killed = kill_master_of(&mut cluster, &key).await;
        // The lock was lost if another client can take it now.
        let taken = other
            .lock(key.clone())
            .wait(Duration::from_secs(5))
            .try_acquire()
            .await;
        match taken {
            Ok(Some(_)) => lost += 1,
            Ok(None) => {}
            Err(e) => panic!("round {round}: {e}"),
        }
        drop(guard);
        cluster.node_mut(killed).restart_keeping_data().await;
        cluster.wait_ok().await;
    }
    eprintln!(
        "failover without WAIT: {lost} of {KILLS} locks lost to a master kill right after the acquire"
    );
    assert!(lost <= KILLS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_masters_of_three_down_fail_typed_within_the_wait_then_recover() {
    logs();
    let mut cluster = RedisCluster::start(3, 0).await;
    let locks = LockClient::cluster(cluster.urls()).await.expect("client");
    let masters = cluster.master_indices().await;
    let key = key_on(&cluster, masters[0], "down").await;
    locks
        .lock(key.clone())
        .acquire()
        .await
        .expect("acquire while all are up")
        .release()
        .await
        .expect("release");
    cluster.node_mut(masters[0]).kill().await;
    cluster.node_mut(masters[1]).kill().await;
    for key in [key.clone(), key_on_survivor(&cluster, masters[2]).await] {
        let wait = Duration::from_secs(2);
        let started = Instant::now();
        let err = locks
            .lock(key.clone())
            .wait(wait)
            .acquire()
            .await
            .expect_err("no majority of masters");
        let took = started.elapsed();
        assert!(
            took <= wait + Duration::from_millis(1500),
            "failed after {took:?}, wait was {wait:?}"
        );
        assert!(err.is_transient(), "{err:?} should be transient");
        assert!(
            !matches!(err, LockError::WaitTimeout { .. } | LockError::Busy { .. }),
            "a cluster down is not busy: {err:?}"
        );
        eprintln!("two masters down ({key}): {err} after {took:?}");
    }
    cluster.node_mut(masters[0]).restart_keeping_data().await;
    cluster.node_mut(masters[1]).restart_keeping_data().await;
    cluster.wait_ok().await;
    locks
        .lock(key)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the same client works again")
        .release()
        .await
        .expect("release");
}

/// A key on `master` (which is still up), found without asking a dead node:
/// its slot is in a range `CLUSTER SLOTS` gives to `master`'s port.
async fn key_on_survivor(cluster: &RedisCluster, master: usize) -> String {
    let node = cluster.node(master);
    let mut conn = raw(&node.url()).await;
    let ranges: Vec<(u16, u16, Vec<redis::Value>)> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async::<Vec<redis::Value>>(&mut conn)
        .await
        .expect("CLUSTER SLOTS")
        .into_iter()
        .filter_map(|range| redis::from_redis_value(range).ok())
        .collect();
    let own = |slot: u16| {
        ranges.iter().any(|(start, end, master_node)| {
            (*start..=*end).contains(&slot)
                && master_node
                    .get(1)
                    .and_then(|p| redis::from_redis_value::<u16>(p.clone()).ok())
                    == Some(node.port())
        })
    };
    for i in 0..10_000 {
        let key = format!("alive:{i}");
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(stored(&key))
            .query_async(&mut conn)
            .await
            .expect("KEYSLOT");
        if own(slot) {
            return key;
        }
    }
    panic!("no key on master {master}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_with_a_two_second_backoff_is_woken_within_50ms_on_every_master() {
    let cluster = RedisCluster::start(3, 0).await;
    let holder = LockClient::cluster(cluster.urls()).await.expect("holder");
    let waiting = slow_backoff(cluster.urls()).await;
    let mut latencies = BTreeMap::new();
    for master in cluster.master_indices().await {
        let key = key_on(&cluster, master, "wake").await;
        // Best of three: one slow scheduling on a loaded machine is not the
        // wake-up's latency.
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let guard = holder.lock(key.clone()).acquire().await.expect("acquire");
            let waiter = {
                let (locks, key) = (waiting.clone(), key.clone());
                tokio::spawn(async move {
                    let got = locks
                        .lock(key)
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await
                        .expect("the waiter gets the lock");
                    let at = Instant::now();
                    got.release().await.expect("release");
                    at
                })
            };
            // Into its first backoff (its first attempt was busy).
            tokio::time::sleep(Duration::from_millis(300)).await;
            guard.release().await.expect("release");
            let released = Instant::now();
            let at = waiter.await.expect("waiter");
            best = best.min(at.saturating_duration_since(released));
        }
        latencies.insert(cluster.node(master).port(), best);
    }
    eprintln!("wake-up latency per master (port: best of 3): {latencies:?}");
    for (port, latency) in latencies {
        assert!(
            latency <= Duration::from_millis(50),
            "master {port}: woken {latency:?} after the release (backoff 2 s)"
        );
    }
}

/// `INFO commandstats`/`errorstats` field `name`'s `calls=`/`count=` value.
fn stat(info: &str, name: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|rest| {
            rest.split(',').find_map(|kv| {
                kv.strip_prefix("calls=")
                    .or_else(|| kv.strip_prefix("count="))
            })
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_locks_over_three_masters_renew_in_at_most_two_pipelines_per_master_per_period()
 {
    const LOCKS: usize = 10_000;
    let ttl = Duration::from_secs(3);
    let cluster = RedisCluster::start(3, 0).await;
    let locks = LockClient::cluster(cluster.urls()).await.expect("client");
    let mut guards = Vec::with_capacity(LOCKS);
    let mut batch = Vec::new();
    for i in 0..LOCKS {
        let locks = locks.clone();
        batch.push(tokio::spawn(async move {
            locks
                .lock(format!("many:{i}"))
                .ttl(ttl)
                .acquire()
                .await
                .expect("acquire")
        }));
        if batch.len() == 500 {
            for task in batch.drain(..) {
                guards.push(task.await.expect("task"));
            }
        }
    }
    for task in batch.drain(..) {
        guards.push(task.await.expect("task"));
    }
    let masters: Vec<String> = cluster.master_urls().await;
    let mut conns = Vec::new();
    for url in &masters {
        let mut c = raw(url).await;
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut c)
            .await
            .expect("RESETSTAT");
        conns.push(c);
    }
    let before: BTreeMap<String, u64> =
        redlock_runtime::test_util::renewal_pipelines_per_node(&locks)
            .into_iter()
            .collect();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(7)).await;
    let elapsed = started.elapsed();
    let after: BTreeMap<String, u64> =
        redlock_runtime::test_util::renewal_pipelines_per_node(&locks)
            .into_iter()
            .collect();
    let periods = elapsed.as_secs_f64() / (ttl.as_secs_f64() / 3.0);
    let allowed = (2.0 * periods).ceil() as u64;
    let mut evalsha_total = 0;
    for (url, conn) in masters.iter().zip(conns.iter_mut()) {
        let name = url.clone();
        let sent = after.get(&name).copied().unwrap_or(0) - before.get(&name).copied().unwrap_or(0);
        let info: String = redis::cmd("INFO")
            .arg("all")
            .query_async(conn)
            .await
            .expect("INFO");
        let evalsha = stat(&info, "cmdstat_evalsha");
        evalsha_total += evalsha;
        eprintln!(
            "{name}: {sent} renewal pipelines in {periods:.1} periods; EVALSHA calls {evalsha}, \
             CROSSSLOT {}, MOVED {}",
            stat(&info, "errorstat_CROSSSLOT"),
            stat(&info, "errorstat_MOVED")
        );
        assert!(sent >= 1, "{name}: no renewal pipeline at all");
        assert!(
            sent <= allowed,
            "{name}: {sent} renewal pipelines in {periods:.1} periods (allowed {allowed})"
        );
        assert_eq!(stat(&info, "errorstat_CROSSSLOT"), 0, "{name}: CROSSSLOT");
        assert_eq!(stat(&info, "errorstat_MOVED"), 0, "{name}: MOVED");
    }
    // Every lock was renewed about once per period, on its own master: at
    // least once per whole period but one. (The window may open just after
    // a lock's renewal, and each renewal is due a period after the last
    // one's answer, so a loaded machine stretches the period by the
    // pipeline's round trip: CI saw 6.5 renewals per lock in 7.1 periods
    // while other cluster suites ran, with no lock lost.)
    let whole = (periods.floor() as u64).saturating_sub(1).max(1);
    assert!(
        evalsha_total >= (LOCKS as u64) * whole,
        "{evalsha_total} renewals for {LOCKS} locks in {periods:.1} periods"
    );
    let lost = guards.iter().filter(|g| !g.is_held()).count();
    assert_eq!(lost, 0, "{lost} locks lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_misconfigurations_are_typed_config_errors() {
    logs();
    // A node that is not in cluster mode; the password never shows.
    let plain = RedisServer::start().await;
    let url = format!("redis://:hunter2@127.0.0.1:{}", plain.port());
    redlock_tests::require_password(&plain.url(), "hunter2").await;
    let err = LockClient::cluster([url.clone()])
        .await
        .expect_err("not a cluster");
    assert!(
        matches!(err, LockError::Config(ConfigError::NotACluster { .. })),
        "{err:?}"
    );
    let text = format!("{err} {err:?}");
    assert!(text.contains(&plain.port().to_string()), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    let err = LockClient::cluster(Vec::<String>::new())
        .await
        .expect_err("empty");
    assert!(
        matches!(
            err,
            LockError::Config(ConfigError::InvalidClusterNodes { .. })
        ),
        "{err:?}"
    );
    let err = LockClient::cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7000/"])
        .await
        .expect_err("twice");
    assert!(err.to_string().contains("twice"), "{err}");
    let err = LockClient::cluster(["redis://127.0.0.1:7000/3"])
        .await
        .expect_err("db");
    assert!(err.to_string().contains("database 0"), "{err}");
    let err = LockClient::builder()
        .cluster(["redis://127.0.0.1:7000"])
        .redlock(["redis://127.0.0.1:7001"])
        .build()
        .await
        .expect_err("two targets");
    assert!(
        matches!(
            err,
            LockError::Config(ConfigError::ConflictingTargets { .. })
        ),
        "{err:?}"
    );
    let err = LockClient::builder()
        .cluster(["redis://127.0.0.1:7000"])
        .node_timeout(Duration::from_millis(50))
        .build()
        .await
        .expect_err("a Redlock setting");
    assert!(
        matches!(err, LockError::Config(ConfigError::NotForTarget { .. })),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_empties_the_hash_tag_is_refused_not_crossslot() {
    logs();
    let cluster = RedisCluster::start(3, 0).await;
    let locks = LockClient::cluster(cluster.urls()).await.expect("client");
    let err = locks.lock("}x").acquire().await.expect_err("empty tag");
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err:?}");
    assert!(err.to_string().contains("hash tag"), "{err}");
    // Braces elsewhere are fine: the tag is the whole key up to its first `}`.
    let fenced = Arc::new(AtomicU64::new(0));
    let guard = locks.lock("a{b}c").acquire().await.expect("braces inside");
    fenced.store(
        guard.fencing_token().await.expect("fencing token"),
        Ordering::SeqCst,
    );
    guard.release().await.expect("release");
    assert!(fenced.load(Ordering::SeqCst) > 0);
}

/// A service whose method runs under `#[distributed_lock]` on a cluster.
struct Accounts {
    locks: LockClient,
    inside: Arc<AtomicBool>,
    tokens: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Accounts {
    #[distributed_lock(key = "account:<id>", ttl = "5s", wait = "30s", client = self.locks)]
    async fn transfer(&self, id: u64) -> Result<(), LockError> {
        assert!(
            !self.inside.swap(true, Ordering::SeqCst),
            "two transfers on account {id} at once"
        );
        let token = match current_lock() {
            Some(l) => l.fencing_token().await.expect("fencing token"),
            None => 0,
        };
        self.tokens.lock().expect("tokens").push(token);
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.inside.store(false, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attribute_serializes_a_method_across_cluster_clients() {
    logs();
    let cluster = RedisCluster::start(3, 0).await;
    let inside = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let service = Arc::new(Accounts {
            locks: LockClient::cluster(cluster.urls()).await.expect("client"),
            inside: Arc::clone(&inside),
            tokens: Arc::clone(&tokens),
        });
        for _ in 0..4 {
            let service = Arc::clone(&service);
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    service.transfer(7).await.expect("transfer");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("task");
    }
    let tokens = tokens.lock().expect("tokens");
    assert_eq!(tokens.len(), 80);
    assert!(
        tokens.windows(2).all(|w| w[1] > w[0]),
        "fencing tokens increase in lock order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_protected_cluster_works_and_the_password_never_shows() {
    logs();
    let cluster = RedisCluster::start(3, 0).await;
    for node in cluster.nodes() {
        redlock_tests::require_password(node.url(), "hunter2").await;
    }
    let urls: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("redis://:hunter2@127.0.0.1:{}", n.port()))
        .collect();
    // One node listed: the others are reached with its password.
    let locks = LockClient::cluster([urls[0].clone()])
        .await
        .expect("client");
    for i in 0..9 {
        let guard = locks
            .lock(format!("secret:{i}"))
            .acquire()
            .await
            .expect("acquire on every master");
        guard.release().await.expect("release");
    }
    let shown = format!("{locks:?} {}", locks.target());
    assert!(!shown.contains("hunter2"), "{shown}");
    // A wrong password: a typed, permanent error without the secret.
    let wrong = format!("redis://:wrong-secret@127.0.0.1:{}", cluster.node(0).port());
    let err = LockClient::cluster([wrong])
        .await
        .expect_err("wrong password");
    let text = format!("{err} {err:?}");
    assert!(!text.contains("wrong-secret"), "{text}");
    assert!(
        matches!(
            err,
            LockError::Connect {
                failure: redlock_runtime::ConnectFailure::Auth,
                ..
            }
        ),
        "{err:?}"
    );
}

/// A cluster without sharded pub/sub (as before Redis 7; played here by
/// renaming `SPUBLISH` and `SSUBSCRIBE` away): releases still release (the
/// publish is a `pcall`), and waiters get the lock by polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sharded_pub_sub_releases_work_and_waiters_poll() {
    logs();
    let disabled = "";
    let cluster = RedisCluster::start_with_args(
        3,
        0,
        &[
            "--rename-command",
            "SPUBLISH",
            disabled,
            "--rename-command",
            "SSUBSCRIBE",
            disabled,
        ],
    )
    .await;
    let holder = LockClient::cluster(cluster.urls()).await.expect("holder");
    let waiting = LockClient::builder()
        .cluster(cluster.urls())
        .retry(
            RetryPolicy::new(Duration::from_millis(200), Duration::from_millis(200)).jitter(false),
        )
        .build()
        .await
        .expect("waiter");
    let guard = holder.lock("nopush").acquire().await.expect("acquire");
    let waiter = tokio::spawn(async move {
        let got = waiting
            .lock("nopush")
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .expect("the waiter gets the lock by polling");
        (Instant::now(), got)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    guard
        .release()
        .await
        .expect("the release works without SPUBLISH");
    let released = Instant::now();
    let (at, got) = waiter.await.expect("waiter");
    let latency = at.saturating_duration_since(released);
    eprintln!(
        "without sharded pub/sub: the waiter polled its way in {latency:?} after the release"
    );
    assert!(
        latency <= Duration::from_millis(200) + Duration::from_millis(300),
        "{latency:?}: more than one backoff step"
    );
    got.release().await.expect("release");
}

/// `.replicas(n, ..)` on a cluster whose masters have fewer replicas: the
/// `WAIT` on the lock's master falls short, the acquire fails with the
/// usual `LockError::Replicas` and gives the lock back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_on_the_locks_master_is_the_usual_replicas_error() {
    logs();
    let cluster = RedisCluster::start(3, 0).await;
    let locks = LockClient::builder()
        .cluster(cluster.urls())
        .replicas(1, Duration::from_millis(100))
        .build()
        .await
        .expect("client");
    let err = locks
        .lock("unreplicated")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .expect_err("no master has a replica");
    assert!(
        matches!(
            err,
            LockError::Replicas {
                wanted: 1,
                acknowledged: 0,
                ..
            }
        ),
        "{err:?}"
    );
    // Given back: another client takes it at once.
    let other = LockClient::cluster(cluster.urls()).await.expect("other");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if other
            .lock("unreplicated")
            .try_acquire()
            .await
            .expect("try")
            .is_some()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the unacknowledged lock was not given back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
