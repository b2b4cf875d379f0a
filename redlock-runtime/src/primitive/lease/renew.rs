//! Renewals on one Redis: every due lease in one pipeline (and `WAIT`
//! with replicas). A plain lock's renewal is `SET lock token IFEQ token
//! PX ttl` where the connection's server has the conditional commands
//! (see `primitive/lock/conditional.rs`), else its script, as is every
//! other lease's.

use std::time::{Duration, Instant};

use redis::{RedisResult, Script, Value};

use super::LEASE_RENEW;
use super::{Keys, Kind, Renewal};
use crate::primitive::lock::EXTEND;
use crate::primitive::lock::conditional::renew_conditionally;
use crate::primitive::record::RECORD_RENEW;
use crate::scripts::Publish;
use crate::store::OpError;
use crate::store::server::commands;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

/// The script that renews a lease of this kind (all take the same
/// arguments): the lock's (and a writer's) `EXTEND`, the record's
/// `RECORD_RENEW`, or a reader's or semaphore holder's `LEASE_RENEW`, with
/// the keys of [`Keys::renewed`].
pub(crate) fn renew_script(kind: Kind) -> &'static Script {
    match kind {
        Kind::Lock | Kind::Write => EXTEND.on(Publish::Plain),
        Kind::Record => RECORD_RENEW.on(Publish::Plain),
        Kind::Read | Kind::Permits { .. } => LEASE_RENEW.on(Publish::Plain),
    }
}

/// Every renewal script, to load after the script cache was flushed.
fn renew_scripts() -> [&'static Script; 3] {
    [
        EXTEND.on(Publish::Plain),
        RECORD_RENEW.on(Publish::Plain),
        LEASE_RENEW.on(Publish::Plain),
    ]
}

/// The pipeline that renews `items`: with `conditional`, a plain lock's
/// renewal as `SET .. IFEQ`; `watchdog` renewals never shorten a lease
/// (the scripts' last argument).
fn pipeline(items: &[Renewal<'_>], watchdog: bool, conditional: bool) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for r in items {
        if conditional && let Keys::Lock(lock) = r.keys {
            renew_conditionally(&mut pipe, &lock.lock, r);
            continue;
        }
        let (first, second) = r.keys.renewed();
        let cmd = pipe
            .cmd("EVALSHA")
            .arg(renew_script(r.keys.kind()).get_hash())
            .arg(1 + usize::from(second.is_some()))
            .arg(first);
        if let Some(second) = second {
            cmd.arg(second);
        }
        cmd.arg(r.token)
            .arg(millis_ceil(r.ttl))
            .arg(u8::from(watchdog));
    }
    pipe
}

/// Whether a renewal's answer says the script must do it instead: the
/// server refused the conditional command, or refused the `SET` for
/// memory (`OOM`), which the script's `PEXPIRE` is not.
fn needs_script(answer: &RedisResult<Value>) -> bool {
    matches!(answer, Err(e) if commands::refused(e) || e.code() == Some("OOM"))
}

fn no_script(answer: &RedisResult<Value>) -> bool {
    matches!(answer, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
}

impl RedisBackend {
    /// The watchdog's batch (the scripts never shorten a lease: a manual
    /// `extend` that landed first keeps its longer one; see [`renew`](Self::renew)
    /// for the conditional `SET`).
    pub(crate) async fn extend_many(
        &self,
        items: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        self.renew(items, true, limit).await
    }

    /// Renews `items` in one round trip (see [`pipeline`]).
    ///
    /// The conditional `SET` sets the lease to the ttl, where a watchdog's
    /// script leaves a longer lease alone, so a renewal that lands after a
    /// manual `extend` to a longer ttl shortens the lease. What the guard
    /// counts on stays within it by the renewal gate and the doubt of
    /// `HeldLock::sending` (in `lock.rs`, checked by `model/src/extend.rs`).
    pub(crate) async fn renew(
        &self,
        items: &[Renewal<'_>],
        watchdog: bool,
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        let wait = self.replicas;
        let limit = self.with_wait(limit);
        let started = Instant::now();
        let left = || {
            limit
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1))
        };
        let send = |limit, scripts_only: bool| {
            self.run(On::Waiting, None, limit, move |mut link| {
                let conditional = !scripts_only && link.commands().conditional_delete().is_some();
                let mut pipe = pipeline(items, watchdog, conditional);
                if let Some(r) = wait {
                    pipe.cmd("WAIT").arg(r.count).arg(millis_ceil(r.timeout));
                }
                async move {
                    let answers: Vec<RedisResult<Value>> = pipe.query_async(&mut link.conn).await?;
                    let refusal = answers
                        .iter()
                        .find_map(|a| a.as_ref().err().filter(|e| commands::refused(e)));
                    if let (true, Some(refusal)) = (conditional, refusal) {
                        link.commands().fall_back(refusal);
                    }
                    Ok((answers, conditional))
                }
            })
        };
        let (mut answers, conditional) = send(limit, false).await?;
        let mut scripts_only = false;
        if conditional && answers.iter().any(needs_script) {
            // Renewals are safe to repeat: send them all as scripts.
            scripts_only = true;
            answers = send(left(), true).await?.0;
        }
        if answers.iter().any(no_script) {
            // The script cache was flushed (or Redis restarted): load, resend.
            for script in renew_scripts() {
                self.run(On::Waiting, None, left(), |mut link| async move {
                    script.prepare_invoke().load_async(&mut link.conn).await
                })
                .await?;
            }
            answers = send(left(), scripts_only).await?.0;
        }
        if let Some(r) = wait {
            // The last answer is WAIT's: the renewals that ran count only
            // if enough replicas have them. A renewal that failed (a
            // cluster redirection, say) keeps its own error.
            let shortfall = match answers.pop() {
                Some(Ok(Value::Int(acked))) if acked >= i64::from(r.count) => None,
                Some(Ok(Value::Int(acked))) => Some(OpError::Replicas {
                    wanted: r.count,
                    acknowledged: u32::try_from(acked.max(0)).unwrap_or(0),
                    timeout: r.timeout,
                }),
                Some(Ok(other)) => Some(OpError::Reply(format!("WAIT answered {other:?}"))),
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
        Ok(answers.into_iter().map(renewed).collect())
    }
}

/// One renewal's answer: the script's 1 or 0, the conditional `SET`'s `OK`
/// or nil.
fn renewed(answer: RedisResult<Value>) -> Result<bool, OpError> {
    match answer {
        Ok(Value::Int(1) | Value::Okay) => Ok(true),
        Ok(Value::Int(0) | Value::Nil) => Ok(false),
        Ok(Value::SimpleString(s)) if s == "OK" => Ok(true),
        Ok(other) => Err(OpError::Reply(format!(
            "a renewal answered {other:?}, not 1, 0, OK or nil"
        ))),
        Err(e) => Err(OpError::Redis(e)),
    }
}
