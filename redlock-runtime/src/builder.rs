//! [`LockClientBuilder`]: a client's settings and its one target (a Redis
//! URL, a bb8 pool, Redlock nodes, or memory), checked before anything is
//! opened.

use std::time::Duration;

use bb8::Pool;
use bb8_redis::RedisConnectionManager;
use redis::aio::ConnectionManager;

use crate::backend::memory::MemoryBackend;
use crate::backend::{Backend, OpError};
use crate::backoff::RetryPolicy;
use crate::client::LockClient;
use crate::core::{Core, Settings};
use crate::error::{ConfigError, LockError};
use crate::store::open::{self, Connect};
use crate::store::server::Replicas;
use crate::target::Target;
use crate::tls::TlsCertificates;

use crate::store::subscribe::Wakeups;

/// A client in memory with these settings.
pub(crate) fn memory(settings: Settings) -> LockClient {
    let (wakeups, wake) = Wakeups::local();
    let backend = MemoryBackend::new(settings.fence_retention, wake);
    LockClient::from_core(Core::new(Backend::Memory(backend), settings, wakeups))
}

/// Settings for a [`LockClient`]; made by [`LockClient::builder`].
///
/// A builder takes one target, [`url`](Self::url), [`pool`](Self::pool),
/// [`redlock`](Self::redlock) or [`in_memory`](Self::in_memory); a second
/// one, or a setting the target does not use (say
/// [`node_timeout`](Self::node_timeout) without Redlock), fails the build
/// with [`ConfigError::ConflictingTargets`] or
/// [`ConfigError::NotForTarget`] instead of being ignored.
///
/// ```no_run
/// # async fn demo() -> Result<(), redlock_runtime::LockError> {
/// use std::time::Duration;
/// use redlock_runtime::{LockClient, RetryPolicy};
///
/// let client = LockClient::builder()
///     .url("redis://:secret@127.0.0.1:6379/0")
///     .pool_size(4)
///     .key_prefix("locks:billing:")
///     .default_ttl(Duration::from_secs(10))
///     .retry(RetryPolicy::new(Duration::from_millis(5), Duration::from_millis(100)))
///     .build()
///     .await?;
/// assert!(!format!("{client:?}").contains("secret"));
/// # Ok(()) }
/// ```
#[must_use]
#[derive(Debug, Default)]
pub struct LockClientBuilder {
    target: Option<Target>,
    /// A second target given: `(first, second)`.
    conflict: Option<(&'static str, &'static str)>,
    node_timeout: Option<Duration>,
    restart_delay: Option<Duration>,
    replicas: Option<Replicas>,
    require_noeviction: Option<bool>,
    pool_size: Option<u32>,
    connection_timeout: Option<Duration>,
    tls: Option<TlsCertificates>,
    /// Sentinel: whether to follow `+switch-master` (tests turn it off to
    /// check the re-asking on errors alone).
    sentinel_announcements: Option<bool>,
    /// Set by [`coalesce`](Self::coalesce) (refused where it does not
    /// apply).
    coalesce: Option<bool>,
    settings: Settings,
}

impl LockClientBuilder {
    fn target(mut self, target: Target) -> Self {
        match &self.target {
            Some(first) => {
                self.conflict
                    .get_or_insert((first.setter(), target.setter()));
            }
            None => self.target = Some(target),
        }
        self
    }

    /// The Redis server, as `redis://[user:password@]host[:port][/db]`, or
    /// `rediss://..` for TLS (with the `tls` feature; see
    /// [`tls_certificates`](Self::tls_certificates)).
    pub fn url(self, url: impl Into<String>) -> Self {
        self.target(Target::Url(url.into()))
    }

    /// Use this redis-rs [`ConnectionManager`] (one multiplexed connection
    /// that reconnects by itself) instead of opening connections from a
    /// URL: for a service that already has one. It stays shareable.
    ///
    /// Which to choose: a URL lets the client open what it needs (a few
    /// connections, a wake-up subscriber, a second set for `WAIT`), and is
    /// the one to prefer. A bb8 pool ([`pool`](Self::pool)) or a
    /// `ConnectionManager` shares what the service already has; with
    /// either, waiters poll instead of being woken by a release, and
    /// [`replicas`](Self::replicas) is refused with a `ConnectionManager`
    /// (`WAIT` would hold up every command on its one connection).
    pub fn connection_manager(self, manager: ConnectionManager) -> Self {
        self.target(Target::Manager(manager))
    }

    /// Use this `bb8-redis` pool instead of building one from a URL. It stays
    /// shareable: the client checks connections out only to clone their
    /// multiplexed handles. Its size and connection timeout are the pool's
    /// own: [`pool_size`](Self::pool_size) and
    /// [`connection_timeout`](Self::connection_timeout) are refused with it.
    pub fn pool(self, pool: Pool<RedisConnectionManager>) -> Self {
        self.target(Target::Pool(pool))
    }

    /// Redlock: one lock over these independent Redis masters (3 or 5,
    /// an odd number; not replicas of each other), held while a majority
    /// holds it. See the guide's table of
    /// topologies, and [`design`](crate::design) for why.
    ///
    /// Everything else works as with one Redis (wait, watchdog, guards,
    /// `run`, the attribute), except [`LockRequest::fair`](crate::LockRequest::fair). Fencing tokens
    /// stay strictly increasing across holders: each acquire raises the
    /// counter on a majority to the largest it saw.
    pub fn redlock<I, S>(self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.target(Target::Redlock(urls.into_iter().map(Into::into).collect()))
    }

    /// Redis Cluster: one or more of its nodes (any of them: the client
    /// reads the slot map from whichever answers, and finds the rest).
    /// Each lock lives on the master that serves its key's slot; the lock,
    /// its fencing counter, its fair line and its wake-up channel share the
    /// key's `{hash tag}`, so one slot holds them all.
    ///
    /// Everything works as on one Redis: fair mode, push wake-ups (sharded
    /// pub/sub on the lock's own shard, Redis 7), the batched watchdog (one
    /// pipeline per master), [`replicas`](Self::replicas) (`WAIT` on the
    /// master that took the write, in the same pipeline), the idempotency
    /// layer. The client follows `MOVED`, `ASK` and `TRYAGAIN` itself within
    /// each call's time limit, and reads the slot map again after a
    /// failover. See the guide's table of
    /// topologies, and [`design`](crate::design) for why.
    pub fn cluster<I, S>(self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.target(Target::Cluster(urls.into_iter().map(Into::into).collect()))
    }

    /// Redis Sentinel: the primary the Sentinels at `urls` monitor as
    /// `master` (the name in their `sentinel monitor` line). The client
    /// asks them for the primary, follows their `+switch-master`
    /// announcements, and asks again when the primary stops answering or
    /// refuses writes (`READONLY`), so a call made during a failover is sent
    /// to the new primary within its command timeout plus one Sentinel
    /// round trip.
    ///
    /// The primary is reached with the first URL's password and TLS
    /// settings. Without [`replicas`](Self::replicas), a failover can lose
    /// the newest locks (replication is asynchronous); with
    /// `.replicas(1, ..)` a lock is acknowledged by a replica before it is
    /// held, and survives the promotion of that replica. See the guide's table
    /// of topologies, and [`design`](crate::design) for why.
    pub fn sentinel<I, S>(self, urls: I, master: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.target(Target::Sentinel {
            urls: urls.into_iter().map(Into::into).collect(),
            master: master.into(),
        })
    }

    /// Keep locks in this process's memory (see [`LockClient::in_memory`]),
    /// with this builder's key prefix, ttl, timeouts and retry policy. The
    /// Redis settings (pool size, replicas, ...) are refused with it.
    pub fn in_memory(self) -> Self {
        self.target(Target::Memory)
    }

    /// Redlock: how long to wait for each node's answer. A node that does
    /// not answer in time counts as failed; the acquire does not wait longer
    /// than this (nor than a tenth of the ttl) for a slow or hung node.
    /// Defaults to 100 ms. Refused without `.redlock(..)`.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// Redlock: a node grants no lock until this long after it started, so
    /// a node that restarted (and forgot the locks it held, whatever its
    /// persistence short of `appendfsync always`) cannot help a second owner
    /// to a majority while the first still holds the lock on other nodes.
    /// Set it to the longest ttl in use. The start is read from the node
    /// itself (`INFO server` uptime against `TIME`) on each new connection,
    /// never from its data, so a node restored from a snapshot cannot look
    /// older than it is; a node started less than the delay ago when the
    /// client first meets it also waits it out. See [`design`](crate::design),
    /// "Restarted nodes". Defaults to none. Refused without `.redlock(..)`.
    pub fn restart_delay(mut self, delay: Duration) -> Self {
        self.restart_delay = Some(delay);
        self
    }

    /// One Redis primary with replicas: after each acquire and renewal, wait
    /// (`WAIT count timeout`) until `count` replicas have the write. An
    /// acquire that fewer replicas acknowledge does not count: it is tried
    /// again within the wait, and given back (retried until its lease would
    /// end) when the acquire fails with [`LockError::Replicas`]; a renewal
    /// that fewer acknowledge does not count (the lock is presumed lost if
    /// none counts before the lease ends). So a failover to a replica cannot
    /// lose a lock the client believes held. `WAIT` blocks the connection it
    /// runs on, so these writes use connections of their own (a second pool
    /// of `pool_size`; with [`pool`](Self::pool), half of that pool's
    /// connections, kept checked out): releases never wait behind a `WAIT`.
    /// Defaults to none (no wait).
    pub fn replicas(mut self, count: u32, timeout: Duration) -> Self {
        self.replicas = Some(Replicas { count, timeout });
        self
    }

    /// How many Redis connections the client uses (the pool's size, kept
    /// open). Each is multiplexed, so one carries thousands of concurrent
    /// lock operations, and batches them: one connection gives the most
    /// throughput on a small machine (fewer system calls on both sides).
    /// Defaults to 1, or 4 with [`replicas`](Self::replicas) (each `WAIT`
    /// blocks the connection it runs on). For a client built from a URL or
    /// Redlock nodes (each node has its own).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// How long to wait for a new connection (connect and check it) before
    /// an operation fails with [`LockError::Connection`] (saying why: refused,
    /// a timeout, ...). A wrong password or TLS failure fails at once
    /// instead. Defaults to 2 s. For a client built from a URL or Redlock
    /// nodes.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = Some(timeout);
        self
    }

    /// How long one Redis command may take before it fails with
    /// [`LockError::Timeout`]. Defaults to 500 ms, which is also the
    /// response timeout that `redis` sets on the connections `bb8-redis`
    /// makes, so longer values have no effect on those.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.settings.command_timeout = timeout;
        self
    }

    /// Prefix of every lock key in Redis. Defaults to `lock:`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.key_prefix = prefix.into();
        self
    }

    /// The lease of requests that set no `.ttl(..)`. Defaults to 30 s.
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.settings.default_ttl = ttl;
        self
    }

    /// How long a key's fencing counter is kept after its last acquire.
    /// Tokens never go back when a counter is gone (each is at least
    /// Redis's clock in microseconds; see [`design`](crate::design), "Fencing
    /// tokens"), so a counter need not live forever: a service that locks
    /// per order id leaves no key behind this long after the last lock of
    /// each. At least a second, and longer than the clock skew between
    /// Redlock nodes. Defaults to a day.
    ///
    /// Each counter takes about 160 bytes of Redis memory: tokens on 1,000
    /// distinct keys a second keep about 86 million counters (13 GB) with
    /// a day's retention, and about 60,000 (10 MB) with a minute's. A
    /// shorter retention moves no token back; it only narrows the clock
    /// steps survived: once a key's counter is gone, a clock stepped back
    /// by more than the time since that key's last token can repeat it.
    pub fn fencing_retention(mut self, retention: Duration) -> Self {
        self.settings.fence_retention = retention;
        self
    }

    /// Refuse to build ([`ConfigError::EvictingPolicy`]) when Redis may
    /// evict keys under memory pressure: a `maxmemory` limit with a
    /// `maxmemory-policy` other than `noeviction`. Lock keys and fencing
    /// counters have an expiry, so `volatile-*` policies evict them as
    /// readily as `allkeys-*`: a lock evicted while held is a lock two
    /// owners get. Without this, [`build`](Self::build) only logs a warning
    /// (and with `CONFIG` disabled, as on some managed services, a debug
    /// line saying it could not check). Defaults to `false`.
    pub fn require_noeviction(mut self, require: bool) -> Self {
        self.require_noeviction = Some(require);
        self
    }

    /// The CA to trust and the client certificate to present on `rediss://`
    /// connections (every node's, with Redlock), instead of the system's
    /// root certificates. Needs the `tls` feature; refused with a pool, a
    /// `ConnectionManager`, memory, or `redis://` URLs.
    pub fn tls_certificates(mut self, certificates: TlsCertificates) -> Self {
        self.tls = Some(certificates);
        self
    }

    /// Sentinel: follow the Sentinels' `+switch-master` announcements (on
    /// by default). Off, the client learns of a failover only by asking the
    /// Sentinels again when the primary stops answering or refuses writes:
    /// for tests of that path.
    #[doc(hidden)]
    pub fn sentinel_announcements(mut self, follow: bool) -> Self {
        self.sentinel_announcements = Some(follow);
        self
    }

    /// The name written with each lock this client takes, which
    /// [`LockClient::inspect`] and the busy errors show: who holds a lock.
    /// Defaults to the host name and process id (`web-3:4121`). At most
    /// 128 bytes, no control characters; it is stored beside the owner
    /// token, never instead of it.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.settings.client_name = name.into().into();
        self
    }

    /// Issue every lock's fencing token with its acquire (as
    /// [`LockRequest::fenced`](crate::LockRequest::fenced) does for one
    /// request), for services that take a token with every lock. Off by
    /// default: a token is issued on first ask, and a lock that never
    /// needs one costs a plain `SET NX`.
    pub fn fenced(mut self, fenced: bool) -> Self {
        self.settings.fenced = fenced;
        self
    }

    /// Send the concurrent calls of locks with fencing tokens (their
    /// acquires and releases) as one script call per batch, on one Redis
    /// or a Sentinel primary. On by default: under load it takes about a
    /// third off what a fenced lock costs Redis and this client; alone, a
    /// call goes out at once, as without it. Turn it off behind a proxy
    /// that refuses a script over several keys' slots with an error other
    /// than `CROSSSLOT` (after `CROSSSLOT` the client turns it off by
    /// itself). Cluster and Redlock nodes never coalesce.
    pub fn coalesce(mut self, coalesce: bool) -> Self {
        self.coalesce = Some(coalesce);
        self.settings.coalesce = coalesce;
        self
    }

    /// Release plain locks (those without a fencing token, fair mode or a
    /// minimum hold) with the server's conditional delete where it has
    /// one: `DELEX key IFEQ token` (Redis 8.4, Valkey 9.2) or `DELIFEQ key
    /// token` (Valkey 9.0), instead of a script. On by default: it costs
    /// the server a fraction of the script's time, and works where an ACL
    /// forbids scripts. Each new connection asks its server which it has
    /// (`COMMAND INFO`, one round trip), and one that refuses the command
    /// falls back to the script; servers without either (Redis before
    /// 8.4, Valkey before 9.0) always get the script. Turn it off to send
    /// scripts only (to compare, or behind a proxy that mangles unknown
    /// commands).
    pub fn conditional_commands(mut self, on: bool) -> Self {
        self.settings.conditional_commands = on;
        self
    }

    /// Pacing of retries while waiting for a busy lock. Defaults to
    /// [`RetryPolicy::default`] (10 ms doubling to 200 ms, full jitter).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.settings.retry = policy;
        self
    }

    /// Builds the client and checks that Redis answers, is version 6.2 or
    /// newer, and does not evict keys (see
    /// [`require_noeviction`](Self::require_noeviction)).
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad setting, [`LockError::Connect`] when
    /// Redis cannot be reached within the connection timeout.
    pub async fn build(self) -> Result<LockClient, LockError> {
        let require_noeviction = self.require_noeviction.unwrap_or(false);
        let client = self.build_unchecked()?;
        let core = client.core();
        let target = core.settings().target.clone();
        core.backend().check().await.map_err(|e| match e {
            OpError::NotCluster { node } => ConfigError::NotACluster { node }.into(),
            OpError::UnknownMaster { master, sentinels } => {
                ConfigError::UnknownSentinelMaster { master, sentinels }.into()
            }
            e => {
                let (failure, detail) = e.connect_failure();
                LockError::Connect {
                    url: target.clone(),
                    failure,
                    detail,
                }
            }
        })?;
        if let Some((target, version)) = core.backend().too_old_servers(&target).await.pop() {
            return Err(ConfigError::ServerTooOld { target, version }.into());
        }
        for (target, policy) in core.backend().eviction_policies(&target).await {
            let Some(policy) = policy else {
                tracing::debug!(target: "redlock", %target, "could not read maxmemory-policy (CONFIG is disabled?); make sure Redis does not evict lock keys");
                continue;
            };
            if require_noeviction {
                return Err(ConfigError::EvictingPolicy { target, policy }.into());
            }
            tracing::warn!(target: "redlock", %target, %policy, "Redis may evict lock keys under memory pressure (maxmemory with maxmemory-policy {policy}): a lock evicted while held can be taken by a second owner; set maxmemory-policy noeviction");
        }
        core.learn_clock().await;
        Ok(client)
    }

    /// Builds the client without contacting Redis; connections are made on
    /// first use.
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad setting or URL.
    pub fn build_unchecked(mut self) -> Result<LockClient, LockError> {
        let target = self.checked()?;
        let connect = Connect {
            // One multiplexed connection batches the most commands per
            // write (the fewest system calls on both sides); `WAIT` blocks
            // its connection, so with replicas the writes get four.
            pool_size: self
                .pool_size
                .unwrap_or(if self.replicas.is_some() { 4 } else { 1 }),
            connection_timeout: self.connection_timeout.unwrap_or(Duration::from_secs(2)),
            replicas: self.replicas,
            fence_retention: self.settings.fence_retention,
            restart_delay: self.restart_delay,
            tls: self.tls.take(),
            fail_fast: false,
            coalesce: self.settings.coalesce,
            conditional: self.settings.conditional_commands,
        };
        let mut settings = self.settings;
        let (backend, wakeups) = match target {
            Target::Memory => {
                settings.target = "in-memory".to_owned();
                return Ok(memory(settings));
            }
            Target::Url(url) => {
                let (client, redacted) = open::open_url(&url, connect.tls.as_ref())?;
                let backend = open::server(&client, &redacted, &connect)?;
                settings.target = redacted;
                // The URL also opens the wake-up subscriber connection.
                (Backend::Redis(backend), Wakeups::subscriber(client))
            }
            Target::Pool(pool) => {
                settings.target = "bb8 pool".to_owned();
                let backend = open::from_pool(
                    pool,
                    self.replicas,
                    settings.fence_retention,
                    settings.coalesce,
                )
                .conditional_commands(settings.conditional_commands);
                (Backend::Redis(backend), Wakeups::off())
            }
            Target::Manager(manager) => {
                settings.target = "ConnectionManager".to_owned();
                (
                    Backend::Redis(
                        open::from_manager(manager, settings.fence_retention, settings.coalesce)
                            .conditional_commands(settings.conditional_commands),
                    ),
                    Wakeups::off(),
                )
            }
            Target::Redlock(urls) => {
                let node_timeout = self.node_timeout.unwrap_or(Duration::from_millis(100));
                let (backend, name) = open::redlock(&urls, &connect, node_timeout)?;
                settings.target = name;
                (Backend::Quorum(backend), Wakeups::off())
            }
            Target::Cluster(urls) => {
                let (backend, name) = open::cluster(&urls, &connect)?;
                let wakeups = Wakeups::sharded(backend.subscriber_nodes());
                settings.target = name;
                (Backend::Cluster(std::sync::Arc::new(backend)), wakeups)
            }
            Target::Sentinel { urls, master } => {
                let follow = self.sentinel_announcements.unwrap_or(true);
                let (backend, name) = open::sentinel(&urls, &master, &connect, follow)?;
                let backend = std::sync::Arc::new(backend);
                let following = std::sync::Arc::downgrade(&backend);
                // The subscriber connects to whichever server is primary.
                let wakeups = Wakeups::following(crate::store::subscribe::Follow {
                    resolve: std::sync::Arc::new(move || {
                        following.upgrade().and_then(|b| b.primary_client())
                    }),
                    switches: backend.switches(),
                });
                settings.target = name;
                (Backend::Sentinel(backend), wakeups)
            }
        };
        Ok(LockClient::from_core(Core::new(backend, settings, wakeups)))
    }
}

mod checks;
#[cfg(test)]
mod tests;
