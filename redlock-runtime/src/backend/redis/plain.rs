//! The cheapest correct acquire: a plain `SET key token NX PX ttl`, the
//! command rslock and the raw baseline send, with the fencing token issued
//! later, on first ask (see [`scripts::ISSUE_FENCE`]).
//!
//! Used for the first attempt of an acquire that needs nothing else of the
//! acquire script: no fencing token now, no fair line, no minimum hold, no
//! replicas to wait for, no restart delay. Any attempt after one whose
//! outcome may be unknown goes through the script instead, which finds
//! its own token and keeps the lock (a plain `SET NX` would see the lock
//! as another owner's).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::super::call::ScriptCall;
use super::super::{AcquireReply, IssueFence, Keys, OpError};
use super::{On, RedisBackend, acquire_reply};
use crate::scripts;
use crate::util::millis_ceil;

impl RedisBackend {
    /// One plain `SET NX PX`; a resend on a new connection (the cached one
    /// was found dead: the first may have landed) runs the acquire script.
    pub(super) async fn acquire_plain(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let ttl_ms = millis_ceil(ttl);
        let retention = self.fence_retention_ms;
        let sent = AtomicBool::new(false);
        self.run(On::Waiting, Some(token), limit, |mut link| {
            let again = sent.swap(true, Ordering::Relaxed);
            async move {
                if again {
                    let reply: Vec<i64> = ScriptCall::new(scripts::ACQUIRE.on(self.publish))
                        .key(&keys.lock)
                        .key(&keys.fence)
                        .arg(token)
                        .arg(ttl_ms)
                        .arg(retention)
                        .arg("0")
                        .arg(0)
                        .invocation()
                        .invoke_async(&mut link.conn)
                        .await?;
                    return Ok(acquire_reply(&reply));
                }
                // Sized once: the arguments' buffer is not regrown (and
                // freed) per argument on the hot path.
                let set: Option<String> = redis::Cmd::with_capacity(
                    6,
                    keys.lock.len() + token.len() + "SETNXPX".len() + 20,
                )
                .arg("SET")
                .arg(&keys.lock)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query_async(&mut link.conn)
                .await?;
                Ok(match set {
                    Some(_) => AcquireReply::Acquired {
                        fence: 0,
                        at_ms: None,
                    },
                    None => AcquireReply::Busy { pttl: None },
                })
            }
        })
        .await
    }

    /// Issues the fencing token of a lock `token` holds (see
    /// [`scripts::ISSUE_FENCE`]); with replicas, acknowledged like an
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
                    ScriptCall::new(scripts::ISSUE_FENCE.on(self.publish))
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
