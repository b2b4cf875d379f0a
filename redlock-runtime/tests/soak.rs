//! The standing adversarial soak (issue 12): random faults and random
//! cancellations together, on every topology, bounded in time.
//!
//! Workers contend for one key. Each round picks at random: a plain
//! acquire and release; an acquire cut short by a random timeout; a `run`
//! whose whole future is cut short by a random timeout; an acquire whose
//! guard is dropped instead of released. A holder writes to a fenced store
//! at the start and the end of its critical section, with its fencing
//! token, while it believes it holds the lock. Meanwhile the topology's
//! fault loop adds latency, cuts connections, kills, pauses and restarts
//! servers (empty, from an RDB snapshot, from an AOF).
//!
//! Passes when:
//! - the fenced store accepts no stale write: a write whose token equals
//!   the highest accepted but comes from another holder (a repeated token
//!   is the only way a stale holder gets past a `>=` check);
//! - tokens increase in the order they were issued, on every topology: a
//!   token asked for after another was in its holder's hands is larger
//!   (each is issued between the ask and its arrival, so these two were
//!   issued in that order);
//! - where the topology promises it (persistence that survives the faults,
//!   a quorum with a restart delay, replica-acknowledged writes), no two
//!   critical sections that both held the lock throughout overlap, and a
//!   section that began after another ended has a larger token. Where a
//!   restart can take a lock from its holder unseen, neither holds: the
//!   holder may begin its section after the next holder ended, if it is
//!   slow to run (a loaded machine), and the fenced store rejects its
//!   writes, as it must;
//! - once the faults stop, nothing is left held: every cancelled acquire
//!   was given back (the key is gone within the give-back window).
//!
//! Run with `--nocapture` to see the figures of each topology. Idempotent
//! requests get the same treatment in redlock-axum's `tests/soak.rs`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_runtime::{LockClient, RetryPolicy, current_lock};
use redlock_tests::{
    FaultProxy, FencedStore, RedisCluster, RedisServer, Server, key_exists, raw_connection,
    start_replica,
};
use tokio::task::JoinHandle;

const KEY: &str = "soak";
const TTL: Duration = Duration::from_millis(1_500);
const SOAK: Duration = Duration::from_secs(10);

/// One critical section, as its holder saw it.
#[derive(Debug, Clone, Copy)]
struct Section {
    token: u64,
    /// When the acquire was asked for: the token was issued after.
    asked: Instant,
    /// When the token was in the holder's hands: it was issued before.
    got: Instant,
    begin: Instant,
    end: Instant,
    /// Held at the start and at the end, as far as the holder knew.
    valid: bool,
}

#[derive(Default)]
struct Counters {
    acquisitions: AtomicUsize,
    cancellations: AtomicUsize,
    busy: AtomicUsize,
    errors: AtomicUsize,
    next_section: AtomicUsize,
}

struct Shared {
    stop: AtomicBool,
    /// Every worker asks in fair mode (all clients of a key agree on it).
    fair: bool,
    store: Mutex<FencedStore>,
    sections: Mutex<Vec<Section>>,
    counters: Counters,
}

impl Shared {
    /// One critical section with `token`, of an acquire asked for at
    /// `asked`, checking `held` at each end. A holder that could not get
    /// its token (issued on first ask: it lost the lock first, or Redis
    /// failed) writes nothing: an error.
    async fn section(
        &self,
        asked: Instant,
        token: Result<u64, redlock_runtime::LockError>,
        held: impl Fn() -> bool,
        work: Duration,
    ) {
        let got = Instant::now();
        let Ok(token) = token else {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let id = self.counters.next_section.fetch_add(1, Ordering::Relaxed);
        self.counters.acquisitions.fetch_add(1, Ordering::Relaxed);
        let begin = Instant::now();
        let at_begin = held();
        if at_begin {
            self.store.lock().expect("store").write(token, id);
        }
        tokio::time::sleep(work).await;
        let at_end = held();
        if at_end {
            self.store.lock().expect("store").write(token, id);
        }
        self.sections.lock().expect("sections").push(Section {
            token,
            asked,
            got,
            begin,
            end: Instant::now(),
            valid: at_begin && at_end,
        });
    }
}

/// The workers of one soak.
struct Soak {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    started: Instant,
}

impl Soak {
    fn start(clients: &[LockClient], seed: u64, fair: bool) -> Soak {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            fair,
            store: Mutex::default(),
            sections: Mutex::default(),
            counters: Counters::default(),
        });
        let workers = clients
            .iter()
            .cycle()
            .take(6)
            .enumerate()
            .map(|(w, client)| {
                tokio::spawn(worker(client.clone(), Arc::clone(&shared), seed + w as u64))
            })
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

    /// Stops the workers, checks the invariants, prints the figures.
    async fn finish(self, name: &str, faults: usize, exclusive: bool, urls: &[String]) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for worker in self.workers {
            tokio::time::timeout(Duration::from_secs(15), worker)
                .await
                .expect("workers stop")
                .expect("no panic");
        }
        // Every abandoned acquire was given back: nothing is left held
        // once the give-back window (a command timeout, 300 ms, and a
        // margin) has passed, well within the ttl.
        for url in urls {
            let deadline = Instant::now() + Duration::from_millis(700);
            while key_exists(url, &format!("lock:{{{KEY}}}")).await {
                assert!(
                    Instant::now() < deadline,
                    "{name}: the lock is still held on {url} after the soak: an abandoned \
                     acquire was not given back"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let mut sections = self.shared.sections.lock().expect("sections").clone();
        sections.sort_by_key(|s| s.begin);
        let valid: Vec<Section> = sections.iter().copied().filter(|s| s.valid).collect();
        let overlaps = valid.windows(2).filter(|w| w[0].end > w[1].begin).count();
        // Tokens in issue order: `b` was asked for after `a` was in hand.
        let out_of_issue_order = pairs(&sections, |a, b| b.asked > a.got && b.token <= a.token);
        // Tokens in the order of the sections, where tenures are real.
        let out_of_order = pairs(&valid, |a, b| b.begin > a.end && b.token <= a.token);
        let started = self.started;
        let show =
            |(a, b): &(Section, Section)| format!("{} then {}", a.show(started), b.show(started));
        let store = self.shared.store.lock().expect("store");
        let c = &self.shared.counters;
        println!(
            "soak {name} {SOAK:?}: faults {faults}, cancellations {}, acquisitions {} ({} held \
             throughout), busy {}, failed {}; fenced store: {} accepted, {} rejected, stale \
             accepted {}; overlapping sections {overlaps}; later sections with a smaller token \
             {}; tokens asked for later that are smaller {}",
            c.cancellations.load(Ordering::Relaxed),
            sections.len(),
            valid.len(),
            c.busy.load(Ordering::Relaxed),
            c.errors.load(Ordering::Relaxed),
            store.accepted,
            store.rejected,
            store.stale_accepted,
            out_of_order.len(),
            out_of_issue_order.len(),
        );
        assert!(faults >= 10, "{name}: the fault loop ran ({faults})");
        assert!(
            c.cancellations.load(Ordering::Relaxed) >= 10,
            "{name}: cancellations ran"
        );
        assert!(
            valid.len() >= 20,
            "{name}: too few acquisitions ({})",
            valid.len()
        );
        assert_eq!(
            store.stale_accepted, 0,
            "{name}: a stale write was accepted"
        );
        assert!(
            out_of_issue_order.is_empty(),
            "{name}: a token asked for after another was in hand is not larger (the first 5 of {}): {:?}",
            out_of_issue_order.len(),
            out_of_issue_order
                .iter()
                .take(5)
                .map(show)
                .collect::<Vec<_>>()
        );
        if exclusive {
            assert_eq!(overlaps, 0, "{name}: two holders held the lock at once");
            assert!(
                out_of_order.is_empty(),
                "{name}: a later holder had a smaller token (the first 5 of {}): {:?}",
                out_of_order.len(),
                out_of_order.iter().take(5).map(show).collect::<Vec<_>>()
            );
        }
    }
}

impl Section {
    /// The section's token and times, in ms since `started`.
    fn show(&self, started: Instant) -> String {
        let ms = |t: Instant| t.saturating_duration_since(started).as_millis();
        format!(
            "token {} asked {} got {} held {}..{}{}",
            self.token,
            ms(self.asked),
            ms(self.got),
            ms(self.begin),
            ms(self.end),
            if self.valid { "" } else { " (lost)" }
        )
    }
}

/// The pairs of `sections` (in order of their beginning) that `bad` finds
/// out of order, earlier first.
fn pairs(
    sections: &[Section],
    bad: impl Fn(&Section, &Section) -> bool,
) -> Vec<(Section, Section)> {
    let mut found = Vec::new();
    for a in sections {
        for b in sections {
            if bad(a, b) {
                found.push((*a, *b));
            }
        }
    }
    found
}

async fn worker(client: LockClient, shared: Arc<Shared>, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let counters = &shared.counters;
    while !shared.stop.load(Ordering::Relaxed) {
        let work = Duration::from_millis(rng.u64(2..25));
        let request = client.lock(KEY).ttl(TTL).wait(Duration::from_millis(400));
        let request = if shared.fair { request.fair() } else { request };
        let asked = Instant::now();
        match rng.u8(0..4) {
            // Plain: acquire, work, release.
            0 => match request.acquire().await {
                Ok(guard) => {
                    shared
                        .section(asked, guard.fencing_token().await, || guard.is_held(), work)
                        .await;
                    let _ = guard.release().await;
                }
                Err(e) if e.is_busy() => {
                    counters.busy.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            // An acquire cut short at a random point.
            1 => {
                let cut = Duration::from_millis(rng.u64(1..120));
                match tokio::time::timeout(cut, request.acquire()).await {
                    Err(_) => {
                        counters.cancellations.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(guard)) => {
                        shared
                            .section(asked, guard.fencing_token().await, || guard.is_held(), work)
                            .await;
                        drop(guard); // released from a spawned task
                    }
                    Ok(Err(_)) => {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // A whole `run` cut short, maybe in its body.
            2 => {
                let cut = Duration::from_millis(rng.u64(1..150));
                let shared_body = Arc::clone(&shared);
                let body = async move {
                    if let Some(held) = current_lock() {
                        let check = held.clone();
                        shared_body
                            .section(
                                asked,
                                held.fencing_token().await,
                                move || check.is_held(),
                                work,
                            )
                            .await;
                    }
                };
                if tokio::time::timeout(cut, request.run(body)).await.is_err() {
                    counters.cancellations.fetch_add(1, Ordering::Relaxed);
                }
            }
            // A guard dropped, never released.
            _ => {
                if let Ok(guard) = request.acquire().await {
                    shared
                        .section(asked, guard.fencing_token().await, || guard.is_held(), work)
                        .await;
                }
            }
        }
    }
}

/// A soak client on one Redis (with `replicas`: waiting for one replica).
fn client_with(url: &str, replicas: bool) -> LockClient {
    let builder = soak_builder(url);
    let builder = if replicas {
        builder.replicas(1, Duration::from_millis(100))
    } else {
        builder
    };
    builder.build_unchecked().expect("client")
}

/// The soak's settings: short timeouts and retries.
fn soak_builder(url: &str) -> redlock_runtime::LockClientBuilder {
    LockClient::builder()
        .url(url)
        .command_timeout(Duration::from_millis(300))
        .connection_timeout(Duration::from_millis(300))
        .retry(RetryPolicy::new(
            Duration::from_millis(2),
            Duration::from_millis(50),
        ))
}

fn client(url: &str) -> LockClient {
    client_with(url, false)
}

/// A soak client that issues every token with its acquire: its calls are
/// coalesced (see `tests/coalesce.rs`) when its workers send them at once.
fn fenced_client(url: &str) -> LockClient {
    soak_builder(url)
        .fenced(true)
        .build_unchecked()
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_redis_with_aof_always() {
    soak_aof_always(Server::Redis, "one Redis, AOF always", 1, false, |url| {
        vec![client(url), client(url)]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_redis_with_coalesced_fenced_calls() {
    // All six workers on one fenced client: their acquires and releases
    // go out in batches while the faults hit.
    let clients = soak_aof_always(
        Server::Redis,
        "one Redis, AOF always, coalesced fenced calls",
        4,
        false,
        |url| vec![fenced_client(url)],
    )
    .await;
    let (batches, calls) = redlock_runtime::test_util::coalesced_batches(&clients[0]);
    println!("coalesced: {batches} batches of {calls} calls");
    assert!(batches > 0, "the soak's calls were coalesced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_redis_fair_with_aof_always() {
    // Every release hands the lock to the next waiter in line (a grant),
    // while acquires are cut short around it and the faults hit.
    soak_aof_always(
        Server::Redis,
        "one Redis, AOF always, fair",
        6,
        true,
        |url| vec![client(url), client(url)],
    )
    .await;
}

/// The soak on one server of `program`'s with an AOF fsynced on every
/// write (the lock survives a SIGKILL), behind a proxy: latency, cuts,
/// pauses and restarts from the AOF. `clients(url)` makes the clients the
/// workers share.
async fn soak_aof_always(
    program: Server,
    name: &str,
    seed: u64,
    fair: bool,
    clients: impl FnOnce(&str) -> Vec<LockClient>,
) -> Vec<LockClient> {
    let mut server =
        RedisServer::start_on(program, &["--appendonly", "yes", "--appendfsync", "always"]).await;
    let proxy = FaultProxy::start(server.addr()).await;
    let clients = clients(&proxy.url());
    let soak = Soak::start(&clients, seed, fair);
    let mut rng = fastrand::Rng::with_seed(seed * 11);
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
    soak.finish(name, faults, true, &[server.url()]).await;
    clients
}

// On Valkey 9.1, plain locks take the path without scripts (`SET NX`, the
// conditional acquire, `SET .. IFEQ` renewals, `DELIFEQ`): the same soak
// puts that path through the same faults. (Fair mode and fenced calls run
// the same scripts on both servers, and their soaks stay on Redis.)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_valkey_with_aof_always() {
    soak_aof_always(Server::Valkey, "one Valkey, AOF always", 8, false, |url| {
        vec![client(url), client(url)]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_valkey_restarting_empty_or_from_a_snapshot() {
    soak_restarts(
        Server::Valkey,
        "one Valkey, restarts empty and from RDB",
        9,
        false,
        |url| vec![client(url), client(url)],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_redis_restarting_empty_or_from_a_snapshot() {
    soak_restarts(
        Server::Redis,
        "one Redis, restarts empty and from RDB",
        2,
        false,
        |url| vec![client(url), client(url)],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_redis_restarting_with_coalesced_fenced_calls() {
    // Batches read Redis's clock once for all their acquires: tokens must
    // still increase across restarts empty and rollbacks to a snapshot.
    let clients = soak_restarts(
        Server::Redis,
        "one Redis, restarts empty and from RDB, coalesced fenced calls",
        5,
        false,
        |url| vec![fenced_client(url)],
    )
    .await;
    let (batches, calls) = redlock_runtime::test_util::coalesced_batches(&clients[0]);
    println!("coalesced: {batches} batches of {calls} calls");
    assert!(batches > 0, "the soak's calls were coalesced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_one_redis_fair_restarting_empty_or_from_a_snapshot() {
    // Grants issue fencing tokens too: they must still increase across
    // restarts empty and rollbacks to a snapshot.
    soak_restarts(
        Server::Redis,
        "one Redis, restarts empty and from RDB, fair",
        7,
        true,
        |url| vec![client(url), client(url)],
    )
    .await;
}

/// The soak on one server of `program`'s that restarts empty or from its
/// last RDB snapshot, behind a proxy. Locks do not survive these restarts
/// (documented): holders may overlap, and the fencing tokens must still
/// keep the store safe. `clients(url)` makes the clients the workers share.
async fn soak_restarts(
    program: Server,
    name: &str,
    seed: u64,
    fair: bool,
    clients: impl FnOnce(&str) -> Vec<LockClient>,
) -> Vec<LockClient> {
    let mut server = RedisServer::start_on(program, &[]).await;
    let proxy = FaultProxy::start(server.addr()).await;
    let clients = clients(&proxy.url());
    let soak = Soak::start(&clients, seed, fair);
    let mut rng = fastrand::Rng::with_seed(seed * 11);
    let mut faults = 0;
    while soak.running() {
        tokio::time::sleep(Duration::from_millis(rng.u64(150..400))).await;
        match rng.u8(0..5) {
            0 => proxy.set_latency(Duration::from_millis(rng.u64(0..60))),
            1 => {
                let mut conn = raw_connection(server.url()).await;
                let _: redis::RedisResult<()> = redis::cmd("SAVE").query_async(&mut conn).await;
            }
            2 => server.restart_keeping_data().await, // back to the last snapshot
            3 => server.restart().await,              // empty
            _ => {
                server
                    .pause_for(Duration::from_millis(rng.u64(50..300)))
                    .await
            }
        }
        faults += 1;
    }
    proxy.set_latency(Duration::ZERO);
    soak.finish(name, faults, false, &[server.url()]).await;
    clients
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_primary_with_an_acknowledging_replica() {
    let primary = RedisServer::start().await;
    let replica = start_replica(&primary).await;
    let proxy = FaultProxy::start(primary.addr()).await;
    let clients = [
        client_with(&proxy.url(), true),
        client_with(&proxy.url(), true),
    ];
    let soak = Soak::start(&clients, 3, false);
    let mut rng = fastrand::Rng::with_seed(33);
    let mut faults = 0;
    while soak.running() {
        tokio::time::sleep(Duration::from_millis(rng.u64(150..400))).await;
        match rng.u8(0..4) {
            0 => proxy.set_latency(Duration::from_millis(rng.u64(0..60))),
            1 => proxy.cut_all(),
            2 => {
                replica
                    .pause_for(Duration::from_millis(rng.u64(50..400)))
                    .await
            }
            _ => {
                primary
                    .pause_for(Duration::from_millis(rng.u64(50..300)))
                    .await
            }
        }
        faults += 1;
    }
    proxy.set_latency(Duration::ZERO);
    soak.finish("primary + replica, WAIT 1", faults, true, &[primary.url()])
        .await;
}

#[derive(Clone, Copy, PartialEq)]
enum NodeState {
    Up,
    Killed,
    Paused,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_redlock_five_nodes() {
    let mut nodes = Vec::new();
    for _ in 0..5 {
        nodes.push(RedisServer::start().await);
    }
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let redlock = || {
        LockClient::builder()
            .redlock(urls.iter().cloned())
            .node_timeout(Duration::from_millis(50))
            .connection_timeout(Duration::from_millis(200))
            .command_timeout(Duration::from_millis(200))
            // A node that restarts waits out the longest ttl.
            .restart_delay(TTL)
            .retry(RetryPolicy::new(
                Duration::from_millis(2),
                Duration::from_millis(50),
            ))
            .build_unchecked()
            .expect("client")
    };
    let clients = [redlock(), redlock(), redlock()];
    let soak = Soak::start(&clients, 4, false);
    // At most two nodes down or paused at a time.
    let mut state = [NodeState::Up; 5];
    let mut rng = fastrand::Rng::with_seed(44);
    let mut faults = 0;
    while soak.running() {
        tokio::time::sleep(Duration::from_millis(rng.u64(150..450))).await;
        let faulty: Vec<usize> = (0..5).filter(|&i| state[i] != NodeState::Up).collect();
        let up: Vec<usize> = (0..5).filter(|&i| state[i] == NodeState::Up).collect();
        if faulty.len() == 2 || (!faulty.is_empty() && rng.bool()) {
            let i = faulty[rng.usize(..faulty.len())];
            if state[i] == NodeState::Killed {
                nodes[i].restart().await;
            } else {
                nodes[i].resume();
            }
            state[i] = NodeState::Up;
        } else {
            let i = up[rng.usize(..up.len())];
            if rng.bool() {
                nodes[i].kill().await;
                state[i] = NodeState::Killed;
            } else {
                nodes[i].pause();
                state[i] = NodeState::Paused;
            }
        }
        faults += 1;
    }
    for (i, node) in nodes.iter_mut().enumerate() {
        match state[i] {
            NodeState::Paused => node.resume(),
            NodeState::Killed => node.restart().await,
            NodeState::Up => {}
        }
    }
    soak.finish("Redlock, 5 nodes, restart delay", faults, true, &urls)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_cluster_with_slot_moves_and_paused_masters() {
    soak_cluster("cluster, slot moves and paused masters", 5, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_cluster_fair_with_slot_moves_and_paused_masters() {
    // Grants (with their sharded publish) while the lock, its line and its
    // counter move between masters.
    soak_cluster("cluster, slot moves and paused masters, fair", 8, true).await;
}

/// The soak on a three-master cluster: the lock's slot moves whole or
/// half-way at a time, and its master pauses.
async fn soak_cluster(name: &str, seed: u64, fair: bool) {
    let cluster = RedisCluster::start(3, 0).await;
    let urls = cluster.urls();
    let client = || {
        LockClient::builder()
            .cluster(urls.iter().cloned())
            .command_timeout(Duration::from_millis(300))
            .connection_timeout(Duration::from_millis(300))
            .retry(RetryPolicy::new(
                Duration::from_millis(2),
                Duration::from_millis(50),
            ))
            .build_unchecked()
            .expect("client")
    };
    let clients = [client(), client()];
    let slot = cluster.slot_of(&format!("lock:{{{KEY}}}")).await;
    let soak = Soak::start(&clients, seed, fair);
    let mut rng = fastrand::Rng::with_seed(seed * 11);
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
            // The whole move at once: MOVED from then on.
            0 => cluster.migrate_slot(slot, to).await,
            // Half-way for a while (ASK; TRYAGAIN while keys are split).
            1 => {
                let migration = cluster.begin_migration(slot, to).await;
                tokio::time::sleep(Duration::from_millis(rng.u64(20..150))).await;
                migration.move_all_keys(&cluster).await;
                tokio::time::sleep(Duration::from_millis(rng.u64(20..150))).await;
                migration.finish(&cluster).await;
            }
            // The lock's master stops answering for a while.
            _ => {
                cluster
                    .node(owner)
                    .pause_for(Duration::from_millis(rng.u64(50..300)))
                    .await
            }
        }
        faults += 1;
    }
    // The key can only be on the master that serves its slot now.
    let owner = cluster.node(cluster.master_of_slot(slot).await).url();
    soak.finish(name, faults, true, &[owner]).await;
}
