//! Mutual exclusion under random faults: 3 Redlock clients over 5 nodes,
//! 6 workers contending for one lock for 20 s while a fault loop kills,
//! restarts (empty), pauses and resumes nodes at random, at most two at a
//! time. Bounded: the whole test takes about 21 s.
//!
//! Every holder writes to a fenced store at the start and the end of its
//! critical section, while its guard says the lock is held. The test fails
//! if two sections that both held the lock throughout overlap in time, or
//! if the store ever accepted a write out of token order. Run with
//! `--nocapture` to see the figures.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_runtime::LockClient;
use redlock_tests::RedisServer;

const SOAK: Duration = Duration::from_secs(20);
const TTL: Duration = Duration::from_millis(1_000);

/// Accepts a write only with a token at least as high as any accepted.
#[derive(Default)]
struct FencedStore {
    highest: u64,
    accepted: usize,
    rejected: usize,
    /// Accepted writes whose token was below one accepted earlier: must
    /// stay zero (the store's own rule, checked independently).
    out_of_order: usize,
    log: Vec<u64>,
}

impl FencedStore {
    fn write(&mut self, token: u64) -> bool {
        if token < self.highest {
            self.rejected += 1;
            return false;
        }
        if self.log.last().is_some_and(|&last| token < last) {
            self.out_of_order += 1;
        }
        self.highest = token;
        self.accepted += 1;
        self.log.push(token);
        true
    }
}

/// One critical section, as its holder saw it.
#[derive(Debug, Clone, Copy)]
struct Section {
    token: u64,
    begin: Instant,
    end: Instant,
    /// The guard said held at the start and at the end.
    valid: bool,
}

#[derive(Default)]
struct Faults {
    kills: usize,
    restarts: usize,
    pauses: usize,
    resumes: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum NodeState {
    Up,
    Killed,
    Paused,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_mutual_exclusion_under_random_faults_20s() {
    let mut nodes = Vec::new();
    for _ in 0..5 {
        nodes.push(RedisServer::start().await);
    }
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            LockClient::builder()
                .redlock(urls.iter().cloned())
                .node_timeout(Duration::from_millis(50))
                .connection_timeout(Duration::from_millis(200))
                .command_timeout(Duration::from_millis(200))
                // A node that lost its data waits out the longest ttl.
                .restart_delay(TTL)
                .default_ttl(TTL)
                .build_unchecked()
                .expect("client"),
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    let store = Arc::new(Mutex::new(FencedStore::default()));
    let sections = Arc::new(Mutex::new(Vec::<Section>::new()));
    let errors = Arc::new(AtomicUsize::new(0));
    let busy = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for (w, client) in clients.iter().cycle().take(6).enumerate() {
        let (client, stop, store, sections, errors, busy) = (
            client.clone(),
            Arc::clone(&stop),
            Arc::clone(&store),
            Arc::clone(&sections),
            Arc::clone(&errors),
            Arc::clone(&busy),
        );
        workers.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(w as u64);
            while !stop.load(Ordering::Relaxed) {
                let guard = match client
                    .lock("soak")
                    .wait(Duration::from_millis(500))
                    .acquire()
                    .await
                {
                    Ok(guard) => guard,
                    Err(e) if e.is_busy() => {
                        busy.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let token = guard.fencing_token();
                let begin = Instant::now();
                let held_at_begin = guard.is_held();
                if held_at_begin {
                    store.lock().expect("store").write(token);
                }
                // The critical section's work.
                tokio::time::sleep(Duration::from_millis(rng.u64(5..40))).await;
                let held_at_end = guard.is_held();
                if held_at_end {
                    store.lock().expect("store").write(token);
                }
                let end = Instant::now();
                sections.lock().expect("sections").push(Section {
                    token,
                    begin,
                    end,
                    valid: held_at_begin && held_at_end,
                });
                let _ = guard.release().await;
            }
        }));
    }

    // The fault loop: at most two nodes down or paused at a time.
    let mut faults = Faults::default();
    let mut state = [NodeState::Up; 5];
    let mut rng = fastrand::Rng::with_seed(20_261_121);
    let started = Instant::now();
    while started.elapsed() < SOAK {
        tokio::time::sleep(Duration::from_millis(rng.u64(150..450))).await;
        let faulty: Vec<usize> = (0..5).filter(|&i| state[i] != NodeState::Up).collect();
        let up: Vec<usize> = (0..5).filter(|&i| state[i] == NodeState::Up).collect();
        let heal = faulty.len() == 2 || (!faulty.is_empty() && rng.bool());
        if heal {
            let i = faulty[rng.usize(..faulty.len())];
            if state[i] == NodeState::Killed {
                nodes[i].restart().await;
                faults.restarts += 1;
            } else {
                nodes[i].resume();
                faults.resumes += 1;
            }
            state[i] = NodeState::Up;
        } else {
            let i = up[rng.usize(..up.len())];
            if rng.bool() {
                nodes[i].kill().await;
                faults.kills += 1;
                state[i] = NodeState::Killed;
            } else {
                nodes[i].pause();
                faults.pauses += 1;
                state[i] = NodeState::Paused;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for (i, node) in nodes.iter_mut().enumerate() {
        match state[i] {
            NodeState::Paused => node.resume(),
            NodeState::Killed => node.restart().await,
            NodeState::Up => {}
        }
    }
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(10), worker)
            .await
            .expect("workers stop")
            .expect("no panic");
    }

    let mut sections = sections.lock().expect("sections").clone();
    sections.sort_by_key(|s| s.begin);
    let valid: Vec<Section> = sections.iter().copied().filter(|s| s.valid).collect();
    let overlaps: Vec<(Section, Section)> = valid
        .windows(2)
        .filter(|w| w[0].end > w[1].begin)
        .map(|w| (w[0], w[1]))
        .collect();
    let store = store.lock().expect("store");
    println!(
        "soak {:?}: faults {} (kills {}, restarts {}, pauses {}, resumes {}); acquisitions {}, \
         held throughout {}, busy {}, failed acquires {}; fenced store: {} writes accepted, {} \
         rejected, {} accepted out of order; overlapping sections {}",
        SOAK,
        faults.kills + faults.restarts + faults.pauses + faults.resumes,
        faults.kills,
        faults.restarts,
        faults.pauses,
        faults.resumes,
        sections.len(),
        valid.len(),
        busy.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        store.accepted,
        store.rejected,
        store.out_of_order,
        overlaps.len(),
    );
    assert!(faults.kills + faults.pauses >= 10, "the fault loop ran");
    assert!(
        valid.len() >= 20,
        "too few acquisitions ({}) to say anything",
        valid.len()
    );
    assert!(
        overlaps.is_empty(),
        "two holders held the lock at once: {overlaps:#?}"
    );
    assert_eq!(store.out_of_order, 0);
    let tokens: Vec<u64> = valid.iter().map(|s| s.token).collect();
    let mut unique = tokens.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        tokens.len(),
        "two acquisitions shared a token"
    );
}
