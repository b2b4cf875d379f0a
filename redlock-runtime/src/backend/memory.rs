//! Locks in process memory, with the same semantics as on Redis.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::{AcquireReply, HoldRelease, Keys};

#[derive(Debug)]
struct Lease {
    token: String,
    expires: Instant,
}

/// A fair lock's line of waiters.
#[derive(Debug, Default)]
struct Line {
    order: VecDeque<String>,
    /// Each waiter's presence deadline.
    presence: HashMap<String, Instant>,
}

impl Line {
    /// Drops dead waiters from the head; the first live one.
    fn head(&mut self, now: Instant) -> Option<&str> {
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

impl State {
    /// Gives the lock to `token` until `expires`; its new fencing token.
    fn take(&mut self, keys: &Keys, token: &str, expires: Instant) -> u64 {
        let fence = self.fences.entry(keys.fence.clone()).or_insert(0);
        *fence += 1;
        let fence = *fence;
        self.leases.insert(
            keys.lock.clone(),
            Lease {
                token: token.to_owned(),
                expires,
            },
        );
        fence
    }
}

#[derive(Debug, Default)]
struct State {
    leases: HashMap<String, Lease>,
    lines: HashMap<String, Line>,
    fences: HashMap<String, u64>,
    /// Acquisitions since expired leases were last swept.
    since_sweep: usize,
}

/// Locks kept in a map in this process: ttl, fencing and token checks work as
/// on Redis, but nothing is shared with other processes.
#[derive(Debug)]
pub(crate) struct MemoryBackend {
    state: Mutex<State>,
    /// The zero of this store's clock (what `TIME` is on Redis).
    epoch: Instant,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            epoch: Instant::now(),
        }
    }
}

impl MemoryBackend {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self, now: Instant) -> u64 {
        u64::try_from((now - self.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn acquire(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        want_time: bool,
    ) -> AcquireReply {
        let now = Instant::now();
        let at_ms = want_time.then(|| self.now_ms(now));
        let mut state = self.state();
        state.since_sweep += 1;
        if state.since_sweep >= 1024 {
            // Expired leases of keys nobody asks for again would pile up.
            state.leases.retain(|_, lease| lease.expires > now);
            state.since_sweep = 0;
        }
        if let Some(lease) = state.leases.get_mut(&keys.lock)
            && lease.expires > now
        {
            if lease.token != token {
                return AcquireReply::Busy {
                    pttl: Some(lease.expires - now),
                };
            }
            lease.expires = now + ttl;
            let fence = state.fences.get(&keys.fence).copied().unwrap_or(0);
            return AcquireReply::Acquired { fence, at_ms };
        }
        let fence = state.take(keys, token, now + ttl);
        AcquireReply::Acquired { fence, at_ms }
    }

    pub(crate) fn acquire_fair(
        &self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        presence: Duration,
        want_time: bool,
    ) -> AcquireReply {
        let now = Instant::now();
        let at_ms = want_time.then(|| self.now_ms(now));
        let mut state = self.state();
        let state = &mut *state;
        let holder = state
            .leases
            .get(&keys.lock)
            .filter(|lease| lease.expires > now);
        if let Some(lease) = holder
            && lease.token == token
        {
            let fence = state.fences.get(&keys.fence).copied().unwrap_or(0);
            if let Some(lease) = state.leases.get_mut(&keys.lock) {
                lease.expires = now + ttl;
            }
            return AcquireReply::Acquired { fence, at_ms };
        }
        let pttl = holder.map(|lease| lease.expires - now);
        let line = state.lines.entry(keys.lock.clone()).or_default();
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
            state.lines.remove(&keys.lock);
        }
        let fence = state.take(keys, token, now + ttl);
        AcquireReply::Acquired { fence, at_ms }
    }

    /// Releases a fair lock: whether it was ours, and the waiter to wake.
    pub(crate) fn release_fair(&self, keys: &Keys, token: &str) -> (bool, Option<String>) {
        let released = self.release(keys, token);
        let now = Instant::now();
        let head = self
            .state()
            .lines
            .get_mut(&keys.lock)
            .and_then(|line| line.head(now).map(str::to_owned));
        (released, head)
    }

    /// A fair waiter gives up its place; the waiter to wake, if the lock is free.
    pub(crate) fn leave_queue(&self, keys: &Keys, token: &str) -> Option<String> {
        let now = Instant::now();
        let mut state = self.state();
        let free = state
            .leases
            .get(&keys.lock)
            .is_none_or(|lease| lease.expires <= now);
        let line = state.lines.get_mut(&keys.lock)?;
        line.order.retain(|t| t != token);
        line.presence.remove(token);
        let head = line.head(now).map(str::to_owned);
        if line.order.is_empty() {
            state.lines.remove(&keys.lock);
        }
        head.filter(|_| free)
    }

    pub(crate) fn release_after_hold(
        &self,
        keys: &Keys,
        token: &str,
        at_ms: u64,
        hold: Duration,
    ) -> HoldRelease {
        let now = Instant::now();
        let now_ms = self.now_ms(now);
        let mut state = self.state();
        let Some(lease) = state.leases.get_mut(&keys.lock) else {
            return HoldRelease::NotOwner;
        };
        if lease.token != token || lease.expires <= now {
            return HoldRelease::NotOwner;
        }
        let end_ms = at_ms.saturating_add(u64::try_from(hold.as_millis()).unwrap_or(u64::MAX));
        if end_ms > now_ms {
            lease.expires = now + Duration::from_millis(end_ms - now_ms);
            HoldRelease::HeldUntilMinimum
        } else {
            state.leases.remove(&keys.lock);
            HoldRelease::Deleted
        }
    }

    pub(crate) fn extend(&self, keys: &Keys, token: &str, ttl: Duration) -> bool {
        let now = Instant::now();
        match self.state().leases.get_mut(&keys.lock) {
            Some(lease) if lease.token == token && lease.expires > now => {
                lease.expires = now + ttl;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn release(&self, keys: &Keys, token: &str) -> bool {
        let now = Instant::now();
        let mut state = self.state();
        match state.leases.get(&keys.lock) {
            Some(lease) if lease.token == token => {
                let live = lease.expires > now;
                state.leases.remove(&keys.lock);
                live
            }
            _ => false,
        }
    }

    /// Deletes a lock whoever holds it (for tests of lost-lock handling).
    #[cfg(test)]
    pub(crate) fn force_delete(&self, lock_key: &str) {
        self.state().leases.remove(lock_key);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::LostReason;
    use crate::backend::Backend;

    #[tokio::test(start_paused = true)]
    async fn deleting_the_key_makes_lost_fire_at_the_next_renewal() {
        let client = crate::LockClient::in_memory();
        let guard = client
            .lock("k")
            .ttl(Duration::from_secs(3))
            .acquire()
            .await
            .expect("acquire");
        let Backend::Memory(memory) = client.backend() else {
            panic!("in-memory client has a memory backend");
        };
        memory.force_delete("lock:{k}");
        let started = tokio::time::Instant::now();
        let reason = guard.lost().await;
        assert_eq!(reason, LostReason::TokenGone);
        assert!(
            started.elapsed() <= Duration::from_secs(1),
            "at the next renewal (ttl/3)"
        );
        assert!(!guard.is_held());
        let err = guard.release().await.expect_err("release of a lost lock");
        assert!(err.is_lost(), "{err}");
    }
}
