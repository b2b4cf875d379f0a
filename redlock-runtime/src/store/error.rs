//! [`OpError`]: a failed backend call, classified (was the command applied?
//! may it pass?) and turned into the public [`LockError`].

use std::time::Duration;

use crate::error::{ConnectFailure, LockError, Operation, QuorumDetail};

/// A failed backend call, before the client adds the key and operation.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpError {
    /// Redis answered with an error, or the connection failed.
    #[error("{0}")]
    Redis(::redis::RedisError),
    /// The pool gave no connection in time.
    #[error("no connection within {timeout:?}{}", last_error.as_deref().map(|e| format!(" (last connection error: {e})")).unwrap_or_default())]
    Pool {
        timeout: Duration,
        last_error: Option<String>,
    },
    /// No connection could be made: refused, unreachable, rejected
    /// credentials or TLS, or a connect timeout. Nothing was sent.
    #[error("{failure} ({detail})")]
    Connect {
        failure: ConnectFailure,
        detail: String,
    },
    /// The whole call ran over its time limit.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// Redis Cluster: the call was still being redirected (`MOVED`, `ASK`)
    /// when its time limit ran out. `unknown` when an earlier attempt of
    /// the call may have run (it timed out before the slot map moved it).
    #[error("still redirected when the time limit of {timeout:?} ran out (last: {last})")]
    Redirected {
        timeout: Duration,
        last: String,
        unknown: bool,
    },
    /// Fewer replicas than required acknowledged the write in time.
    #[error("{acknowledged} of {wanted} replicas acknowledged within {timeout:?}")]
    Replicas {
        wanted: u32,
        acknowledged: u32,
        timeout: Duration,
    },
    /// Redlock: no majority of the nodes answered as needed.
    #[error("{0}")]
    Quorum(Box<QuorumDetail>),
    /// Redlock: the node started less than the restart delay ago, and
    /// grants nothing for this long yet.
    #[error("started less than the restart delay ago; it grants again in {left:?}")]
    Restarted { left: Duration },
    /// The in-memory store holds its most records.
    #[error(
        "the in-memory store holds {0} records, its most; use a Redis-backed LockClient for \
         more, or a shorter retention"
    )]
    Full(usize),
    /// Redis answered something the scripts never return.
    #[error("unexpected reply from Redis: {0}")]
    Reply(String),
    /// Redis Cluster: the lock's keys would hash to different slots.
    #[error(
        "the key leaves the lock's hash tag empty (it starts with `}}`, or the key prefix holds \
         `{{}}`), so Redis Cluster would put the lock and its fencing counter in different \
         slots; change the key or prefix"
    )]
    CrossSlot,
    /// Redis Cluster: a listed node is not in cluster mode.
    #[error("{node} is not in cluster mode (cluster support disabled)")]
    NotCluster { node: String },
    /// Redlock: a verb of the synchronizers (refused before it is sent).
    #[error("`{0}` needs the state in one store; Redlock does not offer it")]
    Unsupported(&'static str),
    /// The client was shut down: nothing was sent.
    #[error("the lock client was shut down (LockClient::shutdown)")]
    ShutDown,
    /// Sentinel: no Sentinel that answered knows the master name.
    #[error("no Sentinel knows a master named `{master}`")]
    UnknownMaster {
        master: String,
        sentinels: Vec<String>,
    },
}

impl OpError {
    /// True when the command may have reached Redis and been applied even
    /// though no answer came back.
    pub(crate) fn outcome_unknown(&self) -> bool {
        match self {
            Self::Redis(e) => crate::error::is_connection_failure(e),
            // The write reached the primary; too few replicas have it.
            Self::Timeout(_) | Self::Replicas { .. } => true,
            // Each redirection answered that the call did not run there.
            Self::Redirected { unknown, .. } => *unknown,
            Self::Pool { .. } | Self::Connect { .. } | Self::Restarted { .. } | Self::Full(_) => {
                false
            }
            Self::Reply(_) => true,
            Self::CrossSlot
            | Self::NotCluster { .. }
            | Self::UnknownMaster { .. }
            | Self::ShutDown
            | Self::Unsupported(_) => false,
            // The quorum backend has already released on every node it could.
            Self::Quorum(_) => false,
        }
    }

    /// True when the call may have left writes in Redis although it
    /// failed: its outcome is unknown ([`outcome_unknown`](Self::outcome_unknown)),
    /// or Redis answered it with an error. A script stops at its first
    /// error and Redis keeps what it wrote before it (a script is atomic,
    /// not a transaction: nothing is rolled back), so an acquire script
    /// that failed midway may have set a lock for a token no guard will
    /// hold (issue 32: a group whose second fencing counter held another
    /// type had set the first lock). An acquire answered so is given back,
    /// as one whose answer was lost; the give-back is token-checked, so it
    /// finds nothing when nothing was written. Not the errors with which
    /// Redis refuses a call before running any of it: "refused for now"
    /// ([`is_refused_for_now`](crate::error::is_refused_for_now)), a
    /// cluster's redirections and `CROSSSLOT`, and `NOSCRIPT` (redis-rs
    /// loads the script and sends it again).
    pub(crate) fn may_have_written(&self) -> bool {
        if self.outcome_unknown() {
            return true;
        }
        match self {
            Self::Redis(e) => e.code().is_some_and(|code| {
                !crate::error::is_refused_for_now(e)
                    && !matches!(code, "MOVED" | "ASK" | "CROSSSLOT" | "NOSCRIPT")
            }),
            _ => false,
        }
    }

    /// A copy of a batch-wide failure, for each request of the batch: the
    /// same variant where it matters to the caller (a replica shortfall,
    /// a timeout, a connection failure), else its text.
    pub(crate) fn copy(&self) -> OpError {
        match self {
            Self::Timeout(limit) => Self::Timeout(*limit),
            Self::Replicas {
                wanted,
                acknowledged,
                timeout,
            } => Self::Replicas {
                wanted: *wanted,
                acknowledged: *acknowledged,
                timeout: *timeout,
            },
            Self::Reply(text) => Self::Reply(text.clone()),
            other => {
                let (failure, detail) = other.connect_failure_ref();
                Self::Connect { failure, detail }
            }
        }
    }

    /// Why a connection check failed, classified, with the detail.
    pub(crate) fn connect_failure(self) -> (ConnectFailure, String) {
        self.connect_failure_ref()
    }

    /// [`connect_failure`](Self::connect_failure), borrowing.
    pub(crate) fn connect_failure_ref(&self) -> (ConnectFailure, String) {
        match self {
            Self::Connect { failure, detail } => (*failure, detail.clone()),
            Self::Redis(e) => (ConnectFailure::of(e), e.to_string()),
            e @ (Self::Pool { .. } | Self::Timeout(_)) => (ConnectFailure::Timeout, e.to_string()),
            e => (ConnectFailure::Other, e.to_string()),
        }
    }

    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Self::Redis(e) => crate::error::is_transient_redis(e),
            Self::Connect { failure, .. } => !failure.is_permanent(),
            Self::Timeout(_)
            | Self::Redirected { .. }
            | Self::Pool { .. }
            | Self::Replicas { .. }
            | Self::Quorum(_)
            | Self::Restarted { .. } => true,
            Self::Full(_)
            | Self::Reply(_)
            | Self::CrossSlot
            | Self::NotCluster { .. }
            | Self::UnknownMaster { .. }
            | Self::ShutDown
            | Self::Unsupported(_) => false,
        }
    }

    /// The public error for `key` and `op`.
    pub(crate) fn into_lock_error(self, key: &str, op: Operation) -> LockError {
        let key = key.to_owned();
        match self {
            Self::Redis(source) => match refused_command(&source) {
                Some(command) => LockError::NotPermitted { key, op, command },
                None => LockError::Redis { key, op, source },
            },
            Self::Timeout(timeout) => LockError::Timeout { key, op, timeout },
            Self::Redirected { timeout, last, .. } => LockError::Redirected {
                key,
                op,
                timeout,
                last,
            },
            Self::Connect { failure, detail } => LockError::Connection {
                key,
                op,
                failure,
                detail,
            },
            Self::Pool {
                timeout,
                last_error,
            } => LockError::Pool {
                key,
                op,
                timeout,
                last_error,
            },
            Self::Replicas {
                wanted,
                acknowledged,
                timeout,
            } => LockError::Replicas {
                key,
                op,
                wanted,
                acknowledged,
                timeout,
            },
            Self::Quorum(detail) => LockError::Quorum {
                key,
                op,
                detail: *detail,
            },
            e @ Self::CrossSlot => LockError::InvalidKey {
                key,
                reason: e.to_string(),
            },
            Self::NotCluster { node } => {
                LockError::Config(crate::error::ConfigError::NotACluster { node })
            }
            Self::UnknownMaster { master, sentinels } => {
                LockError::Config(crate::error::ConfigError::UnknownSentinelMaster {
                    master,
                    sentinels,
                })
            }
            Self::ShutDown => LockError::ShutDown { key },
            Self::Unsupported(_) => LockError::Config(crate::error::ConfigError::Unsupported {
                feature: "read/write locks, semaphores and latches",
                reason: crate::error::SYNCHRONIZERS_ON_REDLOCK,
            }),
            // Only a Redlock node answers this, and the quorum backend turns
            // it into a node failure; kept whole should it ever surface.
            e @ (Self::Restarted { .. } | Self::Full(_) | Self::Reply(_)) => LockError::Redis {
                key,
                op,
                source: ::redis::RedisError::from(std::io::Error::other(e.to_string())),
            },
        }
    }
}

/// The command a `NOPERM` refused, from the server's message ("User u has
/// no permissions to run the 'evalsha' command"); `None` for any other
/// error.
pub(crate) fn refused_command(e: &redis::RedisError) -> Option<String> {
    use crate::error::KEY_ACCESS;
    if e.code() != Some("NOPERM") {
        return None;
    }
    let detail = e.detail().unwrap_or_default();
    let command = detail
        .split_once("to run the '")
        .and_then(|(_, rest)| rest.split_once('\''))
        .map(|(command, _)| command.to_ascii_lowercase());
    // "No permissions to access a key" (or "a channel").
    Some(command.unwrap_or_else(|| KEY_ACCESS.to_owned()))
}

/// Whether `e` refuses a command (a script's, for a user without
/// `+@scripting`), not a key or channel: a plain command on the same keys
/// may still be allowed.
pub(crate) fn refused_a_command(e: &redis::RedisError) -> bool {
    use crate::error::KEY_ACCESS;
    refused_command(e).is_some_and(|c| c != KEY_ACCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::KEY_ACCESS;

    fn noperm(detail: &str) -> redis::RedisError {
        redis::make_extension_error("NOPERM".to_owned(), Some(detail.to_owned()))
    }

    #[test]
    fn a_refusal_names_the_command() {
        let script = noperm("User noscripts has no permissions to run the 'evalsha' command");
        assert_eq!(refused_command(&script).as_deref(), Some("evalsha"));
        let key = noperm("No permissions to access a key");
        assert_eq!(refused_command(&key).as_deref(), Some(KEY_ACCESS));
        let other = redis::make_extension_error("WRONGTYPE".to_owned(), None);
        assert_eq!(refused_command(&other), None);
    }
}
