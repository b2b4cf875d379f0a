//! A lost lock says why (issue 32, part 3): taken over by another owner,
//! gone while its lease had time (deleted, lost with its server), or run
//! out — through the watchdog's `lost()`, an `extend`, a `release` and a
//! fencing token asked for late, on one Redis, Redlock, a Cluster and
//! Sentinel. The keys are deleted behind the client's back with a raw
//! `DEL` on every server (a node that does not own the key answers with
//! an error or 0, which is ignored).

use std::time::Duration;

use redlock_runtime::{LockError, LostReason};
use redlock_tests::{Backend, Started, raw_connection};
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

fn lost_reason(result: Result<impl std::fmt::Debug, LockError>) -> LostReason {
    match result {
        Err(LockError::Lost { reason, .. }) => reason,
        other => panic!("a lost lock, got {other:?}"),
    }
}

#[rstest]
#[case::redis(Backend::Redis)]
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::sentinel(Backend::Sentinel)]
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
#[case::redlock(Backend::Redlock)]
#[case::cluster(Backend::Cluster)]
#[case::sentinel(Backend::Sentinel)]
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
        // at acquire on one Redis, Cluster and Sentinel; Redlock issues it
        // with the acquire and answers at once).
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
#[case::cluster(Backend::Cluster)]
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
