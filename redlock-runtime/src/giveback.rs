//! Giving back what an acquire may have taken without returning a guard:
//! the acquire was dropped (cancelled, timed out by the caller) while a
//! command was on its way, an answer was lost, the wait ended after such
//! an answer, or too few replicas acknowledged the write.
//!
//! The give-back is a release with the acquire's token, sent on the same
//! connection as its acquire commands (see `store::server::conn`), so it lands
//! after any of them that is still on its way. It is retried until it is
//! answered or until the acquire's lease would have ended anyway; a paused
//! or slow Redis delays it, and nothing else can.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{GiveBack, Keys, LockKeys};
use crate::core::Core;

/// What an acquire in progress may hold in Redis: given back on drop unless
/// the acquire returned a guard (see the module docs).
pub(crate) struct PendingAcquire<'a> {
    /// Borrowed: cloned only for a give-back from a task of its own.
    core: &'a Arc<Core>,
    keys: Keys,
    token: String,
    fair: bool,
    /// A command is on its way: it may take the lock.
    in_flight: bool,
    /// An earlier command's outcome is unknown: it may have taken the lock.
    unknown: bool,
    /// A fair acquire asked at least once: it may hold a place in the line.
    queued: bool,
    /// When the last lease or place it may hold ends.
    until: Option<Instant>,
}

impl<'a> PendingAcquire<'a> {
    pub(crate) fn new(core: &'a Arc<Core>, keys: Keys, token: String, fair: bool) -> Self {
        Self {
            core,
            keys,
            token,
            fair,
            in_flight: false,
            unknown: false,
            queued: false,
            until: None,
        }
    }

    /// An attempt is being sent at `sent`; what it may take lasts `hold`.
    pub(crate) fn sending(&mut self, sent: Instant, hold: Duration) {
        self.in_flight = true;
        self.queued |= self.fair;
        let end = sent + hold;
        self.until = Some(self.until.map_or(end, |u| u.max(end)));
    }

    /// The attempt was answered: `unknown` when its outcome still is.
    pub(crate) fn answered(&mut self, unknown: bool) {
        self.in_flight = false;
        self.unknown |= unknown;
    }

    /// The keys the acquire takes.
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The token the next attempt goes out under.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The acquire returned a guard: nothing to give back, and the keys
    /// and token are the guard's.
    pub(crate) fn took(mut self) -> (Keys, String) {
        self.in_flight = false;
        self.unknown = false;
        self.queued = false;
        (self.take_keys(), std::mem::take(&mut self.token))
    }

    /// The keys, leaving empty ones (which allocate nothing) for the drop.
    fn take_keys(&mut self) -> Keys {
        std::mem::replace(&mut self.keys, Keys::Lock(LockKeys::default()))
    }

    /// Nothing of this acquire's token can be held: no attempt on its
    /// way, none whose outcome is unknown, no place in a line.
    pub(crate) fn holds_nothing(&self) -> bool {
        !self.needed()
    }

    /// The next attempt goes out under `token` (see [`holds_nothing`]:
    /// only then, as nothing of the old token is given back after this).
    ///
    /// [`holds_nothing`]: Self::holds_nothing
    pub(crate) fn retoken(&mut self, token: String) {
        debug_assert!(self.holds_nothing());
        self.token = token;
    }

    /// Gives back what this acquire may hold before its caller hears that
    /// the lock stayed busy, so that a waiter that gave up has left the
    /// line (or the waiting writers) when it says so: one call, bounded by
    /// the command timeout. If it fails, or this future is dropped on the
    /// way, the give-back goes on from a spawned task as on drop.
    pub(crate) async fn give_back_now(mut self) {
        if !self.needed() {
            return;
        }
        let give_back = GiveBack {
            keys: &self.keys,
            token: &self.token,
            fair: self.fair,
        };
        let limit = self.core.settings().command_timeout;
        if let Ok(released) = self.core.backend().give_back(&give_back, limit).await {
            tracing::debug!(target: "redlock", key = %self.keys.user(), released, "acquire given back");
            self.in_flight = false;
            self.unknown = false;
            self.queued = false;
        }
    }

    fn needed(&self) -> bool {
        self.in_flight || self.unknown || self.queued
    }
}

impl Drop for PendingAcquire<'_> {
    fn drop(&mut self) {
        if !self.needed() {
            return;
        }
        let (Some(until), Ok(runtime)) = (self.until, tokio::runtime::Handle::try_current()) else {
            return; // no runtime left: the lease runs out by itself
        };
        let core = Arc::clone(self.core);
        let keys = self.take_keys();
        let token = std::mem::take(&mut self.token);
        let fair = self.fair;
        // Tracked: a shutdown waits for it.
        self.core.spawn_on(&runtime, async move {
            let give_back = GiveBack {
                keys: &keys,
                token: &token,
                fair,
            };
            let given = core
                .retry_until(keys.user(), until, |limit| {
                    core.backend().give_back(&give_back, limit)
                })
                .await;
            match given {
                Some(released) => {
                    tracing::debug!(target: "redlock", key = %keys.user(), released, "acquire given back");
                }
                None => {
                    tracing::warn!(target: "redlock", key = %keys.user(), "could not give back an abandoned acquire; its lease ends by itself")
                }
            }
        });
    }
}
