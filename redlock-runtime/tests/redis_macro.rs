//! `#[distributed_lock]` against real Redis: serialization per key,
//! parallelism across keys, `client = self.locks`, `on_busy = "skip"` across
//! nodes, release on panic and cancellation, nested calls, key encoding,
//! and the errors callers see.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};
use redlock_tests::RedisServer;
use tokio::sync::oneshot;

async fn client(url: &str) -> LockClient {
    LockClient::connect(url)
        .await
        .expect("connect to the test Redis")
}

/// The application's error type: lock failures convert into it.
#[derive(Debug)]
enum AppError {
    Lock(LockError),
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

/// Lets a test see a body start and decide when it ends.
struct Step {
    entered: oneshot::Sender<(String, u64)>,
    proceed: oneshot::Receiver<()>,
}

struct StepControl {
    entered: oneshot::Receiver<(String, u64)>,
    proceed: oneshot::Sender<()>,
}

fn step() -> (Step, StepControl) {
    let (entered_tx, entered_rx) = oneshot::channel();
    let (proceed_tx, proceed_rx) = oneshot::channel();
    (
        Step {
            entered: entered_tx,
            proceed: proceed_rx,
        },
        StepControl {
            entered: entered_rx,
            proceed: proceed_tx,
        },
    )
}

impl Step {
    /// Reports the held lock's key and token, then waits for the test.
    async fn run(self) -> u64 {
        let held = current_lock().expect("the body runs holding the lock");
        let token = held.fencing_token().await.expect("fencing token");
        self.entered
            .send((held.key().to_owned(), token))
            .expect("the test listens");
        // A dropped sender (the test gave up) ends the body too.
        let _ = self.proceed.await;
        token
    }
}

struct Orders {
    locks: LockClient,
    placed: AtomicUsize,
}

impl Orders {
    #[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s", client = self.locks)]
    async fn place_order(&self, user_id: u64, order_id: &str, step: Step) -> Result<u64, AppError> {
        self.placed.fetch_add(1, Ordering::SeqCst);
        Ok(step.run().await)
    }

    /// Tries once (no wait).
    #[distributed_lock(key = "order:<user_id>:<order_id>", client = self.locks)]
    async fn try_place(&self, user_id: u64, order_id: &str) -> Result<u64, AppError> {
        Ok(current_lock()
            .expect("held")
            .fencing_token()
            .await
            .expect("fencing token"))
    }

    #[distributed_lock(key = "account:<id>", client = self.locks)]
    async fn transfer(&self, id: u64) -> Result<(u64, u64, usize), LockError> {
        let outer = current_lock()
            .expect("held")
            .fencing_token()
            .await
            .expect("fencing token");
        // A locked method calling another on the same key: it must not
        // wait for itself (no wait is allowed, so waiting would fail).
        let (inner, depth) = self.audit(id).await?;
        Ok((outer, inner, depth))
    }

    #[distributed_lock(key = "account:<id>", client = self.locks)]
    async fn audit(&self, id: u64) -> Result<(u64, usize), LockError> {
        let held = current_lock().expect("held");
        Ok((
            held.fencing_token().await.expect("fencing token"),
            held.depth(),
        ))
    }
}

fn orders(locks: LockClient) -> Arc<Orders> {
    Arc::new(Orders {
        locks,
        placed: AtomicUsize::new(0),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_arguments_serialize_on_one_redis_key() {
    let server = RedisServer::start().await;
    let orders = orders(client(&server.url()).await);
    let mut redis = redlock_tests::raw_connection(&server.url()).await;

    let (step_a, control_a) = step();
    let first = tokio::spawn({
        let orders = Arc::clone(&orders);
        async move { orders.place_order(42, "A-17", step_a).await }
    });
    let (key, token_a) = control_a.entered.await.expect("the first call runs");
    assert_eq!(key, "order:42:A-17");
    let exists: bool = redis.exists("lock:{order:42:A-17}").await.expect("EXISTS");
    assert!(
        exists,
        "the lock lives at lock:{{order:42:A-17}} while the body runs"
    );

    // Same arguments from another task: it waits for the first body.
    let (step_b, mut control_b) = step();
    let second = tokio::spawn({
        let orders = Arc::clone(&orders);
        async move { orders.place_order(42, "A-17", step_b).await }
    });
    let overlapped = tokio::time::timeout(Duration::from_millis(300), &mut control_b.entered).await;
    assert!(
        overlapped.is_err(),
        "the second body started while the first held the lock"
    );
    assert_eq!(orders.placed.load(Ordering::SeqCst), 1);

    control_a.proceed.send(()).expect("first body waits");
    let result_a = first.await.expect("no panic").expect("first call succeeds");
    assert_eq!(result_a, token_a);
    let (_, token_b) = tokio::time::timeout(Duration::from_secs(5), control_b.entered)
        .await
        .expect("the second body starts once the first returned")
        .expect("entered");
    control_b.proceed.send(()).expect("second body waits");
    let result_b = second
        .await
        .expect("no panic")
        .expect("second call succeeds");
    assert_eq!(result_b, token_b);
    assert!(
        token_b > token_a,
        "fencing tokens increase: {token_a} then {token_b}"
    );
    let exists: bool = redis.exists("lock:{order:42:A-17}").await.expect("EXISTS");
    assert!(!exists, "the lock is released when the body returns");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_arguments_run_in_parallel() {
    let server = RedisServer::start().await;
    let orders = orders(client(&server.url()).await);

    let (step_a, control_a) = step();
    let (step_b, control_b) = step();
    let first = tokio::spawn({
        let orders = Arc::clone(&orders);
        async move { orders.place_order(42, "A-17", step_a).await }
    });
    let (key_a, _) = control_a.entered.await.expect("first body runs");
    let second = tokio::spawn({
        let orders = Arc::clone(&orders);
        async move { orders.place_order(42, "A-18", step_b).await }
    });
    // The second body starts while the first still holds its lock.
    let (key_b, _) = tokio::time::timeout(Duration::from_secs(5), control_b.entered)
        .await
        .expect("another order's body does not wait for the first")
        .expect("entered");
    assert_eq!(
        (key_a.as_str(), key_b.as_str()),
        ("order:42:A-17", "order:42:A-18")
    );
    control_a.proceed.send(()).expect("waits");
    control_b.proceed.send(()).expect("waits");
    first.await.expect("no panic").expect("first succeeds");
    second.await.expect("no panic").expect("second succeeds");
}

#[distributed_lock(key = "pair:<a>:<b>", client = locks)]
async fn pair(locks: &LockClient, a: &str, b: &str, step: Step) -> Result<u64, LockError> {
    Ok(step.run().await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_encoding_keeps_value_pairs_apart() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let mut redis = redlock_tests::raw_connection(&server.url()).await;

    let (step_a, control_a) = step();
    let (step_b, control_b) = step();
    let first = tokio::spawn({
        let locks = locks.clone();
        async move { pair(&locks, "1:2", "3", step_a).await }
    });
    let second = tokio::spawn({
        let locks = locks.clone();
        async move { pair(&locks, "1", "2:3", step_b).await }
    });
    // Both hold their lock at once: the keys differ.
    let (key_a, _) = tokio::time::timeout(Duration::from_secs(5), control_a.entered)
        .await
        .expect("(\"1:2\", \"3\") runs")
        .expect("entered");
    let (key_b, _) = tokio::time::timeout(Duration::from_secs(5), control_b.entered)
        .await
        .expect("(\"1\", \"2:3\") runs while (\"1:2\", \"3\") holds its lock")
        .expect("entered");
    assert_eq!(key_a, "pair:1%3A2:3");
    assert_eq!(key_b, "pair:1:2%3A3");
    for key in ["lock:{pair:1%3A2:3}", "lock:{pair:1:2%3A3}"] {
        let exists: bool = redis.exists(key).await.expect("EXISTS");
        assert!(exists, "{key} is held");
    }
    control_a.proceed.send(()).expect("waits");
    control_b.proceed.send(()).expect("waits");
    first.await.expect("no panic").expect("ok");
    second.await.expect("no panic").expect("ok");
}

/// One node of a scheduled job.
struct Node {
    id: usize,
    locks: LockClient,
}

#[distributed_lock(key = "job:<name>", on_busy = "skip", hold_at_least = "800ms", client = node.locks)]
async fn tick(node: &Node, name: &str, runs: &AtomicUsize) -> Option<usize> {
    runs.fetch_add(1, Ordering::SeqCst);
    Some(node.id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_lets_exactly_one_of_three_nodes_run_per_period() {
    let server = RedisServer::start().await;
    let mut nodes = Vec::new();
    for id in 0..3 {
        // Three clients, as three processes would have.
        nodes.push(Node {
            id,
            locks: client(&server.url()).await,
        });
    }
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let runs = AtomicUsize::new(0);

    for period in 0..3 {
        let (a, b, c) = tokio::join!(
            tick(&nodes[0], "report", &runs),
            tick(&nodes[1], "report", &runs),
            tick(&nodes[2], "report", &runs),
        );
        let ran: Vec<usize> = [a, b, c].into_iter().flatten().collect();
        assert_eq!(ran.len(), 1, "period {period}: nodes {ran:?} ran");
        assert_eq!(runs.load(Ordering::SeqCst), period + 1);

        // The winner returned, but the minimum hold keeps a late node out.
        let pttl: i64 = redis.pttl("lock:{job:report}").await.expect("PTTL");
        assert!(
            pttl > 0,
            "period {period}: the job stays taken after the body (pttl {pttl})"
        );
        let late = tick(&nodes[(ran[0] + 1) % 3], "report", &runs).await;
        assert_eq!(late, None, "period {period}: a late node ran the job again");

        // The next period starts when the hold has ended.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let exists: bool = redis.exists("lock:{job:report}").await.expect("EXISTS");
            if !exists {
                break;
            }
            assert!(Instant::now() < deadline, "the minimum hold never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[distributed_lock(key = "job:<name>", client = locks)]
async fn panics(
    locks: &LockClient,
    name: &str,
    entered: oneshot::Sender<()>,
) -> Result<(), LockError> {
    entered.send(()).expect("the test listens");
    panic!("the body of {name} panics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_in_the_body_releases_the_lock() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let (entered_tx, entered_rx) = oneshot::channel();
    let task = tokio::spawn({
        let locks = locks.clone();
        async move { panics(&locks, "import", entered_tx).await }
    });
    entered_rx.await.expect("the body ran");
    let joined = task.await;
    assert!(joined.is_err_and(|e| e.is_panic()), "the body panicked");

    // The default ttl is 30 s: acquiring within the 5 s wait proves release.
    let guard = locks
        .lock("job:import")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the panic released the lock");
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_call_releases_the_lock() {
    let server = RedisServer::start().await;
    let orders = orders(client(&server.url()).await);
    let (step, control) = step();
    let task = tokio::spawn({
        let orders = Arc::clone(&orders);
        async move { orders.place_order(7, "B-1", step).await }
    });
    let (_, token) = control.entered.await.expect("the body runs");
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    drop(control.proceed);

    // ttl 15 s; the lock comes free within the wait only if it was released.
    let started = Instant::now();
    let guard = orders
        .locks
        .lock("order:7:B-1")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("cancellation released the lock");
    assert!(guard.fencing_token().await.expect("fencing token") > token);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_annotated_calls_on_the_same_key_reenter() {
    let server = RedisServer::start().await;
    let orders = orders(client(&server.url()).await);
    let (outer, inner, depth) = tokio::time::timeout(Duration::from_secs(5), orders.transfer(9))
        .await
        .expect("no deadlock")
        .expect("nested call succeeds");
    assert_eq!(outer, inner, "the inner call shares the outer lock");
    assert_eq!(depth, 2);
    // Released by the outer scope.
    let guard = orders
        .locks
        .lock("account:9")
        .acquire()
        .await
        .expect("free again");
    assert!(guard.fencing_token().await.expect("fencing token") > outer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_failures_reach_the_callers_error_type() {
    let server = RedisServer::start().await;
    let orders = orders(client(&server.url()).await);
    let other = client(&server.url()).await;

    let held = other.lock("order:1:C-1").acquire().await.expect("acquire");
    match orders.try_place(1, "C-1").await {
        Err(AppError::Lock(e)) => assert!(e.is_busy() && e.key() == Some("order:1:C-1"), "{e}"),
        other => panic!("expected a busy error, got {other:?}"),
    }
    let (step, _control) = step();
    let started = Instant::now();
    match orders.place_order(1, "C-1", step).await {
        Err(AppError::Lock(LockError::WaitTimeout { waited, .. })) => {
            assert_eq!(waited, Duration::from_secs(5));
            assert!(started.elapsed() >= Duration::from_secs(5));
        }
        other => panic!("expected a wait timeout, got {other:?}"),
    }
    assert_eq!(orders.placed.load(Ordering::SeqCst), 0, "no body ran");
    held.release().await.expect("release");
    assert!(orders.try_place(1, "C-1").await.is_ok());
}

#[distributed_lock(key = "job:<name>", on_busy = "skip", client = locks)]
async fn nightly(locks: &LockClient, name: &str, ran: &AtomicBool) {
    ran.store(true, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_an_error_not_busy_and_skip_does_not_run() {
    let mut server = RedisServer::start().await;
    let locks = LockClient::builder()
        .url(server.url())
        .command_timeout(Duration::from_millis(200))
        .connection_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("connect");
    let orders = orders(locks.clone());
    server.kill().await;

    match orders.try_place(1, "D-1").await {
        Err(AppError::Lock(e)) => assert!(!e.is_busy() && e.is_transient(), "{e}"),
        other => panic!("expected a Redis failure, got {other:?}"),
    }
    let ran = AtomicBool::new(false);
    nightly(&locks, "backup", &ran).await;
    assert!(!ran.load(Ordering::SeqCst), "the body ran without the lock");
}

#[distributed_lock(key = "job:<name>", ttl = "300ms", renew = false, client = locks)]
async fn overruns(locks: &LockClient, name: &str, finished: &AtomicBool) -> Result<(), LockError> {
    std::future::pending::<()>().await;
    finished.store(true, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock(key = "job:<name>", ttl = "300ms", renew = false, on_lost = "signal", client = locks)]
async fn overruns_signalled(locks: &LockClient, name: &str) -> Result<bool, LockError> {
    let held = current_lock().expect("held");
    held.lost().await;
    Ok(held.is_held())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_renewal_the_ttl_bounds_the_body() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let finished = AtomicBool::new(false);
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), overruns(&locks, "etl", &finished))
        .await
        .expect("the body is stopped when the lease runs out");
    assert!(matches!(result, Err(LockError::Lost { .. })), "{result:?}");
    assert!(!finished.load(Ordering::SeqCst));
    assert!(started.elapsed() >= Duration::from_millis(300));

    // on_lost = "signal": the body learns of it and returns its own value.
    let still_held =
        tokio::time::timeout(Duration::from_secs(5), overruns_signalled(&locks, "etl2"))
            .await
            .expect("lost() completes when the lease runs out");
    assert!(
        !still_held.expect("the body's own value"),
        "is_held() is false once lost"
    );
}
