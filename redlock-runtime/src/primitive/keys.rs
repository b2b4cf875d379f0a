//! How the primitives name their keys in Redis: each under `prefix{user}`,
//! so that Redis Cluster puts all of a primitive's keys in one slot; and
//! the keys kept under one name (what inspection reads and a forced
//! release ends).

use super::{LockKeys, PermitKeys, RwKeys};

/// `prefix{user}` followed by `suffix`, sized once (the hot path of every
/// acquire builds several).
pub(crate) fn tagged(prefix: &str, user: &str, suffix: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + user.len() + 2 + suffix.len());
    key.push_str(prefix);
    key.push('{');
    key.push_str(user);
    key.push('}');
    key.push_str(suffix);
    key
}

/// `key` followed by `suffix`.
pub(crate) fn suffixed(key: &str, suffix: &str) -> String {
    let mut out = String::with_capacity(key.len() + suffix.len());
    out.push_str(key);
    out.push_str(suffix);
    out
}

/// Everything kept under one name, as `Inspect` reads it and a forced
/// release ends it: the lock's keys, the read/write lock's and the
/// semaphore's (its limit and permits play no part there).
pub(crate) fn of_name(prefix: &str, name: &str) -> (LockKeys, RwKeys, PermitKeys) {
    (
        LockKeys::new(prefix, name.to_owned()),
        RwKeys::new(prefix, name.to_owned()),
        PermitKeys::new(prefix, name.to_owned(), 1, 1),
    )
}
