//! A lock's table in the memory twin: who holds each key (a lock's, or a
//! read/write lock's writer's) until when, fair mode's lines, and the
//! fencing counters, with the steps the other twins share (take a key,
//! issue a token).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::primitive::fair::memory::Line;

/// A key's holder.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) token: String,
    pub(crate) expires: Instant,
    /// When it was taken (or handed over): what `inspect` shows.
    pub(crate) granted: SystemTime,
}

/// A fencing counter and when it may be forgotten.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fence {
    pub(crate) value: u64,
    pub(crate) keep_until: Instant,
}

/// The holders, lines and fencing counters of the memory store.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    pub(crate) held: HashMap<String, Held>,
    pub(crate) lines: HashMap<String, Line>,
    pub(crate) fences: HashMap<String, Fence>,
    /// The largest fencing token of a counter forgotten after its
    /// retention: every later token is above it, so tokens of a key
    /// strictly increase even across a forgotten counter (on Redis the
    /// clock floor does this).
    pub(crate) forgotten: u64,
}

impl LockTable {
    /// Forgets the leases, counters and dead waiters that ended.
    pub(crate) fn sweep(&mut self, now: Instant) {
        self.held.retain(|_, lease| lease.expires > now);
        let mut forgotten = self.forgotten;
        self.fences.retain(|_, f| {
            let keep = f.keep_until > now;
            if !keep {
                forgotten = forgotten.max(f.value);
            }
            keep
        });
        self.forgotten = forgotten;
        self.lines.retain(|_, line| {
            line.head(now);
            !line.order.is_empty()
        });
    }

    /// The fencing counter at `key`, while kept.
    pub(crate) fn fence(&self, key: &str) -> u64 {
        self.fences.get(key).map_or(0, |f| f.value)
    }

    /// The holder of `lock`, while its lease lasts: (token, left).
    pub(crate) fn holder(&self, lock: &str, now: Instant) -> Option<(&str, Duration)> {
        self.held
            .get(lock)
            .filter(|h| h.expires > now)
            .map(|h| (h.token.as_str(), h.expires - now))
    }

    /// Raises the counter at `counter` by one, kept for `retention` from
    /// now: the token it issues (`scripts/shared/fence.lua` on Redis).
    pub(crate) fn next_fence(&mut self, counter: &str, retention: Duration) -> u64 {
        let now = Instant::now();
        let current = match self.fences.get(counter) {
            Some(f) if f.keep_until > now => f.value,
            // Forgotten (or due to be): tokens go on above every one swept.
            _ => 0,
        };
        let fence = current.max(self.forgotten) + 1;
        self.fences.insert(
            counter.to_owned(),
            Fence {
                value: fence,
                keep_until: now + retention,
            },
        );
        fence
    }

    /// Gives the lock to `token` until `expires`; its new fencing token,
    /// or none (0) when `issue` is false: a lock taken as one Redis takes
    /// it with a plain `SET NX`, whose token is issued on first ask.
    /// `lock` and `fence`: the key holding the owner's token (a lock's, a
    /// read/write lock's writer) and its fencing counter.
    pub(crate) fn take(
        &mut self,
        (lock, fence): (&str, &str),
        token: &str,
        expires: Instant,
        retention: Duration,
        issue: bool,
    ) -> u64 {
        let fence = if issue {
            self.next_fence(fence, retention)
        } else {
            0
        };
        self.held.insert(
            lock.to_owned(),
            Held {
                token: token.to_owned(),
                expires,
                granted: SystemTime::now(),
            },
        );
        fence
    }

    /// How many entries it keeps (for the tests that check it stays
    /// bounded).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.len() + self.fences.len() + self.lines.len()
    }
}
