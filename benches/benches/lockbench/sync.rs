//! Sync: the synchronizers against the plain lock, in the same run, on the
//! same server (issue 16).
//!
//! - **read** ([`read_vs_plain`]): uncontended acquire+release pairs/s of
//!   `client.rw_lock(k).read()` against `client.lock(k)` at concurrency 1
//!   and 32, every pair on a key of its own, one shared `LockClient`, in
//!   interleaved slices as in [`uncontended`](crate::uncontended) (the
//!   cells take `--uncontended-secs` each): read/plain is the number to
//!   judge;
//! - **permits** ([`permits`]): [`PERMIT_WORKERS`] workers over
//!   [`PERMIT_CLIENTS`] clients (worker `w` on client `w % 4`, like 4 nodes
//!   of 4 tasks) loop: want a permit, acquire (waiting allowed), hold
//!   [`PERMIT_HOLD`], release; on one semaphore of limit
//!   [`PERMIT_LIMIT`] (`semaphore`), and on [`PERMIT_LIMIT`] plain locks
//!   (`locks`: worker `w` always takes key `w / 4`, so each key has one
//!   worker of each client and all keys the same load: the locks' best
//!   case, which the semaphore's any-free-permit does not need). Each runs
//!   `--contended-secs`, in interleaved slices of about [`PERMIT_SLICE`].
//!   Reports acquisitions/s, semaphore/locks, the acquire wait, and the
//!   most holders ever inside at once in this process (a counter raised
//!   after the acquire returns and lowered before the release is sent, so
//!   it can only under-count Redis's own holders: a high-water mark above
//!   4 is a real violation);
//! - **latch** ([`latch_wake`]): per round, a latch set to
//!   [`LATCH_COUNT`] on the counting client, [`LATCH_WAITERS`] tasks in
//!   `wait` (4 on each of the permits' clients), the first counts down at
//!   once, then a settle of [`LATCH_SETTLE`] plus a few ms (varied per
//!   round, so the count-down does not fall in step with the waiters'
//!   polling backoff), then the last count-down. Each waiter's latency is
//!   from just before the last count-down is sent to its `wait` returning:
//!   it includes the count-down's own round trip (reported apart), the
//!   push, and the waiter's read of the count.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlock_runtime::LockClient;

use crate::config::Config;
use crate::support::{micros, ours_client};
use crate::uncontended::{CONCURRENCIES, Measured, UNCONTENDED_TTL, run};

/// Uncontended read/plain cells are measured in interleaved slices of
/// about this.
const READ_SLICE: Duration = Duration::from_millis(500);
const READ_IMPLS: [&str; 2] = ["plain", "read"];

pub(crate) const PERMIT_LIMIT: u32 = 4;
pub(crate) const PERMIT_WORKERS: usize = 16;
pub(crate) const PERMIT_CLIENTS: usize = 4;
/// How long a worker holds its permit (or lock): a thread sleep on the
/// blocking pool, as the contended scenario's hold (tokio's timer would
/// round it up to its 1 ms ticks). Short, so that the acquire and release
/// round trips, not the hold, are what is measured. The hand-off to the
/// blocking pool and the kernel's timer slack make the real hold longer
/// (about 0.35-0.4 ms on a 2-core machine): the mean is reported.
pub(crate) const PERMIT_HOLD: Duration = Duration::from_micros(200);
const PERMIT_TTL: Duration = Duration::from_secs(10);
const PERMIT_WAIT: Duration = Duration::from_secs(10);
/// One iteration that takes longer than this counts as an error.
const PERMIT_OP_LIMIT: Duration = Duration::from_secs(15);
/// The permits runs are measured in interleaved slices of about this.
const PERMIT_SLICE: Duration = Duration::from_secs(1);
const PERMIT_IMPLS: [&str; 2] = ["semaphore", "locks"];

pub(crate) const LATCH_WAITERS: usize = 16;
pub(crate) const LATCH_COUNT: u64 = 4;
const LATCH_TTL: Duration = Duration::from_secs(30);
const LATCH_WAIT: Duration = Duration::from_secs(10);
/// Time for the waiters to subscribe and settle into their backoff before
/// the last count-down; each round adds `(round % 5) * 7` ms.
pub(crate) const LATCH_SETTLE: Duration = Duration::from_millis(100);

/// What the sync group measured.
pub(crate) struct SyncRun {
    /// `plain` and `read` cells per concurrency, latencies sorted.
    pub(crate) read: Vec<Measured>,
    /// `semaphore` and `locks`.
    pub(crate) permits: Vec<Permits>,
    pub(crate) latch: LatchRun,
}

impl SyncRun {
    fn rate(&self, name: &str, concurrency: usize) -> f64 {
        self.read
            .iter()
            .find(|m| m.name == name && m.concurrency == concurrency)
            .map_or(f64::NAN, Measured::per_sec)
    }

    /// `name`'s pairs/s over the plain lock's at `concurrency`.
    pub(crate) fn vs_plain(&self, name: &str, concurrency: usize) -> f64 {
        self.rate(name, concurrency) / self.rate("plain", concurrency)
    }

    /// Read lock over plain lock, uncontended pairs/s at `concurrency`.
    pub(crate) fn read_ratio(&self, concurrency: usize) -> f64 {
        self.vs_plain("read", concurrency)
    }

    fn permits_rate(&self, name: &str) -> f64 {
        self.permits
            .iter()
            .find(|p| p.name == name)
            .map_or(f64::NAN, Permits::per_sec)
    }

    /// `name`'s acquisitions/s over the 4 plain locks'.
    pub(crate) fn vs_locks(&self, name: &str) -> f64 {
        self.permits_rate(name) / self.permits_rate("locks")
    }

    /// Semaphore over 4 plain locks, acquisitions/s.
    pub(crate) fn semaphore_ratio(&self) -> f64 {
        self.vs_locks("semaphore")
    }

    /// The semaphore's run, if any.
    pub(crate) fn semaphore(&self) -> Option<&Permits> {
        self.permits.iter().find(|p| p.name == "semaphore")
    }
}

/// One permits implementation's run (its slices added up).
#[derive(Debug)]
pub(crate) struct Permits {
    pub(crate) name: &'static str,
    pub(crate) seconds: f64,
    pub(crate) acquisitions: u64,
    /// From wanting a permit to holding it; sorted.
    pub(crate) waits_us: Vec<u32>,
    held: Duration,
    /// The most holders inside at once, in this process.
    pub(crate) max_inside: usize,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

impl Permits {
    fn empty(name: &'static str) -> Self {
        Permits {
            name,
            seconds: 0.0,
            acquisitions: 0,
            waits_us: Vec::new(),
            held: Duration::ZERO,
            max_inside: 0,
            errors: 0,
            first_error: None,
        }
    }

    fn absorb(&mut self, slice: Permits) {
        self.seconds += slice.seconds;
        self.acquisitions += slice.acquisitions;
        self.waits_us.extend(slice.waits_us);
        self.held += slice.held;
        self.max_inside = self.max_inside.max(slice.max_inside);
        self.errors += slice.errors;
        if self.first_error.is_none() {
            self.first_error = slice.first_error;
        }
    }

    pub(crate) fn per_sec(&self) -> f64 {
        self.acquisitions as f64 / self.seconds
    }

    pub(crate) fn wait_max_us(&self) -> u32 {
        self.waits_us.last().copied().unwrap_or(0)
    }

    pub(crate) fn mean_hold_us(&self) -> f64 {
        self.held.as_secs_f64() * 1e6 / self.acquisitions.max(1) as f64
    }
}

/// The latch rounds.
#[derive(Debug, Default)]
pub(crate) struct LatchRun {
    pub(crate) rounds: usize,
    /// Each waiter's wake, from just before the last count-down was sent;
    /// sorted.
    pub(crate) wakes_us: Vec<u32>,
    /// The last count-down's own call, per round; sorted.
    pub(crate) count_down_us: Vec<u32>,
    /// Waiters that returned before the last count-down was sent (a wrong
    /// wake).
    pub(crate) early: usize,
    pub(crate) errors: usize,
    pub(crate) first_error: Option<String>,
}

impl LatchRun {
    pub(crate) fn wake_max_us(&self) -> u32 {
        self.wakes_us.last().copied().unwrap_or(0)
    }
}

pub(crate) async fn sync(url: &str, cfg: &Config) -> SyncRun {
    let client = ours_client(url, cfg.pool_size, cfg.conditional).await;
    let read = read_vs_plain(&client, cfg).await;
    let mut clients = Vec::new();
    for _ in 0..PERMIT_CLIENTS {
        clients.push(ours_client(url, cfg.pool_size, cfg.conditional).await);
    }
    let permits = permits(&clients, cfg).await;
    let latch = latch_wake(&client, &clients, cfg.latch_rounds).await;
    SyncRun {
        read,
        permits,
        latch,
    }
}

/// Uncontended pairs of the plain lock and the read lock, in rotating
/// slices as the uncontended group's.
async fn read_vs_plain(client: &LockClient, cfg: &Config) -> Vec<Measured> {
    let rounds = (cfg.uncontended_secs.as_secs_f64() / READ_SLICE.as_secs_f64())
        .round()
        .max(1.0) as u32;
    let slice = cfg.uncontended_secs / rounds;
    let mut out = Vec::new();
    for concurrency in CONCURRENCIES {
        eprintln!("  sync read x{concurrency}: {rounds} rounds of {slice:?}, plain and read ...");
        let mut cells = READ_IMPLS.map(|name| Measured::empty(name, concurrency));
        for round in 0..rounds as usize {
            for k in 0..cells.len() {
                let which = (k + round) % READ_IMPLS.len();
                let name = READ_IMPLS[which];
                let (first, warm) = ((round as u64) << 40, round == 0);
                let client = client.clone();
                let measured = run(name, concurrency, slice, first, warm, move |task, i| {
                    let key = format!("sync-{name}:{task}:{i}");
                    let request = match name {
                        "plain" => client.lock(key),
                        _ => client.rw_lock(key).read(),
                    }
                    .ttl(UNCONTENDED_TTL);
                    async move {
                        let guard = request
                            .acquire()
                            .await
                            .expect("distinct keys are never busy");
                        guard.release().await.expect("release");
                    }
                })
                .await;
                cells[which].absorb(measured);
            }
        }
        for mut cell in cells {
            cell.latencies_us.sort_unstable();
            out.push(cell);
        }
    }
    out
}

/// Holds for [`PERMIT_HOLD`] without blocking a runtime thread.
async fn hold() {
    tokio::task::spawn_blocking(|| std::thread::sleep(PERMIT_HOLD))
        .await
        .expect("hold");
}

/// The holders inside, in this process.
struct Inside {
    now: AtomicUsize,
    max: AtomicUsize,
    /// Acquisitions at or after this are not counted (the slice is over).
    deadline: Instant,
}

/// One pass: the acquire wait, the hold, whether it counts.
struct Entry {
    wait: Duration,
    held: Duration,
    counted: bool,
}

impl Inside {
    /// Call right after acquiring: holds for [`PERMIT_HOLD`].
    async fn section(&self, wanted: Instant) -> Entry {
        let got = Instant::now();
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        hold().await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        Entry {
            wait: got - wanted,
            held: got.elapsed(),
            counted: got < self.deadline,
        }
    }
}

/// One iteration of `name` for `worker`: acquire, hold, release.
async fn permit_once(
    name: &str,
    client: &LockClient,
    worker: usize,
    inside: &Inside,
) -> Result<Entry, String> {
    let wanted = Instant::now();
    if name == "semaphore" {
        let permit = client
            .semaphore("sync-semaphore", PERMIT_LIMIT)
            .ttl(PERMIT_TTL)
            .wait(PERMIT_WAIT)
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        let entry = inside.section(wanted).await;
        permit.release().await.map_err(|e| e.to_string())?;
        Ok(entry)
    } else {
        let key = format!("sync-lock:{}", worker / PERMIT_CLIENTS);
        let guard = client
            .lock(key)
            .ttl(PERMIT_TTL)
            .wait(PERMIT_WAIT)
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        let entry = inside.section(wanted).await;
        guard.release().await.map_err(|e| e.to_string())?;
        Ok(entry)
    }
}

/// One slice of `name`: the workers loop for `duration`.
async fn permits_slice(name: &'static str, clients: &[LockClient], duration: Duration) -> Permits {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let inside = Arc::new(Inside {
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
        deadline: started + duration,
    });
    let mut tasks = Vec::new();
    for worker in 0..PERMIT_WORKERS {
        let client = clients[worker % clients.len()].clone();
        let (stop, inside) = (stop.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Permits::empty(name);
            while !stop.load(Ordering::Relaxed) {
                let once = permit_once(name, &client, worker, &inside);
                match tokio::time::timeout(PERMIT_OP_LIMIT, once).await {
                    Ok(Ok(entry)) if entry.counted => {
                        out.acquisitions += 1;
                        out.waits_us.push(micros(entry.wait));
                        out.held += entry.held;
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        out.errors += 1;
                        out.first_error.get_or_insert(e);
                    }
                    Err(_) => {
                        out.errors += 1;
                        out.first_error
                            .get_or_insert(format!("nothing acquired within {PERMIT_OP_LIMIT:?}"));
                    }
                }
            }
            out
        }));
    }
    tokio::time::sleep_until(inside.deadline.into()).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = Permits::empty(name);
    for task in tasks {
        total.absorb(task.await.expect("permits worker"));
    }
    total.seconds = duration.as_secs_f64();
    total.max_inside = inside.max.load(Ordering::SeqCst);
    total
}

/// The semaphore against 4 plain locks, in rotating slices.
async fn permits(clients: &[LockClient], cfg: &Config) -> Vec<Permits> {
    // Untimed: each client's connections, scripts and subscriber.
    for (i, client) in clients.iter().enumerate() {
        let inside = Inside {
            now: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            deadline: Instant::now(),
        };
        for name in PERMIT_IMPLS {
            permit_once(name, client, i, &inside)
                .await
                .expect("warm-up acquire");
        }
    }
    let rounds = (cfg.contended_secs.as_secs_f64() / PERMIT_SLICE.as_secs_f64())
        .round()
        .max(1.0) as u32;
    let slice = cfg.contended_secs / rounds;
    eprintln!(
        "  sync permits: {PERMIT_WORKERS} workers, limit {PERMIT_LIMIT}, {rounds} rounds of {slice:?}, semaphore and locks ..."
    );
    let mut runs = PERMIT_IMPLS.map(Permits::empty);
    for round in 0..rounds as usize {
        for k in 0..runs.len() {
            let which = (k + round) % PERMIT_IMPLS.len();
            let measured = permits_slice(PERMIT_IMPLS[which], clients, slice).await;
            runs[which].absorb(measured);
        }
    }
    runs.into_iter()
        .map(|mut run| {
            run.waits_us.sort_unstable();
            run
        })
        .collect()
}

/// The latch rounds: `counter` sets up and counts down, the waiters wait on
/// `clients`.
async fn latch_wake(counter: &LockClient, clients: &[LockClient], rounds: usize) -> LatchRun {
    eprintln!("  sync latch: {rounds} rounds of {LATCH_WAITERS} waiters ...");
    let mut out = LatchRun {
        rounds,
        ..LatchRun::default()
    };
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    for round in 0..rounds {
        let key = format!("sync-latch:{run_id}:{round}");
        let latch = counter.latch(&key);
        let set = latch
            .try_set_count(LATCH_COUNT, LATCH_TTL)
            .await
            .expect("latch set-up");
        assert!(set, "a fresh latch key is not set up");
        let waiters: Vec<_> = (0..LATCH_WAITERS)
            .map(|w| {
                let latch = clients[w % clients.len()].latch(&key);
                tokio::spawn(async move { latch.wait(LATCH_WAIT).await.map(|()| Instant::now()) })
            })
            .collect();
        for _ in 1..LATCH_COUNT {
            latch.count_down().await.expect("count-down");
        }
        let settle = LATCH_SETTLE + Duration::from_millis((round % 5) as u64 * 7);
        tokio::time::sleep(settle).await;
        let sent = Instant::now();
        let left = latch.count_down().await.expect("the last count-down");
        out.count_down_us.push(micros(sent.elapsed()));
        assert_eq!(left, 0, "the last count-down opens the latch");
        for waiter in waiters {
            match waiter.await.expect("latch waiter") {
                Ok(woke) if woke < sent => out.early += 1,
                Ok(woke) => out.wakes_us.push(micros(woke - sent)),
                Err(e) => {
                    out.errors += 1;
                    out.first_error.get_or_insert(e.to_string());
                }
            }
        }
    }
    out.wakes_us.sort_unstable();
    out.count_down_us.sort_unstable();
    out
}
