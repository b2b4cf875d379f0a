//! Cluster: our client on a Redis Cluster of 3 masters against our client
//! on one Redis, in the same run, on the same machine.
//!
//! - uncontended acquire+release pairs/s at concurrency 1 and 32, `single`
//!   (the benchmark's own server) and `cluster`, in interleaved slices as
//!   in [`uncontended`](crate::uncontended), with the same two raw commands
//!   as the uncontended `raw` on each (`raw-single` over one connection,
//!   `raw-cluster` over redis-rs's `ClusterConnection`): ours cluster/single
//!   is the number to judge, and raw-cluster/raw-single is what the same
//!   machine allows any client (every master shares its cores with the
//!   others and the client, so the cluster cannot be faster here);
//! - renewal: locks held on the cluster with the watchdog on, and the
//!   renewal pipelines each master got per period (the client's counter).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_runtime::LockClient;
use redlock_tests::RedisCluster;

use crate::baselines;
use crate::config::Config;
use crate::renewal::RENEWAL_TTL;
use crate::support::{connect, ours_client};
use crate::uncontended::{CONCURRENCIES, Measured, UNCONTENDED_TTL, run};

/// Masters of the benchmark's cluster.
pub(crate) const MASTERS: usize = 3;
/// Uncontended cells are measured in interleaved slices of about this.
const SLICE: Duration = Duration::from_millis(500);
const IMPLS: [&str; 4] = ["single", "cluster", "raw-single", "raw-cluster"];

pub(crate) struct ClusterRun {
    /// `single` and `cluster` cells per concurrency.
    pub(crate) cells: Vec<Measured>,
    pub(crate) renewal_locks: usize,
    pub(crate) renewal_periods: f64,
    /// Renewal pipelines per master during the window.
    pub(crate) pipelines: BTreeMap<String, u64>,
    pub(crate) renewal_held_at_end: usize,
}

impl ClusterRun {
    fn rate(&self, name: &str, concurrency: usize) -> f64 {
        self.cells
            .iter()
            .find(|m| m.name == name && m.concurrency == concurrency)
            .map_or(f64::NAN, Measured::per_sec)
    }

    /// Ours: cluster/single pairs/s at `concurrency` (NaN when not
    /// measured).
    pub(crate) fn ratio(&self, concurrency: usize) -> f64 {
        self.rate("cluster", concurrency) / self.rate("single", concurrency)
    }

    /// The raw commands: raw-cluster/raw-single pairs/s.
    pub(crate) fn raw_ratio(&self, concurrency: usize) -> f64 {
        self.rate("raw-cluster", concurrency) / self.rate("raw-single", concurrency)
    }

    /// `name`'s pairs/s over its counterpart's on the other topology (1 for
    /// the single-server cells).
    pub(crate) fn vs_single(&self, name: &str, concurrency: usize) -> f64 {
        match name {
            "cluster" => self.ratio(concurrency),
            "raw-cluster" => self.raw_ratio(concurrency),
            _ => 1.0,
        }
    }

    /// The most renewal pipelines any master got per period.
    pub(crate) fn max_pipelines_per_period(&self) -> f64 {
        self.pipelines.values().copied().max().unwrap_or(0) as f64 / self.renewal_periods
    }
}

async fn pair(client: &LockClient, key: String) {
    let guard = client
        .lock(key)
        .ttl(UNCONTENDED_TTL)
        .acquire()
        .await
        .expect("distinct keys are never busy");
    guard.release().await.expect("release");
}

pub(crate) async fn cluster(single_url: &str, cfg: &Config) -> ClusterRun {
    eprintln!("  cluster: starting {MASTERS} masters ...");
    let cluster = RedisCluster::start_on(cfg.server, MASTERS, 0, &[]).await;
    let single = ours_client(single_url, cfg.pool_size, cfg.conditional).await;
    let clustered = LockClient::builder()
        .cluster(cluster.urls())
        .pool_size(cfg.pool_size)
        .build()
        .await
        .expect("our cluster client connects");
    let raw_single = connect(single_url).await;
    let raw_cluster = redis::cluster::ClusterClient::new(cluster.urls())
        .expect("cluster URLs")
        .get_async_connection()
        .await
        .expect("redis-rs cluster connection");
    let script = Arc::new(baselines::release_script());

    let rounds = (cfg.uncontended_secs.as_secs_f64() / SLICE.as_secs_f64())
        .round()
        .max(1.0) as u32;
    let slice = cfg.uncontended_secs / rounds;
    let mut cells_out = Vec::new();
    for concurrency in CONCURRENCIES {
        eprintln!("  cluster x{concurrency}: {rounds} rounds of {slice:?}, single and cluster ...");
        let mut cells = IMPLS.map(|name| Measured::empty(name, concurrency));
        for round in 0..rounds as usize {
            for k in 0..cells.len() {
                let which = (k + round) % IMPLS.len();
                let name = IMPLS[which];
                let (first, warm) = ((round as u64) << 40, round == 0);
                let measured = match name {
                    "single" | "cluster" => {
                        let client = if name == "single" {
                            &single
                        } else {
                            &clustered
                        }
                        .clone();
                        run(name, concurrency, slice, first, warm, move |task, i| {
                            let client = client.clone();
                            async move { pair(&client, format!("{name}:{task}:{i}")).await }
                        })
                        .await
                    }
                    "raw-single" => {
                        let (conn, script) = (raw_single.clone(), script.clone());
                        run(name, concurrency, slice, first, warm, move |task, i| {
                            baselines::raw_pair(
                                conn.clone(),
                                script.clone(),
                                format!("{name}:{task}:{i}"),
                            )
                        })
                        .await
                    }
                    _ => {
                        let (conn, script) = (raw_cluster.clone(), script.clone());
                        run(name, concurrency, slice, first, warm, move |task, i| {
                            baselines::raw_pair(
                                conn.clone(),
                                script.clone(),
                                format!("{name}:{task}:{i}"),
                            )
                        })
                        .await
                    }
                };
                cells[which].absorb(measured);
            }
        }
        for mut cell in cells {
            cell.latencies_us.sort_unstable();
            cells_out.push(cell);
        }
    }

    let locks = cfg.renewal_locks;
    eprintln!("  cluster renewal: {locks} locks, ttl {RENEWAL_TTL:?} ...");
    let mut guards = Vec::with_capacity(locks);
    for batch in (0..locks).collect::<Vec<_>>().chunks(256) {
        let tasks: Vec<_> = batch
            .iter()
            .map(|&i| {
                let client = clustered.clone();
                tokio::spawn(async move {
                    client
                        .lock(format!("cluster-renewal:{i}"))
                        .ttl(RENEWAL_TTL)
                        .acquire()
                        .await
                        .expect("distinct keys")
                })
            })
            .collect();
        for task in tasks {
            guards.push(task.await.expect("acquire task"));
        }
    }
    let counts = || -> BTreeMap<String, u64> {
        redlock_runtime::test_util::renewal_pipelines_per_node(&clustered)
            .into_iter()
            .collect()
    };
    let before = counts();
    let window = Instant::now();
    tokio::time::sleep(cfg.renewal_secs).await;
    let after = counts();
    let renewal_periods = window.elapsed().as_secs_f64() / (RENEWAL_TTL / 3).as_secs_f64();
    let renewal_held_at_end = guards.iter().filter(|g| g.is_held()).count();
    for guard in guards {
        let _ = guard.release().await;
    }
    let pipelines = after
        .iter()
        .map(|(node, n)| (node.clone(), n - before.get(node).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect();
    drop(cluster);
    ClusterRun {
        cells: cells_out,
        renewal_locks: locks,
        renewal_periods,
        pipelines,
        renewal_held_at_end,
    }
}
