//! A lost lock says why (issue 32, part 3): ended by an operator's
//! `force_release` (issue 37, part 3, tested here on every backend), taken
//! over by another owner, gone while its lease had time (deleted, lost
//! with its server), or run out — through the watchdog's `lost()`, an `extend`, a `release` and a
//! fencing token asked for late, on one Redis, Redlock, a Cluster and
//! Sentinel. The keys are deleted behind the client's back with a raw
//! `DEL` on every server (a node that does not own the key answers with
//! an error or 0, which is ignored).

use std::time::Duration;

use redlock_runtime::{LockClient, LockError, LockInfo, LostReason, test_util::owner_token};
use redlock_tests::{Backend, FencedStore, Started, raw_connection};
use rstest::rstest;

/// Deletes `key` wherever it is, as someone with `redis-cli` would.
async fn delete_behind_the_clients_back(b: &Started, key: &str) {
    let mut deleted = 0;
    for url in b.urls() {
        let mut raw = raw_connection(url).await;
        let answer: Result<i64, _> = redis::cmd("DEL").arg(key).query_async(&mut raw).await;
        deleted += answer.unwrap_or(0);
    }
    assert!(deleted >= 1, "{}: {key} was on no server", b.name());
}

/// Waits (bounded: 5 s) until `inspect` of `key` shows the waiter in line.
async fn until_in_line(locks: &LockClient, key: &str, in_line: fn(&LockInfo) -> bool) {
    for _ in 0..500 {
        if (locks.inspect(key).await).is_ok_and(|info| in_line(&info)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the waiter for {key} never showed in line");
}

/// The longest `PTTL` of `key` on any server (-2 where it is absent).
async fn longest_pttl(b: &Started, key: &str) -> i64 {
    let mut longest = -2;
    for url in b.urls() {
        let mut raw = raw_connection(url).await;
        let pttl: Result<i64, _> = redis::cmd("PTTL").arg(key).query_async(&mut raw).await;
        longest = longest.max(pttl.unwrap_or(-2));
    }
    longest
}

fn lost_reason(result: Result<impl std::fmt::Debug, LockError>) -> LostReason {
    match result {
        Err(LockError::Lost { reason, .. }) => reason,
        other => panic!("a lost lock, got {other:?}"),
    }
}

#[rstest]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn a_lock_deleted_and_taken_by_another_owner_says_taken_over(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let (mine, theirs) = (b.client().await, b.client().await);
        // Renewed every second: the taker gets in before the next renewal.
        let guard = (mine.lock("reasons:taken"))
            .ttl(Duration::from_secs(3))
            .acquire()
            .await
            .expect("acquire");
        delete_behind_the_clients_back(&b, "lock:{reasons:taken}").await;
        let taker = (theirs.lock("reasons:taken"))
            .ttl(Duration::from_secs(30))
            .acquire()
            .await
            .expect("free once deleted");
        let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{}: the watchdog saw the loss", b.name()));
        assert_eq!(reason, LostReason::TakenOver, "{}", b.name());
        assert_eq!(
            lost_reason(guard.release().await),
            LostReason::TakenOver,
            "{}: the release says what lost() said",
            b.name()
        );
        assert!(taker.is_held(), "the taker's lock is untouched");
        taker.release().await.expect("the taker releases");
    });
}

#[rstest]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn an_extend_release_or_fence_finding_the_key_taken_or_gone_says_which(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let (mine, theirs) = (b.client().await, b.client().await);
        let ttl = Duration::from_secs(30);

        // Gone while the lease had 30 s: deleted, not expired.
        let guard = mine
            .lock("reasons:gone")
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        delete_behind_the_clients_back(&b, "lock:{reasons:gone}").await;
        assert_eq!(
            lost_reason(guard.extend(ttl).await),
            LostReason::TokenGone,
            "{}",
            b.name()
        );
        assert_eq!(guard.lost().await, LostReason::TokenGone);

        // Deleted and taken: an extend says so.
        let guard = mine
            .lock("reasons:extend")
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        delete_behind_the_clients_back(&b, "lock:{reasons:extend}").await;
        let taker = theirs.lock("reasons:extend").acquire().await.expect("free");
        assert_eq!(
            lost_reason(guard.extend(ttl).await),
            LostReason::TakenOver,
            "{}",
            b.name()
        );
        taker.release().await.expect("release");

        // A release that finds another owner: never touches its lock.
        let guard = mine
            .lock("reasons:release")
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        delete_behind_the_clients_back(&b, "lock:{reasons:release}").await;
        let taker = theirs
            .lock("reasons:release")
            .acquire()
            .await
            .expect("free");
        assert_eq!(
            lost_reason(guard.release().await),
            LostReason::TakenOver,
            "{}",
            b.name()
        );
        assert!(taker.is_held());
        let info = theirs.inspect("reasons:release").await.expect("inspect");
        assert!(
            info.is_held(),
            "{}: the taker's lock stays: {info:?}",
            b.name()
        );
        taker.release().await.expect("release");

        // A fencing token asked for after the key was deleted (not fenced
        // at acquire on one Redis, with replicas, Cluster and Sentinel;
        // Redlock issues it with the acquire, and answers at once).
        let guard = mine
            .lock("reasons:fence")
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        delete_behind_the_clients_back(&b, "lock:{reasons:fence}").await;
        if b.backend() != Backend::Redlock {
            assert_eq!(
                lost_reason(guard.fencing_token().await),
                LostReason::TokenGone
            );
        }
        drop(guard);
    });
}

#[rstest]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn a_lease_that_ran_out_unrenewed_says_expired_even_once_taken(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let (mine, theirs) = (b.client().await, b.client().await);
        let guard = (mine.lock("reasons:expired"))
            .ttl(Duration::from_millis(300))
            .renew(false)
            .acquire()
            .await
            .expect("acquire");
        assert_eq!(guard.lost().await, LostReason::Expired);
        // What was first known stays the reason: the lease ran out before
        // anyone took it.
        let taker = (theirs.lock("reasons:expired"))
            .wait(Duration::from_secs(5))
            .acquire()
            .await
            .expect("free once expired");
        assert_eq!(lost_reason(guard.release().await), LostReason::Expired);
        taker.release().await.expect("release");
    });
}

/// The operator's break-glass (issue 37, part 3), and the reason its
/// victims give (issue 32, part 3): a stuck holder's lock is ended, its
/// fencing token falls below every later one, so a fenced store rejects
/// its late write; its guard says an operator ended it.
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
fn force_release_ends_a_stuck_holder_which_learns_an_operator_ended_it(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let (stuck, next, operator) = (b.client().await, b.client().await, b.client().await);
        let mut store = FencedStore::default();
        let guard = (stuck.lock("reasons:stuck"))
            .ttl(Duration::from_secs(3))
            .acquire()
            .await
            .expect("acquire");
        let old = guard.fencing_token().await.expect("fencing token");
        assert!(
            store.write(old, 1),
            "the holder writes while it holds the lock"
        );

        let ended = operator
            .force_release("reasons:stuck")
            .await
            .expect("force release");
        assert_eq!(ended.ended.len(), 1, "{}: {ended:?}", b.name());
        assert_eq!(
            ended.ended[0].client_name.as_deref(),
            Some(stuck.client_name())
        );
        assert!(ended.fencing_token > Some(old), "{}: {ended:?}", b.name());
        let printed = format!("{ended:?}");
        assert!(!printed.contains(owner_token(&guard)), "{printed}");
        // The ended holder's id is kept as long as its 3 s lease would have
        // lasted and 10 s more, not for the counters' day of retention.
        if b.backend() != Backend::Memory {
            let kept = longest_pttl(&b, "lock:{reasons:stuck}:ended").await;
            assert!((1..=13_000).contains(&kept), "{}: kept {kept} ms", b.name());
        }

        // The next holder gets in at once and its token is above the old.
        let taker = next
            .lock("reasons:stuck")
            .acquire()
            .await
            .expect("free at once");
        let new = taker.fencing_token().await.expect("fencing token");
        assert!(new > old, "{}: {new} after {old}", b.name());
        assert!(store.write(new, 2));
        assert!(
            !store.write(old, 1),
            "{}: the ended holder's late write is rejected",
            b.name()
        );

        // The stuck holder's watchdog finds out at its next renewal, and
        // says who ended it, although another owner holds the lock now.
        let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{}: the watchdog saw the end", b.name()));
        assert_eq!(reason, LostReason::EndedByOperator, "{}", b.name());
        assert_eq!(
            lost_reason(guard.release().await),
            LostReason::EndedByOperator
        );
        assert!(taker.is_held());
        taker
            .release()
            .await
            .expect("the taker's lock is untouched");

        // Nothing held: nothing ended, no error; a bad key is refused.
        let nothing = operator.force_release("reasons:stuck").await.expect("free");
        assert!(
            !nothing.ended_any() && nothing.fencing_token.is_none(),
            "{nothing:?}"
        );
        let err = operator.force_release("").await.expect_err("empty key");
        assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn force_release_ends_a_read_write_lock_and_wakes_its_waiters(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let (held, waiting, operator) = (b.client().await, b.client().await, b.client().await);
        let ttl = Duration::from_secs(30);
        let writer = held
            .rw_lock("reasons:rw")
            .write()
            .ttl(ttl)
            .acquire()
            .await
            .expect("write");
        let old = writer.fencing_token().await.expect("fencing token");
        let waiter = tokio::spawn(async move {
            let guard = (waiting.rw_lock("reasons:rw").write())
                .wait(Duration::from_secs(20))
                .acquire()
                .await;
            (guard, waiting)
        });
        until_in_line(&operator, "reasons:rw", |i| i.waiting_writers == 1).await;
        let ended = operator
            .force_release("reasons:rw")
            .await
            .expect("force release");
        assert_eq!(ended.ended.len(), 1, "{}: {ended:?}", b.name());
        assert!(ended.write_fencing_token > Some(old), "{ended:?}");
        // Woken at once, not when the writer's 30 s lease would end.
        let (guard, _waiting) = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap_or_else(|_| panic!("{}: the waiting writer was woken", b.name()))
            .expect("join");
        let guard = guard.expect("the waiting writer gets the lock");
        assert!(guard.fencing_token().await.expect("token") > old);
        assert_eq!(
            lost_reason(writer.extend(ttl).await),
            LostReason::EndedByOperator
        );
        guard.release().await.expect("release");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn force_release_of_a_fair_lock_hands_it_to_the_first_in_line(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let (held, waiting, operator) = (b.client().await, b.client().await, b.client().await);
        let ttl = Duration::from_secs(30);
        let holder = held
            .lock("reasons:fair")
            .fair()
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        let waiter = tokio::spawn(async move {
            let guard = (waiting.lock("reasons:fair").fair())
                .wait(Duration::from_secs(20))
                .acquire()
                .await;
            (guard, waiting)
        });
        until_in_line(&operator, "reasons:fair", |i| i.waiters == 1).await;
        let ended = operator
            .force_release("reasons:fair")
            .await
            .expect("force release");
        assert_eq!(ended.ended.len(), 1, "{}: {ended:?}", b.name());
        let (guard, _waiting) = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap_or_else(|_| panic!("{}: the first in line was woken", b.name()))
            .expect("join");
        let guard = guard.expect("the first in line gets the lock");
        assert_eq!(
            lost_reason(holder.release().await),
            LostReason::EndedByOperator
        );
        guard.release().await.expect("release");
    });
}

/// When something happened, once.
type At = std::sync::Arc<std::sync::Mutex<Option<tokio::time::Instant>>>;

fn now_into(at: &At) {
    if let Ok(mut at) = at.lock() {
        at.get_or_insert_with(tokio::time::Instant::now);
    }
}

fn read(at: &At, what: &str) -> tokio::time::Instant {
    at.lock()
        .ok()
        .and_then(|at| *at)
        .unwrap_or_else(|| panic!("{what} never happened"))
}

/// Records when it is dropped: when a body run under a lock was cancelled.
struct DroppedAt(At);

impl Drop for DroppedAt {
    fn drop(&mut self) {
        now_into(&self.0);
    }
}

/// One Redis, and a client that reaches it through a fault proxy (whose
/// latency a test sets), with a command timeout of 2 s.
async fn through_a_proxy() -> (
    redlock_tests::RedisServer,
    redlock_tests::FaultProxy,
    LockClient,
) {
    let server = redlock_tests::RedisServer::start().await;
    let proxy = redlock_tests::FaultProxy::start(server.addr()).await;
    let locks = LockClient::builder()
        .url(proxy.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("connect through the proxy");
    (server, proxy, locks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_found_gone_is_not_held_at_once_not_once_why_is_read() {
    // Every round trip through the proxy takes 0.8 s. The watchdog's
    // renewal finds the lock another owner's: from that answer on, the
    // lock is not held (`is_held`, and a body run under it is cancelled);
    // `lost()` completes one round trip later, with the reason (taken
    // over, which only the read that follows the answer can tell).
    // Before, all of it waited for the read.
    let (server, proxy, locks) = through_a_proxy().await;
    let (cancelled, not_held, lost) = (At::default(), At::default(), At::default());
    let (flag, watch_held, watch_lost) = (
        DroppedAt(At::clone(&cancelled)),
        At::clone(&not_held),
        At::clone(&lost),
    );
    let ttl = Duration::from_secs(9);
    let run = locks.lock("cancelled-at-once").ttl(ttl).run(async move {
        let _flag = flag;
        let current = redlock_runtime::current_lock().expect("run under the lock");
        let lost = current.lost();
        // Watches from outside the body, which is cancelled.
        tokio::spawn(async move {
            let reason = lost.await;
            now_into(&watch_lost);
            reason
        });
        tokio::spawn(async move {
            for _ in 0..3000 {
                if !current.is_held() {
                    now_into(&watch_held);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        std::future::pending::<()>().await;
    });
    let running = tokio::spawn(run);
    let mut raw = raw_connection(server.url()).await;
    for _ in 0..500 {
        let exists: i64 = redis::cmd("EXISTS")
            .arg("lock:{cancelled-at-once}")
            .query_async(&mut raw)
            .await
            .expect("EXISTS");
        if exists == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The read's script loaded before the latency (a first `EVALSHA`
    // costs two more round trips).
    locks.inspect("cancelled-at-once").await.expect("inspect");
    proxy.set_latency(Duration::from_millis(400));
    // Another owner's lock in its place, in one step (no renewal can land
    // between a delete and a new acquire).
    let _: () = redis::cmd("SET")
        .arg("lock:{cancelled-at-once}")
        .arg("~0b7e4c1a-0000-4000-8000-000000000000.0.someone-else")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut raw)
        .await
        .expect("SET");
    let result = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("run returns once its renewal finds the lock gone")
        .expect("join");
    assert!(
        matches!(
            result,
            Err(LockError::Lost {
                reason: LostReason::TakenOver,
                ..
            })
        ),
        "{result:?}"
    );
    let lost = read(&lost, "lost()");
    for (at, what) in [
        (&cancelled, "the body's cancellation"),
        (&not_held, "is_held() false"),
    ] {
        let at = read(at, what);
        assert!(
            at + Duration::from_millis(400) <= lost,
            "{what} came only {:?} before lost(): it waited for the read of why",
            lost.saturating_duration_since(at)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_whose_read_of_why_is_cancelled_still_completes_lost() {
    // An `extend` finds the lock another owner's, and is dropped while it
    // reads why (its caller gave up). The lock must still end known lost:
    // `lost()` completes at once with what the call's time says, not at
    // the watchdog's next renewal (10 s away here) or never.
    let (server, proxy, locks) = through_a_proxy().await;
    let ttl = Duration::from_secs(30);
    let guard = locks
        .lock("read-cancelled")
        .ttl(ttl)
        .acquire()
        .await
        .expect("acquire");
    // The extend's and the read's scripts loaded before the latency.
    guard.extend(ttl).await.expect("extend");
    locks.inspect("read-cancelled").await.expect("inspect");
    proxy.set_latency(Duration::from_millis(300));
    let mut raw = raw_connection(server.url()).await;
    let _: () = redis::cmd("SET")
        .arg("lock:{read-cancelled}")
        .arg("~0b7e4c1a-0000-4000-8000-000000000000.0.someone-else")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut raw)
        .await
        .expect("SET");
    // The extend runs until its answer says the lock is gone (`is_held`
    // turns false then), and is dropped while its read of why is on the
    // way (0.6 s).
    let answered = async {
        for _ in 0..1000 {
            if !guard.is_held() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the extend's answer never came");
    };
    tokio::select! {
        result = guard.extend(ttl) => panic!("the extend ended before its read of why: {result:?}"),
        () = answered => {}
    }
    let reason = tokio::time::timeout(Duration::from_millis(500), guard.lost())
        .await
        .expect("lost() completes although the read of why was cancelled");
    assert_eq!(reason, LostReason::TokenGone, "what the call's time says");
}
