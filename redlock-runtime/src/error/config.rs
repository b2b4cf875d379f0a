//! [`ConfigError`]: a setting that cannot work.

use std::time::Duration;

/// A setting that cannot work.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The Redis URL does not parse.
    #[error(
        "invalid Redis URL {url}: {reason}; expected `redis://[user:password@]host[:port][/db]`"
    )]
    InvalidUrl {
        /// The URL, password redacted.
        url: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The builder was given no target: no URL, pool, Redlock nodes or
    /// memory.
    #[error(
        "no lock store given: call `.url(..)`, `.pool(..)`, `.redlock(..)` or `.in_memory()` on \
         the builder"
    )]
    MissingRedis,
    /// The builder was given two targets (say `.url(..)` and
    /// `.redlock(..)`): a client has one.
    #[error("the builder was given both {first} and {second}: a client has one target; keep one")]
    ConflictingTargets {
        /// The target set first (`.url(..)`, `.pool(..)`, ...).
        first: &'static str,
        /// The target set second.
        second: &'static str,
    },
    /// A builder setting that the chosen target does not use (say
    /// `.node_timeout(..)` without `.redlock(..)`): refused rather than
    /// ignored.
    #[error("{setting} does not apply to {target}: {hint}")]
    NotForTarget {
        /// The setting (`node_timeout`, `pool_size`, ...).
        setting: &'static str,
        /// The target chosen (`.url(..)`, `.in_memory()`, ...).
        target: &'static str,
        /// What it applies to, or what to use instead.
        hint: &'static str,
    },
    /// A duration setting is out of range.
    #[error("invalid {name} {value:?}: {reason}")]
    InvalidDuration {
        /// Which setting (`ttl`, `wait`, `command_timeout`, ...).
        name: &'static str,
        /// The value given.
        value: Duration,
        /// The allowed range.
        reason: &'static str,
    },
    /// A count out of range: a semaphore's limit or permits, a latch's
    /// count, a multi-lock's number of keys.
    #[error("invalid {name} {value}: {reason}")]
    InvalidCount {
        /// The setting (`limit`, `permits`, `count`, `keys`).
        name: &'static str,
        /// The value given.
        value: u64,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A TLS certificate or key given with
    /// [`tls_certificates`](crate::LockClientBuilder::tls_certificates)
    /// cannot be used: its file cannot be read, or it holds no PEM block.
    #[error(
        "the TLS {what} ({origin}) {reason}; give it in PEM (text that starts with `-----BEGIN`)"
    )]
    InvalidCertificate {
        /// Which one: `root CA`, `client certificate` or `client key`.
        what: &'static str,
        /// Its file, or which method it was given to.
        origin: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The client name cannot be written with the locks.
    #[error("invalid client name: {reason}; use 1 to 128 bytes without control characters")]
    InvalidClientName {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The pool size is zero.
    #[error("invalid pool size 0: a pool needs at least one connection")]
    ZeroPoolSize,
    /// A feature that the client's mode cannot offer.
    #[error("{feature} is not available here: {reason}")]
    Unsupported {
        /// The feature asked for.
        feature: &'static str,
        /// Why, and what to use instead.
        reason: &'static str,
    },
    /// The Redlock node list cannot make a safe quorum.
    #[error("invalid Redlock nodes: {reason}")]
    InvalidNodes {
        /// What is wrong with the list.
        reason: String,
    },
    /// The Redis Cluster node list is empty or names a node twice.
    #[error("invalid Redis Cluster nodes: {reason}")]
    InvalidClusterNodes {
        /// What is wrong with the list.
        reason: String,
    },
    /// A node given to [`LockClientBuilder::cluster`](crate::LockClientBuilder::cluster)
    /// is a Redis server without cluster mode.
    #[error(
        "{node} is not in cluster mode (`cluster-enabled no`): give the nodes of a Redis Cluster \
         to `.cluster(..)`, or connect to a single server with `.url(..)`"
    )]
    NotACluster {
        /// The node, password redacted.
        node: String,
    },
    /// The Sentinel list is empty or names a Sentinel twice, or the master
    /// name is empty.
    #[error("invalid Sentinel settings: {reason}")]
    InvalidSentinels {
        /// What is wrong.
        reason: String,
    },
    /// No Sentinel that answered monitors a master of this name.
    #[error(
        "no Sentinel knows a master named `{master}` (asked {}): give the name from their \
         `sentinel monitor <name> ..` configuration (`SENTINEL MASTERS` lists them)",
        sentinels.join(", ")
    )]
    UnknownSentinelMaster {
        /// The name asked for.
        master: String,
        /// The Sentinels asked, passwords redacted.
        sentinels: Vec<String>,
    },
    /// The key prefix is too long.
    #[error("invalid key prefix: {len} bytes, at most {max} are allowed")]
    PrefixTooLong {
        /// The prefix's length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The Redis server is older than 6.2, which the lock scripts need
    /// (`SET .. GET`).
    #[error(
        "Redis at {target} is version {version}; redlock needs Redis 6.2 or newer (its scripts \
         use `SET .. GET`): upgrade the server"
    )]
    ServerTooOld {
        /// The server, password redacted.
        target: String,
        /// The version it reported.
        version: String,
    },
    /// Redis may evict lock keys, and the client was asked to refuse that
    /// ([`LockClientBuilder::require_noeviction`](crate::LockClientBuilder::require_noeviction)).
    #[error(
        "Redis at {target} may evict lock keys under memory pressure (maxmemory is set with \
         maxmemory-policy {policy}), and a lock evicted while held can be taken by a second \
         owner; set `maxmemory-policy noeviction` on it (or remove the maxmemory limit)"
    )]
    EvictingPolicy {
        /// The server, password redacted.
        target: String,
        /// Its `maxmemory-policy`.
        policy: String,
    },
    /// `#[distributed_lock]` without `client = ..` ran before any client was
    /// installed.
    #[error(
        "no process-wide LockClient is installed: call `redlock_runtime::install(client)` at \
         startup, before the first `#[distributed_lock]` function runs, or give the attribute \
         its own client with `client = ..`"
    )]
    NotInstalled,
}

/// `Debug` leads with the message, then the fields (see
/// `debug_with_message!` in `error.rs`).
impl std::fmt::Debug for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_with_message!(self, f, ConfigError {
            InvalidUrl { url, reason },
            ConflictingTargets { first, second },
            NotForTarget { setting, target, hint },
            InvalidDuration { name, value, reason },
            InvalidCount { name, value, reason },
            InvalidCertificate { what, origin, reason },
            InvalidClientName { reason },
            Unsupported { feature, reason },
            InvalidNodes { reason },
            InvalidClusterNodes { reason },
            NotACluster { node },
            InvalidSentinels { reason },
            UnknownSentinelMaster { master, sentinels },
            PrefixTooLong { len, max },
            ServerTooOld { target, version },
            EvictingPolicy { target, policy },
        } units { MissingRedis, ZeroPoolSize, NotInstalled })
    }
}
