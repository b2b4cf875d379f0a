//! lockbench: our lock client against the raw Redis commands and `rslock`,
//! uncontended and contended, plus the cost of renewing many held locks.
//!
//! ```text
//! cargo run --release -p redlock-examples --example lockbench
//! cargo run --release -p redlock-examples --example lockbench -- --quick   # ~12 s smoke run
//! cargo run --release -p redlock-examples --example lockbench -- --help
//! ```
//!
//! Needs `redis-server` on PATH (or `REDLOCK_REDIS_SERVER`): it starts its own
//! on a free loopback port through the test harness, never your Redis on 6379.
//! The default run takes about 45 s.
//!
//! What it measures, in one run against that one server:
//!
//! - **uncontended** (3 s per cell): acquire+release pairs/s and p50/p99
//!   latency at concurrency 1 and 32, every pair on a key of its own, for
//!   - `raw`: the two commands a lock needs (`SET key token NX PX`, then
//!     `EVALSHA` of the compare-and-delete script) with no lock library, over
//!     one redis-rs `MultiplexedConnection` shared by all tasks: the limit;
//!   - `ours`: `client.lock(key).acquire()` then `guard.release()` on one
//!     shared `LockClient` (watchdog on, as by default);
//!   - `rslock`: `manager.acquire(key)` then `guard.release()` on one shared
//!     `rslock::LockManager`;
//!
//!   with each one's ratio to `raw` of the same run. The cells run as
//!   interleaved 0.5 s slices, so drift in the machine's state hits all
//!   alike: the ratio is the number to compare across runs;
//! - **contended** (5 s per implementation): 8 workers, each with a client of
//!   its own (like 8 nodes), loop on one key: want the lock, acquire (waiting
//!   allowed), hold it 1 ms (a thread sleep: tokio's 1 ms timer ticks would
//!   make it ~2 ms), release. Reports acquisitions/s, the acquire
//!   wait (from wanting the lock to holding it) p50/p99/max, the share of
//!   acquisitions that went to another worker than the previous holder, and
//!   mutual-exclusion violations (a holder found another one inside). `raw`
//!   here is a naive poller: `SET NX PX` retried after a 1 ms tokio sleep;
//!   `rslock` uses `acquire` with its retry delay set to 10 ms (default 200);
//! - **renewal** (10 s): 10,000 locks with ttl 3 s held by our client with
//!   the watchdog on; Redis commands per second during the hold (from
//!   `INFO commandstats`), commands per renewal period (ttl/3), renewal round
//!   trips per period (`LockClient::renewal_round_trips`), and this
//!   process's resident memory before acquiring and while holding.
//!
//! Renewal runs first, so that its memory reading is not inflated by what
//! the other scenarios allocated. It prints a table per group, then one JSON
//! line per measurement, then the issue's targets with PASS/MISS. Progress
//! goes to stderr.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redlock_runtime::{LockClient, LockGuard, LockRequest};
use redlock_tests::RedisServer;

/// Keep in step with `rslock` in examples/Cargo.toml (shown in the output).
const RSLOCK_VERSION: &str = "0.10.0";

/// The compare-and-delete script of the raw baseline.
const RELEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

const CONCURRENCIES: [usize; 2] = [1, 32];
/// Lease of the uncontended locks, for all three implementations.
const UNCONTENDED_TTL: Duration = Duration::from_secs(30);
/// Untimed pairs before each uncontended cell (connections, script cache).
const WARM_UP_PAIRS: u64 = 20;
/// Uncontended cells are measured in interleaved slices of about this.
const UNCONTENDED_SLICE: Duration = Duration::from_millis(500);

const CONTENDED_WORKERS: usize = 8;
const CONTENDED_HOLD: Duration = Duration::from_millis(1);
const CONTENDED_TTL: Duration = Duration::from_secs(10);
/// How long our client may wait for the lock in the contended scenario.
const CONTENDED_WAIT: Duration = Duration::from_secs(10);
/// One contended iteration that takes longer than this counts as an error.
const CONTENDED_OP_LIMIT: Duration = Duration::from_secs(15);
/// rslock retries after a random delay in `0..this` (its default is 200 ms,
/// which would make it look far worse than it need be; this matches the
/// first step of our default backoff).
const RSLOCK_RETRY_DELAY: Duration = Duration::from_millis(10);
/// The naive poller's fixed retry interval.
const RAW_POLL: Duration = Duration::from_millis(1);

const RENEWAL_TTL: Duration = Duration::from_secs(3);
/// Tasks that acquire (and release) the renewal locks side by side.
const RENEWAL_PARALLELISM: usize = 64;

const USAGE: &str = "\
usage: lockbench [--quick] [--only GROUPS] [--uncontended-secs S] [--contended-secs S]
                 [--renewal-secs S] [--renewal-locks N]

  --quick               about 1 s per cell, renewal of 1,000 locks for 2 s (smoke run)
  --only GROUPS         comma-separated subset of: uncontended,contended,renewal
  --uncontended-secs S  seconds per uncontended cell (default 3)
  --contended-secs S    seconds per contended implementation (default 5)
  --renewal-secs S      seconds the renewal locks are held (default 10)
  --renewal-locks N     locks held in the renewal scenario (default 10000)

Environment: LOCKBENCH_QUICK=1, LOCKBENCH_ONLY, LOCKBENCH_UNCONTENDED_SECS,
LOCKBENCH_CONTENDED_SECS, LOCKBENCH_RENEWAL_SECS, LOCKBENCH_RENEWAL_LOCKS (flags win),
and LOCKBENCH_POOL_SIZE: connections of each of our clients (default 4).
Needs redis-server on PATH, or REDLOCK_REDIS_SERVER set to one.";

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Config {
    uncontended_secs: Duration,
    contended_secs: Duration,
    renewal_secs: Duration,
    renewal_locks: usize,
    pool_size: u32,
    run_uncontended: bool,
    run_contended: bool,
    run_renewal: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            uncontended_secs: Duration::from_secs(3),
            contended_secs: Duration::from_secs(5),
            renewal_secs: Duration::from_secs(10),
            renewal_locks: 10_000,
            pool_size: 4,
            run_uncontended: true,
            run_contended: true,
            run_renewal: true,
        }
    }
}

impl Config {
    /// Defaults, then `--quick`, then the environment, then the flags.
    fn from_env_and_args() -> Result<Self, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mut cfg = Config::default();
        if args.iter().any(|a| a == "--quick") || env("LOCKBENCH_QUICK").is_some_and(|v| v != "0") {
            cfg.uncontended_secs = Duration::from_secs(1);
            cfg.contended_secs = Duration::from_secs(1);
            // A renewal period is ttl/3 = 1 s: hold for two of them.
            cfg.renewal_secs = Duration::from_secs(2);
            cfg.renewal_locks = 1_000;
        }
        for (name, flag) in [
            ("LOCKBENCH_ONLY", "--only"),
            ("LOCKBENCH_UNCONTENDED_SECS", "--uncontended-secs"),
            ("LOCKBENCH_CONTENDED_SECS", "--contended-secs"),
            ("LOCKBENCH_RENEWAL_SECS", "--renewal-secs"),
            ("LOCKBENCH_RENEWAL_LOCKS", "--renewal-locks"),
        ] {
            if let Some(value) = env(name) {
                cfg.set(flag, &value).map_err(|e| format!("{name}: {e}"))?;
            }
        }
        if let Some(value) = env("LOCKBENCH_POOL_SIZE") {
            cfg.pool_size = value.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                format!("LOCKBENCH_POOL_SIZE: `{value}` is not a positive integer")
            })?;
        }
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => {}
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                flag if flag.starts_with("--") => {
                    let (flag, value) = match flag.split_once('=') {
                        Some((f, v)) => (f.to_owned(), v.to_owned()),
                        None => (
                            flag.to_owned(),
                            args.next().ok_or_else(|| format!("{flag} needs a value"))?,
                        ),
                    };
                    cfg.set(&flag, &value)?;
                }
                other => return Err(format!("unexpected argument `{other}`")),
            }
        }
        Ok(cfg)
    }

    fn set(&mut self, flag: &str, value: &str) -> Result<(), String> {
        let secs = |value: &str| {
            value
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("{flag}: `{value}` is not a positive number of seconds"))
        };
        match flag {
            "--uncontended-secs" => self.uncontended_secs = secs(value)?,
            "--contended-secs" => self.contended_secs = secs(value)?,
            "--renewal-secs" => self.renewal_secs = secs(value)?,
            "--renewal-locks" => {
                self.renewal_locks = value
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("{flag}: `{value}` is not a positive integer"))?;
            }
            "--only" => {
                self.run_uncontended = false;
                self.run_contended = false;
                self.run_renewal = false;
                for group in value.split(',').map(str::trim) {
                    match group {
                        "uncontended" => self.run_uncontended = true,
                        "contended" => self.run_contended = true,
                        "renewal" => self.run_renewal = true,
                        other => {
                            return Err(format!(
                                "{flag}: unknown group `{other}` (expected uncontended, contended, renewal)"
                            ));
                        }
                    }
                }
            }
            other => return Err(format!("unknown flag `{other}`")),
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Helpers: connections, percentiles, INFO, memory, JSON
// ---------------------------------------------------------------------------

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("harness URL parses")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the benchmark's redis-server")
}

async fn ours_client(url: &str, pool_size: u32) -> LockClient {
    LockClient::builder()
        .url(url)
        .pool_size(pool_size)
        .build()
        .await
        .expect("our lock client connects")
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The `p` quantile (0..=1) of sorted samples; 0 when there are none.
fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn ms(us: u32) -> f64 {
    f64::from(us) / 1000.0
}

async fn info(conn: &mut MultiplexedConnection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .expect("INFO")
}

/// `calls` per command from `INFO commandstats`.
async fn commandstats(conn: &mut MultiplexedConnection) -> BTreeMap<String, u64> {
    info(conn, "commandstats")
        .await
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// This process's resident memory in MiB (Linux; `None` elsewhere).
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// A JSON value for the one-line records (flat, plus pre-rendered objects).
enum J {
    S(String),
    I(u64),
    F(f64),
    B(bool),
    Raw(String),
    Null,
}

impl J {
    fn opt_f(v: Option<f64>) -> J {
        v.map_or(J::Null, J::F)
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json(fields: &[(&str, J)]) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json_str(key));
        out.push(':');
        match value {
            J::S(s) => out.push_str(&json_str(s)),
            J::I(n) => {
                let _ = write!(out, "{n}");
            }
            J::F(x) if x.is_finite() => {
                let _ = write!(out, "{}", (x * 1000.0).round() / 1000.0);
            }
            J::F(_) | J::Null => out.push_str("null"),
            J::B(b) => {
                let _ = write!(out, "{b}");
            }
            J::Raw(raw) => out.push_str(raw),
        }
    }
    out.push('}');
    out
}

// ---------------------------------------------------------------------------
// Uncontended: acquire+release pairs on distinct keys
// ---------------------------------------------------------------------------

struct Measured {
    name: &'static str,
    concurrency: usize,
    pairs: usize,
    elapsed: Duration,
    latencies_us: Vec<u32>,
}

impl Measured {
    fn empty(name: &'static str, concurrency: usize) -> Self {
        Measured {
            name,
            concurrency,
            pairs: 0,
            elapsed: Duration::ZERO,
            latencies_us: Vec::new(),
        }
    }

    fn absorb(&mut self, slice: Measured) {
        self.pairs += slice.pairs;
        self.elapsed += slice.elapsed;
        self.latencies_us.extend(slice.latencies_us);
    }

    fn per_sec(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64()
    }
}

/// Runs `op(task, i)` in `concurrency` tasks for `duration`, timing each
/// call; `i` counts from `first` in each task. With `warm_up`, a few untimed
/// calls come first.
async fn run<F, Fut>(
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

async fn raw_pair(mut conn: MultiplexedConnection, script: Arc<redis::Script>, key: String) {
    // A UUID v4, as our client makes one per acquire.
    let token = uuid::Uuid::new_v4().to_string();
    let ok: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(UNCONTENDED_TTL.as_millis() as u64)
        .query_async(&mut conn)
        .await
        .expect("raw SET");
    assert!(ok.is_some(), "distinct keys are never busy");
    let released: i64 = script
        .key(&key)
        .arg(&token)
        .invoke_async(&mut conn)
        .await
        .expect("raw release");
    assert_eq!(released, 1);
}

/// The uncontended implementations, and what they run on.
struct Uncontended {
    conn: MultiplexedConnection,
    script: Arc<redis::Script>,
    client: LockClient,
    manager: rslock::LockManager,
}

const UNCONTENDED_IMPLS: [&str; 3] = ["raw", "ours", "rslock"];

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
                    move |task, i| raw_pair(c.clone(), s.clone(), format!("raw:{task}:{i}")),
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
                        let manager = manager.clone();
                        async move {
                            let key = format!("rslock:{task}:{i}");
                            let guard = manager
                                .acquire(key.as_str(), UNCONTENDED_TTL)
                                .await
                                .expect("rslock acquire");
                            guard.release().await;
                        }
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
async fn uncontended(url: &str, cfg: &Config) -> Vec<Measured> {
    let bench = Uncontended {
        conn: connect(url).await,
        script: Arc::new(redis::Script::new(RELEASE)),
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

fn ratio_to_raw(results: &[Measured], r: &Measured) -> f64 {
    let raw = results
        .iter()
        .find(|b| b.name == "raw" && b.concurrency == r.concurrency)
        .map_or(f64::NAN, Measured::per_sec);
    r.per_sec() / raw
}

fn print_uncontended(results: &[Measured], cfg: &Config) {
    println!(
        "\nuncontended: acquire+release pairs on distinct keys, {:.1} s per cell (in interleaved slices)",
        cfg.uncontended_secs.as_secs_f64()
    );
    println!(
        "{:<8} {:>11} {:>10} {:>8} {:>8} {:>7}",
        "impl", "concurrency", "pairs/s", "p50 us", "p99 us", "vs raw"
    );
    for r in results {
        println!(
            "{:<8} {:>11} {:>10.0} {:>8} {:>8} {:>7.2}",
            r.name,
            r.concurrency,
            r.per_sec(),
            percentile(&r.latencies_us, 0.50),
            percentile(&r.latencies_us, 0.99),
            ratio_to_raw(results, r)
        );
    }
}

fn json_uncontended(results: &[Measured]) {
    for r in results {
        println!(
            "{}",
            json(&[
                ("scenario", J::S("uncontended".into())),
                ("impl", J::S(r.name.into())),
                ("concurrency", J::I(r.concurrency as u64)),
                ("pairs", J::I(r.pairs as u64)),
                ("seconds", J::F(r.elapsed.as_secs_f64())),
                ("pairs_per_sec", J::F(r.per_sec().round())),
                ("p50_us", J::I(percentile(&r.latencies_us, 0.50).into())),
                ("p99_us", J::I(percentile(&r.latencies_us, 0.99).into())),
                ("ratio_to_raw", J::F(ratio_to_raw(results, r))),
            ])
        );
    }
}

// ---------------------------------------------------------------------------
// Contended: 8 workers, one key
// ---------------------------------------------------------------------------

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
struct Critical {
    holders: AtomicUsize,
    violations: AtomicU64,
    last_holder: AtomicUsize,
    /// Acquisitions at or after this are not counted (the run is over).
    deadline: Instant,
}

/// One pass through the critical section.
#[derive(Debug)]
struct Entry {
    wait: Duration,
    held: Duration,
    counted: bool,
    previous: Option<usize>,
}

impl Critical {
    /// Call right after acquiring: holds the lock for [`CONTENDED_HOLD`].
    async fn section(&self, worker: usize, wanted: Instant) -> Entry {
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

#[derive(Debug)]
struct Contended {
    name: &'static str,
    seconds: f64,
    per_worker: Vec<u64>,
    waits_us: Vec<u32>,
    handoffs: u64,
    successions: u64,
    violations: u64,
    mean_hold_us: f64,
    errors: u64,
    first_error: Option<String>,
}

impl Contended {
    fn acquisitions(&self) -> u64 {
        self.per_worker.iter().sum()
    }

    fn per_sec(&self) -> f64 {
        self.acquisitions() as f64 / self.seconds
    }

    /// Share of acquisitions (after the first) that went to another worker.
    fn handoff_share(&self) -> f64 {
        if self.successions == 0 {
            return f64::NAN;
        }
        self.handoffs as f64 / self.successions as f64
    }
}

/// Runs one worker per element of `states` for the contended duration; each
/// loops `op(state, critical, worker)`, which must acquire, call
/// [`Critical::section`], release, and return the entry.
async fn contended<W, F, Fut>(name: &'static str, cfg: &Config, states: Vec<W>, op: F) -> Contended
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
            let mut acquisitions = 0u64;
            let mut waits = Vec::with_capacity(4096);
            let (mut handoffs, mut successions, mut errors) = (0u64, 0u64, 0u64);
            let mut held = Duration::ZERO;
            let mut first_error = None;
            while !stop.load(Ordering::Relaxed) {
                let call = op(state.clone(), critical.clone(), worker);
                match tokio::time::timeout(CONTENDED_OP_LIMIT, call).await {
                    Ok(Ok(entry)) if entry.counted => {
                        acquisitions += 1;
                        waits.push(micros(entry.wait));
                        held += entry.held;
                        if let Some(previous) = entry.previous {
                            successions += 1;
                            handoffs += u64::from(previous != worker);
                        }
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                    Err(_) => {
                        errors += 1;
                        first_error.get_or_insert(format!("no lock within {CONTENDED_OP_LIMIT:?}"));
                    }
                }
            }
            (
                acquisitions,
                waits,
                handoffs,
                successions,
                held,
                errors,
                first_error,
            )
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
        let (acq, waits, handoffs, successions, h, errors, first_error) =
            task.await.expect("contended worker");
        out.per_worker.push(acq);
        out.waits_us.extend(waits);
        out.handoffs += handoffs;
        out.successions += successions;
        out.errors += errors;
        held += h;
        if out.first_error.is_none() {
            out.first_error = first_error;
        }
    }
    out.waits_us.sort_unstable();
    out.violations = critical.violations.load(Ordering::SeqCst);
    out.mean_hold_us = held.as_secs_f64() * 1e6 / out.acquisitions().max(1) as f64;
    out
}

/// Our client, the way the contended scenario asks for the lock in its
/// default mode.
fn ours_request(client: &LockClient, key: &str) -> LockRequest {
    client.lock(key).ttl(CONTENDED_TTL).wait(CONTENDED_WAIT)
}

/// The contended scenario for our client, one `LockClient` per worker;
/// `request` builds each worker's request (this is where a mode is chosen).
async fn contended_ours<R>(url: &str, cfg: &Config, name: &'static str, request: R) -> Contended
where
    R: Fn(&LockClient, &str) -> LockRequest + Send + Sync + 'static,
{
    let mut clients = Vec::new();
    for _ in 0..CONTENDED_WORKERS {
        clients.push(ours_client(url, cfg.pool_size).await);
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

async fn contended_rslock(url: &str, cfg: &Config) -> Contended {
    let managers: Vec<rslock::LockManager> = (0..CONTENDED_WORKERS)
        .map(|_| {
            let mut manager = rslock::LockManager::new(vec![url.to_owned()]);
            manager.set_retry(3, RSLOCK_RETRY_DELAY);
            manager
        })
        .collect();
    let key: Arc<str> = "contended:rslock".into();
    contended("rslock", cfg, managers, move |manager, critical, worker| {
        let wanted = Instant::now();
        let key = key.clone();
        async move {
            // `acquire` loops over `lock` (3 tries, random delays) until it wins.
            let guard = manager
                .acquire(&*key, CONTENDED_TTL)
                .await
                .map_err(|e| e.to_string())?;
            let entry = critical.section(worker, wanted).await;
            guard.release().await;
            Ok(entry)
        }
    })
    .await
}

/// The naive poller: `SET NX PX` every [`RAW_POLL`] until it wins.
async fn contended_raw(url: &str, cfg: &Config) -> Contended {
    let mut conns = Vec::new();
    for _ in 0..CONTENDED_WORKERS {
        conns.push(connect(url).await);
    }
    let script = Arc::new(redis::Script::new(RELEASE));
    let key: Arc<str> = "contended:raw".into();
    contended("raw", cfg, conns, move |mut conn, critical, worker| {
        let wanted = Instant::now();
        let (key, script) = (key.clone(), script.clone());
        async move {
            let token = uuid::Uuid::new_v4().to_string();
            loop {
                let won: Option<String> = redis::cmd("SET")
                    .arg(&*key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(CONTENDED_TTL.as_millis() as u64)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| e.to_string())?;
                if won.is_some() {
                    break;
                }
                tokio::time::sleep(RAW_POLL).await;
            }
            let entry = critical.section(worker, wanted).await;
            let released: i64 = script
                .key(&*key)
                .arg(&token)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            if released != 1 {
                return Err("raw release found another owner's token".to_owned());
            }
            Ok(entry)
        }
    })
    .await
}

fn print_contended(results: &[Contended]) {
    let Some(first) = results.first() else { return };
    println!(
        "\ncontended: {CONTENDED_WORKERS} workers on one key, acquire (waiting) -> hold {CONTENDED_HOLD:?} -> release, {:.1} s each",
        first.seconds
    );
    println!(
        "{:<10} {:>7} {:>8} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>6}",
        "impl",
        "acq/s",
        "handoff",
        "wait p50",
        "wait p99",
        "wait max",
        "violations",
        "per-worker",
        "hold",
        "errors"
    );
    println!(
        "{:<10} {:>7} {:>8} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>6}",
        "", "", "%", "ms", "ms", "ms", "", "min-max", "mean ms", ""
    );
    for r in results {
        let min = r.per_worker.iter().min().copied().unwrap_or(0);
        let max = r.per_worker.iter().max().copied().unwrap_or(0);
        println!(
            "{:<10} {:>7.0} {:>8.1} {:>9.2} {:>9.2} {:>9.2} {:>10} {:>10} {:>8.2} {:>6}",
            r.name,
            r.per_sec(),
            r.handoff_share() * 100.0,
            ms(percentile(&r.waits_us, 0.50)),
            ms(percentile(&r.waits_us, 0.99)),
            ms(r.waits_us.last().copied().unwrap_or(0)),
            r.violations,
            format!("{min}-{max}"),
            r.mean_hold_us / 1000.0,
            r.errors
        );
    }
    for r in results {
        if let Some(e) = &r.first_error {
            println!("  {}: first error: {e}", r.name);
        }
    }
}

fn json_contended(results: &[Contended]) {
    for r in results {
        let per_worker = format!(
            "[{}]",
            r.per_worker
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        println!(
            "{}",
            json(&[
                ("scenario", J::S("contended".into())),
                ("impl", J::S(r.name.into())),
                ("workers", J::I(CONTENDED_WORKERS as u64)),
                ("hold_ms", J::F(CONTENDED_HOLD.as_secs_f64() * 1000.0)),
                ("seconds", J::F(r.seconds)),
                ("acquisitions", J::I(r.acquisitions())),
                ("acquisitions_per_sec", J::F(r.per_sec())),
                ("handoff_share", J::F(r.handoff_share())),
                ("wait_p50_us", J::I(percentile(&r.waits_us, 0.50).into())),
                ("wait_p99_us", J::I(percentile(&r.waits_us, 0.99).into())),
                (
                    "wait_max_us",
                    J::I(r.waits_us.last().copied().unwrap_or(0).into())
                ),
                ("violations", J::I(r.violations)),
                ("per_worker", J::Raw(per_worker)),
                ("mean_hold_us", J::F(r.mean_hold_us.round())),
                ("errors", J::I(r.errors)),
                ("first_error", r.first_error.clone().map_or(J::Null, J::S)),
            ])
        );
    }
}

// ---------------------------------------------------------------------------
// Renewal: many held locks, renewed by the watchdog
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct Renewal {
    locks: usize,
    acquire_secs: f64,
    window_secs: f64,
    /// Calls per command during the hold window (`info` left out), including
    /// the commands that scripts run inside Redis.
    calls: BTreeMap<String, u64>,
    /// Renewal round trips during the window, from the client's counter.
    round_trips: u64,
    /// What the client says it watches, at the end of the window.
    watched: usize,
    held_at_end: usize,
    release_errors: usize,
    rss_before_mib: Option<f64>,
    rss_holding_mib: Option<f64>,
}

impl Renewal {
    fn per_sec(&self, command: &str) -> f64 {
        self.calls.get(command).copied().unwrap_or(0) as f64 / self.window_secs
    }

    /// All calls, including those run inside scripts, per second.
    fn all_calls_per_sec(&self) -> f64 {
        self.calls.values().sum::<u64>() as f64 / self.window_secs
    }

    /// Commands sent by clients per second. `INFO commandstats` (and
    /// `total_commands_processed`) also count what a script runs inside
    /// Redis, so when scripts ran, only script entry points (`EVAL*`,
    /// `EVALSHA*`, `FCALL*`, `SCRIPT *`) are counted as sent.
    fn sent_per_sec(&self) -> f64 {
        let is_entry = |name: &str| {
            name.starts_with("eval") || name.starts_with("fcall") || name.starts_with("script|")
        };
        let entries: u64 = self
            .calls
            .iter()
            .filter(|(name, _)| is_entry(name))
            .map(|(_, n)| n)
            .sum();
        if entries == 0 {
            return self.all_calls_per_sec();
        }
        entries as f64 / self.window_secs
    }

    /// Renewal periods (ttl/3) in the window.
    fn periods(&self) -> f64 {
        self.window_secs / (RENEWAL_TTL / 3).as_secs_f64()
    }

    /// Commands sent per renewal period, estimated from the rate.
    fn per_period(&self) -> f64 {
        self.sent_per_sec() * (RENEWAL_TTL / 3).as_secs_f64()
    }

    fn round_trips_per_period(&self) -> f64 {
        self.round_trips as f64 / self.periods()
    }
}

async fn renewal(url: &str, cfg: &Config, admin: &mut MultiplexedConnection) -> Renewal {
    let locks = cfg.renewal_locks;
    eprintln!(
        "  renewal: {locks} locks, ttl {RENEWAL_TTL:?}, held {:.1} s ...",
        cfg.renewal_secs.as_secs_f64()
    );
    let client = ours_client(url, cfg.pool_size).await;
    let rss_before_mib = rss_mib();

    let started = Instant::now();
    let mut tasks = Vec::new();
    for part in 0..RENEWAL_PARALLELISM {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut guards = Vec::new();
            for i in (part..locks).step_by(RENEWAL_PARALLELISM) {
                let guard = client
                    .lock(format!("renewal:{i}"))
                    .ttl(RENEWAL_TTL)
                    .acquire()
                    .await
                    .expect("renewal locks are on distinct keys");
                guards.push(guard);
            }
            guards
        }));
    }
    let mut parts = Vec::new();
    for task in tasks {
        parts.push(task.await.expect("acquire task"));
    }
    let acquire_secs = started.elapsed().as_secs_f64();

    let before = commandstats(admin).await;
    let trips_before = redlock_runtime::__private::renewal_round_trips(&client);
    let window = Instant::now();
    tokio::time::sleep(cfg.renewal_secs).await;
    let trips_after = redlock_runtime::__private::renewal_round_trips(&client);
    let after = commandstats(admin).await;
    let window_secs = window.elapsed().as_secs_f64();
    let watched = client.held_locks();
    let rss_holding_mib = rss_mib();
    let held_at_end = parts.iter().flatten().filter(|g| g.is_held()).count();

    let mut tasks = Vec::new();
    for guards in parts {
        tasks.push(tokio::spawn(async move {
            let mut errors = 0;
            for guard in guards {
                errors += usize::from(guard.release().await.is_err());
            }
            errors
        }));
    }
    let mut release_errors = 0;
    for task in tasks {
        release_errors += task.await.expect("release task");
    }

    let calls = after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, &n)| (name.clone(), n - before.get(name).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect();
    Renewal {
        locks,
        acquire_secs,
        window_secs,
        calls,
        round_trips: trips_after - trips_before,
        watched,
        held_at_end,
        release_errors,
        rss_before_mib,
        rss_holding_mib,
    }
}

fn mib(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |m| format!("{m:.1} MiB"))
}

fn print_renewal(r: &Renewal) {
    println!(
        "\nrenewal: {} locks, ttl {RENEWAL_TTL:?} (renewed every ttl/3), held {:.1} s by our client",
        r.locks, r.window_secs
    );
    println!("  acquired all in                  {:.2} s", r.acquire_secs);
    println!(
        "  Redis commands/s while holding   {:.0} sent (evalsha {:.0}, eval {:.0}); {:.0} incl. those run inside scripts",
        r.sent_per_sec(),
        r.per_sec("evalsha"),
        r.per_sec("eval"),
        r.all_calls_per_sec()
    );
    println!(
        "  commands sent per period         {:.0} ({:.2} per lock)",
        r.per_period(),
        r.per_period() / r.locks as f64
    );
    println!(
        "  renewal round trips              {} in {:.1} periods: {:.2} per period (client counter)",
        r.round_trips,
        r.periods(),
        r.round_trips_per_period()
    );
    let calls: Vec<String> = r.calls.iter().map(|(c, n)| format!("{c} {n}")).collect();
    println!("  calls in the window              {}", calls.join(", "));
    println!(
        "  resident memory                  {} before acquiring, {} while holding",
        mib(r.rss_before_mib),
        mib(r.rss_holding_mib)
    );
    println!(
        "  still held at the end            {} of {} (client watches {}); release errors {}",
        r.held_at_end, r.locks, r.watched, r.release_errors
    );
}

fn json_renewal(r: &Renewal) {
    let calls = format!(
        "{{{}}}",
        r.calls
            .iter()
            .map(|(c, n)| format!("{}:{n}", json_str(c)))
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "{}",
        json(&[
            ("scenario", J::S("renewal".into())),
            ("impl", J::S("ours".into())),
            ("locks", J::I(r.locks as u64)),
            ("ttl_ms", J::I(RENEWAL_TTL.as_millis() as u64)),
            ("acquire_secs", J::F(r.acquire_secs)),
            ("window_secs", J::F(r.window_secs)),
            ("commands_per_sec", J::F(r.sent_per_sec().round())),
            ("all_calls_per_sec", J::F(r.all_calls_per_sec().round())),
            ("evalsha_per_sec", J::F(r.per_sec("evalsha").round())),
            ("eval_per_sec", J::F(r.per_sec("eval").round())),
            ("commands_per_period", J::F(r.per_period().round())),
            (
                "commands_per_lock_per_period",
                J::F(r.per_period() / r.locks as f64)
            ),
            ("calls", J::Raw(calls)),
            ("renewal_round_trips", J::I(r.round_trips)),
            ("periods", J::F(r.periods())),
            ("round_trips_per_period", J::F(r.round_trips_per_period())),
            ("watched_at_end", J::I(r.watched as u64)),
            ("rss_before_mib", J::opt_f(r.rss_before_mib)),
            ("rss_holding_mib", J::opt_f(r.rss_holding_mib)),
            ("held_at_end", J::I(r.held_at_end as u64)),
            ("release_errors", J::I(r.release_errors as u64)),
        ])
    );
}

// ---------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------

struct Target {
    what: String,
    measured: String,
    /// `None`: not measured in this run.
    pass: Option<bool>,
}

fn targets(
    uncontended: &[Measured],
    contended: &[Contended],
    renewal: Option<&Renewal>,
) -> Vec<Target> {
    let mut out = Vec::new();
    for c in CONCURRENCIES {
        let find = |name| {
            uncontended
                .iter()
                .find(|m| m.name == name && m.concurrency == c)
        };
        let ours = find("ours");
        let ratio = ours.map(|m| ratio_to_raw(uncontended, m));
        out.push(Target {
            what: format!("uncontended ours/raw >= 0.85 at concurrency {c}"),
            measured: ratio.map_or_else(|| "not run".into(), |r| format!("{r:.2}")),
            pass: ratio.map(|r| r >= 0.85),
        });
        let vs = ours
            .zip(find("rslock"))
            .map(|(o, r)| o.per_sec() / r.per_sec());
        out.push(Target {
            what: format!("uncontended ours ahead of rslock at concurrency {c}"),
            measured: vs.map_or_else(|| "not run".into(), |v| format!("ours/rslock {v:.2}")),
            pass: vs.map(|v| v > 1.0),
        });
    }

    // The targets are for fair mode; until it runs, show the default mode.
    let fair = contended.iter().find(|r| r.name == "ours-fair");
    let (row, mode) = match fair {
        Some(r) => (Some(r), "fair mode"),
        None => (
            contended.iter().find(|r| r.name == "ours"),
            "DEFAULT mode, fair mode not run",
        ),
    };
    let mut check = |what: &str, value: Option<(f64, String)>, ok: fn(f64) -> bool| {
        out.push(Target {
            what: format!("contended {what} ({mode})"),
            measured: value
                .as_ref()
                .map_or_else(|| "not run".into(), |(_, s)| s.clone()),
            pass: value.map(|(v, _)| ok(v)),
        });
    };
    check(
        ">= 700 acquisitions/s",
        row.map(|r| (r.per_sec(), format!("{:.0}/s", r.per_sec()))),
        |v| v >= 700.0,
    );
    check(
        ">= 90% handoffs to another worker",
        row.map(|r| {
            let s = r.handoff_share() * 100.0;
            (s, format!("{s:.1}%"))
        }),
        |v| v >= 90.0,
    );
    check(
        "acquire wait p99 <= 20 ms",
        row.map(|r| {
            let v = ms(percentile(&r.waits_us, 0.99));
            (v, format!("{v:.2} ms"))
        }),
        |v| v <= 20.0,
    );
    check(
        "acquire wait max <= 100 ms",
        row.map(|r| {
            let v = ms(r.waits_us.last().copied().unwrap_or(0));
            (v, format!("{v:.2} ms"))
        }),
        |v| v <= 100.0,
    );
    check(
        "zero mutual-exclusion violations",
        row.map(|r| (r.violations as f64, r.violations.to_string())),
        |v| v == 0.0,
    );

    out.push(Target {
        what: "renewal: all locks in <= 2 round trips per period".into(),
        measured: renewal.map_or_else(
            || "not run".into(),
            |r| {
                format!(
                    "{:.2} round trips/period for {} locks ({:.0} commands/period)",
                    r.round_trips_per_period(),
                    r.locks,
                    r.per_period()
                )
            },
        ),
        pass: renewal.map(|r| r.round_trips_per_period() <= 2.0),
    });
    out.push(Target {
        what: "renewal: resident memory < 50 MiB while holding".into(),
        measured: renewal
            .and_then(|r| r.rss_holding_mib)
            .map_or_else(|| "not measured".into(), |m| format!("{m:.1} MiB")),
        pass: renewal.and_then(|r| r.rss_holding_mib).map(|m| m < 50.0),
    });
    out
}

fn status(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "PASS",
        Some(false) => "MISS",
        None => "----",
    }
}

// ---------------------------------------------------------------------------

#[tokio::main]
async fn main() {
    let cfg = match Config::from_env_and_args() {
        Ok(cfg) => cfg,
        Err(message) => {
            eprintln!("lockbench: {message}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let server = RedisServer::start().await;
    let url = server.url();
    let mut admin = connect(&url).await;
    let redis_version = info(&mut admin, "server")
        .await
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_owned();
    eprintln!(
        "lockbench: redis-server {redis_version} on {url}; our pool size {}",
        cfg.pool_size
    );

    // Renewal runs first so its memory reading is not inflated by what the
    // other scenarios allocated; it is printed last.
    let renewal = match cfg.run_renewal {
        true => Some(renewal(&url, &cfg, &mut admin).await),
        false => None,
    };

    let uncontended = match cfg.run_uncontended {
        true => uncontended(&url, &cfg).await,
        false => Vec::new(),
    };

    let mut contended_runs = Vec::new();
    if cfg.run_contended {
        contended_runs.push(contended_ours(&url, &cfg, "ours", ours_request).await);
        // The targets section judges the fair row.
        contended_runs
            .push(contended_ours(&url, &cfg, "ours-fair", |c, k| ours_request(c, k).fair()).await);
        contended_runs.push(contended_rslock(&url, &cfg).await);
        contended_runs.push(contended_raw(&url, &cfg).await);
    }

    // Tables.
    println!(
        "lockbench: redis-server {redis_version} (own, loopback), {} cores, our pool size {}, rslock {RSLOCK_VERSION}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cfg.pool_size
    );
    if !uncontended.is_empty() {
        print_uncontended(&uncontended, &cfg);
    }
    print_contended(&contended_runs);
    if let Some(r) = &renewal {
        print_renewal(r);
    }

    // JSON lines.
    println!();
    println!(
        "{}",
        json(&[
            ("scenario", J::S("meta".into())),
            ("redis_version", J::S(redis_version.clone())),
            (
                "cores",
                J::I(std::thread::available_parallelism().map_or(0, |n| n.get() as u64))
            ),
            ("pool_size", J::I(cfg.pool_size.into())),
            ("rslock_version", J::S(RSLOCK_VERSION.into())),
            (
                "rslock_retry_delay_ms",
                J::I(RSLOCK_RETRY_DELAY.as_millis() as u64)
            ),
            ("uncontended_secs", J::F(cfg.uncontended_secs.as_secs_f64())),
            ("contended_secs", J::F(cfg.contended_secs.as_secs_f64())),
            ("renewal_secs", J::F(cfg.renewal_secs.as_secs_f64())),
            ("renewal_locks", J::I(cfg.renewal_locks as u64)),
        ])
    );
    json_uncontended(&uncontended);
    json_contended(&contended_runs);
    if let Some(r) = &renewal {
        json_renewal(r);
    }

    // Targets.
    let targets = targets(&uncontended, &contended_runs, renewal.as_ref());
    println!("\ntargets");
    for t in &targets {
        println!("  {}  {:<88} {}", status(t.pass), t.what, t.measured);
    }
    for t in &targets {
        println!(
            "{}",
            json(&[
                ("scenario", J::S("target".into())),
                ("target", J::S(t.what.clone())),
                ("measured", J::S(t.measured.clone())),
                ("pass", t.pass.map_or(J::Null, J::B)),
            ])
        );
    }
    let total = started.elapsed().as_secs_f64();
    println!(
        "{}",
        json(&[("scenario", J::S("run".into())), ("seconds", J::F(total))])
    );
    eprintln!("lockbench: done in {total:.1} s");
    drop(server);
}
