//! [`SentinelSet`]: a primary, its replicas and three Sentinels, all throwaway
//! processes on loopback ports.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::Instant;

use crate::admin::{POLL_INTERVAL, info_field, query};
use crate::{RedisServer, Server, start_replica};

/// The name the Sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";
/// How many Sentinels a [`SentinelSet`] runs; the quorum is 2.
const SENTINELS: usize = 3;
/// `down-after-milliseconds`: how long the primary may be silent before it is down.
const DOWN_AFTER_MS: u64 = 1000;
/// `failover-timeout`.
const FAILOVER_TIMEOUT_MS: u64 = 5000;
/// Bound on the Sentinels seeing the primary, the replicas and each other. They meet
/// through hello messages sent every 2 s.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound on a failover being seen everywhere.
const FAILOVER_WAIT: Duration = Duration::from_secs(30);

/// A primary [`RedisServer`], its replicas (started with [`start_replica`]), and three
/// Sentinels (`redis-server <config> --sentinel`, see [`RedisServer::start_sentinel`])
/// monitoring it as [`MASTER_NAME`] with quorum 2, `down-after-milliseconds 1000` and
/// `failover-timeout 5000`.
///
/// Data nodes are numbered in start order, 0 being the first primary. The set tracks
/// which one is primary now: [`SentinelSet::failover`] and
/// [`SentinelSet::wait_for_failover`] update it.
///
/// ```no_run
/// # async fn demo() {
/// use redlock_tests::SentinelSet;
///
/// let mut set = SentinelSet::start(1).await;
/// // Connect the client under test through `set.sentinel_urls()` and `set.master_name()`.
/// let old = set.current_primary_addr().await;
/// let new = set.failover().await; // a replica is primary now
/// assert_ne!(old, new);
/// let gone = set.kill_primary().await; // crash it: the Sentinels elect another...
/// # let _ = gone;
/// # }
/// ```
pub struct SentinelSet {
    nodes: Vec<RedisServer>,
    primary: usize,
    sentinels: Vec<RedisServer>,
    /// The Sentinels' configuration files (they rewrite them).
    config_dir: TempDir,
}

impl SentinelSet {
    /// Starts the primary, `replicas` replicas (each acknowledging a write before the
    /// next starts), and three Sentinels, and waits until every Sentinel reports the
    /// primary's address, lists every replica as connected, and knows the two other
    /// Sentinels. That takes a few seconds: Sentinels meet through hello messages sent
    /// every 2 s.
    ///
    /// # Panics
    ///
    /// If `replicas == 0` (a failover needs one), if a process does not start, or the
    /// Sentinels do not see everything within 20 s (the message says what was missing
    /// and quotes the Sentinels' logs).
    pub async fn start(replicas: usize) -> SentinelSet {
        SentinelSet::start_on(Server::Redis, replicas).await
    }

    /// [`SentinelSet::start`] with every process (data nodes and
    /// Sentinels) running `server`'s program.
    ///
    /// # Panics
    ///
    /// As [`SentinelSet::start`].
    pub async fn start_on(server: Server, replicas: usize) -> SentinelSet {
        assert!(
            replicas >= 1,
            "SentinelSet::start: give at least one replica, to fail over to"
        );
        let primary = RedisServer::start_on(server, &[]).await;
        let mut nodes = vec![];
        for _ in 0..replicas {
            let replica = start_replica(&primary).await;
            nodes.push(replica);
        }
        nodes.insert(0, primary);

        let config_dir = tempfile::Builder::new()
            .prefix("redlock-sentinel-")
            .tempdir()
            .expect("could not create a temporary directory for the Sentinels' configuration");
        let mut sentinels = Vec::with_capacity(SENTINELS);
        for i in 0..SENTINELS {
            let path = config_dir.path().join(format!("sentinel-{i}.conf"));
            let config = format!(
                "sentinel monitor {MASTER_NAME} 127.0.0.1 {port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                port = nodes[0].port()
            );
            std::fs::write(&path, config).unwrap_or_else(|e| {
                panic!(
                    "could not write the Sentinel configuration {}: {e}",
                    path.display()
                )
            });
            sentinels.push(RedisServer::start_sentinel_on(server, &path).await);
        }
        let set = SentinelSet {
            nodes,
            primary: 0,
            sentinels,
            config_dir,
        };
        set.wait_for_discovery().await;
        set
    }

    /// The Sentinels' URLs, `redis://127.0.0.1:port`.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The Sentinels' processes, to kill or pause one.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The name the primary is monitored under, [`MASTER_NAME`].
    pub fn master_name(&self) -> &'static str {
        MASTER_NAME
    }

    /// The data node that is primary, as of the last failover this set saw.
    pub fn primary(&self) -> &RedisServer {
        &self.nodes[self.primary]
    }

    /// The other data nodes (replicas, or a killed former primary).
    pub fn replicas(&self) -> Vec<&RedisServer> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.primary)
            .map(|(_, n)| n)
            .collect()
    }

    /// Every data node, in start order (0 was the first primary).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Data node `i`, to kill, pause or restart.
    ///
    /// # Panics
    ///
    /// If there is no node `i`.
    pub fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.nodes[i]
    }

    /// The primary's address according to the first Sentinel that answers
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    ///
    /// # Panics
    ///
    /// If no Sentinel answers.
    pub async fn current_primary_addr(&self) -> SocketAddr {
        let mut errors = Vec::new();
        for sentinel in self.live_sentinels() {
            match master_addr(&sentinel.url()).await {
                Ok(addr) => return addr,
                Err(e) => errors.push(e),
            }
        }
        panic!("no Sentinel answered with the primary's address: {errors:?}");
    }

    /// Forces a failover (`SENTINEL FAILOVER mymaster` on a Sentinel, retried while
    /// it answers that it cannot yet), then [`SentinelSet::wait_for_failover`]. Returns
    /// the new primary's address.
    ///
    /// # Panics
    ///
    /// If no Sentinel accepts the failover or it is not seen everywhere within 30 s.
    pub async fn failover(&mut self) -> SocketAddr {
        let old = self.current_primary_addr().await;
        let deadline = Instant::now() + FAILOVER_WAIT;
        loop {
            let mut cmd = redis::cmd("SENTINEL");
            cmd.arg("FAILOVER").arg(MASTER_NAME);
            let url = self.sentinels[0].url();
            match query::<String>(&url, &cmd).await {
                Ok(_) => break,
                // e.g. NOGOODREPLICA while the replicas' state is being refreshed.
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("SENTINEL FAILOVER refused, retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!(
                    "SENTINEL FAILOVER was refused for {FAILOVER_WAIT:?}; last: {e}\n{}",
                    self.logs()
                ),
            }
        }
        self.wait_for_failover(old).await
    }

    /// Kills the current primary (SIGKILL) and returns its address. The Sentinels
    /// notice after `down-after-milliseconds` (1 s) and elect a replica; follow it with
    /// [`SentinelSet::wait_for_failover`].
    pub async fn kill_primary(&mut self) -> SocketAddr {
        let primary = &mut self.nodes[self.primary];
        let addr = primary.addr();
        primary.kill().await;
        addr
    }

    /// Waits until every running Sentinel reports the same primary address, other than
    /// `old`, that node answers `role:master`, and every other running data node
    /// (except `old`) replicates from it with its link up. Records the new primary and
    /// returns its address.
    ///
    /// # Panics
    ///
    /// If that does not happen within 30 s; the message says what was last wrong and
    /// quotes the logs.
    pub async fn wait_for_failover(&mut self, old: SocketAddr) -> SocketAddr {
        let deadline = Instant::now() + FAILOVER_WAIT;
        loop {
            match self.check_failover(old).await {
                Ok(index) => {
                    self.primary = index;
                    return self.nodes[index].addr();
                }
                Err(problem) if Instant::now() < deadline => {
                    tracing::trace!("waiting for the failover: {problem}");
                    tokio::time::sleep(POLL_INTERVAL).await;
                }
                Err(problem) => panic!(
                    "the failover away from {old} was not complete within {FAILOVER_WAIT:?}: \
                     {problem}\n{}",
                    self.logs()
                ),
            }
        }
    }

    /// The tails of every process's log (Sentinels, then data nodes), for panic messages.
    pub fn logs(&self) -> String {
        let sentinels =
            self.sentinels.iter().enumerate().map(|(i, s)| {
                format!("=== sentinel {i} (port {}) ===\n{}", s.port(), s.log_tail())
            });
        let nodes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("=== node {i} (port {}) ===\n{}", n.port(), n.log_tail()));
        sentinels.chain(nodes).collect()
    }

    async fn check_failover(&self, old: SocketAddr) -> Result<usize, String> {
        let mut agreed: Option<SocketAddr> = None;
        for sentinel in self.live_sentinels() {
            let addr = master_addr(&sentinel.url()).await?;
            if addr == old {
                return Err(format!("sentinel {} still reports {old}", sentinel.port()));
            }
            match agreed {
                Some(a) if a != addr => {
                    return Err(format!("Sentinels disagree: {a} and {addr}"));
                }
                _ => agreed = Some(addr),
            }
        }
        let new = agreed.ok_or("no Sentinel is running")?;
        let index = self
            .nodes
            .iter()
            .position(|n| n.addr() == new)
            .ok_or_else(|| format!("the Sentinels report {new}, which is none of the nodes"))?;
        let role = role_and_master(&self.nodes[index].url()).await?;
        if role.0 != "master" {
            return Err(format!(
                "{new} is reported primary but says role:{}",
                role.0
            ));
        }
        for node in &self.nodes {
            if node.addr() == new || node.addr() == old || !node.is_running() || node.is_paused() {
                continue;
            }
            let (role, master_port, link) = role_and_master(&node.url()).await?;
            if role != "slave" || master_port != Some(new.port()) || link.as_deref() != Some("up") {
                return Err(format!(
                    "node {} is role:{role} master_port:{master_port:?} link:{link:?}, not a \
                     replica of {new} with its link up",
                    node.port()
                ));
            }
        }
        Ok(index)
    }

    async fn wait_for_discovery(&self) {
        let deadline = Instant::now() + DISCOVERY_TIMEOUT;
        loop {
            let problem = match self.check_discovery().await {
                Ok(()) => return,
                Err(problem) => problem,
            };
            if Instant::now() >= deadline {
                panic!(
                    "the Sentinels did not see the primary, its {} replica(s) and each other \
                     within {DISCOVERY_TIMEOUT:?}: {problem}\n{}",
                    self.nodes.len() - 1,
                    self.logs()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    async fn check_discovery(&self) -> Result<(), String> {
        let primary = self.nodes[self.primary].addr();
        for sentinel in &self.sentinels {
            let url = sentinel.url();
            let port = sentinel.port();
            let addr = master_addr(&url).await?;
            if addr != primary {
                return Err(format!("sentinel {port} reports {addr}, not {primary}"));
            }
            let replicas = instances(&url, "REPLICAS").await?;
            let connected = replicas
                .iter()
                .filter(|r| r.get("flags").is_some_and(|f| healthy(f)))
                .filter(|r| r.get("master-link-status").map(String::as_str) == Some("ok"))
                .count();
            if connected != self.nodes.len() - 1 {
                return Err(format!(
                    "sentinel {port} sees {connected} connected replica(s) of {}: {replicas:?}",
                    self.nodes.len() - 1
                ));
            }
            let others = instances(&url, "SENTINELS").await?;
            let known = others
                .iter()
                .filter(|s| s.get("flags").is_some_and(|f| healthy(f)))
                .count();
            if known != SENTINELS - 1 {
                return Err(format!(
                    "sentinel {port} knows {known} other Sentinel(s), not {}",
                    SENTINELS - 1
                ));
            }
        }
        Ok(())
    }

    fn live_sentinels(&self) -> impl Iterator<Item = &RedisServer> {
        self.sentinels
            .iter()
            .filter(|s| s.is_running() && !s.is_paused())
    }
}

/// One Sentinel monitoring nothing, its configuration file in a temporary
/// directory that lives as long as it: a Sentinel to connect to, for tests
/// of the connection itself (a password, TLS), where a [`SentinelSet`]
/// takes seconds to form. It answers `PING`, and `SENTINEL
/// GET-MASTER-ADDR-BY-NAME` with nil.
#[derive(Debug)]
pub struct LoneSentinel {
    /// The Sentinel process.
    pub server: RedisServer,
    _config_dir: TempDir,
}

impl LoneSentinel {
    /// Starts the Sentinel and waits until it answers `PING`.
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start_sentinel`], or when its configuration file
    /// cannot be written.
    pub async fn start() -> LoneSentinel {
        let config_dir = tempfile::Builder::new()
            .prefix("redlock-sentinel-")
            .tempdir()
            .expect("could not create a temporary directory for the Sentinel's configuration");
        let path = config_dir.path().join("sentinel.conf");
        std::fs::write(&path, "").unwrap_or_else(|e| {
            panic!(
                "could not write the Sentinel configuration {}: {e}",
                path.display()
            )
        });
        LoneSentinel {
            server: RedisServer::start_sentinel(&path).await,
            _config_dir: config_dir,
        }
    }
}

impl fmt::Debug for SentinelSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelSet")
            .field("nodes", &self.nodes)
            .field("primary", &self.primary)
            .field("sentinels", &self.sentinels)
            .field("config_dir", &self.config_dir.path())
            .finish()
    }
}

/// Flags of a healthy instance in a Sentinel's tables.
fn healthy(flags: &str) -> bool {
    !flags
        .split(',')
        .any(|f| matches!(f, "s_down" | "o_down" | "disconnected"))
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME mymaster` on one Sentinel.
async fn master_addr(sentinel_url: &str) -> Result<SocketAddr, String> {
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg("GET-MASTER-ADDR-BY-NAME").arg(MASTER_NAME);
    let (host, port): (String, u16) = query(sentinel_url, &cmd).await?;
    format!("{host}:{port}")
        .parse()
        .map_err(|e| format!("sentinel at {sentinel_url} reports {host}:{port}: {e}"))
}

/// `SENTINEL REPLICAS|SENTINELS mymaster`: one field map per instance.
async fn instances(
    sentinel_url: &str,
    which: &str,
) -> Result<Vec<HashMap<String, String>>, String> {
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg(which).arg(MASTER_NAME);
    let flat: Vec<Vec<String>> = query(sentinel_url, &cmd).await?;
    Ok(flat
        .into_iter()
        .map(|fields| {
            fields
                .chunks_exact(2)
                .map(|kv| (kv[0].clone(), kv[1].clone()))
                .collect()
        })
        .collect())
}

/// A data node's `role`, `master_port` and `master_link_status` (`INFO replication`).
async fn role_and_master(url: &str) -> Result<(String, Option<u16>, Option<String>), String> {
    let info: String = query(url, redis::cmd("INFO").arg("replication")).await?;
    Ok((
        info_field(&info, "role").unwrap_or("unknown").to_owned(),
        info_field(&info, "master_port").and_then(|p| p.parse().ok()),
        info_field(&info, "master_link_status").map(str::to_owned),
    ))
}
