//! [`RedisCluster`]: a Redis Cluster of throwaway `redis-server` processes on loopback
//! ports, joined with `redis-cli --cluster create`, with live slot moves and failovers.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::admin::{POLL_INTERVAL, info_field, query, run_redis_cli};
use crate::{FaultProxy, RedisServer, Server};

/// The number of hash slots in a Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16384;
/// `--cluster-node-timeout`, in milliseconds: small, so failures are noticed quickly.
const NODE_TIMEOUT_MS: u64 = 1000;
/// Bound on `redis-cli --cluster create` (it waits for the nodes to meet).
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on [`RedisCluster::wait_ok`].
const OK_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound on a promoted replica reporting `role:master`.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);
/// When a manual failover not yet done is asked for again: after Redis's own
/// limit for one (`CLUSTER_MF_TIMEOUT`, 5 s) has passed.
const MANUAL_FAILOVER_RETRY: Duration = Duration::from_secs(6);
/// Keys moved per `MIGRATE`.
const MIGRATE_BATCH: usize = 100;
/// `MIGRATE`'s own timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5000;

/// A Redis Cluster of `masters * (1 + replicas_per_master)` [`RedisServer`]s on
/// `127.0.0.1`, each with `--cluster-enabled yes`, its own `nodes.conf` in its own
/// temporary directory, and `--cluster-node-timeout 1000`.
///
/// Nodes are numbered in start order; [`RedisCluster::node`] gives the process, to
/// kill, pause or restart. Roles change (a [`RedisCluster::failover`], or a replica
/// taking over a killed master), so methods that need them ask the cluster
/// ([`RedisCluster::master_indices`], [`RedisCluster::master_of_slot`]) instead of
/// assuming the first nodes are the masters.
///
/// Every wait is bounded and panics with what did not happen and the nodes' logs.
/// Nodes that are not running or are paused are left out of the checks and commands.
///
/// ```no_run
/// # async fn demo() {
/// use redlock_tests::RedisCluster;
///
/// let cluster = RedisCluster::start(3, 0).await;
/// let slot = cluster.slot_of("lock:{order-1}").await;
/// let owner = cluster.master_of_slot(slot).await;
/// let other = cluster.master_indices().await.into_iter().find(|&i| i != owner).expect("3 masters");
/// cluster.migrate_slot(slot, other).await; // keys go along; clients get MOVED
/// # }
/// ```
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    replicas_per_master: usize,
    /// The port each node announces to the cluster (`CLUSTER NODES`, `CLUSTER
    /// SLOTS`): its own, or its proxy's after [`RedisCluster::behind_proxies`].
    announced: std::sync::Mutex<Vec<u16>>,
}

/// A slot left half-way through a move by [`RedisCluster::begin_migration`]: the
/// source is `MIGRATING` and the destination `IMPORTING`, so a key that is no longer on
/// the source gets an `ASK` redirect to the destination. (After
/// [`RedisCluster::begin_migration_from_source`], the destination is not `IMPORTING`
/// until [`SlotMigration::import`].)
///
/// Move keys with [`SlotMigration::move_key`] or [`SlotMigration::move_all_keys`], and
/// end it with [`SlotMigration::finish`]. Dropping it leaves the slot mid-migration.
#[derive(Debug, Clone)]
pub struct SlotMigration {
    slot: u16,
    from: usize,
    to: usize,
    to_id: String,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeLine {
    port: u16,
    myself: bool,
    master: bool,
    /// `fail`, `fail?`, `handshake` or `noaddr`.
    unhealthy: bool,
    slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Starts the nodes, joins them with `redis-cli --cluster create .. --cluster-replicas
    /// N --cluster-yes`, and waits until the cluster is ok (see
    /// [`RedisCluster::wait_ok`]).
    ///
    /// # Panics
    ///
    /// If `masters < 3` (`redis-cli` refuses fewer), if `redis-server` or `redis-cli`
    /// is missing (the message says what to install), or if the cluster does not form
    /// within its bounds (the message quotes `redis-cli` and the nodes' logs).
    pub async fn start(masters: usize, replicas_per_master: usize) -> RedisCluster {
        RedisCluster::start_with_args(masters, replicas_per_master, &[]).await
    }

    /// [`RedisCluster::start`] with `extra` arguments for every node (say
    /// `["--rename-command", "SPUBLISH", ""]` to play a server without
    /// a command).
    ///
    /// # Panics
    ///
    /// As [`RedisCluster::start`].
    pub async fn start_with_args(
        masters: usize,
        replicas_per_master: usize,
        extra: &[&str],
    ) -> RedisCluster {
        RedisCluster::start_on(Server::Redis, masters, replicas_per_master, extra).await
    }

    /// [`RedisCluster::start_with_args`] with every node running
    /// `server`'s program (joined by `redis-cli --cluster create` all the
    /// same: Valkey's nodes speak the same cluster bus).
    ///
    /// # Panics
    ///
    /// As [`RedisCluster::start`].
    pub async fn start_on(
        server: Server,
        masters: usize,
        replicas_per_master: usize,
        extra: &[&str],
    ) -> RedisCluster {
        assert!(
            masters >= 3,
            "RedisCluster::start: a Redis Cluster needs at least 3 masters (got {masters})"
        );
        // Fail on a missing redis-cli before starting any server.
        crate::server::redis_cli_binary().unwrap_or_else(|m| panic!("{m}"));
        let timeout = NODE_TIMEOUT_MS.to_string();
        // A relative name lands in the node's `--dir`, which is its own.
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout,
        ];
        args.extend_from_slice(extra);
        let total = masters * (1 + replicas_per_master);
        let mut nodes = Vec::with_capacity(total);
        for _ in 0..total {
            nodes.push(RedisServer::start_on(server, &args).await);
        }
        let announced = std::sync::Mutex::new(nodes.iter().map(RedisServer::port).collect());
        let cluster = RedisCluster {
            nodes,
            replicas_per_master,
            announced,
        };

        let mut cli_args: Vec<String> = vec!["--cluster".into(), "create".into()];
        cli_args.extend(cluster.nodes.iter().map(|n| n.addr().to_string()));
        cli_args.extend([
            "--cluster-replicas".into(),
            replicas_per_master.to_string(),
            "--cluster-yes".into(),
        ]);
        run_redis_cli(&cli_args, CREATE_TIMEOUT, || cluster.logs()).await;
        cluster.wait_ok().await;
        cluster
    }

    /// Every node's URL, `redis://127.0.0.1:port`, in node order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The URLs of the nodes that are masters now (per [`RedisCluster::master_indices`]).
    pub async fn master_urls(&self) -> Vec<String> {
        self.master_indices()
            .await
            .into_iter()
            .map(|i| self.nodes[i].url())
            .collect()
    }

    /// The indices of the nodes that are masters with slots now, as a live node sees it
    /// (a failed master that kept its slots is still listed).
    ///
    /// # Panics
    ///
    /// If no live node answers.
    pub async fn master_indices(&self) -> Vec<usize> {
        let mut masters: Vec<usize> = self
            .topology()
            .await
            .iter()
            .filter(|line| line.master && !line.slots.is_empty())
            .filter_map(|line| self.index_of_port(line.port))
            .collect();
        masters.sort_unstable();
        masters
    }

    /// The nodes, in start order.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Node `i`.
    ///
    /// # Panics
    ///
    /// If there is no node `i`.
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    /// Node `i`, to kill or restart it. A node restarted with
    /// [`RedisServer::restart_keeping_data`] keeps its `nodes.conf` and rejoins; one
    /// restarted with [`RedisServer::restart`] loses it and comes back as a stranger.
    ///
    /// # Panics
    ///
    /// If there is no node `i`.
    pub fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.nodes[i]
    }

    /// How many replicas each master was started with.
    pub fn replicas_per_master(&self) -> usize {
        self.replicas_per_master
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    ///
    /// # Panics
    ///
    /// If no live node answers.
    pub async fn slot_of(&self, key: &str) -> u16 {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("KEYSLOT").arg(key);
        self.query_any(&cmd).await
    }

    /// The index of the node serving `slot` now.
    ///
    /// # Panics
    ///
    /// If no live node answers, or no node serves the slot.
    pub async fn master_of_slot(&self, slot: u16) -> usize {
        let topology = self.topology().await;
        owner_of(&topology, slot)
            .and_then(|port| self.index_of_port(port))
            .unwrap_or_else(|| {
                panic!("no node of the cluster serves slot {slot}; CLUSTER NODES: {topology:?}")
            })
    }

    /// Moves `slot`, with its keys, to the master `to`, live: the standard resharding
    /// steps (`SETSLOT .. IMPORTING` on the destination, `SETSLOT .. MIGRATING` on the
    /// source, `GETKEYSINSLOT` + `MIGRATE .. KEYS ..` until the slot is empty, then
    /// `SETSLOT .. NODE` on every live master), and waits until every live node agrees.
    /// Afterwards the source answers `MOVED` for the slot's keys. Does nothing if `to`
    /// already serves the slot.
    ///
    /// # Panics
    ///
    /// If `to` is not a master, a step fails, or the nodes do not agree within 20 s.
    pub async fn migrate_slot(&self, slot: u16, to: usize) {
        if self.master_of_slot(slot).await == to {
            return;
        }
        self.begin_migration(slot, to).await.finish(self).await;
    }

    /// The first half of [`RedisCluster::migrate_slot`]: marks `slot` `IMPORTING` on
    /// `to` and `MIGRATING` on its current master, and moves no key. The slot stays
    /// there until [`SlotMigration::finish`]; in between, a command for a key that is
    /// not (or no longer) on the source gets `ASK` to the destination.
    ///
    /// # Panics
    ///
    /// If `to` is not a master or already serves the slot, or a command fails.
    pub async fn begin_migration(&self, slot: u16, to: usize) -> SlotMigration {
        let migration = self.plan_migration(slot, to).await;
        migration.import(self).await;
        migration.mark_migrating(self).await;
        migration
    }

    /// The first step of a migration done in the other order than
    /// [`RedisCluster::begin_migration`]'s: marks `slot` `MIGRATING` on its current
    /// master only. Until [`SlotMigration::import`], a command for a key that is not on
    /// the source bounces: the source answers `ASK` to the destination, and the
    /// destination, not importing the slot, answers `MOVED` back to the source.
    ///
    /// # Panics
    ///
    /// If `to` is not a master or already serves the slot, or a command fails.
    pub async fn begin_migration_from_source(&self, slot: u16, to: usize) -> SlotMigration {
        let migration = self.plan_migration(slot, to).await;
        migration.mark_migrating(self).await;
        migration
    }

    /// The nodes of a migration of `slot` to `to`, checked; nothing is marked yet.
    async fn plan_migration(&self, slot: u16, to: usize) -> SlotMigration {
        let from = self.master_of_slot(slot).await;
        assert_ne!(
            from, to,
            "begin_migration: node {to} already serves slot {slot}"
        );
        assert!(
            self.master_indices().await.contains(&to),
            "begin_migration: node {to} is not a master with slots; pick one of {:?}",
            self.master_indices().await
        );
        let to_id = self.node_id(to).await;
        SlotMigration {
            slot,
            from,
            to,
            to_id,
        }
    }

    /// Asks `replica_index` to take over from its master (`CLUSTER FAILOVER`, the
    /// coordinated manual failover), waits until it reports `role:master`, then until
    /// the cluster is ok again ([`RedisCluster::wait_ok`]).
    ///
    /// A manual failover that Redis gives up on (its master had not yet learnt, over
    /// the cluster bus, that this node replicates it, so it ignored the request: the
    /// replica logs "Manual failover timed out" after 5 s) is asked for again, until
    /// the time limit.
    ///
    /// # Panics
    ///
    /// If the node is not a replica, refuses, or is not master within 30 s.
    pub async fn failover(&self, replica_index: usize) {
        let node = &self.nodes[replica_index];
        let role = self.role(replica_index).await;
        assert_eq!(
            role,
            "slave",
            "failover: node {replica_index} (port {}) is a {role}, not a replica",
            node.port()
        );
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("FAILOVER");
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        let mut ask_again = Instant::now();
        // The role is read before each request: a node promoted since the last
        // poll would refuse another `CLUSTER FAILOVER` (it is no replica now).
        while self.role(replica_index).await != "master" {
            if Instant::now() >= ask_again {
                let asked: Result<(), _> = query(&node.url(), &cmd).await;
                if let Err(e) = asked
                    && self.role(replica_index).await != "master"
                {
                    panic!("failover: {e}\n{}", self.logs());
                }
                ask_again = Instant::now() + MANUAL_FAILOVER_RETRY;
            }
            if Instant::now() >= deadline {
                panic!(
                    "failover: node {replica_index} (port {}) did not become master within \
                     {FAILOVER_TIMEOUT:?} of CLUSTER FAILOVER\n{}",
                    node.port(),
                    self.logs()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
        self.wait_ok().await;
    }

    /// Waits until, on every live node (running and not paused): `CLUSTER INFO` says
    /// `cluster_state:ok` with all 16384 slots assigned and ok; `CLUSTER NODES` lists
    /// every other live node without `fail`/`fail?`/`handshake` flags, gives every slot
    /// to a live node, and gives the same slot owners as on every other live node; and
    /// a replica's link to its master is up.
    ///
    /// So after a master is killed, this waits for its replica to take over (the node
    /// timeout is 1 s); with no replica to do so it panics.
    ///
    /// # Panics
    ///
    /// If that does not happen within 20 s; the message says what was last wrong and
    /// quotes the nodes' logs.
    pub async fn wait_ok(&self) {
        let deadline = Instant::now() + OK_TIMEOUT;
        loop {
            let problem = match self.check_ok().await {
                Ok(()) => return,
                Err(problem) => problem,
            };
            if Instant::now() >= deadline {
                panic!(
                    "the cluster was not ok within {OK_TIMEOUT:?}: {problem}\n{}",
                    self.logs()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Puts a [`FaultProxy`] in front of every node and has each node announce its
    /// proxy's port to the cluster (`CONFIG SET cluster-announce-port`), so that a
    /// client following `CLUSTER SLOTS` and `MOVED` reaches every node through its
    /// proxy: the proxies' faults (held replies, cuts) then reach a cluster client.
    /// Returns the proxies in node order once every live node lists only proxy
    /// ports. The cluster bus keeps the nodes' own ports, and this harness's
    /// methods go on working (they talk to the nodes directly).
    ///
    /// # Panics
    ///
    /// If a node refuses the setting, or the nodes do not all list the proxies
    /// within 20 s.
    pub async fn behind_proxies(&self) -> Vec<FaultProxy> {
        let mut proxies = Vec::with_capacity(self.nodes.len());
        for (i, node) in self.nodes.iter().enumerate() {
            let proxy = FaultProxy::start(node.addr()).await;
            let mut cmd = redis::cmd("CONFIG");
            cmd.arg("SET")
                .arg("cluster-announce-port")
                .arg(proxy.port());
            let () = query(&node.url(), &cmd)
                .await
                .unwrap_or_else(|e| panic!("behind_proxies: node {i}: {e}"));
            self.announced_ports()[i] = proxy.port();
            proxies.push(proxy);
        }
        // Gossip carries the new ports; wait until every node has them.
        let deadline = Instant::now() + OK_TIMEOUT;
        loop {
            match self.check_ok().await {
                Ok(()) => return proxies,
                Err(problem) if Instant::now() >= deadline => panic!(
                    "behind_proxies: the nodes did not all list the proxies within \
                     {OK_TIMEOUT:?}: {problem}\n{}",
                    self.logs()
                ),
                Err(_) => tokio::time::sleep(POLL_INTERVAL).await,
            }
        }
    }

    /// The tails of every node's log, for panic messages.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("=== node {i} (port {}) ===\n{}", n.port(), n.log_tail()))
            .collect()
    }

    async fn check_ok(&self) -> Result<(), String> {
        let live: Vec<(usize, &RedisServer)> = self.live().collect();
        if live.is_empty() {
            return Err("no node is running".into());
        }
        let live_ports: Vec<u16> = live.iter().map(|&(i, _)| self.announced_port(i)).collect();
        let mut first_view: Option<(usize, SlotView)> = None;
        for &(i, node) in &live {
            let url = node.url();
            let info: String = query(&url, redis::cmd("CLUSTER").arg("INFO")).await?;
            for (field, want) in [
                ("cluster_state", "ok"),
                ("cluster_slots_assigned", "16384"),
                ("cluster_slots_ok", "16384"),
            ] {
                let got = info_field(&info, field);
                if got != Some(want) {
                    return Err(format!("node {i} says {field}:{got:?}, not {want}"));
                }
            }
            let text: String = query(&url, redis::cmd("CLUSTER").arg("NODES")).await?;
            let lines = parse_nodes(&text);
            for port in &live_ports {
                match lines.iter().find(|l| l.port == *port) {
                    None => return Err(format!("node {i} does not know port {port} yet")),
                    Some(l) if l.unhealthy => {
                        return Err(format!("node {i} flags port {port} as unhealthy: {text}"));
                    }
                    Some(_) => {}
                }
            }
            let view = slot_view(&lines);
            if let Some(&(first, last, port)) = view.iter().find(|r| !live_ports.contains(&r.2)) {
                return Err(format!(
                    "node {i} says slots {first}-{last} are served by port {port}, which is down \
                     or paused"
                ));
            }
            match &first_view {
                None => first_view = Some((i, view)),
                Some((j, other)) if *other != view => {
                    return Err(format!(
                        "nodes {j} and {i} disagree on slot owners: {other:?} vs {view:?}"
                    ));
                }
                Some(_) => {}
            }
            if lines.iter().any(|l| l.myself && !l.master) {
                let replication: String =
                    query(&url, redis::cmd("INFO").arg("replication")).await?;
                let link = info_field(&replication, "master_link_status");
                if link != Some("up") {
                    return Err(format!("replica {i} has master_link_status:{link:?}"));
                }
            }
        }
        Ok(())
    }

    /// Running, unpaused nodes with their indices.
    fn live(&self) -> impl Iterator<Item = (usize, &RedisServer)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.is_running() && !n.is_paused())
    }

    /// Sends `cmd` to the live nodes in order; the first reply wins.
    async fn query_any<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let mut errors = Vec::new();
        for (_, node) in self.live() {
            match query(&node.url(), cmd).await {
                Ok(reply) => return reply,
                Err(e) => errors.push(e),
            }
        }
        panic!("no live node of the cluster answered: {errors:?}");
    }

    async fn topology(&self) -> Vec<NodeLine> {
        let text: String = self.query_any(redis::cmd("CLUSTER").arg("NODES")).await;
        parse_nodes(&text)
    }

    fn index_of_port(&self, port: u16) -> Option<usize> {
        self.announced_ports().iter().position(|&p| p == port)
    }

    /// The port node `i` announces to the cluster.
    fn announced_port(&self, i: usize) -> u16 {
        self.announced_ports()[i]
    }

    fn announced_ports(&self) -> std::sync::MutexGuard<'_, Vec<u16>> {
        self.announced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn node_id(&self, i: usize) -> String {
        query(&self.nodes[i].url(), redis::cmd("CLUSTER").arg("MYID"))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn role(&self, i: usize) -> String {
        let info: String = query(&self.nodes[i].url(), redis::cmd("INFO").arg("replication"))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
        info_field(&info, "role").unwrap_or("unknown").to_owned()
    }

    async fn setslot(&self, i: usize, slot: u16, rest: &[&str]) {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(slot).arg(rest);
        let () = query(&self.nodes[i].url(), &cmd).await.unwrap_or_else(|e| {
            panic!(
                "CLUSTER SETSLOT {slot} {} on node {i}: {e}\n{}",
                rest.join(" "),
                self.logs()
            )
        });
    }
}

impl SlotMigration {
    /// The slot being moved.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The index of the node the slot comes from (it still serves it).
    pub fn from(&self) -> usize {
        self.from
    }

    /// The index of the node the slot goes to.
    pub fn to(&self) -> usize {
        self.to
    }

    /// Marks the slot `IMPORTING` on the destination (`SETSLOT .. IMPORTING`): the
    /// step [`RedisCluster::begin_migration_from_source`] left out. Afterwards the
    /// destination serves the slot's keys to a command preceded by `ASKING`.
    ///
    /// # Panics
    ///
    /// If the command fails.
    pub async fn import(&self, cluster: &RedisCluster) {
        let from_id = cluster.node_id(self.from).await;
        cluster
            .setslot(self.to, self.slot, &["IMPORTING", &from_id])
            .await;
    }

    /// Marks the slot `MIGRATING` on the source.
    async fn mark_migrating(&self, cluster: &RedisCluster) {
        cluster
            .setslot(self.from, self.slot, &["MIGRATING", &self.to_id])
            .await;
    }

    /// Moves one key of the slot to the destination (`MIGRATE .. KEYS key`). Afterwards
    /// the source answers `ASK` for it. Does nothing if the source does not have it.
    ///
    /// # Panics
    ///
    /// If `MIGRATE` fails.
    pub async fn move_key(&self, cluster: &RedisCluster, key: &str) {
        self.migrate(cluster, &[key.as_bytes().to_vec()]).await;
    }

    /// Moves every key of the slot to the destination, in batches of 100.
    ///
    /// # Panics
    ///
    /// If a command fails.
    pub async fn move_all_keys(&self, cluster: &RedisCluster) {
        let source = cluster.nodes[self.from].url();
        loop {
            let mut cmd = redis::cmd("CLUSTER");
            cmd.arg("GETKEYSINSLOT").arg(self.slot).arg(MIGRATE_BATCH);
            let keys: Vec<Vec<u8>> = query(&source, &cmd).await.unwrap_or_else(|e| panic!("{e}"));
            if keys.is_empty() {
                return;
            }
            self.migrate(cluster, &keys).await;
        }
    }

    /// Moves the remaining keys, then assigns the slot to the destination
    /// (`SETSLOT .. NODE`: destination, source, then the other live masters), and waits
    /// until every live node says the destination serves it.
    ///
    /// # Panics
    ///
    /// If a command fails, or the nodes do not agree within 20 s.
    pub async fn finish(self, cluster: &RedisCluster) {
        self.move_all_keys(cluster).await;
        let node = ["NODE", self.to_id.as_str()];
        cluster.setslot(self.to, self.slot, &node).await;
        cluster.setslot(self.from, self.slot, &node).await;
        for i in cluster.master_indices().await {
            if i != self.to && i != self.from && cluster.nodes[i].is_running() {
                cluster.setslot(i, self.slot, &node).await;
            }
        }
        let to_port = cluster.announced_port(self.to);
        let deadline = Instant::now() + OK_TIMEOUT;
        'poll: loop {
            let mut disagreeing = None;
            for (i, node) in cluster.live() {
                let owner = query::<String>(&node.url(), redis::cmd("CLUSTER").arg("NODES"))
                    .await
                    .map(|text| owner_of(&parse_nodes(&text), self.slot));
                if owner != Ok(Some(to_port)) {
                    disagreeing = Some((i, owner));
                    break;
                }
            }
            let Some((i, owner)) = disagreeing else {
                break 'poll;
            };
            if Instant::now() >= deadline {
                panic!(
                    "after moving slot {} to node {} (port {to_port}), node {i} still says the \
                     owner is {owner:?} after {OK_TIMEOUT:?}\n{}",
                    self.slot,
                    self.to,
                    cluster.logs()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    async fn migrate(&self, cluster: &RedisCluster, keys: &[Vec<u8>]) {
        let target = &cluster.nodes[self.to];
        let mut cmd = redis::cmd("MIGRATE");
        cmd.arg("127.0.0.1")
            .arg(target.port())
            .arg("")
            .arg(0)
            .arg(MIGRATE_TIMEOUT_MS)
            .arg("KEYS")
            .arg(keys);
        // "OK", or "NOKEY" when none of the keys was there.
        let _: String = query(&cluster.nodes[self.from].url(), &cmd)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "moving {} key(s) of slot {} from node {} to node {}: {e}\n{}",
                    keys.len(),
                    self.slot,
                    self.from,
                    self.to,
                    cluster.logs()
                )
            });
    }
}

impl fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCluster")
            .field("nodes", &self.nodes)
            .field("replicas_per_master", &self.replicas_per_master)
            .finish()
    }
}

/// Parses `CLUSTER NODES`: `<id> <ip:port@cport[,host]> <flags> <master> <ping> <pong>
/// <epoch> <link> <slot>...`. Slot entries in brackets (migrations) are skipped.
fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = fields
                .get(1)?
                .split(['@', ','])
                .next()?
                .rsplit_once(':')?
                .1
                .parse()
                .ok()?;
            let flags: Vec<&str> = fields.get(2)?.split(',').collect();
            let slots = fields
                .iter()
                .skip(8)
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|n| (n, n)),
                })
                .collect();
            Some(NodeLine {
                port,
                myself: flags.contains(&"myself"),
                master: flags.contains(&"master"),
                unhealthy: flags
                    .iter()
                    .any(|f| matches!(*f, "fail" | "fail?" | "handshake" | "noaddr")),
                slots,
            })
        })
        .collect()
}

/// (first slot, last slot, owner port) of every master's ranges, sorted.
type SlotView = Vec<(u16, u16, u16)>;

fn slot_view(lines: &[NodeLine]) -> SlotView {
    let mut view: SlotView = lines
        .iter()
        .filter(|l| l.master)
        .flat_map(|l| l.slots.iter().map(|&(a, b)| (a, b, l.port)))
        .collect();
    view.sort_unstable();
    view
}

/// The port of the master whose ranges contain `slot`.
fn owner_of(lines: &[NodeLine], slot: u16) -> Option<u16> {
    lines
        .iter()
        .filter(|l| l.master)
        .find(|l| l.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
        .map(|l| l.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_are_parsed() {
        let text = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host replica,myself e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 master - 0 0 1 connected 0-5460 6000 [5461->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master,fail? - 0 1426238316232 3 connected 5461-5999 6001-16383
";
        let lines = parse_nodes(text);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].myself && !lines[0].master && lines[0].slots.is_empty());
        assert_eq!(lines[1].port, 30001);
        assert_eq!(lines[1].slots, vec![(0, 5460), (6000, 6000)]);
        assert!(lines[2].unhealthy);
        assert_eq!(owner_of(&lines, 6000), Some(30001));
        assert_eq!(owner_of(&lines, 6001), Some(30003));
        assert_eq!(slot_view(&lines).len(), 4);
    }
}
