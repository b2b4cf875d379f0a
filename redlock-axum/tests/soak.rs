//! The standing adversarial soak (issue 12) for the idempotency layer:
//! random faults and random cancellations together, bounded in time. The
//! lock runtime's soak, on every topology, is redlock-runtime's
//! `tests/soak.rs`.
//!
//! Run with `--nocapture` to see the figures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Extension, Router};
use redlock_axum::{IdempotencyContext, IdempotencyLayer};
use redlock_runtime::{LockClient, RetryPolicy};
use redlock_tests::http::{send, serve};
use redlock_tests::{FaultProxy, FencedStore, RedisServer};

const SOAK: Duration = Duration::from_secs(10);

/// A soak client: short timeouts, a quick retry.
fn client(url: &str) -> LockClient {
    LockClient::builder()
        .url(url)
        .command_timeout(Duration::from_millis(300))
        .connection_timeout(Duration::from_millis(300))
        .retry(RetryPolicy::new(
            Duration::from_millis(2),
            Duration::from_millis(50),
        ))
        .build_unchecked()
        .expect("client")
}

/// For [`SOAK`], every 150 to 400 ms one fault at random (seeded): latency
/// on the proxy, every connection cut, Redis paused up to 900 ms, or
/// restarted empty. Returns how many.
async fn inject_faults(server: &mut RedisServer, proxy: &FaultProxy, seed: u64) -> usize {
    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut faults = 0;
    while started.elapsed() < SOAK {
        tokio::time::sleep(Duration::from_millis(rng.u64(150..400))).await;
        match rng.u8(0..4) {
            0 => proxy.set_latency(Duration::from_millis(rng.u64(0..80))),
            1 => proxy.cut_all(),
            2 => {
                server
                    .pause_for(Duration::from_millis(rng.u64(50..900)))
                    .await
            }
            _ => server.restart().await,
        }
        faults += 1;
    }
    faults
}

/// Idempotent requests under the same treatment: two servers share a Redis
/// behind a faulty proxy; clients send requests on a few keys and cut them
/// short at random (the connection is dropped); each handler run writes to
/// a fenced store per key with the claim's fencing token at its start and
/// its end. A lease that runs out lets a retry run the handler again (by
/// design), and then the store must refuse the older run's late write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_idempotent_requests() {
    type Stores = Arc<Mutex<HashMap<String, FencedStore>>>;
    let mut server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let stores: Stores = Arc::default();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut apps = Vec::new();
    for _ in 0..2 {
        let locks = client(&proxy.url());
        let (stores, runs) = (Arc::clone(&stores), Arc::clone(&runs));
        let layer = IdempotencyLayer::global(&locks)
            .lease(Duration::from_millis(600))
            .retention(Duration::from_secs(2));
        let app = Router::new()
            .route(
                "/pay",
                post(
                    move |Extension(idem): Extension<IdempotencyContext>, body: String| {
                        let (stores, runs) = (Arc::clone(&stores), Arc::clone(&runs));
                        async move {
                            let id = runs.fetch_add(1, Ordering::Relaxed);
                            let token = idem.fencing_token();
                            let write = |stores: &Stores| {
                                stores
                                    .lock()
                                    .expect("stores")
                                    .entry(body.clone())
                                    .or_default()
                                    .write(token, id);
                            };
                            write(&stores);
                            let work = fastrand::u64(0..300);
                            tokio::time::sleep(Duration::from_millis(work)).await;
                            write(&stores);
                            "paid"
                        }
                    },
                ),
            )
            .layer(layer);
        apps.push(serve(app).await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let cancellations = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for c in 0..6u64 {
        let addrs: Vec<_> = apps.iter().map(|a| a.addr).collect();
        let (stop, cancellations) = (Arc::clone(&stop), Arc::clone(&cancellations));
        clients.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(500 + c);
            while !stop.load(Ordering::Relaxed) {
                let key = format!("pay-{}", rng.u8(0..12));
                let addr = addrs[rng.usize(..addrs.len())];
                let request = redlock_tests::http::post(
                    addr,
                    "/pay",
                    Some(format!("\"{key}\"").as_bytes()),
                    &key,
                );
                let cut = Duration::from_millis(rng.u64(1..400));
                if tokio::time::timeout(cut, send(addr, request))
                    .await
                    .is_err()
                {
                    cancellations.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let faults = inject_faults(&mut server, &proxy, 55).await;
    stop.store(true, Ordering::Relaxed);
    for task in clients {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("clients stop")
            .expect("no panic");
    }
    let stores = stores.lock().expect("stores");
    let (accepted, rejected, stale) = stores.values().fold((0, 0, 0), |(a, r, s), st| {
        (a + st.accepted, r + st.rejected, s + st.stale_accepted)
    });
    let cancellations = cancellations.load(Ordering::Relaxed);
    println!(
        "soak idempotent requests {SOAK:?}: faults {faults}, cancelled requests {cancellations}, \
         handler runs {}; fenced stores: {accepted} accepted, {rejected} rejected, stale \
         accepted {stale}",
        runs.load(Ordering::Relaxed)
    );
    assert!(
        faults >= 10 && cancellations >= 10,
        "faults {faults}, cancellations {cancellations}"
    );
    assert!(runs.load(Ordering::Relaxed) >= 12, "the handlers ran");
    assert_eq!(stale, 0, "a stale handler run's write was accepted");
}

/// The same treatment for run-once calls (`LockClient::idempotent`, the
/// records under the layer, without HTTP): two workers share a Redis
/// behind a faulty proxy; six tasks call on 12 keys and drop their calls
/// at random; each run writes to a fenced store per key with its fencing
/// token at its start and its end, and returns its run id. A lease that
/// runs out (a pause), or a restart (which empties Redis), lets a later
/// call run the work again, by design; then the store must refuse the
/// older run's late write (0 double runs applied), and every value a call
/// gets is one a run of that key returned. Once the faults stop, every key
/// answers its stored result to every later call, without running again
/// (0 lost results).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_run_once_calls() {
    type Stores = Arc<Mutex<HashMap<String, FencedStore>>>;
    /// What each run of a key returned: (key, run id).
    type Returned = Arc<Mutex<Vec<(String, usize)>>>;
    let mut server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let workers = [client(&proxy.url()), client(&proxy.url())];
    let stores: Stores = Arc::default();
    let returned: Returned = Arc::default();
    let runs = Arc::new(AtomicUsize::new(0));
    let (stop, cancellations, replies) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let call = {
        let (stores, returned, runs) = (
            Arc::clone(&stores),
            Arc::clone(&returned),
            Arc::clone(&runs),
        );
        move |client: LockClient, key: String| {
            let (stores, returned, runs) = (
                Arc::clone(&stores),
                Arc::clone(&returned),
                Arc::clone(&runs),
            );
            async move {
                client
                    .idempotent(key.clone())
                    .scope("soak")
                    .lease(Duration::from_millis(600))
                    .retention(Duration::from_secs(60))
                    .run(|work| async move {
                        let id = runs.fetch_add(1, Ordering::Relaxed);
                        let token = work.fencing_token();
                        let write = |stores: &Stores| {
                            stores
                                .lock()
                                .expect("stores")
                                .entry(key.clone())
                                .or_default()
                                .write(token, id);
                        };
                        write(&stores);
                        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..300))).await;
                        write(&stores);
                        returned.lock().expect("returned").push((key.clone(), id));
                        Ok::<_, String>((key, id))
                    })
                    .await
            }
        }
    };
    let mut tasks = Vec::new();
    for c in 0..6u64 {
        let (stop, cancellations, replies) = (
            Arc::clone(&stop),
            Arc::clone(&cancellations),
            Arc::clone(&replies),
        );
        let (workers, call) = (workers.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(700 + c);
            while !stop.load(Ordering::Relaxed) {
                let key = format!("job-{}", rng.u8(0..12));
                let worker = workers[rng.usize(..workers.len())].clone();
                let cut = Duration::from_millis(rng.u64(1..400));
                match tokio::time::timeout(cut, call(worker, key)).await {
                    Err(_) => {
                        cancellations.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(Ok(value))) => replies.lock().expect("replies").push(value),
                    // In progress elsewhere, or the store failed: retried.
                    Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        }));
    }
    let faults = inject_faults(&mut server, &proxy, 77).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("callers stop")
            .expect("no panic");
    }
    proxy.set_latency(Duration::ZERO);

    // Faults over: each key's result is stored once and replayed, never
    // run again (bounded: a dropped call's record is released, or its
    // lease runs out, within a lease).
    let before = runs.load(Ordering::Relaxed);
    let mut settled = HashMap::new();
    for k in 0..12 {
        let key = format!("job-{k}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let first = loop {
            match call(workers[0].clone(), key.clone()).await {
                Ok(Ok(value)) => break value,
                other if Instant::now() < deadline => {
                    let _ = other;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => panic!("{key} does not settle: {other:?}"),
            }
        };
        settled.insert(key, first);
    }
    let ran_to_settle = runs.load(Ordering::Relaxed) - before;
    for (key, first) in &settled {
        for worker in &workers {
            let again = call(worker.clone(), key.clone()).await;
            assert!(
                matches!(&again, Ok(Ok(value)) if value == first),
                "{key}: a stored result was lost: {again:?}, first {first:?}"
            );
        }
    }
    assert_eq!(
        runs.load(Ordering::Relaxed) - before,
        ran_to_settle,
        "a key with a stored result ran again"
    );

    let stores = stores.lock().expect("stores");
    let (accepted, rejected, stale) = stores.values().fold((0, 0, 0), |(a, r, s), st| {
        (a + st.accepted, r + st.rejected, s + st.stale_accepted)
    });
    let returned = returned.lock().expect("returned");
    let replies = replies.lock().expect("replies");
    for value in replies.iter() {
        assert!(
            returned.contains(value),
            "{value:?} was answered but no run returned it"
        );
    }
    let cancellations = cancellations.load(Ordering::Relaxed);
    println!(
        "soak run-once calls {SOAK:?}: faults {faults}, cancelled calls {cancellations}, runs \
         {before}, answers {}; fenced stores: {accepted} accepted, {rejected} rejected, stale \
         accepted {stale}; after the faults, {ran_to_settle} runs to settle 12 keys, then none",
        replies.len()
    );
    assert!(
        faults >= 10 && cancellations >= 10,
        "faults {faults}, cancellations {cancellations}"
    );
    assert!(
        before >= 12 && replies.len() >= 12,
        "the work ran and answered"
    );
    assert_eq!(stale, 0, "a stale run's write was accepted");
}
