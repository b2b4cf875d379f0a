//! Uncontended: acquire+release pairs, every pair on a key of its own.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redlock_runtime::LockClient;

use crate::baselines;
use crate::config::Config;
use crate::support::{connect, micros, ours_client};

pub(crate) const CONCURRENCIES: [usize; 2] = [1, 32];
/// Lease of the uncontended locks, for all three implementations.
pub(crate) const UNCONTENDED_TTL: Duration = Duration::from_secs(30);
/// Untimed pairs before each uncontended cell (connections, script cache).
const WARM_UP_PAIRS: u64 = 20;
/// Uncontended cells are measured in interleaved slices of about this.
const UNCONTENDED_SLICE: Duration = Duration::from_millis(500);

const UNCONTENDED_IMPLS: [&str; 3] = ["raw", "ours", "rslock"];

/// One implementation's cell at one concurrency.
pub(crate) struct Measured {
    pub(crate) name: &'static str,
    pub(crate) concurrency: usize,
    pub(crate) pairs: usize,
    pub(crate) elapsed: Duration,
    /// Sorted once the cell is complete.
    pub(crate) latencies_us: Vec<u32>,
}

impl Measured {
    pub(crate) fn empty(name: &'static str, concurrency: usize) -> Self {
        Measured {
            name,
            concurrency,
            pairs: 0,
            elapsed: Duration::ZERO,
            latencies_us: Vec::new(),
        }
    }

    pub(crate) fn absorb(&mut self, slice: Measured) {
        self.pairs += slice.pairs;
        self.elapsed += slice.elapsed;
        self.latencies_us.extend(slice.latencies_us);
    }

    pub(crate) fn per_sec(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64()
    }
}

/// `r`'s pairs/s over those of `raw` at the same concurrency (NaN without
/// a `raw` cell).
pub(crate) fn ratio_to_raw(results: &[Measured], r: &Measured) -> f64 {
    let raw = results
        .iter()
        .find(|b| b.name == "raw" && b.concurrency == r.concurrency)
        .map_or(f64::NAN, Measured::per_sec);
    r.per_sec() / raw
}

/// Runs `op(task, i)` in `concurrency` tasks for `duration`, timing each
/// call; `i` counts from `first` in each task. With `warm_up`, a few untimed
/// calls come first.
pub(crate) async fn run<F, Fut>(
    name: &'static str,
    concurrency: usize,
    duration: Duration,
    first: u64,
    warm_up: bool,
    op: F,
) -> Measured
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    if warm_up {
        for i in 0..WARM_UP_PAIRS {
            op(usize::MAX, first + i).await;
        }
    }
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..concurrency {
        let (op, stop) = (op.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(16_384);
            let mut i = first;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                op(task, i).await;
                lat.push(micros(t.elapsed()));
                i += 1;
            }
            lat
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies_us = Vec::new();
    for t in tasks {
        latencies_us.extend(t.await.expect("bench task"));
    }
    Measured {
        name,
        concurrency,
        pairs: latencies_us.len(),
        elapsed: started.elapsed(),
        latencies_us,
    }
}

/// The uncontended implementations, and what they run on.
struct Uncontended {
    conn: MultiplexedConnection,
    script: Arc<redis::Script>,
    client: LockClient,
    manager: rslock::LockManager,
}

impl Uncontended {
    /// One slice of one implementation's cell.
    async fn slice(
        &self,
        name: &'static str,
        concurrency: usize,
        duration: Duration,
        first: u64,
        warm_up: bool,
    ) -> Measured {
        match name {
            "raw" => {
                let (c, s) = (self.conn.clone(), self.script.clone());
                run(
                    name,
                    concurrency,
                    duration,
                    first,
                    warm_up,
                    move |task, i| {
                        baselines::raw_pair(c.clone(), s.clone(), format!("raw:{task}:{i}"))
                    },
                )
                .await
            }
            "ours" => {
                let client = self.client.clone();
                run(
                    name,
                    concurrency,
                    duration,
                    first,
                    warm_up,
                    move |task, i| {
                        let request = client.lock(format!("ours:{task}:{i}")).ttl(UNCONTENDED_TTL);
                        async move {
                            let guard = request
                                .acquire()
                                .await
                                .expect("distinct keys are never busy");
                            guard.release().await.expect("release");
                        }
                    },
                )
                .await
            }
            "rslock" => {
                let manager = self.manager.clone();
                run(
                    name,
                    concurrency,
                    duration,
                    first,
                    warm_up,
                    move |task, i| {
                        baselines::rslock_pair(manager.clone(), format!("rslock:{task}:{i}"))
                    },
                )
                .await
            }
            other => unreachable!("no uncontended implementation `{other}`"),
        }
    }
}

/// Each cell's time is cut into slices of about [`UNCONTENDED_SLICE`], run
/// in rotating order (raw, ours, rslock; ours, rslock, raw; ...) and added
/// up, so that drift in the machine's state (other load, CPU placement of
/// client and server) falls on all implementations alike.
pub(crate) async fn uncontended(url: &str, cfg: &Config) -> Vec<Measured> {
    let bench = Uncontended {
        conn: connect(url).await,
        script: Arc::new(baselines::release_script()),
        client: ours_client(url, cfg.pool_size).await,
        manager: rslock::LockManager::new(vec![url.to_owned()]),
    };
    let rounds = (cfg.uncontended_secs.as_secs_f64() / UNCONTENDED_SLICE.as_secs_f64())
        .round()
        .max(1.0) as u32;
    let slice = cfg.uncontended_secs / rounds;

    let mut results = Vec::new();
    for concurrency in CONCURRENCIES {
        eprintln!(
            "  uncontended x{concurrency}: {rounds} rounds of {slice:?} per implementation ..."
        );
        let mut cells = UNCONTENDED_IMPLS.map(|name| Measured::empty(name, concurrency));
        for round in 0..rounds as usize {
            for k in 0..cells.len() {
                let cell = &mut cells[(k + round) % UNCONTENDED_IMPLS.len()];
                let first = (round as u64) << 40;
                let measured = bench
                    .slice(cell.name, concurrency, slice, first, round == 0)
                    .await;
                cell.absorb(measured);
            }
        }
        for mut cell in cells {
            cell.latencies_us.sort_unstable();
            results.push(cell);
        }
    }
    results
}
