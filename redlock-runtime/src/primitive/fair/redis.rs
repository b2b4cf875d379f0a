//! Fair mode on one Redis: an acquire queues in line, a release or a
//! leave hands the lock to the first live waiter.

use std::time::Duration;

use super::scripts::*;
use crate::primitive::LockKeys;
use crate::primitive::lease::AcquireReply;
use crate::store::OpError;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

impl RedisBackend {
    /// One fair acquire attempt: the lock goes to the first live waiter;
    /// others are queued (or keep their place) for `presence`.
    pub(crate) async fn acquire_fair(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        presence: Duration,
        want_time: bool,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let (queue, waiters) = (keys.queue(), keys.waiters());
        let retention = self.fence_retention_ms;
        self.acquire_by(token, limit, || {
            ScriptCall::new(FAIR_ACQUIRE.on(self.publish))
                .key(&keys.lock)
                .key(&keys.fence)
                .key(&queue)
                .key(&waiters)
                .arg(token)
                .arg(millis_ceil(ttl))
                .arg(millis_ceil(presence))
                .arg(if want_time { "1" } else { "0" })
                .arg(retention)
        })
        .await
    }

    /// Releases a fair lock `token` holds, handing it to the first live
    /// waiter in line (see [`FAIR_RELEASE`]).
    pub(crate) async fn release_fair_on(
        &self,
        on: On,
        keys: &LockKeys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        self.fair_end(&FAIR_RELEASE, on, keys, token, limit).await
    }

    /// Takes `token` out of the line and gives back a lock it holds, in one
    /// step (see [`FAIR_LEAVE`]): whether it held the lock.
    pub(crate) async fn leave_queue_on(
        &self,
        on: On,
        keys: &LockKeys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        self.fair_end(&FAIR_LEAVE, on, keys, token, limit).await
    }

    /// Runs `script` (a fair release or leave: the lock, its line and its
    /// counter as keys; the token and the counter's retention as
    /// arguments); whether it answered 1.
    async fn fair_end(
        &self,
        script: &crate::scripts::Lua,
        on: On,
        keys: &LockKeys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let (queue, waiters) = (keys.queue(), keys.waiters());
        let retention = self.fence_retention_ms;
        let call = ScriptCall::new(script.on(self.publish))
            .key(&keys.lock)
            .key(&queue)
            .key(&waiters)
            .key(&keys.fence)
            .arg(token)
            .arg(retention);
        let done: i64 = self.run_call(on, Some(token), limit, call).await?;
        Ok(done == 1)
    }
}
