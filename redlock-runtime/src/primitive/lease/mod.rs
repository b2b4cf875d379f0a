//! A lease, whichever primitive holds it (a lock, a reader, a writer, a
//! semaphore holder, a claimed record): its keys ([`Keys`]) and the verbs
//! every lease has, acquired ([`Acquire`]), renewed ([`Renewal`]), ended
//! ([`End`]) or given back ([`GiveBack`]); and the leases a synchronizer
//! keeps in a sorted set ([`Shared`], the renewal script `renew.lua`, the
//! memory twin's lease tables in `memory.rs`).

use std::time::Duration;

use super::{LockKeys, PermitKeys, RecordKeys, RwKeys};

pub(crate) mod memory;
mod redis;
mod renew;
mod shared;

pub(crate) use shared::{LEASE_RENEW, Shared};

/// The keys of one lease, by what holds it: each verb on a lease
/// ([`Acquire`](Acquire), [`Renewal`](Renewal),
/// [`End`](End), [`GiveBack`](GiveBack)) acts with the
/// scripts (and memory maps) of its primitive.
#[derive(Debug, Clone)]
pub(crate) enum Keys {
    /// A lock.
    Lock(LockKeys),
    /// A read/write lock's shared side: one lease among its readers.
    Read(RwKeys),
    /// A read/write lock's exclusive side: the writer's token, fenced.
    Write(RwKeys),
    /// Permits of a semaphore, under one lease.
    Permits(PermitKeys),
    /// An idempotency record, claimed.
    Record(RecordKeys),
}

/// Which primitive a [`Keys`] holds (what the books and errors name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A lock.
    Lock,
    /// A read/write lock's shared side.
    Read,
    /// A read/write lock's exclusive side.
    Write,
    /// `permits` of a semaphore of `limit`.
    Permits { limit: u32, permits: u32 },
    /// An idempotency record.
    Record,
}

impl Keys {
    /// Which primitive this is.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Self::Lock(_) => Kind::Lock,
            Self::Read(_) => Kind::Read,
            Self::Write(_) => Kind::Write,
            Self::Permits(p) => Kind::Permits {
                limit: p.limit,
                permits: p.permits,
            },
            Self::Record(_) => Kind::Record,
        }
    }

    /// The key as the user gave it (a record's: the hash of its key).
    pub(crate) fn user(&self) -> &str {
        match self {
            Self::Lock(k) => &k.user,
            Self::Read(k) | Self::Write(k) => &k.user,
            Self::Permits(k) => &k.user,
            Self::Record(k) => &k.user,
        }
    }

    /// The key the lease is named by: the lock, the read/write lock's
    /// `:rw`, the semaphore's holders, the record. Its releases publish on
    /// it (the channel waiters subscribe to).
    pub(crate) fn main(&self) -> &str {
        match self {
            Self::Lock(k) => &k.lock,
            Self::Read(k) | Self::Write(k) => &k.rw,
            Self::Permits(k) => &k.holders,
            Self::Record(k) => &k.record,
        }
    }

    /// The keys a store routes a call of this lease by (a Cluster checks
    /// that they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        match self {
            Self::Lock(k) => k.routed(),
            Self::Read(k) | Self::Write(k) => k.routed(),
            Self::Permits(k) => k.routed(),
            Self::Record(k) => k.routed(),
        }
    }

    /// The keys a renewal of this lease resets: the lock (a lock, a
    /// record, a writer), the readers (a reader), or the holders and
    /// their counts (a semaphore's permits).
    pub(crate) fn renewed(&self) -> (&str, Option<&str>) {
        match self {
            Self::Lock(k) => (&k.lock, None),
            Self::Write(k) => (&k.rw, None),
            Self::Read(k) => (&k.readers, None),
            Self::Permits(k) => (&k.holders, Some(&k.counts)),
            Self::Record(k) => (&k.record, None),
        }
    }
}

/// The answer to one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The lock is ours, with this fencing token; `at_ms` is the time of the
    /// acquire on the store's clock (Redis's `TIME`), when it was asked for.
    Acquired { fence: u64, at_ms: Option<u64> },
    /// Another owner holds it; `pttl` is what is left of its lease, when known.
    Busy { pttl: Option<Duration> },
}

/// One acquire attempt: take the lock if free (or if it already holds
/// `token`, from an earlier attempt whose answer was lost).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acquire<'a> {
    pub(crate) keys: &'a Keys,
    pub(crate) token: &'a str,
    pub(crate) ttl: Duration,
    /// Also return the store's clock (for a minimum hold).
    pub(crate) want_time: bool,
    /// Fair mode: wait in line, keeping the place this long after each ask.
    pub(crate) line: Option<Duration>,
    /// Issue the fencing token with the acquire (else it may be issued on
    /// first ask: see [`IssueFence`](super::IssueFence)).
    pub(crate) fenced: bool,
    /// No earlier attempt of this acquire may have taken the lock: a
    /// plain `SET NX` cannot mistake the lock for another owner's.
    pub(crate) fresh: bool,
}

/// One lock's lease to reset (an extend, or one of the watchdog's batch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Renewal<'a> {
    pub(crate) keys: &'a Keys,
    pub(crate) token: &'a str,
    pub(crate) ttl: Duration,
}

/// Ending a held lock: its release.
#[derive(Debug, Clone, Copy)]
pub(crate) struct End<'a> {
    pub(crate) keys: &'a Keys,
    pub(crate) token: &'a str,
    /// The holder's fencing token, which a Redlock release spreads to
    /// every node.
    pub(crate) fence: u64,
    /// Taken in fair mode: the release wakes the first waiter in line.
    pub(crate) fair: bool,
    /// A minimum hold: the acquire time on the store's clock (ms), and the
    /// minimum. The lock is kept until it ends.
    pub(crate) hold: Option<(u64, Duration)>,
    /// Its acquire found it held by another owner first: others likely
    /// wait, and a release without a script publishes with its delete
    /// (see `lock/conditional.rs`).
    pub(crate) contended: bool,
}

/// What ending a lock did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The lock no longer held this owner's token.
    NotOwner,
    /// The lock is deleted (its waiters woken).
    Deleted,
    /// The minimum hold is not over: the lease now ends when it does.
    HeldUntilMinimum,
}

/// Giving back what an acquire that returned no guard may hold: the lock,
/// and in fair mode its place in the line, after any of its commands still
/// on the way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GiveBack<'a> {
    pub(crate) keys: &'a Keys,
    pub(crate) token: &'a str,
    pub(crate) fair: bool,
}

/// Whether an acquire script's reply says the lease was taken.
pub(crate) fn took(reply: &[i64]) -> bool {
    reply.first() == Some(&1)
}

/// Reads the reply of the acquire scripts: `{1, fence[, now_ms]}` or
/// `{0, pttl}` (-1: no expiry, not one of ours; -2: gone; -3: free, but
/// another waiter is first in line).
pub(crate) fn acquire_reply(reply: &[i64]) -> AcquireReply {
    let value = |i: usize| reply.get(i).copied().unwrap_or(-1);
    if value(0) == 1 {
        AcquireReply::Acquired {
            fence: u64::try_from(value(1)).unwrap_or(0),
            at_ms: reply.get(2).and_then(|&t| u64::try_from(t).ok()),
        }
    } else {
        AcquireReply::Busy {
            pttl: u64::try_from(value(1)).ok().map(Duration::from_millis),
        }
    }
}
