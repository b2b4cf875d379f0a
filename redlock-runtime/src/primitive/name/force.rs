//! The operator's forced release on one Redis.

use std::time::{Duration, UNIX_EPOCH};

use super::scripts::FORCE_RELEASE;
use super::{ENDED_KEPT_PAST_LEASE, ForceRelease, ForceReply, Lease};
use crate::store::OpError;
use crate::store::server::RedisBackend;
use crate::store::server::call::ScriptCall;
use crate::util::millis_ceil;

/// The reply of [`FORCE_RELEASE`].
type Reply = (String, String, Vec<String>, u64, String, String);

impl RedisBackend {
    /// Ends the lock and the read/write lock of a name, whoever holds them
    /// (see [`FORCE_RELEASE`]): a write, acknowledged by the
    /// replicas as every lock write is.
    pub(crate) async fn force_release(
        &self,
        force: &ForceRelease<'_>,
        limit: Duration,
    ) -> Result<ForceReply, OpError> {
        let ForceRelease { keys, rw } = *force;
        let (queue, ended) = (keys.queue(), keys.ended());
        let retention = self.fence_retention_ms;
        let (fence, write_fence, tokens, now, prior, write_prior): Reply = self
            .acknowledged_write(
                &keys.lock,
                limit,
                |(_, _, ended, ..): &Reply| !ended.is_empty(),
                |_| {
                    ScriptCall::new(FORCE_RELEASE.on(self.publish))
                        .key(&keys.lock)
                        .key(&keys.fence)
                        .key(&queue)
                        .key(&rw.rw)
                        .key(&rw.fence)
                        .key(&rw.readers)
                        .key(&ended)
                        .arg(retention)
                        .arg(millis_ceil(ENDED_KEPT_PAST_LEASE))
                },
            )
            .await?;
        // The counters as they were, in the order the holders were ended:
        // the lock's, the writer's (see the script's reply).
        let now = UNIX_EPOCH + Duration::from_millis(now);
        let (fence, write_fence) = (fence.parse().ok(), write_fence.parse().ok());
        let mut counters = [
            (fence.is_some(), prior),
            (write_fence.is_some(), write_prior),
        ]
        .into_iter()
        .filter_map(|(ended, prior)| ended.then(|| prior.parse().ok()));
        let ended = (tokens.into_iter())
            .map(|token| Lease {
                granted: crate::owner::granted(&token, counters.next().flatten(), now),
                token,
                left: None,
            })
            .collect();
        Ok(ForceReply {
            ended,
            fence,
            write_fence,
        })
    }
}
