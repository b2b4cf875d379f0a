//! A lock's twin in process memory: its table (who holds each key, a
//! lock's or a read/write lock's writer's, until when; fair mode's lines;
//! the fencing counters) and its steps, each what one of its scripts does
//! on Redis (`acquire.lua`, `release.lua`, `release_after_hold.lua`,
//! `extend.lua`, `issue_fence.lua`). The other twins that hold a key as a
//! lock does (the writer, the group, fair mode) take and renew it here.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::LockKeys;
use crate::primitive::lease::memory::renewed;
use crate::primitive::lease::{AcquireReply, Ended};

/// A key's holder.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) token: String,
    pub(crate) expires: Instant,
    /// When it was taken (or handed over): what `inspect` shows.
    pub(crate) granted: SystemTime,
}

/// A fair lock's line of waiters.
#[derive(Debug, Default, Clone)]
pub(crate) struct Line {
    /// The waiters' tokens in arrival order.
    pub(crate) order: VecDeque<String>,
    /// Each waiter's presence deadline.
    pub(crate) presence: HashMap<String, Instant>,
}

impl Line {
    /// Drops dead waiters from the head; the first live one.
    #[inline]
    pub(crate) fn head(&mut self, now: Instant) -> Option<&str> {
        while let Some(head) = self.order.front() {
            if self.presence.get(head).is_some_and(|&until| until > now) {
                break;
            }
            if let Some(dead) = self.order.pop_front() {
                self.presence.remove(&dead);
            }
        }
        self.order.front().map(String::as_str)
    }
}

/// A fencing counter and when it may be forgotten.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fence {
    pub(crate) value: u64,
    pub(crate) keep_until: Instant,
}

/// The holders, lines and fencing counters of the memory store.
#[derive(Debug, Clone)]
pub(crate) struct LockTable {
    pub(crate) held: HashMap<String, Held>,
    pub(crate) lines: HashMap<String, Line>,
    pub(crate) fences: HashMap<String, Fence>,
    /// The zero of the clock a fencing token's floor reads (what `TIME`
    /// counts from on Redis): the store's start.
    clock_zero: Instant,
}

/// The next fencing token of a counter at `counter` (0 when there is none),
/// at `now` on a clock started at `clock_zero`: the larger of the counter
/// + 1 and the clock in microseconds, the rule of `shared/fence.lua`.
///
/// The clock floor is what keeps tokens increasing when a counter is gone
/// (forgotten after its retention; on Redis also lost in a restart, or
/// older than its tokens when restored from a snapshot): a counter
/// starting over starts above every token issued before, as long as
/// tokens were not issued faster than one per microsecond for longer than
/// the counter is kept. The models (`redlock-model`) check it across
/// restarts and failovers through this function.
#[inline]
pub(crate) fn next_token(counter: u64, now: Instant, clock_zero: Instant) -> u64 {
    let micros = now.saturating_duration_since(clock_zero).as_micros();
    (counter + 1).max(u64::try_from(micros).unwrap_or(u64::MAX))
}

impl LockTable {
    /// An empty table whose fencing clock starts at `clock_zero`.
    #[inline]
    pub(crate) fn new(clock_zero: Instant) -> Self {
        Self {
            held: HashMap::new(),
            lines: HashMap::new(),
            fences: HashMap::new(),
            clock_zero,
        }
    }

    /// Moves the zero of its fencing clock (the models' twins load one
    /// node's data into a table kept between steps).
    #[cfg(feature = "test-util")]
    #[inline]
    pub(crate) fn set_clock_zero(&mut self, clock_zero: Instant) {
        self.clock_zero = clock_zero;
    }

    /// Forgets the leases, counters and dead waiters that ended.
    #[inline]
    pub(crate) fn sweep(&mut self, now: Instant) {
        self.held.retain(|_, lease| lease.expires > now);
        self.fences.retain(|_, f| f.keep_until > now);
        self.lines.retain(|_, line| {
            line.head(now);
            !line.order.is_empty()
        });
    }

    /// The fencing counter at `key`, while kept.
    #[inline]
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

    /// Issues the next token of the counter at `counter` ([`next_token`]),
    /// kept for `retention` from `now` (`scripts/shared/fence.lua` on
    /// Redis).
    /// Every step takes the time it runs at from its caller, as a script
    /// reads Redis's clock once: none reads a clock of its own.
    #[inline]
    pub(crate) fn next_fence(&mut self, counter: &str, now: Instant, retention: Duration) -> u64 {
        let current = match self.fences.get(counter) {
            Some(f) if f.keep_until > now => f.value,
            // Forgotten (or due to be): the clock floor carries on.
            _ => 0,
        };
        let fence = next_token(current, now, self.clock_zero);
        self.fences.insert(
            counter.to_owned(),
            Fence {
                value: fence,
                keep_until: now + retention,
            },
        );
        fence
    }

    /// Gives the lock to `token` from `now` for `ttl`; its new fencing token,
    /// or none (0) when `issue` is false: a lock taken as one Redis takes
    /// it with a plain `SET NX`, whose token is issued on first ask.
    /// `lock` and `fence`: the key holding the owner's token (a lock's, a
    /// read/write lock's writer) and its fencing counter.
    #[inline]
    pub(crate) fn take(
        &mut self,
        (lock, fence): (&str, &str),
        token: &str,
        (now, ttl): (Instant, Duration),
        retention: Duration,
        issue: bool,
    ) -> u64 {
        let fence = if issue {
            self.next_fence(fence, now, retention)
        } else {
            0
        };
        self.held.insert(
            lock.to_owned(),
            Held {
                token: token.to_owned(),
                expires: now + ttl,
                granted: SystemTime::now(),
            },
        );
        fence
    }

    /// One acquire attempt (`acquire.lua`; with `issue` false, the plain
    /// `SET NX` of a lock whose token is issued on first ask): a lock this
    /// token holds already (an earlier attempt's answer was lost) gets a
    /// new lease and a new token in this tenure, as the script does.
    #[inline]
    pub(crate) fn acquire(
        &mut self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        (now, at_ms): (Instant, Option<u64>),
        retention: Duration,
        issue: bool,
    ) -> AcquireReply {
        if let Some(lease) = self.held.get_mut(&keys.lock)
            && lease.expires > now
        {
            if lease.token != token {
                return AcquireReply::Busy {
                    pttl: Some(lease.expires - now),
                };
            }
            lease.expires = now + ttl;
            let fence = self.next_fence(&keys.fence, now, retention);
            return AcquireReply::Acquired { fence, at_ms };
        }
        let fence = self.take(
            (&keys.lock, &keys.fence),
            token,
            (now, ttl),
            retention,
            issue,
        );
        AcquireReply::Acquired { fence, at_ms }
    }

    /// Deletes the lock if `token` holds it (`release.lua`): whether its
    /// lease still lasted.
    #[inline]
    pub(crate) fn release(&mut self, keys: &LockKeys, token: &str, now: Instant) -> bool {
        match self.held.get(&keys.lock) {
            Some(lease) if lease.token == token => {
                let live = lease.expires > now;
                self.held.remove(&keys.lock);
                live
            }
            _ => false,
        }
    }

    /// Ends a lock held for a minimum time (`release_after_hold.lua`):
    /// taken at `at_ms` on the store's clock, for at least `hold`; `now`
    /// and `now_ms` are the instant and the store's clock.
    pub(crate) fn release_after_hold(
        &mut self,
        keys: &LockKeys,
        token: &str,
        (at_ms, hold): (u64, Duration),
        (now, now_ms): (Instant, u64),
    ) -> Ended {
        let Some(lease) = self.held.get_mut(&keys.lock) else {
            return Ended::NotOwner;
        };
        if lease.token != token || lease.expires <= now {
            return Ended::NotOwner;
        }
        let end_ms = at_ms.saturating_add(u64::try_from(hold.as_millis()).unwrap_or(u64::MAX));
        if end_ms > now_ms {
            lease.expires = now + Duration::from_millis(end_ms - now_ms);
            Ended::HeldUntilMinimum
        } else {
            self.held.remove(&keys.lock);
            Ended::Deleted
        }
    }

    /// Resets the lease of `lock` (a lock's key, or a writer's) to `ttl`
    /// if `token` holds it and it lasts (`extend.lua`); a `watchdog`
    /// renewal never shortens it ([`renewed`]).
    #[inline]
    pub(crate) fn renew(
        &mut self,
        lock: &str,
        token: &str,
        (ttl, watchdog): (Duration, bool),
        now: Instant,
    ) -> bool {
        match self.held.get_mut(lock) {
            Some(lease) if lease.token == token && lease.expires > now => {
                lease.expires = renewed(lease.expires, (ttl, watchdog), now);
                true
            }
            _ => false,
        }
    }

    /// Issues the fencing token of a lock `token` holds (`issue_fence.lua`):
    /// the counter's next.
    pub(crate) fn issue_fence(
        &mut self,
        keys: &LockKeys,
        token: &str,
        now: Instant,
        retention: Duration,
    ) -> Option<u64> {
        let held = self.held.get(&keys.lock)?;
        if held.token != token || held.expires <= now {
            return None;
        }
        Some(self.next_fence(&keys.fence, now, retention))
    }

    /// Raises the counter at `counter` to `fence` if it is below, kept for
    /// `retention` from `now`: what `release.lua` does after the release
    /// when given a token to raise (a Redlock node). The memory store is
    /// never a Redlock node; the models call it as one.
    #[cfg(feature = "test-util")]
    #[inline]
    pub(crate) fn raise(&mut self, counter: &str, fence: u64, now: Instant, retention: Duration) {
        if fence > self.fence(counter) {
            let keep_until = now + retention;
            (self.fences).insert(
                counter.to_owned(),
                Fence {
                    value: fence,
                    keep_until,
                },
            );
        }
    }

    /// How many entries it keeps (for the tests that check it stays
    /// bounded).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.len() + self.fences.len() + self.lines.len()
    }
}
