//! Reading what the memory store keeps under a name.

use tokio::time::Instant;

use super::super::{Inspect, Inspection, Lease};
use super::MemoryBackend;

impl MemoryBackend {
    /// Everything kept under one name, leases that ran out left out.
    pub(crate) fn inspect(&self, inspect: &Inspect<'_>) -> Inspection {
        let Inspect {
            keys,
            rw,
            semaphore,
        } = *inspect;
        let now = Instant::now();
        let state = self.state();
        let live = |key: &str| {
            state
                .locks
                .held
                .get(key)
                .filter(|h| h.expires > now)
                .map(|h| Lease {
                    token: h.token.clone(),
                    left: Some(h.expires - now),
                    granted: Some(h.granted),
                })
        };
        let fence = |key: &str| {
            state
                .locks
                .fences
                .get(key)
                .filter(|f| f.keep_until > now)
                .map(|f| f.value)
        };
        let lease = |token: &str, end: Instant| Lease {
            token: token.to_owned(),
            left: Some(end - now),
            granted: None,
        };
        let (rw_table, permits) = (&state.sync.rw, &state.sync.permits);
        Inspection {
            lock: live(&keys.lock),
            fence: fence(&keys.fence),
            fair_waiters: state.locks.lines.get(&keys.lock).map_or(0, |line| {
                line.presence.values().filter(|until| **until > now).count() as u64
            }),
            writer: live(&rw.rw),
            write_fence: fence(&rw.fence),
            ended: (state.ended.get(&keys.ended()))
                .filter(|(_, until)| *until > now)
                .map(|(ids, _)| ids.iter().cloned().collect())
                .unwrap_or_default(),
            readers: (rw_table.readers(&rw.rw, now).into_iter())
                .map(|(token, end)| lease(token, end))
                .collect(),
            waiting_writers: rw_table.waiting_writers(&rw.rw, now),
            permits: (permits.holders(&semaphore.holders, now).into_iter())
                .map(|(token, n, end)| (lease(token, end), n))
                .collect(),
        }
    }
}
