//! [`Semaphore`]: permits of a limited resource, each held under a lease;
//! and [`Permit`], the guard of the permits taken.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tracing::Span;

use crate::acquire::Shape;
use crate::backend::{Available, PermitKeys};
use crate::core::Core;
use crate::error::{ConfigError, LockError, Operation};
use crate::guard::LockGuard;
use crate::lock::Lost;
use crate::request::LockRequest;
use crate::scope::OnLost;
use crate::util::{validate_key, validate_permits};

/// A request for permits of a semaphore (Redisson's
/// `RPermitExpirableSemaphore`, done right), made by
/// [`LockClient::semaphore`](crate::LockClient::semaphore): set the
/// permits, the lease and the wait, then acquire.
///
/// - Every holder holds a lease (on Redis's clock, never a client's),
///   renewed by the client's watchdog while its [`Permit`] lives: a holder
///   that dies gives its permits back within its ttl.
/// - A release gives back exactly what its acquire took, once: a release
///   sent twice (a retry after a lost answer) changes nothing.
/// - A release wakes every waiter, so freeing k permits lets up to k
///   waiters in at once.
/// - Every caller of one semaphore must pass the same limit (as every
///   client of a lock must agree on `fair()`): the limit is not stored,
///   each acquire checks against its own.
/// - Not reentrant: a task that asks twice takes permits twice.
/// - Not on a Redlock client (refused with [`ConfigError::Unsupported`]).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let locks = redlock_runtime::LockClient::in_memory();
/// let jobs = locks.semaphore("jobs", 4);
/// let two = jobs.permits(2).acquire().await?;
/// assert_eq!(jobs.available().await?, 2);
/// let done = jobs.clone().run(async { "one more job" }).await?;
/// assert_eq!(done, "one more job");
/// two.release().await?;
/// assert_eq!(jobs.available().await?, 4);
/// # Ok::<(), redlock_runtime::LockError>(())
/// # }).unwrap();
/// ```
#[must_use = "a semaphore request does nothing until `.acquire()` or `.try_acquire()` is awaited"]
#[derive(Debug, Clone)]
pub struct Semaphore {
    request: LockRequest,
    limit: u32,
    permits: u32,
}

impl Semaphore {
    pub(crate) fn new(core: Arc<Core>, key: String, limit: u32) -> Self {
        let shape = Shape::Permits { limit, permits: 1 };
        Self {
            request: LockRequest::shaped(core, key, shape),
            limit,
            permits: 1,
        }
    }

    /// A request for `permits` permits at once (defaults to 1; at most the
    /// limit), with this request's other settings. It borrows, as
    /// [`RwLock::read`](crate::RwLock::read) and
    /// [`RwLock::write`](crate::RwLock::write) do: one semaphore makes as
    /// many requests as needed, `jobs.permits(2).acquire()`, without a
    /// clone. The other settings (`ttl`, `wait`, ...) take and return the
    /// request, as a [`LockRequest`]'s do.
    pub fn permits(&self, permits: u32) -> Self {
        Self {
            permits,
            ..self.clone()
        }
    }

    /// The lease: how long the permits outlive their holder if it dies.
    /// See [`LockRequest::ttl`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.request = self.request.ttl(ttl);
        self
    }

    /// How long to keep trying while too few permits are free. Defaults to
    /// zero: try once. See [`LockRequest::wait`].
    pub fn wait(mut self, wait: Duration) -> Self {
        self.request = self.request.wait(wait);
        self
    }

    /// Whether the watchdog renews the lease. See [`LockRequest::renew`].
    pub fn renew(mut self, renew: bool) -> Self {
        self.request = self.request.renew(renew);
        self
    }

    /// What [`run`](Self::run) does when the permits are lost while its
    /// body runs. See [`LockRequest::on_lost`].
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.request = self.request.on_lost(on_lost);
        self
    }

    /// The `lock` label of the metrics. See [`LockRequest::label`].
    pub fn label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.request = self.request.label(label);
        self
    }

    /// The semaphore's key.
    pub fn key(&self) -> &str {
        self.request.key()
    }

    /// The semaphore's limit, as given to
    /// [`LockClient::semaphore`](crate::LockClient::semaphore).
    pub fn limit(&self) -> u32 {
        self.limit
    }

    fn request(mut self) -> (LockRequest, u32) {
        let (limit, permits) = (self.limit, self.permits);
        *self.request.shape_mut() = Shape::Permits { limit, permits };
        (self.request, permits)
    }

    /// Takes the permits, waiting up to the request's wait while too few
    /// are free.
    ///
    /// # Errors
    /// As [`LockRequest::acquire`]: [`LockError::Busy`] or
    /// [`LockError::WaitTimeout`] when too few permits were free;
    /// [`LockError::Config`] for a limit or permits of zero, more permits
    /// than the limit, or a Redlock client.
    pub async fn acquire(self) -> Result<Permit, LockError> {
        let (request, permits) = self.request();
        let guard = request.acquire().await?;
        Ok(Permit { guard, permits })
    }

    /// Like [`acquire`](Self::acquire), but too few permits free when the
    /// wait ends is `Ok(None)`.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), less the busy cases.
    pub async fn try_acquire(self) -> Result<Option<Permit>, LockError> {
        let (request, permits) = self.request();
        Ok(request
            .try_acquire()
            .await?
            .map(|guard| Permit { guard, permits }))
    }

    /// Runs `body` holding the permits, then gives them back (see
    /// [`LockRequest::run`]; permits are not a lock of the task, so
    /// [`current_lock`](crate::current_lock) does not show them).
    ///
    /// # Errors
    /// As [`LockRequest::run`].
    pub async fn run<F: Future>(self, body: F) -> Result<F::Output, LockError> {
        self.request().0.run(body).await
    }

    /// Like [`run`](Self::run), but `Ok(None)` without running the body
    /// when too few permits were free.
    ///
    /// # Errors
    /// As [`LockRequest::try_run`].
    pub async fn try_run<F: Future>(self, body: F) -> Result<Option<F::Output>, LockError> {
        self.request().0.try_run(body).await
    }

    /// How many permits are free now (holders whose lease ran out count
    /// as gone).
    ///
    /// # Errors
    /// [`LockError::InvalidKey`] and [`LockError::Config`] for bad input;
    /// Redis failures as in [`acquire`](Self::acquire).
    pub async fn available(&self) -> Result<u32, LockError> {
        let key = self.request.key();
        validate_key(key)?;
        validate_permits(self.limit, 1)?;
        let core = self.request.core();
        core.check_open(key)?;
        if !core.backend().supports_synchronizers() {
            return Err(ConfigError::Unsupported {
                feature: "semaphores",
                reason: crate::error::SYNCHRONIZERS_ON_REDLOCK,
            }
            .into());
        }
        let keys = PermitKeys::new(&core.settings().key_prefix, key.to_owned(), self.limit, 1);
        let available = Available {
            keys: &keys,
            limit: self.limit,
        };
        core.backend()
            .available(&available, core.settings().command_timeout)
            .await
            .map_err(|e| e.into_lock_error(key, Operation::Acquire))
    }
}

/// Permits taken from a [`Semaphore`]: given back on
/// [`release`](Self::release) or drop, renewed by the watchdog meanwhile.
pub struct Permit {
    guard: LockGuard,
    permits: u32,
}

impl Permit {
    #[cfg(feature = "test-util")]
    /// The guard under the permits (for `test_util`'s hooks).
    pub(crate) fn into_guard(self) -> LockGuard {
        self.guard
    }

    /// The semaphore's key.
    pub fn key(&self) -> &str {
        self.guard.key()
    }

    /// How many permits this holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// True while the permits are presumed held (see
    /// [`LockGuard::is_held`]).
    pub fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    /// How long the lease is known to last from now.
    pub fn remaining(&self) -> Duration {
        self.guard.remaining()
    }

    /// Completes when the permits are known or presumed lost: the lease
    /// ran out unrenewed (a pause longer than the ttl), or Redis lost it.
    pub fn lost(&self) -> Lost {
        self.guard.lost()
    }

    /// The permits' `tracing` span (see [`LockGuard::span`]).
    pub fn span(&self) -> &Span {
        self.guard.span()
    }

    /// Resets the lease to `ttl` from now.
    ///
    /// # Errors
    /// As [`LockGuard::extend`].
    pub async fn extend(&self, ttl: Duration) -> Result<(), LockError> {
        self.guard.extend(ttl).await
    }

    /// Gives the permits back and wakes the waiters.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lease had already ended (the permits
    /// were free again); Redis failures as in [`LockGuard::release`].
    pub async fn release(self) -> Result<(), LockError> {
        self.guard.release().await
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("key", &self.key())
            .field("permits", &self.permits)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}
