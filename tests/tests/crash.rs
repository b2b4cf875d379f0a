//! A lock holder that dies without releasing: its lock must pass to another
//! owner once its lease runs out, and not before.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::LockClient;
use redlock_tests::RedisServer;

/// Kills the child on drop, so a failing test leaves no process behind.
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `lock_holder` and returns once it printed that it holds the lock.
fn spawn_holder(url: &str, key: &str, ttl: Duration, watchdog: bool) -> (Holder, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lock_holder"))
        .args([
            url,
            key,
            &ttl.as_millis().to_string(),
            if watchdog { "on" } else { "off" },
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the lock_holder child process");
    let stdout = child.stdout.take().expect("child stdout");
    let holder = Holder(child);
    // Bounded: the child either prints within its connection timeout or exits.
    let line = BufReader::new(stdout)
        .lines()
        .next()
        .expect("lock_holder printed nothing (did it fail to acquire?)")
        .expect("read lock_holder's output");
    let fence = line
        .strip_prefix("ACQUIRED ")
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("unexpected lock_holder output {line:?}"));
    (holder, fence)
}

fn sigkill(holder: &mut Holder) {
    holder.0.kill().expect("SIGKILL the holder");
    holder.0.wait().expect("reap the holder");
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
    sigkill(&mut holder);
    let killed = Instant::now();
    let mut redis = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection");
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
    sigkill(&mut holder);

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
