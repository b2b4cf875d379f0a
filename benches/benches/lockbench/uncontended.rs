//! Uncontended: acquire+release pairs, every pair on a key of its own.
//!
//! Six implementations: `raw`, `raw_conditional` (on a server with
//! `DELIFEQ` only: see [`baselines::raw_conditional_pair`]), `ours` (the
//! default configuration: a
//! plain `SET NX PX`, the fencing token issued only when asked for, which
//! these pairs never do), `ours_fenced` (a client built with
//! `.fenced(true)`: the acquire script issues a token with every lock) and
//! `rslock`.
//!
//! After the group, the keys and memory it left on the server are read
//! ([`KeySpace`]: `DBSIZE`, `INFO memory`, and a `SCAN` that sorts the keys
//! by implementation). Every pair releases its lock, so what stays is what
//! the implementations keep after a release:
//!
//! - `ours`: nothing. A lock whose token was never asked for issues none,
//!   and the fencing counter (`lock:{key}:fence`) is only written when a
//!   token is issued;
//! - `ours_fenced`: one fencing counter per key locked, kept for the
//!   client's fencing retention (24 h by default) so that the key's next
//!   holder gets a larger token: one key per pair measured plus the
//!   warm-up pairs, since no two pairs share a key;
//! - `raw` and `rslock`: nothing (a compare-and-delete release);
//! - `other`: what was there before the group (the renewal group's keys,
//!   when it ran first).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redlock_runtime::LockClient;

use crate::baselines;
use crate::config::Config;
use crate::support::{CpuTimes, connect, micros, ours_client, ours_fenced_client, used_memory};

pub(crate) const CONCURRENCIES: [usize; 2] = [1, 32];
/// Lease of the uncontended locks, for all the implementations.
pub(crate) const UNCONTENDED_TTL: Duration = Duration::from_secs(30);
/// Untimed pairs before each uncontended cell (connections, script cache).
const WARM_UP_PAIRS: u64 = 20;
/// Uncontended cells are measured in interleaved slices of about this.
const UNCONTENDED_SLICE: Duration = Duration::from_millis(500);

/// The uncontended implementations, in the order of their slices' first
/// round (`--uncontended-impls` picks a subset).
pub(crate) const UNCONTENDED_IMPLS: [&str; 6] = [
    "raw",
    "ours",
    "ours_scripts",
    "ours_fenced",
    "rslock",
    "raw_conditional",
];

/// One implementation's cell at one concurrency.
pub(crate) struct Measured {
    pub(crate) name: &'static str,
    pub(crate) concurrency: usize,
    pub(crate) pairs: usize,
    pub(crate) elapsed: Duration,
    /// Sorted once the cell is complete.
    pub(crate) latencies_us: Vec<u32>,
    /// CPU time used during the cell's slices, by this process (every
    /// client in it, the benchmark's own loop included) and by redis-server.
    pub(crate) cpu: CpuTimes,
}

impl Measured {
    pub(crate) fn empty(name: &'static str, concurrency: usize) -> Self {
        Measured {
            name,
            concurrency,
            pairs: 0,
            elapsed: Duration::ZERO,
            latencies_us: Vec::new(),
            cpu: CpuTimes::default(),
        }
    }

    pub(crate) fn absorb(&mut self, slice: Measured) {
        self.pairs += slice.pairs;
        self.elapsed += slice.elapsed;
        self.latencies_us.extend(slice.latencies_us);
        self.cpu.client += slice.cpu.client;
        self.cpu.server += slice.cpu.server;
    }

    /// Client (this process) CPU µs per pair.
    pub(crate) fn client_us_per_pair(&self) -> f64 {
        self.cpu.client.as_secs_f64() * 1e6 / self.pairs as f64
    }

    /// redis-server CPU µs per pair.
    pub(crate) fn server_us_per_pair(&self) -> f64 {
        self.cpu.server.as_secs_f64() * 1e6 / self.pairs as f64
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

/// `r`'s pairs/s over those of `rslock` at the same concurrency (NaN
/// without an `rslock` cell).
pub(crate) fn ratio_to_rslock(results: &[Measured], r: &Measured) -> f64 {
    let rslock = results
        .iter()
        .find(|b| b.name == "rslock" && b.concurrency == r.concurrency)
        .map_or(f64::NAN, Measured::per_sec);
    r.per_sec() / rslock
}

/// The keys and memory on the server before and after the uncontended
/// group (see the module docs for what the keys are).
pub(crate) struct KeySpace {
    /// `DBSIZE` before the group.
    pub(crate) keys_before: u64,
    /// `DBSIZE` after it.
    pub(crate) keys: u64,
    /// `used_memory` (bytes) before the group.
    pub(crate) used_memory_before: u64,
    /// `used_memory` (bytes) after it, and `used_memory_human`.
    pub(crate) used_memory: u64,
    pub(crate) used_memory_human: String,
    /// The keys after the group, by the implementation that left them
    /// (`other`: none of them).
    pub(crate) by_impl: BTreeMap<&'static str, u64>,
    /// Timed pairs, all implementations and concurrencies.
    pub(crate) pairs_measured: usize,
    /// Timed pairs per implementation.
    pub(crate) pairs_by_impl: BTreeMap<&'static str, usize>,
    /// Untimed warm-up pairs per implementation (they leave keys too).
    pub(crate) warm_up_pairs: u64,
    /// Our clients' batches of coalesced calls, and the calls they carried
    /// (see `LockClientBuilder::coalesce`), by implementation.
    pub(crate) coalesced: BTreeMap<&'static str, (u64, u64)>,
}

/// Which uncontended implementation `key` belongs to: `name:task:i` (raw,
/// rslock), `lock:{name:task:i}` and its `:fence` counter (ours,
/// ours_fenced); `other` for any other key.
fn owner_of(key: &str) -> &'static str {
    let name = key.strip_prefix("lock:{").unwrap_or(key);
    let name = name.split(':').next().unwrap_or("");
    UNCONTENDED_IMPLS
        .into_iter()
        .find(|i| *i == name)
        .unwrap_or("other")
}

async fn dbsize(conn: &mut MultiplexedConnection) -> u64 {
    redis::cmd("DBSIZE")
        .query_async(conn)
        .await
        .expect("DBSIZE")
}

/// Every key's owner, counted with `SCAN`.
async fn keys_by_impl(conn: &mut MultiplexedConnection) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .expect("SCAN");
        for key in keys {
            *out.entry(owner_of(&key)).or_insert(0) += 1;
        }
        if next == 0 {
            return out;
        }
        cursor = next;
    }
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
        cpu: CpuTimes::default(),
    }
}

/// `slice`, with the CPU time both sides used while it ran (read through
/// `admin` before and after it).
pub(crate) async fn with_cpu<F: Future<Output = Measured>>(
    admin: &mut MultiplexedConnection,
    slice: F,
) -> Measured {
    let before = CpuTimes::now(admin).await;
    let mut measured = slice.await;
    measured.cpu = CpuTimes::now(admin).await.since(before);
    measured
}

/// Where a slice's pair numbers start: apart for every round and
/// concurrency, so that no two pairs of a group share a key (a task runs
/// far fewer than 2^32 pairs in a slice).
pub(crate) fn pair_numbers(round: usize, concurrency: usize) -> u64 {
    ((round as u64) << 40) | ((concurrency as u64) << 32)
}

/// The uncontended implementations, and what they run on.
struct Uncontended {
    conn: MultiplexedConnection,
    script: Arc<redis::Script>,
    client: LockClient,
    /// Our client built with `.conditional_commands(false)`: the scripts
    /// forced where the server has the conditional commands.
    scripts: LockClient,
    /// Our client built with `.fenced(true)`.
    fenced: LockClient,
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
            "raw_conditional" => {
                let c = self.conn.clone();
                run(
                    name,
                    concurrency,
                    duration,
                    first,
                    warm_up,
                    move |task, i| {
                        baselines::raw_conditional_pair(
                            c.clone(),
                            format!("raw_conditional:{task}:{i}"),
                        )
                    },
                )
                .await
            }
            "ours" | "ours_scripts" | "ours_fenced" => {
                let client = match name {
                    "ours" => self.client.clone(),
                    "ours_scripts" => self.scripts.clone(),
                    _ => self.fenced.clone(),
                };
                run(
                    name,
                    concurrency,
                    duration,
                    first,
                    warm_up,
                    move |task, i| {
                        let request = client
                            .lock(format!("{name}:{task}:{i}"))
                            .ttl(UNCONTENDED_TTL);
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
/// in rotating order (raw, ours, ours_scripts, ours_fenced, rslock; ours,
/// ours_scripts, ours_fenced, rslock, raw; ...) and added up, so that drift in the machine's state
/// (other load, CPU placement of client and server) falls on all
/// implementations alike. Returns the cells and the keys and memory left
/// on the server.
pub(crate) async fn uncontended(url: &str, cfg: &Config) -> (Vec<Measured>, KeySpace) {
    let bench = Uncontended {
        conn: connect(url).await,
        script: Arc::new(baselines::release_script()),
        client: ours_client(url, cfg.pool_size, cfg.conditional).await,
        scripts: ours_client(url, cfg.pool_size, false).await,
        fenced: ours_fenced_client(url, cfg.pool_size, cfg.coalesce).await,
        manager: rslock::LockManager::new(vec![url.to_owned()]),
    };
    let mut admin = bench.conn.clone();
    // `raw_conditional` needs `DELIFEQ`: left out where the server lacks it.
    let has_delifeq = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("DELIFEQ")
        .query_async::<Vec<redis::Value>>(&mut admin)
        .await
        .is_ok_and(|info| info.first().is_some_and(|i| *i != redis::Value::Nil));
    let impls: Vec<&'static str> = cfg
        .uncontended_impls
        .iter()
        .copied()
        .filter(|&name| name != "raw_conditional" || has_delifeq)
        .collect();
    let keys_before = dbsize(&mut admin).await;
    let (used_memory_before, _) = used_memory(&mut admin).await;
    let rounds = (cfg.uncontended_secs.as_secs_f64() / UNCONTENDED_SLICE.as_secs_f64())
        .round()
        .max(1.0) as u32;
    let slice = cfg.uncontended_secs / rounds;

    let mut results = Vec::new();
    for concurrency in CONCURRENCIES {
        eprintln!(
            "  uncontended x{concurrency}: {rounds} rounds of {slice:?} per implementation ..."
        );
        let mut cells: Vec<Measured> = impls
            .iter()
            .map(|&name| Measured::empty(name, concurrency))
            .collect();
        for round in 0..rounds as usize {
            for k in 0..cells.len() {
                let n = cells.len();
                let cell = &mut cells[(k + round) % n];
                // Keys never repeat across rounds and concurrencies (nor
                // the warm-up's), so the fencing counters left number the
                // pairs run.
                let first = pair_numbers(round, concurrency);
                let measured = with_cpu(
                    &mut admin,
                    bench.slice(cell.name, concurrency, slice, first, round == 0),
                )
                .await;
                cell.absorb(measured);
            }
        }
        for mut cell in cells {
            cell.latencies_us.sort_unstable();
            results.push(cell);
        }
    }

    let (used_memory, used_memory_human) = used_memory(&mut admin).await;
    let mut pairs_by_impl = BTreeMap::new();
    for r in &results {
        *pairs_by_impl.entry(r.name).or_insert(0) += r.pairs;
    }
    let coalesced = [
        ("ours", &bench.client),
        ("ours_scripts", &bench.scripts),
        ("ours_fenced", &bench.fenced),
    ]
    .into_iter()
    .map(|(name, client)| (name, redlock_runtime::test_util::coalesced_batches(client)))
    .collect();
    let keys = KeySpace {
        coalesced,
        keys_before,
        keys: dbsize(&mut admin).await,
        used_memory_before,
        used_memory,
        used_memory_human,
        by_impl: keys_by_impl(&mut admin).await,
        pairs_measured: results.iter().map(|r| r.pairs).sum(),
        pairs_by_impl,
        warm_up_pairs: WARM_UP_PAIRS * CONCURRENCIES.len() as u64,
    };
    (results, keys)
}
