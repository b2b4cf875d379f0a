//! A lock holder that dies without releasing: its lock must pass to another
//! owner once its lease runs out, and not before.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::LockClient;
use redlock_tests::{LockHolder, RedisServer};

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
    assert!(guard.fencing_token() > fence);
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
    assert!(guard.fencing_token() > fence);
}
