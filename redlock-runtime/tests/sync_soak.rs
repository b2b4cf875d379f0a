//! The standing adversarial soak of the synchronizers: random faults and
//! random cancellations together, bounded in time, on one Redis with
//! persistence that survives its crashes, and on Redis Cluster while the
//! synchronizers' slot moves.
//!
//! Six workers over two clients pick at random: a read; a write (released,
//! or dropped, or downgraded to a read midway); a semaphore permit (limit
//! 3); any of them cut short by a random timeout. Each records its critical
//! section, and whether its lease was held at both ends as far as it knew.
//! Meanwhile the fault loop adds latency, cuts connections, pauses the
//! server and restarts it from its AOF (or moves the slot).
//!
//! Passes when, among the sections held throughout:
//! - no write overlaps another write or a read;
//! - never more than 3 permits are held at once;
//! - a write that began after another ended has a larger fencing token;
//!
//! and once the faults stop, nothing is left in Redis: no reader, writer,
//! waiting writer or permit (every cancelled acquire was given back).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_runtime::{LockClient, LockGuard, RetryPolicy};
use redlock_tests::{FaultProxy, RedisCluster, RedisServer, key_exists};
use tokio::task::JoinHandle;

const KEY: &str = "soak";
const LIMIT: u32 = 3;
const TTL: Duration = Duration::from_millis(1_500);
const SOAK: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Permit,
}

#[derive(Debug, Clone, Copy)]
struct Section {
    kind: Kind,
    token: u64,
    begin: Instant,
    end: Instant,
    valid: bool,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    sections: Mutex<Vec<Section>>,
    cancellations: AtomicUsize,
}

impl Shared {
    async fn section(&self, kind: Kind, token: u64, held: impl Fn() -> bool, work: Duration) {
        let begin = Instant::now();
        let at_begin = held();
        tokio::time::sleep(work).await;
        let valid = at_begin && held();
        let end = Instant::now();
        self.sections.lock().expect("sections").push(Section {
            kind,
            token,
            begin,
            end,
            valid,
        });
    }

    async fn guarded(&self, kind: Kind, guard: &LockGuard, work: Duration) {
        // A token is issued on first ask: a holder that lost its lock first
        // (or met a failing Redis) gets none, and writes nothing.
        let Ok(token) = guard.fencing_token().await else {
            return;
        };
        self.section(kind, token, || guard.is_held(), work).await;
    }
}

async fn worker(client: LockClient, shared: Arc<Shared>, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let rw = client.rw_lock(KEY);
    let jobs = client.semaphore(KEY, LIMIT);
    let wait = Duration::from_millis(400);
    while !shared.stop.load(Ordering::Relaxed) {
        let work = Duration::from_millis(rng.u64(2..20));
        let cut = Duration::from_millis(rng.u64(1..150));
        let cancelled = match rng.u8(0..6) {
            0 => {
                let read = tokio::time::timeout(cut, rw.read().ttl(TTL).wait(wait).acquire()).await;
                if let Ok(Ok(read)) = &read {
                    shared.guarded(Kind::Read, read, work).await;
                }
                read.is_err()
            }
            1 | 2 => {
                let write =
                    tokio::time::timeout(cut, rw.write().ttl(TTL).wait(wait).acquire()).await;
                if let Ok(Ok(write)) = write {
                    shared.guarded(Kind::Write, &write, work).await;
                    match rng.u8(0..3) {
                        0 => drop(write),
                        1 => drop(write.release().await),
                        _ => {
                            if let Ok(read) = write.downgrade().await {
                                shared.guarded(Kind::Read, &read, work).await;
                                drop(read.release().await);
                            }
                        }
                    }
                    false
                } else {
                    write.is_err()
                }
            }
            _ => {
                let permit = jobs.clone().ttl(TTL).wait(wait).acquire();
                let permit = tokio::time::timeout(cut, permit).await;
                if let Ok(Ok(permit)) = permit {
                    shared
                        .section(Kind::Permit, 0, || permit.is_held(), work)
                        .await;
                    if rng.bool() {
                        drop(permit.release().await);
                    }
                    false
                } else {
                    permit.is_err()
                }
            }
        };
        if cancelled {
            shared.cancellations.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct Soak {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    started: Instant,
}

impl Soak {
    fn start(clients: &[LockClient], seed: u64) -> Soak {
        let shared = Arc::new(Shared::default());
        let workers = clients
            .iter()
            .cycle()
            .take(6)
            .enumerate()
            .map(|(w, c)| tokio::spawn(worker(c.clone(), Arc::clone(&shared), seed + w as u64)))
            .collect();
        Soak {
            shared,
            workers,
            started: Instant::now(),
        }
    }

    fn running(&self) -> bool {
        self.started.elapsed() < SOAK
    }

    async fn finish(self, name: &str, faults: usize, url: &str) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for w in self.workers {
            tokio::time::timeout(Duration::from_secs(15), w)
                .await
                .expect("workers stop")
                .expect("no panic");
        }
        let keys = [
            format!("lock:{{{KEY}}}:rw"),
            format!("lock:{{{KEY}}}:rw:readers"),
            format!("lock:{{{KEY}}}:rw:writers"),
            format!("lock:{{{KEY}}}:sem"),
            format!("lock:{{{KEY}}}:sem:permits"),
        ];
        // Released and dropped guards, and give-backs: within a command
        // timeout and a margin; a waiting writer's place within its
        // presence.
        let deadline = Instant::now() + Duration::from_millis(1_500);
        for key in &keys {
            while key_exists(url, key).await {
                assert!(
                    Instant::now() < deadline,
                    "{name}: {key} is left after the soak"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let mut sections = self.shared.sections.lock().expect("sections").clone();
        sections.retain(|s| s.valid);
        sections.sort_by_key(|s| s.begin);
        let overlap = |a: &Section, b: &Section| a.begin < b.end && b.begin < a.end;
        let (mut write_overlaps, mut out_of_order) = (0, 0);
        for (i, a) in sections.iter().enumerate() {
            for b in &sections[i + 1..] {
                let rw = a.kind != Kind::Permit && b.kind != Kind::Permit;
                let a_write_b_read_or_write =
                    rw && (a.kind == Kind::Write || b.kind == Kind::Write);
                if a_write_b_read_or_write && overlap(a, b) {
                    write_overlaps += 1;
                }
                if a.kind == Kind::Write
                    && b.kind == Kind::Write
                    && b.begin > a.end
                    && b.token <= a.token
                {
                    out_of_order += 1;
                }
            }
        }
        let mut events: Vec<(Instant, i32)> = sections
            .iter()
            .filter(|s| s.kind == Kind::Permit)
            .flat_map(|s| [(s.begin, 1), (s.end, -1)])
            .collect();
        // Ends before begins at the same instant.
        events.sort();
        let (mut inside, mut most) = (0, 0);
        for (_, change) in events {
            inside += change;
            most = most.max(inside);
        }
        let count = |k: Kind| sections.iter().filter(|s| s.kind == k).count();
        let cancellations = self.shared.cancellations.load(Ordering::Relaxed);
        println!(
            "sync soak {name} {SOAK:?}: faults {faults}, cancellations {cancellations}; held \
             throughout: reads {}, writes {}, permits {}; writes overlapping {write_overlaps}, \
             later writes with a smaller token {out_of_order}, most permits at once {most}",
            count(Kind::Read),
            count(Kind::Write),
            count(Kind::Permit),
        );
        assert!(faults >= 10, "{name}: the fault loop ran ({faults})");
        assert!(
            cancellations >= 10,
            "{name}: cancellations ran ({cancellations})"
        );
        for kind in [Kind::Read, Kind::Write, Kind::Permit] {
            assert!(count(kind) >= 10, "{name}: too few {kind:?} sections");
        }
        assert_eq!(
            write_overlaps, 0,
            "{name}: a write overlapped a read or a write"
        );
        assert_eq!(out_of_order, 0, "{name}: a later write had a smaller token");
        assert!(
            most <= i32::try_from(LIMIT).unwrap_or(0),
            "{name}: {most} permits at once"
        );
    }
}

fn builder() -> redlock_runtime::LockClientBuilder {
    LockClient::builder()
        .command_timeout(Duration::from_millis(300))
        .connection_timeout(Duration::from_millis(300))
        .retry(RetryPolicy::new(
            Duration::from_millis(2),
            Duration::from_millis(50),
        ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_soak_one_redis_with_aof_always() {
    let mut server =
        RedisServer::start_with_args(&["--appendonly", "yes", "--appendfsync", "always"]).await;
    let proxy = FaultProxy::start(server.addr()).await;
    let client = || {
        builder()
            .url(proxy.url())
            .build_unchecked()
            .expect("client")
    };
    let soak = Soak::start(&[client(), client()], 21);
    let mut rng = fastrand::Rng::with_seed(31);
    let mut faults = 0;
    while soak.running() {
        tokio::time::sleep(Duration::from_millis(rng.u64(150..400))).await;
        match rng.u8(0..5) {
            0 => proxy.set_latency(Duration::from_millis(rng.u64(0..60))),
            1 => proxy.cut_all(),
            2 => {
                server
                    .pause_for(Duration::from_millis(rng.u64(50..400)))
                    .await
            }
            3 => server.restart_keeping_data().await,
            _ => proxy.set_latency(Duration::ZERO),
        }
        faults += 1;
    }
    proxy.set_latency(Duration::ZERO);
    soak.finish("one Redis, AOF always", faults, &server.url())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_soak_cluster_with_slot_moves_and_paused_masters() {
    let cluster = RedisCluster::start(3, 0).await;
    let urls = cluster.urls();
    let client = || {
        builder()
            .cluster(urls.iter().cloned())
            .build_unchecked()
            .expect("client")
    };
    // The read/write lock and the semaphore share the hash tag: one slot.
    let slot = cluster.slot_of(&format!("lock:{{{KEY}}}:rw")).await;
    let soak = Soak::start(&[client(), client()], 41);
    let mut rng = fastrand::Rng::with_seed(51);
    let mut faults = 0;
    while soak.running() {
        tokio::time::sleep(Duration::from_millis(rng.u64(150..400))).await;
        let owner = cluster.master_of_slot(slot).await;
        let others: Vec<usize> = cluster
            .master_indices()
            .await
            .into_iter()
            .filter(|&m| m != owner)
            .collect();
        let to = others[rng.usize(..others.len())];
        match rng.u8(0..3) {
            0 => cluster.migrate_slot(slot, to).await,
            1 => {
                let migration = cluster.begin_migration(slot, to).await;
                tokio::time::sleep(Duration::from_millis(rng.u64(20..150))).await;
                migration.move_all_keys(&cluster).await;
                tokio::time::sleep(Duration::from_millis(rng.u64(20..150))).await;
                migration.finish(&cluster).await;
            }
            _ => {
                cluster
                    .node(owner)
                    .pause_for(Duration::from_millis(rng.u64(50..300)))
                    .await
            }
        }
        faults += 1;
    }
    let owner = cluster.node(cluster.master_of_slot(slot).await).url();
    soak.finish("cluster, slot moves and paused masters", faults, &owner)
        .await;
}
