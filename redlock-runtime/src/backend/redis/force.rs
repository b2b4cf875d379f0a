//! The operator's forced release on one Redis.

use std::time::Duration;

use super::super::call::ScriptCall;
use super::super::{ENDED_KEPT_PAST_LEASE, ForceRelease, ForceReply, OpError};
use super::RedisBackend;
use crate::scripts;
use crate::util::millis_ceil;

/// The reply of [`scripts::FORCE_RELEASE`].
type Reply = (String, String, Vec<String>);

impl RedisBackend {
    /// Ends the lock and the read/write lock of a name, whoever holds them
    /// (see [`scripts::FORCE_RELEASE`]): a write, acknowledged by the
    /// replicas as every lock write is.
    pub(crate) async fn force_release(
        &self,
        force: &ForceRelease<'_>,
        limit: Duration,
    ) -> Result<ForceReply, OpError> {
        let ForceRelease { keys, rw } = *force;
        let (queue, ended) = (keys.queue(), keys.ended());
        let retention = self.fence_retention_ms;
        let (fence, write_fence, tokens): Reply = self
            .acknowledged_write(
                &keys.lock,
                limit,
                |(_, _, ended): &Reply| !ended.is_empty(),
                |_| {
                    ScriptCall::new(scripts::FORCE_RELEASE.on(self.publish))
                        .key(&keys.lock)
                        .key(&keys.fence)
                        .key(&queue)
                        .key(&rw.lock)
                        .key(&rw.fence)
                        .key(&rw.readers)
                        .key(&ended)
                        .arg(retention)
                        .arg(millis_ceil(ENDED_KEPT_PAST_LEASE))
                },
            )
            .await?;
        Ok(ForceReply {
            ended: tokens,
            fence: fence.parse().ok(),
            write_fence: write_fence.parse().ok(),
        })
    }
}
