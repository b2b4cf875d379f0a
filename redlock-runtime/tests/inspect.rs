//! Who holds a lock: `LockClient::inspect` on every backend (in memory,
//! one Redis, Redlock by majority, Redis Cluster, Sentinel), the client
//! name written with each lock, and busy errors that name the holder but
//! never its token. A crashed holder's lease running out is in the harness
//! crate's `crash.rs`.

use std::time::{Duration, SystemTime};

use redlock_runtime::{LockClient, LockError, test_util::owner_token};
use redlock_tests::{Backend, RedisServer};
use rstest::rstest;

/// Within `slack` of now, either way.
fn near_now(t: SystemTime, slack: Duration) -> bool {
    let now = SystemTime::now();
    match now.duration_since(t) {
        Ok(ago) => ago <= slack,
        Err(ahead) => ahead.duration() <= slack,
    }
}

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
fn inspect_shows_the_holder_its_lease_and_the_last_token(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let locks = b.client().await;
        let other = b.client().await;
        let free = locks.inspect("invoice:7").await.expect("inspect");
        assert!(!free.is_held() && free.fencing_token.is_none(), "{free:?}");
        let ttl = Duration::from_secs(20);
        let guard = locks.lock("invoice:7").ttl(ttl).acquire().await.expect("acquire");
        let token = guard.fencing_token().await.expect("fencing token");
        let info = other.inspect("invoice:7").await.expect("inspect");
        let holder = info.holder.clone().expect("held");
        assert_eq!(holder.client_name.as_deref(), Some(locks.client_name()));
        let since = holder.since.expect("since");
        assert!(near_now(since, Duration::from_secs(2)), "{since:?}");
        let left = holder.ttl_left.expect("ttl left");
        assert!(left <= ttl && left > ttl - Duration::from_secs(5), "{left:?}");
        // Redlock: the largest counter of any node, which a node that was
        // not among the first majority may have raised past the holder's.
        if b.backend().topology() == Backend::Redlock {
            assert!(info.fencing_token >= Some(token), "{info:?}");
        } else {
            assert_eq!(info.fencing_token, Some(token));
        }
        assert_eq!(info.waiters, 0);
        let printed = format!("{info:?} {holder}");
        assert!(!printed.contains(owner_token(&guard)), "{printed}");

        // A busy error names the holder, never its token.
        let err = other.lock("invoice:7").acquire().await.expect_err("busy");
        let LockError::Busy { holder: Some(named), .. } = &err else {
            panic!("a busy error naming the holder: {err:?}");
        };
        assert!(named.contains(locks.client_name()), "{named}");
        let message = err.to_string();
        assert!(message.contains(locks.client_name()), "{message}");
        let secret = owner_token(&guard).split('.').next().expect("uuid");
        assert!(!message.contains(secret), "{message}");
        let err = other
            .lock("invoice:7")
            .wait(Duration::from_millis(200))
            .acquire()
            .await
            .expect_err("still busy");
        assert!(
            matches!(&err, LockError::WaitTimeout { holder: Some(h), .. } if h.contains(locks.client_name())),
            "{err}"
        );

        guard.release().await.expect("release");
        let after = other.inspect("invoice:7").await.expect("inspect");
        assert!(!after.is_held(), "{after:?}");
        assert!(after.fencing_token.is_some(), "the counter is kept");
    });
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::sentinel(Backend::Sentinel)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
fn inspect_shows_fair_waiters_readers_writers_and_permits(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let locks = b.client().await;
        let name = locks.client_name().to_owned();
        let held = locks.lock("k").fair().acquire().await.expect("held");
        let waiter = {
            let locks = b.client().await;
            tokio::spawn(async move {
                locks
                    .lock("k")
                    .fair()
                    .wait(Duration::from_secs(10))
                    .acquire()
                    .await
            })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while locks.inspect("k").await.expect("inspect").waiters != 1 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the fair waiter is not in line"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        held.release().await.expect("release");
        waiter
            .await
            .expect("waiter")
            .expect("the waiter gets it")
            .release()
            .await
            .expect("release");

        let rw = locks.rw_lock("k");
        let r1 = rw.read().acquire().await.expect("read");
        let r2 = rw.read().acquire().await.expect("read");
        let waiting = {
            let rw = b.client().await.rw_lock("k");
            tokio::spawn(async move { rw.write().wait(Duration::from_secs(10)).acquire().await })
        };
        let jobs = locks.semaphore("k", 5);
        let p3 = jobs.permits(3).acquire().await.expect("3 permits");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let info = loop {
            let info = locks.inspect("k").await.expect("inspect");
            if info.waiting_writers == 1 {
                break info;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the writer is not waiting: {info:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(info.readers.len(), 2, "{info:?}");
        assert!(
            info.readers
                .iter()
                .all(|r| r.client_name.as_deref() == Some(name.as_str()))
        );
        assert!(info.writer.is_none());
        assert_eq!(info.permits.len(), 1);
        assert_eq!(info.permits[0].1, 3);
        assert!(!info.is_held(), "the plain lock is another lock");
        drop((r1, r2));
        let write = waiting.await.expect("writer").expect("the writer gets in");
        let info = locks.inspect("k").await.expect("inspect");
        assert!(info.writer.is_some() && info.readers.is_empty(), "{info:?}");
        assert_eq!(
            info.write_fencing_token,
            Some(write.fencing_token().await.expect("fencing token"))
        );
        drop((write, p3));
    });
}

/// The client name is the builder's, checked, and stored at no extra
/// round trip; the default names the host and the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_name_is_stored_with_each_lock() {
    let server = RedisServer::start().await;
    let named = LockClient::builder()
        .url(server.url())
        .client_name("billing-7.eu")
        .build()
        .await
        .expect("connect");
    assert_eq!(named.client_name(), "billing-7.eu");
    let guard = named.lock("job").acquire().await.expect("acquire");
    let info = LockClient::connect(server.url())
        .await
        .expect("connect")
        .inspect("job")
        .await
        .expect("inspect");
    let holder = info.holder.expect("held");
    assert_eq!(holder.client_name.as_deref(), Some("billing-7.eu"));
    drop(guard);
    let default = LockClient::connect(server.url()).await.expect("connect");
    assert!(
        default
            .client_name()
            .ends_with(&format!(":{}", std::process::id()))
    );
    for bad in ["", "a\nb", &"x".repeat(129)] {
        let err = LockClient::builder()
            .url(server.url())
            .client_name(bad)
            .build_unchecked()
            .expect_err("refused");
        assert!(err.to_string().contains("client name"), "{err}");
    }
    let err = named.inspect("").await.expect_err("bad key");
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
}

/// Asserts that a holder is shown as holding a lock `since` no earlier
/// than the release that let it in (`released`): not from when it started
/// to wait, 1.5 s before it (clock estimates differ by a few ms).
fn held_since_the_release(since: SystemTime, released: SystemTime, what: &str) {
    let slack = Duration::from_millis(300);
    assert!(
        since + slack >= released,
        "{what} since {:?} before the release that let it in",
        released.duration_since(since).unwrap_or_default()
    );
    assert!(near_now(since, Duration::from_secs(2)), "{what}: {since:?}");
}

#[rstest]
#[case::memory(Backend::Memory)]
#[case::redis(Backend::Redis)]
#[case::valkey(Backend::Valkey)]
#[case::redlock(Backend::Redlock)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::cluster(Backend::Cluster)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn issue_32_a_holder_that_waited_is_shown_from_when_it_took_the_lock(#[case] backend: Backend) {
    // The waiter asks for 1.5 s before it gets the lock: `inspect` must
    // count its hold from then, not from when it started waiting (its
    // owner token used to be minted once, before the wait).
    backend.run_threaded(|b| async move {
        let (first, waiter, other) = (b.client().await, b.client().await, b.client().await);
        let ttl = Duration::from_secs(20);
        let held = first
            .lock("since")
            .ttl(ttl)
            .acquire()
            .await
            .expect("acquire");
        let waiting = tokio::spawn(async move {
            let guard = waiter
                .lock("since")
                .ttl(ttl)
                .wait(Duration::from_secs(15))
                .acquire()
                .await;
            (guard, waiter)
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let released = SystemTime::now();
        held.release().await.expect("release");
        let (guard, _waiter) = waiting.await.expect("task");
        let guard = guard.expect("the waiter takes the lock once it is released");
        let holder = other
            .inspect("since")
            .await
            .expect("inspect")
            .holder
            .expect("held");
        let since = holder.since.expect("since");
        held_since_the_release(since, released, &format!("{}: shown held", b.name()));
        guard.release().await.expect("release");
    });
}

/// What a holder that waited in a line waited for.
#[derive(Debug, Clone, Copy)]
enum Line {
    /// A fair lock, handed over by its holder's release.
    Fair,
    /// A write lock, once the last reader left.
    Write,
}

#[rstest]
#[case::memory_fair(Backend::Memory, Line::Fair)]
#[case::redis_fair(Backend::Redis, Line::Fair)]
#[case::cluster_fair(Backend::Cluster, Line::Fair)]
#[case::sentinel_fair(Backend::Sentinel, Line::Fair)]
#[case::memory_write(Backend::Memory, Line::Write)]
#[case::redis_write(Backend::Redis, Line::Write)]
#[case::cluster_write(Backend::Cluster, Line::Write)]
#[case::sentinel_write(Backend::Sentinel, Line::Write)]
fn issue_32_a_holder_that_waited_in_a_line_is_shown_from_its_grant(
    #[case] backend: Backend,
    #[case] line: Line,
) {
    // A fair waiter and a waiting writer keep one token (their place in
    // the line) for the whole wait: the time it carries is when they
    // joined. `inspect`, and the holders a forced release reports, must
    // count the hold from the grant instead, which Redis records when it
    // issues the holder's fencing token.
    backend.run_threaded(move |b| async move {
        let (first, waiter, other) = (b.client().await, b.client().await, b.client().await);
        let ttl = Duration::from_secs(20);
        let key = "since-in-line";
        let (held, asking) = match line {
            Line::Fair => (first.lock(key).fair(), waiter.lock(key).fair()),
            Line::Write => (first.rw_lock(key).read(), waiter.rw_lock(key).write()),
        };
        let held = held.ttl(ttl).acquire().await.expect("acquire");
        let asking = asking.ttl(ttl).wait(Duration::from_secs(15));
        let waiting = tokio::spawn(async move { (asking.acquire().await, waiter) });
        // In line before the release, and for a while.
        let mut in_line = false;
        for _ in 0..500 {
            let info = other.inspect(key).await.expect("inspect");
            if info.waiters + info.waiting_writers > 0 {
                in_line = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            in_line,
            "{} {line:?}: the waiter never showed in line",
            b.name()
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let released = SystemTime::now();
        held.release().await.expect("release");
        let (guard, _waiter) = waiting.await.expect("task");
        let guard = guard.expect("the waiter is granted the lock once it is released");
        let info = other.inspect(key).await.expect("inspect");
        let holder = match line {
            Line::Fair => info.holder,
            Line::Write => info.writer,
        }
        .expect("held");
        let granted_after_release = |since: SystemTime, what: &str| {
            held_since_the_release(since, released, &format!("{} {line:?}: {what}", b.name()));
        };
        granted_after_release(holder.since.expect("since"), "inspect shows it held");
        if let Line::Fair = line {
            // An operator's report names it with the same time.
            let forced = other.force_release(key).await.expect("force_release");
            let [ended] = forced.ended.as_slice() else {
                panic!("one holder ended: {forced:?}");
            };
            granted_after_release(ended.since.expect("since"), "force_release reports it held");
            drop(guard);
        } else {
            guard.release().await.expect("release");
        }
    });
}

/// `held()` lists what this client holds, from its own books: each kind
/// of lease with its time held, lease left and fencing token, oldest
/// first, never an owner token, and nothing once released.
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
fn held_lists_what_this_client_holds(#[case] backend: Backend) {
    use redlock_runtime::LeaseKind;
    backend.run_threaded(|b| async move {
        let locks = b.client().await;
        let other = b.client().await;
        assert!(locks.held().is_empty());
        let ttl = Duration::from_secs(20);
        let lock = locks
            .lock("held:lock")
            .ttl(ttl)
            .fenced()
            .acquire()
            .await
            .expect("lock");
        let token = lock.fencing_token().await.expect("token");
        // A Redlock client takes locks only (the synchronizers keep their
        // state in one store); the in-memory backend's clients share one
        // process's books.
        let one_store = b.backend().topology() != Backend::Redlock;
        let rw = locks.rw_lock("held:rw");
        let jobs = locks.semaphore("held:jobs", 3);
        let (read, permits) = if one_store {
            let read = rw.read().ttl(ttl).acquire().await.expect("read lock");
            let permits = jobs.permits(2).ttl(ttl).acquire().await.expect("permits");
            (Some(read), Some(permits))
        } else {
            (None, None)
        };
        // Another client's lock is not on these books.
        let _theirs = if b.backend() == Backend::Memory {
            None
        } else {
            Some(other.lock("held:theirs").acquire().await.expect("theirs"))
        };

        let held = locks.held();
        let kinds: Vec<_> = held.iter().map(|h| (h.key.as_str(), h.kind)).collect();
        let mut expected = vec![("held:lock", LeaseKind::Lock)];
        if one_store {
            expected.push(("held:rw", LeaseKind::Read));
            expected.push((
                "held:jobs",
                LeaseKind::Permits {
                    permits: 2,
                    limit: 3,
                },
            ));
        }
        assert_eq!(kinds, expected, "{held:?}");
        let first = &held[0];
        assert_eq!(first.fencing_token, Some(token));
        assert!(first.renewed);
        assert!(
            first.lease_left <= ttl && first.lease_left > ttl / 2,
            "{first:?}"
        );
        assert!(near_now(first.since, Duration::from_secs(5)), "{first:?}");
        let line = first.to_string();
        assert!(line.starts_with("held:lock (lock) for "), "{line}");
        assert!(
            line.ends_with(&format!(", fencing token {token}")),
            "{line}"
        );
        let printed = format!("{held:?}");
        assert!(!printed.contains(owner_token(&lock)), "{printed}");

        if let (Some(permits), Some(read)) = (permits, read) {
            permits.release().await.expect("release permits");
            read.release().await.expect("release read");
        }
        lock.release().await.expect("release lock");
        assert!(locks.held().is_empty(), "{:?}", locks.held());
    });
}
