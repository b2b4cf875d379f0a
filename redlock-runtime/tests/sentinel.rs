//! Redis Sentinel through real failovers: a lock acknowledged by a replica
//! survives the primary's crash, renewals and wake-ups follow the new
//! primary, and misconfiguration is a typed error. The scenarios that behave
//! as on one Redis run with a Sentinel case in `lock.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redlock_runtime::{ConfigError, LockClient, LockError, Mode, RetryPolicy};
use redlock_tests::{MASTER_NAME, RedisServer, SentinelSet, Server, raw_connection};
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

/// A client through the Sentinels at `urls` whose writes one replica
/// acknowledges (`WAIT 1`, 500 ms).
async fn replicated_holder(urls: Vec<String>) -> LockClient {
    LockClient::builder()
        .sentinel(urls, MASTER_NAME)
        .replicas(1, Duration::from_millis(500))
        .build()
        .await
        .expect("holder")
}

/// A client through the Sentinels at `urls` that polls a busy lock only
/// every `backoff` (no jitter): woken sooner only by a release's push.
async fn slow_waiter(urls: Vec<String>, backoff: Duration) -> LockClient {
    LockClient::builder()
        .sentinel(urls, MASTER_NAME)
        .retry(RetryPolicy::new(backoff, backoff).jitter(false))
        .build()
        .await
        .expect("waiter")
}

#[rstest]
#[case::redis(Server::Redis)]
#[case::valkey(Server::Valkey)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replicas_a_lock_survives_the_primary_crash_and_follows_the_new_primary(
    #[case] server: Server,
) {
    const TTL: Duration = Duration::from_secs(9);
    logs();
    // Two replicas: after the crash, the one not promoted replicates from
    // the new primary, so `WAIT 1` can be met there.
    let mut set = SentinelSet::start_on(server, 2).await;
    let urls = set.sentinel_urls();
    let holder = replicated_holder(urls.clone()).await;
    assert_eq!(holder.mode(), Mode::Sentinel);
    let other = LockClient::sentinel(urls.clone(), MASTER_NAME)
        .await
        .expect("other");
    let waiting = slow_waiter(urls.clone(), Duration::from_secs(2)).await;
    let key = "sentinel:failover";
    let guard = holder
        .lock(key)
        .ttl(TTL)
        .acquire()
        .await
        .expect("acquire, acknowledged by a replica");
    let token = guard.fencing_token().await.expect("fencing token");

    let stop = Arc::new(AtomicBool::new(false));
    let intruding = {
        let (other, stop) = (other.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut got = 0;
            while !stop.load(Ordering::SeqCst) {
                if let Ok(Some(g)) = other.lock(key).try_acquire().await {
                    got += 1;
                    let _ = g.release().await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            got
        })
    };

    let killed_at = Instant::now();
    let old = set.kill_primary().await;
    let new = set.wait_for_failover(old).await;
    eprintln!(
        "sentinel failover (WAIT): {old} killed, {new} primary everywhere after {:?}",
        killed_at.elapsed()
    );
    // A waiter that starts on the new primary: woken by the release there.
    let waiter = tokio::spawn(async move {
        let got = waiting
            .lock(key)
            .wait(Duration::from_secs(60))
            .acquire()
            .await
            .expect("the waiter gets the lock after the release");
        (Instant::now(), got)
    });
    // Past a whole ttl after the crash, the lock is held only if renewals
    // went on on the new primary.
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
    guard.release().await.expect("release on the new primary");
    let released = Instant::now();
    let (at, got) = waiter.await.expect("waiter task");
    let latency = at.saturating_duration_since(released);
    eprintln!("sentinel failover: the waiter got the lock {latency:?} after the release");
    assert!(
        latency <= Duration::from_millis(100),
        "the waiter (backoff 2 s) took {latency:?}: its wake-up did not follow the new primary\n{}",
        set.logs()
    );
    assert!(
        got.fencing_token().await.expect("fencing token") > token,
        "tokens go on increasing"
    );
}

/// Subscribers to `channel` on the Redis at `url` (`PUBSUB NUMSUB`).
async fn subscribers(url: &str, channel: &str) -> i64 {
    let mut conn = raw_connection(url).await;
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut conn)
        .await
        .expect("PUBSUB NUMSUB");
    n
}

/// Waits (bounded) until the Redis at `url` has a subscriber to `channel`.
async fn await_subscriber(url: &str, channel: &str, limit: Duration, what: &str) {
    let deadline = Instant::now() + limit;
    while subscribers(url, channel).await < 1 {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiters_wake_up_subscriber_moves_off_a_frozen_primary_to_the_new_one() {
    // The subscriber's connection to a frozen (SIGSTOP) primary stays open
    // and silent: unless it moves when the client switches primaries,
    // every release on the new primary is lost to it, and the waiter only
    // gets the lock at its next poll.
    logs();
    let mut set = SentinelSet::start(2).await;
    let urls = set.sentinel_urls();
    let holder = replicated_holder(urls.clone()).await;
    let waiting = slow_waiter(urls, Duration::from_secs(5)).await;
    let key = "sentinel:frozen";
    let channel = "lock:{sentinel:frozen}";
    let guard = holder
        .lock(key)
        .ttl(Duration::from_secs(20))
        .acquire()
        .await
        .expect("acquire, acknowledged by a replica");
    let waiter = tokio::spawn(async move {
        let got = waiting
            .lock(key)
            .wait(Duration::from_secs(60))
            .acquire()
            .await
            .expect("the waiter gets the lock after the release");
        (Instant::now(), got)
    });
    let old = set.primary().url();
    await_subscriber(
        &old,
        channel,
        Duration::from_secs(10),
        "the waiter subscribed",
    )
    .await;

    set.primary().pause();
    let old_addr = set.primary().addr();
    let new = set.wait_for_failover(old_addr).await;
    let new_url = format!("redis://{new}");
    await_subscriber(
        &new_url,
        channel,
        Duration::from_secs(10),
        "the wake-up subscriber moved to the new primary",
    )
    .await;
    guard.release().await.expect("release on the new primary");
    let released = Instant::now();
    let (at, got) = waiter.await.expect("waiter task");
    let latency = at.saturating_duration_since(released);
    eprintln!("sentinel (frozen primary): the waiter got the lock {latency:?} after the release");
    assert!(
        latency <= Duration::from_secs(1),
        "the waiter (backoff 5 s) took {latency:?}: the release did not wake it"
    );
    got.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_right_after_a_failover_reaches_the_new_primary_within_its_timeout() {
    logs();
    let mut set = SentinelSet::start(1).await;
    let command_timeout = Duration::from_secs(1);
    let locks = LockClient::builder()
        .sentinel(set.sentinel_urls(), MASTER_NAME)
        .command_timeout(command_timeout)
        .build()
        .await
        .expect("client");
    locks
        .lock("before")
        .acquire()
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
    // A forced failover: the old primary lives on as a replica (READONLY).
    set.failover().await;
    let started = Instant::now();
    let guard = locks
        .lock("after")
        .acquire()
        .await
        .expect("the first call after the failover succeeds");
    let took = started.elapsed();
    eprintln!("sentinel: first acquire after a forced failover took {took:?}");
    assert!(
        took <= command_timeout + Duration::from_secs(2),
        "took {took:?}: more than the command timeout plus a Sentinel round trip"
    );
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_misconfigurations_are_typed_config_errors() {
    logs();
    let set = SentinelSet::start(1).await;
    let err = LockClient::sentinel(set.sentinel_urls(), "nosuchmaster")
        .await
        .expect_err("unknown master");
    assert!(
        matches!(
            &err,
            LockError::Config(ConfigError::UnknownSentinelMaster { master, .. }) if master == "nosuchmaster"
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("nosuchmaster"), "{err}");

    let err = LockClient::sentinel(Vec::<String>::new(), MASTER_NAME)
        .await
        .expect_err("no Sentinel");
    assert!(
        matches!(err, LockError::Config(ConfigError::InvalidSentinels { .. })),
        "{err:?}"
    );
    let url = set.sentinel_urls()[0].clone();
    let err = LockClient::sentinel([url.clone(), url.clone()], MASTER_NAME)
        .await
        .expect_err("twice");
    assert!(err.to_string().contains("twice"), "{err}");
    let err = LockClient::sentinel([url.clone()], " ")
        .await
        .expect_err("empty name");
    assert!(err.to_string().contains("master name"), "{err}");
    let err = LockClient::builder()
        .sentinel([url.clone()], MASTER_NAME)
        .cluster([url.clone()])
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
    // A password in a Sentinel URL never shows.
    let down = RedisServer::start().await;
    let port = down.port();
    drop(down);
    let err = LockClient::builder()
        .sentinel([format!("redis://:hunter2@127.0.0.1:{port}")], MASTER_NAME)
        .connection_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect_err("no Sentinel answers");
    let text = format!("{err} {err:?}");
    assert!(matches!(err, LockError::Connect { .. }), "{err:?}");
    assert!(!text.contains("hunter2"), "{text}");
}

/// Waits (bounded) until `node` replicates from someone with its link up.
async fn wait_until_replica(node: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // A node turned into a replica drops its clients: a connection
        // refused or reset on the way is "not yet", asked again.
        let info = async {
            let client = redis::Client::open(node.url())?;
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("INFO")
                .arg("replication")
                .query_async::<String>(&mut conn)
                .await
        };
        let info = info
            .await
            .unwrap_or_else(|e| format!("(not answering: {e})"));
        if info.contains("role:slave") && info.contains("master_link_status:up") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "port {} did not rejoin as a replica within 30 s:\n{info}",
            node.port()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many of 10 locks taken without `WAIT` survive a crash of the
/// primary right after the acquire: an honest figure for the docs, not an
/// assertion of zero. (10, not the cluster suite's 20: a Sentinel failover
/// and the old primary's return as a replica take about 11 s a round.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_replicas_ten_primary_crashes_report_how_many_locks_were_lost() {
    const KILLS: usize = 10;
    logs();
    let mut set = SentinelSet::start(2).await;
    let urls = set.sentinel_urls();
    let holder = LockClient::sentinel(urls.clone(), MASTER_NAME)
        .await
        .expect("holder");
    let other = LockClient::sentinel(urls.clone(), MASTER_NAME)
        .await
        .expect("other");
    let mut lost = 0;
    let started = Instant::now();
    for round in 0..KILLS {
        let key = format!("crash:{round}");
        let guard = holder
            .lock(key.as_str())
            .ttl(Duration::from_secs(60))
            .acquire()
            .await
            .expect("acquire");
        let old = set.kill_primary().await;
        set.wait_for_failover(old).await;
        match other
            .lock(key.as_str())
            .wait(Duration::from_secs(5))
            .try_acquire()
            .await
        {
            Ok(Some(_)) => lost += 1,
            Ok(None) => {}
            Err(e) => panic!("round {round}: {e}"),
        }
        drop(guard);
        let index = set
            .nodes()
            .iter()
            .position(|n| n.addr() == old)
            .expect("the killed node");
        set.node_mut(index).restart_keeping_data().await;
        wait_until_replica(&set.nodes()[index]).await;
    }
    eprintln!(
        "sentinel failover without WAIT: {lost} of {KILLS} locks lost to a primary crash right \
         after the acquire ({:?})",
        started.elapsed()
    );
    assert!(lost <= KILLS);
}

/// Without the `+switch-master` announcements, the client finds a failover
/// by asking the Sentinels again: after a forced failover the old primary
/// answers `READONLY`, after a crash it refuses connections, and in both
/// cases the call reaches the new primary within its command timeout plus
/// one Sentinel round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_announcements_a_call_asks_the_sentinels_again() {
    logs();
    let mut set = SentinelSet::start(2).await;
    let command_timeout = Duration::from_secs(1);
    let locks = LockClient::builder()
        .sentinel(set.sentinel_urls(), MASTER_NAME)
        .sentinel_announcements(false)
        .command_timeout(command_timeout)
        .build()
        .await
        .expect("client");
    for (round, how) in ["forced failover (READONLY)", "crash (refused)"]
        .iter()
        .enumerate()
    {
        locks
            .lock(format!("ask:{round}:before"))
            .acquire()
            .await
            .expect("acquire before")
            .release()
            .await
            .expect("release");
        let old = set.current_primary_addr().await;
        let new = if round == 0 {
            let new = set.failover().await;
            // Until the Sentinels turn the old primary into a replica it
            // still takes writes (which `.replicas(n)` would refuse to
            // count): wait for it, so that it answers `READONLY`.
            let old_node = set
                .nodes()
                .iter()
                .find(|n| n.addr() == old)
                .expect("the old primary");
            wait_until_replica(old_node).await;
            new
        } else {
            let old = set.kill_primary().await;
            set.wait_for_failover(old).await
        };
        eprintln!("{how}: primary {old} -> {new}");
        let started = Instant::now();
        let guard = locks
            .lock(format!("ask:{round}:after"))
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{how}: the first call after it failed: {e}"));
        let took = started.elapsed();
        eprintln!("sentinel, no announcements, {how}: first acquire took {took:?}");
        assert!(
            took <= command_timeout + Duration::from_secs(1),
            "{how}: took {took:?}, more than the command timeout plus a Sentinel round trip"
        );
        assert!(
            redlock_tests::key_exists(
                format!("redis://{new}"),
                &format!("lock:{{ask:{round}:after}}")
            )
            .await,
            "{how}: the lock is on the new primary"
        );
        guard.release().await.expect("release on the new primary");
    }
}
