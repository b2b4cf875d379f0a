//! Redis Cluster: each lock lives on the master that serves its slot, and
//! this backend routes every call there itself.
//!
//! # Why our own routing, over one bb8 pool per master
//! redis-rs's `ClusterConnection` multiplexes one connection per node and
//! retries in a task of its own: a `MOVED`, `TRYAGAIN` or dropped
//! connection re-sends the command later, up to 16 times with waits of a
//! second or more, after the caller's deadline and possibly after its
//! give-back; and `WAIT` on that one shared connection stalls every other
//! command to the node (redisson#4305). So each master gets what a single
//! Redis gets, [`RedisBackend`] over bb8-redis pools: the owner's commands
//! on one connection (a give-back lands after the acquire it gives back),
//! `WAIT` on connections of its own, in the same pipeline as the script;
//! and this module follows the cluster's answers within the call's own
//! time limit:
//! - `MOVED slot addr`: the slot's new master is noted and the call sent
//!   there; a background refresh of the whole map follows.
//! - `ASK addr` (a slot half-way through a migration): the call is sent to
//!   `addr` preceded by `ASKING`, in the same write ([`Conn::Asking`]).
//! - `TRYAGAIN` (a key moving right now): sent again after a short pause.
//! - Redirections that go on (the nodes sending the call back and forth,
//!   as when the source of a migration says `ASK` before the destination
//!   imports the slot): past three in one call, each is followed after the
//!   same pause; if the time limit runs out while still redirected, the
//!   call ran on no node, and the error is [`LockError::Redirected`],
//!   transient, so an acquire with a wait keeps waiting.
//! - A node that cannot be reached, `CLUSTERDOWN`, `READONLY` or
//!   `MASTERDOWN` (a failover): the slot map is read again from any node
//!   that answers; if another master now serves the slot, the call goes
//!   there, else the error is returned, typed and transient.
//!
//! Every call here is safe to send again: the scripts check the owner
//! token, and an acquire repeated with its own token finds the lock its own.
//!
//! redis-rs's cluster connection is used for one thing it does well: the
//! wake-up subscriber's `SSUBSCRIBE`, which it routes by slot and moves
//! when slots move (see `store/subscribe/`).
//!
//! [`Conn::Asking`]: super::conn::Conn::Asking
//! [`LockError::Redirected`]: crate::LockError::Redirected

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::{ConnectionInfo, ErrorKind, ServerErrorKind};
use tokio::time::Instant;

use super::open::{self, Connect};
use super::server::conn::ASKING;
use super::server::{On, RedisBackend};
use slots::{Addr, SlotMap, slot};

pub(crate) mod slots;
use super::{NodePing, OpError};
use crate::error::ConnectFailure;

/// How long to pause before sending again after `TRYAGAIN`.
const TRY_AGAIN_PAUSE: Duration = Duration::from_millis(10);

/// Redirections one call follows back to back; past them it pauses
/// [`TRY_AGAIN_PAUSE`] before each send. A slot being moved takes one or
/// two (`MOVED` to the new master, `ASK` to the destination); more mean
/// the nodes send the call back and forth: the source says `ASK` before
/// the destination imports the slot, and the destination answers `MOVED`
/// back.
const BOUNCES_BEFORE_PAUSE: u32 = 3;

/// The longest one node may take to answer `CLUSTER SLOTS`.
const MAP_QUERY_LIMIT: Duration = Duration::from_secs(1);

/// A cluster node the client has talked to.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) addr: Addr,
    /// `redis://host:port` (no password), for errors and logs.
    pub(crate) name: String,
    pub(crate) backend: RedisBackend,
    /// Watchdog renewal pipelines sent to this node.
    pub(crate) renewal_pipelines: AtomicU64,
}

/// A node the user listed: where the first slot map comes from.
#[derive(Debug)]
pub(crate) struct Seed {
    pub(crate) info: ConnectionInfo,
    pub(crate) addr: Addr,
}

/// The lock store over a Redis Cluster.
#[derive(Debug)]
pub(crate) struct ClusterBackend {
    seeds: Vec<Seed>,
    connect: Connect,
    map: RwLock<Option<Arc<SlotMap>>>,
    nodes: Mutex<HashMap<Addr, Arc<Node>>>,
    /// One map refresh at a time; the others wait for its result.
    refreshing: tokio::sync::Mutex<()>,
    /// Counts completed refreshes.
    generation: AtomicU64,
}

/// What to do after an error from a node.
pub(crate) enum Follow {
    Moved(u16, Addr),
    Ask(Addr),
    TryAgain,
    /// The node may no longer serve the slot: read the map again.
    Remap,
    Fail,
}

pub(crate) fn follow(e: &OpError) -> Follow {
    let OpError::Redis(e) = e else {
        return match e {
            OpError::Connect { .. } | OpError::Pool { .. } | OpError::Timeout(_) => Follow::Remap,
            _ => Follow::Fail,
        };
    };
    let redirect = || {
        e.redirect_node()
            .and_then(|(addr, slot)| Some((Addr::parse(addr)?, slot)))
    };
    match e.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => match redirect() {
            Some((addr, slot)) => Follow::Moved(slot, addr),
            None => Follow::Remap,
        },
        ErrorKind::Server(ServerErrorKind::Ask) => match redirect() {
            Some((addr, _)) => Follow::Ask(addr),
            None => Follow::Fail,
        },
        ErrorKind::Server(ServerErrorKind::TryAgain) => Follow::TryAgain,
        ErrorKind::Server(
            ServerErrorKind::ClusterDown | ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown,
        ) => Follow::Remap,
        _ if crate::error::is_connection_failure(e) => Follow::Remap,
        _ => Follow::Fail,
    }
}

/// The error of a call whose time limit ran out, `last` its last error.
///
/// A redirection (`MOVED`, `ASK`) that came back as the time ran out is
/// not the answer: the call ran on no node it reached, and a later attempt
/// may pass. So it becomes [`OpError::Redirected`], transient, where the
/// redirection itself would end a waiting acquire at once.
fn out_of_time(last: Option<OpError>, limit: Duration, unknown: bool) -> OpError {
    match last {
        Some(e) if matches!(follow(&e), Follow::Moved(..) | Follow::Ask(_)) => {
            OpError::Redirected {
                timeout: limit,
                last: e.to_string(),
                unknown,
            }
        }
        Some(e) => e,
        None => OpError::Timeout(limit),
    }
}

impl ClusterBackend {
    pub(crate) fn new(seeds: Vec<Seed>, connect: Connect) -> Self {
        Self {
            seeds,
            connect,
            map: RwLock::new(None),
            nodes: Mutex::new(HashMap::new()),
            refreshing: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        }
    }

    /// The node at `addr`, opened on first use.
    pub(crate) fn node(&self, addr: &Addr) -> Result<Arc<Node>, OpError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(node) = nodes.get(addr) {
            return Ok(Arc::clone(node));
        }
        let base = self.seeds.first().map(|s| &s.info);
        let (backend, name) = open::server_at(base, addr, &self.connect)?;
        let node = Arc::new(Node {
            addr: addr.clone(),
            name,
            backend: backend.sharded(),
            renewal_pipelines: AtomicU64::new(0),
        });
        nodes.insert(addr.clone(), Arc::clone(&node));
        Ok(node)
    }

    pub(crate) fn current_map(&self) -> Option<Arc<SlotMap>> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_map(&self, map: SlotMap) -> Arc<SlotMap> {
        let map = Arc::new(map);
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&map));
        map
    }

    /// The master serving `slot`, reading the map first if there is none
    /// yet (or it has no master for the slot).
    async fn owner(&self, slot: u16, limit: Duration) -> Result<Arc<Node>, OpError> {
        let map = match self.current_map() {
            Some(map) if map.owner(slot).is_some() => map,
            _ => self.refresh(limit).await?,
        };
        match map.owner(slot) {
            Some(addr) => self.node(addr),
            None => Err(OpError::Connect {
                failure: ConnectFailure::Unreachable,
                detail: format!("no master of the cluster serves slot {slot} (CLUSTERDOWN?)"),
            }),
        }
    }

    /// Reads the slot map again, from whichever node answers first with a
    /// map that serves every slot (else the most complete one), asking the
    /// known masters and the listed nodes at once. A refresh that completed
    /// while this one waited its turn is used as is.
    pub(crate) async fn refresh(&self, limit: Duration) -> Result<Arc<SlotMap>, OpError> {
        let seen = self.generation.load(Ordering::Acquire);
        let Ok(_turn) = tokio::time::timeout(limit, self.refreshing.lock()).await else {
            return Err(OpError::Timeout(limit));
        };
        if self.generation.load(Ordering::Acquire) != seen
            && let Some(map) = self.current_map()
        {
            return Ok(map);
        }
        let mut candidates: Vec<Addr> = self
            .current_map()
            .map(|m| m.masters().to_vec())
            .unwrap_or_default();
        for seed in &self.seeds {
            if !candidates.contains(&seed.addr) {
                candidates.push(seed.addr.clone());
            }
        }
        let per_node = limit.min(MAP_QUERY_LIMIT);
        let mut asks: FuturesUnordered<_> = candidates
            .into_iter()
            .map(|addr| async move {
                let node = self.node(&addr)?;
                let reply = node
                    .backend
                    .run(On::Plain, None, per_node, |mut link| async move {
                        redis::cmd("CLUSTER")
                            .arg("SLOTS")
                            .query_async::<redis::Value>(&mut link.conn)
                            .await
                    })
                    .await?;
                SlotMap::from_reply(&reply, &addr).map_err(OpError::Reply)
            })
            .collect();
        let (mut best, mut last_error): (Option<SlotMap>, Option<OpError>) = (None, None);
        let deadline = Instant::now() + limit;
        while let Ok(Some(answer)) = tokio::time::timeout_at(deadline, asks.next()).await {
            match answer {
                Ok(map) if map.unserved() == 0 => {
                    best = Some(map);
                    break;
                }
                Ok(map) => {
                    if best.as_ref().is_none_or(|b| map.unserved() < b.unserved()) {
                        best = Some(map);
                    }
                }
                Err(e) => last_error = Some(e),
            }
        }
        match best {
            Some(map) => {
                let map = self.set_map(map);
                self.generation.fetch_add(1, Ordering::AcqRel);
                Ok(map)
            }
            None => Err(match last_error {
                Some(e) => {
                    let (failure, detail) = e.connect_failure();
                    OpError::Connect {
                        failure,
                        detail: format!("no node of the cluster answered CLUSTER SLOTS: {detail}"),
                    }
                }
                None => OpError::Connect {
                    failure: ConnectFailure::Timeout,
                    detail: format!(
                        "no node of the cluster answered CLUSTER SLOTS within {limit:?}"
                    ),
                },
            }),
        }
    }

    /// Reads the map again in the background (after a `MOVED`, which often
    /// means more slots moved).
    pub(crate) fn refresh_soon(self: &Arc<Self>) {
        if self.refreshing.try_lock().is_err() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let this = Arc::downgrade(self);
            runtime.spawn(async move {
                if let Some(this) = this.upgrade() {
                    let _ = this.refresh(MAP_QUERY_LIMIT).await;
                }
            });
        }
    }

    /// Runs `call` on the master of `keys`' slot within `limit`, following
    /// the cluster's redirections (see the module docs).
    /// [`OpError::CrossSlot`] when the keys do not share one slot.
    pub(crate) async fn route<T, F, Fut>(
        self: &Arc<Self>,
        keys: &[&str],
        limit: Duration,
        call: F,
    ) -> Result<T, OpError>
    where
        F: Fn(Arc<Node>, Duration) -> Fut,
        Fut: Future<Output = Result<T, OpError>>,
    {
        let slot = keys.first().map_or(0, |key| slot(key.as_bytes()));
        if keys.iter().any(|key| self::slot(key.as_bytes()) != slot) {
            return Err(OpError::CrossSlot);
        }
        let deadline = Instant::now() + limit;
        let mut ask: Option<Arc<Node>> = None;
        let mut last: Option<OpError> = None;
        // Whether an earlier attempt may have run (see `OpError::Redirected`).
        let mut unknown = false;
        let mut redirects = 0u32;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(out_of_time(last, limit, unknown));
            }
            if redirects > BOUNCES_BEFORE_PAUSE {
                // Nodes sending the call back and forth (a migration half
                // set up): pause as after `TRYAGAIN`, not spin.
                tokio::time::sleep(TRY_AGAIN_PAUSE.min(left)).await;
            }
            let (node, asking) = match ask.take() {
                Some(node) => (node, true),
                None => (self.owner(slot, left).await?, false),
            };
            let result = if asking {
                ASKING.scope((), call(Arc::clone(&node), left)).await
            } else {
                call(Arc::clone(&node), left).await
            };
            let error = match result {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            if error.outcome_unknown() {
                // Sent again below (or the call fails): it may have run.
                unknown = true;
                super::server::resend::note();
            }
            match follow(&error) {
                Follow::Moved(moved, addr) => {
                    redirects += 1;
                    tracing::debug!(target: "redlock", slot = moved, to = %addr, "cluster slot moved");
                    if let Some(map) = self.current_map() {
                        self.set_map(map.with_owner(moved, addr));
                    }
                    self.refresh_soon();
                }
                Follow::Ask(addr) => {
                    redirects += 1;
                    tracing::debug!(target: "redlock", slot, to = %addr, "cluster slot half-way moved: ASK");
                    ask = Some(self.node(&addr)?);
                }
                Follow::TryAgain => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    tokio::time::sleep(TRY_AGAIN_PAUSE.min(left)).await;
                }
                Follow::Remap => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let moved = match self.refresh(left).await {
                        Ok(map) => map.owner(slot).is_some_and(|a| *a != node.addr),
                        Err(_) => false,
                    };
                    if !moved {
                        return Err(error);
                    }
                    tracing::debug!(target: "redlock", slot, from = %node.name, "cluster slot has a new master");
                }
                Follow::Fail => return Err(error),
            }
            last = Some(error);
        }
    }

    /// Whether writes must reach replicas (`.replicas(..)`: `WAIT`).
    pub(crate) fn waits_for_replicas(&self) -> bool {
        self.connect.replicas.is_some()
    }

    /// Reads the slot map: every listed node that answers must be in
    /// cluster mode, and at least one must answer.
    pub(crate) async fn check(&self) -> Result<(), OpError> {
        let limit = self.connect.connection_timeout;
        let mut last_error = None;
        for seed in &self.seeds {
            let node = self.node(&seed.addr)?;
            let reply = node
                .backend
                .run(On::Plain, None, limit, |mut link| async move {
                    redis::cmd("CLUSTER")
                        .arg("SLOTS")
                        .query_async::<redis::Value>(&mut link.conn)
                        .await
                })
                .await;
            match reply {
                Err(OpError::Redis(e)) if e.to_string().contains("cluster support disabled") => {
                    return Err(OpError::NotCluster {
                        node: node.name.clone(),
                    });
                }
                Err(e) => last_error = Some(e),
                Ok(reply) => {
                    let map = SlotMap::from_reply(&reply, &seed.addr).map_err(OpError::Reply)?;
                    if self.current_map().is_none() {
                        self.set_map(map);
                    }
                }
            }
        }
        match (self.current_map(), last_error) {
            (None, Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Pings every master of the slot map (reading the map first when
    /// there is none yet).
    pub(crate) async fn ping(self: &Arc<Self>, limit: Duration) -> Vec<NodePing> {
        if self.current_map().is_none()
            && let Err(e) = self.time(limit).await
        {
            return vec![("the cluster's slot map".to_owned(), Err(e))];
        }
        let pings = self
            .masters()
            .into_iter()
            .map(|node| async move { (node.name.clone(), node.backend.ping(limit).await) });
        futures_util::future::join_all(pings).await
    }

    /// The masters the client has a map of, each with its backend and name.
    pub(crate) fn masters(&self) -> Vec<Arc<Node>> {
        let Some(map) = self.current_map() else {
            return Vec::new();
        };
        map.masters()
            .iter()
            .filter_map(|a| self.node(a).ok())
            .collect()
    }

    /// The listed nodes' connection settings, for the wake-up subscriber.
    pub(crate) fn subscriber_nodes(&self) -> Vec<ConnectionInfo> {
        self.seeds.iter().map(|s| s.info.clone()).collect()
    }

    #[cfg(feature = "test-util")]
    /// Watchdog renewal pipelines sent to each node so far, by node name.
    pub(crate) fn renewal_pipelines(&self) -> Vec<(String, u64)> {
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<_> = nodes
            .values()
            .map(|n| (n.name.clone(), n.renewal_pipelines.load(Ordering::Relaxed)))
            .collect();
        out.sort();
        out
    }
}
