//! The watchdog's renewal batch on one Redis: every due lease in one
//! pipeline of `EVALSHA`s (and `WAIT` with replicas).

use std::time::Duration;

use redis::Script;

use super::super::{Kind, OpError, Renewal};
use super::{On, RedisBackend};
use crate::backend::record::RECORD_RENEW;
use crate::backend::sync::LEASE_RENEW;
use crate::scripts::{self, Publish};
use crate::util::millis_ceil;

/// The script that renews a lease of this kind (all take the same
/// arguments): the lock's (and a writer's) `EXTEND`, the record's
/// `RECORD_RENEW`, or a reader's or semaphore holder's `LEASE_RENEW`, with
/// the keys of [`Keys::renewed`](super::super::Keys::renewed).
pub(super) fn renew_script(kind: Kind) -> &'static Script {
    match kind {
        Kind::Lock | Kind::Write | Kind::Latch => scripts::EXTEND.on(Publish::Plain),
        Kind::Record => RECORD_RENEW.on(Publish::Plain),
        Kind::Read | Kind::Permits { .. } => LEASE_RENEW.on(Publish::Plain),
    }
}

/// Every renewal script, to load after the script cache was flushed.
fn renew_scripts() -> [&'static Script; 3] {
    [
        scripts::EXTEND.on(Publish::Plain),
        RECORD_RENEW.on(Publish::Plain),
        LEASE_RENEW.on(Publish::Plain),
    ]
}

impl RedisBackend {
    /// The watchdog's batch: renewals never shorten a lease (a manual
    /// `extend` that landed first keeps its longer one).
    pub(crate) async fn extend_many(
        &self,
        items: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for r in items {
            let (first, second) = r.keys.renewed();
            let cmd = pipe
                .cmd("EVALSHA")
                .arg(renew_script(r.keys.kind).get_hash())
                .arg(1 + usize::from(second.is_some()))
                .arg(first);
            if let Some(second) = second {
                cmd.arg(second);
            }
            cmd.arg(r.token).arg(millis_ceil(r.ttl)).arg(1);
        }
        if let Some(r) = self.replicas {
            pipe.cmd("WAIT").arg(r.count).arg(millis_ceil(r.timeout));
        }
        let limit = self.with_wait(limit);
        let started = tokio::time::Instant::now();
        let send = |limit| {
            self.run(On::Waiting, None, limit, |mut link| {
                let pipe = &pipe;
                async move {
                    pipe.query_async::<Vec<redis::RedisResult<i64>>>(&mut link.conn)
                        .await
                }
            })
        };
        let mut answers = send(limit).await?;
        let no_script = |a: &redis::RedisResult<i64>| matches!(a, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript));
        if answers.iter().any(no_script) {
            // The script cache was flushed (or Redis restarted): load, resend.
            let left = limit
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1));
            for script in renew_scripts() {
                self.run(On::Waiting, None, left, |mut link| async move {
                    script.prepare_invoke().load_async(&mut link.conn).await
                })
                .await?;
            }
            let left = limit
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1));
            answers = send(left).await?;
        }
        if let Some(r) = self.replicas {
            // The last answer is WAIT's: the renewals that ran count only
            // if enough replicas have them. A renewal that failed (a
            // cluster redirection, say) keeps its own error.
            let shortfall = match answers.pop() {
                Some(Ok(acked)) if acked >= i64::from(r.count) => None,
                Some(Ok(acked)) => Some(OpError::Replicas {
                    wanted: r.count,
                    acknowledged: u32::try_from(acked.max(0)).unwrap_or(0),
                    timeout: r.timeout,
                }),
                Some(Err(e)) => Some(OpError::Reply(format!("WAIT failed: {e}"))),
                None => Some(OpError::Reply("no answer to WAIT".to_owned())),
            };
            if let Some(shortfall) = shortfall {
                return Ok(answers
                    .into_iter()
                    .map(|a| match a {
                        Ok(_) => Err(shortfall.copy()),
                        Err(e) => Err(OpError::Redis(e)),
                    })
                    .collect());
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.map(|done| done == 1).map_err(OpError::Redis))
            .collect())
    }
}
