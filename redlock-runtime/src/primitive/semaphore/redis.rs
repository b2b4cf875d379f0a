//! The semaphore on one Redis. An acquire goes through
//! [`acknowledged_write`](RedisBackend::acknowledged_write): with
//! replicas, it is followed by `WAIT` on its connection.

use std::time::Duration;

use super::scripts::{PERMITS_ACQUIRE, PERMITS_AVAILABLE, PERMITS_RELEASE};
use super::{Available, PermitKeys};
use crate::primitive::lease::{Acquire, AcquireReply};
use crate::store::OpError;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

impl RedisBackend {
    /// One acquire attempt of a holder of `keys.permits` permits.
    pub(crate) async fn acquire_permits(
        &self,
        keys: &PermitKeys,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire { token, ttl, .. } = *request;
        let ttl_ms = millis_ceil(ttl);
        self.acquire_by(token, limit, || {
            ScriptCall::new(PERMITS_ACQUIRE.on(self.publish))
                .key(&keys.holders)
                .key(&keys.counts)
                .arg(token)
                .arg(ttl_ms)
                .arg(keys.limit)
                .arg(keys.permits)
        })
        .await
    }

    /// Gives a holder's permits back (a release or a give-back), waking
    /// the waiters: `true` when its lease still lasted.
    pub(crate) async fn release_permits(
        &self,
        on: On,
        keys: &PermitKeys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let call = ScriptCall::new(PERMITS_RELEASE.on(self.publish))
            .key(&keys.holders)
            .key(&keys.counts)
            .arg(token);
        let done: i64 = self.run_call(on, Some(token), limit, call).await?;
        Ok(done == 1)
    }

    /// How many permits of a semaphore are free.
    pub(crate) async fn available(
        &self,
        available: &Available<'_>,
        limit: Duration,
    ) -> Result<u32, OpError> {
        let Available { keys, limit: max } = *available;
        let call = ScriptCall::new(PERMITS_AVAILABLE.on(self.publish))
            .key(&keys.holders)
            .key(&keys.counts)
            .arg(max);
        let free: i64 = self.run_call(On::Plain, None, limit, call).await?;
        Ok(u32::try_from(free.max(0)).unwrap_or(u32::MAX))
    }
}
