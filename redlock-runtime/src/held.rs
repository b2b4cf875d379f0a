//! [`HeldLease`]: what this client holds, from its own books (no round
//! trip), for a debug endpoint; what [`LockClient::held`](crate::LockClient::held)
//! lists.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::backend::Kind;
use crate::lock::HeldLock;

/// What kind of lease a [`HeldLease`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseKind {
    /// A lock ([`LockClient::lock`](crate::LockClient::lock), a
    /// multi-lock's key, `#[distributed_lock]`).
    Lock,
    /// A read lock of a [`RwLock`](crate::RwLock).
    Read,
    /// The write lock of a [`RwLock`](crate::RwLock).
    Write,
    /// Permits of a [`Semaphore`](crate::Semaphore).
    Permits {
        /// How many permits this lease holds.
        permits: u32,
        /// The semaphore's limit.
        limit: u32,
    },
    /// An idempotency record claimed through the `records` module
    /// (its key is shown hashed, never raw).
    Record,
}

impl fmt::Display for LeaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lock => f.write_str("lock"),
            Self::Read => f.write_str("read lock"),
            Self::Write => f.write_str("write lock"),
            Self::Permits { permits, limit } => write!(f, "{permits} of {limit} permits"),
            Self::Record => f.write_str("idempotency record"),
        }
    }
}

/// One lease this client holds, as its own books say: the lease it
/// confirmed last, not a read of Redis (for that, see
/// [`LockClient::inspect`](crate::LockClient::inspect)). Never an owner
/// token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldLease {
    /// The name it was taken under, as given (a record's: the hash of its
    /// key).
    pub key: String,
    /// What it is.
    pub kind: LeaseKind,
    /// When the acquire returned, on this machine's clock.
    pub since: SystemTime,
    /// How long it has been held.
    pub held_for: Duration,
    /// How long the lease lasts from now, as last confirmed (the watchdog
    /// extends it while `renewed`).
    pub lease_left: Duration,
    /// The fencing token, when one was issued.
    pub fencing_token: Option<u64>,
    /// Whether the watchdog renews it (else it ends with its lease).
    pub renewed: bool,
}

impl HeldLease {
    /// `held`'s entry; `None` once it is no longer held (released, lost,
    /// run out), which the books may not have caught up with yet.
    pub(crate) fn of(held: &HeldLock) -> Option<HeldLease> {
        if !held.is_held() {
            return None;
        }
        let keys = held.keys();
        let kind = match keys.kind() {
            Kind::Lock => LeaseKind::Lock,
            Kind::Read => LeaseKind::Read,
            Kind::Write => LeaseKind::Write,
            Kind::Permits { limit, permits } => LeaseKind::Permits { permits, limit },
            Kind::Record => LeaseKind::Record,
            // A latch holds no lease, and is never on the books.
        };
        let held_for = held.held_for();
        Some(HeldLease {
            key: keys.user().to_owned(),
            kind,
            since: SystemTime::now()
                .checked_sub(held_for)
                .unwrap_or(SystemTime::UNIX_EPOCH),
            held_for,
            lease_left: held.remaining(),
            fencing_token: held.issued_fence(),
            renewed: held.renews(),
        })
    }
}

/// One line: `order:42 (lock) for 1.2s, lease 28.8s left, fencing token 17`.
impl fmt::Display for HeldLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) for {:.1?}, lease {:.1?} left",
            self.key, self.kind, self.held_for, self.lease_left
        )?;
        if !self.renewed {
            f.write_str(" (not renewed)")?;
        }
        if let Some(token) = self.fencing_token {
            write!(f, ", fencing token {token}")?;
        }
        Ok(())
    }
}
