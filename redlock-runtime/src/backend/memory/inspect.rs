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
                .fences
                .get(key)
                .filter(|f| f.keep_until > now)
                .map(|f| f.value)
        };
        let mut out = Inspection {
            lock: live(&keys.lock),
            fence: fence(&keys.fence),
            fair_waiters: state.lines.get(&keys.lock).map_or(0, |line| {
                line.presence.values().filter(|until| **until > now).count() as u64
            }),
            writer: live(&rw.rw),
            write_fence: fence(&rw.fence),
            ended: (state.ended.get(&keys.ended()))
                .filter(|(_, until)| *until > now)
                .map(|(ids, _)| ids.iter().cloned().collect())
                .unwrap_or_default(),
            ..Inspection::default()
        };
        state
            .sync
            .inspect_into(&rw.rw, &semaphore.holders, now, &mut out);
        out
    }
}
