//! The multi-lock's group: several locks whose keys share a hash tag,
//! taken all or none in one step ([`GroupAcquire`]), with its script
//! (`scripts.rs`), its verb on one Redis (`redis.rs`) and its memory twin
//! (`memory.rs`). (Released, renewed and ended as locks.)

use std::time::Duration;

use super::LockKeys;

pub(crate) mod memory;
mod redis;
mod scripts;

#[cfg(test)]
pub(crate) use scripts::SCRIPTS;

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
