//! The operator's verbs in process memory: the twins of `inspect.lua` and
//! `force_release.lua`, over the tables of the lock, the read/write lock
//! and the semaphore, and the ids of the holders an operator ended.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::{ENDED_KEPT_PAST_LEASE, ForceRelease, ForceReply, Inspect, Inspection, Lease};
use crate::primitive::lock::memory::LockTable;
use crate::primitive::rw::memory::RwTable;
use crate::primitive::semaphore::memory::PermitTable;
use crate::store::subscribe::waiter_id;

/// The holders an operator ended, by the name's `LockKeys::ended` key:
/// their `waiter_id`s, kept until the instant (`force_release.lua`'s set).
#[derive(Debug, Default)]
pub(crate) struct EndedTable {
    ended: HashMap<String, (HashSet<String>, Instant)>,
}

impl EndedTable {
    /// Forgets the sets whose time is over.
    pub(crate) fn sweep(&mut self, now: Instant) {
        self.ended.retain(|_, (_, until)| *until > now);
    }
}

/// The tables a name's primitives keep.
#[derive(Debug)]
pub(crate) struct Tables<'a> {
    pub(crate) locks: &'a mut LockTable,
    pub(crate) rw: &'a mut RwTable,
    pub(crate) permits: &'a PermitTable,
    pub(crate) ended: &'a mut EndedTable,
}

/// What a forced release did, and whom to wake.
#[derive(Debug)]
pub(crate) struct Forced {
    pub(crate) reply: ForceReply,
    /// The lock's waiters are to be woken, with the first fair waiter's
    /// id (or none in line): the lock had a holder.
    pub(crate) lock_head: Option<Option<String>>,
    /// The read/write lock's waiters are to be woken: it had a holder.
    pub(crate) rw_freed: bool,
}

/// Ends the lock and the read/write lock of a name, whoever holds them;
/// raises their fencing counters and keeps the ended holders' ids as long
/// as the longest ended lease would have lasted (and
/// `ENDED_KEPT_PAST_LEASE` more).
pub(crate) fn force_release(
    tables: Tables<'_>,
    force: &ForceRelease<'_>,
    now: Instant,
    retention: Duration,
) -> Forced {
    let ForceRelease { keys, rw } = *force;
    let Tables {
        locks,
        rw: rws,
        ended: ended_table,
        ..
    } = tables;
    let mut reply = ForceReply::default();
    let mut lock_head = None;
    // How long the longest ended lease would have lasted.
    let mut longest = Duration::ZERO;
    if let Some(held) = locks.held.remove(&keys.lock).filter(|h| h.expires > now) {
        longest = longest.max(held.expires - now);
        reply.ended.push(ended(held.token, Some(held.granted)));
        reply.fence = Some(locks.next_fence(&keys.fence, now, retention));
        // The first fair waiter, by its id (an empty wake-up when no one is
        // in line).
        lock_head =
            Some((locks.lines.get_mut(&keys.lock)).and_then(|line| line.head(now).map(waiter_id)));
    }
    let writer = locks.held.remove(&rw.rw).filter(|h| h.expires > now);
    if let Some(writer) = &writer {
        longest = longest.max(writer.expires - now);
        reply
            .ended
            .push(ended(writer.token.clone(), Some(writer.granted)));
        reply.write_fence = Some(locks.next_fence(&rw.fence, now, retention));
    }
    let readers = rws.end_readers(&rw.rw, now);
    let rw_freed = writer.is_some() || !readers.is_empty();
    for (token, end) in readers {
        longest = longest.max(end - now);
        reply.ended.push(ended(token, None));
    }
    if !reply.ended.is_empty() {
        let keep = now + longest + ENDED_KEPT_PAST_LEASE;
        let (ids, until) = (ended_table.ended)
            .entry(keys.ended())
            .or_insert_with(|| (HashSet::new(), keep));
        ids.extend(reply.ended.iter().map(|lease| waiter_id(&lease.token)));
        *until = (*until).max(keep);
    }
    Forced {
        reply,
        lock_head,
        rw_freed,
    }
}

/// An ended holder's lease, as the reply names it.
fn ended(token: String, granted: Option<SystemTime>) -> Lease {
    Lease {
        token,
        left: None,
        granted,
    }
}

/// Everything kept under one name, leases that ran out left out.
pub(crate) fn inspect(tables: Tables<'_>, inspect: &Inspect<'_>, now: Instant) -> Inspection {
    let Inspect {
        keys,
        rw,
        semaphore,
    } = *inspect;
    let Tables {
        locks,
        rw: rws,
        permits,
        ended,
    } = tables;
    let live = |key: &str| {
        (locks.held.get(key))
            .filter(|h| h.expires > now)
            .map(|h| Lease {
                token: h.token.clone(),
                left: Some(h.expires - now),
                granted: Some(h.granted),
            })
    };
    let fence = |key: &str| {
        (locks.fences.get(key))
            .filter(|f| f.keep_until > now)
            .map(|f| f.value)
    };
    let lease = |token: &str, end: Instant| Lease {
        token: token.to_owned(),
        left: Some(end - now),
        granted: None,
    };
    Inspection {
        lock: live(&keys.lock),
        fence: fence(&keys.fence),
        fair_waiters: locks.lines.get(&keys.lock).map_or(0, |line| {
            line.presence.values().filter(|until| **until > now).count() as u64
        }),
        writer: live(&rw.rw),
        write_fence: fence(&rw.fence),
        ended: (ended.ended.get(&keys.ended()))
            .filter(|(_, until)| *until > now)
            .map(|(ids, _)| ids.iter().cloned().collect())
            .unwrap_or_default(),
        readers: (rws.readers(&rw.rw, now).into_iter())
            .map(|(token, end)| lease(token, end))
            .collect(),
        waiting_writers: rws.waiting_writers(&rw.rw, now),
        permits: (permits.holders(&semaphore.holders, now).into_iter())
            .map(|(token, n, end)| (lease(token, end), n))
            .collect(),
    }
}
