//! `#[distributed_lock(mode = ..)]`, `#[distributed_lock(keys = [..])]` and
//! `#[distributed_semaphore]` on the in-memory backend: readers hold
//! together, a writer keeps them out, a write inside a read of the same
//! key fails with `LockError::Upgrade`, a `keys` function holds every key,
//! a semaphore of 2 lets at most two calls run at once, and `on_busy`
//! ("error" and "skip") behaves for each as it does for a lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redlock_runtime::{LockClient, LockError, distributed_lock, distributed_semaphore};
use tokio::sync::{Barrier, oneshot};

/// Long enough for anything that should happen to happen.
const PATIENCE: Duration = Duration::from_secs(5);

/// Lets a test see a body start, and decide when it ends.
struct Gate {
    entered: oneshot::Sender<()>,
    proceed: oneshot::Receiver<()>,
}

struct GateControl {
    entered: oneshot::Receiver<()>,
    proceed: oneshot::Sender<()>,
}

fn gate() -> (Gate, GateControl) {
    let (entered_tx, entered_rx) = oneshot::channel();
    let (proceed_tx, proceed_rx) = oneshot::channel();
    let gate = Gate {
        entered: entered_tx,
        proceed: proceed_rx,
    };
    let control = GateControl {
        entered: entered_rx,
        proceed: proceed_tx,
    };
    (gate, control)
}

impl Gate {
    async fn pass(self) {
        self.entered.send(()).expect("the test listens");
        // A dropped sender (the test gave up) ends the body too.
        let _ = self.proceed.await;
    }
}

impl GateControl {
    async fn entered(&mut self) {
        tokio::time::timeout(PATIENCE, &mut self.entered)
            .await
            .expect("the body starts")
            .expect("the body reports");
    }
}

#[distributed_lock(key = "product:<id>", mode = "read", client = locks)]
async fn read(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "product:<id>", mode = "read", on_busy = "skip", client = locks)]
async fn read_or_skip(locks: &LockClient, id: u32) -> Option<u32> {
    Some(id)
}

#[distributed_lock(key = "product:<id>", mode = "read", wait = "5s", client = locks)]
async fn read_waiting(locks: LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "product:<id>", mode = "read", client = locks)]
async fn read_together(locks: LockClient, id: u32, meet: Arc<Barrier>) -> Result<(), LockError> {
    meet.wait().await;
    Ok(())
}

#[distributed_lock(key = "product:<id>", mode = "read", client = locks)]
async fn read_holding(locks: LockClient, id: u32, gate: Gate) -> Result<(), LockError> {
    gate.pass().await;
    Ok(())
}

#[distributed_lock(key = "product:<id>", mode = "write", client = locks)]
async fn write(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "product:<id>", mode = "write", on_busy = "skip", client = locks)]
async fn write_or_skip(locks: &LockClient, id: u32) -> Result<Option<u32>, LockError> {
    Ok(Some(id))
}

#[distributed_lock(key = "product:<id>", mode = "write", client = locks)]
async fn write_holding(locks: LockClient, id: u32, gate: Gate) -> Result<(), LockError> {
    gate.pass().await;
    Ok(())
}

/// A write-mode call inside a read-mode call of the same key.
#[distributed_lock(key = "product:<id>", mode = "read", client = locks)]
async fn read_then_write(locks: &LockClient, id: u32) -> Result<Result<u32, LockError>, LockError> {
    Ok(write(locks, id).await)
}

/// A read-mode call inside a write-mode call of the same key re-enters.
#[distributed_lock(key = "product:<id>", mode = "write", client = locks)]
async fn write_then_read(locks: &LockClient, id: u32) -> Result<u32, LockError> {
    read(locks, id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_mode_calls_hold_the_lock_together() {
    let locks = LockClient::in_memory();
    let meet = Arc::new(Barrier::new(2));
    // Each body waits for the other inside: both must hold at once.
    let first = tokio::spawn(read_together(locks.clone(), 1, Arc::clone(&meet)));
    let second = tokio::spawn(read_together(locks.clone(), 1, Arc::clone(&meet)));
    for reader in [first, second] {
        tokio::time::timeout(PATIENCE, reader)
            .await
            .expect("two readers hold the lock at once")
            .expect("reader task")
            .expect("read lock");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_mode_call_keeps_readers_and_writers_out() {
    let locks = LockClient::in_memory();
    let (gate, mut writer) = gate();
    let holding = tokio::spawn(write_holding(locks.clone(), 2, gate));
    writer.entered().await;

    let busy = read(&locks, 2).await.expect_err("a writer holds the key");
    assert!(
        matches!(&busy, LockError::Busy { key, .. } if key == "product:2"),
        "{busy:?}"
    );
    assert_eq!(read_or_skip(&locks, 2).await, None);
    let busy = write(&locks, 2).await.expect_err("a writer holds the key");
    assert!(busy.is_busy(), "{busy:?}");
    assert!(matches!(write_or_skip(&locks, 2).await, Ok(None)));
    // Another key is free.
    assert_eq!(read(&locks, 3).await.expect("another key"), 3);

    // A reader that waits gets in once the writer is done.
    let waiting = tokio::spawn(read_waiting(locks.clone(), 2));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the reader waits for the writer");
    writer.proceed.send(()).expect("the writer waits");
    holding.await.expect("writer task").expect("write lock");
    let read = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the waiting reader gets in")
        .expect("reader task");
    assert_eq!(read.expect("read lock"), 2);
    assert_eq!(read_or_skip(&locks, 2).await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_mode_call_keeps_writers_out() {
    let locks = LockClient::in_memory();
    let (gate, mut reader) = gate();
    let holding = tokio::spawn(read_holding(locks.clone(), 4, gate));
    reader.entered().await;
    assert_eq!(read(&locks, 4).await.expect("readers share"), 4);
    let busy = write(&locks, 4).await.expect_err("a reader holds the key");
    assert!(busy.is_busy(), "{busy:?}");
    assert!(matches!(write_or_skip(&locks, 4).await, Ok(None)));
    reader.proceed.send(()).expect("the reader waits");
    holding.await.expect("reader task").expect("read lock");
    assert_eq!(write(&locks, 4).await.expect("free again"), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_inside_a_read_of_the_same_key_is_an_upgrade_error() {
    let locks = LockClient::in_memory();
    let inner = read_then_write(&locks, 5)
        .await
        .expect("the read lock is taken");
    let error = inner.expect_err("a write inside a read would wait for itself");
    assert!(
        matches!(&error, LockError::Upgrade { key } if key == "product:5"),
        "{error:?}"
    );
    // The other way round re-enters.
    assert_eq!(write_then_read(&locks, 5).await.expect("re-entry"), 5);
}

/// Inside the body, another task's lock of either key.
#[distributed_lock(keys = ["account:<from>", "account:<to>"], client = locks)]
async fn transfer(
    locks: &LockClient,
    from: u64,
    to: u64,
) -> Result<[Result<(), LockError>; 2], LockError> {
    let other = locks.clone();
    let probe = tokio::spawn(async move {
        let mut outcomes = [Ok(()), Ok(())];
        for (key, outcome) in [from, to].into_iter().zip(&mut outcomes) {
            let guard = other.lock(format!("account:{key}")).acquire().await;
            *outcome = guard.map(drop);
        }
        outcomes
    });
    Ok(probe.await.expect("probe task"))
}

#[distributed_lock(keys = ["account:<from>", "account:<to>"], on_busy = "skip", client = locks)]
async fn transfer_or_skip(locks: &LockClient, from: u64, to: u64) -> Option<(u64, u64)> {
    Some((from, to))
}

#[distributed_lock(keys = ["account:<from>", "account:<to>"], wait = "100ms", client = locks)]
async fn transfer_waiting(locks: &LockClient, from: u64, to: u64) -> Result<(), LockError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_function_holds_every_key() {
    let locks = LockClient::in_memory();
    let probes = transfer(&locks, 1, 2).await.expect("both keys free");
    for probe in probes {
        let error = probe.expect_err("another task finds the key held");
        assert!(matches!(error, LockError::Busy { .. }), "{error:?}");
    }
    // Given back together.
    for key in ["account:1", "account:2"] {
        let guard = locks.lock(key).acquire().await.expect("released");
        guard.release().await.expect("release");
    }

    // One key held elsewhere: the call does not run.
    let held = locks.lock("account:4").acquire().await.expect("free");
    assert_eq!(transfer_or_skip(&locks, 3, 4).await, None);
    let error = transfer_waiting(&locks, 4, 3)
        .await
        .expect_err("account:4 is held");
    assert!(
        matches!(&error, LockError::WaitTimeout { key, .. } if key == "account:4"),
        "{error:?}"
    );
    // Nothing was left half-taken.
    let guard = locks.lock("account:3").acquire().await.expect("given back");
    guard.release().await.expect("release");
    held.release().await.expect("release");
    assert_eq!(transfer_or_skip(&locks, 3, 4).await, Some((3, 4)));
}

/// Counts the bodies running at once.
#[derive(Default)]
struct Occupancy {
    inside: AtomicUsize,
    most: AtomicUsize,
    ran: AtomicUsize,
}

#[distributed_semaphore(key = "jobs:<queue>", permits = 2, wait = "5s", client = locks)]
async fn job(
    locks: LockClient,
    queue: &'static str,
    seen: Arc<Occupancy>,
) -> Result<(), LockError> {
    let now = seen.inside.fetch_add(1, Ordering::SeqCst) + 1;
    seen.most.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    seen.inside.fetch_sub(1, Ordering::SeqCst);
    seen.ran.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_of_two_lets_two_calls_run_at_once() {
    let locks = LockClient::in_memory();
    let seen = Arc::new(Occupancy::default());
    let calls: Vec<_> = (0..6)
        .map(|_| tokio::spawn(job(locks.clone(), "mail", Arc::clone(&seen))))
        .collect();
    for call in calls {
        tokio::time::timeout(PATIENCE, call)
            .await
            .expect("every call gets a permit in turn")
            .expect("job task")
            .expect("permit");
    }
    assert_eq!(seen.ran.load(Ordering::SeqCst), 6);
    assert_eq!(
        seen.most.load(Ordering::SeqCst),
        2,
        "at most two bodies at once, and two did run together"
    );
    // Every permit was given back.
    let semaphore = locks.semaphore("jobs:mail", 2);
    assert_eq!(semaphore.available().await.expect("available"), 2);
}

#[distributed_semaphore(key = "single", permits = 1, client = locks)]
async fn single(locks: &LockClient) -> Result<u32, LockError> {
    Ok(1)
}

#[distributed_semaphore(key = "single", permits = 1, wait = "100ms", client = locks)]
async fn single_waiting(locks: &LockClient) -> Result<u32, LockError> {
    Ok(1)
}

#[distributed_semaphore(key = "single", permits = 1, on_busy = "skip", client = locks)]
async fn single_or_skip(locks: &LockClient, ran: &AtomicUsize) {
    ran.fetch_add(1, Ordering::SeqCst);
}

#[distributed_semaphore(key = "single", permits = 1, on_busy = "skip", client = locks)]
async fn single_option(locks: &LockClient) -> Option<u32> {
    Some(2)
}

#[distributed_semaphore(key = "single", permits = 1, on_busy = "skip", client = locks)]
async fn single_result(locks: &LockClient) -> Result<Option<u32>, LockError> {
    Ok(Some(3))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_busy_of_a_semaphore_is_that_of_a_lock() {
    let locks = LockClient::in_memory();
    let ran = AtomicUsize::new(0);
    let taken = locks
        .semaphore("single", 1)
        .acquire()
        .await
        .expect("the only permit");

    let busy = single(&locks).await.expect_err("no permit free");
    assert!(
        matches!(&busy, LockError::Busy { key, .. } if key == "single"),
        "{busy:?}"
    );
    let timeout = single_waiting(&locks).await.expect_err("no permit free");
    assert!(
        matches!(timeout, LockError::WaitTimeout { .. }),
        "{timeout:?}"
    );
    single_or_skip(&locks, &ran).await;
    assert_eq!(ran.load(Ordering::SeqCst), 0, "skipped");
    assert_eq!(single_option(&locks).await, None);
    assert!(matches!(single_result(&locks).await, Ok(None)));

    taken.release().await.expect("release");
    assert_eq!(single(&locks).await.expect("a permit is free"), 1);
    single_or_skip(&locks, &ran).await;
    assert_eq!(ran.load(Ordering::SeqCst), 1, "ran");
    assert_eq!(single_option(&locks).await, Some(2));
    assert!(matches!(single_result(&locks).await, Ok(Some(3))));
}
