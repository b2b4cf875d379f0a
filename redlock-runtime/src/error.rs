//! Error types: [`LockError`] for lock operations, [`ConfigError`] for bad settings.

use std::fmt;
use std::time::Duration;

pub use crate::connect_failure::ConnectFailure;
pub use config::ConfigError;

/// Writes an error's `Debug` as `anyhow` does: the message first (its
/// `Display`, with the advice it gives), then, after a blank line, its
/// variant and fields as `#[derive(Debug)]` would (`{:#?}` spreads them
/// over lines). `fn main() -> Result<(), E>` prints an error's `Debug`: it
/// must say what went wrong and what to do, not just name a variant.
///
/// Each variant is listed with every field: the patterns name them all,
/// so a field or variant added later fails to compile until it is listed.
macro_rules! debug_with_message {
    ($error:expr, $f:expr, $Enum:ident {
        $($Variant:ident { $($field:ident),* $(,)? }),* $(,)?
    } $(tuples { $($Tuple:ident),* $(,)? })? $(units { $($Unit:ident),* $(,)? })?) => {{
        let (error, f) = ($error, $f);
        write!(f, "{error}\n\n")?;
        match error {
            $($Enum::$Variant { $($field),* } => f
                .debug_struct(stringify!($Variant))
                $(.field(stringify!($field), $field))*
                .finish(),)*
            $($($Enum::$Tuple(inner) => f.debug_tuple(stringify!($Tuple)).field(inner).finish(),)*)?
            $($($Enum::$Unit => f.write_str(stringify!($Unit)),)*)?
        }
    }};
}

mod config;

/// ` (holder)` for a busy error's message, or nothing.
fn held_by(holder: Option<&str>) -> String {
    holder.map(|h| format!(" ({h})")).unwrap_or_default()
}

/// ` (when the wait ended: holder)` for a wait's message, or nothing.
fn held_at_end(holder: Option<&str>) -> String {
    holder
        .map(|h| format!(" (when the wait ended: {h})"))
        .unwrap_or_default()
}

/// [`LockError::NotPermitted`]'s `command` for a `NOPERM` of a key or
/// channel, not of a command.
pub(crate) const KEY_ACCESS: &str = "its keys or channels";

/// What to do about a command the user's ACL refuses.
pub(crate) fn not_permitted_advice(command: &str) -> String {
    let script = matches!(
        command,
        "evalsha" | "eval" | "evalsha_ro" | "eval_ro" | "script" | "script|load"
    );
    if script {
        "it runs a script: grant the user `+@scripting` (at least `+evalsha +script|load`). \
         Without scripts, only plain locks work, on one server, Cluster, Sentinel or Redlock, \
         with no fencing token, fair mode or minimum hold, on a server with `DELIFEQ` or `DELEX` \
         (Valkey 9, Redis 8.4): they are renewed with `SET .. IFEQ` and released with the \
         conditional delete"
            .to_owned()
    } else if command == KEY_ACCESS {
        "grant the user the client's keys and channels (`~lock:*` and `&lock:*` for the default \
         prefix `lock:`)"
            .to_owned()
    } else {
        format!("grant it (`ACL SETUSER <user> +{command}`)")
    }
}

/// What to use instead of the synchronizers on a Redlock client.
pub(crate) const SYNCHRONIZERS_ON_REDLOCK: &str = "a read/write lock, semaphore or latch keeps \
     its state in one store, and Redlock's independent masters share none; build a client on one \
     Redis (with `.replicas(..)`), Sentinel or Redis Cluster for them (a multi-lock works on \
     Redlock)";

/// What went wrong with a lock operation.
///
/// Every message names the key and says what to do. Use the predicates
/// ([`is_busy`](Self::is_busy), [`is_transient`](Self::is_transient)) rather
/// than matching exhaustively: new variants may be added.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock is held by another owner and no wait was allowed.
    #[error(
        "lock `{key}` is held by another owner{}; try again later, or allow waiting with \
         `.wait(..)`",
        held_by(holder.as_deref())
    )]
    Busy {
        /// The lock key, without the client's prefix.
        key: String,
        /// Who held it when the acquire gave up: its client name, how long
        /// it had held it and when its lease ends (never its token), when
        /// known.
        holder: Option<String>,
    },

    /// Every attempt during the wait found the lock held by another owner
    /// (not always the same one: the lock may have changed hands between
    /// two attempts).
    #[error(
        "gave up on lock `{key}` after waiting {waited:?}: another owner held it at every \
         attempt{}; allow a longer `.wait(..)` or shorten the other holder's critical section",
        held_at_end(holder.as_deref())
    )]
    WaitTimeout {
        /// The lock key, without the client's prefix.
        key: String,
        /// How long this caller waited before giving up.
        waited: Duration,
        /// Who held it when the wait ended (as for [`Busy`](Self::Busy)),
        /// which may not be who held it when the wait began.
        holder: Option<String>,
    },

    /// The lock is no longer held by this guard.
    #[error(
        "lock `{key}` was lost: {reason}; work done under it may have overlapped with another \
         holder, so guard writes with the fencing token"
    )]
    Lost {
        /// The lock key, without the client's prefix.
        key: String,
        /// Why the lock is known or presumed lost.
        reason: LostReason,
    },

    /// The client was shut down ([`LockClient::shutdown`](crate::LockClient::shutdown)):
    /// it takes nothing new, and an acquire that was waiting gave up (and
    /// gave back whatever an attempt of it may have taken).
    #[error("{}", shut_down(key))]
    ShutDown {
        /// The lock key, without the client's prefix; empty for a
        /// [`ping`](crate::LockClient::ping) (a shut-down client is not
        /// ready).
        key: String,
    },

    /// A write lock was asked for inside a `run` scope of this task that
    /// holds the read lock of the same key: it would wait for itself.
    #[error(
        "this task holds the read lock `{key}`; a write lock taken inside it would wait for \
         itself forever: release the read lock first, or take the write lock from the start and \
         `downgrade()` it"
    )]
    Upgrade {
        /// The read/write lock's key, without the client's prefix.
        key: String,
    },

    /// A countdown latch's ttl ended while counts were left (or a
    /// count-down found no latch set up).
    #[error(
        "latch `{key}` is not set up{}: set it up with `try_set_count(n, ttl)` and a ttl longer \
         than the work, and check that every worker counts down",
        if *.expired { " any more: its ttl ended before the count reached zero" } else { "" }
    )]
    Latch {
        /// The latch's key, without the client's prefix.
        key: String,
        /// `true`: it was set up, and its ttl ended with counts left;
        /// `false`: a count-down found it not set up.
        expired: bool,
    },

    /// The key cannot be used as a lock key.
    #[error("invalid lock key {key:?}: {reason}")]
    InvalidKey {
        /// The offending key (cut to its first 64 characters).
        key: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A setting is out of range (a zero ttl, a malformed URL, ...).
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// The client could not reach Redis when it was built.
    #[error("could not connect to Redis at {url}: {failure} ({detail}); {}", failure.advice())]
    Connect {
        /// The Redis URL, password redacted.
        url: String,
        /// Why: refused, unreachable, authentication, TLS or a timeout.
        failure: ConnectFailure,
        /// The last connection error seen (no password or certificate in it).
        detail: String,
    },

    /// A node of the topology did not answer a
    /// [`ping`](crate::LockClient::ping): the first one in the topology's
    /// order (the one Redis, each Redlock node as listed, each Cluster
    /// master, Sentinel's primary).
    #[error(
        "node {node} did not answer the ping{}: {failure} ({detail}); {}",
        if *others > 0 { format!(" (nor did {others} other node(s))") } else { String::new() },
        failure.advice()
    )]
    NodeDown {
        /// The node, as a URL without its password.
        node: String,
        /// Why: refused, unreachable, authentication, TLS, a timeout, or
        /// `Other` for an error answer.
        failure: ConnectFailure,
        /// What went wrong (no password or certificate in it).
        detail: String,
        /// How many other nodes did not answer either.
        others: usize,
    },

    /// No connection to Redis could be made for the operation: the server
    /// refused it, could not be reached, rejected the credentials or the TLS
    /// handshake, or did not answer in time. Nothing was sent, so nothing
    /// is held.
    #[error(
        "could not connect to Redis for the {op} of lock `{key}`: {failure} ({detail}); {}",
        failure.advice()
    )]
    Connection {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation that could not start.
        op: Operation,
        /// Why, classified; [`ConnectFailure::is_permanent`] tells whether
        /// a retry can help.
        failure: ConnectFailure,
        /// The last connection error seen (no password or certificate in it).
        detail: String,
    },

    /// Redis answered with an error, or the connection broke during the command.
    #[error("Redis failed the {op} of lock `{key}`: {source}")]
    Redis {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation that failed.
        op: Operation,
        /// The driver's error.
        #[source]
        source: redis::RedisError,
    },

    /// The server refused a command to the client's user (`NOPERM`): its
    /// ACL does not allow it. Not transient: it fails at once, and every
    /// retry would be refused alike.
    #[error(
        "the Redis user may not run `{command}`, which the {op} of lock `{key}` needs (NOPERM): {}",
        not_permitted_advice(command)
    )]
    NotPermitted {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation that failed.
        op: Operation,
        /// The refused command, lower case as the server names it
        /// (`evalsha` for a script).
        command: String,
    },

    /// Redis did not answer within the command timeout.
    #[error(
        "Redis did not answer the {op} of lock `{key}` within {timeout:?}; it may be down, paused \
         or overloaded (the command timeout is set with `command_timeout`)"
    )]
    Timeout {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation that timed out.
        op: Operation,
        /// The time limit that ran out.
        timeout: Duration,
    },

    /// Redis Cluster kept redirecting the operation (`MOVED`, `ASK`) until
    /// the command timeout ran out: the key's slot is being moved, or the
    /// nodes disagree for now on which of them serves it. Retrying may pass.
    #[error(
        "Redis Cluster was still redirecting the {op} of lock `{key}` when its time limit of \
         {timeout:?} ran out (last answer: {last}); the key's slot is being moved: retry, and if \
         the slot stays half-moved, finish the migration (`redis-cli --cluster fix`)"
    )]
    Redirected {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation that was redirected.
        op: Operation,
        /// The time limit that ran out.
        timeout: Duration,
        /// The last redirection (`MOVED` or `ASK`, with the slot and node).
        last: String,
    },

    /// No connection could be had from the pool in time.
    #[error(
        "no Redis connection for the {op} of lock `{key}` within {timeout:?}: {}; the pool is \
         exhausted or Redis is unreachable",
        last_error.as_deref().unwrap_or("no connection error was reported")
    )]
    Pool {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation that could not start.
        op: Operation,
        /// The pool's connection timeout.
        timeout: Duration,
        /// The last error seen while connecting, when the pool reported one.
        last_error: Option<String>,
    },

    /// Redlock: a majority of the nodes could not be brought to agree.
    #[error("no quorum for the {op} of lock `{key}`: {detail}")]
    Quorum {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation that failed.
        op: Operation,
        /// How each node answered.
        detail: QuorumDetail,
    },

    /// The primary took the write, but too few replicas acknowledged it in
    /// time (`.replicas(n, timeout)`).
    #[error(
        "the {op} of lock `{key}` reached the primary, but only {acknowledged} of {wanted} \
         replicas acknowledged it within {timeout:?}; a failover now could lose it, so it does \
         not count (an acquired lock is given back at once); check the replicas with \
         `INFO replication`, or require fewer with `.replicas(..)`"
    )]
    Replicas {
        /// The lock key, without the client's prefix.
        key: String,
        /// The operation whose write was not replicated.
        op: Operation,
        /// Replicas required.
        wanted: u32,
        /// Replicas that acknowledged within the timeout.
        acknowledged: u32,
        /// How long the primary waited for them.
        timeout: Duration,
    },
}

/// `Debug` leads with the message (what `fn main() -> Result<(), LockError>`
/// prints), then the fields (see `debug_with_message!`).
impl fmt::Debug for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_with_message!(self, f, LockError {
            Busy { key, holder },
            WaitTimeout { key, waited, holder },
            Lost { key, reason },
            ShutDown { key },
            Upgrade { key },
            Latch { key, expired },
            InvalidKey { key, reason },
            Connect { url, failure, detail },
            NodeDown { node, failure, detail, others },
            Connection { key, op, failure, detail },
            Redis { key, op, source },
            NotPermitted { key, op, command },
            Timeout { key, op, timeout },
            Redirected { key, op, timeout, last },
            Pool { key, op, timeout, last_error },
            Quorum { key, op, detail },
            Replicas { key, op, wanted, acknowledged, timeout },
        } tuples { Config })
    }
}

/// How the nodes of a Redlock client answered one operation (see
/// [`LockError::Quorum`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumDetail {
    /// Nodes in the quorum.
    pub nodes: usize,
    /// How many must agree: a majority.
    pub needed: usize,
    /// Nodes that granted (acquire) or confirmed (extend, release).
    pub granted: usize,
    /// Nodes that answered no: the lock is held by another owner there
    /// (acquire), or no longer held by this one (extend, release).
    pub refused: usize,
    /// Nodes that failed to answer, with what went wrong.
    pub failed: Vec<NodeFailure>,
    /// Set when a majority granted, but only after this long: past the
    /// lock's validity (ttl less the clock-drift allowance), so it was
    /// given back.
    pub expired_after: Option<Duration>,
}

/// One node of a Redlock client that failed an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeFailure {
    /// The node's URL, password redacted.
    pub node: String,
    /// What went wrong (a timeout, a refused connection, ...).
    pub error: String,
}

impl fmt::Display for QuorumDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(after) = self.expired_after {
            return write!(
                f,
                "{} of {} nodes granted it, but only after {after:?}, past the lock's validity, \
                 so it was given back; use a longer ttl, or nodes that answer faster",
                self.granted, self.nodes
            );
        }
        write!(
            f,
            "{} of {} nodes granted, {} refused (held by another owner), {} failed",
            self.granted,
            self.nodes,
            self.refused,
            self.failed.len()
        )?;
        if !self.failed.is_empty() {
            f.write_str(" (")?;
            for (i, failure) in self.failed.iter().enumerate() {
                if i > 0 {
                    f.write_str("; ")?;
                }
                write!(f, "{}: {}", failure.node, failure.error)?;
            }
            f.write_str(")")?;
        }
        write!(
            f,
            "; {} must agree: check that the failed nodes are up and reachable",
            self.needed
        )
    }
}

impl LockError {
    /// True when the lock was held by someone else ([`Busy`](Self::Busy) or
    /// [`WaitTimeout`](Self::WaitTimeout)): Redis worked, the lock was taken.
    pub fn is_busy(&self) -> bool {
        matches!(self, Self::Busy { .. } | Self::WaitTimeout { .. })
    }

    /// True for failures of Redis or the network that may pass if retried
    /// ([`Redis`](Self::Redis) I/O errors and refusals for now: `LOADING`,
    /// `BUSY`, `TRYAGAIN`, `MASTERDOWN`, `READONLY`, `CLUSTERDOWN`;
    /// [`Timeout`](Self::Timeout), [`Redirected`](Self::Redirected),
    /// [`Pool`](Self::Pool), [`Quorum`](Self::Quorum),
    /// [`Replicas`](Self::Replicas); [`Connect`](Self::Connect) and
    /// [`Connection`](Self::Connection) unless the failure is permanent: a
    /// wrong password or a TLS failure is not transient).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout { .. }
            | Self::Redirected { .. }
            | Self::Pool { .. }
            | Self::Quorum { .. }
            | Self::Replicas { .. } => true,
            Self::Connect { failure, .. }
            | Self::Connection { failure, .. }
            | Self::NodeDown { failure, .. } => !failure.is_permanent(),
            Self::Redis { source, .. } => is_transient_redis(source),
            _ => false,
        }
    }

    /// True when the lock was lost ([`Lost`](Self::Lost)).
    pub fn is_lost(&self) -> bool {
        matches!(self, Self::Lost { .. })
    }

    /// The lock key the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Busy { key, .. }
            | Self::WaitTimeout { key, .. }
            | Self::Lost { key, .. }
            | Self::ShutDown { key }
            | Self::Upgrade { key }
            | Self::Latch { key, .. }
            | Self::InvalidKey { key, .. }
            | Self::Redis { key, .. }
            | Self::NotPermitted { key, .. }
            | Self::Timeout { key, .. }
            | Self::Redirected { key, .. }
            | Self::Pool { key, .. }
            | Self::Connection { key, .. }
            | Self::Quorum { key, .. }
            | Self::Replicas { key, .. } => Some(key),
            Self::Config(_) | Self::Connect { .. } | Self::NodeDown { .. } => None,
        }
    }
}

/// A failure that may pass: the connection failed, or Redis refused for
/// now (see [`is_refused_for_now`]).
pub(crate) fn is_transient_redis(e: &redis::RedisError) -> bool {
    is_connection_failure(e) || is_refused_for_now(e)
}

/// The connection failed during the command: it may or may not have run.
pub(crate) fn is_connection_failure(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}

/// Error codes with which Redis refuses a command for a while, without
/// running it: loading its data after a restart (`LOADING`), running a slow
/// script (`BUSY`), a failover or slot move in progress (`TRYAGAIN`,
/// `MASTERDOWN`, `READONLY` from a primary just demoted, `CLUSTERDOWN`).
/// An acquire with a wait retries through them instead of failing at once.
const REFUSED_FOR_NOW: [&str; 6] = [
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "MASTERDOWN",
    "READONLY",
    "CLUSTERDOWN",
];

/// Redis refused the command for now (one of [`REFUSED_FOR_NOW`]): it did
/// not run, and may once Redis is ready.
pub(crate) fn is_refused_for_now(e: &redis::RedisError) -> bool {
    e.code().is_some_and(|code| REFUSED_FOR_NOW.contains(&code))
}

/// Why a lock is known or presumed lost.
///
/// When the store answers that a lease is no longer this owner's, the
/// client reads the name once more to tell [`TakenOver`](Self::TakenOver)
/// from [`Expired`](Self::Expired) and [`TokenGone`](Self::TokenGone)
/// (only then: a renewal or release that succeeds costs nothing more).
/// An idempotency record and a semaphore's permits are never taken over by
/// another owner's token: theirs is `Expired` or `TokenGone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// The key no longer held this owner's token although the lease still
    /// had time when the call that found this went out, and no other
    /// owner held it: the key did not expire, it was deleted (by hand, or
    /// by a `FLUSHDB`) or lost with its server (a restart without
    /// persistence, a failover to a replica that had not received it).
    TokenGone,
    /// Renewal could not reach Redis before the lease would have run out, so
    /// the lock is presumed lost.
    Unconfirmed,
    /// The lease ran out before it was renewed or released, and no other
    /// owner held the lock when this was found: the watchdog was off
    /// (`renew(false)`), or the call came after the lease's end.
    Expired,
    /// The lock was released by its holder: a reentrant guard or a
    /// [`CurrentLock`](crate::CurrentLock) that outlived its scope, or a
    /// re-entry into it, no longer holds anything.
    Released,
    /// Another owner holds the lock now (for a read lock: a writer): this
    /// owner's lease ended (it ran out, or the key was deleted or lost)
    /// and another took it. Work done under the two may overlap: what the
    /// fencing token is for.
    TakenOver,
    /// An operator ended the lease with
    /// [`LockClient::force_release`](crate::LockClient::force_release),
    /// which also raised the fencing counter above this owner's token.
    EndedByOperator,
    /// This client was shut down ([`LockClient::shutdown`](crate::LockClient::shutdown)),
    /// which released the lock: work still running under it is no longer
    /// protected.
    ClientShutDown,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TokenGone => "the key was gone while its lease still had time (deleted, or lost with a restart or failover of its server)",
            Self::Unconfirmed => "renewal could not reach Redis before the lease ran out",
            Self::Expired => "the lease ran out before it was renewed or released",
            Self::Released => "the lock was already released by the scope that held it",
            Self::TakenOver => "another owner holds it now (this lease ended and it was taken)",
            Self::EndedByOperator => "an operator ended the lease (force_release)",
            Self::ClientShutDown => "the client was shut down, which released it (LockClient::shutdown)",
        })
    }
}

/// The lock operation an error happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// Taking the lock.
    Acquire,
    /// Extending the lease (by hand or by the watchdog).
    Extend,
    /// Releasing the lock.
    Release,
    /// Reading who holds a lock ([`LockClient::inspect`](crate::LockClient::inspect)).
    Inspect,
    /// Issuing a lock's fencing token on first ask
    /// ([`LockGuard::fencing_token`](crate::LockGuard::fencing_token)).
    Fence,
    /// Ending a lock whoever holds it
    /// ([`LockClient::force_release`](crate::LockClient::force_release)).
    ForceRelease,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Acquire => "acquire",
            Self::Extend => "extend",
            Self::Release => "release",
            Self::Inspect => "inspect",
            Self::Fence => "fencing token",
            Self::ForceRelease => "force release",
        })
    }
}

/// [`LockError::ShutDown`]'s message: about the lock asked for, or about
/// the client (a ping).
fn shut_down(key: &str) -> String {
    const WHAT: &str = "the lock client was shut down (LockClient::shutdown), so it takes no \
                        new locks; build a new client if work must go on";
    if key.is_empty() {
        format!("{WHAT} (a ping answers that it is not ready)")
    } else {
        format!("lock `{key}`: {WHAT}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_leads_with_the_message_then_the_fields() {
        // What `fn main() -> Result<(), LockError>` prints on a wrong
        // password: the advice first, then what a bug report needs.
        let err = LockError::Connect {
            url: "redis://:***@cache:6379".to_owned(),
            failure: ConnectFailure::Auth,
            detail: "WRONGPASS invalid username-password pair".to_owned(),
        };
        let debug = format!("{err:?}");
        let message = err.to_string();
        assert!(debug.starts_with(&format!("{message}\n\n")), "{debug}");
        assert!(message.contains("password"), "{message}");
        assert!(
            debug.ends_with(
                "Connect { url: \"redis://:***@cache:6379\", failure: Auth, detail: \
                 \"WRONGPASS invalid username-password pair\" }"
            ),
            "{debug}"
        );
        // Nested, unit and tuple variants alike.
        let config = LockError::Config(ConfigError::ZeroPoolSize);
        let debug = format!("{config:?}");
        assert!(debug.starts_with(&config.to_string()), "{debug}");
        let inner = ConfigError::ZeroPoolSize;
        assert!(debug.ends_with(&format!("Config({inner:?})")), "{debug}");
        assert_eq!(format!("{inner:?}"), format!("{inner}\n\nZeroPoolSize"));
        let bad = ConfigError::InvalidUrl {
            url: "redis://cache:x".to_owned(),
            reason: "invalid port".to_owned(),
        };
        assert!(
            format!("{bad:?}")
                .ends_with("\n\nInvalidUrl { url: \"redis://cache:x\", reason: \"invalid port\" }"),
            "{bad:?}"
        );
    }

    fn server_error(code: &str) -> redis::RedisError {
        redis::make_extension_error(code.to_owned(), Some("detail".to_owned()))
    }

    #[test]
    fn refusals_for_now_are_transient_and_ran_nothing() {
        for code in REFUSED_FOR_NOW {
            let e = server_error(code);
            assert!(is_transient_redis(&e), "{code}");
            assert!(
                !is_connection_failure(&e),
                "{code}: Redis refused, nothing ran"
            );
        }
        let typed = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading),
            "loading",
        ));
        assert!(is_transient_redis(&typed));
        for code in ["ERR", "WRONGTYPE", "NOPERM", "NOSCRIPT"] {
            assert!(!is_transient_redis(&server_error(code)), "{code}");
        }
        let io = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_transient_redis(&io) && is_connection_failure(&io));
    }
}

/// A lock error as an I/O error, for functions returning
/// `std::io::Result` (an `#[distributed_lock]` function among them): the
/// kind is [`WouldBlock`](std::io::ErrorKind::WouldBlock) for
/// [`LockError::Busy`], [`TimedOut`](std::io::ErrorKind::TimedOut) for
/// [`LockError::WaitTimeout`], and [`Other`](std::io::ErrorKind::Other)
/// for the rest; the `LockError` itself is the I/O error's inner error
/// (`get_ref`, `into_inner`, `downcast`).
impl From<LockError> for std::io::Error {
    fn from(error: LockError) -> Self {
        let kind = match &error {
            LockError::Busy { .. } => std::io::ErrorKind::WouldBlock,
            LockError::WaitTimeout { .. } => std::io::ErrorKind::TimedOut,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, error)
    }
}

#[cfg(test)]
mod io_tests {
    use std::io;

    use super::*;

    #[test]
    fn a_lock_error_becomes_an_io_error_that_keeps_it() {
        let busy = io::Error::from(LockError::Busy {
            key: "order:1".to_owned(),
            holder: None,
        });
        assert_eq!(busy.kind(), io::ErrorKind::WouldBlock);
        assert!(busy.to_string().contains("order:1"), "{busy}");
        let timed_out = io::Error::from(LockError::WaitTimeout {
            key: "order:1".to_owned(),
            waited: Duration::from_secs(1),
            holder: None,
        });
        assert_eq!(timed_out.kind(), io::ErrorKind::TimedOut);
        let config = io::Error::from(LockError::Config(ConfigError::NotInstalled));
        assert_eq!(config.kind(), io::ErrorKind::Other);
        let inner = config
            .downcast::<LockError>()
            .expect("the LockError inside");
        assert!(matches!(
            inner,
            LockError::Config(ConfigError::NotInstalled)
        ));
    }
}
