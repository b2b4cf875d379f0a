//! The multi-lock's group in the memory twin: every lock taken, or none
//! (`acquire.lua`).

use std::time::Duration;

use tokio::time::Instant;

use super::{GroupAcquire, GroupReply};
use crate::primitive::lock::memory::LockTable;

/// Takes every lock of a group in `locks`, or none.
pub(crate) fn acquire(
    locks: &mut LockTable,
    group: &GroupAcquire<'_>,
    now: Instant,
    retention: Duration,
) -> GroupReply {
    let GroupAcquire {
        all, token, ttl, ..
    } = *group;
    for (index, keys) in all.iter().enumerate() {
        if let Some((holder, left)) = locks.holder(&keys.lock, now)
            && holder != token
        {
            return GroupReply::Busy {
                index,
                pttl: Some(left),
            };
        }
    }
    let fences = all
        .iter()
        .map(|keys| {
            if locks.holder(&keys.lock, now).is_some() {
                if let Some(h) = locks.held.get_mut(&keys.lock) {
                    h.expires = now + ttl;
                }
                locks.fence(&keys.fence)
            } else {
                let (lock, fence) = (&keys.lock, &keys.fence);
                locks.take((lock, fence), token, (now, ttl), retention, true)
            }
        })
        .collect();
    GroupReply::Acquired(fences)
}
