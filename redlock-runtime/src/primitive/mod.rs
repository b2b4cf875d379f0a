//! What a call does: one folder per primitive, each with its typed keys,
//! its requests and replies, its scripts (`.lua` files loaded with
//! `include_str!`), its verbs on one Redis (`redis.rs`) and its twin in
//! process memory (`memory.rs`: step functions over its own tables, which
//! the memory store holds and runs under its lock).
//!
//! - [`lease`]: what every leased primitive is acquired, renewed and ended
//!   by ([`Keys`], [`Acquire`], [`Renewal`], [`End`], [`GiveBack`]), and
//!   the leases kept in a sorted set (a reader's, a semaphore holder's).
//! - [`lock`]: a lock's keys, scripts, verbs on one Redis (with the
//!   batch step the coalescer of `store/server/` sends) and its twin.
//! - [`fair`]: fair mode's line of waiters beside a lock.
//! - [`rw`], [`semaphore`], [`latch`], [`group`]: the synchronizers and
//!   the multi-lock's group under one hash tag.
//! - [`record`]: idempotency records.
//! - [`name`]: the operator's verbs over everything kept under one name
//!   (inspection, forced release).
//!
//! Below the dispatch of `backend` (which store runs a call) and above
//! [`store`](crate::store) (how a script reaches a server): nothing here
//! chooses a store.

pub(crate) mod fair;
pub(crate) mod group;
pub(crate) mod keys;
pub(crate) mod latch;
pub(crate) mod lease;
pub(crate) mod lock;
pub(crate) mod name;
pub(crate) mod record;
pub(crate) mod rw;
pub(crate) mod semaphore;

pub(crate) use group::{GroupAcquire, GroupReply};
pub(crate) use latch::{LatchCall, LatchKeys, LatchOp, LatchReply};
pub(crate) use lease::{Acquire, AcquireReply, End, Ended, GiveBack, Keys, Kind, Renewal};
pub(crate) use lock::{IssueFence, LockKeys};
pub(crate) use record::Claimed;
pub(crate) use record::{Claim, Complete, RecordKeys};
pub(crate) use rw::{Downgrade, RwKeys};
pub(crate) use semaphore::{Available, PermitKeys};
