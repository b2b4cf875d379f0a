//! Where locks live: one Redis server (through a bb8 pool) or process memory.

use std::time::Duration;

pub(crate) mod conn;
pub(crate) mod memory;
pub(crate) mod quorum;
pub(crate) mod redis;

/// The Redis keys of one lock: the lease and its fencing counter, sharing a
/// `{hash tag}` so Redis Cluster puts them in one slot.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// The key as the user gave it (for errors and logs).
    pub(crate) user: String,
    /// `prefix{user}`: holds the owner's token, with the lease as its expiry.
    pub(crate) lock: String,
    /// `prefix{user}:fence`: the fencing counter, kept for the retention
    /// after each acquire (tokens never go back: see the crate docs).
    pub(crate) fence: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, user: String) -> Self {
        let lock = format!("{prefix}{{{user}}}");
        let fence = format!("{lock}:fence");
        Self { user, lock, fence }
    }

    /// Fair mode: the waiters' tokens in arrival order (a list).
    pub(crate) fn queue(&self) -> String {
        format!("{}:queue", self.lock)
    }

    /// Fair mode: each waiter's presence deadline (a sorted set).
    pub(crate) fn waiters(&self) -> String {
        format!("{}:waiters", self.lock)
    }
}

/// The answer to one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The lock is ours, with this fencing token; `at_ms` is the time of the
    /// acquire on the store's clock (Redis's `TIME`), when it was asked for.
    Acquired { fence: u64, at_ms: Option<u64> },
    /// Another owner holds it; `pttl` is what is left of its lease, when known.
    Busy { pttl: Option<Duration> },
}

/// One lock to renew in a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Renewal<'a> {
    pub(crate) keys: &'a Keys,
    pub(crate) token: &'a str,
    pub(crate) ttl: Duration,
}

/// A failed backend call, before the client adds the key and operation.
#[derive(Debug)]
pub(crate) enum OpError {
    /// Redis answered with an error, or the connection failed.
    Redis(::redis::RedisError),
    /// The pool gave no connection in time.
    Pool {
        timeout: Duration,
        last_error: Option<String>,
    },
    /// The whole call ran over its time limit.
    Timeout(Duration),
    /// Fewer replicas than required acknowledged the write in time.
    Replicas {
        wanted: u32,
        acknowledged: u32,
        timeout: Duration,
    },
    /// Redlock: no majority of the nodes answered as needed.
    Quorum(Box<quorum::QuorumFailure>),
    /// Redlock: the node started less than the restart delay ago, and
    /// grants nothing for this long yet.
    Restarted { left: Duration },
}

impl OpError {
    /// True when the command may have reached Redis and been applied even
    /// though no answer came back.
    pub(crate) fn outcome_unknown(&self) -> bool {
        match self {
            Self::Redis(e) => crate::error::is_connection_failure(e),
            // The write reached the primary; too few replicas have it.
            Self::Timeout(_) | Self::Replicas { .. } => true,
            Self::Pool { .. } | Self::Restarted { .. } => false,
            // The quorum backend has already released on every node it could.
            Self::Quorum(_) => false,
        }
    }

    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Self::Redis(e) => crate::error::is_transient_redis(e),
            Self::Timeout(_)
            | Self::Pool { .. }
            | Self::Replicas { .. }
            | Self::Quorum(_)
            | Self::Restarted { .. } => true,
        }
    }
}

/// A lock store.
#[derive(Debug)]
pub(crate) enum Backend {
    Redis(redis::RedisBackend),
    Memory(memory::MemoryBackend),
    Quorum(quorum::QuorumBackend),
}

impl Backend {
    /// How long after an acquire or renewal was sent the lock may be
    /// presumed held: the ttl, less Redlock's clock-drift allowance.
    pub(crate) fn validity(&self, ttl: Duration) -> Duration {
        match self {
            Self::Quorum(_) => ttl.saturating_sub(quorum::drift(ttl)),
            Self::Redis(_) | Self::Memory(_) => ttl,
        }
    }

    /// One acquire attempt: take the lock if free (or if it already holds
    /// `token`, from an earlier attempt whose answer was lost).
    pub(crate) async fn acquire(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        want_time: bool,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        match self {
            Self::Redis(b) => b.acquire(keys, token, ttl, want_time, limit).await,
            Self::Memory(b) => Ok(b.acquire(keys, token, ttl, want_time)),
            Self::Quorum(b) => b.acquire(keys, token, ttl, want_time, limit).await,
        }
    }

    /// Resets the lease to `ttl` if `token` still holds the lock.
    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        limit: Duration,
    ) -> Result<bool, OpError> {
        match self {
            Self::Redis(b) => b.extend(keys, token, ttl, limit).await,
            Self::Memory(b) => Ok(b.extend(keys, token, ttl)),
            Self::Quorum(b) => b.extend(keys, token, ttl, limit).await,
        }
    }

    /// Renews many locks in one round trip: for each, whether `token` still
    /// held it (and the lease was reset), or why that is unknown.
    pub(crate) async fn extend_many(
        &self,
        items: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        match self {
            Self::Redis(b) => b.extend_many(items, limit).await,
            Self::Quorum(b) => b.extend_many(items, limit).await,
            Self::Memory(b) => Ok(items
                .iter()
                .map(|r| Ok(b.extend(r.keys, r.token, r.ttl)))
                .collect()),
        }
    }

    /// Deletes the lock if `token` still holds it; `fence` is the holder's
    /// fencing token, which a Redlock release spreads to every node.
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        token: &str,
        fence: u64,
        limit: Duration,
    ) -> Result<bool, OpError> {
        match self {
            // One Redis issued the token from this very counter: nothing
            // to raise (only Redlock nodes need it).
            Self::Redis(b) => b.release(keys, token, 0, limit).await,
            Self::Memory(b) => Ok(b.release(keys, token)),
            Self::Quorum(b) => b.release(keys, token, fence, limit).await,
        }
    }
}

impl Backend {
    /// One fair acquire attempt: the lock goes to the first live waiter;
    /// others are queued (or keep their place) for `presence`.
    pub(crate) async fn acquire_fair(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        presence: Duration,
        want_time: bool,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        match self {
            Self::Redis(b) => {
                b.acquire_fair(keys, token, ttl, presence, want_time, limit)
                    .await
            }
            Self::Memory(b) => Ok(b.acquire_fair(keys, token, ttl, presence, want_time)),
            // Refused before this point (`fair()` needs one Redis).
            Self::Quorum(b) => b.acquire(keys, token, ttl, want_time, limit).await,
        }
    }

    /// Releases a fair lock; `Ok(Some(head))` names the waiter to wake
    /// (in-memory; Redis publishes it itself).
    pub(crate) async fn release_fair(
        &self,
        keys: &Keys,
        token: &str,
        fence: u64,
        limit: Duration,
    ) -> Result<(bool, Option<String>), OpError> {
        match self {
            Self::Redis(b) => Ok((b.release_fair(keys, token, limit).await?, None)),
            Self::Memory(b) => Ok(b.release_fair(keys, token)),
            Self::Quorum(b) => Ok((b.release(keys, token, fence, limit).await?, None)),
        }
    }

    /// Gives back what an acquire that returned no guard may hold (the
    /// lock; with `fair`, also its place in the line), after any of its
    /// commands still on the way: whether the lock was released, and the
    /// waiter to wake in this process (in memory; `""`: the longest one).
    pub(crate) async fn give_back(
        &self,
        keys: &Keys,
        token: &str,
        fair: bool,
        limit: Duration,
    ) -> Result<(bool, Option<String>), OpError> {
        match self {
            Self::Redis(b) => Ok((b.give_back(keys, token, fair, limit).await?, None)),
            Self::Memory(b) => Ok(b.give_back(keys, token, fair)),
            Self::Quorum(b) => Ok((b.give_back(keys, token, limit).await?, None)),
        }
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
    /// Each Redis server with its name (`target` for a single one).
    fn servers<'a>(&'a self, target: &'a str) -> Vec<(&'a redis::RedisBackend, &'a str)> {
        match self {
            Self::Memory(_) => Vec::new(),
            Self::Redis(b) => vec![(b, target)],
            Self::Quorum(q) => q.nodes(),
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
                out.push((name.to_owned(), version));
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
                Ok(Some(policy)) => out.push((name.to_owned(), Some(policy))),
                Err(_) => out.push((name.to_owned(), None)),
            }
        }
        out
    }
}

/// What a release that honours a minimum hold did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldRelease {
    /// The lock no longer held this owner's token.
    NotOwner,
    /// The minimum hold was over: the lock is deleted.
    Deleted,
    /// The lease now ends when the minimum hold does.
    HeldUntilMinimum,
}

impl Backend {
    /// Releases, but keeps the lock until `at_ms + hold` on the store's clock.
    pub(crate) async fn release_after_hold(
        &self,
        keys: &Keys,
        token: &str,
        at_ms: u64,
        hold: Duration,
        fence: u64,
        limit: Duration,
    ) -> Result<HoldRelease, OpError> {
        match self {
            Self::Redis(b) => b.release_after_hold(keys, token, at_ms, hold, limit).await,
            Self::Memory(b) => Ok(b.release_after_hold(keys, token, at_ms, hold)),
            Self::Quorum(b) => {
                b.release_after_hold(keys, token, at_ms, hold, fence, limit)
                    .await
            }
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
        let k = Keys::new("lock:", "order:42".into());
        assert_eq!(k.lock, "lock:{order:42}");
        assert_eq!(k.fence, "lock:{order:42}:fence");
    }

    #[test]
    fn a_lock_key_never_equals_another_keys_fence() {
        // `P{K}` ends in '}', `P{K}:fence` ends in 'e'.
        let a = Keys::new("lock:", "x}:fence".into());
        let b = Keys::new("lock:", "x".into());
        assert_ne!(a.lock, b.fence);
    }
}
