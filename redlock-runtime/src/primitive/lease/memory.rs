//! The memory twin's leases kept like a sorted set on Redis (a reader's,
//! a waiting writer's presence): each token with the end of its lease.

use std::collections::HashMap;
use std::time::Duration;

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

/// The end of a lease ending at `end` after a renewal to `ttl` at `now`:
/// `now + ttl`, except that a `watchdog` renewal never shortens a lease
/// (a manual extend to a longer ttl that landed first keeps its lease),
/// the rule of the renewal scripts' last argument (`lock/extend.lua`,
/// `lease/renew.lua`). A manual extend sets the lease, shorter or not.
#[inline]
pub(crate) fn renewed(end: Instant, (ttl, watchdog): (Duration, bool), now: Instant) -> Instant {
    if watchdog && end >= now + ttl {
        end
    } else {
        now + ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watchdog_renewal_keeps_a_longer_lease_and_an_extend_sets_it() {
        let now = Instant::now();
        let (long, ttl) = (now + Duration::from_secs(20), Duration::from_secs(1));
        assert_eq!(renewed(long, (ttl, true), now), long, "the watchdog's");
        assert_eq!(renewed(long, (ttl, false), now), now + ttl, "an extend's");
        let short = now + Duration::from_millis(10);
        assert_eq!(renewed(short, (ttl, true), now), now + ttl, "lengthened");
    }
}
