//! One Redis server: the lock commands, over the connection lanes of
//! [`conn`](super::conn) (one owner's commands on one connection, `WAIT`
//! on connections of its own).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::call::ScriptCall;
use super::conn::{Lane, Link};
use super::{Acquire, AcquireReply, End, Ended, GiveBack, Keys, Kind, OpError, Renewal};
use crate::error::ConnectFailure;
use crate::scripts::{self, Publish};
use crate::util::millis_ceil;

mod coalesce;
mod force;
mod inspect;
mod plain;
mod renew;
mod sync;

use coalesce::Coalescer;

pub(crate) struct RedisBackend {
    /// Every command that needs no `WAIT`.
    plain: Lane,
    /// With replicas: the writes followed by `WAIT` (acquire, renewal).
    waiting: Option<Lane>,
    /// `WAIT replicas timeout` after each acquire and renewal.
    pub(super) replicas: Option<Replicas>,
    /// The fencing counters' retention (ms): see [`crate::scripts`].
    pub(super) fence_retention_ms: u64,
    /// Redlock: this node grants nothing until this long after it started.
    restart_delay: Option<Duration>,
    /// How releases publish their wake-ups (`SPUBLISH` on a cluster node).
    pub(super) publish: Publish,
    /// One per connection slot of the plain lane: concurrent acquires and
    /// releases sent as one script call (see [`coalesce`]); none where
    /// calls are never coalesced (a cluster node, a Redlock node, or
    /// turned off).
    coalescers: Box<[Arc<Coalescer>]>,
}

/// How many replicas must acknowledge a lock's writes, and how long to wait.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replicas {
    pub(crate) count: u32,
    pub(crate) timeout: Duration,
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("plain", &self.plain)
            .field("waiting", &self.waiting)
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

/// Which lane a command goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum On {
    Plain,
    /// The lane of writes followed by `WAIT` (the plain one without replicas).
    Waiting,
}

impl RedisBackend {
    /// Commands go over `plain`; with replicas, acquires and renewals over
    /// `waiting` (which must not share connections with `plain`).
    pub(crate) fn new(
        plain: Lane,
        waiting: Option<(Lane, Replicas)>,
        fence_retention: Duration,
    ) -> Self {
        let (waiting, replicas) = waiting.map_or((None, None), |(lane, r)| (Some(lane), Some(r)));
        let fence_retention_ms = millis_ceil(fence_retention).max(1);
        let on = Arc::new(AtomicBool::new(true));
        let coalescers = (0..plain.slot_count())
            .map(|_| Arc::new(Coalescer::new(fence_retention_ms, Arc::clone(&on))))
            .collect();
        Self {
            plain,
            waiting,
            replicas,
            fence_retention_ms,
            restart_delay: None,
            publish: Publish::Plain,
            coalescers,
        }
    }

    /// A Redis Cluster master: releases publish with `SPUBLISH`, which
    /// stays on the shard that owns the lock's slot; calls are never
    /// coalesced (a batch's keys would span slots).
    pub(crate) fn sharded(mut self) -> Self {
        self.publish = Publish::Sharded;
        self.coalescing(false)
    }

    /// Whether concurrent acquires and releases go out as one script call
    /// (see [`coalesce`]); on unless turned off here.
    pub(crate) fn coalescing(mut self, on: bool) -> Self {
        if !on {
            self.coalescers = Box::new([]);
        }
        self
    }

    /// Redlock: grants nothing until `delay` after the node started (its
    /// lanes must learn boot times).
    pub(crate) fn with_restart_delay(mut self, delay: Option<Duration>) -> Self {
        self.restart_delay = delay;
        self
    }

    /// The time one acquire or renewal may take: `limit`, plus the replica
    /// wait when there is one.
    pub(super) fn with_wait(&self, limit: Duration) -> Duration {
        limit + self.replicas.map_or(Duration::ZERO, |r| r.timeout)
    }

    pub(crate) fn pool(&self) -> Option<&bb8::Pool<bb8_redis::RedisConnectionManager>> {
        self.plain.pool()
    }

    fn lane(&self, on: On) -> &Lane {
        match (on, &self.waiting) {
            (On::Waiting, Some(lane)) => lane,
            _ => &self.plain,
        }
    }

    /// Runs one command within `limit`, on `owner`'s connection of the lane
    /// (round robin without an owner).
    ///
    /// A cached connection found dead (Redis restarted, or the connection
    /// was cut while idle) is let go and the command sent once more on a new
    /// one, within the same limit: every command here is safe to repeat
    /// (the scripts check the owner token, and an acquire repeated with its
    /// own token finds the lock already its own). A slow answer keeps the
    /// connection (see [`conn`](super::conn)).
    pub(super) async fn run<T, F, Fut>(
        &self,
        on: On,
        owner: Option<&str>,
        limit: Duration,
        f: F,
    ) -> Result<T, OpError>
    where
        F: Fn(Link) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let lane = self.lane(on);
        let i = lane.slot_of(owner);
        let started = Instant::now();
        // Whether the time limit, should it run out, ran out while waiting
        // for a connection (then nothing was sent, and the error says why
        // no connection came) or while waiting for the answer.
        let connecting = AtomicBool::new(true);
        let call = async {
            let (link, cached) = lane.link(i).await?;
            connecting.store(false, Ordering::Relaxed);
            let asking = super::conn::asking();
            let with_asking = |link: Link| if asking { link.asking() } else { link };
            match f(with_asking(link.clone())).await {
                Err(e) if is_dead_connection(&e) => {
                    lane.forget(i, &link);
                    if !cached {
                        return Err(op_error(e, limit));
                    }
                    tracing::debug!(target: "redlock", error = %e, "cached Redis connection is dead; retrying on a new one");
                    // The first send may have run before the connection died.
                    super::resend::note();
                    connecting.store(true, Ordering::Relaxed);
                    let (link, _) = lane.link(i).await?;
                    connecting.store(false, Ordering::Relaxed);
                    let result = f(with_asking(link.clone())).await;
                    if let Err(e) = &result
                        && is_dead_connection(e)
                    {
                        lane.forget(i, &link);
                    }
                    result.map_err(|e| op_error(e, limit))
                }
                other => other.map_err(|e| op_error(e, limit)),
            }
        };
        match tokio::time::timeout(limit, call).await {
            Ok(result) => result,
            Err(_) if connecting.load(Ordering::Relaxed) => Err(lane.no_connection(started, limit)),
            Err(_) => Err(OpError::Timeout(limit)),
        }
    }

    /// One acquire attempt (see [`scripts::ACQUIRE`]), followed by `WAIT`
    /// with replicas. Too few acknowledgements are an error whose outcome
    /// counts as unknown: the lock may be ours on the primary, and the
    /// caller gives it back (or takes it up with the same token).
    pub(crate) async fn acquire(
        &self,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire {
            keys,
            token,
            ttl,
            want_time,
            line,
            fenced,
            fresh,
        } = *request;
        if matches!(keys.kind, Kind::Read | Kind::Write | Kind::Permits { .. }) {
            return self.acquire_shared(request, limit).await;
        }
        // A lock taken in one step of its own, which may be coalesced: a
        // plain `SET NX` (no token now) or the acquire script (a token).
        let simple = line.is_none()
            && !want_time
            && keys.kind == Kind::Lock
            && self.replicas.is_none()
            && self.restart_delay.is_none();
        if simple {
            return self
                .acquire_simple(keys, token, ttl, !fenced && fresh, limit)
                .await;
        }
        if let Some(presence) = line {
            return self
                .acquire_fair(keys, token, ttl, presence, want_time, limit)
                .await;
        }
        let ttl_ms = millis_ceil(ttl);
        let retention = self.fence_retention_ms;
        let delay_ms = self.restart_delay.map(millis_ceil);
        let reply: Vec<i64> = self
            .acknowledged_write(
                token,
                limit,
                |r: &Vec<i64>| took(r),
                |link| {
                    let not_before = match (delay_ms, link.boot_ms) {
                        (Some(delay), Some(boot)) => boot.saturating_add(delay),
                        _ => 0,
                    };
                    ScriptCall::new(scripts::ACQUIRE.on(self.publish))
                        .key(&keys.lock)
                        .key(&keys.fence)
                        .key(&keys.waited)
                        .arg(token)
                        .arg(ttl_ms)
                        .arg(retention)
                        .arg(if want_time { "1" } else { "0" })
                        .arg(not_before)
                },
            )
            .await?;
        if reply.first() == Some(&-4) {
            let left = reply.get(1).copied().unwrap_or(0).max(0);
            return Err(OpError::Restarted {
                left: Duration::from_millis(left.unsigned_abs()),
            });
        }
        Ok(acquire_reply(&reply))
    }

    /// The lane an acquire of this backend went on: a give-back of an
    /// acquire whose answer was lost must follow it on its connection.
    fn acquire_lane(&self) -> On {
        On::Waiting
    }

    /// Gives back what an acquire that did not return a guard may hold:
    /// the lock, and (fair) its place in the line. Sent on the connection
    /// of that acquire, so it lands after it.
    pub(crate) async fn give_back(
        &self,
        give_back: &GiveBack<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let GiveBack { keys, token, fair } = *give_back;
        match keys.kind {
            Kind::Record => {
                return self
                    .release_record(self.acquire_lane(), keys, token, limit)
                    .await;
            }
            Kind::Read | Kind::Write | Kind::Permits { .. } => {
                return self
                    .release_shared(self.acquire_lane(), keys, token, limit)
                    .await;
            }
            Kind::Lock | Kind::Latch => {}
        }
        let on = self.acquire_lane();
        // An acquire of this token still queued or in a batch: the release
        // must land after it.
        self.settled(on, token, limit).await?;
        if fair {
            // One step: a release granted to this token as it left (its
            // place was first in line) is handed on as well.
            self.leave_queue_on(on, keys, token, limit).await
        } else {
            self.release_on(on, keys, token, 0, limit).await
        }
    }

    /// Ends a held lock: deletes it (a fair one wakes the first waiter in
    /// line), or with a minimum hold not yet over on Redis's clock, cuts
    /// the lease to what is left of it. A single Redis issued the fencing
    /// token from this very counter: nothing to raise.
    pub(crate) async fn end(&self, end: &End<'_>, limit: Duration) -> Result<Ended, OpError> {
        let End {
            keys,
            token,
            fair,
            hold,
            fence,
        } = *end;
        let shared = matches!(keys.kind, Kind::Read | Kind::Write | Kind::Permits { .. });
        if keys.kind == Kind::Record || shared {
            let released = if shared {
                self.release_shared(On::Plain, keys, token, limit).await?
            } else {
                self.release_record(On::Plain, keys, token, limit).await?
            };
            return Ok(if released {
                Ended::Deleted
            } else {
                Ended::NotOwner
            });
        }
        let released = match hold {
            Some((at_ms, min)) => {
                return self
                    .release_after_hold(keys, token, at_ms, min, limit)
                    .await;
            }
            None if fair => self.release_fair_on(On::Plain, keys, token, limit).await?,
            // A lock with a fencing token: its release is coalesced as its
            // acquire was (see `coalesce`).
            None => {
                self.release_simple(On::Plain, keys, token, fence > 0, limit)
                    .await?
            }
        };
        Ok(if released {
            Ended::Deleted
        } else {
            Ended::NotOwner
        })
    }

    async fn release_after_hold(
        &self,
        keys: &Keys,
        token: &str,
        at_ms: u64,
        hold: Duration,
        limit: Duration,
    ) -> Result<Ended, OpError> {
        let hold_ms = millis_ceil(hold);
        let queue = keys.queue();
        let done: i64 = self
            .run(On::Plain, Some(token), limit, |mut link| {
                let queue = &queue;
                async move {
                    scripts::RELEASE_AFTER_HOLD
                        .on(self.publish)
                        .key(&keys.lock)
                        .key(queue)
                        .arg(token)
                        .arg(at_ms)
                        .arg(hold_ms)
                        .invoke_async(&mut link.conn)
                        .await
                }
            })
            .await?;
        Ok(match done {
            1 => Ended::Deleted,
            2 => Ended::HeldUntilMinimum,
            _ => Ended::NotOwner,
        })
    }

    pub(crate) async fn extend(
        &self,
        renewal: &Renewal<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let Renewal { keys, token, ttl } = *renewal;
        let ttl_ms = millis_ceil(ttl);
        let (first, second) = keys.renewed();
        let done: i64 = self
            .acknowledged_write(
                token,
                limit,
                |done| *done == 1,
                |_| {
                    let call = ScriptCall::new(renew::renew_script(keys.kind)).key(first);
                    match second {
                        Some(second) => call.key(second),
                        None => call,
                    }
                    .arg(token)
                    .arg(ttl_ms)
                    .arg(0)
                },
            )
            .await?;
        Ok(done == 1)
    }

    /// Releases the lock if `token` holds it, and raises the fencing
    /// counter to `fence` (`0`: leave it).
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        token: &str,
        fence: u64,
        limit: Duration,
    ) -> Result<bool, OpError> {
        self.release_on(On::Plain, keys, token, fence, limit).await
    }

    async fn release_on(
        &self,
        on: On,
        keys: &Keys,
        token: &str,
        fence: u64,
        limit: Duration,
    ) -> Result<bool, OpError> {
        if fence == 0 {
            return self.release_simple(on, keys, token, false, limit).await;
        }
        let retention = self.fence_retention_ms;
        let done: i64 = self
            .run(on, Some(token), limit, |mut link| async move {
                ScriptCall::new(scripts::RELEASE.on(self.publish))
                    .key(&keys.lock)
                    .key(&keys.waited)
                    .key(&keys.fence)
                    .arg(token)
                    .arg(fence)
                    .arg(retention)
                    .invocation()
                    .invoke_async(&mut link.conn)
                    .await
            })
            .await?;
        Ok(done == 1)
    }

    /// The server's version (`INFO server`), when it says.
    pub(crate) async fn version(&self) -> Result<Option<String>, OpError> {
        let info: String = self
            .run(
                On::Plain,
                None,
                Duration::from_millis(500),
                |mut link| async move {
                    redis::cmd("INFO")
                        .arg("server")
                        .query_async(&mut link.conn)
                        .await
                },
            )
            .await?;
        Ok(info
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .map(|v| v.trim().to_owned()))
    }

    /// `Some(policy)` when Redis may evict keys: a `maxmemory` limit with a
    /// `maxmemory-policy` other than `noeviction`.
    pub(crate) async fn eviction_policy(&self) -> Result<Option<String>, OpError> {
        let limit = Duration::from_millis(500);
        let (maxmemory, policy): (Vec<String>, Vec<String>) = self
            .run(On::Plain, None, limit, |mut link| async move {
                redis::pipe()
                    .cmd("CONFIG")
                    .arg("GET")
                    .arg("maxmemory")
                    .cmd("CONFIG")
                    .arg("GET")
                    .arg("maxmemory-policy")
                    .query_async(&mut link.conn)
                    .await
            })
            .await?;
        let limited = maxmemory.get(1).is_some_and(|v| v != "0");
        Ok(match policy.get(1) {
            Some(policy) if limited && policy != "noeviction" => Some(policy.clone()),
            _ => None,
        })
    }

    /// A connection failure no retry fixes (a wrong password, a TLS
    /// failure) seen on one of this server's lanes within the last
    /// connection timeout, with no connection made on it since.
    pub(crate) fn permanent_failure(&self) -> Option<(ConnectFailure, String)> {
        self.plain
            .permanent_failure()
            .or_else(|| self.waiting.as_ref().and_then(Lane::permanent_failure))
    }

    /// Takes a connection now, so a client that builds successfully has
    /// reached Redis once.
    pub(crate) async fn check(&self) -> Result<(), OpError> {
        self.plain.link(0).await.map(drop)
    }
}

/// A driver error as a backend failure.
fn op_error(e: redis::RedisError, limit: Duration) -> OpError {
    if e.is_timeout() {
        // The driver's own response timeout ran out first.
        OpError::Timeout(limit)
    } else {
        OpError::Redis(e)
    }
}

/// The connection was gone before the command could have been answered
/// (closed, reset, refused): nothing of it reached Redis, or it is safe to
/// repeat anyway.
fn is_dead_connection(e: &redis::RedisError) -> bool {
    e.is_connection_dropped() || e.is_connection_refusal() || e.is_unrecoverable_error()
}

/// Whether an acquire script's reply says the lock was taken (a write to
/// acknowledge).
pub(super) fn took(reply: &[i64]) -> bool {
    reply.first() == Some(&1)
}

/// Reads the reply of the acquire scripts: `{1, fence[, now_ms]}` or
/// `{0, pttl}` (-1: no expiry, not one of ours; -2: gone; -3: free, but
/// another waiter is first in line).
pub(super) fn acquire_reply(reply: &[i64]) -> AcquireReply {
    let value = |i: usize| reply.get(i).copied().unwrap_or(-1);
    if value(0) == 1 {
        AcquireReply::Acquired {
            fence: u64::try_from(value(1)).unwrap_or(0),
            at_ms: reply.get(2).and_then(|&t| u64::try_from(t).ok()),
        }
    } else {
        AcquireReply::Busy {
            pttl: u64::try_from(value(1)).ok().map(Duration::from_millis),
        }
    }
}
