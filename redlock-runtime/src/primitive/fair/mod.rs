//! Fair mode: the line of waiters beside the lock (a list of tokens in
//! arrival order, and each waiter's presence deadline in a sorted set),
//! taken, left and woken by its scripts (`scripts.rs`, the `.lua` files
//! beside it); its verbs on one Redis (`redis.rs`) and its memory twin's
//! steps over the lock table's lines (`memory.rs`).

pub(crate) mod memory;
mod redis;
mod scripts;

#[cfg(any(test, feature = "test-util"))]
pub(crate) use scripts::FAIR_LEAVE;
#[cfg(test)]
pub(crate) use scripts::{FAIR_RELEASE, SCRIPTS};
