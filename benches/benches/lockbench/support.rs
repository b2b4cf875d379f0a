//! Helpers of every scenario: our client, percentiles, `INFO`, memory.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redlock_runtime::LockClient;

/// A plain redis-rs connection to the benchmark's redis-server.
pub(crate) async fn connect(url: &str) -> MultiplexedConnection {
    redlock_tests::raw_connection(url).await
}

/// One of our clients, with `pool_size` connections.
pub(crate) async fn ours_client(url: &str, pool_size: u32) -> LockClient {
    LockClient::builder()
        .url(url)
        .pool_size(pool_size)
        .build()
        .await
        .expect("our lock client connects")
}

/// One of our clients built with `.fenced(true)`: every acquire issues a
/// fencing token in the acquire script.
pub(crate) async fn ours_fenced_client(url: &str, pool_size: u32) -> LockClient {
    LockClient::builder()
        .url(url)
        .pool_size(pool_size)
        .fenced(true)
        .build()
        .await
        .expect("our fenced lock client connects")
}

pub(crate) fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The `p` quantile (0..=1) of sorted samples; 0 when there are none.
pub(crate) fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

pub(crate) fn ms(us: u32) -> f64 {
    f64::from(us) / 1000.0
}

async fn info(conn: &mut MultiplexedConnection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .expect("INFO")
}

/// `redis_version` from `INFO server`; `?` when it is missing.
pub(crate) async fn redis_version(conn: &mut MultiplexedConnection) -> String {
    info(conn, "server")
        .await
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}

/// `used_memory` (bytes) and `used_memory_human` from `INFO memory`; 0 and
/// `?` when missing.
pub(crate) async fn used_memory(conn: &mut MultiplexedConnection) -> (u64, String) {
    let text = info(conn, "memory").await;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    (
        field("used_memory")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        field("used_memory_human").unwrap_or("?").to_owned(),
    )
}

/// `calls` per command from `INFO commandstats`.
pub(crate) async fn commandstats(conn: &mut MultiplexedConnection) -> BTreeMap<String, u64> {
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
pub(crate) fn rss_mib() -> Option<f64> {
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

/// The machine's cores as the standard library sees them; 0 if unknown.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}
