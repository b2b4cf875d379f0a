//! [`LockClient`]: the public handle. It only delegates: requests to
//! [`LockRequest`], construction to the builder (`builder.rs`), everything
//! shared to the client's core.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bb8::Pool;
use bb8_redis::RedisConnectionManager;

use crate::backend::Mode;
use crate::core::Core;
use crate::held::HeldLease;
use crate::latch::Latch;
use crate::multi::MultiLock;
use crate::ping::NodeStatus;
use crate::request::LockRequest;
use crate::rwlock::RwLock;
use crate::semaphore::Semaphore;
use crate::shutdown::Shutdown;

/// A handle to a lock store: one Redis server (over a `bb8-redis` pool), a
/// Redlock quorum of them, or process memory.
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
/// // ... critical section; pass guard.fencing_token().await? to the store you write to ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    core: Arc<Core>,
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.core.settings();
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
    pub(crate) fn from_core(core: Arc<Core>) -> Self {
        Self { core }
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Starts a request for the lock named `key` (the client's key prefix is
    /// added in Redis). Set `.ttl(..)` and `.wait(..)`, then call
    /// [`acquire`](LockRequest::acquire) or
    /// [`try_acquire`](LockRequest::try_acquire).
    ///
    /// A key is any non-empty string of at most 1024 bytes; others fail with
    /// [`LockError::InvalidKey`](crate::LockError::InvalidKey) when the
    /// request runs.
    pub fn lock(&self, key: impl Into<String>) -> LockRequest {
        LockRequest::new(Arc::clone(&self.core), key.into())
    }

    /// A read/write lock named `key` (its keys in Redis are apart from a
    /// lock's of the same name): many readers or one writer, writers
    /// first. See [`RwLock`].
    pub fn rw_lock(&self, key: impl Into<String>) -> RwLock {
        RwLock::new(Arc::clone(&self.core), key.into())
    }

    /// A request for permits of the semaphore named `key`, which lets at
    /// most `limit` permits be held at once; every caller of one semaphore
    /// must pass the same limit. See [`Semaphore`].
    pub fn semaphore(&self, key: impl Into<String>, limit: u32) -> Semaphore {
        Semaphore::new(Arc::clone(&self.core), key.into(), limit)
    }

    /// The countdown latch named `key`. See [`Latch`].
    pub fn latch(&self, key: impl Into<String>) -> Latch {
        Latch::new(Arc::clone(&self.core), key.into())
    }

    /// A request for the locks of all `keys` at once (the same locks as
    /// [`lock`](Self::lock)'s), without deadlock. See [`MultiLock`].
    pub fn multi_lock<I, K>(&self, keys: I) -> MultiLock
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        MultiLock::new(
            Arc::clone(&self.core),
            keys.into_iter().map(Into::into).collect(),
        )
    }

    /// Who holds the lock named `key`, since when, for how long, and the
    /// last fencing token issued; in fair mode how many wait; and the
    /// holders of the read/write lock and semaphore of the same name. One
    /// round trip (on Redlock, to every node: what a majority agree on),
    /// reading only. Never shows an owner token.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use redlock_runtime::LockClient;
    ///
    /// let locks = LockClient::builder().in_memory().client_name("billing-7").build().await?;
    /// let guard = locks.lock("job:invoices").acquire().await?;
    /// let info = locks.inspect("job:invoices").await?;
    /// let holder = info.holder.expect("held");
    /// assert_eq!(holder.client_name.as_deref(), Some("billing-7"));
    /// assert!(holder.ttl_left.is_some());
    /// guard.release().await?;
    /// assert!(!locks.inspect("job:invoices").await?.is_held());
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`LockError::InvalidKey`](crate::LockError::InvalidKey) for a bad
    /// key; Redis failures as for an acquire.
    pub async fn inspect(&self, key: &str) -> Result<crate::LockInfo, crate::LockError> {
        crate::inspect::inspect(&self.core, key).await
    }

    /// The break-glass for a lock whose holder is stuck: ends the lock and
    /// the read/write lock named `key`, whoever holds them, raises their
    /// fencing counters so every later token is above the ended holders',
    /// and wakes their waiters. The ended holders' guards learn it at
    /// their next renewal (within a third of their ttl) or release: their
    /// [`lost()`](crate::LockGuard::lost) and errors say
    /// [`LostReason::EndedByOperator`](crate::LostReason::EndedByOperator),
    /// and their work may still be running, which is what fencing tokens
    /// are for. Logged at warn level with this client's name.
    ///
    /// A semaphore's permits are not ended: each holder's lease runs out
    /// by itself. On Redlock it runs on every node and succeeds when a
    /// majority did.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use redlock_runtime::{LockClient, LostReason};
    ///
    /// let locks = LockClient::in_memory();
    /// let stuck = locks.lock("job:invoices").acquire().await?;
    /// let token = stuck.fencing_token().await?;
    ///
    /// let operator = locks.force_release("job:invoices").await?;
    /// assert_eq!(operator.ended.len(), 1);
    /// assert!(operator.fencing_token > Some(token));
    /// let next = locks.lock("job:invoices").acquire().await?;
    /// assert!(next.fencing_token().await? > token);
    /// assert_eq!(stuck.extend(std::time::Duration::from_secs(5)).await.unwrap_err().to_string(),
    ///     "lock `job:invoices` was lost: an operator ended the lease (force_release); work done \
    ///      under it may have overlapped with another holder, so guard writes with the fencing token");
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`LockError::InvalidKey`](crate::LockError::InvalidKey) for a bad
    /// key; Redis failures as for an acquire (the release may have run:
    /// run it again, it ends nothing twice).
    pub async fn force_release(&self, key: &str) -> Result<crate::ForceReleased, crate::LockError> {
        crate::force::force_release(&self.core, key).await
    }

    /// Asks every node of the topology (the one Redis, each Redlock node,
    /// each Cluster master, Sentinel's primary) for its role, at once,
    /// each within the command timeout: for a readiness probe. Each
    /// status says the node (no password), its role (a primary and its
    /// replicas, or a replica: the wrong node to write locks to) and the
    /// round trip's time.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redlock_runtime::LockError> {
    /// let locks = redlock_runtime::LockClient::in_memory();
    /// for node in locks.ping().await? {
    ///     println!("{node}"); // memory: in memory, 0.0ns
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`LockError::NodeDown`](crate::LockError::NodeDown) naming the
    /// first node that did not answer (and how many others did not);
    /// [`LockError::ShutDown`](crate::LockError::ShutDown) (with an empty
    /// key) once the client was [shut down](Self::shutdown), without asking.
    pub async fn ping(&self) -> Result<Vec<NodeStatus>, crate::LockError> {
        crate::ping::ping(&self.core).await
    }

    /// Ends this client gracefully, within `timeout`: from now on it takes
    /// nothing new (every operation fails with
    /// [`LockError::ShutDown`](crate::LockError::ShutDown), and acquires
    /// that wait give up at once, giving back what they may have taken);
    /// renewals stop; every lock, read or write lock, permit and
    /// idempotency record this client (and its clones) holds is released,
    /// its guard's [`lost`](crate::LockGuard::lost) completing first with
    /// [`LostReason::ClientShutDown`](crate::LostReason::ClientShutDown)
    /// (so a body run under it is cancelled); and the background work
    /// (give-backs, releases of dropped guards) is waited for. Another
    /// process can take the locks at once, instead of after their leases.
    ///
    /// What the report says: the leases released, those already over, and
    /// those whose release did not go through before the timeout (the
    /// store down or slow: each ends when its lease runs out). Calling it
    /// again releases nothing more. Call it after your server stopped
    /// taking requests (axum's graceful shutdown), before the process
    /// exits:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redlock_runtime::LockError> {
    /// use std::time::Duration;
    /// use redlock_runtime::{LockClient, LockError};
    ///
    /// let locks = LockClient::in_memory();
    /// let job = locks.lock("job:nightly").acquire().await?;
    /// let report = locks.shutdown(Duration::from_secs(5)).await;
    /// assert_eq!(report.released, ["job:nightly"]);
    /// assert!(report.is_complete());
    /// assert!(!job.is_held());
    /// let later = locks.lock("job:nightly").acquire().await;
    /// assert!(matches!(later, Err(LockError::ShutDown { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn shutdown(&self, timeout: Duration) -> Shutdown {
        crate::shutdown::shutdown(&self.core, timeout).await
    }

    /// The name written with each lock this client takes (see
    /// [`LockClientBuilder::client_name`](crate::LockClientBuilder::client_name)).
    pub fn client_name(&self) -> &str {
        &self.core.settings().client_name
    }

    /// The underlying pool, when the client is on one Redis.
    pub fn pool(&self) -> Option<&Pool<RedisConnectionManager>> {
        self.core.backend().pool()
    }

    /// Where this client keeps its locks. Its [`Mode::as_str`] is the
    /// `backend` label of the [metrics](crate::metrics).
    pub fn mode(&self) -> Mode {
        self.core.backend().mode()
    }

    /// What this client talks to, safe to print: the Redis URL with its
    /// password redacted, `redlock[url, url, ..]`, `bb8 pool` or
    /// `in-memory`.
    pub fn target(&self) -> &str {
        &self.core.settings().target
    }

    /// The prefix added to every key in Redis. Defaults to `lock:`.
    pub fn key_prefix(&self) -> &str {
        &self.core.settings().key_prefix
    }

    /// The ttl of requests that set none. Defaults to 30 s.
    pub fn default_ttl(&self) -> Duration {
        self.core.settings().default_ttl
    }

    /// How many locks this client (and its clones) currently hold and watch.
    pub fn held_locks(&self) -> usize {
        self.core.watchdog().watched()
    }

    /// What this client (and its clones) holds now: every lock, read or
    /// write lock, semaphore lease and idempotency record, oldest first,
    /// with its kind, since when, the lease left and its fencing token;
    /// from the client's own books, without a round trip. For a debug
    /// endpoint: each entry's `Display` is one line, and no entry carries
    /// an owner token.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redlock_runtime::LockError> {
    /// let locks = redlock_runtime::LockClient::in_memory();
    /// let _guard = locks.lock("order:42").acquire().await?;
    /// let held = locks.held();
    /// assert_eq!(held.len(), 1);
    /// assert_eq!(held[0].key, "order:42");
    /// println!("{}", held[0]); // order:42 (lock) for 0.0s, lease 30.0s left
    /// # Ok(())
    /// # }
    /// ```
    pub fn held(&self) -> Vec<HeldLease> {
        let books = self.core.watchdog().snapshot();
        books
            .iter()
            .filter_map(|held| HeldLease::of(held))
            .collect()
    }
}
