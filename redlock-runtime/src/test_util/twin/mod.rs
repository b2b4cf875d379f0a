//! The in-memory twins' steps over a discrete clock, for the models of
//! `redlock-model`: what a Redis node does, as the memory store does it.
//!
//! A model counts time in ticks (`u8`, from 0); each tick here is
//! [`TICK`] after one fixed base [`Instant`], so tick `t` is the instant
//! `base + t × TICK`, and a node's clock (the one its fencing tokens'
//! floor reads, what `TIME` gives a script) reads `t × TICK` in
//! microseconds: [`CLOCK_PER_TICK`]. Every step takes the tick it runs at,
//! as a script reads the clock once; a step reads no clock of its own, so
//! a model's states are the same whenever it is checked.
//!
//! A node is the twin's table for one key (a lock's key and its fencing
//! counter; a record's key and its counter). It is `Clone` (a replica's
//! copy, a snapshot), `Eq` and `Hash` over what it holds (the model
//! checker keeps its states in a set): the key's value and expiry, and
//! the counter's value. When a counter may be forgotten is left out: it is
//! kept for [`RETENTION`], longer than any model's clock runs, so two
//! nodes that differ only there behave alike within a model. Restarting a
//! node empty keeps its clock running ([`LockNode::restarted_empty`]); a
//! node built [`with_clock_ahead`](LockNode::with_clock_ahead) has a clock
//! that reads a fixed number of ticks ahead (a skew between Redlock's
//! nodes); one built [`without_clock_floor`](LockNode::without_clock_floor)
//! has a clock that reads zero throughout, the broken variant of the
//! fencing rule.
//!
//! One file per twin: [`LockNode`] (`lock.rs`), [`FairNode`] (`fair.rs`), [`RecordNode`]
//! (`record.rs`), [`LatchNode`] (`latch.rs`), [`SemaphoreNode`]
//! (`semaphore.rs`), [`RwNode`] (`rw.rs`); here, the clock they share.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// What every node is besides its steps: equal to another when what it
/// holds is (the digests first, then the views: `canonical`), hashed by
/// its digest, and (unless `no default`) `Default` as `new()`. A node has
/// a `digest: u64` field kept by its steps and a `canonical()` view.
macro_rules! node_identity {
    ($node:ty) => {
        node_identity!($node, no default);

        impl Default for $node {
            fn default() -> Self {
                Self::new()
            }
        }
    };
    ($node:ty, no default) => {
        impl PartialEq for $node {
            fn eq(&self, other: &Self) -> bool {
                self.digest == other.digest && self.canonical() == other.canonical()
            }
        }

        impl Eq for $node {}

        impl std::hash::Hash for $node {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                std::hash::Hash::hash(&self.digest, state);
            }
        }
    };
}

mod fair;
mod latch;
mod lock;
mod record;
mod rw;
mod semaphore;

pub use fair::{FairNode, FairWake};
pub use latch::LatchNode;
pub use lock::LockNode;
pub use record::{RecordClaim, RecordNode, RecordState};
pub use rw::RwNode;
pub use semaphore::SemaphoreNode;

/// How long one tick lasts.
pub const TICK: Duration = Duration::from_millis(1);

/// How far a node's clock moves in one tick, in microseconds: the most
/// fencing tokens one counter can issue in a tick and still have the
/// clock floor above them all a tick later.
pub const CLOCK_PER_TICK: u64 = 1_000;

/// How long a counter is kept after it issued a token: longer than any
/// model's clock, so a counter is lost only in a restart or a failover.
pub const RETENTION: Duration = Duration::from_secs(3_600);

/// The instant of tick 0 (one per process): a second after its first
/// use, so that the zero of a clock ahead by up to 255 ticks is after it
/// too (no instant before the process's is ever made).
#[inline]
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(|| Instant::now() + Duration::from_secs(1))
}

/// The instant of tick `t`.
#[inline]
fn at(t: u8) -> Instant {
    base() + TICK * u32::from(t)
}

/// The tick an instant falls in (rounded up: a lease ending within tick `t`
/// has ended at `t`).
#[inline]
fn tick_of(instant: Instant) -> u64 {
    let nanos = instant.saturating_duration_since(base()).as_nanos();
    let tick = nanos.div_ceil(TICK.as_nanos());
    u64::try_from(tick).unwrap_or(u64::MAX)
}

/// The zero of a node's fencing clock that reads `ahead` ticks ahead of
/// the model's.
fn clock_zero(ahead: u8) -> Instant {
    base() - TICK * u32::from(ahead)
}

/// The zero of a node's clock without the floor: so far ahead that the
/// clock reads 0 throughout.
fn no_clock_floor() -> Instant {
    base() + Duration::from_secs(365 * 24 * 3_600)
}

/// The digest of what a node holds, taken after each of its steps, so a
/// model state's hash reads a number instead of looking the keys up (the
/// model checker hashes every state it reaches). `DefaultHasher::new` has
/// fixed keys: the same in every run.
fn digest(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}
