//! Why a lease the store no longer holds was lost: the [`LostReason`] a
//! guard's error, its `lost()` signal and `lock_lost_total` carry.
//!
//! The scripts answer "not this owner's" alike whether the key is gone or
//! holds another owner's token; telling the causes apart costs a read of
//! the name (what `LockClient::inspect` reads) and is done only on this
//! rare path, never on a renewal or release that succeeds. The reason is
//! decided, first match wins:
//! 0. **Ended by an operator**: `LockClient::force_release` kept this
//!    owner's id (`waiter_id`: a hash of its token) with the name, for as
//!    long as its lease would have lasted and a little more: past that,
//!    this process knows by its own clock that the lease ran out, and
//!    asks nothing.
//! 1. **Taken over**: another owner's token is there now (a lock's or a
//!    writer's holder; for a reader, a writer).
//! 2. **Expired**: the call that found the lease gone went out when this
//!    process no longer presumed it held (its deadline, kept by the
//!    watchdog, had passed).
//! 3. **Token gone**: it went out while the lease still had time. The
//!    store's lease cannot end before the deadline this process keeps
//!    (the deadline counts from when the last renewal was *sent*, and
//!    Redis received it later; on Redlock the validity is also shortened
//!    by the drift allowance), so the key did not expire: it was deleted,
//!    or lost with its server (a restart without persistence, a failover
//!    to a replica that had not received it). This assumes the clocks
//!    tick at rates within that allowance, as Redlock's validity does.
//!
//! The read is a second step: another owner may take the lock between the
//! answer and the read, so "taken over" means "held by another owner when
//! asked", which is what a user must act on. When the read fails the
//! reason falls back to 2 or 3. An idempotency record and a semaphore's
//! permits are read for nothing (no one takes a record's lease but
//! through its fencing, and permits are shared): their reason is 2 or 3.

use std::time::Duration;

use crate::backend::{Backend, Inspect, Inspection, Keys, Kind, keys};
use crate::error::LostReason;
use crate::store::subscribe::waiter_id;

/// What a lease was when the call that found it gone was sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found<'a> {
    pub(crate) keys: &'a Keys,
    /// The owner's token (a secret: compared here, never logged).
    pub(crate) token: &'a str,
    /// The key's prefix (the client's).
    pub(crate) prefix: &'a str,
    /// Whether this process still presumed the lease held when the call
    /// went out.
    pub(crate) in_lease: bool,
}

/// Why the lease in `found` was lost (see the module docs), reading the
/// name within `limit`.
pub(crate) async fn why(backend: &Backend, found: Found<'_>, limit: Duration) -> LostReason {
    let read = match found.keys.kind() {
        Kind::Lock | Kind::Write | Kind::Read => {
            let (lock, rw, semaphore) = keys::of_name(found.prefix, found.keys.user());
            let inspect = Inspect {
                keys: &lock,
                rw: &rw,
                semaphore: &semaphore,
            };
            backend.inspect(&inspect, limit).await.ok()
        }
        Kind::Record | Kind::Permits { .. } => None,
    };
    if let Some(now) = &read {
        if now.ended.contains(&waiter_id(found.token)) {
            return LostReason::EndedByOperator;
        }
        if taken_over(found.keys.kind(), found.token, now) {
            return LostReason::TakenOver;
        }
    }
    if found.in_lease {
        LostReason::TokenGone
    } else {
        LostReason::Expired
    }
}

/// Whether another owner than `token` holds what a lease of `kind` was on.
fn taken_over(kind: Kind, token: &str, now: &Inspection) -> bool {
    let other = |lease: &Option<crate::backend::Lease>| {
        lease.as_ref().is_some_and(|held| held.token != token)
    };
    match kind {
        Kind::Lock => other(&now.lock),
        Kind::Write | Kind::Read => other(&now.writer),
        Kind::Record | Kind::Permits { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Lease;

    fn lease(token: &str) -> Option<Lease> {
        Some(Lease {
            token: token.to_owned(),
            left: None,
            granted: None,
        })
    }

    #[test]
    fn only_another_owners_token_is_a_take_over() {
        let mine = Inspection {
            lock: lease("me"),
            ..Inspection::default()
        };
        let theirs = Inspection {
            lock: lease("them"),
            writer: lease("them"),
            ..Inspection::default()
        };
        assert!(!taken_over(Kind::Lock, "me", &mine));
        assert!(!taken_over(Kind::Lock, "me", &Inspection::default()));
        assert!(taken_over(Kind::Lock, "me", &theirs));
        assert!(taken_over(Kind::Read, "me", &theirs));
        assert!(taken_over(Kind::Write, "me", &theirs));
        assert!(!taken_over(Kind::Record, "me", &theirs));
    }
}
