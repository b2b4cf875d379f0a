//! A lock's verbs on one Redis server: its acquire by script (with its
//! fencing token, a minimum hold's clock, fair mode or a restart delay;
//! the one-step calls are `plain.rs`'s, and with replicas a lock that
//! needs no token now is `acknowledged.rs`'s), its give-back and its end.

use std::time::Duration;

use super::LockKeys;
use super::{ACQUIRE, RELEASE, RELEASE_AFTER_HOLD};
use crate::primitive::lease::{Acquire, AcquireReply, End, Ended, acquire_reply, took};
use crate::store::OpError;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

impl RedisBackend {
    /// One acquire attempt of a lock (see [`ACQUIRE`]), followed
    /// by `WAIT` with replicas. Too few acknowledgements are an error whose
    /// outcome counts as unknown: the lock may be ours on the primary, and
    /// the caller gives it back (or takes it up with the same token).
    pub(crate) async fn acquire_lock(
        &self,
        keys: &LockKeys,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire {
            token,
            ttl,
            fenced,
            fresh,
            ..
        } = *request;
        // A lock taken in one step of its own, which may be coalesced: a
        // plain `SET NX` (no token now) or the acquire script (a token).
        let simple = request.line.is_none()
            && !request.want_time
            && self.replicas.is_none()
            && self.restart_delay.is_none();
        if simple {
            return self
                .acquire_simple(keys, token, ttl, fenced, fresh, limit)
                .await;
        }
        // The rest boxed: the one-step acquire's future is the one every
        // lock pair carries.
        Box::pin(self.acquire_lock_otherwise(keys, request, limit)).await
    }

    /// [`acquire_lock`](Self::acquire_lock) of a lock not taken in one step
    /// of its own: with replicas, in fair mode, with a minimum hold or a
    /// restart delay.
    async fn acquire_lock_otherwise(
        &self,
        keys: &LockKeys,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire {
            token,
            ttl,
            want_time,
            line,
            fenced,
            fresh,
            ..
        } = *request;
        // With replicas, a lock that needs no token now: no script where
        // the server allows (`acknowledged.rs`).
        let scriptless = line.is_none() && !want_time && !fenced && self.restart_delay.is_none();
        if scriptless
            && let Some(reply) = self
                .acquire_acknowledged(keys, token, ttl, fresh, limit)
                .await?
        {
            return Ok(reply);
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
                    let not_before = match (delay_ms, link.boot_ms()) {
                        (Some(delay), Some(boot)) => boot.saturating_add(delay),
                        _ => 0,
                    };
                    ScriptCall::new(ACQUIRE.on(self.publish))
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

    /// Gives back a lock an acquire that returned no guard may hold, and
    /// (fair) its place in the line, on that acquire's connection.
    pub(crate) async fn give_back_lock(
        &self,
        keys: &LockKeys,
        token: &str,
        fair: bool,
        limit: Duration,
    ) -> Result<bool, OpError> {
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

    /// [`end`](Self::end) of a lock (`keys`: `end`'s).
    pub(crate) async fn end_lock(
        &self,
        keys: &LockKeys,
        end: &End<'_>,
        limit: Duration,
    ) -> Result<Ended, OpError> {
        let End {
            token,
            fair,
            hold,
            fence,
            contended,
            ..
        } = *end;
        // The other releases boxed: the plain one's future is the one every
        // lock pair carries, and an enum of futures is as large as its
        // largest (see `design`, "What a pair carries").
        let released = match hold {
            Some((at_ms, min)) => {
                return Box::pin(self.release_after_hold(keys, token, at_ms, min, limit)).await;
            }
            None if fair => Box::pin(self.release_fair_on(On::Plain, keys, token, limit)).await?,
            // A lock with a fencing token: its release is coalesced as its
            // acquire was (see `coalesce`).
            None if fence > 0 => {
                Box::pin(self.release_simple(On::Plain, keys, token, true, limit)).await?
            }
            // Without a token: alone, without a script where the server
            // allows.
            None => {
                self.release_plain(On::Plain, keys, token, contended, limit)
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
        keys: &LockKeys,
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
                    RELEASE_AFTER_HOLD
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

    /// Releases the lock if `token` holds it, and raises the fencing
    /// counter to `fence` (`0`: leave it).
    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &str,
        fence: u64,
        limit: Duration,
    ) -> Result<bool, OpError> {
        self.release_on(On::Plain, keys, token, fence, limit).await
    }

    async fn release_on(
        &self,
        on: On,
        keys: &LockKeys,
        token: &str,
        fence: u64,
        limit: Duration,
    ) -> Result<bool, OpError> {
        if fence == 0 {
            return self.release_simple(on, keys, token, false, limit).await;
        }
        let retention = self.fence_retention_ms;
        let call = ScriptCall::new(RELEASE.on(self.publish))
            .key(&keys.lock)
            .key(&keys.waited)
            .key(&keys.fence)
            .arg(token)
            .arg(fence)
            .arg(retention);
        let done: i64 = self.run_call(on, Some(token), limit, call).await?;
        Ok(done == 1)
    }
}
