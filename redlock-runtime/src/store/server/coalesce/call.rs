//! One coalescible call ([`Call`]) as it goes out alone, and how an answer
//! (alone or in a batch) is read.

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, RedisResult, Script, Value};

use super::super::conn::Conn;
use crate::scripts::{self, Publish};

/// One call that can go out alone or in a batch; `S` is `&str` while the
/// caller still has it, `String` once queued. (No `Debug`: it holds the
/// owner token.)
#[derive(Clone, Copy)]
pub(crate) enum Call<S> {
    /// `SET lock token NX PX ttl`: a plain acquire.
    SetNx { lock: S, token: S, ttl_ms: u64 },
    /// The acquire script, issuing a fencing token (a busy answer sets
    /// the lock's waiters' signal `waited`).
    Acquire {
        lock: S,
        fence: S,
        waited: S,
        token: S,
        ttl_ms: u64,
    },
    /// The release script, with the lock's waiters' signal `waited`.
    Release { lock: S, waited: S, token: S },
}

impl Call<&str> {
    pub(super) fn to_owned(self) -> Call<String> {
        match self {
            Self::SetNx {
                lock,
                token,
                ttl_ms,
            } => Call::SetNx {
                lock: lock.to_owned(),
                token: token.to_owned(),
                ttl_ms,
            },
            Self::Acquire {
                lock,
                fence,
                waited,
                token,
                ttl_ms,
            } => Call::Acquire {
                lock: lock.to_owned(),
                fence: fence.to_owned(),
                waited: waited.to_owned(),
                token: token.to_owned(),
                ttl_ms,
            },
            Self::Release {
                lock,
                waited,
                token,
            } => Call::Release {
                lock: lock.to_owned(),
                waited: waited.to_owned(),
                token: token.to_owned(),
            },
        }
    }
}

impl<S: AsRef<str>> Call<S> {
    pub(super) fn token(&self) -> &str {
        match self {
            Self::SetNx { token, .. }
            | Self::Acquire { token, .. }
            | Self::Release { token, .. } => token.as_ref(),
        }
    }

    pub(super) fn is_acquire(&self) -> bool {
        matches!(self, Self::Acquire { .. })
    }

    /// The command that sends this call alone, and its script (to load
    /// after `NOSCRIPT`).
    pub(super) fn alone(
        &self,
        retention_ms: u64,
        publish: Publish,
    ) -> (Cmd, Option<&'static Script>) {
        match self {
            Self::SetNx {
                lock,
                token,
                ttl_ms,
            } => {
                let (lock, token) = (lock.as_ref(), token.as_ref());
                // Sized once: the arguments' buffer is not regrown per
                // argument on the hot path.
                let mut cmd = Cmd::with_capacity(6, lock.len() + token.len() + 27);
                cmd.arg("SET")
                    .arg(lock)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(*ttl_ms);
                (cmd, None)
            }
            Self::Acquire {
                lock,
                fence,
                waited,
                token,
                ttl_ms,
            } => {
                let (lock, fence, waited) = (lock.as_ref(), fence.as_ref(), waited.as_ref());
                let token = token.as_ref();
                let script = scripts::ACQUIRE.on(publish);
                let bytes = lock.len() + fence.len() + waited.len() + token.len() + 48;
                let mut cmd = evalsha(script, 3, 11, bytes);
                cmd.arg(lock)
                    .arg(fence)
                    .arg(waited)
                    .arg(token)
                    .arg(*ttl_ms)
                    .arg(retention_ms)
                    .arg("0")
                    .arg(0);
                (cmd, Some(script))
            }
            Self::Release {
                lock,
                waited,
                token,
            } => {
                let (lock, waited, token) = (lock.as_ref(), waited.as_ref(), token.as_ref());
                let script = scripts::RELEASE.on(publish);
                let mut cmd = evalsha(script, 2, 6, lock.len() + waited.len() + token.len());
                cmd.arg(lock).arg(waited).arg(token);
                (cmd, Some(script))
            }
        }
    }
}

/// `EVALSHA sha numkeys`, sized once for `args` arguments in all and
/// `bytes` of them besides these three.
fn evalsha(script: &Script, keys: usize, args: usize, bytes: usize) -> Cmd {
    let mut cmd = Cmd::with_capacity(args, bytes + 50);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
    cmd
}

/// Sends `cmd` on `conn` and returns its answer as it came, errors of
/// single calls in a batch's answer included; a script Redis does not
/// have (its cache was flushed, or Redis restarted) is loaded and the
/// command sent again.
pub(super) async fn send(
    conn: &mut Conn,
    cmd: &Cmd,
    script: Option<&Script>,
) -> RedisResult<Value> {
    match top_level(conn.req_packed_command(cmd).await) {
        Err(e) if is_no_script(&e) => {
            if let Some(script) = script {
                script.prepare_invoke().load_async(conn).await?;
                return top_level(conn.req_packed_command(cmd).await);
            }
            Err(e)
        }
        answer => answer,
    }
}

/// An answer that is an error as a whole as `Err` (also one call's answer
/// taken out of a batch's); errors nested in an array (one call's, in a
/// batch) stay where they are.
pub(super) fn top_level(answer: RedisResult<Value>) -> RedisResult<Value> {
    match answer? {
        Value::ServerError(e) => Err(e.into()),
        value => Ok(value),
    }
}

fn is_no_script(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Whether a batch was refused for holding keys of several slots (a
/// cluster node, or a proxy in front of several).
pub(super) fn refuses_several_slots(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::CrossSlot)
        || e.to_string().contains("CROSSSLOT")
}

/// A batch that got no answer within its time limit: an error whose
/// outcome is unknown, as a call of its own timing out.
pub(super) fn timed_out() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer to a batch of lock calls in time",
    ))
}

/// A fenced acquire's answer in a batch, one number (see
/// [`scripts::BATCH`](crate::scripts::BATCH)), as the acquire script
/// alone gives it: `{1, fence}` for a fence of at least 1, `{0, pttl}` for
/// `-2 - pttl`. Anything else is passed on as it came, for the caller to
/// reject.
pub(super) fn widen_acquire(answer: Value) -> Value {
    match answer {
        Value::Int(fence) if fence >= 1 => Value::Array(vec![Value::Int(1), Value::Int(fence)]),
        Value::Int(busy) if busy <= -1 => Value::Array(vec![Value::Int(0), Value::Int(-2 - busy)]),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batched_acquire_answer_reads_back_as_the_scripts() {
        let wide = |v: i64| widen_acquire(Value::Int(v));
        let pair = |a: i64, b: i64| Value::Array(vec![Value::Int(a), Value::Int(b)]);
        assert_eq!(wide(1_795_735_049_029_780), pair(1, 1_795_735_049_029_780));
        assert_eq!(wide(1), pair(1, 1));
        // Busy: -2 - pttl, for a lease left, none left, and no expiry (-1).
        assert_eq!(wide(-2 - 4_321), pair(0, 4_321));
        assert_eq!(wide(-2), pair(0, 0));
        assert_eq!(wide(-1), pair(0, -1));
        assert_eq!(wide(i64::MIN), pair(0, i64::MAX - 1));
        // Not a number the batch sends: passed on for the caller to reject.
        assert_eq!(wide(0), Value::Int(0));
        let text = Value::SimpleString("OK".into());
        assert_eq!(widen_acquire(text.clone()), text);
    }
}
