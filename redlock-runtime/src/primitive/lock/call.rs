//! A lock's one-step calls ([`Call`]), as they go out alone and as steps
//! of [`BATCH`], the batch the coalescer of `store/server/` sends (see
//! [`coalesce`](crate::store::server::coalesce)).
//!
//! Only the fenced calls join batches: the fenced acquire, and the
//! release of a lock that has a token. A plain lock's `SET NX` is one
//! cheap command, which a batch script (whose every `redis.call` costs
//! about as much as a command of its own) made slower, not faster, in
//! lockbench's measurements; it always goes alone.

use redis::{Cmd, Script, Value};

use super::{ACQUIRE, BATCH, RELEASE};
use crate::scripts::{Lua, Publish};
use crate::store::server::coalesce::Step;
use crate::store::server::sized::sized;

/// One call of a lock; `S` is `&str` while the caller still has it,
/// `String` once queued for a batch. (No `Debug`: it holds the owner
/// token.)
#[derive(Clone, Copy)]
pub(crate) enum Call<S> {
    /// `SET lock token NX PX ttl`: a plain acquire (always alone).
    SetNx { lock: S, token: S, ttl_ms: u64 },
    /// The acquire script, issuing a fencing token kept for
    /// `retention_ms` (a busy answer sets the lock's waiters' signal
    /// `waited`).
    Acquire {
        lock: S,
        fence: S,
        waited: S,
        token: S,
        ttl_ms: u64,
        retention_ms: u64,
    },
    /// The release script, with the lock's waiters' signal `waited`
    /// (`retention_ms` is the batch's, which every call of one client
    /// shares).
    Release {
        lock: S,
        waited: S,
        token: S,
        retention_ms: u64,
    },
}

impl<S: AsRef<str>> Call<S> {
    fn owned(&self) -> Call<String> {
        let own = |s: &S| s.as_ref().to_owned();
        match self {
            Self::SetNx {
                lock,
                token,
                ttl_ms,
            } => Call::SetNx {
                lock: own(lock),
                token: own(token),
                ttl_ms: *ttl_ms,
            },
            Self::Acquire {
                lock,
                fence,
                waited,
                token,
                ttl_ms,
                retention_ms,
            } => Call::Acquire {
                lock: own(lock),
                fence: own(fence),
                waited: own(waited),
                token: own(token),
                ttl_ms: *ttl_ms,
                retention_ms: *retention_ms,
            },
            Self::Release {
                lock,
                waited,
                token,
                retention_ms,
            } => Call::Release {
                lock: own(lock),
                waited: own(waited),
                token: own(token),
                retention_ms: *retention_ms,
            },
        }
    }
}

impl<S: AsRef<str>> Step for Call<S> {
    fn owner(&self) -> &str {
        match self {
            Self::SetNx { token, .. }
            | Self::Acquire { token, .. }
            | Self::Release { token, .. } => token.as_ref(),
        }
    }

    fn takes(&self) -> bool {
        matches!(self, Self::Acquire { .. })
    }

    fn alone(&self, publish: Publish) -> (Cmd, Option<&'static Lua>) {
        match self {
            Self::SetNx {
                lock,
                token,
                ttl_ms,
            } => {
                let mut cmd = sized(&["SET", lock.as_ref(), token.as_ref(), "NX", "PX"], 1);
                cmd.arg(*ttl_ms);
                (cmd, None)
            }
            Self::Acquire {
                lock,
                fence,
                waited,
                token,
                ttl_ms,
                retention_ms,
            } => {
                let (lock, fence, waited) = (lock.as_ref(), fence.as_ref(), waited.as_ref());
                let token = token.as_ref();
                let bytes = lock.len() + fence.len() + waited.len() + token.len() + 48;
                let mut cmd = evalsha(ACQUIRE.on(publish), 3, 11, bytes);
                cmd.arg(lock)
                    .arg(fence)
                    .arg(waited)
                    .arg(token)
                    .arg(*ttl_ms)
                    .arg(*retention_ms)
                    .arg("0")
                    .arg(0);
                (cmd, Some(&ACQUIRE))
            }
            Self::Release {
                lock,
                waited,
                token,
                ..
            } => {
                let (lock, waited, token) = (lock.as_ref(), waited.as_ref(), token.as_ref());
                let bytes = lock.len() + waited.len() + token.len();
                let mut cmd = evalsha(RELEASE.on(publish), 2, 6, bytes);
                cmd.arg(lock).arg(waited).arg(token);
                (cmd, Some(&RELEASE))
            }
        }
    }

    fn batch(&self) -> Option<&'static Lua> {
        match self {
            Self::SetNx { .. } => None,
            Self::Acquire { .. } | Self::Release { .. } => Some(&BATCH),
        }
    }

    fn batch_keys(&self) -> usize {
        match self {
            Self::SetNx { .. } => 0,
            Self::Acquire { .. } => 3,
            Self::Release { .. } => 2,
        }
    }

    fn push_keys(&self, cmd: &mut Cmd) {
        match self {
            Self::SetNx { .. } => {}
            Self::Acquire {
                lock,
                fence,
                waited,
                ..
            } => {
                cmd.arg(lock.as_ref())
                    .arg(fence.as_ref())
                    .arg(waited.as_ref());
            }
            Self::Release { lock, waited, .. } => {
                cmd.arg(lock.as_ref()).arg(waited.as_ref());
            }
        }
    }

    /// `ARGV[1]` of [`BATCH`]: the fencing counters' retention.
    fn push_head(&self, cmd: &mut Cmd) {
        match self {
            Self::SetNx { .. } => {}
            Self::Acquire { retention_ms, .. } | Self::Release { retention_ms, .. } => {
                cmd.arg(*retention_ms);
            }
        }
    }

    fn push_args(&self, cmd: &mut Cmd) {
        match self {
            Self::SetNx { .. } => {}
            Self::Acquire { token, ttl_ms, .. } => {
                cmd.arg("f").arg(token.as_ref()).arg(*ttl_ms);
            }
            Self::Release { token, .. } => {
                cmd.arg("r").arg(token.as_ref());
            }
        }
    }

    fn read_back(&self, answer: Value) -> Value {
        if self.takes() {
            widen_acquire(answer)
        } else {
            answer
        }
    }

    fn queued(&self) -> Box<dyn Step + Send + Sync> {
        Box::new(self.owned())
    }
}

/// `EVALSHA sha numkeys`, sized once for `args` arguments in all and
/// `bytes` of them besides these three.
fn evalsha(script: &Script, keys: usize, args: usize, bytes: usize) -> Cmd {
    let mut cmd = Cmd::with_capacity(args, bytes + 50);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
    cmd
}

/// A fenced acquire's answer in a batch, one number (see [`BATCH`]), as
/// the acquire script alone gives it: `{1, fence}` for a fence of at
/// least 1, `{0, pttl}` for `-2 - pttl`. Anything else is passed on as it
/// came, for the caller to reject.
fn widen_acquire(answer: Value) -> Value {
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
