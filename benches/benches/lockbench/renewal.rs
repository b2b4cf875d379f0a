//! Renewal: many held locks, renewed by the watchdog.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::config::Config;
use crate::support::{CpuTimes, commandstats, ours_client, rss_mib};

pub(crate) const RENEWAL_TTL: Duration = Duration::from_secs(3);
/// Tasks that acquire (and release) the renewal locks side by side.
const RENEWAL_PARALLELISM: usize = 64;

#[derive(Debug)]
pub(crate) struct Renewal {
    /// `ours`, or `ours_scripts` (the scripts forced).
    pub(crate) implementation: &'static str,
    pub(crate) locks: usize,
    pub(crate) acquire_secs: f64,
    pub(crate) window_secs: f64,
    /// Calls per command during the hold window (`info` left out), including
    /// the commands that scripts run inside Redis.
    pub(crate) calls: BTreeMap<String, u64>,
    /// Renewal round trips during the window, from the client's counter.
    pub(crate) round_trips: u64,
    /// What the client says it watches, at the end of the window.
    pub(crate) watched: usize,
    pub(crate) held_at_end: usize,
    pub(crate) release_errors: usize,
    pub(crate) rss_before_mib: Option<f64>,
    pub(crate) rss_holding_mib: Option<f64>,
    /// redis-server's CPU time in the window (`INFO cpu`).
    pub(crate) server_cpu: Duration,
}

impl Renewal {
    pub(crate) fn per_sec(&self, command: &str) -> f64 {
        self.calls.get(command).copied().unwrap_or(0) as f64 / self.window_secs
    }

    /// All calls, including those run inside scripts, per second.
    pub(crate) fn all_calls_per_sec(&self) -> f64 {
        self.calls.values().sum::<u64>() as f64 / self.window_secs
    }

    /// Commands sent by clients per second. `INFO commandstats` (and
    /// `total_commands_processed`) also count what a script runs inside
    /// Redis, so when scripts ran, only script entry points (`EVAL*`,
    /// `EVALSHA*`, `FCALL*`, `SCRIPT *`) are counted as sent.
    pub(crate) fn sent_per_sec(&self) -> f64 {
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
    pub(crate) fn periods(&self) -> f64 {
        self.window_secs / (RENEWAL_TTL / 3).as_secs_f64()
    }

    /// Commands sent per renewal period, estimated from the rate.
    pub(crate) fn per_period(&self) -> f64 {
        self.sent_per_sec() * (RENEWAL_TTL / 3).as_secs_f64()
    }

    pub(crate) fn round_trips_per_period(&self) -> f64 {
        self.round_trips as f64 / self.periods()
    }

    /// redis-server's CPU time per renewal period (µs).
    pub(crate) fn server_us_per_period(&self) -> f64 {
        self.server_cpu.as_secs_f64() * 1e6 / self.periods()
    }
}

/// Acquires `cfg.renewal_locks` locks with our client (`ours`, or with
/// `scripts` the scripts forced: `ours_scripts`), holds them for
/// `cfg.renewal_secs` while the watchdog renews them, and counts what Redis
/// saw in that window (`admin` reads `INFO commandstats` and `INFO cpu`).
pub(crate) async fn renewal(
    url: &str,
    cfg: &Config,
    admin: &mut MultiplexedConnection,
    scripts: bool,
) -> Renewal {
    let locks = cfg.renewal_locks;
    let implementation = if scripts { "ours_scripts" } else { "ours" };
    eprintln!(
        "  renewal ({implementation}): {locks} locks, ttl {RENEWAL_TTL:?}, held {:.1} s ...",
        cfg.renewal_secs.as_secs_f64()
    );
    let client = ours_client(url, cfg.pool_size, cfg.conditional && !scripts).await;
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
    let cpu_before = CpuTimes::now(admin).await;
    let trips_before = redlock_runtime::test_util::renewal_round_trips(&client);
    let window = Instant::now();
    tokio::time::sleep(cfg.renewal_secs).await;
    let trips_after = redlock_runtime::test_util::renewal_round_trips(&client);
    let server_cpu = CpuTimes::now(admin).await.since(cpu_before).server;
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
        implementation,
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
        server_cpu,
    }
}
