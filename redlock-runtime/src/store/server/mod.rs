//! One Redis server: its connection lanes (one owner's commands on one
//! connection, `WAIT` on connections of its own: see [`conn`]), and a
//! command's way there and back within its time limit. What the commands
//! are is the callers' business (`backend/`); nothing here names a lock.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::OpError;
use crate::error::ConnectFailure;
use crate::scripts::Publish;
use crate::util::millis_ceil;
use coalesce::Coalescer;

mod bounded;
pub(crate) mod call;
pub(crate) mod coalesce;
pub(crate) mod commands;
pub(crate) mod conn;
mod ping;
pub(crate) mod pipeline;
pub(crate) use ping::NodePing;
pub use ping::NodeRole;
pub(crate) mod resend;
pub(crate) mod sized;

use conn::{Lane, Link};

pub(crate) struct RedisBackend {
    /// Every command that needs no `WAIT`.
    plain: Lane,
    /// With replicas: the writes followed by `WAIT` (acquire, renewal).
    waiting: Option<Lane>,
    /// `WAIT replicas timeout` after each acquire and renewal.
    pub(crate) replicas: Option<Replicas>,
    /// The fencing counters' retention (ms): see [`crate::scripts`].
    pub(crate) fence_retention_ms: u64,
    /// Redlock: this node grants nothing until this long after it started.
    pub(crate) restart_delay: Option<Duration>,
    /// How releases publish their wake-ups (`SPUBLISH` on a cluster node).
    pub(crate) publish: Publish,
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
pub(crate) enum On {
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
            .map(|_| Arc::new(Coalescer::new(Arc::clone(&on))))
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

    /// Whether a lock's release uses the server's conditional delete where
    /// it has one, instead of the script (see [`commands`]); on unless
    /// turned off here.
    pub(crate) fn conditional_commands(mut self, on: bool) -> Self {
        self.plain = self.plain.probing_commands(on);
        self.waiting = self.waiting.map(|lane| lane.probing_commands(on));
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
    pub(crate) fn with_wait(&self, limit: Duration) -> Duration {
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

    /// Whether `owner`'s connection of lane `on`, if made yet, has the
    /// conditional commands (see [`commands`]).
    pub(crate) fn conditional_on(&self, on: On, owner: &str) -> bool {
        let lane = self.lane(on);
        lane.cached(lane.slot_of(Some(owner)))
            .is_some_and(|link| link.commands().conditional_delete().is_some())
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
    pub(crate) async fn run<T, F, Fut>(
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
        // Whether the time limit, should it run out, ran out while waiting
        // for a connection (then nothing was sent, and the error says why
        // no connection came) or while waiting for the answer.
        let connecting = AtomicBool::new(true);
        let call = async {
            let (link, cached) = lane.link(i).await?;
            connecting.store(false, Ordering::Relaxed);
            // The command gets the link itself: a handle is a few shared
            // pointers, cloned and dropped per call, so the slot is named
            // by its id alone from here on.
            let id = link.id();
            match f(with_asking(link)).await {
                Err(e) if is_dead_connection(&e) => {
                    lane.forget(i, id);
                    if !cached {
                        return Err(op_error(e, limit));
                    }
                    Box::pin(resend_on_new(lane, i, &f, &connecting, limit, &e)).await
                }
                other => other.map_err(|e| op_error(e, limit)),
            }
        };
        match tokio::time::timeout(limit, call).await {
            Ok(result) => result,
            Err(_) => Err(ran_out(lane, &connecting, limit)),
        }
    }

    /// [`run`](Self::run) for a call `f` whose every await is a command
    /// sent on its link (no batch, no sleep): bounded by the driver's
    /// response timeout instead of a timer of its own where its link is
    /// cached and multiplexed (see [`bounded`]), else as `run` does.
    pub(crate) async fn run_commands<T, F, Fut>(
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
        let deadline = tokio::time::Instant::now() + limit;
        let link = match lane.cached(i).map(|link| link.bounded(deadline)) {
            Some(Ok(link)) => link,
            // To be made, or a `ConnectionManager`'s: under a timer (boxed:
            // a call on a cached connection carries none of it).
            Some(Err(_)) | None => return Box::pin(self.run(on, owner, limit, f)).await,
        };
        let id = link.id();
        match f(with_asking(link)).await {
            Err(e) if is_dead_connection(&e) => {
                lane.forget(i, id);
                // The new connection is made under a timer: a pool's
                // check-out is no command.
                let connecting = AtomicBool::new(true);
                let resend = resend_on_new(lane, i, &f, &connecting, limit, &e);
                match Box::pin(tokio::time::timeout_at(deadline, resend)).await {
                    Ok(result) => result,
                    Err(_) => Err(ran_out(lane, &connecting, limit)),
                }
            }
            other => other.map_err(|e| op_error(e, limit)),
        }
    }
}

/// `link`, following an `ASK` redirect when the call is inside one (see
/// [`conn::Conn::Asking`]).
fn with_asking(link: Link) -> Link {
    if conn::asking() { link.asking() } else { link }
}

/// A call's one re-send, on a new connection of slot `i`, after its cached
/// one was found dead (`e`): within what is left of its time limit.
async fn resend_on_new<T, F, Fut>(
    lane: &Lane,
    i: usize,
    f: &F,
    connecting: &AtomicBool,
    limit: Duration,
    e: &redis::RedisError,
) -> Result<T, OpError>
where
    F: Fn(Link) -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    tracing::debug!(target: "redlock", error = %e, "cached Redis connection is dead; retrying on a new one");
    // The first send may have run before the connection died.
    resend::note();
    connecting.store(true, Ordering::Relaxed);
    let (link, _) = lane.link(i).await?;
    connecting.store(false, Ordering::Relaxed);
    let id = link.id();
    let result = f(with_asking(link)).await;
    if let Err(e) = &result
        && is_dead_connection(e)
    {
        lane.forget(i, id);
    }
    result.map_err(|e| op_error(e, limit))
}

/// The error of a call whose time limit ran out: why no connection came
/// when it was `connecting`, else a timeout.
fn ran_out(lane: &Lane, connecting: &AtomicBool, limit: Duration) -> OpError {
    if connecting.load(Ordering::Relaxed) {
        // The limit ran out, so the call started at least `limit` ago: the
        // connection errors seen since then are the ones it waited through.
        // (Read here, not at every start: a clock read per call for the
        // rare case.)
        let started = Instant::now()
            .checked_sub(limit)
            .unwrap_or_else(Instant::now);
        lane.no_connection(started, limit)
    } else {
        OpError::Timeout(limit)
    }
}

impl RedisBackend {
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
