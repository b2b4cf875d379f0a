//! Which store runs a call: [`Backend`] dispatches each verb of the
//! primitives (their keys, requests, scripts, verbs on one Redis and
//! in-memory twins are in [`primitive`](crate::primitive)) to one Redis,
//! a Cluster, Sentinel's primary, a Redlock quorum (the stores of
//! [`store`](crate::store), with the Redlock fan-out of each verb in
//! `quorum/` and the routed verbs of Cluster and Sentinel in `routed.rs`)
//! or process memory (`memory/`, which holds the twins' tables and runs
//! their steps under one lock).
//!
//! A sealed boundary: the rest of the crate sends request structs
//! ([`Acquire`], [`Renewal`], [`End`], [`GiveBack`], ...) through
//! [`Backend`]'s verbs and never matches its variants. A new verb is a
//! request struct, a script and its memory twin in its primitive's
//! folder, one line in `routed_verbs!` (`routed.rs`: Cluster, Sentinel)
//! and one dispatch line here, plus its Redlock fan-out where it is
//! supported.

use std::fmt;
use std::time::Duration;

pub(crate) use crate::primitive::Claimed;
pub(crate) use crate::primitive::name::{ForceRelease, ForceReply, Inspect, Inspection, Lease};
pub(crate) use crate::primitive::{
    Acquire, AcquireReply, Available, Claim, Complete, Downgrade, End, Ended, GiveBack,
    GroupAcquire, GroupReply, IssueFence, Keys, Kind, LatchCall, LatchKeys, LatchOp, LatchReply,
    LockKeys, PermitKeys, RecordKeys, Renewal, RwKeys, keys,
};

pub(crate) use crate::store::NodePing;
pub use crate::store::NodeRole;
pub(crate) use crate::store::OpError;
use crate::store::cluster::{self, ClusterBackend};
use crate::store::quorum::QuorumBackend;
use crate::store::sentinel::{self, SentinelBackend};
use crate::store::server::RedisBackend;

mod cluster_renew;
pub(crate) mod memory;
mod quorum;
mod routed;

/// Where a client keeps its locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// One Redis server (with or without replicas acknowledging writes).
    Redis,
    /// Redlock: a majority of independent Redis masters.
    Redlock,
    /// This process's memory.
    Memory,
    /// Redis Cluster: each lock on the master that serves its slot.
    Cluster,
    /// One Redis primary found and followed through Redis Sentinel.
    Sentinel,
}

impl Mode {
    /// `"redis"`, `"redlock"`, `"memory"`, `"cluster"` or `"sentinel"`:
    /// the `backend` label of the [metrics](crate::metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Redlock => "redlock",
            Self::Memory => "memory",
            Self::Cluster => "cluster",
            Self::Sentinel => "sentinel",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A lock store. Nothing outside `backend/` matches its variants: each verb
/// below is one dispatch line over the five stores.
#[derive(Debug)]
pub(crate) enum Backend {
    Redis(RedisBackend),
    Memory(memory::MemoryBackend),
    Quorum(QuorumBackend),
    Cluster(std::sync::Arc<ClusterBackend>),
    Sentinel(std::sync::Arc<SentinelBackend>),
}

/// Runs one verb on whichever store this is: the Redis ones are async and
/// bounded by `limit`; the memory one answers at once.
///
/// The stores that route or vote (Redlock, Cluster, Sentinel) run their
/// calls boxed: their futures are several times one Redis's, and every
/// verb's future is as large as its largest arm, so unboxed they would make
/// every lock call on one Redis carry (and copy) their size.
macro_rules! dispatch {
    ($self:ident.$verb:ident($request:expr, $limit:expr)) => {
        match $self {
            Self::Redis(b) => b.$verb($request, $limit).await,
            Self::Quorum(b) => Box::pin(b.$verb($request, $limit)).await,
            Self::Cluster(b) => Box::pin(b.$verb($request, $limit)).await,
            Self::Sentinel(b) => Box::pin(b.$verb($request, $limit)).await,
            Self::Memory(b) => Ok(b.$verb($request)),
        }
    };
}

/// [`dispatch!`] for the verbs that Redlock does not offer (they are
/// refused before they are sent; this answer is the backstop).
macro_rules! synchronizer {
    ($self:ident.$verb:ident($request:expr, $limit:expr)) => {
        match $self {
            Self::Redis(b) => b.$verb($request, $limit).await,
            Self::Cluster(b) => Box::pin(b.$verb($request, $limit)).await,
            Self::Sentinel(b) => Box::pin(b.$verb($request, $limit)).await,
            Self::Memory(b) => Ok(b.$verb($request)),
            Self::Quorum(_) => Err(OpError::Unsupported(stringify!($verb))),
        }
    };
}

impl Backend {
    /// Where this store keeps locks.
    pub(crate) fn mode(&self) -> Mode {
        match self {
            Self::Redis(_) => Mode::Redis,
            Self::Quorum(_) => Mode::Redlock,
            Self::Memory(_) => Mode::Memory,
            Self::Cluster(_) => Mode::Cluster,
            Self::Sentinel(_) => Mode::Sentinel,
        }
    }

    /// Whether fair mode works here: its line of waiters lives in one
    /// store, so not with Redlock.
    pub(crate) fn supports_fair(&self) -> bool {
        !matches!(self, Self::Quorum(_))
    }

    /// Whether a fair waiter takes a lock a release handed it (a grant
    /// message, see `FAIR_RELEASE` in `primitive/fair/`) without asking: not
    /// where writes must reach replicas (`WAIT`): there it asks, and its
    /// ask is acknowledged. Memory wakes its waiters without grants, and
    /// Redlock has no fair mode.
    pub(crate) fn takes_grants(&self) -> bool {
        match self {
            Self::Redis(b) => b.replicas.is_none(),
            Self::Cluster(b) => !b.waits_for_replicas(),
            Self::Sentinel(b) => !b.waits_for_replicas(),
            Self::Memory(_) | Self::Quorum(_) => false,
        }
    }

    /// How long after an acquire or renewal was sent the lock may be
    /// presumed held: the ttl, less Redlock's clock-drift allowance.
    pub(crate) fn validity(&self, ttl: Duration) -> Duration {
        match self {
            Self::Quorum(_) => ttl.saturating_sub(crate::store::quorum::drift(ttl)),
            Self::Redis(_) | Self::Memory(_) | Self::Cluster(_) | Self::Sentinel(_) => ttl,
        }
    }

    #[cfg(feature = "test-util")]
    /// Redis Cluster: the watchdog's renewal pipelines sent to each node so
    /// far, by node name (empty on other stores).
    pub(crate) fn renewal_pipelines(&self) -> Vec<(String, u64)> {
        match self {
            Self::Cluster(c) => c.renewal_pipelines(),
            Self::Redis(_) | Self::Memory(_) | Self::Quorum(_) | Self::Sentinel(_) => Vec::new(),
        }
    }

    #[cfg(feature = "test-util")]
    /// One Redis or Sentinel's primary: batches of coalesced calls sent,
    /// and the calls in them.
    pub(crate) fn coalesced_batches(&self) -> (u64, u64) {
        match self {
            Self::Redis(b) => b.coalesced_batches(),
            Self::Sentinel(s) => s.coalesced_batches(),
            Self::Memory(_) | Self::Quorum(_) | Self::Cluster(_) => (0, 0),
        }
    }

    /// Pings every node of the topology (see [`LockClient::ping`](crate::LockClient::ping)),
    /// each within `limit`; `target` names one Redis.
    pub(crate) async fn ping(&self, target: &str, limit: Duration) -> Vec<NodePing> {
        match self {
            Self::Redis(b) => vec![(target.to_owned(), b.ping(limit).await)],
            Self::Quorum(b) => b.ping(limit).await,
            Self::Cluster(b) => b.ping(limit).await,
            Self::Sentinel(b) => vec![b.ping(limit).await],
            Self::Memory(_) => vec![("memory".to_owned(), Ok((NodeRole::Memory, Duration::ZERO)))],
        }
    }

    /// The underlying pool, on one Redis.
    pub(crate) fn pool(&self) -> Option<&bb8::Pool<bb8_redis::RedisConnectionManager>> {
        match self {
            Self::Redis(b) => b.pool(),
            Self::Memory(_) | Self::Quorum(_) | Self::Cluster(_) | Self::Sentinel(_) => None,
        }
    }

    /// One acquire attempt. A record is claimed, never acquired: every
    /// store refuses it alike.
    pub(crate) async fn acquire(
        &self,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        if matches!(request.keys, Keys::Record(_)) {
            return Err(OpError::Unsupported("acquire of a record"));
        }
        dispatch!(self.acquire(request, limit))
    }

    /// Resets the lease if the token still holds the lock.
    pub(crate) async fn extend(
        &self,
        renewal: &Renewal<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        dispatch!(self.extend(renewal, limit))
    }

    /// Renews many locks in one round trip: for each, whether its token
    /// still held it (and the lease was reset), or why that is unknown.
    pub(crate) async fn extend_many(
        &self,
        renewals: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        dispatch!(self.extend_many(renewals, limit))
    }

    pub(crate) async fn end(&self, end: &End<'_>, limit: Duration) -> Result<Ended, OpError> {
        dispatch!(self.end(end, limit))
    }

    /// Claims an idempotency record (absent -> in progress), or says what
    /// is there.
    pub(crate) async fn claim(
        &self,
        claim: &Claim<'_>,
        limit: Duration,
    ) -> Result<Claimed<u64>, OpError> {
        match self {
            Self::Redis(b) => b.claim(claim, limit).await,
            Self::Quorum(b) => b.claim(claim, limit).await,
            Self::Cluster(b) => b.claim(claim, limit).await,
            Self::Sentinel(b) => b.claim(claim, limit).await,
            // The memory store may be full.
            Self::Memory(b) => b.claim(claim),
        }
    }

    /// Stores a claimed record's result; `false` when it is no longer ours.
    pub(crate) async fn complete(
        &self,
        complete: &Complete<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        dispatch!(self.complete(complete, limit))
    }

    /// Turns a held write lock into a read lock; `false` when the write
    /// lock was no longer this owner's.
    pub(crate) async fn downgrade(
        &self,
        downgrade: &Downgrade<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        synchronizer!(self.downgrade(downgrade, limit))
    }

    /// How many permits of a semaphore are free.
    pub(crate) async fn available(
        &self,
        available: &Available<'_>,
        limit: Duration,
    ) -> Result<u32, OpError> {
        synchronizer!(self.available(available, limit))
    }

    /// One call on a countdown latch.
    pub(crate) async fn latch(
        &self,
        call: &LatchCall<'_>,
        limit: Duration,
    ) -> Result<LatchReply, OpError> {
        synchronizer!(self.latch(call, limit))
    }

    /// Takes the locks of one hash tag at once (Redlock takes each key by
    /// quorum instead, one group per key).
    pub(crate) async fn acquire_group(
        &self,
        group: &GroupAcquire<'_>,
        limit: Duration,
    ) -> Result<GroupReply, OpError> {
        synchronizer!(self.acquire_group(group, limit))
    }

    /// Issues the fencing token of a lock `token` holds; `None` when it no
    /// longer holds it.
    pub(crate) async fn issue_fence(
        &self,
        issue: &IssueFence<'_>,
        limit: Duration,
    ) -> Result<Option<u64>, OpError> {
        match self {
            Self::Quorum(b) => b.issue_fence(issue),
            _ => synchronizer!(self.issue_fence(issue, limit)),
        }
    }

    /// Reads everything kept under one name (Redlock: what a majority of
    /// the nodes agree on).
    pub(crate) async fn inspect(
        &self,
        inspect: &Inspect<'_>,
        limit: Duration,
    ) -> Result<Inspection, OpError> {
        dispatch!(self.inspect(inspect, limit))
    }

    /// Ends the lock and the read/write lock of a name, whoever holds them
    /// (on Redlock, on a majority at least).
    pub(crate) async fn force_release(
        &self,
        force: &ForceRelease<'_>,
        limit: Duration,
    ) -> Result<ForceReply, OpError> {
        dispatch!(self.force_release(force, limit))
    }

    /// The store's clock, ms since 1970 (Redis's `TIME`; Redlock: the
    /// first node that answers).
    pub(crate) async fn time(&self, limit: Duration) -> Result<u64, OpError> {
        match self {
            Self::Redis(b) => b.time(limit).await,
            Self::Quorum(b) => b.time(limit).await,
            Self::Cluster(b) => b.time(limit).await,
            Self::Sentinel(b) => b.time(limit).await,
            Self::Memory(_) => Ok(u64::try_from(crate::owner::local_ms()).unwrap_or(0)),
        }
    }

    /// Whether several keys of one hash tag can be taken in one step here.
    pub(crate) fn takes_groups(&self) -> bool {
        !matches!(self, Self::Quorum(_))
    }

    /// Whether the read/write lock, semaphore and latch work here: their
    /// state lives in one store, so not with Redlock.
    pub(crate) fn supports_synchronizers(&self) -> bool {
        !matches!(self, Self::Quorum(_))
    }

    /// Deletes a lock whoever holds it (for tests of lost-lock handling).
    #[cfg(test)]
    pub(crate) fn force_delete(&self, lock_key: &str) {
        if let Self::Memory(b) = self {
            b.force_delete(lock_key);
        }
    }

    /// Whether the lock was held (and is now released).
    pub(crate) async fn give_back(
        &self,
        give_back: &GiveBack<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        dispatch!(self.give_back(give_back, limit))
    }
}

/// The oldest Redis the scripts run on: `SET .. GET` came with 6.2.
pub(crate) const MIN_REDIS: (u32, u32) = (6, 2);

/// Whether a `redis_version` string is older than [`MIN_REDIS`].
pub(crate) fn too_old(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) < MIN_REDIS
}

impl Backend {
    /// Checks that the store answers (on Redlock, a majority of the nodes).
    pub(crate) async fn check(&self) -> Result<(), OpError> {
        match self {
            Self::Redis(b) => b.check().await,
            Self::Quorum(b) => b.check().await,
            Self::Cluster(b) => b.check().await,
            Self::Sentinel(b) => b.check().await,
            Self::Memory(_) => Ok(()),
        }
    }

    /// Each Redis server with its name (`target` for a single one; a
    /// cluster's masters as its map has them).
    fn servers(&self, target: &str) -> Vec<(Server<'_>, String)> {
        match self {
            Self::Memory(_) => Vec::new(),
            Self::Redis(b) => vec![(Server::Borrowed(b), target.to_owned())],
            Self::Quorum(q) => q
                .nodes()
                .into_iter()
                .map(|(b, name)| (Server::Borrowed(b), name.to_owned()))
                .collect(),
            Self::Cluster(c) => c
                .masters()
                .into_iter()
                .map(|n| {
                    let name = n.name.clone();
                    (Server::Node(n), name)
                })
                .collect(),
            Self::Sentinel(s) => s
                .current_primary()
                .into_iter()
                .map(|p| {
                    let name = p.name.clone();
                    (Server::Primary(p), name)
                })
                .collect(),
        }
    }

    /// Each Redis server older than [`MIN_REDIS`], with its version
    /// (servers that do not say are left out). `target` names a single server.
    pub(crate) async fn too_old_servers(&self, target: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (backend, name) in self.servers(target) {
            if let Ok(Some(version)) = backend.version().await
                && too_old(&version)
            {
                out.push((name, version));
            }
        }
        out
    }

    /// Each Redis server that may evict keys (a `maxmemory` limit with a
    /// policy other than `noeviction`), with the policy; `None` for one
    /// whose config could not be read. `target` names a single server.
    pub(crate) async fn eviction_policies(&self, target: &str) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        for (backend, name) in self.servers(target) {
            match backend.eviction_policy().await {
                Ok(None) => {}
                Ok(Some(policy)) => out.push((name, Some(policy))),
                Err(_) => out.push((name, None)),
            }
        }
        out
    }
}

/// One Redis server of a store: borrowed, or a cluster node (which the
/// cluster may drop from its map meanwhile).
enum Server<'a> {
    Borrowed(&'a RedisBackend),
    Node(std::sync::Arc<cluster::Node>),
    Primary(std::sync::Arc<sentinel::Primary>),
}

impl std::ops::Deref for Server<'_> {
    type Target = RedisBackend;

    fn deref(&self) -> &RedisBackend {
        match self {
            Self::Borrowed(b) => b,
            Self::Node(n) => &n.backend,
            Self::Primary(p) => &p.backend,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_before_6_2_are_too_old() {
        for old in ["6.0.16", "5.0.7", "6.1.0", "4", ""] {
            assert!(too_old(old), "{old}");
        }
        for fine in ["6.2.0", "6.2.14", "7.0.15", "7.4.1", "8.0.0"] {
            assert!(!too_old(fine), "{fine}");
        }
    }

    #[test]
    fn keys_share_a_hash_tag() {
        let k = LockKeys::new("lock:", "order:42".into());
        assert_eq!(k.lock, "lock:{order:42}");
        assert_eq!(k.fence, "lock:{order:42}:fence");
    }

    #[test]
    fn a_lock_key_never_equals_another_keys_fence() {
        // `P{K}` ends in '}', `P{K}:fence` ends in 'e'.
        let a = LockKeys::new("lock:", "x}:fence".into());
        let b = LockKeys::new("lock:", "x".into());
        assert_ne!(a.lock, b.fence);
    }
}
