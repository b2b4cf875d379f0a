//! [`RwLock`]: a read/write lock's handle, whose [`read`](RwLock::read) and
//! [`write`](RwLock::write) requests take every option of a lock.

use std::fmt;
use std::sync::Arc;

use crate::acquire::Shape;
use crate::core::Core;
use crate::request::LockRequest;

/// A read/write lock (Redisson's `RReadWriteLock`), made by
/// [`LockClient::rw_lock`](crate::LockClient::rw_lock): many readers or
/// one writer.
///
/// - Each reader holds a lease of its own, renewed by the client's
///   watchdog like a lock's: a reader that dies frees its share within its
///   ttl, not when the last reader leaves.
/// - Writers come first: a writer that waits keeps new readers out (it
///   renews its place on each attempt), so a stream of readers cannot
///   starve it. It gets in as soon as the readers already in have left.
/// - Write holds carry a fencing token that strictly increases, as a
///   lock's does; a read guard's [`fencing_token`](crate::LockGuard::fencing_token)
///   is the last write token issued (readers share it).
/// - In a [`run`](LockRequest::run) scope of this task: a read inside a
///   read or a write re-enters; a write inside a write re-enters; a write
///   inside a read fails at once with [`LockError::Upgrade`](crate::LockError::Upgrade)
///   (it would wait for itself). Take the write lock first and
///   [`downgrade`](crate::LockGuard::downgrade) it instead.
///
/// Not on a Redlock client (refused with
/// [`ConfigError::Unsupported`](crate::ConfigError::Unsupported)).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
///
/// let locks = redlock_runtime::LockClient::in_memory();
/// let product = locks.rw_lock("product:7");
/// let a = product.read().acquire().await?;
/// let b = product.read().acquire().await?; // readers share
/// assert!(product.write().try_acquire().await?.is_none());
/// drop((a, b));
/// let price = product
///     .write()
///     .wait(Duration::from_secs(5))
///     .run(async { 42 })
///     .await?;
/// assert_eq!(price, 42);
/// # Ok::<(), redlock_runtime::LockError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct RwLock {
    core: Arc<Core>,
    key: String,
}

impl RwLock {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self { core, key }
    }

    /// A request for the read lock: shared with other readers, refused
    /// while a writer holds the lock or waits for it.
    pub fn read(&self) -> LockRequest {
        LockRequest::shaped(Arc::clone(&self.core), self.key.clone(), Shape::Read)
    }

    /// A request for the write lock: exclusive, fenced.
    pub fn write(&self) -> LockRequest {
        LockRequest::shaped(Arc::clone(&self.core), self.key.clone(), Shape::Write)
    }

    /// The key as given to [`LockClient::rw_lock`](crate::LockClient::rw_lock).
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock").field("key", &self.key).finish()
    }
}
