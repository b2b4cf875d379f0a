//! Fair mode: the line of waiters beside the lock (a list of tokens in
//! arrival order, and each waiter's presence deadline in a sorted set),
//! taken, left and woken by its scripts (`scripts.rs`, the `.lua` files
//! beside it); its verbs on one Redis (`redis.rs`) and its line in the
//! memory twin (`memory.rs`; the twin's fair acquire and leave are still
//! `backend/memory.rs`'s).

pub(crate) mod memory;
mod redis;
mod scripts;

#[cfg(any(test, feature = "test-util"))]
pub(crate) use scripts::FAIR_LEAVE;
#[cfg(test)]
pub(crate) use scripts::{FAIR_RELEASE, SCRIPTS};
