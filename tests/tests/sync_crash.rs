//! Synchronizers used by other processes (the `sync_worker` child binary of
//! this crate, which is why these tests live here):
//! - a reader process SIGKILLed while it holds the read lock stops
//!   blocking a writer within its ttl;
//! - a process SIGKILLed while it holds 2 permits of a semaphore of 4 gives
//!   them back within its ttl, and never more than 4 are held meanwhile;
//! - 3 processes count a latch down 9 times in all, and 4 waiters (one
//!   started before the set-up) return together.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlock_runtime::LockClient;
use redlock_tests::{RedisCluster, RedisServer, SyncWorker};

fn worker(args: &[&str]) -> SyncWorker {
    SyncWorker::spawn(env!("CARGO_BIN_EXE_sync_worker"), args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_reader_stops_blocking_a_writer_within_its_ttl() {
    let server = RedisServer::start().await;
    let url = server.url();
    let ttl = Duration::from_millis(1_500);
    let mut reader = worker(&[&url, "read", "catalog", &ttl.as_millis().to_string()]);
    assert_eq!(reader.line(), "READY");
    let locks = LockClient::connect(&url).await.expect("connect");
    let rw = locks.rw_lock("catalog");
    // Another reader comes and goes: readers share.
    let ours = rw.read().acquire().await.expect("readers share");
    ours.release().await.expect("release");
    // Let the child's watchdog renew once: the lease measured is renewed.
    tokio::time::sleep(ttl / 2).await;
    reader.kill();
    let killed = Instant::now();
    assert!(
        rw.write().try_acquire().await.expect("try").is_none(),
        "the dead reader's lease still keeps writers out"
    );
    let write = rw
        .write()
        .wait(ttl * 3)
        .acquire()
        .await
        .expect("the writer gets in once the dead reader's lease ends");
    let after = killed.elapsed();
    assert!(
        after <= ttl + Duration::from_millis(500),
        "the writer waited {after:?} after the kill; the ttl is {ttl:?}"
    );
    assert!(
        after >= ttl / 3,
        "the dead reader's lease was renewed shortly before the kill ({after:?})"
    );
    write.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_permits_come_back_within_its_ttl() {
    let server = RedisServer::start().await;
    let url = server.url();
    let ttl = Duration::from_millis(1_500);
    let mut holder = worker(&[
        &url,
        "permits",
        "jobs",
        "4",
        "2",
        &ttl.as_millis().to_string(),
    ]);
    assert_eq!(holder.line(), "READY");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(LockClient::connect(&url).await.expect("connect"));
    }
    let jobs = clients[0].semaphore("jobs", 4);
    assert_eq!(jobs.available().await.expect("available"), 2);

    // 16 tasks over 3 clients loop on single permits while the child holds
    // 2: never more than 2 of ours inside; after the kill, up to 4.
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let until = Instant::now() + ttl * 2 + Duration::from_millis(500);
    for i in 0..16 {
        let jobs = clients[i % 3].semaphore("jobs", 4);
        let (inside, most) = (Arc::clone(&inside), Arc::clone(&most));
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let permit = jobs.clone().wait(Duration::from_secs(10)).acquire().await;
                let permit = permit.expect("a permit");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.expect("release");
            }
        }));
    }
    tokio::time::sleep(ttl / 2).await;
    assert!(
        most.load(Ordering::SeqCst) <= 2,
        "more than 2 of ours inside while the child holds 2"
    );
    holder.kill();
    let killed = Instant::now();
    // The dead holder's 2 permits come back within its ttl: 4 of ours
    // inside at once.
    loop {
        if most.load(Ordering::SeqCst) > 2 {
            break;
        }
        assert!(
            killed.elapsed() <= ttl + Duration::from_millis(500),
            "the dead holder's permits did not come back within its ttl"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert!(most.load(Ordering::SeqCst) <= 4, "more than 4 inside");
    assert_eq!(jobs.available().await.expect("available"), 4);
}

/// On a cluster too: 3 processes count down 9 in all, 4 waiters (one of
/// them started before the set-up) all return within 50 ms of the last
/// count-down (plus 100 ms for a loaded machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_count_a_latch_down_and_every_waiter_returns() {
    for cluster in [false, true] {
        let (_server, _cluster, target) = if cluster {
            let c = RedisCluster::start(3, 0).await;
            let urls: Vec<String> = c.nodes().iter().map(RedisServer::url).collect();
            (None, Some(c), urls.join(","))
        } else {
            let s = RedisServer::start().await;
            let url = s.url();
            (Some(s), None, url)
        };
        let client = || async {
            if cluster {
                LockClient::cluster(target.split(',')).await
            } else {
                LockClient::connect(target.as_str()).await
            }
            .expect("connect")
        };
        let key = "batch:9";
        let early = {
            let latch = client().await.latch(key);
            tokio::spawn(async move {
                latch
                    .wait(Duration::from_secs(30))
                    .await
                    .map(|()| Instant::now())
            })
        };
        let latch = client().await.latch(key);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!early.is_finished(), "waits for the set-up");
        assert!(
            latch
                .try_set_count(9, Duration::from_secs(60))
                .await
                .expect("set up")
        );
        let mut waiters = vec![early];
        for _ in 0..3 {
            let latch = client().await.latch(key);
            waiters.push(tokio::spawn(async move {
                latch
                    .wait(Duration::from_secs(30))
                    .await
                    .map(|()| Instant::now())
            }));
        }
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let target = target.clone();
                std::thread::spawn(move || {
                    let mut w = SyncWorker::spawn(
                        env!("CARGO_BIN_EXE_sync_worker"),
                        &[&target, "count-down", key, "3"],
                    );
                    let line = w.line().to_owned();
                    assert!(w.finish(), "the count-down process failed");
                    (line, Instant::now())
                })
            })
            .collect();
        let mut last = None::<Instant>;
        let mut zero_seen = false;
        for w in workers {
            let (line, done) = w.join().expect("worker thread");
            zero_seen |= line == "DONE 0";
            last = Some(last.map_or(done, |l| l.max(done)));
        }
        assert!(zero_seen, "one process counted the latch to zero");
        let last = last.expect("three workers");
        assert_eq!(latch.count().await.expect("count"), Some(0));
        let mut returned = Vec::new();
        for w in waiters {
            let at = w.await.expect("waiter").expect("the latch opened");
            returned.push(at);
            // A process prints DONE just after its last count-down lands,
            // and its exit is seen a little later: a waiter may even return
            // before `last`.
            assert!(
                at.saturating_duration_since(last) <= Duration::from_millis(150),
                "cluster {cluster}: a waiter returned {:?} after the last count-down",
                at.saturating_duration_since(last)
            );
        }
        let (first, latest) = (returned.iter().min(), returned.iter().max());
        let spread = latest.zip(first).map(|(l, f)| *l - *f).unwrap_or_default();
        assert!(
            spread <= Duration::from_millis(50),
            "cluster {cluster}: the waiters returned {spread:?} apart"
        );
    }
}
