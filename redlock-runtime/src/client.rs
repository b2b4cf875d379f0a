//! [`LockClient`], its builder, and the [`LockRequest`] that acquires a lock.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bb8::Pool;
use bb8_redis::RedisConnectionManager;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::backend::conn::{Lane, Source};
use crate::backend::memory::MemoryBackend;
use crate::backend::quorum::{Node, QuorumBackend};
use crate::backend::redis::{LastError, RedisBackend, Replicas};
use crate::backend::{AcquireReply, Backend, Keys, OpError};
use crate::backoff::{RetryPolicy, next_sleep};
use crate::error::{ConfigError, LockError, Operation};
use crate::giveback::PendingAcquire;
use crate::guard::{Hold, LockGuard, Taken};
use crate::scope::{OnLost, Scope};
use crate::telemetry::{self, AcquireEnd, Labels};
use crate::util::{MAX_PREFIX_LEN, redact_url, scrub, validate_key, validate_ttl, validate_wait};
use crate::wakeups::{Wakeups, Watch};
use crate::watchdog::Watchdog;

/// The shortest time an acquire attempt is given while waiting, even when
/// less of the wait is left: a shorter limit could never see an answer.
const MIN_ATTEMPT: Duration = Duration::from_millis(50);

/// A handle to a lock store: one Redis server (over a `bb8-redis` pool) or
/// process memory.
///
/// Cheap to clone: clones share the pool. `Debug` shows the Redis URL with
/// its password redacted.
///
/// ```no_run
/// # async fn demo() -> Result<(), redlock_runtime::LockError> {
/// use std::time::Duration;
/// use redlock_runtime::LockClient;
///
/// let client = LockClient::connect("redis://127.0.0.1:6379").await?;
/// let guard = client
///     .lock("order:42")
///     .ttl(Duration::from_secs(15))
///     .wait(Duration::from_secs(5))
///     .acquire()
///     .await?;
/// // ... critical section; pass guard.fencing_token() to the store you write to ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    settings: Settings,
    watchdog: Watchdog,
    wakeups: Wakeups,
}

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// What the client talks to, safe to print (password redacted).
    pub(crate) target: String,
    pub(crate) key_prefix: String,
    pub(crate) default_ttl: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    /// How long a fencing counter outlives its key's last acquire.
    pub(crate) fence_retention: Duration,
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner.settings;
        f.debug_struct("LockClient")
            .field("target", &s.target)
            .field("key_prefix", &s.key_prefix)
            .field("default_ttl", &s.default_ttl)
            .field("command_timeout", &s.command_timeout)
            .field("retry", &s.retry)
            .finish()
    }
}

impl LockClient {
    /// Connects to the Redis server at `url` with default settings, and checks
    /// that it answers.
    ///
    /// # Errors
    /// [`LockError::Config`] for a URL that does not parse,
    /// [`LockError::Connect`] when Redis cannot be reached within the
    /// connection timeout (2 s).
    pub async fn connect(url: impl Into<String>) -> Result<Self, LockError> {
        Self::builder().url(url).build().await
    }

    /// A Redlock client over independent Redis masters (3 or 5) with
    /// default settings, checking that a majority answers. See
    /// [`LockClientBuilder::redlock`].
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad URL or node list,
    /// [`LockError::Connect`] when no majority of the nodes answers.
    pub async fn redlock<I, S>(urls: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder().redlock(urls).build().await
    }

    /// A builder for a client with settings of your own.
    pub fn builder() -> LockClientBuilder {
        LockClientBuilder::default()
    }

    /// A client over a `bb8-redis` pool you built yourself, with default
    /// settings otherwise (use [`LockClientBuilder::pool`] to change them).
    ///
    /// The pool stays shareable: the client checks a connection out only to
    /// clone its multiplexed handle, and returns it at once.
    pub fn from_pool(pool: Pool<RedisConnectionManager>) -> Self {
        let settings = Settings::defaults("bb8 pool".to_owned());
        let slots = usize::try_from(pool.config().max_size).unwrap_or(1);
        let lane = Lane::new(Source::Shared(pool), slots, LastError::default());
        Self::with_backend(
            Backend::Redis(RedisBackend::new(lane, None, settings.fence_retention)),
            settings,
            Wakeups::off(),
        )
    }

    /// A client that keeps locks in this process's memory.
    ///
    /// Same semantics as on Redis (ttl, wait, fencing tokens, watchdog, lost
    /// locks), but nothing is shared with other processes: for single-process
    /// services and for your own unit tests.
    pub fn in_memory() -> Self {
        Self::with_backend(
            Backend::Memory(MemoryBackend::new(DEFAULT_FENCE_RETENTION)),
            Settings::defaults("in-memory".to_owned()),
            Wakeups::local(),
        )
    }

    fn with_backend(backend: Backend, settings: Settings, wakeups: Wakeups) -> Self {
        Self {
            inner: Arc::new(Inner {
                backend,
                settings,
                watchdog: Watchdog::default(),
                wakeups,
            }),
        }
    }

    pub(crate) fn wakeups(&self) -> &Wakeups {
        &self.inner.wakeups
    }

    /// Starts a request for the lock named `key` (the client's key prefix is
    /// added in Redis). Set `.ttl(..)` and `.wait(..)`, then call
    /// [`acquire`](LockRequest::acquire) or
    /// [`try_acquire`](LockRequest::try_acquire).
    ///
    /// A key is any non-empty string of at most 1024 bytes; others fail with
    /// [`LockError::InvalidKey`] when the request runs.
    pub fn lock(&self, key: impl Into<String>) -> LockRequest {
        LockRequest {
            client: self.clone(),
            key: key.into(),
            ttl: None,
            wait: Duration::ZERO,
            watchdog: true,
            hold_at_least: None,
            on_lost: OnLost::Cancel,
            fair: false,
            label: None,
        }
    }

    /// The underlying pool, when the client is on Redis.
    pub fn pool(&self) -> Option<&Pool<RedisConnectionManager>> {
        match &self.inner.backend {
            Backend::Redis(b) => Some(b.pool()),
            Backend::Memory(_) | Backend::Quorum(_) => None,
        }
    }

    /// Where this client keeps its locks: `"redis"` (one Redis, with or
    /// without replicas), `"redlock"` (a quorum of independent nodes) or
    /// `"memory"` (this process). The same as the `backend` label of the
    /// [metrics](crate::metrics).
    pub fn backend_name(&self) -> &'static str {
        crate::telemetry::backend_name(self.backend())
    }

    /// What this client talks to, safe to print: the Redis URL with its
    /// password redacted ([`redact_url`](crate::redact_url)),
    /// `redlock[url, url, ..]`, `bb8 pool` or `in-memory`.
    pub fn target(&self) -> &str {
        &self.settings().target
    }

    /// The prefix added to every key in Redis. Defaults to `lock:`.
    pub fn key_prefix(&self) -> &str {
        &self.inner.settings.key_prefix
    }

    /// The ttl of requests that set none. Defaults to 30 s.
    pub fn default_ttl(&self) -> Duration {
        self.inner.settings.default_ttl
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// True when `other` is this client or a clone of it (one lock owner).
    pub(crate) fn same_client(&self, other: &LockClient) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.inner.watchdog
    }

    /// How many locks this client (and its clones) currently hold and watch.
    pub fn held_locks(&self) -> usize {
        self.inner.watchdog.watched()
    }

    /// How many renewal round trips the watchdog has sent so far: all locks
    /// due together are renewed in one.
    pub fn renewal_round_trips(&self) -> u64 {
        self.inner.watchdog.round_trips()
    }

    /// Turns a backend failure into the public error for `key` and `op`.
    pub(crate) fn op_error(key: &str, op: Operation, e: OpError) -> LockError {
        let key = key.to_owned();
        match e {
            OpError::Redis(source) => LockError::Redis { key, op, source },
            OpError::Timeout(timeout) => LockError::Timeout { key, op, timeout },
            OpError::Pool {
                timeout,
                last_error,
            } => LockError::Pool {
                key,
                op,
                timeout,
                last_error,
            },
            OpError::Replicas {
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
            OpError::Quorum(failure) => LockError::Quorum {
                key,
                op,
                detail: failure.into_detail(),
            },
            // Only a Redlock node answers this, and the quorum backend turns
            // it into a node failure; kept whole should it ever surface.
            OpError::Restarted { left } => LockError::Redis {
                key,
                op,
                source: redis::RedisError::from(std::io::Error::other(format!(
                    "the node started less than the restart delay ago; it grants again in \
                     {left:?}"
                ))),
            },
        }
    }
}

impl Settings {
    fn defaults(target: String) -> Self {
        Self {
            target,
            key_prefix: "lock:".to_owned(),
            default_ttl: Duration::from_secs(30),
            command_timeout: Duration::from_millis(500),
            retry: RetryPolicy::default(),
            fence_retention: DEFAULT_FENCE_RETENTION,
        }
    }
}

/// The default [`LockClientBuilder::fencing_retention`]: a day.
const DEFAULT_FENCE_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Settings for a [`LockClient`]; made by [`LockClient::builder`].
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
pub struct LockClientBuilder {
    url: Option<String>,
    pool: Option<Pool<RedisConnectionManager>>,
    redlock: Option<Vec<String>>,
    node_timeout: Duration,
    restart_delay: Option<Duration>,
    replicas: Option<Replicas>,
    require_noeviction: bool,
    pool_size: u32,
    connection_timeout: Duration,
    settings: Settings,
}

impl fmt::Debug for LockClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClientBuilder")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("pool", &self.pool.as_ref().map(|_| "bb8 pool"))
            .field(
                "redlock",
                &self
                    .redlock
                    .as_ref()
                    .map(|urls| urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>()),
            )
            .field("node_timeout", &self.node_timeout)
            .field("restart_delay", &self.restart_delay)
            .field("replicas", &self.replicas)
            .field("require_noeviction", &self.require_noeviction)
            .field("pool_size", &self.pool_size)
            .field("connection_timeout", &self.connection_timeout)
            .field("key_prefix", &self.settings.key_prefix)
            .field("default_ttl", &self.settings.default_ttl)
            .field("command_timeout", &self.settings.command_timeout)
            .field("retry", &self.settings.retry)
            .finish()
    }
}

impl Default for LockClientBuilder {
    fn default() -> Self {
        Self {
            url: None,
            pool: None,
            redlock: None,
            node_timeout: Duration::from_millis(100),
            restart_delay: None,
            replicas: None,
            require_noeviction: false,
            pool_size: 4,
            connection_timeout: Duration::from_secs(2),
            settings: Settings::defaults(String::new()),
        }
    }
}

impl LockClientBuilder {
    /// The Redis server, as `redis://[user:password@]host[:port][/db]`
    /// (`rediss://` needs the `redis` crate's TLS features).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Use this `bb8-redis` pool instead of building one from a URL. It stays
    /// shareable: the client checks connections out only to clone their
    /// multiplexed handles. `pool_size` and `connection_timeout` are then the
    /// pool's own.
    pub fn pool(mut self, pool: Pool<RedisConnectionManager>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Redlock: one lock over these independent Redis masters (3 or 5,
    /// an odd number; not replicas of each other), held while a majority
    /// holds it. See the crate docs, "Which mode do I need".
    ///
    /// Everything else works as with one Redis (wait, watchdog, guards,
    /// `run`, the attribute), except [`LockRequest::fair`]. Fencing tokens
    /// stay strictly increasing across holders: each acquire raises the
    /// counter on a majority to the largest it saw.
    pub fn redlock<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.redlock = Some(urls.into_iter().map(Into::into).collect());
        self
    }

    /// Redlock: how long to wait for each node's answer. A node that does
    /// not answer in time counts as failed; the acquire does not wait longer
    /// than this (nor than a tenth of the ttl) for a slow or hung node.
    /// Defaults to 100 ms.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
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
    /// client first meets it also waits it out. See the crate docs,
    /// "Restarted nodes". Defaults to none.
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
    /// open). Each is multiplexed, so a few carry thousands of concurrent lock
    /// operations. Defaults to 4.
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// How long to wait for a new connection (connect and check it) before
    /// an operation fails with [`LockError::Pool`]. Defaults to 2 s.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
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
    /// Redis's clock in microseconds; see the crate docs, "Fencing
    /// tokens"), so a counter need not live forever: a service that locks
    /// per order id leaves no key behind this long after the last lock of
    /// each. At least a second, and longer than the clock skew between
    /// Redlock nodes. Defaults to a day.
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
        self.require_noeviction = require;
        self
    }

    /// Pacing of retries while waiting for a busy lock. Defaults to
    /// [`RetryPolicy::default`] (10 ms doubling to 200 ms, full jitter).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.settings.retry = policy;
        self
    }

    fn validate(&self) -> Result<(), ConfigError> {
        validate_ttl("default_ttl", self.settings.default_ttl)?;
        let prefix_len = self.settings.key_prefix.len();
        if prefix_len > MAX_PREFIX_LEN {
            return Err(ConfigError::PrefixTooLong {
                len: prefix_len,
                max: MAX_PREFIX_LEN,
            });
        }
        for (name, value) in [
            ("command_timeout", self.settings.command_timeout),
            ("connection_timeout", self.connection_timeout),
        ] {
            if value < Duration::from_millis(1) {
                return Err(ConfigError::InvalidDuration {
                    name,
                    value,
                    reason: "must be at least 1 ms",
                });
            }
        }
        if self.pool_size == 0 {
            return Err(ConfigError::ZeroPoolSize);
        }
        let retention = self.settings.fence_retention;
        if retention < Duration::from_secs(1) {
            return Err(ConfigError::InvalidDuration {
                name: "fencing_retention",
                value: retention,
                reason: "must be at least 1 s (and longer than the clock skew between Redlock \
                         nodes)",
            });
        }
        validate_ttl("fencing_retention", retention)?;
        if self.node_timeout < Duration::from_millis(1) {
            return Err(ConfigError::InvalidDuration {
                name: "node_timeout",
                value: self.node_timeout,
                reason: "must be at least 1 ms",
            });
        }
        if let Some(r) = self.replicas
            && (r.count == 0 || r.timeout.is_zero())
        {
            return Err(ConfigError::InvalidDuration {
                name: "replicas timeout",
                value: r.timeout,
                reason: "`.replicas(count, timeout)` needs a count and a timeout above zero",
            });
        }
        self.settings.retry.validate()
    }

    /// Builds the client and checks that Redis answers, is version 6.2 or
    /// newer, and does not evict keys (see
    /// [`require_noeviction`](Self::require_noeviction)).
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad setting, [`LockError::Connect`] when
    /// Redis cannot be reached within the connection timeout.
    pub async fn build(self) -> Result<LockClient, LockError> {
        let connection_timeout = self.connection_timeout;
        let require_noeviction = self.require_noeviction;
        let client = self.build_unchecked()?;
        if let Backend::Quorum(backend) = client.backend() {
            backend.check().await.map_err(|e| LockError::Connect {
                url: client.settings().target.clone(),
                detail: match e {
                    OpError::Quorum(failure) => failure.into_detail().to_string(),
                    other => format!("{other:?}"),
                },
            })?;
        }
        if let Backend::Redis(backend) = client.backend() {
            backend.check().await.map_err(|e| LockError::Connect {
                url: client.settings().target.clone(),
                detail: match e {
                    OpError::Redis(e) => e.to_string(),
                    OpError::Pool {
                        last_error: Some(last),
                        ..
                    } => last,
                    OpError::Pool { .. } | OpError::Timeout(_) => {
                        format!("no answer within {connection_timeout:?}")
                    }
                    OpError::Replicas { .. } | OpError::Quorum(_) | OpError::Restarted { .. } => {
                        "no answer".to_owned()
                    }
                },
            })?;
        }
        let target = client.settings().target.clone();
        if let Some((target, version)) = client.backend().too_old_servers(&target).await.pop() {
            return Err(ConfigError::ServerTooOld { target, version }.into());
        }
        for (target, policy) in client.backend().eviction_policies(&target).await {
            let Some(policy) = policy else {
                tracing::debug!(target: "redlock", %target, "could not read maxmemory-policy (CONFIG is disabled?); make sure Redis does not evict lock keys");
                continue;
            };
            if require_noeviction {
                return Err(ConfigError::EvictingPolicy { target, policy }.into());
            }
            tracing::warn!(target: "redlock", %target, %policy, "Redis may evict lock keys under memory pressure (maxmemory with maxmemory-policy {policy}): a lock evicted while held can be taken by a second owner; set maxmemory-policy noeviction");
        }
        Ok(client)
    }

    /// Builds the client without contacting Redis; connections are made on
    /// first use.
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad setting or URL.
    pub fn build_unchecked(self) -> Result<LockClient, LockError> {
        self.validate()?;
        if self.redlock.is_some() {
            return self.build_redlock();
        }
        let mut settings = self.settings;
        // The URL, when given, also opens the wake-up subscriber connection.
        let url = match self.url {
            Some(url) => Some(open_url(&url)?),
            None => None,
        };
        let wakeups = match &url {
            Some((client, _)) => Wakeups::subscriber(client.clone()),
            None => Wakeups::off(),
        };
        let slots = usize::try_from(self.pool_size).unwrap_or(1);
        let (plain, waiting) = match (self.pool, url) {
            (Some(pool), _) => {
                settings.target = "bb8 pool".to_owned();
                let slots = usize::try_from(pool.config().max_size).unwrap_or(1);
                // WAIT blocks its connection: with replicas, keep a few of
                // the user's pool's connections for it alone.
                let waiting = self.replicas.map(|r| {
                    let lane = Lane::new(
                        Source::Exclusive(pool.clone()),
                        slots.div_ceil(2),
                        LastError::default(),
                    );
                    (lane, r)
                });
                let plain = Lane::new(Source::Shared(pool), slots, LastError::default());
                (plain, waiting)
            }
            (None, Some((client, redacted))) => {
                let (pool, last_error) =
                    open_pool(&client, &redacted, self.pool_size, self.connection_timeout)?;
                let waiting = match self.replicas {
                    Some(r) => {
                        let (pool, last_error) =
                            open_pool(&client, &redacted, self.pool_size, self.connection_timeout)?;
                        Some((Lane::new(Source::Shared(pool), slots, last_error), r))
                    }
                    None => None,
                };
                settings.target = redacted;
                (Lane::new(Source::Shared(pool), slots, last_error), waiting)
            }
            (None, None) => return Err(ConfigError::MissingRedis.into()),
        };
        let backend = RedisBackend::new(plain, waiting, settings.fence_retention);
        Ok(LockClient::with_backend(
            Backend::Redis(backend),
            settings,
            wakeups,
        ))
    }

    fn build_redlock(self) -> Result<LockClient, LockError> {
        let urls = self.redlock.clone().unwrap_or_default();
        let invalid = |reason: String| LockError::Config(ConfigError::InvalidNodes { reason });
        if self.url.is_some() || self.pool.is_some() {
            return Err(invalid(
                "give either `.redlock(urls)` or `.url(..)`/`.pool(..)`, not both".to_owned(),
            ));
        }
        if urls.len() < 3 {
            return Err(invalid(format!(
                "{} node(s) given; Redlock needs at least 3 independent Redis masters (5 tolerate \
                 2 failures); for one Redis use `.url(..)`",
                urls.len()
            )));
        }
        let mut nodes = Vec::with_capacity(urls.len());
        let mut seen: Vec<String> = Vec::new();
        for url in &urls {
            let (client, redacted) = open_url(url)?;
            let info = client.get_connection_info();
            let address = format!("{}/{}", info.addr(), info.redis_settings().db());
            if seen.contains(&address) {
                return Err(invalid(format!(
                    "{redacted} is listed twice; each node must be a different Redis, or one \
                     server would count twice toward the majority"
                )));
            }
            seen.push(address);
            nodes.push(Node {
                backend: self.node_backend(&client, &redacted)?,
                name: redacted,
            });
        }
        let mut settings = self.settings;
        settings.target = format!(
            "redlock[{}]",
            nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let backend = QuorumBackend::new(nodes, self.node_timeout);
        Ok(LockClient::with_backend(
            Backend::Quorum(backend),
            settings,
            Wakeups::off(),
        ))
    }

    /// One Redlock node: its lanes (learning the node's start time when a
    /// restart delay applies) and settings.
    fn node_backend(
        &self,
        client: &redis::Client,
        redacted: &str,
    ) -> Result<RedisBackend, ConfigError> {
        let slots = usize::try_from(self.pool_size).unwrap_or(1);
        let lane = |pool, last_error| {
            let lane = Lane::new(Source::Shared(pool), slots, last_error);
            if self.restart_delay.is_some() {
                lane.learning_boot_time()
            } else {
                lane
            }
        };
        let (pool, last_error) =
            open_pool(client, redacted, self.pool_size, self.connection_timeout)?;
        let plain = lane(pool, last_error);
        let waiting = match self.replicas {
            Some(r) => {
                let (pool, last_error) =
                    open_pool(client, redacted, self.pool_size, self.connection_timeout)?;
                Some((lane(pool, last_error), r))
            }
            None => None,
        };
        Ok(
            RedisBackend::new(plain, waiting, self.settings.fence_retention)
                .with_restart_delay(self.restart_delay),
        )
    }

    /// Builds a client that keeps locks in memory (see
    /// [`LockClient::in_memory`]), with this builder's key prefix, ttl,
    /// timeouts and retry policy. URL and pool settings are ignored.
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad setting.
    pub fn build_in_memory(self) -> Result<LockClient, LockError> {
        self.validate()?;
        let mut settings = self.settings;
        settings.target = "in-memory".to_owned();
        Ok(LockClient::with_backend(
            Backend::Memory(MemoryBackend::new(settings.fence_retention)),
            settings,
            Wakeups::local(),
        ))
    }
}

/// Parses a Redis URL; the error, and the name returned with the client,
/// show the URL with its password redacted.
fn open_url(url: &str) -> Result<(redis::Client, String), ConfigError> {
    let redacted = redact_url(url);
    let client = redis::Client::open(url).map_err(|e| ConfigError::InvalidUrl {
        url: redacted.clone(),
        reason: scrub(&e.to_string(), url),
    })?;
    Ok((client, redacted))
}

/// A pool of `size` connections to `client`'s server, all kept open, and
/// the sink that remembers its last connection error.
fn open_pool(
    client: &redis::Client,
    redacted: &str,
    size: u32,
    connection_timeout: Duration,
) -> Result<(Pool<RedisConnectionManager>, LastError), ConfigError> {
    let manager =
        RedisConnectionManager::new(client.get_connection_info().clone()).map_err(|e| {
            ConfigError::InvalidUrl {
                url: redacted.to_owned(),
                reason: e.to_string(),
            }
        })?;
    let last_error = LastError::default();
    // FIFO (bb8's default) with every connection kept idle makes successive
    // check-outs hand out distinct connections.
    let pool = Pool::builder()
        .max_size(size)
        .min_idle(Some(size))
        .connection_timeout(connection_timeout)
        .error_sink(Box::new(last_error.clone()))
        .build_unchecked(manager);
    Ok((pool, last_error))
}

/// A request for one lock, made by [`LockClient::lock`]: set the lease and
/// the wait, then acquire.
#[must_use = "a lock request does nothing until `.acquire()` or `.try_acquire()` is awaited"]
#[derive(Debug, Clone)]
pub struct LockRequest {
    client: LockClient,
    key: String,
    ttl: Option<Duration>,
    wait: Duration,
    watchdog: bool,
    hold_at_least: Option<Duration>,
    on_lost: OnLost,
    fair: bool,
    label: Option<Arc<str>>,
}

impl LockRequest {
    /// The lease: how long the lock outlives its holder if the holder dies.
    /// While the guard lives, the watchdog renews the lease every `ttl / 3`.
    /// Defaults to the client's default ttl (30 s). Must be at least 1 ms.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// How long to keep trying while another owner holds the lock.
    /// Defaults to zero: try once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Whether a watchdog renews the lease while the guard lives. Defaults
    /// to `true`. Without it the ttl is a hard limit: the lock is presumed
    /// lost (and [`LockGuard::lost`] fires) when the lease runs out.
    pub fn watchdog(mut self, renew: bool) -> Self {
        self.watchdog = renew;
        self
    }

    /// Keep other owners out for at least this long after the acquire, even
    /// when the work ends sooner (ShedLock's `lockAtLeastFor`): releasing
    /// then shortens the lease to what is left of the minimum instead of
    /// deleting the lock. Measured on Redis's clock (`TIME` at acquire and at
    /// release), never on an application node's; with Redlock, whose nodes'
    /// clocks are not compared, on this process's monotonic clock instead.
    /// For jobs deduplicated across nodes whose clocks differ: a node whose
    /// tick comes a little late still finds the lock held. Defaults to none.
    pub fn hold_at_least(mut self, hold: Duration) -> Self {
        self.hold_at_least = Some(hold);
        self
    }

    /// Serve waiters in arrival order (Redisson's FairLock).
    ///
    /// Waiters queue in Redis (a list beside the lock, with each waiter's
    /// presence in a sorted set). The lock goes to the first live waiter, and
    /// a release wakes exactly that waiter. A waiter keeps its place while it
    /// keeps asking: it asks again on every wake-up and backoff step, and
    /// its place lasts three backoff ceilings plus one command timeout
    /// (1.1 s by default) after each ask. So a waiter that gives up (its wait
    /// ran out) or is cancelled leaves the line at once, and one whose process
    /// died leaves it within that time; neither blocks the line for longer.
    ///
    /// The default is **not** fair: the first to ask after a release wins.
    /// That needs no queue and is the fastest when locks are rarely
    /// contended, but under heavy contention a releaser that asks again at
    /// once can take the lock back over and over. Use `fair()` where waiters
    /// must not starve; every client locking a key must use the same mode
    /// (an unfair acquire does not look at the line).
    pub fn fair(mut self) -> Self {
        self.fair = true;
        self
    }

    /// What [`run`](Self::run) does with its body when the lock is lost
    /// while the body runs. Defaults to [`OnLost::Cancel`].
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// The `lock` label of this lock's metrics (with the `metrics`
    /// feature; see [`crate::metrics`]). Defaults to the key's first
    /// `:`-separated part (`order:42:A-17` → `order`); name locks whose keys
    /// have no `:`, so that each key does not become its own series.
    pub fn label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// The key as given to [`LockClient::lock`].
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Runs `body` holding the lock: acquires (waiting as
    /// [`acquire`](Self::acquire) does), runs the body, releases, and
    /// returns the body's value.
    ///
    /// - Inside the body, [`current_lock`](crate::current_lock) gives the
    ///   key, fencing token and state of the lock.
    /// - **Reentrancy**: inside a `run` scope holding key K, another `run`
    ///   (or `acquire`) of K through the same client (or a clone of it) in the
    ///   same task succeeds at once, with no Redis round trip; the lock is
    ///   released when the outermost scope ends. Ownership belongs to the
    ///   task: another task, or another client, waits as usual, and a task
    ///   started with `tokio::spawn` inside the scope is another owner (it
    ///   would wait for the lock its parent holds).
    ///   Re-entries take turns: two re-entries running at once in the same
    ///   task (`tokio::join!(a(), b())` where both lock K) never run their
    ///   bodies together; the second waits for the first as another owner
    ///   would, up to its own `wait` (with no wait it fails at once with
    ///   [`LockError::Busy`]). A reentrant guard from
    ///   [`acquire`](Self::acquire) holds its turn until it is released or
    ///   dropped. Re-entering a lock that was lost, or whose lease ran out,
    ///   fails with [`LockError::Lost`].
    /// - **Loss**: with [`OnLost::Cancel`] (the default), when the lock is
    ///   lost the body's future is dropped at its current `.await` and `run`
    ///   returns [`LockError::Lost`]; with [`OnLost::Signal`] the body runs
    ///   on and can check `current_lock()`.
    /// - A panic in the body, or dropping the `run` future, releases the lock
    ///   as dropping a guard does.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use redlock_runtime::LockClient;
    ///
    /// let locks = LockClient::in_memory();
    /// let total = locks
    ///     .lock("cart:42")
    ///     .wait(Duration::from_secs(5))
    ///     .run(async {
    ///         // A nested scope on the same key: no deadlock, no round trip.
    ///         locks.lock("cart:42").run(async { 40 + 2 }).await
    ///     })
    ///     .await??;
    /// assert_eq!(total, 42);
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); and [`LockError::Lost`] when the lock
    /// was lost while the body ran (with `OnLost::Cancel`: the body was
    /// stopped, or it finished but the release found the lock gone, so its
    /// work may have overlapped with another holder's).
    pub fn run<F: Future>(self, body: F) -> impl Future<Output = Result<F::Output, LockError>> {
        // Boxed at once: the future returned stays the same size however
        // large the body is, so nested locked calls neither multiply in
        // size nor copy bodies through the stack.
        self.run_scoped(Box::pin(body))
    }

    /// Like [`run`](Self::run), but when another owner holds the lock (at
    /// once, or for the whole wait) the body does not run and the result is
    /// `Ok(None)`, logged at debug level only. For scheduled jobs
    /// deduplicated across nodes: every node tries, one runs.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use redlock_runtime::LockClient;
    ///
    /// let locks = LockClient::in_memory();
    /// let held = locks.lock("job:nightly").acquire().await?;
    /// let ran = locks
    ///     .lock("job:nightly")
    ///     .hold_at_least(Duration::from_secs(30))
    ///     .try_run(async { "report sent" })
    ///     .await?;
    /// assert_eq!(ran, None, "another node holds the job");
    /// # drop(held);
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`run`](Self::run), less the busy cases.
    pub fn try_run<F: Future>(
        self,
        body: F,
    ) -> impl Future<Output = Result<Option<F::Output>, LockError>> {
        let scoped = self.run_scoped(Box::pin(body)); // boxed as in `run`
        async move {
            match scoped.await {
                Ok(value) => Ok(Some(value)),
                Err(e) if e.is_busy() => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    /// [`run`](Self::run): `Busy`/`WaitTimeout` when another owner kept the
    /// lock.
    async fn run_scoped<F: Future>(self, body: Pin<Box<F>>) -> Result<F::Output, LockError> {
        let busy = |key: String, wait: Duration| {
            tracing::debug!(target: "redlock", key = %key, "lock busy, body skipped");
            if wait.is_zero() {
                LockError::Busy { key }
            } else {
                LockError::WaitTimeout { key, waited: wait }
            }
        };
        if let Some(outer) = Scope::holding(&self.client, &self.key) {
            let Some(turn) = self.reenter(&outer).await? else {
                return Err(busy(self.key, self.wait));
            };
            let scope = Scope::enter(Arc::clone(&outer.shared), outer.depth + 1);
            let value = Scope::run(scope, body).await;
            drop(turn);
            return Ok(value);
        }
        let on_lost = self.on_lost;
        let (key, wait) = (self.key.clone(), self.wait);
        let guard = match self.acquire_outcome().await? {
            Outcome::Acquired(guard) => guard,
            Outcome::Busy => return Err(busy(key, wait)),
        };
        let scope = Scope::enter(Arc::clone(guard.shared()), 1);
        let body = Scope::run(scope, body).instrument(guard.span().clone());
        let value = match on_lost {
            OnLost::Cancel => {
                let lost = guard.lost();
                tokio::select! {
                    biased;
                    reason = lost => {
                        tracing::warn!(target: "redlock", key = %key, %reason, "lock lost; body cancelled");
                        let _ = guard.release().await;
                        return Err(LockError::Lost { key, reason });
                    }
                    value = body => value,
                }
            }
            OnLost::Signal => body.await,
        };
        match guard.release().await {
            Ok(()) => Ok(value),
            Err(e) if e.is_lost() && on_lost == OnLost::Cancel => Err(e),
            Err(e) => {
                // The body finished; the lease ends by itself. Signal mode
                // left the decision to the body.
                tracing::warn!(target: "redlock", key = %key, error = %e, "release after the body failed");
                Ok(value)
            }
        }
    }

    /// Takes the lock, waiting up to the request's wait while another owner
    /// holds it.
    ///
    /// While waiting, attempts are paced by the client's [`RetryPolicy`] and
    /// woken as the holder's lease ends. Each attempt is bounded by the
    /// command timeout and by what is left of the wait (but at least 50 ms),
    /// so this returns at most about 50 ms after the wait ends; with no wait,
    /// the single attempt is bounded by the command timeout. Transient Redis
    /// failures are retried while the wait lasts.
    ///
    /// # Errors
    /// [`LockError::Busy`] (no wait) or [`LockError::WaitTimeout`] when
    /// another owner held the lock; [`LockError::InvalidKey`] and
    /// [`LockError::Config`] for bad input; [`LockError::Redis`],
    /// [`LockError::Timeout`] or [`LockError::Pool`] when Redis failed (the
    /// last failure, if the wait ended on one).
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let key = self.key.clone();
        let wait = self.wait;
        match self.acquire_outcome().await? {
            Outcome::Acquired(guard) => Ok(guard),
            Outcome::Busy if wait.is_zero() => Err(LockError::Busy { key }),
            Outcome::Busy => Err(LockError::WaitTimeout { key, waited: wait }),
        }
    }

    /// Like [`acquire`](Self::acquire), but a lock still held by another
    /// owner when the wait ends (at once, with no wait) is `Ok(None)`, not an
    /// error. Redis failures are still errors.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), less the busy cases.
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, LockError> {
        Ok(match self.acquire_outcome().await? {
            Outcome::Acquired(guard) => Some(guard),
            Outcome::Busy => None,
        })
    }

    /// A re-entry into the lock `outer` holds: refused with
    /// [`LockError::Lost`] when that lock is lost, released or run out;
    /// else this task's turn among concurrent re-entries of it, waiting up
    /// to the request's wait (`None`: another re-entry kept it that long).
    async fn reenter(&self, outer: &Scope) -> Result<Option<OwnedMutexGuard<()>>, LockError> {
        if let Some(reason) = outer.shared.reentry_refused() {
            return Err(LockError::Lost {
                key: self.key.clone(),
                reason,
            });
        }
        Ok(outer.turn(self.wait).await)
    }

    /// One acquire, in its span and measured.
    async fn acquire_outcome(self) -> Result<Outcome, LockError> {
        let labels = Labels::new(self.label.as_ref(), &self.key, self.client.backend());
        let span = telemetry::acquire_span(&self.key, self.wait);
        let waited = !self.wait.is_zero();
        let started = Instant::now();
        let outcome = self
            .acquire_attempts(labels.clone())
            .instrument(span.clone())
            .await;
        let end = match &outcome {
            // A reentrant acquire touched nothing: not a new acquisition.
            Ok(Outcome::Acquired(guard)) if guard.is_reentrant() => None,
            Ok(Outcome::Acquired(guard)) => {
                span.record("fencing_token", guard.fencing_token());
                Some(AcquireEnd::Acquired)
            }
            Ok(Outcome::Busy) => Some(AcquireEnd::Busy { waited }),
            Err(e) => Some(AcquireEnd::Failed(e)),
        };
        if let Some(end) = end {
            telemetry::acquire_ended(&labels, end, started.elapsed());
        }
        outcome
    }

    async fn acquire_attempts(self, labels: Labels) -> Result<Outcome, LockError> {
        validate_key(&self.key)?;
        let settings = self.client.settings();
        let ttl = self.ttl.unwrap_or(settings.default_ttl);
        validate_ttl("ttl", ttl)?;
        validate_wait(self.wait)?;
        if let Some(hold) = self.hold_at_least {
            validate_wait(hold).map_err(|_| ConfigError::InvalidDuration {
                name: "hold_at_least",
                value: hold,
                reason: "at most 365 days is allowed",
            })?;
        }
        if self.fair && matches!(self.client.backend(), Backend::Quorum(_)) {
            return Err(ConfigError::Unsupported {
                feature: "fair()",
                reason: "a fair lock keeps its line of waiters in one Redis; with Redlock, use \
                         the default (unfair) mode",
            }
            .into());
        }
        if let Some(outer) = Scope::holding(&self.client, &self.key) {
            return Ok(match self.reenter(&outer).await? {
                Some(turn) => {
                    Outcome::Acquired(LockGuard::reentrant(Arc::clone(&outer.shared), turn))
                }
                None => Outcome::Busy,
            });
        }

        let keys = Keys::new(&settings.key_prefix, self.key);
        let token = uuid::Uuid::new_v4().to_string();
        let started = Instant::now();
        let deadline = started + self.wait;
        let mut retries = 0u32;
        // Gives back, when this future ends without a guard (gave up, failed
        // or was dropped at any await), what an attempt may have taken: the
        // lock, or a place in the fair line.
        let mut pending =
            PendingAcquire::new(self.client.clone(), keys.clone(), token.clone(), self.fair);

        // Set after the first busy answer: wakes this waiter when the key is
        // released (push), while backoff keeps polling as the fallback.
        let mut watch: Option<Watch> = None;
        let presence = settings.retry.max() * 3 + settings.command_timeout;
        let last = loop {
            let mut woken = watch
                .as_ref()
                .map(|w| Box::pin(Arc::clone(w.notify()).notified_owned()));
            if let Some(woken) = woken.as_mut() {
                // Registered before the attempt: a release published while
                // it is in flight still wakes us.
                woken.as_mut().enable();
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            let limit = if self.wait.is_zero() {
                settings.command_timeout
            } else {
                settings
                    .command_timeout
                    .min(remaining.max(MIN_ATTEMPT.min(settings.command_timeout)))
            };
            let sent = Instant::now();
            let want_time = self.hold_at_least.is_some();
            pending.sending(sent, ttl.max(if self.fair { presence } else { ttl }));
            let attempt = if self.fair {
                self.client
                    .backend()
                    .acquire_fair(&keys, &token, ttl, presence, want_time, limit)
                    .await
            } else {
                self.client
                    .backend()
                    .acquire(&keys, &token, ttl, want_time, limit)
                    .await
            };
            let (result, pttl) = match attempt {
                Ok(AcquireReply::Acquired { fence, at_ms }) => {
                    pending.took();
                    tracing::debug!(
                        target: "redlock",
                        key = %keys.user,
                        fence,
                        waited_ms = started.elapsed().as_millis() as u64,
                        retries,
                        "lock acquired"
                    );
                    return Ok(Outcome::Acquired(LockGuard::new(
                        self.client.clone(),
                        Taken {
                            keys,
                            token,
                            fence,
                            ttl,
                            sent,
                            renew: self.watchdog,
                            fair: self.fair,
                            labels,
                            hold: self
                                .hold_at_least
                                .zip(at_ms)
                                .map(|(min, at_ms)| Hold { at_ms, min }),
                        },
                    )));
                }
                Ok(AcquireReply::Busy { pttl }) => {
                    pending.answered(false);
                    (Ok(()), pttl)
                }
                Err(e) => {
                    pending.answered(e.outcome_unknown());
                    if !e.is_transient() {
                        break Err(e);
                    }
                    tracing::debug!(target: "redlock", key = %keys.user, error = ?e, "acquire attempt failed");
                    (Err(e), None)
                }
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break result;
            }
            if retries == 0 {
                tracing::debug!(target: "redlock", key = %keys.user, wait_ms = self.wait.as_millis() as u64, "lock busy, waiting");
                if result.is_ok() {
                    woken = None;
                    watch = self
                        .client
                        .wakeups()
                        .watch(
                            &keys.lock,
                            self.fair.then_some(token.as_str()),
                            remaining.min(MIN_ATTEMPT),
                        )
                        .await;
                    if watch.is_some() {
                        // A release may have come before we subscribed: look
                        // again at once, now that none can be missed.
                        retries = 1;
                        continue;
                    }
                }
            }
            let sleep = next_sleep(&settings.retry, retries, pttl, remaining);
            retries = retries.saturating_add(1);
            match woken {
                Some(woken) => {
                    tokio::select! {
                        () = tokio::time::sleep(sleep) => {}
                        () = woken => {}
                    }
                }
                None => tokio::time::sleep(sleep).await,
            }
        };
        // Dropped here: anything an attempt may hold is given back.
        drop(pending);
        match last {
            Ok(()) => Ok(Outcome::Busy),
            Err(e) => Err(LockClient::op_error(&keys.user, Operation::Acquire, e)),
        }
    }
}

enum Outcome {
    Acquired(LockGuard),
    Busy,
}
