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

/// Whom a fair release or give-back wakes, as its script publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// The lock was handed to this waiter (`shared/hand_over.lua`), with
    /// this fencing token: a grant.
    Granted {
        /// The waiter's token.
        token: String,
        /// The fencing token the hand-over issued.
        fence: u64,
    },
    /// The lock is free and this waiter is first in line: woken by name.
    Named(String),
    /// The lock was deleted and no live waiter is in line: a waiter of the
    /// key that does not queue may take it (the empty message).
    Longest,
}

/// The lock, which its holder gives up, goes to the first live waiter in
/// line (`shared/hand_over.lua`): set to the waiter's token for what is
/// left of its presence, the waiter out of the line, the next fencing
/// token issued; with no live waiter the lock is deleted.
pub(crate) fn hand_over(
    locks: &mut LockTable,
    keys: &LockKeys,
    now: Instant,
    retention: Duration,
) -> Next {
    let granted = locks.lines.get_mut(&keys.lock).and_then(|line| {
        let head = line.head(now)?.to_owned();
        line.order.pop_front();
        let until = line.presence.remove(&head)?;
        Some((head, until))
    });
    tidy(locks, keys);
    let Some((token, until)) = granted else {
        locks.held.remove(&keys.lock);
        return Next::Longest;
    };
    let lease = (now, until - now);
    let fence = locks.take((&keys.lock, &keys.fence), &token, lease, retention, true);
    Next::Granted { token, fence }
}

/// A fair release (`release.lua`): when `token` holds the lock, the
/// hand-over ([`hand_over`]) and whom it wakes; `None` (nothing done)
/// otherwise.
pub(crate) fn release(
    locks: &mut LockTable,
    keys: &LockKeys,
    token: &str,
    now: Instant,
    retention: Duration,
) -> Option<Next> {
    let holds = (locks.held.get(&keys.lock)).is_some_and(|h| h.token == token && h.expires > now);
    holds.then(|| hand_over(locks, keys, now, retention))
}

/// A waiter gives up (`leave.lua`): it leaves the line; if it holds the
/// lock (a grant it never took, or an attempt whose answer was lost),
/// the lock goes on as its release would ([`hand_over`]); if the lock is
/// free, the first live waiter is woken by name. Whether it held the lock,
/// and whom to wake.
pub(crate) fn leave(
    locks: &mut LockTable,
    keys: &LockKeys,
    token: &str,
    now: Instant,
    retention: Duration,
) -> (bool, Option<Next>) {
    if let Some(line) = locks.lines.get_mut(&keys.lock) {
        line.order.retain(|t| t != token);
        line.presence.remove(token);
    }
    tidy(locks, keys);
    let lock = locks.held.get(&keys.lock).filter(|h| h.expires > now);
    match lock.map(|h| h.token == token) {
        Some(true) => (true, Some(hand_over(locks, keys, now, retention))),
        Some(false) => (false, None),
        None => {
            let head = (locks.lines.get_mut(&keys.lock))
                .and_then(|line| line.head(now))
                .map(str::to_owned);
            tidy(locks, keys);
            (false, head.map(Next::Named))
        }
    }
}

/// Drops the lock's line once no one is in it.
fn tidy(locks: &mut LockTable, keys: &LockKeys) {
    if (locks.lines.get(&keys.lock)).is_some_and(|line| line.order.is_empty()) {
        locks.lines.remove(&keys.lock);
    }
}
