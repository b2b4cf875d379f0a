//! The constructors of [`LockClient`]: one line for the common cases, and
//! [`LockClient::builder`] for the rest.

use bb8::Pool;
use bb8_redis::RedisConnectionManager;
use redis::aio::ConnectionManager;

use crate::backend::Backend;
use crate::builder::{LockClientBuilder, memory};
use crate::client::LockClient;
use crate::core::{Core, Settings};
use crate::error::LockError;
use crate::store::open;
use crate::store::subscribe::Wakeups;

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

    /// A Redis Cluster client with default settings, from one or more of
    /// its nodes, checking that they are in cluster mode and answer. See
    /// [`LockClientBuilder::cluster`].
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad URL, an empty or repeated node, or a
    /// node not in cluster mode; [`LockError::Connect`] when no node
    /// answers.
    pub async fn cluster<I, S>(urls: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder().cluster(urls).build().await
    }

    /// A client of the primary that the Sentinels at `urls` monitor as
    /// `master`, with default settings, checking that they know it and it
    /// answers. See [`LockClientBuilder::sentinel`].
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad URL, an empty or repeated Sentinel,
    /// or a master name no Sentinel knows; [`LockError::Connect`] when no
    /// Sentinel or no primary answers.
    pub async fn sentinel<I, S>(urls: I, master: impl Into<String>) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder().sentinel(urls, master).build().await
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
        let backend = open::from_pool(pool, None, settings.fence_retention, settings.coalesce);
        Self::from_core(Core::new(Backend::Redis(backend), settings, Wakeups::off()))
    }

    /// A client over a redis-rs [`ConnectionManager`] your service already
    /// has, with default settings otherwise (use
    /// [`LockClientBuilder::connection_manager`] to change them, and read
    /// there which connection to choose).
    pub fn from_connection_manager(manager: ConnectionManager) -> Self {
        let settings = Settings::defaults("ConnectionManager".to_owned());
        let backend = open::from_manager(manager, settings.fence_retention, settings.coalesce);
        Self::from_core(Core::new(Backend::Redis(backend), settings, Wakeups::off()))
    }

    /// A client that keeps locks in this process's memory.
    ///
    /// Same semantics as on Redis (ttl, wait, fencing tokens, watchdog, lost
    /// locks), but nothing is shared with other processes: for single-process
    /// services and for your own unit tests.
    pub fn in_memory() -> Self {
        memory(Settings::defaults("in-memory".to_owned()))
    }
}
