//! The multi-lock's group on one Redis: one script takes every lock, and
//! with replicas it is followed by `WAIT` on its connection.

use std::time::Duration;

use super::scripts::GROUP_ACQUIRE;
use super::{GroupAcquire, GroupReply};
use crate::primitive::lease::took;
use crate::store::OpError;
use crate::store::server::RedisBackend;
use crate::store::server::call::ScriptCall;
use crate::util::millis_ceil;

impl RedisBackend {
    /// Takes every lock of a group under one hash tag, or none (see
    /// [`GROUP_ACQUIRE`]).
    pub(crate) async fn acquire_group(
        &self,
        group: &GroupAcquire<'_>,
        limit: Duration,
    ) -> Result<GroupReply, OpError> {
        let GroupAcquire {
            all, token, ttl, ..
        } = *group;
        let ttl_ms = millis_ceil(ttl);
        let retention = self.fence_retention_ms;
        let reply: Vec<i64> = self
            .acknowledged_write(
                token,
                limit,
                |r: &Vec<i64>| took(r),
                |_| {
                    let mut call = ScriptCall::new(GROUP_ACQUIRE.on(self.publish));
                    for keys in all {
                        call = call.key(&keys.lock).key(&keys.fence).key(&keys.waited);
                    }
                    call.arg(token).arg(ttl_ms).arg(retention)
                },
            )
            .await?;
        group_reply(&reply, all.len())
    }
}

/// Reads a group acquire's reply: `{1, fences..}` or `{0, index, pttl}`.
fn group_reply(reply: &[i64], len: usize) -> Result<GroupReply, OpError> {
    match reply {
        [1, fences @ ..] if fences.len() == len => Ok(GroupReply::Acquired(
            fences
                .iter()
                .map(|&f| u64::try_from(f).unwrap_or(0))
                .collect(),
        )),
        [0, index, pttl] => Ok(GroupReply::Busy {
            index: usize::try_from(*index - 1)
                .unwrap_or(0)
                .min(len.saturating_sub(1)),
            pttl: u64::try_from(*pttl).ok().map(Duration::from_millis),
        }),
        other => Err(OpError::Reply(format!("{other:?}"))),
    }
}
