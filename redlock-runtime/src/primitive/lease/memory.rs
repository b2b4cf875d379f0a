//! The memory twin's leases kept like a sorted set on Redis (a reader's,
//! a waiting writer's presence): each token with the end of its lease.

use std::collections::HashMap;

use tokio::time::Instant;

/// Leases by token, each with its end.
pub(crate) type Leases = HashMap<String, Instant>;

/// The live leases of `key` in `map` (the ended ones dropped).
pub(crate) fn live<'a>(
    map: &'a mut HashMap<String, Leases>,
    key: &str,
    now: Instant,
) -> &'a mut Leases {
    let leases = map.entry(key.to_owned()).or_default();
    leases.retain(|_, end| *end > now);
    leases
}

/// Drops `key` from `map` once it has no lease left.
pub(crate) fn tidy<V>(map: &mut HashMap<String, HashMap<String, V>>, key: &str) {
    if map.get(key).is_some_and(HashMap::is_empty) {
        map.remove(key);
    }
}
