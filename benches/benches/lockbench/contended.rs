//! Contended: 8 workers, each with a client of its own, loop on one key.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlock_runtime::{LockClient, LockGuard, LockRequest};

use crate::config::Config;
use crate::support::{micros, ours_client};

pub(crate) const CONTENDED_WORKERS: usize = 8;
pub(crate) const CONTENDED_HOLD: Duration = Duration::from_millis(1);
pub(crate) const CONTENDED_TTL: Duration = Duration::from_secs(10);
/// How long our client may wait for the lock in the contended scenario.
const CONTENDED_WAIT: Duration = Duration::from_secs(10);
/// One contended iteration that takes longer than this counts as an error.
const CONTENDED_OP_LIMIT: Duration = Duration::from_secs(15);

/// Holds for [`CONTENDED_HOLD`] without blocking a runtime thread.
///
/// Not `tokio::time::sleep`: tokio's timer has 1 ms ticks and rounds up, so
/// a 1 ms sleep lasts about 2 ms, which alone would cap every
/// implementation near 450 acquisitions/s. A thread sleep on the blocking
/// pool lasts 1 ms and a few tens of microseconds.
async fn hold() {
    tokio::task::spawn_blocking(|| std::thread::sleep(CONTENDED_HOLD))
        .await
        .expect("hold");
}

/// Sentinel for "no previous holder".
const NOBODY: usize = usize::MAX;

/// The shared critical section: checks mutual exclusion and records who held
/// the lock last.
#[derive(Debug)]
pub(crate) struct Critical {
    holders: AtomicUsize,
    violations: AtomicU64,
    last_holder: AtomicUsize,
    /// Acquisitions at or after this are not counted (the run is over).
    deadline: Instant,
}

/// One pass through the critical section.
#[derive(Debug)]
pub(crate) struct Entry {
    wait: Duration,
    held: Duration,
    counted: bool,
    previous: Option<usize>,
}

impl Critical {
    /// Call right after acquiring: holds the lock for [`CONTENDED_HOLD`].
    pub(crate) async fn section(&self, worker: usize, wanted: Instant) -> Entry {
        let got = Instant::now();
        if self.holders.fetch_add(1, Ordering::SeqCst) != 0 {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        let previous = self.last_holder.swap(worker, Ordering::SeqCst);
        hold().await;
        self.holders.fetch_sub(1, Ordering::SeqCst);
        Entry {
            wait: got - wanted,
            held: got.elapsed(),
            counted: got < self.deadline,
            previous: (previous != NOBODY).then_some(previous),
        }
    }
}

/// What one implementation measured.
#[derive(Debug)]
pub(crate) struct Contended {
    pub(crate) name: &'static str,
    pub(crate) seconds: f64,
    pub(crate) per_worker: Vec<u64>,
    /// Sorted.
    pub(crate) waits_us: Vec<u32>,
    handoffs: u64,
    successions: u64,
    pub(crate) violations: u64,
    pub(crate) mean_hold_us: f64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

impl Contended {
    pub(crate) fn acquisitions(&self) -> u64 {
        self.per_worker.iter().sum()
    }

    pub(crate) fn per_sec(&self) -> f64 {
        self.acquisitions() as f64 / self.seconds
    }

    /// Share of acquisitions (after the first) that went to another worker.
    pub(crate) fn handoff_share(&self) -> f64 {
        if self.successions == 0 {
            return f64::NAN;
        }
        self.handoffs as f64 / self.successions as f64
    }

    /// The longest acquire wait.
    pub(crate) fn wait_max_us(&self) -> u32 {
        self.waits_us.last().copied().unwrap_or(0)
    }
}

/// What one worker counted.
#[derive(Debug, Default)]
struct Tally {
    acquisitions: u64,
    waits_us: Vec<u32>,
    handoffs: u64,
    successions: u64,
    held: Duration,
    errors: u64,
    first_error: Option<String>,
}

/// Runs one worker per element of `states` for the contended duration; each
/// loops `op(state, critical, worker)`, which must acquire, call
/// [`Critical::section`], release, and return the entry.
pub(crate) async fn contended<W, F, Fut>(
    name: &'static str,
    cfg: &Config,
    states: Vec<W>,
    op: F,
) -> Contended
where
    W: Clone + Send + 'static,
    F: Fn(W, Arc<Critical>, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Entry, String>> + Send,
{
    eprintln!("  contended {name} ...");
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let critical = Arc::new(Critical {
        holders: AtomicUsize::new(0),
        violations: AtomicU64::new(0),
        last_holder: AtomicUsize::new(NOBODY),
        deadline: started + cfg.contended_secs,
    });
    let mut tasks = Vec::new();
    for (worker, state) in states.into_iter().enumerate() {
        let (op, stop, critical) = (op.clone(), stop.clone(), critical.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally {
                waits_us: Vec::with_capacity(4096),
                ..Tally::default()
            };
            while !stop.load(Ordering::Relaxed) {
                let call = op(state.clone(), critical.clone(), worker);
                match tokio::time::timeout(CONTENDED_OP_LIMIT, call).await {
                    Ok(Ok(entry)) if entry.counted => {
                        tally.acquisitions += 1;
                        tally.waits_us.push(micros(entry.wait));
                        tally.held += entry.held;
                        if let Some(previous) = entry.previous {
                            tally.successions += 1;
                            tally.handoffs += u64::from(previous != worker);
                        }
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tally.errors += 1;
                        tally.first_error.get_or_insert(e);
                    }
                    Err(_) => {
                        tally.errors += 1;
                        tally
                            .first_error
                            .get_or_insert(format!("no lock within {CONTENDED_OP_LIMIT:?}"));
                    }
                }
            }
            tally
        }));
    }
    tokio::time::sleep_until(critical.deadline.into()).await;
    stop.store(true, Ordering::Relaxed);

    let mut out = Contended {
        name,
        seconds: cfg.contended_secs.as_secs_f64(),
        per_worker: Vec::new(),
        waits_us: Vec::new(),
        handoffs: 0,
        successions: 0,
        violations: 0,
        mean_hold_us: 0.0,
        errors: 0,
        first_error: None,
    };
    let mut held = Duration::ZERO;
    for task in tasks {
        let tally = task.await.expect("contended worker");
        out.per_worker.push(tally.acquisitions);
        out.waits_us.extend(tally.waits_us);
        out.handoffs += tally.handoffs;
        out.successions += tally.successions;
        out.errors += tally.errors;
        held += tally.held;
        if out.first_error.is_none() {
            out.first_error = tally.first_error;
        }
    }
    out.waits_us.sort_unstable();
    out.violations = critical.violations.load(Ordering::SeqCst);
    out.mean_hold_us = held.as_secs_f64() * 1e6 / out.acquisitions().max(1) as f64;
    out
}

/// Our client, the way the contended scenario asks for the lock in its
/// default mode.
pub(crate) fn ours_request(client: &LockClient, key: &str) -> LockRequest {
    client.lock(key).ttl(CONTENDED_TTL).wait(CONTENDED_WAIT)
}

/// The contended scenario for our client, one `LockClient` per worker;
/// `request` builds each worker's request (this is where a mode is chosen).
pub(crate) async fn contended_ours<R>(
    url: &str,
    cfg: &Config,
    name: &'static str,
    request: R,
) -> Contended
where
    R: Fn(&LockClient, &str) -> LockRequest + Send + Sync + 'static,
{
    let mut clients = Vec::new();
    for _ in 0..CONTENDED_WORKERS {
        clients.push(ours_client(url, cfg.pool_size, cfg.conditional).await);
    }
    let key = format!("contended:{name}");
    contended(name, cfg, clients, move |client, critical, worker| {
        let wanted = Instant::now();
        let request = request(&client, &key);
        async move {
            let guard: LockGuard = request.acquire().await.map_err(|e| e.to_string())?;
            let entry = critical.section(worker, wanted).await;
            guard.release().await.map_err(|e| e.to_string())?;
            Ok(entry)
        }
    })
    .await
}
