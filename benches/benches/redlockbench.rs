//! redlockbench: how much a Redlock acquire costs over one Redis, in one run.
//!
//! ```text
//! cargo bench -p redlock-benches --bench redlockbench
//! cargo bench -p redlock-benches --bench redlockbench -- --quick   # 2 rounds of 100
//! ```
//!
//! Starts five `redis-server` processes on free loopback ports through the
//! test harness (never your Redis on 6379; `redis-server` must be on PATH).
//! Then, one acquire at a time (each on a key of its own, released after),
//! it measures the acquire latency of:
//!
//! - `raw`: one `SET key token NX PX` round trip on node 0 (redis-rs, no
//!   library): the floor;
//! - `ours 1`: `LockClient::connect(node 0)`;
//! - `ours 3` and `ours 5`: `LockClient::redlock` over 3 and 5 nodes;
//! - `rslock 1`, `rslock 3`, `rslock 5`: the `rslock` crate's Redlock over
//!   the same nodes (a peer with no fencing tokens).
//!
//! The cells run as interleaved slices (10 rounds of 300 acquires each), so
//! drift in the machine's state hits all alike. It prints p50/p99/max per
//! cell and each one's p50 ratio to `ours 1` (single-node latency, same run).
//! Takes up to about 20 s (3.4 s on an idle 2-core machine).
//!
//! `cargo test --benches` runs it without `cargo bench`'s `--bench`
//! argument: then it takes one round of 20 acquires per cell, as a check
//! that the benchmark still works.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::LockClient;
use redlock_tests::RedisServer;

const TTL: Duration = Duration::from_secs(10);

const USAGE: &str = "\
usage: cargo bench -p redlock-benches --bench redlockbench -- [--quick]

  --quick   2 rounds of 100 acquires per cell (default: 10 rounds of 300)

Needs redis-server on PATH, or REDLOCK_REDIS_SERVER set to one. Without
--bench (which `cargo bench` passes; `cargo test --benches` does not): one
round of 20.";

/// How many acquires each cell measures, and how.
#[derive(Debug, Clone, Copy)]
struct Settings {
    /// Interleaved rounds; each runs every cell once.
    rounds: usize,
    /// Acquires per cell and round.
    per_slice: usize,
    /// Untimed acquires per cell first (connections, script caches).
    warm_up: usize,
}

fn settings() -> Result<Settings, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut settings = match args.iter().any(|a| a == "--bench") {
        true => Settings {
            rounds: 10,
            per_slice: 300,
            warm_up: 50,
        },
        false => {
            eprintln!(
                "redlockbench: no --bench argument (not run by `cargo bench`): a test-sized run"
            );
            Settings {
                rounds: 1,
                per_slice: 20,
                warm_up: 5,
            }
        }
    };
    for arg in &args {
        match arg.as_str() {
            "--bench" => {}
            "--quick" => {
                settings.rounds = 2;
                settings.per_slice = 100;
                settings.warm_up = 20;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    Ok(settings)
}

enum Cell {
    Raw(redis::aio::MultiplexedConnection),
    Ours(LockClient),
    Rslock(rslock::LockManager),
}

impl Cell {
    /// One acquire, timed, then its release (not timed).
    async fn once(&mut self, key: &str) -> Duration {
        match self {
            Cell::Raw(conn) => {
                let started = Instant::now();
                let set: Option<String> = redis::cmd("SET")
                    .arg(key)
                    .arg("token")
                    .arg("NX")
                    .arg("PX")
                    .arg(10_000)
                    .query_async(conn)
                    .await
                    .expect("SET");
                let took = started.elapsed();
                assert!(set.is_some(), "fresh key");
                let _: i64 = conn.del(key).await.expect("DEL");
                took
            }
            Cell::Ours(locks) => {
                let started = Instant::now();
                let guard = locks.lock(key).ttl(TTL).acquire().await.expect("acquire");
                let took = started.elapsed();
                guard.release().await.expect("release");
                took
            }
            Cell::Rslock(manager) => {
                let started = Instant::now();
                let lock = manager
                    .lock(key.as_bytes(), TTL)
                    .await
                    .expect("rslock lock");
                let took = started.elapsed();
                manager.unlock(&lock).await;
                took
            }
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let Settings {
        rounds,
        per_slice,
        warm_up,
    } = settings().unwrap_or_else(|message| {
        eprintln!("redlockbench: {message}\n\n{USAGE}");
        std::process::exit(2);
    });
    let mut nodes = Vec::new();
    for _ in 0..5 {
        nodes.push(RedisServer::start().await);
    }
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let raw = redis::Client::open(urls[0].as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let mut cells: Vec<(&str, Cell)> = vec![
        ("raw", Cell::Raw(raw)),
        (
            "ours 1",
            Cell::Ours(
                LockClient::connect(urls[0].as_str())
                    .await
                    .expect("connect"),
            ),
        ),
        (
            "ours 3",
            Cell::Ours(
                LockClient::redlock(urls[..3].iter().cloned())
                    .await
                    .expect("connect"),
            ),
        ),
        (
            "ours 5",
            Cell::Ours(
                LockClient::redlock(urls.iter().cloned())
                    .await
                    .expect("connect"),
            ),
        ),
        (
            "rslock 1",
            Cell::Rslock(rslock::LockManager::new(urls[..1].to_vec())),
        ),
        (
            "rslock 3",
            Cell::Rslock(rslock::LockManager::new(urls[..3].to_vec())),
        ),
        (
            "rslock 5",
            Cell::Rslock(rslock::LockManager::new(urls.to_vec())),
        ),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); cells.len()];
    // Warm-up: connections and script caches.
    for (name, cell) in &mut cells {
        for i in 0..warm_up {
            cell.once(&format!("warm:{name}:{i}")).await;
        }
    }
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        // Rotate the order each round.
        for k in 0..cells.len() {
            let c = (k + round) % cells.len();
            let (name, cell) = &mut cells[c];
            for i in 0..per_slice {
                let took = cell.once(&format!("bench:{name}:{round}:{i}")).await;
                samples[c].push(took);
            }
        }
    }
    for s in &mut samples {
        s.sort_unstable();
    }
    let single_p50 = percentile(&samples[1], 0.5);
    println!(
        "redlockbench: acquire latency, one at a time, {} acquires per cell, loopback, {} cores",
        rounds * per_slice,
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!(
        "{:<10} {:>9} {:>9} {:>9} {:>16}",
        "cell", "p50 ms", "p99 ms", "max ms", "p50 / ours 1"
    );
    for ((name, _), s) in cells.iter().zip(&samples) {
        let p50 = percentile(s, 0.5);
        println!(
            "{:<10} {:>9.3} {:>9.3} {:>9.3} {:>16.2}",
            name,
            ms(p50),
            ms(percentile(s, 0.99)),
            ms(percentile(s, 1.0)),
            p50.as_secs_f64() / single_p50.as_secs_f64()
        );
    }
    drop(cells);
    drop(nodes);
}
