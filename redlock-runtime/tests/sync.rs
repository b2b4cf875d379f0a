//! The synchronizers: the read/write lock, the semaphore with leased
//! permits, the countdown latch and the multi-lock. Each scenario runs on
//! every store where it behaves the same (in memory, one Redis, one Redis
//! whose writes a replica acknowledges, Redis Cluster, Sentinel); then
//! what only Redis shows: one round trip for a hash-tagged group, and
//! nothing left behind but the fencing counters. Crashed holders (a
//! SIGKILLed child process) are in the harness crate's `sync_crash.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use redlock_runtime::{ConfigError, LockClient, LockError};
use redlock_tests::{Backend, RedisServer, key_exists, raw_connection};
use rstest::rstest;
use tokio::time::Instant;

/// Three clients of one store (three "nodes" of a service), and how late
/// a timed event may come.
#[derive(Clone)]
struct Nodes {
    clients: Vec<LockClient>,
    slack: Duration,
}

impl Nodes {
    fn one(&self) -> &LockClient {
        &self.clients[0]
    }

    fn node(&self, i: usize) -> &LockClient {
        &self.clients[i % self.clients.len()]
    }
}

type Scenario = fn(Nodes) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs every scenario, one after the other (their keys differ), on
/// `nodes`.
async fn run_all(nodes: Nodes, store: &str) {
    for (name, scenario) in SCENARIOS {
        eprintln!("{store}: {name}");
        scenario(nodes.clone()).await;
    }
}

/// Runs every scenario on `backend`'s store, three clients.
fn on(backend: Backend) {
    backend.run_threaded(|b| async move {
        let mut clients = Vec::new();
        for _ in 0..3 {
            clients.push(b.client().await);
        }
        let slack = b.slack().max(Duration::from_millis(100));
        run_all(Nodes { clients, slack }, b.name()).await;
    });
}

macro_rules! scenario {
    ($name:ident) => {
        |nodes| Box::pin($name(nodes))
    };
}

// ----- read/write lock -----

/// 8 reader tasks over 3 clients and 2 writers, all looping: no reader is
/// ever inside with a writer, and writers are never inside together.
async fn readers_and_writers_exclude(nodes: Nodes) {
    let readers = Arc::new(AtomicUsize::new(0));
    let writers = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..10 {
        let client = nodes.node(i).clone();
        let (readers, writers) = (Arc::clone(&readers), Arc::clone(&writers));
        let writer = i >= 8;
        tasks.push(tokio::spawn(async move {
            let rw = client.rw_lock("product:7");
            for _ in 0..if writer { 10 } else { 20 } {
                let wait = Duration::from_secs(20);
                if writer {
                    let guard = rw.write().wait(wait).acquire().await.expect("write");
                    assert_eq!(readers.load(Ordering::SeqCst), 0, "a reader inside");
                    assert_eq!(writers.fetch_add(1, Ordering::SeqCst), 0, "two writers");
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    writers.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("write release");
                } else {
                    let guard = rw.read().wait(wait).acquire().await.expect("read");
                    readers.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(writers.load(Ordering::SeqCst), 0, "a writer inside");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("read release");
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("no overlap");
    }
}

/// Readers keep arriving (each holds 100 ms, and there is always one in);
/// a writer still gets in within the longest read hold + 200 ms.
async fn a_writer_is_not_starved_by_readers(nodes: Nodes) {
    const HOLD: Duration = Duration::from_millis(100);
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for i in 0..4 {
        let (client, stop) = (nodes.node(i).clone(), Arc::clone(&stop));
        readers.push(tokio::spawn(async move {
            // Staggered, so that a reader is always inside.
            tokio::time::sleep(HOLD / 4 * u32::try_from(i).unwrap_or(0)).await;
            let rw = client.rw_lock("report");
            while !stop.load(Ordering::SeqCst) {
                let guard = rw.read().wait(Duration::from_secs(20)).acquire().await;
                let guard = guard.expect("a reader gets in once the writer is done");
                tokio::time::sleep(HOLD).await;
                guard.release().await.expect("read release");
            }
        }));
    }
    tokio::time::sleep(HOLD * 3).await;
    let started = Instant::now();
    let write = nodes
        .one()
        .rw_lock("report")
        .write()
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the writer gets in");
    let waited = started.elapsed();
    eprintln!("a writer among arriving readers (holds of {HOLD:?}) got in after {waited:?}");
    stop.store(true, Ordering::SeqCst);
    write.release().await.expect("write release");
    for r in readers {
        r.await.expect("reader");
    }
    assert!(
        waited <= HOLD + Duration::from_millis(200) + nodes.slack,
        "the writer waited {waited:?} while readers kept arriving"
    );
}

/// Per task: read inside read and read inside write re-enter; write inside
/// read fails at once with `LockError::Upgrade`, never a deadlock.
async fn reentry_and_the_refused_upgrade(nodes: Nodes) {
    let locks = nodes.one().clone();
    let rw = locks.rw_lock("cart:1");
    let inner = rw.clone();
    let started = Instant::now();
    let upgrade = rw
        .read()
        .run(async move {
            let read = inner.read().acquire().await.expect("read inside read");
            assert!(read.is_reentrant());
            inner
                .write()
                .wait(Duration::from_secs(5))
                .acquire()
                .await
                .map(drop)
        })
        .await
        .expect("the read scope");
    let err = upgrade.expect_err("a write inside a read");
    assert!(
        matches!(&err, LockError::Upgrade { key } if key == "cart:1"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(1), "at once");
    assert!(err.to_string().contains("downgrade"), "{err}");

    let inner = rw.clone();
    rw.write()
        .run(async move {
            let read = inner.read().acquire().await.expect("read inside write");
            assert!(read.is_reentrant());
            // Re-entries of one scope take turns: this one's ends first.
            drop(read);
            let write = inner.write().acquire().await.expect("write inside write");
            assert!(write.is_reentrant());
        })
        .await
        .expect("the write scope");
    // A plain lock of the same name is another lock.
    let _plain = locks.lock("cart:1").acquire().await.expect("plain lock");
    let _write = rw.write().acquire().await.expect("not the plain lock");
}

/// A downgrade keeps the lock held throughout (a writer polling all along
/// never gets in) and lets the waiting readers in at once.
async fn a_downgrade_lets_readers_in_without_a_gap(nodes: Nodes) {
    let rw = nodes.one().rw_lock("doc:3");
    let write = rw.write().acquire().await.expect("write");
    let token = write.fencing_token().await.expect("fencing token");
    let mut waiting = Vec::new();
    for i in 1..4 {
        let rw = nodes.node(i).rw_lock("doc:3");
        waiting.push(tokio::spawn(async move {
            let read = rw.read().wait(Duration::from_secs(10)).acquire().await;
            let read = read.expect("a reader gets in after the downgrade");
            let at = Instant::now();
            tokio::time::sleep(Duration::from_millis(300)).await;
            read.release().await.expect("release");
            at
        }));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let grabber = {
        let (rw, stop) = (nodes.node(2).rw_lock("doc:3"), Arc::clone(&stop));
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let taken = rw.write().try_acquire().await.expect("try");
                assert!(taken.is_none(), "a writer got in during the downgrade");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let downgraded_at = Instant::now();
    let read = write.downgrade().await.expect("downgrade");
    assert_eq!(
        read.fencing_token().await.expect("fencing token"),
        token,
        "the write's token"
    );
    assert!(read.is_held());
    for w in waiting {
        let at = w.await.expect("reader");
        eprintln!(
            "downgrade: a reader in after {:?}",
            at.saturating_duration_since(downgraded_at)
        );
        assert!(
            at.saturating_duration_since(downgraded_at) <= Duration::from_millis(50) + nodes.slack,
            "a reader came in {:?} after the downgrade",
            at - downgraded_at
        );
    }
    stop.store(true, Ordering::SeqCst);
    grabber.await.expect("no writer in between");
    read.release().await.expect("release");
    let write = rw.write().acquire().await.expect("free again");
    assert!(
        write.fencing_token().await.expect("fencing token") > token,
        "write tokens increase"
    );
}

/// A reader's fencing token is the last write token issued before it
/// got in, without a script and without a loss: 0 while no writer has
/// held the lock (it used to be asked of the lock's issue script, which
/// found no writer's token and called the read lock lost).
async fn a_readers_fencing_token_is_the_last_write_token(nodes: Nodes) {
    let rw = nodes.one().rw_lock("ledger:9");
    let read = rw.read().acquire().await.expect("read");
    assert_eq!(
        read.fencing_token()
            .await
            .expect("a reader's token, no writer yet"),
        0,
        "no write token issued yet"
    );
    assert!(read.is_held(), "asking for the token lost nothing");
    read.release().await.expect("read release");
    let write = nodes.node(1).rw_lock("ledger:9").write().acquire().await;
    let write = write.expect("write");
    let token = write.fencing_token().await.expect("a writer's token");
    assert!(token > 0, "a writer's token is issued with its acquire");
    write.release().await.expect("write release");
    let read = nodes.node(2).rw_lock("ledger:9").read().acquire().await;
    let read = read.expect("read after the write");
    assert_eq!(
        read.fencing_token().await.expect("a reader's token"),
        token,
        "the last write token"
    );
    read.release().await.expect("read release");
}

// ----- semaphore -----

/// One holder inside, counted out when dropped (an aborted task too).
struct Inside<'a>(&'a AtomicUsize);

impl<'a> Inside<'a> {
    fn enter(inside: &'a AtomicUsize, most: &AtomicUsize) -> Self {
        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        Inside(inside)
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A semaphore of 4 and 16 tasks over 3 clients, some aborted while they
/// hold a permit: never more than 4 inside, and every permit comes back.
async fn a_semaphore_never_lets_more_than_its_limit_in(nodes: Nodes) {
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..16 {
        let client = nodes.node(i).clone();
        let (inside, most) = (Arc::clone(&inside), Arc::clone(&most));
        tasks.push(tokio::spawn(async move {
            let jobs = client.semaphore("jobs", 4);
            for _ in 0..8 {
                let permit = jobs
                    .clone()
                    .wait(Duration::from_secs(20))
                    .acquire()
                    .await
                    .expect("a permit");
                // Counted out on drop too: an aborted task leaves here.
                let _inside = Inside::enter(&inside, &most);
                tokio::time::sleep(Duration::from_millis(2)).await;
                drop(permit);
            }
        }));
    }
    // Every fourth task is aborted midway: whatever it held or was taking
    // is given back.
    tokio::time::sleep(Duration::from_millis(30)).await;
    for (i, task) in tasks.iter().enumerate() {
        if i % 4 == 0 {
            task.abort();
        }
    }
    for task in tasks {
        match task.await {
            Ok(()) => {}
            Err(e) if e.is_cancelled() => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(most.load(Ordering::SeqCst) <= 4, "more than 4 inside");
    let jobs = nodes.one().semaphore("jobs", 4);
    let deadline = Instant::now() + Duration::from_secs(3);
    while jobs.available().await.expect("available") != 4 {
        assert!(Instant::now() < deadline, "a permit was not given back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A release sent twice (a re-send after a lost answer) changes nothing:
/// the others' permits stay counted.
async fn a_double_release_changes_nothing(nodes: Nodes) {
    let jobs = nodes.one().semaphore("pool", 4);
    let twice = jobs.permits(2).acquire().await.expect("two");
    let other = nodes.node(1).semaphore("pool", 4).permits(2);
    let other = other.acquire().await.expect("the other two");
    assert_eq!(jobs.available().await.expect("available"), 0);
    let (first, second) = redlock_runtime::test_util::release_twice(twice)
        .await
        .expect("both releases answered");
    assert!(first && !second, "the second release found nothing");
    assert_eq!(jobs.available().await.expect("available"), 2);
    let third = jobs.permits(3).try_acquire().await.expect("try");
    assert!(third.is_none(), "the double release returned no permit");
    assert!(other.is_held());
    other.release().await.expect("release");
    assert_eq!(jobs.available().await.expect("available"), 4);
}

/// A manual extend sets a permit's lease to its ttl, a shorter one too
/// (`lease/renew.lua`; the memory store kept the longer lease until the
/// model's twin check, issue 35): the permit then runs out unrenewed and
/// frees its slot for a waiter.
async fn an_extend_to_a_shorter_ttl_shortens_a_permit(nodes: Nodes) {
    let slot = nodes.one().semaphore("shortened", 1);
    let permit = (slot.clone().ttl(Duration::from_secs(60)).renew(false))
        .acquire()
        .await
        .expect("the permit");
    permit
        .extend(Duration::from_millis(300))
        .await
        .expect("extend");
    assert!(permit.remaining() <= Duration::from_millis(300));
    let started = Instant::now();
    let waiter = nodes.node(1).semaphore("shortened", 1);
    let next = (waiter.wait(Duration::from_secs(10)).acquire())
        .await
        .expect("the slot frees once the shortened lease ends");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the lease kept its 60 s: {:?}",
        started.elapsed()
    );
    next.release().await.expect("release");
}

/// Freeing 3 permits lets 3 waiters (on 3 clients) in within 50 ms.
async fn freeing_three_permits_lets_three_waiters_in(nodes: Nodes) {
    let jobs = nodes.one().semaphore("slots", 4);
    let three = jobs.permits(3).acquire().await.expect("three");
    let _one = jobs.clone().acquire().await.expect("the fourth");
    let mut waiters = Vec::new();
    for i in 0..3 {
        let jobs = nodes.node(i).semaphore("slots", 4);
        waiters.push(tokio::spawn(async move {
            let permit = jobs.wait(Duration::from_secs(10)).acquire().await;
            let at = Instant::now();
            let permit = permit.expect("a waiter gets a permit");
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(permit);
            at
        }));
    }
    // Time for the waiters to ask, find it full and subscribe.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let freed = Instant::now();
    three.release().await.expect("release three");
    for w in waiters {
        let at = w.await.expect("waiter");
        eprintln!(
            "3 permits freed: a waiter in after {:?}",
            at.saturating_duration_since(freed)
        );
        assert!(
            at.saturating_duration_since(freed) <= Duration::from_millis(50) + nodes.slack,
            "a waiter came in {:?} after 3 permits were freed",
            at - freed
        );
    }
}

// ----- countdown latch -----

/// 4 waiters (one started before the set-up) all return within 50 ms of
/// the last of 9 count-downs (3 clients, 3 each).
async fn a_latch_wakes_every_waiter(nodes: Nodes) {
    let early = {
        let latch = nodes.node(1).latch("batch:9");
        tokio::spawn(async move {
            latch
                .wait(Duration::from_secs(20))
                .await
                .map(|()| Instant::now())
        })
    };
    let latch = nodes.one().latch("batch:9");
    assert_eq!(latch.count().await.expect("count"), None, "not set up");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!early.is_finished(), "a missing latch is not zero");
    assert!(
        latch
            .try_set_count(9, Duration::from_secs(30))
            .await
            .expect("set")
    );
    let other = nodes.node(2).latch("batch:9");
    assert!(
        !other
            .try_set_count(5, Duration::from_secs(30))
            .await
            .expect("set again"),
        "set once"
    );
    let mut waiters = vec![early];
    for i in 0..3 {
        let latch = nodes.node(i).latch("batch:9");
        waiters.push(tokio::spawn(async move {
            latch
                .wait(Duration::from_secs(20))
                .await
                .map(|()| Instant::now())
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut counters = Vec::new();
    for i in 0..3 {
        let latch = nodes.node(i).latch("batch:9");
        counters.push(tokio::spawn(async move {
            for _ in 0..3 {
                latch.count_down().await.expect("count down");
            }
        }));
    }
    for c in counters {
        c.await.expect("counter");
    }
    let last = Instant::now();
    assert_eq!(latch.count().await.expect("count"), Some(0));
    for w in waiters {
        let at = w.await.expect("waiter").expect("the latch opened");
        eprintln!(
            "latch: a waiter returned {:?} after the last count-down",
            at.saturating_duration_since(last)
        );
        assert!(
            at.saturating_duration_since(last) <= Duration::from_millis(50) + nodes.slack,
            "a waiter returned {:?} after the last count-down",
            at.saturating_duration_since(last)
        );
    }
    // Open until its ttl: a late waiter returns at once.
    let started = Instant::now();
    latch.wait(Duration::from_secs(5)).await.expect("open");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(latch.count_down().await.expect("at zero"), 0);
}

/// A count-down re-sent with its id counts once; a count-down of a latch
/// not set up, and a latch whose ttl ends with counts left, are typed
/// errors.
async fn latch_ids_and_expiry(nodes: Nodes) {
    let latch = nodes.one().latch("import:4");
    let err = latch.count_down().await.expect_err("not set up");
    assert!(
        matches!(&err, LockError::Latch { key, expired: false } if key == "import:4"),
        "{err}"
    );
    assert!(
        latch
            .try_set_count(3, Duration::from_millis(1500))
            .await
            .expect("set")
    );
    assert_eq!(latch.count_down_with_id("job-1").await.expect("once"), 2);
    assert_eq!(latch.count_down_with_id("job-1").await.expect("again"), 2);
    let again = nodes.node(1).latch("import:4");
    assert_eq!(
        again.count_down_with_id("job-1").await.expect("elsewhere"),
        2
    );
    assert_eq!(latch.count().await.expect("count"), Some(2));
    let started = Instant::now();
    let err = latch
        .wait(Duration::from_secs(10))
        .await
        .expect_err("the ttl ends first");
    assert!(
        matches!(&err, LockError::Latch { expired: true, .. }),
        "{err}"
    );
    assert!(
        started.elapsed() <= Duration::from_millis(1500) + nodes.slack * 3,
        "noticed {:?} after the wait began",
        started.elapsed()
    );
    let err = latch
        .try_set_count(0, Duration::from_secs(1))
        .await
        .expect_err("zero");
    assert!(
        matches!(
            err,
            LockError::Config(ConfigError::InvalidCount { name: "count", .. })
        ),
        "{err}"
    );
}

// ----- multi-lock -----

/// Two clients lock `[a, b]` and `[b, a]` 200 times each: no deadlock,
/// and never both inside.
async fn opposite_orders_never_deadlock(nodes: Nodes) {
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, keys) in [["account:1", "account:2"], ["account:2", "account:1"]]
        .into_iter()
        .enumerate()
    {
        let (client, inside) = (nodes.node(i).clone(), Arc::clone(&inside));
        tasks.push(tokio::spawn(async move {
            for _ in 0..200 {
                let both = client
                    .multi_lock(keys)
                    .wait(Duration::from_secs(10))
                    .acquire()
                    .await
                    .expect("both accounts");
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "both inside");
                inside.fetch_sub(1, Ordering::SeqCst);
                both.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("no deadlock")
            .expect("task");
    }
}

/// An acquire cancelled while it holds one key and waits for another (in
/// another slot on a cluster) leaves no key held; one that gives up
/// neither.
async fn a_cancelled_multi_lock_leaves_nothing_held(nodes: Nodes) {
    let blocker = nodes.node(1).lock("z").acquire().await.expect("z");
    let multi = nodes
        .one()
        .multi_lock(["z", "a"])
        .wait(Duration::from_secs(10));
    let cancelled = tokio::time::timeout(Duration::from_millis(300), multi.acquire()).await;
    assert!(cancelled.is_err(), "still waiting for z");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match nodes.node(2).lock("a").try_acquire().await.expect("try") {
            Some(a) => {
                a.release().await.expect("release");
                break;
            }
            None => assert!(Instant::now() < deadline, "`a` is still held"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let gave_up = nodes
        .one()
        .multi_lock(["a", "z"])
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .expect_err("z stays held");
    assert!(
        matches!(&gave_up, LockError::WaitTimeout { key, .. } if key == "z"),
        "{gave_up}"
    );
    let a = nodes.node(2).lock("a").try_acquire().await.expect("try");
    assert!(a.is_some(), "`a` was given back when the wait ended");
    drop(blocker);
    // Hash-tagged keys: all or none.
    let one = nodes
        .node(1)
        .lock("{acct:9}:to")
        .acquire()
        .await
        .expect("to");
    let group = nodes
        .one()
        .multi_lock(["{acct:9}:from", "{acct:9}:to"])
        .try_acquire()
        .await
        .expect("try");
    assert!(group.is_none());
    let from = nodes.node(2).lock("{acct:9}:from").try_acquire().await;
    assert!(from.expect("try").is_some(), "none of the group was taken");
    drop(one);
    let empty: [&str; 0] = [];
    let err = nodes
        .one()
        .multi_lock(empty)
        .acquire()
        .await
        .expect_err("no keys");
    assert!(matches!(
        err,
        LockError::Config(ConfigError::InvalidCount { name: "keys", .. })
    ));
}

/// Every scenario above, named for the cases below.
const SCENARIOS: [(&str, Scenario); 13] = [
    (
        "readers_and_writers_exclude",
        scenario!(readers_and_writers_exclude),
    ),
    (
        "a_readers_fencing_token_is_the_last_write_token",
        scenario!(a_readers_fencing_token_is_the_last_write_token),
    ),
    (
        "a_writer_is_not_starved_by_readers",
        scenario!(a_writer_is_not_starved_by_readers),
    ),
    (
        "reentry_and_the_refused_upgrade",
        scenario!(reentry_and_the_refused_upgrade),
    ),
    (
        "a_downgrade_lets_readers_in_without_a_gap",
        scenario!(a_downgrade_lets_readers_in_without_a_gap),
    ),
    (
        "a_semaphore_never_lets_more_than_its_limit_in",
        scenario!(a_semaphore_never_lets_more_than_its_limit_in),
    ),
    (
        "a_double_release_changes_nothing",
        scenario!(a_double_release_changes_nothing),
    ),
    (
        "an_extend_to_a_shorter_ttl_shortens_a_permit",
        scenario!(an_extend_to_a_shorter_ttl_shortens_a_permit),
    ),
    (
        "freeing_three_permits_lets_three_waiters_in",
        scenario!(freeing_three_permits_lets_three_waiters_in),
    ),
    (
        "a_latch_wakes_every_waiter",
        scenario!(a_latch_wakes_every_waiter),
    ),
    ("latch_ids_and_expiry", scenario!(latch_ids_and_expiry)),
    (
        "opposite_orders_never_deadlock",
        scenario!(opposite_orders_never_deadlock),
    ),
    (
        "a_cancelled_multi_lock_leaves_nothing_held",
        scenario!(a_cancelled_multi_lock_leaves_nothing_held),
    ),
];

/// Every scenario on each store where the synchronizers run.
#[rstest]
#[case::memory("memory")]
#[case::redis("redis")]
#[case::valkey("valkey")]
#[case::replicas("replicas")]
#[case::valkey_replicas("valkey_replicas")]
#[case::cluster("cluster")]
#[case::valkey_cluster("valkey_cluster")]
#[case::sentinel("sentinel")]
#[case::valkey_sentinel("valkey_sentinel")]
fn every_scenario(#[case] store: &str) {
    match store {
        "memory" => on(Backend::Memory),
        "redis" => on(Backend::Redis),
        "valkey" => on(Backend::Valkey),
        "valkey_cluster" => on(Backend::ValkeyCluster),
        "replicas" => on(Backend::Replicas),
        "valkey_replicas" => on(Backend::ValkeyReplicas),
        "cluster" => on(Backend::Cluster),
        "sentinel" => on(Backend::Sentinel),
        "valkey_sentinel" => on(Backend::ValkeySentinel),
        other => panic!("no store {other}"),
    }
}

// ----- Redlock -----

/// Redlock offers the multi-lock (each key by quorum) and refuses the
/// other synchronizers, and fair mode, with a typed error that says what
/// to use; over Redis and over Valkey nodes.
#[rstest]
#[case::redis(Backend::Redlock)]
#[case::valkey(Backend::ValkeyRedlock)]
fn redlock_takes_multi_locks_and_refuses_the_rest(#[case] backend: Backend) {
    backend.run(|b| async move {
        let locks = b.client().await;
        let both = locks
            .multi_lock(["x", "y"])
            .acquire()
            .await
            .expect("a multi-lock over Redlock");
        assert!(locks.lock("y").try_acquire().await.expect("try").is_none());
        both.release().await.expect("release");
        let refused = [
            locks.rw_lock("r").read().acquire().await.map(drop),
            locks.rw_lock("r").write().acquire().await.map(drop),
            locks.semaphore("s", 2).acquire().await.map(drop),
            locks.semaphore("s", 2).available().await.map(drop),
            locks.latch("l").count().await.map(drop),
            locks
                .latch("l")
                .try_set_count(1, Duration::from_secs(1))
                .await
                .map(drop),
            locks.lock("f").fair().acquire().await.map(drop),
        ];
        for result in refused {
            let err = result.expect_err("refused on Redlock");
            assert!(
                matches!(err, LockError::Config(ConfigError::Unsupported { .. })),
                "{err}"
            );
            assert!(err.to_string().contains("one Redis"), "{err}");
        }
    });
}

// ----- what only Redis shows -----

/// `calls` of one command in `INFO commandstats`.
async fn calls(url: &str, command: &str) -> u64 {
    let mut conn = raw_connection(url).await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Keys that share a hash tag are taken in one script: one round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_tagged_keys_are_taken_in_one_round_trip() {
    let server = RedisServer::start().await;
    let locks = LockClient::connect(server.url()).await.expect("connect");
    let keys = ["{acct:7}:from", "{acct:7}:to", "{acct:7}:fees"];
    // Warm: the script loaded, the connection open.
    locks
        .multi_lock(keys)
        .acquire()
        .await
        .expect("warm")
        .release()
        .await
        .expect("release");
    let before = calls(&server.url(), "evalsha").await + calls(&server.url(), "eval").await;
    let all = locks.multi_lock(keys).acquire().await.expect("all three");
    let after = calls(&server.url(), "evalsha").await + calls(&server.url(), "eval").await;
    assert_eq!(after - before, 1, "one script for the three keys");
    // Issued with the group's script: no round trip to ask for them.
    let tokens = all.fencing_tokens().await.expect("tokens");
    assert_eq!(tokens.len(), 3);
    assert!(tokens.iter().all(|(_, t)| *t > 0));
    let asked = calls(&server.url(), "evalsha").await + calls(&server.url(), "eval").await;
    assert_eq!(asked, after, "the tokens came with the acquire");
    all.release().await.expect("release");
}

/// Issue 32, part 5: a group acquire that fails leaves none of the
/// group's locks held. Redis keeps what a script wrote before an error:
/// the group's script used to set the locks ahead of a key it then failed
/// on, with no guard to release them, until their ttl ran out. The bad
/// key is the fencing counter of the group's last lock (the group is
/// taken in the order of its lock keys: `a`, `b`, `c`), once of another
/// type (a hash: `WRONGTYPE`), once a string that holds no number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_32_a_group_that_fails_leaves_none_of_its_locks_held() {
    let server = RedisServer::start().await;
    let url = server.url();
    let locks = LockClient::connect(&url).await.expect("connect");
    let other = LockClient::connect(&url).await.expect("connect");
    let mut conn = raw_connection(&url).await;
    let keys = ["{acct:32}:a", "{acct:32}:b", "{acct:32}:c"];
    let bad = "lock:{{acct:32}:c}:fence";
    for hash in [true, false] {
        let _: () = redis::cmd("DEL")
            .arg(bad)
            .query_async(&mut conn)
            .await
            .expect("DEL");
        if hash {
            let _: () = redis::cmd("HSET")
                .arg(bad)
                .arg("n")
                .arg(1)
                .query_async(&mut conn)
                .await
                .expect("HSET");
        } else {
            let _: () = redis::cmd("SET")
                .arg(bad)
                .arg("many")
                .query_async(&mut conn)
                .await
                .expect("SET");
        }
        let what = if hash { "a hash" } else { "no number" };
        let err = locks
            .multi_lock(keys)
            .acquire()
            .await
            .expect_err("a counter the group cannot count from");
        assert!(matches!(err, LockError::Redis { .. }), "{what}: {err}");
        // Nothing was written: no lock key, at once (not after a give-back).
        for key in keys {
            let lock = format!("lock:{{{key}}}");
            assert!(!key_exists(&url, &lock).await, "{what}: {key} was left set");
        }
        // Another client takes each one at once.
        for key in keys {
            let guard = other
                .lock(key)
                .try_acquire()
                .await
                .expect("try")
                .unwrap_or_else(|| panic!("{what}: {key} is still held"));
            guard.release().await.expect("release");
        }
    }
    // With the counter gone, the group is taken: nothing of the failures
    // stayed in the way.
    let _: () = redis::cmd("DEL")
        .arg(bad)
        .query_async(&mut conn)
        .await
        .expect("DEL");
    let all = locks.multi_lock(keys).acquire().await.expect("the group");
    all.release().await.expect("release");
}

/// Once every holder is gone and every ttl has ended, nothing is left but
/// the fencing counters (the read/write lock's, the multi-lock's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_left_but_fencing_counters() {
    let server = RedisServer::start().await;
    let locks = LockClient::connect(server.url()).await.expect("connect");
    let ttl = Duration::from_millis(400);
    let rw = locks.rw_lock("rw");
    let read = rw.read().ttl(ttl).acquire().await.expect("read");
    // A writer that waits, then gives up: its place among the writers goes.
    let gave_up = rw
        .write()
        .ttl(ttl)
        .wait(Duration::from_millis(100))
        .acquire()
        .await;
    assert!(gave_up.is_err());
    drop(read);
    // Holders that die (never released, never renewed): their leases run
    // out.
    let write = rw
        .write()
        .ttl(ttl)
        .renew(false)
        .wait(Duration::from_secs(2))
        .acquire()
        .await
        .expect("write");
    let read = write.downgrade().await.expect("downgrade");
    std::mem::forget(read);
    let sem = locks.semaphore("sem", 3);
    let permit = sem.permits(2).ttl(ttl).renew(false).acquire().await;
    std::mem::forget(permit.expect("permits"));
    let held = sem.clone().ttl(ttl).acquire().await.expect("one");
    held.release().await.expect("release");
    let latch = locks.latch("latch");
    latch.try_set_count(2, ttl).await.expect("set");
    latch.count_down().await.expect("count down");
    let multi = locks
        .multi_lock(["{m}1", "{m}2", "m3"])
        .ttl(ttl)
        .acquire()
        .await
        .expect("multi");
    multi.release().await.expect("release");
    let mut conn = raw_connection(server.url()).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut conn)
            .await
            .expect("KEYS");
        let left: Vec<&String> = keys.iter().filter(|k| !k.ends_with(":fence")).collect();
        if left.is_empty() {
            assert!(keys.iter().any(|k| k.ends_with(":rw:fence")), "{keys:?}");
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
