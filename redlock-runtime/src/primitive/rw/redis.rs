//! The read/write lock on one Redis. Writes go through
//! [`acknowledged_write`](RedisBackend::acknowledged_write) like a lock's
//! acquire: with replicas, each is followed by `WAIT` on its connection.

use std::time::Duration;

use super::scripts::{DOWNGRADE, READ_ACQUIRE, READ_RELEASE, WRITE_ACQUIRE, WRITE_RELEASE};
use super::{Downgrade, RwKeys};
use crate::primitive::lease::{Acquire, AcquireReply};
use crate::store::OpError;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

impl RedisBackend {
    /// One acquire attempt of a reader: in unless a writer holds the lock
    /// or waits for it.
    pub(crate) async fn acquire_read(
        &self,
        keys: &RwKeys,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire { token, ttl, .. } = *request;
        let ttl_ms = millis_ceil(ttl);
        self.acquire_by(token, limit, || {
            ScriptCall::new(READ_ACQUIRE.on(self.publish))
                .key(&keys.rw)
                .key(&keys.fence)
                .key(&keys.readers)
                .key(&keys.writers)
                .arg(token)
                .arg(ttl_ms)
        })
        .await
    }

    /// One acquire attempt of a writer: in when no other writer holds the
    /// lock and no live reader is left; else, when it waits (`line`), it
    /// keeps new readers out for that long.
    pub(crate) async fn acquire_write(
        &self,
        keys: &RwKeys,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire {
            token,
            ttl,
            want_time,
            line,
            ..
        } = *request;
        let ttl_ms = millis_ceil(ttl);
        let retention = self.fence_retention_ms;
        // A writer that does not wait does not keep readers out.
        let presence = line.map_or(0, millis_ceil);
        self.acquire_by(token, limit, || {
            ScriptCall::new(WRITE_ACQUIRE.on(self.publish))
                .key(&keys.rw)
                .key(&keys.fence)
                .key(&keys.readers)
                .key(&keys.writers)
                .arg(token)
                .arg(ttl_ms)
                .arg(presence)
                .arg(retention)
                .arg(if want_time { "1" } else { "0" })
        })
        .await
    }

    /// Releases (or gives back) a reader's lease, waking the waiting
    /// writers: `true` when it was still held.
    pub(crate) async fn release_read(
        &self,
        on: On,
        keys: &RwKeys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let call = ScriptCall::new(READ_RELEASE.on(self.publish))
            .key(&keys.readers)
            .key(&keys.rw)
            .key(&keys.writers)
            .arg(token);
        let done: i64 = self.run_call(on, Some(token), limit, call).await?;
        Ok(done == 1)
    }

    /// Releases (or gives back) a writer's lease, or its place among the
    /// waiting writers, waking every waiter: `true` when it was held.
    pub(crate) async fn release_write(
        &self,
        on: On,
        keys: &RwKeys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let call = ScriptCall::new(WRITE_RELEASE.on(self.publish))
            .key(&keys.rw)
            .key(&keys.writers)
            .arg(token);
        let done: i64 = self.run_call(on, Some(token), limit, call).await?;
        Ok(done == 1)
    }

    /// Turns a held write lock into a read lock (see [`DOWNGRADE`]).
    pub(crate) async fn downgrade(
        &self,
        downgrade: &Downgrade<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let Downgrade { keys, token, ttl } = *downgrade;
        let ttl_ms = millis_ceil(ttl);
        let done: i64 = self
            .acknowledged_write(
                token,
                limit,
                |done| *done == 1,
                |_| {
                    ScriptCall::new(DOWNGRADE.on(self.publish))
                        .key(&keys.rw)
                        .key(&keys.readers)
                        .arg(token)
                        .arg(ttl_ms)
                },
            )
            .await?;
        Ok(done == 1)
    }
}
