//! Run-once calls (`LockClient::idempotent`): each scenario written once
//! and run over every store (in memory, one Redis and one Valkey, a
//! primary with a replica through `WAIT`, Cluster, Sentinel, a client
//! built on a connection manager, which polls, and Redlock, whose records
//! are kept in the process), three clients standing for three workers
//! (on Redlock, three tasks of one client: its records protect one
//! instance).
//! A crashed worker's takeover cuts a real connection (Redis, Valkey).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redlock_runtime::{IdempotentError, LockClient, WorkContext, idempotent};
use redlock_tests::{Backend, FaultProxy, RedisServer, Server};
use rstest::rstest;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Three clients of one store (three workers).
#[derive(Clone)]
struct Nodes {
    clients: Vec<LockClient>,
}

impl Nodes {
    fn node(&self, i: usize) -> &LockClient {
        &self.clients[i % self.clients.len()]
    }
}

type Scenario = fn(Nodes) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! scenario {
    ($name:ident) => {
        (stringify!($name), |nodes| Box::pin($name(nodes)) as _)
    };
}

const SCENARIOS: &[(&str, Scenario)] = &[
    scenario!(a_duplicate_gets_the_stored_result_without_running),
    scenario!(a_concurrent_duplicate_is_told_in_progress_or_waits_for_the_result),
    scenario!(a_failed_panicking_or_cancelled_run_stores_nothing),
    scenario!(a_waiter_runs_the_work_when_the_first_run_fails),
    scenario!(chosen_errors_are_stored_and_replayed),
    scenario!(another_payload_under_the_same_key_is_a_mismatch),
    scenario!(a_result_over_the_limit_reaches_its_caller_and_is_not_replayed),
    scenario!(a_record_of_another_type_is_refused_and_kept),
    scenario!(bad_keys_and_options_are_refused_before_the_work),
    scenario!(many_workers_run_each_key_once),
    scenario!(the_attribute_runs_its_body_once_per_key),
    scenario!(a_run_longer_than_its_lease_keeps_its_key),
];

async fn run_all(nodes: Nodes, store: &str) {
    for (name, scenario) in SCENARIOS {
        eprintln!("{store}: {name}");
        scenario(nodes.clone()).await;
    }
}

fn on(backend: Backend) {
    backend.run_threaded(|b| async move {
        let mut clients = Vec::new();
        for _ in 0..3 {
            // A Redlock client keeps its records in its process: its
            // workers are tasks of one client.
            match (b.backend(), clients.first()) {
                (Backend::Redlock, Some(first)) => clients.push(LockClient::clone(first)),
                _ => clients.push(b.client().await),
            }
        }
        run_all(Nodes { clients }, b.name()).await;
    });
}

/// Every scenario on each store.
#[rstest]
#[case::memory("memory")]
#[case::redis("redis")]
#[case::valkey("valkey")]
#[case::manager("manager")]
#[case::redlock("redlock")]
#[case::replicas("replicas")]
#[case::cluster("cluster")]
#[case::valkey_cluster("valkey_cluster")]
#[case::sentinel("sentinel")]
#[case::valkey_replicas("valkey_replicas")]
#[case::valkey_sentinel("valkey_sentinel")]
#[case::valkey_redlock("valkey_redlock")]
#[case::valkey_manager("valkey_manager")]
fn every_scenario(#[case] store: &str) {
    match store {
        "memory" => on(Backend::Memory),
        "redis" => on(Backend::Redis),
        "valkey" => on(Backend::Valkey),
        "manager" => on(Backend::Manager),
        "redlock" => on(Backend::Redlock),
        "replicas" => on(Backend::Replicas),
        "cluster" => on(Backend::Cluster),
        "valkey_cluster" => on(Backend::ValkeyCluster),
        "sentinel" => on(Backend::Sentinel),
        "valkey_replicas" => on(Backend::ValkeyReplicas),
        "valkey_sentinel" => on(Backend::ValkeySentinel),
        "valkey_redlock" => on(Backend::ValkeyRedlock),
        "valkey_manager" => on(Backend::ValkeyManager),
        other => panic!("no store {other}"),
    }
}

/// A unique key per scenario and store run.
fn key(name: &str) -> String {
    format!("{name}-{}", uuid::Uuid::new_v4())
}

async fn a_duplicate_gets_the_stored_result_without_running(nodes: Nodes) {
    let (runs, key) = (AtomicUsize::new(0), key("dup"));
    let runs = &runs;
    for i in 0..3 {
        let value = nodes
            .node(i)
            .idempotent(&key)
            .scope("orders")
            .run(|work| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let current = WorkContext::current().map(|c| c.fencing_token());
                assert_eq!(current, Some(work.fencing_token()));
                assert!(work.is_held());
                Ok::<_, String>(vec![format!(
                    "receipt of run {}",
                    runs.load(Ordering::SeqCst)
                )])
            })
            .await
            .expect("no store error")
            .expect("the work succeeds");
        assert_eq!(value, vec!["receipt of run 1".to_owned()], "call {i}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the work ran once");
    assert!(
        WorkContext::current().is_none(),
        "no context outside the work"
    );
    // The same key in another scope is another record.
    let other = nodes
        .node(0)
        .idempotent(&key)
        .scope("refunds")
        .run(|_| async { Ok::<_, String>(7u32) })
        .await
        .expect("no store error");
    assert_eq!(other, Ok(7));
}

async fn a_concurrent_duplicate_is_told_in_progress_or_waits_for_the_result(nodes: Nodes) {
    let key = key("busy");
    let first = start_first_run(nodes.node(0), &key, Ok("done".to_owned())).await;
    let busy = nodes
        .node(1)
        .idempotent(&key)
        .run(|_| async { Ok::<_, String>("second run".to_owned()) })
        .await;
    match busy {
        Err(e @ IdempotentError::InProgress { retry_after }) => {
            assert!(e.is_transient());
            assert!(retry_after <= Duration::from_secs(30), "{retry_after:?}");
        }
        other => panic!("expected InProgress, got {other:?}"),
    }
    let waiter = spawn_waiter(nodes.node(2), &key);
    // Let the waiter reach its wait, then let the first run finish.
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.finish.notify_one();
    let first = first.task.await.expect("task").expect("no store error");
    assert_eq!(first, Ok("done".to_owned()));
    let waited = waiter.await.expect("task").expect("no store error");
    assert_eq!(
        waited,
        Ok("done".to_owned()),
        "the waiter got the first run's result"
    );
}

/// A first run of `key` on `client` that has started its work and ends it
/// with `outcome` once `finish` is notified.
struct Running {
    task: tokio::task::JoinHandle<Result<Result<String, String>, IdempotentError>>,
    finish: Arc<Notify>,
}

async fn start_first_run(
    client: &LockClient,
    key: &str,
    outcome: Result<String, String>,
) -> Running {
    let (started, finish) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let task = {
        let (client, key) = (client.clone(), key.to_owned());
        let (started, finish) = (Arc::clone(&started), Arc::clone(&finish));
        tokio::spawn(async move {
            client
                .idempotent(key)
                .run(|_| async move {
                    started.notify_one();
                    finish.notified().await;
                    outcome
                })
                .await
        })
    };
    started.notified().await;
    Running { task, finish }
}

/// A call that waits up to 20 s for a running call's result.
fn spawn_waiter(
    client: &LockClient,
    key: &str,
) -> tokio::task::JoinHandle<Result<Result<String, String>, IdempotentError>> {
    let (client, key) = (client.clone(), key.to_owned());
    tokio::spawn(async move {
        client
            .idempotent(key)
            .wait(Duration::from_secs(20))
            .run(|_| async { Ok::<_, String>("the waiter ran".to_owned()) })
            .await
    })
}

/// Waits (bounded) until `key`'s record is free again: a cancelled run's
/// release goes on from a spawned task.
async fn until_runs_again(client: &LockClient, key: &str, runs: &AtomicUsize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let before = runs.load(Ordering::SeqCst);
    loop {
        let ran = client
            .idempotent(key)
            .run(|_| async {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(())
            })
            .await;
        match ran {
            Ok(Ok(())) if runs.load(Ordering::SeqCst) == before + 1 => return,
            Err(IdempotentError::InProgress { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => panic!("expected a new run, got {other:?}"),
        }
    }
}

async fn a_failed_panicking_or_cancelled_run_stores_nothing(nodes: Nodes) {
    let runs = AtomicUsize::new(0);
    // An `Err`: released at once, the retry runs.
    let failed = key("err");
    let first = nodes
        .node(0)
        .idempotent(&failed)
        .run(|_| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>("card network down".to_owned())
        })
        .await
        .expect("no store error");
    assert_eq!(first, Err("card network down".to_owned()));
    until_runs_again(nodes.node(1), &failed, &runs).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // A panic: the record is released, the panic resumes.
    let panicked = key("panic");
    let client = nodes.node(0).clone();
    let key2 = panicked.clone();
    let joined = tokio::spawn(async move {
        client
            .idempotent(key2)
            .run(|_| async {
                if true {
                    panic!("the work panics");
                }
                Ok::<(), String>(())
            })
            .await
    })
    .await;
    assert!(joined.expect_err("the panic resumes").is_panic());
    until_runs_again(nodes.node(1), &panicked, &runs).await;

    // A cancellation: the future dropped while the work runs.
    let cancelled = key("cancel");
    let started = Notify::new();
    let call = nodes.node(0).idempotent(&cancelled).run(|_| async {
        started.notify_one();
        std::future::pending::<()>().await;
        Ok::<(), String>(())
    });
    tokio::select! {
        _ = call => panic!("the work never ends"),
        () = started.notified() => {}
    }
    until_runs_again(nodes.node(1), &cancelled, &runs).await;
}

async fn a_waiter_runs_the_work_when_the_first_run_fails(nodes: Nodes) {
    let key = key("wait-fail");
    let first = start_first_run(nodes.node(0), &key, Err("failed".to_owned())).await;
    let waiter = spawn_waiter(nodes.node(1), &key);
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.finish.notify_one();
    assert_eq!(
        first.task.await.expect("task").expect("no store error"),
        Err("failed".to_owned())
    );
    assert_eq!(
        waiter.await.expect("task").expect("no store error"),
        Ok("the waiter ran".to_owned())
    );
}

async fn chosen_errors_are_stored_and_replayed(nodes: Nodes) {
    let (runs, key) = (AtomicUsize::new(0), key("declined"));
    for i in 0..2 {
        let result = nodes
            .node(i)
            .idempotent(&key)
            .run_storing_errors(
                |e: &String| e.starts_with("declined"),
                |_| async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Err::<u64, _>("declined: insufficient funds".to_owned())
                },
            )
            .await
            .expect("no store error");
        assert_eq!(result, Err("declined: insufficient funds".to_owned()));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "a stored error is replayed");
    // A plain `run` cannot read a stored error: refused, not rerun.
    let plain = nodes
        .node(2)
        .idempotent(&key)
        .run(|_| async { Ok::<u64, String>(1) })
        .await;
    assert!(
        matches!(plain, Err(IdempotentError::Incompatible { .. })),
        "{plain:?}"
    );
}

async fn another_payload_under_the_same_key_is_a_mismatch(nodes: Nodes) {
    let key = key("fp");
    let first = nodes
        .node(0)
        .idempotent(&key)
        .fingerprint_of(&("charge", 42, "EUR"))
        .run(|_| async { Ok::<_, String>(1u8) })
        .await
        .expect("no store error");
    assert_eq!(first, Ok(1));
    let same = nodes
        .node(1)
        .idempotent(&key)
        .fingerprint_of(&("charge", 42, "EUR"))
        .run(|_| async { Ok::<_, String>(2u8) })
        .await
        .expect("no store error");
    assert_eq!(same, Ok(1), "the same payload is replayed");
    let other = nodes
        .node(2)
        .idempotent(&key)
        .fingerprint(b"charge 43 EUR")
        .run(|_| async { Ok::<_, String>(3u8) })
        .await;
    assert!(matches!(other, Err(IdempotentError::Mismatch)), "{other:?}");
}

async fn a_result_over_the_limit_reaches_its_caller_and_is_not_replayed(nodes: Nodes) {
    let (runs, key) = (AtomicUsize::new(0), key("large"));
    let big = "x".repeat(100);
    let first = nodes
        .node(0)
        .idempotent(&key)
        .result_limit(50)
        .run(|_| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(big.clone())
        })
        .await
        .expect("no store error");
    assert_eq!(first, Ok(big.clone()), "the first caller gets its result");
    let again = nodes
        .node(1)
        .idempotent(&key)
        .result_limit(50)
        .run(|_| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(big.clone())
        })
        .await;
    assert!(
        matches!(
            again,
            Err(IdempotentError::TooLarge {
                size: 102,
                limit: 50
            })
        ),
        "{again:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "never run twice");
}

async fn a_record_of_another_type_is_refused_and_kept(nodes: Nodes) {
    let key = key("types");
    let first = nodes
        .node(0)
        .idempotent(&key)
        .run(|_| async { Ok::<_, String>("a string".to_owned()) })
        .await
        .expect("no store error");
    assert_eq!(first, Ok("a string".to_owned()));
    let as_number = nodes
        .node(1)
        .idempotent(&key)
        .run(|_| async { Ok::<u64, String>(5) })
        .await;
    let Err(IdempotentError::Incompatible { reason }) = as_number else {
        panic!("expected Incompatible, got {as_number:?}");
    };
    assert!(reason.contains("u64"), "{reason}");
    // Nothing was overwritten.
    let again = nodes
        .node(2)
        .idempotent(&key)
        .run(|_| async { Ok::<_, String>("rerun".to_owned()) })
        .await
        .expect("no store error");
    assert_eq!(again, Ok("a string".to_owned()));
}

async fn bad_keys_and_options_are_refused_before_the_work(nodes: Nodes) {
    let client = nodes.node(0);
    let secret = "k".repeat(2000);
    let refused = [
        client.idempotent(""),
        client.idempotent(secret.clone()),
        client.idempotent("ok").lease(Duration::from_millis(1)),
        client.idempotent("ok").retention(Duration::ZERO),
        client.idempotent("ok").scope(""),
        client
            .idempotent("ok")
            .fingerprint_of(&std::collections::HashMap::from([(vec![1u8], 1u8)])),
    ];
    for (i, call) in refused.into_iter().enumerate() {
        let result = call
            .run(|_| async { panic!("the work must not run") as Result<(), String> })
            .await;
        let error = result.expect_err("refused");
        assert!(
            matches!(
                error,
                IdempotentError::InvalidKey { .. } | IdempotentError::InvalidOption { .. }
            ),
            "{i}: {error:?}"
        );
        assert!(!error.is_transient());
        assert!(!error.to_string().contains(&secret), "the key is not shown");
    }
}

/// 12 tasks over three workers deliver 10 messages, each 3 times, with
/// redeliveries waiting for the first delivery: each message's effect
/// applies once and every delivery sees the same result.
async fn many_workers_run_each_key_once(nodes: Nodes) {
    const MESSAGES: usize = 10;
    let effects: Arc<Vec<AtomicUsize>> =
        Arc::new((0..MESSAGES).map(|_| AtomicUsize::new(0)).collect());
    let batch = uuid::Uuid::new_v4();
    let mut tasks = Vec::new();
    for delivery in 0..MESSAGES * 3 {
        let client = nodes.node(delivery).clone();
        let effects = Arc::clone(&effects);
        tasks.push(tokio::spawn(async move {
            let message = delivery % MESSAGES;
            let result = client
                .idempotent(format!("msg-{batch}-{message}"))
                .wait(Duration::from_secs(20))
                .run(|work| async move {
                    effects[message].fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, String>((message, work.fencing_token()))
                })
                .await;
            (message, result)
        }));
    }
    let mut seen = vec![None; MESSAGES];
    for task in tasks {
        let (message, result) = task.await.expect("task");
        let value = result.expect("no store error").expect("ok");
        assert_eq!(value.0, message);
        match seen[message] {
            None => seen[message] = Some(value),
            Some(first) => assert_eq!(first, value, "every delivery sees one result"),
        }
    }
    for (message, effect) in effects.iter().enumerate() {
        assert_eq!(
            effect.load(Ordering::SeqCst),
            1,
            "message {message} applied once"
        );
    }
}

/// A worker whose connection is cut while its work runs: its renewals
/// fail, and once its lease runs out another worker takes the key over
/// with a larger fencing token; the first worker's late completion is
/// refused, and the second's result is what duplicates get.
#[rstest]
#[case::redis(Server::Redis)]
#[case::valkey(Server::Valkey)]
fn a_crashed_workers_key_is_taken_over_with_a_larger_fencing_token(#[case] server: Server) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let redis = RedisServer::start_on(server, &[]).await;
        let proxy = FaultProxy::start(redis.addr()).await;
        let crashing = LockClient::builder()
            .url(proxy.url())
            .command_timeout(Duration::from_millis(200))
            .build()
            .await
            .expect("a client through the proxy");
        let other = LockClient::connect(&redis.url()).await.expect("a client");
        let key = key("crash");
        let lease = Duration::from_millis(900);
        let (started, cut) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let first = {
            let (key, started, cut) = (key.clone(), Arc::clone(&started), Arc::clone(&cut));
            tokio::spawn(async move {
                crashing
                    .idempotent(key)
                    .lease(lease)
                    .run(|work| async move {
                        started.notify_one();
                        work.lost().await;
                        cut.notified().await;
                        Ok::<_, String>(("first".to_owned(), work.fencing_token()))
                    })
                    .await
            })
        };
        started.notified().await;
        proxy.blackhole(true);
        // Busy while the lease lasts, then taken over (bounded).
        let deadline = Instant::now() + Duration::from_secs(15);
        let second = loop {
            let ran =
                other
                    .idempotent(&key)
                    .lease(lease)
                    .run(|work| async move {
                        Ok::<_, String>(("second".to_owned(), work.fencing_token()))
                    })
                    .await;
            match ran {
                Err(IdempotentError::InProgress { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => break other.expect("no store error").expect("ok"),
            }
        };
        assert_eq!(second.0, "second");
        let second_token = second.1;
        // The first worker comes back: its completion is refused.
        proxy.blackhole(false);
        cut.notify_one();
        let first = first
            .await
            .expect("task")
            .expect("no store error")
            .expect("ok");
        assert!(
            second_token > first.1,
            "fencing tokens {} then {second_token}",
            first.1
        );
        let replayed = other
            .idempotent(&key)
            .run(|_| async { Ok::<_, String>(("third".to_owned(), 0u64)) })
            .await
            .expect("no store error");
        assert_eq!(replayed, Ok(second), "the second run's result is kept");
    });
}

/// The store down: a typed, transient error, and the work does not run.
#[test]
fn a_store_that_is_down_fails_the_call_and_the_work_does_not_run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let redis = RedisServer::start().await;
        let proxy = FaultProxy::start(redis.addr()).await;
        let client = LockClient::builder()
            .url(proxy.url())
            .command_timeout(Duration::from_millis(200))
            .build()
            .await
            .expect("a client through the proxy");
        proxy.blackhole(true);
        let ran = AtomicUsize::new(0);
        let result = client
            .idempotent("down")
            .run(|_| async {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(())
            })
            .await;
        let error = result.expect_err("the store is down");
        assert!(matches!(error, IdempotentError::Store(_)), "{error:?}");
        assert!(error.is_transient(), "{error}");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "the work did not run");
    });
}

/// `#[idempotent]` over this store (`client = ..`): the body runs once
/// per key across workers, and a call with another payload under the same
/// key is refused.
async fn the_attribute_runs_its_body_once_per_key(nodes: Nodes) {
    struct Delivery {
        id: String,
        amount: u64,
    }

    #[idempotent(key = "<msg.id>", scope = "tests/charge", fingerprint = "<msg.amount>", client = client)]
    async fn charge(
        client: &LockClient,
        msg: &Delivery,
        runs: &AtomicUsize,
    ) -> Result<(u64, u64), IdempotentError> {
        runs.fetch_add(1, Ordering::SeqCst);
        let fence = WorkContext::current().map_or(0, |c| c.fencing_token());
        Ok((msg.amount, fence))
    }

    let runs = AtomicUsize::new(0);
    let msg = Delivery {
        id: key("attr"),
        amount: 1200,
    };
    let first = charge(nodes.node(0), &msg, &runs).await.expect("runs");
    for i in 1..3 {
        let again = charge(nodes.node(i), &msg, &runs).await;
        assert_eq!(again.expect("replayed"), first);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the body ran once");
    let changed = Delivery {
        id: msg.id.clone(),
        amount: 1300,
    };
    let refused = charge(nodes.node(1), &changed, &runs).await;
    assert!(
        matches!(refused, Err(IdempotentError::Mismatch)),
        "{refused:?}"
    );
}

/// The watchdog renews the lease while the work runs: a run three leases
/// long keeps its key (duplicates are told it is in progress, none takes
/// it over), and stores its result.
async fn a_run_longer_than_its_lease_keeps_its_key(nodes: Nodes) {
    let key = key("long");
    let lease = Duration::from_millis(300);
    let started = Arc::new(Notify::new());
    let first = {
        let (client, key, started) = (nodes.node(0).clone(), key.clone(), Arc::clone(&started));
        tokio::spawn(async move {
            client
                .idempotent(key)
                .lease(lease)
                .run(|work| async move {
                    started.notify_one();
                    tokio::time::sleep(lease * 3).await;
                    assert!(work.is_held(), "renewed while the work runs");
                    Ok::<_, String>(work.fencing_token())
                })
                .await
        })
    };
    started.notified().await;
    let deadline = Instant::now() + lease * 3;
    let mut duplicates = 0;
    while Instant::now() + Duration::from_millis(50) < deadline {
        let duplicate = nodes
            .node(1 + duplicates % 2)
            .idempotent(&key)
            .lease(lease)
            .run(|_| async { Ok::<u64, String>(0) })
            .await;
        match duplicate {
            Err(IdempotentError::InProgress { .. }) => duplicates += 1,
            // The first run finished early (a slow machine): its result.
            Ok(Ok(token)) if token != 0 => break,
            other => panic!("a duplicate took the key over: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token = first
        .await
        .expect("task")
        .expect("no store error")
        .expect("ok");
    assert!(duplicates >= 2, "duplicates told in progress: {duplicates}");
    let replayed = nodes
        .node(2)
        .idempotent(&key)
        .run(|_| async { Ok::<u64, String>(0) })
        .await
        .expect("no store error");
    assert_eq!(replayed, Ok(token));
}
