//! Locks held by another process (the `lock_holder` child binary of this
//! crate, which is why these runtime tests live here and not in
//! `redlock-runtime/tests/`):
//! - a holder that dies without releasing: its lock passes to another owner
//!   once its lease runs out, and not before;
//! - a paused holder (Redlock) is fenced out by the next holder's token;
//! - a fair waiter that dies leaves the line within its presence;
//! - `inspect` names a crashed holder and shows its lease running out.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::LockClient;
use redlock_tests::{FencedStore, LockHolder, RedisServer, fair_waiter, wait_for_fair_waiters};

fn spawn_holder(url: &str, key: &str, ttl: Duration, watchdog: bool) -> (LockHolder, u64) {
    let holder = LockHolder::spawn(env!("CARGO_BIN_EXE_lock_holder"), url, key, ttl, watchdog);
    let fence = holder.fence();
    (holder, fence)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_lock_passes_on_after_its_ttl_and_not_before() {
    let server = RedisServer::start().await;
    let url = server.url();
    let ttl = Duration::from_millis(1_500);
    let (mut holder, fence) = spawn_holder(&url, "crash", ttl, true);

    // Let the child's watchdog renew at least once, so the lease we measure
    // is a renewed one.
    tokio::time::sleep(ttl / 2).await;
    holder.kill();
    let killed = Instant::now();
    let mut redis = redlock_tests::raw_connection(url.as_str()).await;
    let pttl: i64 = redis.pttl("lock:{crash}").await.expect("PTTL");
    assert!(
        pttl > 0,
        "the dead holder's lease is still there: pttl {pttl}"
    );
    let lease_left = Duration::from_millis(u64::try_from(pttl).expect("positive"));

    let locks = LockClient::connect(&url).await.expect("connect");
    assert!(
        locks
            .lock("crash")
            .try_acquire()
            .await
            .expect("no error")
            .is_none(),
        "the dead holder's lease must still exclude others"
    );
    let guard = locks
        .lock("crash")
        .wait(ttl + Duration::from_secs(2))
        .acquire()
        .await
        .expect("the lock passes on once the lease runs out");
    let after_kill = killed.elapsed();
    assert!(
        after_kill <= ttl + Duration::from_secs(1),
        "acquired {after_kill:?} after the kill; ttl {ttl:?}"
    );
    assert!(
        after_kill + Duration::from_millis(20) >= lease_left,
        "acquired {after_kill:?} after the kill, before the dead holder's lease ({lease_left:?}) ran out"
    );
    assert!(guard.fencing_token().await.expect("fencing token") > fence);
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_watchdog_a_killed_holders_lock_lasts_exactly_its_ttl() {
    let server = RedisServer::start().await;
    let url = server.url();
    let ttl = Duration::from_millis(1_000);
    let (mut holder, fence) = spawn_holder(&url, "crash-nowd", ttl, false);
    // The child acquired before it printed: the lease ends at most `ttl` from now.
    let printed = Instant::now();
    holder.kill();

    let locks = LockClient::connect(&url).await.expect("connect");
    let guard = locks
        .lock("crash-nowd")
        .wait(ttl + Duration::from_secs(2))
        .acquire()
        .await
        .expect("the lock passes on once the lease runs out");
    let took = printed.elapsed();
    assert!(
        took <= ttl + Duration::from_secs(1),
        "acquired {took:?} after the holder took it; ttl {ttl:?}"
    );
    // Not before the ttl: allow only the few ms between the child's SET and
    // its line reaching us.
    assert!(
        took + Duration::from_millis(50) >= ttl,
        "acquired {took:?} after the holder took it, before its ttl {ttl:?}"
    );
    assert!(guard.fencing_token().await.expect("fencing token") > fence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_is_fenced_out_by_the_next_holders_larger_token() {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(RedisServer::start().await);
    }
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let ttl = Duration::from_millis(1_000);
    let holder = LockHolder::spawn(
        env!("CARGO_BIN_EXE_lock_holder"),
        &urls.join(","),
        "invoice",
        ttl,
        true,
    );
    let old_token = holder.fence();
    let mut store = FencedStore::default();
    assert!(
        store.write(old_token, 0),
        "the holder writes while it holds the lock"
    );

    // A stop-the-world pause of the holder (its watchdog stops too).
    holder.pause();
    let locks = LockClient::builder()
        .redlock(urls.iter().cloned())
        .node_timeout(Duration::from_millis(150))
        .connection_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("a majority of the nodes answers");
    let guard = locks
        .lock("invoice")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the lease of the paused holder runs out");
    let new_token = guard.fencing_token().await.expect("fencing token");
    assert!(store.write(new_token, 1));
    holder.resume();

    // The holder wakes up and writes with the token it had: rejected.
    assert!(old_token < new_token, "{old_token} then {new_token}");
    assert!(
        !store.write(old_token, 0),
        "the store took a write from a holder that lost the lock"
    );
    assert_eq!((store.accepted, store.rejected), (2, 1));
    guard.release().await.expect("release");
    drop(holder);
}

/// Kills the child on drop.
struct Child_(Child);

impl Drop for Child_ {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_leaves_the_line_within_its_presence() {
    let server = RedisServer::start().await;
    let url = server.url();
    let mut redis = redlock_tests::raw_connection(&url).await;
    let holder_client = LockClient::connect(&url).await.expect("connect");
    let holder = holder_client
        .lock("dead")
        .fair()
        .acquire()
        .await
        .expect("holder");
    let mut child = Child_(
        Command::new(env!("CARGO_BIN_EXE_lock_holder"))
            .args([url.as_str(), "dead", "30000", "on", "60000"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start a fair waiter process"),
    );
    wait_for_fair_waiters(&url, "dead", 1).await;
    let next = fair_waiter(
        LockClient::connect(&url).await.expect("connect"),
        "dead",
        Duration::from_secs(10),
    );
    wait_for_fair_waiters(&url, "dead", 2).await;
    child.0.kill().expect("SIGKILL the waiter");
    child.0.wait().expect("reap");
    let killed = Instant::now();
    holder.release().await.expect("release");
    let guard = next
        .await
        .expect("task")
        .expect("the line moves past the dead waiter");
    // Its place lasts 3 backoff ceilings + 1 command timeout (1.1 s) after
    // its last ask; then the next ask of the live waiter (one backoff step,
    // 200 ms at most) drops it.
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_millis(1_100 + 200 + 100),
        "the dead waiter blocked the line for {took:?}"
    );
    guard.release().await.expect("release");
    let len: usize = redis.llen("lock:{dead}:queue").await.expect("LLEN");
    assert_eq!(len, 0, "no one left in line");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_crashed_holders_lease_running_out() {
    let server = RedisServer::start().await;
    let url = server.url();
    let ttl = Duration::from_millis(2_000);
    let (mut holder, fence) = spawn_holder(&url, "nightly", ttl, true);
    let locks = LockClient::connect(&url).await.expect("connect");
    let child = format!(":{}", holder.id());
    let info = locks.inspect("nightly").await.expect("inspect");
    let named = info.holder.expect("held by the child");
    let name = named.client_name.expect("a name");
    assert!(
        name.ends_with(&child),
        "{name} is not the child's default name"
    );
    assert_eq!(info.fencing_token, Some(fence));
    holder.kill();
    let killed = Instant::now();
    // No one renews it now: each look shows less left, until it is gone.
    let mut last_left = ttl;
    loop {
        let info = locks.inspect("nightly").await.expect("inspect");
        let Some(h) = info.holder else { break };
        let left = h.ttl_left.expect("a lease");
        assert!(left <= last_left, "the dead holder's lease grew: {left:?}");
        last_left = left;
        assert!(
            killed.elapsed() <= ttl + Duration::from_millis(500),
            "the dead holder's lease outlived its ttl"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let info = locks.inspect("nightly").await.expect("inspect");
    assert!(!info.is_held());
    assert_eq!(info.fencing_token, Some(fence), "the counter stays");
}
