//! The lock verbs on one Redis server, over its connection lanes (see
//! [`store::server`](crate::store::server)).

use std::time::Duration;

use super::{Acquire, AcquireReply, End, Ended, GiveBack, Keys, LockKeys, OpError, Renewal};
use crate::primitive::lease::{Shared, acquire_reply, took};
use crate::scripts;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

mod conditional;
mod force;
mod inspect;
mod plain;
mod renew;

impl RedisBackend {
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
        if let Some(shared) = Shared::of(keys) {
            return self.acquire_shared(shared, request, limit).await;
        }
        let Keys::Lock(keys) = keys else {
            return Err(OpError::Unsupported("acquire of a record"));
        };
        // A lock taken in one step of its own, which may be coalesced: a
        // plain `SET NX` (no token now) or the acquire script (a token).
        let simple =
            line.is_none() && !want_time && self.replicas.is_none() && self.restart_delay.is_none();
        if simple {
            return self
                .acquire_simple(keys, token, ttl, fenced, fresh, limit)
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
                    let not_before = match (delay_ms, link.boot_ms()) {
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
        let keys = match keys {
            Keys::Lock(keys) => keys,
            Keys::Record(record) => {
                return self
                    .release_record(self.acquire_lane(), record, token, limit)
                    .await;
            }
            Keys::Read(rw) => return self.give_back_shared(Shared::Read(rw), token, limit).await,
            Keys::Write(rw) => return self.give_back_shared(Shared::Write(rw), token, limit).await,
            Keys::Permits(permits) => {
                return self
                    .give_back_shared(Shared::Permits(permits), token, limit)
                    .await;
            }
        };
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

    /// Gives back a synchronizer's lease, on the acquire's connection.
    async fn give_back_shared(
        &self,
        shared: Shared<'_>,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        self.release_shared(self.acquire_lane(), shared, token, limit)
            .await
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
        let released = match keys {
            Keys::Lock(keys) => return self.end_lock(keys, token, fair, hold, fence, limit).await,
            Keys::Record(record) => self.release_record(On::Plain, record, token, limit).await?,
            Keys::Read(rw) => {
                self.release_shared(On::Plain, Shared::Read(rw), token, limit)
                    .await?
            }
            Keys::Write(rw) => {
                self.release_shared(On::Plain, Shared::Write(rw), token, limit)
                    .await?
            }
            Keys::Permits(permits) => {
                self.release_shared(On::Plain, Shared::Permits(permits), token, limit)
                    .await?
            }
        };
        Ok(if released {
            Ended::Deleted
        } else {
            Ended::NotOwner
        })
    }

    /// [`end`](Self::end) of a lock.
    async fn end_lock(
        &self,
        keys: &LockKeys,
        token: &str,
        fair: bool,
        hold: Option<(u64, Duration)>,
        fence: u64,
        limit: Duration,
    ) -> Result<Ended, OpError> {
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
        if let Keys::Lock(_) = renewal.keys {
            // A plain lock: `SET .. IFEQ` where the server has it.
            let mut answers = self
                .renew(std::slice::from_ref(renewal), false, limit)
                .await?;
            return answers
                .pop()
                .unwrap_or_else(|| Err(OpError::Reply("no answer to a renewal".to_owned())));
        }
        let Renewal { keys, token, ttl } = *renewal;
        let ttl_ms = millis_ceil(ttl);
        let (first, second) = keys.renewed();
        let done: i64 = self
            .acknowledged_write(
                token,
                limit,
                |done| *done == 1,
                |_| {
                    let call = ScriptCall::new(renew::renew_script(keys.kind())).key(first);
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
}
