//! Reading what one Redis keeps under a name.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::scripts::INSPECT;
use super::{Inspect, Inspection, Lease};
use crate::scripts;
use crate::store::OpError;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};

/// The reply of [`INSPECT`].
type Reply = (
    String,
    String,
    i64,
    String,
    u64,
    String,
    i64,
    String,
    Vec<String>,
    u64,
    Vec<String>,
    Vec<String>,
);

impl RedisBackend {
    /// Everything kept under one name (see [`INSPECT`]).
    pub(crate) async fn inspect(
        &self,
        inspect: &Inspect<'_>,
        limit: Duration,
    ) -> Result<Inspection, OpError> {
        let Inspect {
            keys,
            rw,
            semaphore,
        } = *inspect;
        let (waiters, ended) = (keys.waiters(), keys.ended());
        let reply: Reply = self
            .run(On::Plain, None, limit, |mut link| {
                let (waiters, ended) = (&waiters, &ended);
                async move {
                    ScriptCall::new(INSPECT.on(self.publish))
                        .key(&keys.lock)
                        .key(&keys.fence)
                        .key(waiters)
                        .key(&rw.rw)
                        .key(&rw.fence)
                        .key(&rw.readers)
                        .key(&rw.writers)
                        .key(&semaphore.holders)
                        .key(&semaphore.counts)
                        .key(ended)
                        .invocation()
                        .invoke_async(&mut link.conn)
                        .await
                }
            })
            .await?;
        Ok(inspection(reply))
    }
}

/// A lease of `token` (the lock's value, less the mark a waiter of the
/// previous version may have appended: see `scripts::WAITED_MARK`) with `pttl` ms left (`PTTL`'s -1/-2: unknown),
/// granted when `fence`, its counter's last token, says (for a holder
/// that waited in a line: see `owner::granted`), as read at `now`.
fn lease(mut token: String, pttl: i64, fence: Option<u64>, now: SystemTime) -> Option<Lease> {
    if token.ends_with(scripts::WAITED_MARK) {
        token.pop();
    }
    (!token.is_empty()).then(|| Lease {
        granted: crate::owner::granted(&token, fence, now),
        token,
        left: u64::try_from(pttl).ok().map(Duration::from_millis),
    })
}

/// The time left until `deadline` (ms, Redis's clock) from `now`.
fn left(deadline: &str, now: u64) -> Option<Duration> {
    let deadline = deadline.parse::<f64>().ok()?;
    let left = deadline - now as f64;
    (left > 0.0).then(|| Duration::from_millis(left as u64))
}

fn inspection(reply: Reply) -> Inspection {
    let (now, lock, pttl, fence, fair, writer, wpttl, wfence, readers, writers, permits, ended) =
        reply;
    let now = now.parse::<u64>().unwrap_or(0);
    let clock = UNIX_EPOCH + Duration::from_millis(now);
    let (fence, write_fence) = (fence.parse().ok(), wfence.parse().ok());
    Inspection {
        lock: lease(lock, pttl, fence, clock),
        fence,
        fair_waiters: fair,
        writer: lease(writer, wpttl, write_fence, clock),
        write_fence,
        readers: readers
            .chunks(2)
            .filter_map(|pair| match pair {
                [token, deadline] => Some(Lease {
                    token: token.clone(),
                    left: left(deadline, now),
                    granted: None,
                }),
                _ => None,
            })
            .collect(),
        waiting_writers: writers,
        permits: permits
            .chunks(3)
            .filter_map(|t| match t {
                [token, deadline, n] => Some((
                    Lease {
                        token: token.clone(),
                        left: left(deadline, now),
                        granted: None,
                    },
                    n.parse().unwrap_or(0),
                )),
                _ => None,
            })
            .collect(),
        ended,
    }
}
