//! Fair mode's twin in process memory: the steps of its scripts
//! (`acquire.lua`, `release.lua`, `leave.lua`) over the lock table, whose
//! lines hold the waiters.

use std::time::Duration;

use tokio::time::Instant;

use crate::primitive::LockKeys;
use crate::primitive::lease::AcquireReply;
use crate::primitive::lock::memory::LockTable;

/// One fair acquire attempt (`acquire.lua`): the lock goes to the first
/// live waiter; others are queued (or keep their place) for `presence`.
pub(crate) fn acquire(
    locks: &mut LockTable,
    keys: &LockKeys,
    token: &str,
    (ttl, presence): (Duration, Duration),
    (now, at_ms): (Instant, Option<u64>),
    retention: Duration,
) -> AcquireReply {
    let holder = locks
        .held
        .get(&keys.lock)
        .filter(|lease| lease.expires > now);
    if let Some(lease) = holder
        && lease.token == token
    {
        let fence = locks.fence(&keys.fence);
        if let Some(lease) = locks.held.get_mut(&keys.lock) {
            lease.expires = now + ttl;
        }
        return AcquireReply::Acquired { fence, at_ms };
    }
    let pttl = holder.map(|lease| lease.expires - now);
    let line = locks.lines.entry(keys.lock.clone()).or_default();
    let head = line.head(now).map(str::to_owned);
    if pttl.is_some() || head.as_deref().is_some_and(|h| h != token) {
        if line
            .presence
            .insert(token.to_owned(), now + presence)
            .is_none()
        {
            line.order.push_back(token.to_owned());
        }
        return AcquireReply::Busy { pttl };
    }
    if head.is_some() {
        line.order.pop_front();
        line.presence.remove(token);
    }
    if line.order.is_empty() {
        locks.lines.remove(&keys.lock);
    }
    let fence = locks.take(
        (&keys.lock, &keys.fence),
        token,
        (now, ttl),
        retention,
        true,
    );
    AcquireReply::Acquired { fence, at_ms }
}

/// The first live waiter in the lock's line (`release.lua` hands the lock
/// to it), if any.
pub(crate) fn head(locks: &mut LockTable, keys: &LockKeys, now: Instant) -> Option<String> {
    (locks.lines.get_mut(&keys.lock))
        .and_then(|line| line.head(now))
        .map(str::to_owned)
}

/// A waiter gives up its place (`leave.lua`): the waiter to wake, if the
/// lock is free.
pub(crate) fn leave(
    locks: &mut LockTable,
    keys: &LockKeys,
    token: &str,
    now: Instant,
) -> Option<String> {
    let free = locks
        .held
        .get(&keys.lock)
        .is_none_or(|lease| lease.expires <= now);
    let line = locks.lines.get_mut(&keys.lock)?;
    line.order.retain(|t| t != token);
    line.presence.remove(token);
    let head = line.head(now).map(str::to_owned);
    if line.order.is_empty() {
        locks.lines.remove(&keys.lock);
    }
    head.filter(|_| free)
}
