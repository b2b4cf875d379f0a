//! Helpers of every scenario: our client, percentiles, `INFO`, memory.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redlock_runtime::LockClient;

use crate::config::Config;

/// A plain redis-rs connection to the benchmark's redis-server.
pub(crate) async fn connect(url: &str) -> MultiplexedConnection {
    redlock_tests::raw_connection(url).await
}

/// One of our clients, with `pool_size` connections.
pub(crate) async fn ours_client(url: &str, pool_size: u32, conditional: bool) -> LockClient {
    LockClient::builder()
        .url(url)
        .pool_size(pool_size)
        .conditional_commands(conditional)
        .build()
        .await
        .expect("our lock client connects")
}

/// One of our clients built with `.fenced(true)`: every acquire issues a
/// fencing token in the acquire script; with `coalesce` (the client's
/// default), concurrent acquires and releases go out in batches.
pub(crate) async fn ours_fenced_client(url: &str, pool_size: u32, coalesce: bool) -> LockClient {
    LockClient::builder()
        .url(url)
        .pool_size(pool_size)
        .fenced(true)
        .coalesce(coalesce)
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

/// The server's version from `INFO server`: `valkey_version` where there
/// is one (Valkey's `redis_version` says 7.2.4 whatever it is), else
/// `redis_version`; `?` when both are missing.
pub(crate) async fn redis_version(conn: &mut MultiplexedConnection) -> String {
    let text = info(conn, "server").await;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    field("valkey_version:")
        .or_else(|| field("redis_version:"))
        .unwrap_or_else(|| "?".to_owned())
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

/// CPU time used so far by this process (the clients) and by the
/// benchmark's redis-server, read before and after each slice of a cell so
/// that each implementation's cell says what a pair costs on both sides.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuTimes {
    /// This process: the sum of its threads' time on a CPU
    /// (`/proc/self/task/*/schedstat`, ns; zero elsewhere than Linux).
    pub(crate) client: Duration,
    /// redis-server: `used_cpu_user` + `used_cpu_sys` from `INFO cpu`.
    pub(crate) server: Duration,
}

impl CpuTimes {
    /// Now, on both sides.
    pub(crate) async fn now(admin: &mut MultiplexedConnection) -> Self {
        let text = info(admin, "cpu").await;
        let secs = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        let server = secs("used_cpu_user") + secs("used_cpu_sys");
        CpuTimes {
            client: client_cpu(),
            server: Duration::from_secs_f64(server.max(0.0)),
        }
    }

    /// What was used from `earlier` to `self`.
    pub(crate) fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            client: self.client.saturating_sub(earlier.client),
            server: self.server.saturating_sub(earlier.server),
        }
    }
}

/// This process's CPU time: the sum over its live threads of the first
/// field of `/proc/self/task/<tid>/schedstat` (ns on a CPU). The tokio
/// workers live as long as the process, so no thread's time is lost
/// between two readings.
fn client_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
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

/// The sizes in bytes of a plain lock's acquire future and of its guard's
/// release future, on one of our clients (what each pair carries, and
/// moves, between its awaits; `docs/design.md`, "Timing").
pub(crate) async fn future_sizes(url: &str, cfg: &Config) -> FutureSizes {
    let client = ours_client(url, cfg.pool_size, cfg.conditional).await;
    let acquire = client.lock("lockbench:future-sizes").acquire();
    let acquire_bytes = std::mem::size_of_val(&acquire);
    let guard = acquire.await.expect("a free key");
    let release = guard.release();
    let release_bytes = std::mem::size_of_val(&release);
    release.await.expect("release");
    FutureSizes {
        acquire_bytes,
        release_bytes,
    }
}

/// See [`future_sizes`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct FutureSizes {
    pub(crate) acquire_bytes: usize,
    pub(crate) release_bytes: usize,
}
