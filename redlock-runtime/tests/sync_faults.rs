//! The synchronizers under faults, on real Redis through the fault proxy:
//! an acquire of every kind cut short at every point leaves nothing held;
//! a count-down whose answers are lost counts once; Redis restarting empty
//! makes every lease lost and keeps write tokens increasing.

use std::time::Duration;

use redlock_runtime::{LockClient, LockError, LostReason};
use redlock_tests::{FaultProxy, RedisServer, key_exists};
use tokio::time::Instant;

/// A client with one connection, kept open: every command goes out at
/// once on it (no pool check-out first).
async fn one_connection(url: &str) -> LockClient {
    LockClient::builder()
        .url(url)
        .pool_size(1)
        .build()
        .await
        .expect("connect")
}

/// Waits (bounded) until everything the client sent through `proxy` has
/// landed (the cut-short command and the give-back it caused), then until
/// none of `keys` is in the Redis at `url`. Without the first wait a
/// command still held in the proxy would make the check pass before the
/// command had taken anything.
async fn all_gone(proxy: &FaultProxy, url: &str, keys: &[String], limit: Duration) -> bool {
    // Quiet for longer than a give-back takes to be sent once its acquire
    // was dropped or answered, with margin for a loaded machine.
    assert!(
        proxy
            .await_quiet(Duration::from_millis(150), Duration::from_secs(10))
            .await,
        "the proxy went quiet within 10s"
    );
    let started = Instant::now();
    while started.elapsed() < limit {
        let mut any = false;
        for key in keys {
            any |= key_exists(url, key).await;
        }
        if !any {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Each kind's acquire, cut short before it is sent, while its script is
/// on its way, and after it ran: never a reader, a waiting writer, a
/// permit or a lock of a group left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acquire_cut_short_at_any_point_leaves_nothing_held() {
    let server = RedisServer::start().await;
    let url = server.url();
    let proxy = FaultProxy::start(server.addr()).await;
    let slow = one_connection(&proxy.url()).await;
    let direct = LockClient::connect(&url).await.expect("connect");
    // Warm: every script in Redis's cache, so a cut-short acquire really
    // runs its script.
    let rw = slow.rw_lock("warm");
    rw.read()
        .acquire()
        .await
        .expect("read")
        .release()
        .await
        .expect("release");
    rw.write()
        .acquire()
        .await
        .expect("write")
        .release()
        .await
        .expect("release");
    let sem = slow.semaphore("warm", 2);
    sem.acquire()
        .await
        .expect("permit")
        .release()
        .await
        .expect("release");
    let group = slow.multi_lock(["{warm}a", "{warm}b"]).acquire().await;
    group.expect("group").release().await.expect("release");
    proxy.set_latency(Duration::from_millis(100));
    let ttl = Duration::from_secs(30);
    for (i, cut) in [1u64, 50, 99, 101, 150, 199, 201, 250]
        .into_iter()
        .enumerate()
    {
        let cut = Duration::from_millis(cut);
        // A reader.
        let key = format!("r:{i}");
        let _ =
            tokio::time::timeout(cut, slow.rw_lock(key.as_str()).read().ttl(ttl).acquire()).await;
        let keys = [format!("lock:{{{key}}}:rw:readers")];
        assert!(
            all_gone(&proxy, &url, &keys, Duration::from_secs(2)).await,
            "reader, cut at {cut:?}"
        );
        // A writer waiting behind a reader: its place among the writers.
        let key = format!("w:{i}");
        let reader = direct
            .rw_lock(key.as_str())
            .read()
            .acquire()
            .await
            .expect("reader");
        let waiting = slow
            .rw_lock(key.as_str())
            .write()
            .ttl(ttl)
            .wait(Duration::from_secs(10));
        let _ = tokio::time::timeout(cut, waiting.acquire()).await;
        let keys = [format!("lock:{{{key}}}:rw:writers")];
        assert!(
            all_gone(&proxy, &url, &keys, Duration::from_secs(2)).await,
            "writer, cut at {cut:?}"
        );
        reader.release().await.expect("release");
        // A writer on a free lock.
        let _ =
            tokio::time::timeout(cut, slow.rw_lock(key.as_str()).write().ttl(ttl).acquire()).await;
        let keys = [format!("lock:{{{key}}}:rw")];
        assert!(
            all_gone(&proxy, &url, &keys, Duration::from_secs(2)).await,
            "write, cut at {cut:?}"
        );
        // Permits.
        let key = format!("s:{i}");
        let _ = tokio::time::timeout(
            cut,
            slow.semaphore(key.as_str(), 3)
                .permits(2)
                .ttl(ttl)
                .acquire(),
        )
        .await;
        let keys = [
            format!("lock:{{{key}}}:sem"),
            format!("lock:{{{key}}}:sem:permits"),
        ];
        assert!(
            all_gone(&proxy, &url, &keys, Duration::from_secs(2)).await,
            "permits, cut at {cut:?}"
        );
        assert_eq!(
            direct
                .semaphore(key.as_str(), 3)
                .available()
                .await
                .expect("available"),
            3
        );
        // A hash-tag group.
        let (a, b) = (format!("{{g:{i}}}a"), format!("{{g:{i}}}b"));
        let _ = tokio::time::timeout(
            cut,
            slow.multi_lock([a.as_str(), b.as_str()]).ttl(ttl).acquire(),
        )
        .await;
        let keys = [format!("lock:{{{a}}}"), format!("lock:{{{b}}}")];
        assert!(
            all_gone(&proxy, &url, &keys, Duration::from_secs(2)).await,
            "group, cut at {cut:?}"
        );
    }
}

/// Every answer lost (the proxy delays them past the command timeout):
/// the count-down is sent three times with one id, and counts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_whose_answers_are_lost_counts_once() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let slow = LockClient::builder()
        .url(proxy.url())
        .pool_size(1)
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("connect");
    // Warm: the count-down script in Redis's cache (else the first send
    // comes back NOSCRIPT and the script never runs in time).
    let warm = slow.latch("warm");
    warm.try_set_count(1, Duration::from_secs(60))
        .await
        .expect("set");
    warm.count_down().await.expect("count down");
    let latch = slow.latch("batch");
    assert!(
        latch
            .try_set_count(5, Duration::from_secs(60))
            .await
            .expect("set")
    );
    // Each command arrives after 200 ms and its answer after 400 ms: past
    // the 300 ms timeout, every time.
    proxy.set_latency(Duration::from_millis(200));
    let err = latch.count_down().await.expect_err("no answer in time");
    assert!(matches!(err, LockError::Timeout { .. }), "{err}");
    proxy.set_latency(Duration::ZERO);
    let direct = LockClient::connect(server.url()).await.expect("connect");
    let deadline = Instant::now() + Duration::from_secs(3);
    // The three sends all landed (the last one late): one count.
    tokio::time::sleep(Duration::from_millis(800)).await;
    loop {
        let count = direct.latch("batch").count().await.expect("count");
        if count == Some(4) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "count {count:?}: counted more than once, or never"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Redis restarts empty: every reader's, writer's and permit holder's
/// lease is lost at its next renewal, and the next write token is larger
/// than every one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_empty_makes_every_lease_lost_and_write_tokens_go_on() {
    let mut server = RedisServer::start().await;
    let locks = LockClient::connect(server.url()).await.expect("connect");
    let ttl = Duration::from_millis(900);
    let read = locks
        .rw_lock("a")
        .read()
        .ttl(ttl)
        .acquire()
        .await
        .expect("read");
    let write = locks
        .rw_lock("b")
        .write()
        .ttl(ttl)
        .acquire()
        .await
        .expect("write");
    let before = write.fencing_token().await.expect("fencing token");
    let permit = locks
        .semaphore("c", 2)
        .ttl(ttl)
        .acquire()
        .await
        .expect("permit");
    let (read_lost, write_lost, permit_lost) = (read.lost(), write.lost(), permit.lost());
    server.restart().await;
    let within = ttl * 2;
    for (what, lost) in [
        ("read", read_lost),
        ("write", write_lost),
        ("permit", permit_lost),
    ] {
        let reason = tokio::time::timeout(within, lost)
            .await
            .unwrap_or_else(|_| panic!("the {what} lease was not lost within {within:?}"));
        assert!(
            matches!(reason, LostReason::TokenGone | LostReason::Unconfirmed),
            "{what}: {reason}"
        );
    }
    drop((read, write, permit));
    let after = locks
        .rw_lock("b")
        .write()
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("write after the restart");
    assert!(
        after.fencing_token().await.expect("fencing token") > before,
        "write tokens go on increasing"
    );
}
