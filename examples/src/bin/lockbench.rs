//! Acquire+release throughput and latency against the raw Redis limit.
//!
//! ```text
//! cargo run --release -p redlock-examples --bin lockbench [-- SECONDS_PER_SCENARIO]
//! ```
//!
//! Starts its own `redis-server` on a loopback port (needs `redis-server` on
//! PATH), then runs, one after another, for a few seconds each:
//!
//! - **raw**: the same two commands a lock needs (`SET key token NX PX`, then
//!   `EVALSHA` of the compare-and-delete script) sent without this library
//!   over one redis-rs `MultiplexedConnection` shared by all tasks;
//! - **ours**: `client.lock(key).acquire()` then `guard.release()`;
//!
//! each at concurrency 1 and 32 on distinct keys (no contention). Prints a
//! table and one JSON line per scenario, with ours/raw: the machine's noise
//! affects both alike, so the ratio is the number to compare across runs.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redlock_runtime::LockClient;
use redlock_tests::RedisServer;

const RELEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

struct Measured {
    name: &'static str,
    concurrency: usize,
    pairs: usize,
    elapsed: Duration,
    latencies_us: Vec<u32>,
}

impl Measured {
    fn per_sec(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> u32 {
        if self.latencies_us.is_empty() {
            return 0;
        }
        let i = ((self.latencies_us.len() - 1) as f64 * p).round() as usize;
        self.latencies_us[i]
    }
}

/// Runs `op(task, i)` in `concurrency` tasks for `duration`, timing each call.
async fn run<F, Fut>(name: &'static str, concurrency: usize, duration: Duration, op: F) -> Measured
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..concurrency {
        let (op, stop) = (op.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(100_000);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                op(task, i).await;
                lat.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
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
    let elapsed = started.elapsed();
    latencies_us.sort_unstable();
    Measured {
        name,
        concurrency,
        pairs: latencies_us.len(),
        elapsed,
        latencies_us,
    }
}

async fn raw_pair(mut conn: MultiplexedConnection, script: Arc<redis::Script>, key: String) {
    // A UUID v4, as the library makes one per acquire.
    let token = uuid::Uuid::new_v4().to_string();
    let ok: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
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

#[tokio::main]
async fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let duration = Duration::from_secs(secs);
    let server = RedisServer::start().await;
    let url = server.url();
    let conn = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection");
    let script = Arc::new(redis::Script::new(RELEASE));
    let pool_size: u32 = std::env::var("LOCKBENCH_POOL_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let client = LockClient::builder()
        .url(url.as_str())
        .pool_size(pool_size)
        .build()
        .await
        .expect("lock client");

    let mut results = Vec::new();
    for concurrency in [1, 32] {
        let (c, s) = (conn.clone(), script.clone());
        results.push(
            run("raw", concurrency, duration, move |task, i| {
                raw_pair(c.clone(), s.clone(), format!("raw:{task}:{i}"))
            })
            .await,
        );
        let client = client.clone();
        results.push(
            run("ours", concurrency, duration, move |task, i| {
                let client = client.clone();
                async move {
                    let guard = client
                        .lock(format!("ours:{task}:{i}"))
                        .acquire()
                        .await
                        .expect("distinct keys are never busy");
                    guard.release().await.expect("release");
                }
            })
            .await,
        );
    }

    println!(
        "{:<6} {:>11} {:>12} {:>9} {:>9} {:>9}",
        "impl", "concurrency", "pairs/s", "p50 us", "p99 us", "ours/raw"
    );
    let ratio = |r: &Measured| {
        let raw = results
            .iter()
            .find(|b| b.name == "raw" && b.concurrency == r.concurrency)
            .map_or(f64::NAN, Measured::per_sec);
        r.per_sec() / raw
    };
    for r in &results {
        println!(
            "{:<6} {:>11} {:>12.0} {:>9} {:>9} {:>9.2}",
            r.name,
            r.concurrency,
            r.per_sec(),
            r.percentile(0.50),
            r.percentile(0.99),
            ratio(r)
        );
    }
    for r in &results {
        println!(
            "{{\"scenario\":\"uncontended\",\"impl\":\"{}\",\"concurrency\":{},\"pairs\":{},\"seconds\":{:.3},\"pairs_per_sec\":{:.0},\"p50_us\":{},\"p99_us\":{},\"ratio_to_raw\":{:.3}}}",
            r.name,
            r.concurrency,
            r.pairs,
            r.elapsed.as_secs_f64(),
            r.per_sec(),
            r.percentile(0.50),
            r.percentile(0.99),
            ratio(r)
        );
    }
}
