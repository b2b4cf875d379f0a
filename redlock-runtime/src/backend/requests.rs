//! The request and reply structs of the store's verbs: what each verb of
//! [`Backend`](super::Backend) takes and answers, one struct per call.

use std::time::{Duration, SystemTime};

use super::{Keys, LatchKeys, LockKeys, PermitKeys, RecordKeys, RwKeys};

/// Reads everything kept under one name (see [`Inspection`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inspect<'a> {
    /// The plain lock's keys; the read/write lock's and the semaphore's
    /// share their hash tag.
    pub(crate) keys: &'a LockKeys,
    pub(crate) rw: &'a RwKeys,
    pub(crate) semaphore: &'a PermitKeys,
}

/// One owner's lease as stored: its token (secret: only its public part
/// leaves the crate), the time left, and when the store granted it, where
/// the store knows better than the token's own time (a holder that waited
/// in a line: see `owner::granted`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) token: String,
    pub(crate) left: Option<Duration>,
    pub(crate) granted: Option<SystemTime>,
}

/// What a store keeps under one name, leases that ran out left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Inspection {
    pub(crate) lock: Option<Lease>,
    pub(crate) fence: Option<u64>,
    pub(crate) fair_waiters: u64,
    pub(crate) writer: Option<Lease>,
    pub(crate) write_fence: Option<u64>,
    pub(crate) readers: Vec<Lease>,
    pub(crate) waiting_writers: u64,
    pub(crate) permits: Vec<(Lease, u32)>,
    /// `wakeups::waiter_id` of each holder an operator ended, while their
    /// lease would have lasted (see `ForceRelease`).
    pub(crate) ended: Vec<String>,
}

/// Ends the lock and the read/write lock of one name, whoever holds them
/// (the operator's break-glass: `scripts::FORCE_RELEASE`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ForceRelease<'a> {
    /// The lock's keys (the name's hash tag: where it is routed).
    pub(crate) keys: &'a LockKeys,
    /// The read/write lock's keys.
    pub(crate) rw: &'a RwKeys,
}

/// How long a forced release keeps the ended holders' ids past the longest
/// ended lease: room for the read that follows a renewal's or release's
/// answer (see `scripts::FORCE_RELEASE`).
pub(crate) const ENDED_KEPT_PAST_LEASE: Duration = Duration::from_secs(10);

/// What a forced release ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ForceReply {
    /// The ended holders' leases (their tokens are secrets: only their
    /// public part leaves the crate), time left unknown.
    pub(crate) ended: Vec<Lease>,
    /// The lock's fencing counter as raised, when a holder was ended.
    pub(crate) fence: Option<u64>,
    /// The read/write lock's, when its writer was ended.
    pub(crate) write_fence: Option<u64>,
}

/// A write lock becomes a read lock in one step, keeping its token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Downgrade<'a> {
    /// The read/write lock's keys.
    pub(crate) keys: &'a RwKeys,
    pub(crate) token: &'a str,
    pub(crate) ttl: Duration,
}

/// Reads how many permits of a semaphore are free.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Available<'a> {
    pub(crate) keys: &'a PermitKeys,
    pub(crate) limit: u32,
}

/// One call on a countdown latch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LatchCall<'a> {
    pub(crate) keys: &'a LatchKeys,
    pub(crate) op: LatchOp<'a>,
}

/// What a [`LatchCall`] does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LatchOp<'a> {
    /// Sets the count, only if the latch is not set up; with its ttl.
    Set { count: u64, ttl: Duration },
    /// Counts down once per request id.
    CountDown { id: &'a str },
    /// Reads the count.
    Read,
}

/// The latch's state after a [`LatchCall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LatchReply {
    /// Not set up (never, or its ttl ended).
    Absent,
    /// Set up, with this count left and this much of its ttl.
    Counting {
        count: u64,
        ttl_left: Option<Duration>,
    },
    /// `Set` found it already set up.
    AlreadySet,
}

/// Takes several locks whose keys share a hash tag in one step: all or
/// none. Every lock gets the same token and its own fencing token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupAcquire<'a> {
    /// The first of `all`, which routes the call (they share a slot).
    pub(crate) keys: &'a LockKeys,
    pub(crate) all: &'a [LockKeys],
    pub(crate) token: &'a str,
    pub(crate) ttl: Duration,
}

/// The answer to a [`GroupAcquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupReply {
    /// All taken: the fencing token of each, in order.
    Acquired(Vec<u64>),
    /// The lock at this index is held by another owner, for `pttl` more.
    Busy {
        index: usize,
        pttl: Option<Duration>,
    },
}

/// Claiming an idempotency record (absent -> in progress).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim<'a> {
    pub(crate) keys: &'a RecordKeys,
    pub(crate) token: &'a str,
    pub(crate) fingerprint: &'a str,
    pub(crate) lease: Duration,
    /// How long the fencing counter is kept after the claim.
    pub(crate) fence_ttl: Duration,
}

/// What a claim found: one type from the record script's reply to the
/// caller of the public `records` module (which names it `Claimed`, holding
/// a lease). `L` is what the claimer holds: the fencing token issued with
/// the claim (`u64`) as the stores answer, the lease that renews the claim
/// for the public API.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
// `records::Claimed::Claimed`: the public names, kept.
#[allow(clippy::enum_variant_names)]
pub enum Claimed<L> {
    /// The record is ours: run the work, then complete or release it.
    Claimed(L),
    /// Another claimer holds it; its lease has this much left.
    Processing {
        /// What is left of the holder's lease.
        lease_left: Duration,
    },
    /// It completed with this result.
    Completed(Completion),
    /// The key was used with another fingerprint.
    Mismatch,
}

impl<L> Claimed<L> {
    /// The same answer, holding `f(l)` where this holds `l`.
    pub(crate) fn map<M>(self, f: impl FnOnce(L) -> M) -> Claimed<M> {
        match self {
            Self::Claimed(l) => Claimed::Claimed(f(l)),
            Self::Processing { lease_left } => Claimed::Processing { lease_left },
            Self::Completed(result) => Claimed::Completed(result),
            Self::Mismatch => Claimed::Mismatch,
        }
    }
}

/// A completed record's result, as stored: what a duplicate is answered
/// with (see the `records` module). Made with [`Completion::new`]
/// or [`Completion::unreplayable`] (which say what `replayable` and `body`
/// must agree on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// `false`: completed, but too large to replay (no body stored).
    pub replayable: bool,
    /// The status the work ended with (an HTTP status code for the
    /// `redlock-axum` layer).
    pub status: u16,
    /// The stored headers, encoded by the caller.
    pub headers: Vec<u8>,
    /// The body (empty when not replayable).
    pub body: Vec<u8>,
}

impl Completion {
    /// A result to replay: its `status`, `headers` (encoded by the
    /// caller) and `body`.
    pub fn new(status: u16, headers: Vec<u8>, body: Vec<u8>) -> Self {
        Self {
            replayable: true,
            status,
            headers,
            body,
        }
    }

    /// A result kept without its body, because it was too large to store:
    /// a duplicate learns that the work completed, with this `status` and
    /// `headers`, but cannot be answered with the result itself.
    pub fn unreplayable(status: u16, headers: Vec<u8>) -> Self {
        Self {
            replayable: false,
            status,
            headers,
            body: Vec::new(),
        }
    }
}

/// Completing a claimed record (in progress -> completed), owner-checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Complete<'a> {
    pub(crate) keys: &'a RecordKeys,
    pub(crate) token: &'a str,
    pub(crate) result: &'a Completion,
    /// How long the completed record is kept.
    pub(crate) retention: Duration,
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
    /// first ask: see [`IssueFence`]).
    pub(crate) fenced: bool,
    /// No earlier attempt of this acquire may have taken the lock: a
    /// plain `SET NX` cannot mistake the lock for another owner's.
    pub(crate) fresh: bool,
}

/// Issues a held lock's fencing token, if `token` still holds it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IssueFence<'a> {
    pub(crate) keys: &'a Keys,
    pub(crate) token: &'a str,
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
