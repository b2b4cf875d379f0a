//! One Redis server behind a bb8 pool.
//!
//! Connections from `bb8-redis` are multiplexed: one connection carries many
//! commands at once, and a handle to it can be cloned. The backend therefore
//! does not check a connection out per command (which would cost a PING per
//! command and cap concurrency at the pool size): it keeps a few cloned
//! handles ("slots") and spreads commands over them round robin. A slot is
//! filled by checking a connection out, cloning its handle and returning it
//! to the pool at once, so the pool can still be shared with other users.
//! A slot whose connection fails is emptied; the next command checks out
//! again, and the pool's check-out test (PING) replaces dead connections.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bb8::{ErrorSink, Pool, RunError};
use bb8_redis::RedisConnectionManager;
use redis::aio::MultiplexedConnection;

use super::{AcquireReply, HoldRelease, Keys, OpError, Renewal};
use crate::scripts;
use crate::util::millis_ceil;

type Slot = Mutex<Option<MultiplexedConnection>>;

pub(crate) struct RedisBackend {
    pool: Pool<RedisConnectionManager>,
    slots: Box<[Slot]>,
    next: AtomicUsize,
    last_error: LastError,
    /// `WAIT replicas timeout` after each acquire and renewal.
    replicas: Option<Replicas>,
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
            .field("pool", &self.pool.state())
            .field("slots", &self.slots.len())
            .finish()
    }
}

/// Remembers the pool's last connection error, which bb8 otherwise hides
/// behind a bare "timed out".
#[derive(Debug, Clone, Default)]
pub(crate) struct LastError(Arc<Mutex<Option<String>>>);

impl LastError {
    pub(crate) fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ErrorSink<redis::RedisError> for LastError {
    fn sink(&self, error: redis::RedisError) {
        tracing::debug!(target: "redlock", %error, "Redis connection attempt failed");
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
    }

    fn boxed_clone(&self) -> Box<dyn ErrorSink<redis::RedisError>> {
        Box::new(self.clone())
    }
}

impl RedisBackend {
    /// Commands are spread over `slots` connection handles taken from `pool`.
    pub(crate) fn new(
        pool: Pool<RedisConnectionManager>,
        slots: usize,
        last_error: LastError,
    ) -> Self {
        let slots = (0..slots.max(1)).map(|_| Mutex::new(None)).collect();
        Self {
            pool,
            slots,
            next: AtomicUsize::new(0),
            last_error,
            replicas: None,
        }
    }

    /// Waits for `replicas` after every acquire and renewal.
    pub(crate) fn with_replicas(mut self, replicas: Option<Replicas>) -> Self {
        self.replicas = replicas;
        self
    }

    /// The time one acquire or renewal may take: `limit`, plus the replica
    /// wait when there is one.
    fn with_wait(&self, limit: Duration) -> Duration {
        limit + self.replicas.map_or(Duration::ZERO, |r| r.timeout)
    }

    pub(crate) fn pool(&self) -> &Pool<RedisConnectionManager> {
        &self.pool
    }

    /// A connection for one command: a clone of slot `i`'s multiplexed
    /// connection, filling the slot from the pool when it is empty.
    async fn connection(&self, i: usize) -> Result<MultiplexedConnection, OpError> {
        self.connection_from(i).await.map(|(conn, _)| conn)
    }

    /// As [`connection`](Self::connection), and whether the handle was
    /// cached in the slot (rather than just checked out).
    async fn connection_from(&self, i: usize) -> Result<(MultiplexedConnection, bool), OpError> {
        if let Some(conn) = self.lock_slot(i).as_ref() {
            return Ok((conn.clone(), true));
        }
        let pooled = self.pool.get().await.map_err(|e| match e {
            RunError::User(e) => OpError::Redis(e),
            RunError::TimedOut => OpError::Pool {
                timeout: self.pool.config().connection_timeout,
                last_error: self.last_error.get(),
            },
        })?;
        let conn = (*pooled).clone();
        drop(pooled);
        *self.lock_slot(i) = Some(conn.clone());
        Ok((conn, false))
    }

    fn lock_slot(&self, i: usize) -> std::sync::MutexGuard<'_, Option<MultiplexedConnection>> {
        self.slots[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one command on a slot's connection within `limit`; a connection
    /// that fails or does not answer is let go so the next command gets a
    /// fresh one.
    ///
    /// A cached connection found dead (Redis restarted, or the connection
    /// was cut while idle) is replaced and the command sent once more,
    /// within the same limit: every command here is safe to repeat (the
    /// scripts check the owner token, and an acquire repeated with its own
    /// token finds the lock already its own).
    async fn run<T, F, Fut>(&self, limit: Duration, f: F) -> Result<T, OpError>
    where
        F: Fn(MultiplexedConnection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let call = async {
            let (conn, cached) = self.connection_from(i).await?;
            let first = f(conn).await;
            let conn = match first {
                Err(e) if cached && is_dead_connection(&e) => {
                    tracing::debug!(target: "redlock", error = %e, "cached Redis connection is dead; retrying on a new one");
                    self.lock_slot(i).take();
                    self.connection(i).await?
                }
                other => return other.map_err(|e| op_error(e, limit)),
            };
            f(conn).await.map_err(|e| op_error(e, limit))
        };
        let result = match tokio::time::timeout(limit, call).await {
            Ok(result) => result,
            Err(_) => Err(OpError::Timeout(limit)),
        };
        if let Err(e) = &result
            && e.outcome_unknown()
        {
            // The pool's check-out test (PING) discards the connection if it
            // is really dead.
            self.lock_slot(i).take();
        }
        result
    }

    pub(crate) async fn acquire(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        want_time: bool,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let ttl_ms = millis_ceil(ttl);
        let replicas = self.replicas;
        let (reply, acked): (Vec<i64>, Option<i64>) = self
            .run(self.with_wait(limit), |mut conn| async move {
                let reply: Vec<i64> = scripts::ACQUIRE
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .arg(token)
                    .arg(ttl_ms)
                    .arg(if want_time { "1" } else { "0" })
                    .invoke_async(&mut conn)
                    .await?;
                let acked = match replicas {
                    // WAIT counts the writes of this connection: the
                    // script's SET and INCR were the last ones.
                    Some(r) if reply.first() == Some(&1) => {
                        Some(wait_replicas(&mut conn, r).await?)
                    }
                    _ => None,
                };
                Ok((reply, acked))
            })
            .await?;
        if let (Some(r), Some(acked)) = (replicas, acked)
            && acked < i64::from(r.count)
        {
            // Not on enough replicas: a failover now could lose the lock, so
            // it is given back rather than held.
            let _ = self.release(keys, token, limit).await;
            return Err(OpError::Replicas {
                wanted: r.count,
                acknowledged: u32::try_from(acked.max(0)).unwrap_or(0),
                timeout: r.timeout,
            });
        }
        Ok(acquire_reply(&reply))
    }

    /// Redlock with a restart delay: one node's acquire, refused while the
    /// node is younger (since it last lost its data) than `delay`.
    pub(crate) async fn acquire_after_epoch(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        epoch_key: &str,
        delay: Duration,
        limit: Duration,
    ) -> Result<Result<AcquireReply, Duration>, OpError> {
        let ttl_ms = millis_ceil(ttl);
        let delay_ms = millis_ceil(delay);
        let reply: Vec<i64> = self
            .run(limit, |mut conn| async move {
                scripts::ACQUIRE_AFTER_EPOCH
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .key(epoch_key)
                    .arg(token)
                    .arg(ttl_ms)
                    .arg(delay_ms)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        if reply.first() == Some(&-4) {
            let left = reply.get(1).copied().unwrap_or(0).max(0);
            return Ok(Err(Duration::from_millis(left.unsigned_abs())));
        }
        Ok(Ok(acquire_reply(&reply)))
    }

    /// Redlock's second fencing phase: raises the counter to `fence`.
    pub(crate) async fn max_assign(
        &self,
        keys: &Keys,
        fence: u64,
        limit: Duration,
    ) -> Result<u64, OpError> {
        let value: i64 = self
            .run(limit, |mut conn| async move {
                scripts::MAX_ASSIGN
                    .key(&keys.fence)
                    .arg(fence)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(u64::try_from(value).unwrap_or(0))
    }

    pub(crate) async fn acquire_fair(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        presence: Duration,
        want_time: bool,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let (queue, waiters) = (keys.queue(), keys.waiters());
        let reply: Vec<i64> = self
            .run(limit, |mut conn| {
                let (queue, waiters) = (&queue, &waiters);
                async move {
                    scripts::FAIR_ACQUIRE
                        .key(&keys.lock)
                        .key(&keys.fence)
                        .key(queue)
                        .key(waiters)
                        .arg(token)
                        .arg(millis_ceil(ttl))
                        .arg(millis_ceil(presence))
                        .arg(if want_time { "1" } else { "0" })
                        .invoke_async(&mut conn)
                        .await
                }
            })
            .await?;
        Ok(acquire_reply(&reply))
    }

    pub(crate) async fn release_fair(
        &self,
        keys: &Keys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let queue = keys.queue();
        let done: i64 = self
            .run(limit, |mut conn| {
                let queue = &queue;
                async move {
                    scripts::FAIR_RELEASE
                        .key(&keys.lock)
                        .key(queue)
                        .arg(token)
                        .invoke_async(&mut conn)
                        .await
                }
            })
            .await?;
        Ok(done == 1)
    }

    pub(crate) async fn leave_queue(
        &self,
        keys: &Keys,
        token: &str,
        limit: Duration,
    ) -> Result<(), OpError> {
        let (queue, waiters) = (keys.queue(), keys.waiters());
        let _: i64 = self
            .run(limit, |mut conn| {
                let (queue, waiters) = (&queue, &waiters);
                async move {
                    scripts::FAIR_LEAVE
                        .key(&keys.lock)
                        .key(queue)
                        .key(waiters)
                        .arg(token)
                        .invoke_async(&mut conn)
                        .await
                }
            })
            .await?;
        Ok(())
    }

    pub(crate) async fn release_after_hold(
        &self,
        keys: &Keys,
        token: &str,
        at_ms: u64,
        hold: Duration,
        limit: Duration,
    ) -> Result<HoldRelease, OpError> {
        let hold_ms = millis_ceil(hold);
        let done: i64 = self
            .run(limit, |mut conn| async move {
                scripts::RELEASE_AFTER_HOLD
                    .key(&keys.lock)
                    .arg(token)
                    .arg(at_ms)
                    .arg(hold_ms)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(match done {
            1 => HoldRelease::Deleted,
            2 => HoldRelease::HeldUntilMinimum,
            _ => HoldRelease::NotOwner,
        })
    }

    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let ttl_ms = millis_ceil(ttl);
        let replicas = self.replicas;
        let (done, acked): (i64, Option<i64>) = self
            .run(self.with_wait(limit), |mut conn| async move {
                let done: i64 = scripts::EXTEND
                    .key(&keys.lock)
                    .arg(token)
                    .arg(ttl_ms)
                    .invoke_async(&mut conn)
                    .await?;
                let acked = match replicas {
                    Some(r) if done == 1 => Some(wait_replicas(&mut conn, r).await?),
                    _ => None,
                };
                Ok((done, acked))
            })
            .await?;
        if let (Some(r), Some(acked)) = (replicas, acked)
            && acked < i64::from(r.count)
        {
            return Err(OpError::Replicas {
                wanted: r.count,
                acknowledged: u32::try_from(acked.max(0)).unwrap_or(0),
                timeout: r.timeout,
            });
        }
        Ok(done == 1)
    }

    pub(crate) async fn extend_many(
        &self,
        items: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for r in items {
            pipe.cmd("EVALSHA")
                .arg(scripts::EXTEND.get_hash())
                .arg(1)
                .arg(&r.keys.lock)
                .arg(r.token)
                .arg(millis_ceil(r.ttl));
        }
        if let Some(r) = self.replicas {
            pipe.cmd("WAIT").arg(r.count).arg(millis_ceil(r.timeout));
        }
        let limit = self.with_wait(limit);
        let started = tokio::time::Instant::now();
        let send = |limit| {
            self.run(limit, |mut conn| {
                let pipe = &pipe;
                async move {
                    pipe.query_async::<Vec<redis::RedisResult<i64>>>(&mut conn)
                        .await
                }
            })
        };
        let mut answers = send(limit).await?;
        let no_script = |a: &redis::RedisResult<i64>| matches!(a, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript));
        if answers.iter().any(no_script) {
            // The script cache was flushed (or Redis restarted): load, resend.
            let left = limit
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1));
            self.run(left, |mut conn| async move {
                scripts::EXTEND.prepare_invoke().load_async(&mut conn).await
            })
            .await?;
            let left = limit
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1));
            answers = send(left).await?;
        }
        if let Some(r) = self.replicas {
            // The last answer is WAIT's: the renewals count only if enough
            // replicas have them.
            let acked = answers.pop().and_then(|a| a.ok()).unwrap_or(0);
            if acked < i64::from(r.count) {
                let acknowledged = u32::try_from(acked.max(0)).unwrap_or(0);
                return Ok(answers
                    .into_iter()
                    .map(|_| {
                        Err(OpError::Replicas {
                            wanted: r.count,
                            acknowledged,
                            timeout: r.timeout,
                        })
                    })
                    .collect());
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.map(|done| done == 1).map_err(OpError::Redis))
            .collect())
    }

    pub(crate) async fn release(
        &self,
        keys: &Keys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let done: i64 = self
            .run(limit, |mut conn| async move {
                scripts::RELEASE
                    .key(&keys.lock)
                    .arg(token)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(done == 1)
    }

    /// Takes a connection now, so a client that builds successfully has
    /// reached Redis once.
    pub(crate) async fn check(&self) -> Result<(), OpError> {
        self.connection(0).await.map(drop)
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

/// `WAIT count timeout` on the connection that made the writes.
async fn wait_replicas(conn: &mut MultiplexedConnection, r: Replicas) -> redis::RedisResult<i64> {
    redis::cmd("WAIT")
        .arg(r.count)
        .arg(millis_ceil(r.timeout))
        .query_async(conn)
        .await
}

/// Reads the reply of the acquire scripts: `{1, fence[, now_ms]}` or
/// `{0, pttl}` (-1: no expiry, not one of ours; -2: gone; -3: free, but
/// another waiter is first in line).
fn acquire_reply(reply: &[i64]) -> AcquireReply {
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
