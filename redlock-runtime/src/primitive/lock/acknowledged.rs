//! A plain lock's acquire where replicas must acknowledge it
//! ([`replicas`](crate::LockClientBuilder::replicas)), without a script:
//! the attempt and `WAIT` in one pipeline, on the connection of the `WAIT`
//! lane that carries this owner's writes (`WAIT` counts that connection's
//! writes).
//!
//! - The first attempt is `SET lock token NX PX ttl`, as on a server
//!   without replicas (`plain.rs`), on every server.
//! - A later attempt, or the first one sent again on a new connection (the
//!   first send may have landed), is the attempt of
//!   [`acquire_conditional`](RedisBackend::acquire_conditional) (the
//!   waiters' signal, `SET NX GET`, `PTTL`), which finds the lock its own
//!   when an earlier send took it. Only where the connection has the
//!   conditional commands; elsewhere, and when the server refuses them, the
//!   acquire script (`redis.rs`), which issues the fencing token as well.
//!
//! **Same guarantee as the script.** `WAIT` follows the write on the same
//! connection, so its count covers the write (or, when the lock was
//! busy, nothing that matters). Too few acknowledgements of a write that
//! took the lock are [`OpError::Replicas`]: the lock may be ours on the
//! primary, and the caller gives it back, as after the script. The
//! fencing token is issued on first ask by a script acknowledged the same
//! way (`ISSUE_FENCE`), so a failover to a replica that acknowledged both
//! keeps the counter (see `design`, "Fencing tokens").

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::Value;

use super::LockKeys;
use super::conditional::{add_attempt, attempt_reply, read_attempt};
use super::plain::read_acquire;
use crate::primitive::lease::AcquireReply;
use crate::store::OpError;
use crate::store::server::call::acknowledged;
use crate::store::server::commands;
use crate::store::server::pipeline::{answers, pipeline};
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

/// What an attempt with `WAIT` answered.
enum Sent {
    /// `SET NX`'s answer, and `WAIT`'s count.
    Plain(Value, i64),
    /// The conditional attempt's lock value before it and `PTTL` after,
    /// and `WAIT`'s count.
    Attempt(Option<Vec<u8>>, i64, i64),
    /// No conditional commands on this connection: the script instead.
    Script,
}

impl RedisBackend {
    /// One acquire attempt of a lock that needs no fencing token now, with
    /// replicas, without a script (see the module docs). `None`: the
    /// connection has no conditional commands for a later attempt, or
    /// refused them; the caller runs the acquire script.
    pub(crate) async fn acquire_acknowledged(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        fresh: bool,
        limit: Duration,
    ) -> Result<Option<AcquireReply>, OpError> {
        let Some(replicas) = self.replicas else {
            return Ok(None);
        };
        let ttl_ms = millis_ceil(ttl).max(1);
        let wait_ms = millis_ceil(replicas.timeout);
        let sent = AtomicBool::new(false);
        let answer = self
            .run(
                On::Waiting,
                Some(token),
                self.with_wait(limit),
                |mut link| {
                    let plain = fresh && !sent.swap(true, Ordering::Relaxed);
                    async move {
                        let mut pipe = pipeline();
                        if plain {
                            pipe.cmd("SET")
                                .arg(&keys.lock)
                                .arg(token)
                                .arg("NX")
                                .arg("PX")
                                .arg(ttl_ms);
                        } else if link.commands().conditional_delete().is_some() {
                            add_attempt(&mut pipe, keys, token, ttl_ms);
                        } else {
                            return Ok(Sent::Script);
                        }
                        pipe.cmd("WAIT").arg(replicas.count).arg(wait_ms);
                        let mut answers = match answers(&pipe, &mut link.conn).await {
                            Ok(answers) => answers,
                            Err(e) if !plain && commands::refused(&e) => {
                                link.commands().fall_back(&e);
                                return Ok(Sent::Script);
                            }
                            Err(e) => return Err(e),
                        };
                        let acked: i64 =
                            redis::from_redis_value(answers.pop().unwrap_or(Value::Nil))?;
                        if plain {
                            let set = answers.pop().unwrap_or(Value::Nil);
                            return Ok(Sent::Plain(set, acked));
                        }
                        let (held, pttl) = read_attempt(answers)?;
                        Ok(Sent::Attempt(held, pttl, acked))
                    }
                },
            )
            .await?;
        let (reply, acked) = match answer {
            Sent::Script => return Ok(None),
            Sent::Plain(set, acked) => (read_acquire(set)?, acked),
            Sent::Attempt(held, pttl, acked) => (attempt_reply(held, pttl, token), acked),
        };
        let wrote = matches!(reply, AcquireReply::Acquired { .. });
        acknowledged(Some(replicas), wrote.then_some(acked))?;
        Ok(Some(reply))
    }
}
