//! A plain lock without scripts, where the server has the conditional
//! commands (see [`commands`](crate::store::server::commands)): its first
//! acquire attempt is `SET NX` as everywhere (`plain.rs`), a later one
//! [`acquire_conditional`](RedisBackend::acquire_conditional), its renewal
//! `SET lock token IFEQ token PX ttl` (batched with the other renewals,
//! `renew.rs`), its release a conditional delete (`DELEX key IFEQ token`
//! or `DELIFEQ key token`), below. Scripts for everything else, and
//! whenever the server refuses the command.
//!
//! The script's release (`lock/release_lock.lua`) deletes the lock and
//! its waiters' signal in one step and publishes when the signal was
//! there. Without a script the same happens in two steps:
//!
//! 1. `DELEX`/`DELIFEQ` on the lock and `EXISTS` on the signal, pipelined
//!    (one round trip): whether the lock was this token's, and whether
//!    someone waits;
//! 2. only when both: `DEL` the signal and `PUBLISH` (`SPUBLISH` on a
//!    cluster node) on the lock's channel, one more round trip that the
//!    release of a lock with waiters needs anyway to wake them.
//!
//! **A contended lock: one step.** When the holder's own acquire found
//! the lock held first ([`End::contended`](crate::primitive::lease::End)),
//! others most likely wait too, and the release is the delete, `DEL` of the
//! signal and the publish in one pipeline: one round trip where the two
//! steps take two, and the waiters learn of the free lock in the same
//! round trip that freed it. With two steps, the lock lay free for a round
//! trip before anyone woken could ask, while Valkey 9 delivered each
//! publish to the subscribers in the same order every time (its channels'
//! subscribers are a hash table, not a list in subscription order): the
//! woken waiters' race had the same winners, and in lockbench's contended
//! scenario (8 workers, 1 ms holds) one worker waited 2.3–3.5 s where the
//! scripts' release kept every wait under 0.3 s on Redis 7.0; in one step,
//! 0.37–0.92 s (three runs, `--server valkey --only contended`). A release
//! that no one waited for and whose acquire did not wait publishes
//! nothing, as before.
//!
//! **Owner check.** The delete compares the lock's value with the token
//! on the server, in one command, exactly as the script does: another
//! owner's lock is never touched.
//!
//! **No wake-up is lost.** A waiter marks the signal in the same atomic
//! step as its busy attempt (`shared/waiting.lua`). If that attempt ran
//! before the delete, the signal was set before the delete and the
//! `EXISTS` pipelined after it sees it; if after, the attempt found the
//! lock free, or another holder whose signal it set in turn. Between the
//! two steps a new holder's waiter may set the signal again: the second
//! step then deletes it and publishes, which wakes that waiter early; it
//! finds the lock busy and marks the signal again. An early wake costs an
//! attempt, never a lock. In one step, every release publishes after its
//! delete: a waiter armed before its attempt either found the lock free or
//! is woken; one whose signal the `DEL` removed is woken by the publish
//! that follows it, and marks the signal again if it finds the lock busy
//! (also when the delete found another owner's lock: its waiters wake
//! early, once).
//!
//! **A lost answer.** The first step is re-sent like the script (see
//! [`resend`](crate::store::server::resend)): a re-send that finds the key
//! gone answers 0 as the script's would, and the end of the lease judges
//! it the same way. The second step's failure loses nothing: the lock is
//! released, and a waiter not woken finds it free on its next attempt.

use std::time::{Duration, Instant};

use redis::Value;

use super::Call;
use super::LockKeys;
use super::plain::read_acquire;
use crate::primitive::lease::{AcquireReply, Renewal};
use crate::scripts::Publish;
use crate::store::OpError;
use crate::store::server::coalesce::Coalescer;
use crate::store::server::commands;
use crate::store::server::conn::Link;
use crate::store::server::pipeline::{answers, pipeline};
use crate::store::server::sized::sized;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

/// Adds a plain lock's renewal without a script to `pipe`: `SET lock token
/// IFEQ token PX ttl`, which answers `OK`, or nil when the token no longer
/// holds the lock (the key is then left as it was, or absent).
pub(crate) fn renew_conditionally(pipe: &mut redis::Pipeline, lock: &str, r: &Renewal<'_>) {
    pipe.cmd("SET")
        .arg(lock)
        .arg(r.token)
        .arg("IFEQ")
        .arg(r.token)
        .arg("PX")
        .arg(millis_ceil(r.ttl).max(1));
}

/// How much longer than the ttl an attempt's waiters' signal lasts (the
/// script's margin, `shared/waiting.lua`).
const SIGNAL_MARGIN_MS: u64 = 2_000;

/// Adds an acquire attempt without a script to `pipe`: the three
/// commands of [`RedisBackend::acquire_conditional`], whose answers
/// [`read_attempt`] reads.
pub(super) fn add_attempt(pipe: &mut redis::Pipeline, keys: &LockKeys, token: &str, ttl_ms: u64) {
    pipe.cmd("SET")
        .arg(&keys.waited)
        .arg("1")
        .arg("PX")
        .arg(ttl_ms.saturating_add(SIGNAL_MARGIN_MS))
        .cmd("SET")
        .arg(&keys.lock)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .arg("GET")
        .cmd("PTTL")
        .arg(&keys.lock);
}

/// The lock's value before an attempt [`add_attempt`] sent (none: taken
/// now) and its `PTTL` after, from the attempt's three answers.
pub(super) fn read_attempt(answers: Vec<Value>) -> redis::RedisResult<(Option<Vec<u8>>, i64)> {
    // A parse error would quote the lock's value (another owner's token):
    // say only what was expected.
    let (_signal, held, pttl): (Value, Option<Vec<u8>>, i64) =
        redis::from_redis_value(Value::Array(answers)).map_err(|_| {
            redis::RedisError::from((
                redis::ErrorKind::Parse,
                "a conditional acquire's answers are not OK, a value or nil, and a number",
            ))
        })?;
    Ok((held, pttl))
}

/// What an attempt [`read_attempt`] read means for `token`: the lock is
/// its own when it was free, or already held this token (an earlier send
/// of the attempt took it); else busy, with the lease left.
pub(super) fn attempt_reply(held: Option<Vec<u8>>, pttl: i64, token: &str) -> AcquireReply {
    match held {
        Some(value) if value != token.as_bytes() => AcquireReply::Busy {
            pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
        },
        _ => AcquireReply::Acquired {
            fence: 0,
            at_ms: None,
        },
    }
}

/// What an acquire attempt answered.
enum Attempt {
    /// The conditional attempt: the lock's value before it (none: taken
    /// now), and its `PTTL` after.
    Sent { held: Option<Vec<u8>>, pttl: i64 },
    /// The script (no conditional commands on this connection): its
    /// answer.
    Script(Value),
}

/// What the release's first step answered.
enum Released {
    /// The conditional delete: whether the lock was deleted, and whether
    /// its waiters' signal was there.
    Deleted { deleted: bool, waited: bool },
    /// The script (no conditional delete on this connection): its answer.
    Script(Value),
}

impl RedisBackend {
    /// An acquire attempt without a fencing token after a busy one, or
    /// after one whose outcome is unknown, without a script: one pipeline
    /// of
    ///
    /// 1. `SET waited 1 PX ttl+2s`: the waiters' signal, set before the
    ///    attempt. A release that deletes the lock after the signal was
    ///    set sees it and publishes; one before it leaves the lock free
    ///    for step 2. With the holders' ttl equal to this one (one key,
    ///    one ttl), the signal outlives the lease it waits on by 2 s, as
    ///    the script's (`shared/waiting.lua`); with a longer one, a
    ///    release past the signal's end wakes no one and the waiter comes
    ///    back on its backoff, which a missed publish always costs. Set
    ///    also when the lock turns out free: the holder's release then
    ///    publishes to no one.
    /// 2. `SET lock token NX PX ttl GET`: takes the lock if free, else
    ///    answers its value, which is this token's when an earlier send of
    ///    this attempt took it (a re-send after a lost answer). The script
    ///    answers both the same way.
    /// 3. `PTTL lock`: the busy answer's lease left, for the backoff.
    ///
    /// Issues no fencing token: one asked for later is issued as for a
    /// lock taken by a plain `SET NX`.
    pub(crate) async fn acquire_conditional(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let ttl_ms = millis_ceil(ttl).max(1);
        let (retention_ms, publish) = (self.fence_retention_ms, self.publish);
        let answer = self
            .run(On::Waiting, Some(token), limit, |mut link| async move {
                let script = |link: Link| async move {
                    let call = Call::Acquire {
                        lock: keys.lock.as_str(),
                        fence: keys.fence.as_str(),
                        waited: keys.waited.as_str(),
                        token,
                        ttl_ms,
                        retention_ms,
                    };
                    Coalescer::alone(link, &call, publish)
                        .await
                        .map(Attempt::Script)
                };
                if link.commands().conditional_delete().is_none() {
                    return script(link).await;
                }
                let mut pipe = pipeline();
                add_attempt(&mut pipe, keys, token, ttl_ms);
                let answer = answers(&pipe, &mut link.conn).await.and_then(read_attempt);
                match answer {
                    Ok((held, pttl)) => Ok(Attempt::Sent { held, pttl }),
                    Err(e) if commands::refused(&e) => {
                        link.commands().fall_back(&e);
                        script(link).await
                    }
                    Err(e) => Err(e),
                }
            })
            .await?;
        match answer {
            Attempt::Script(answer) => read_acquire(answer),
            Attempt::Sent { held, pttl } => Ok(attempt_reply(held, pttl, token)),
        }
    }

    /// Releases the lock if `token` holds it, waking its waiters: with the
    /// server's conditional delete where it has one, else the release
    /// script (see the module docs); in one step when `contended` (its
    /// acquire found the lock held first).
    pub(crate) async fn release_plain(
        &self,
        on: On,
        keys: &LockKeys,
        token: &str,
        contended: bool,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let started = Instant::now();
        let (retention_ms, publish) = (self.fence_retention_ms, self.publish);
        // Its commands only (the pipeline, or the script): bounded without
        // a timer of its own.
        let answer = self
            .run_commands(on, Some(token), limit, |mut link| async move {
                let script = |link: Link| async move {
                    let call = Call::Release {
                        lock: keys.lock.as_str(),
                        waited: keys.waited.as_str(),
                        token,
                        retention_ms,
                    };
                    Coalescer::alone(link, &call, publish)
                        .await
                        .map(Released::Script)
                };
                let Some(delete) = link.commands().conditional_delete() else {
                    return Box::pin(script(link)).await;
                };
                let mut pipe = pipeline();
                delete.add(&mut pipe, &keys.lock, token);
                if contended {
                    pipe.add_command(sized(&["DEL", &keys.waited], 0));
                    wake(&mut pipe, publish, keys);
                } else {
                    pipe.add_command(sized(&["EXISTS", &keys.waited], 0));
                }
                // Numbers all: the delete's, then `EXISTS`'s, or `DEL`'s
                // and the publish's; read where they lie.
                let answer = answers(&pipe, &mut link.conn).await.and_then(counts);
                match answer {
                    Ok([deleted, waited]) => Ok(Released::Deleted {
                        deleted: deleted == 1,
                        // In one step, woken already.
                        waited: !contended && waited == 1,
                    }),
                    Err(e) if commands::refused(&e) => {
                        link.commands().fall_back(&e);
                        Box::pin(script(link)).await
                    }
                    Err(e) => Err(e),
                }
            })
            .await?;
        match answer {
            Released::Script(answer) => Ok(answer == Value::Int(1)),
            Released::Deleted { deleted, waited } => {
                if deleted && waited {
                    let left = limit
                        .saturating_sub(started.elapsed())
                        .max(Duration::from_millis(1));
                    Box::pin(self.wake_waiters(on, keys, token, left)).await;
                }
                Ok(deleted)
            }
        }
    }

    /// The release's second step: deletes the waiters' signal and
    /// publishes on the lock's channel. A failure is logged and dropped
    /// (see the module docs).
    async fn wake_waiters(&self, on: On, keys: &LockKeys, token: &str, limit: Duration) {
        let publish = self.publish;
        let woken = self
            .run_commands(on, Some(token), limit, |mut link| async move {
                let mut pipe = pipeline();
                pipe.cmd("DEL").arg(&keys.waited);
                wake(&mut pipe, publish, keys);
                answers(&pipe, &mut link.conn).await
            })
            .await;
        if let Err(error) = woken {
            tracing::debug!(target: "redlock", %error, "released; waking the waiters failed (they find the lock free on their next attempt)");
        }
    }
}

/// The first two of a release's answers, numbers both (the delete's, and
/// `EXISTS`'s or `DEL`'s).
fn counts(answers: Vec<Value>) -> redis::RedisResult<[i64; 2]> {
    match answers.as_slice() {
        [Value::Int(first), Value::Int(second), ..] => Ok([*first, *second]),
        _ => Err(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "a release's answers are not numbers",
        ))),
    }
}

/// Adds the wake-up of `keys`' waiters to `pipe`: an empty message on the
/// lock's channel (`SPUBLISH` on a cluster node).
fn wake(pipe: &mut redis::Pipeline, publish: Publish, keys: &LockKeys) {
    let command = match publish {
        Publish::Plain => "PUBLISH",
        Publish::Sharded => "SPUBLISH",
    };
    pipe.cmd(command).arg(&keys.lock).arg("");
}
