//! The lock's one-step calls, which concurrent callers share (see
//! [`coalesce`](crate::store::server::coalesce)): the acquire, as a plain `SET key token
//! NX PX ttl` (the command rslock and the raw baseline send, with the
//! fencing token issued later, on first ask: see [`ISSUE_FENCE`])
//! or as the acquire script when the token is wanted now; and the
//! release.
//!
//! The plain `SET NX` is used for the first attempt of an acquire that
//! needs no token now. Any attempt after one whose outcome may be unknown
//! goes through the script instead, which finds its own token and keeps
//! the lock (a plain `SET NX` would see the lock as another owner's). A
//! user without `+@scripting` is refused that script: where the server has
//! the conditional commands, the acquire goes on with the conditional
//! attempt, which finds its own token as well (see
//! [`conditional`](super::conditional)); elsewhere the refusal is the
//! answer (`tests/conditional.rs`, "an acquire whose answer is lost").

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::Value;

use super::{Call, ISSUE_FENCE, IssueFence, LockKeys};
use crate::primitive::lease::{AcquireReply, acquire_reply};
use crate::store::server::{On, RedisBackend};
use crate::store::{OpError, refused_a_command};
use crate::util::millis_ceil;

/// An acquire attempt's answer: `SET NX`'s alone (OK or nil) or in a batch
/// (1 or 0), or the acquire script's.
pub(crate) fn read_acquire(answer: Value) -> Result<AcquireReply, OpError> {
    match answer {
        Value::Okay | Value::Int(1) => Ok(AcquireReply::Acquired {
            fence: 0,
            at_ms: None,
        }),
        Value::Nil | Value::Int(0) => Ok(AcquireReply::Busy { pttl: None }),
        answer => {
            let reply: Vec<i64> =
                redis::from_redis_value(answer).map_err(|e| OpError::Reply(e.to_string()))?;
            Ok(acquire_reply(&reply))
        }
    }
}

impl RedisBackend {
    /// Completes once no acquire of `token` on lane `on` is queued or in a
    /// batch without an answer (within `limit`): a release sent after it
    /// lands after them.
    pub(crate) async fn settled(
        &self,
        on: On,
        token: &str,
        limit: Duration,
    ) -> Result<(), OpError> {
        let Some(coalescer) = self.coalescer(on, token) else {
            return Ok(());
        };
        tokio::time::timeout(limit, coalescer.settled(token))
            .await
            .map_err(|_| OpError::Timeout(limit))
    }

    /// One acquire attempt of a lock taken in one step: a plain `SET NX`
    /// when `plain`, else the acquire script (which issues the token). A
    /// resend on a new connection (the cached one was found dead: the
    /// first may have landed) runs the script. The script is coalesced
    /// with concurrent ones; the plain `SET NX`, already the cheapest
    /// command, is not (see [`coalesce`](crate::store::server::coalesce)).
    pub(crate) async fn acquire_simple(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        fenced: bool,
        fresh: bool,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        if !fenced && !fresh && self.conditional_on(On::Waiting, token) {
            // A later attempt without a token: no script where the server
            // has the conditional commands.
            // Boxed: a first attempt carries none of it.
            return Box::pin(self.acquire_conditional(keys, token, ttl, limit)).await;
        }
        let plain = !fenced && fresh;
        let ttl_ms = millis_ceil(ttl);
        let retention_ms = self.fence_retention_ms;
        let sent = AtomicBool::new(false);
        let started = Instant::now();
        let answer = self
            .one_step(On::Waiting, token, limit, !plain, || {
                let again = sent.swap(true, Ordering::Relaxed);
                if plain && !again {
                    Call::SetNx {
                        lock: keys.lock.as_str(),
                        token,
                        ttl_ms,
                    }
                } else {
                    Call::Acquire {
                        lock: keys.lock.as_str(),
                        fence: &keys.fence,
                        waited: &keys.waited,
                        token,
                        ttl_ms,
                        retention_ms,
                    }
                }
            })
            .await;
        match answer {
            Ok(answer) => read_acquire(answer),
            // The script (a re-send after a lost answer, or an attempt sent
            // before the connection's probe) refused to a user without
            // `+@scripting`, where the conditional attempt is allowed: that
            // one, not a refusal for a lock the first send may have taken.
            // Boxed: nearly every acquire carries none of it.
            Err(OpError::Redis(e))
                if !fenced && refused_a_command(&e) && self.conditional_on(On::Waiting, token) =>
            {
                let left = limit
                    .saturating_sub(started.elapsed())
                    .max(Duration::from_millis(1));
                Box::pin(self.acquire_conditional(keys, token, ttl, left)).await
            }
            Err(e) => Err(e),
        }
    }

    /// Releases the lock if `token` holds it, waking the waiters: with
    /// `coalesce` (a lock with a fencing token), the release script
    /// coalesced with concurrent calls; else alone, without a script where
    /// the server allows (see [`conditional`](super::conditional)).
    pub(crate) async fn release_simple(
        &self,
        on: On,
        keys: &LockKeys,
        token: &str,
        coalesce: bool,
        limit: Duration,
    ) -> Result<bool, OpError> {
        if !coalesce {
            // Alone: the server's conditional delete where it has one.
            return self.release_plain(on, keys, token, false, limit).await;
        }
        let answer = self
            .one_step(on, token, limit, coalesce, || Call::Release {
                lock: keys.lock.as_str(),
                waited: &keys.waited,
                token,
                retention_ms: self.fence_retention_ms,
            })
            .await?;
        Ok(answer == Value::Int(1))
    }

    /// Issues the fencing token of a lock `token` holds (see
    /// [`ISSUE_FENCE`]); with replicas, acknowledged like an
    /// acquire.
    pub(crate) async fn issue_fence(
        &self,
        issue: &IssueFence<'_>,
        limit: Duration,
    ) -> Result<Option<u64>, OpError> {
        let IssueFence { keys, token } = *issue;
        let retention = self.fence_retention_ms;
        let fence: i64 = self
            .acknowledged_write(
                token,
                limit,
                |fence| *fence > 0,
                |_| {
                    crate::store::server::call::ScriptCall::new(ISSUE_FENCE.on(self.publish))
                        .key(&keys.lock)
                        .key(&keys.fence)
                        .arg(token)
                        .arg(retention)
                },
            )
            .await?;
        Ok(u64::try_from(fence).ok().filter(|&f| f > 0))
    }
}
