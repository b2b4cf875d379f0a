//! [`Latch`]: a countdown latch shared by processes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{LatchCall, LatchKeys, LatchOp, LatchReply, OpError};
use crate::backoff::next_sleep;
use crate::core::Core;
use crate::error::{ConfigError, LockError, Operation};
use crate::store::subscribe::Subscription;
use crate::util::{MAX_KEY_LEN, validate_key, validate_ttl, validate_wait};

/// The shortest time a read while waiting is given.
const MIN_ATTEMPT: Duration = Duration::from_millis(50);

/// The largest count: Lua's numbers are exact up to 2^53.
const MAX_COUNT: u64 = 1 << 53;

/// How many times a count-down is sent when its answer is lost (each
/// with the same request id, so it counts once).
const COUNT_DOWN_TRIES: u32 = 3;

/// A countdown latch (Redisson's `RCountDownLatch`, done right), made by
/// [`LockClient::latch`](crate::LockClient::latch): one process sets a
/// count, workers count down, waiters return when it reaches zero.
///
/// - A [`wait`](Self::wait) that starts before the set-up waits for the
///   set-up, then for zero (a missing latch is not zero).
/// - Reaching zero wakes every waiter at once (a push, not a poll), and
///   the latch stays open until its ttl ends: late waiters return at once.
/// - The latch expires with its ttl: nothing is left in Redis. A latch
///   whose ttl ends with counts left gives its waiters
///   [`LockError::Latch`] (`expired: true`), never a hang.
/// - A count-down takes a request id: re-sent after a lost answer, it
///   counts once. [`count_down_with_id`](Self::count_down_with_id) lets a
///   job retried by its queue count once too.
/// - Not on a Redlock client (refused with [`ConfigError::Unsupported`]).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
///
/// let locks = redlock_runtime::LockClient::in_memory();
/// let batch = locks.latch("batch:9");
/// assert!(batch.try_set_count(2, Duration::from_secs(60)).await?);
/// let waiter = tokio::spawn({
///     let batch = batch.clone();
///     async move { batch.wait(Duration::from_secs(5)).await }
/// });
/// batch.count_down().await?;
/// assert_eq!(batch.count_down().await?, 0);
/// waiter.await.expect("the waiter")?;
/// # Ok::<(), redlock_runtime::LockError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Latch {
    core: Arc<Core>,
    key: String,
}

impl Latch {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self { core, key }
    }

    /// The latch's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The latch's keys, once its key and client are checked.
    fn keys(&self) -> Result<LatchKeys, LockError> {
        validate_key(&self.key)?;
        if !self.core.backend().supports_synchronizers() {
            return Err(ConfigError::Unsupported {
                feature: "latches",
                reason: crate::error::SYNCHRONIZERS_ON_REDLOCK,
            }
            .into());
        }
        self.core.check_open(&self.key)?;
        Ok(LatchKeys::new(&self.core.settings().key_prefix, &self.key))
    }

    async fn call(
        &self,
        keys: &LatchKeys,
        op: LatchOp<'_>,
        limit: Duration,
    ) -> Result<LatchReply, OpError> {
        self.core
            .backend()
            .latch(&LatchCall { keys, op }, limit)
            .await
    }

    fn error(&self, e: OpError, op: Operation) -> LockError {
        e.into_lock_error(&self.key, op)
    }

    /// Sets the count to `count`, only if the latch is not set up (a
    /// second process setting it up finds it set, and changes nothing);
    /// it expires `ttl` from now. Wakes the waiters that started before.
    /// `true` when this call set it.
    ///
    /// # Errors
    /// [`LockError::Config`] for a count of zero or a ttl under 1 ms, or on
    /// Redlock; [`LockError::InvalidKey`]; Redis failures as in
    /// [`LockRequest::acquire`](crate::LockRequest::acquire).
    pub async fn try_set_count(&self, count: u64, ttl: Duration) -> Result<bool, LockError> {
        let keys = self.keys()?;
        if count == 0 || count > MAX_COUNT {
            return Err(ConfigError::InvalidCount {
                name: "count",
                value: count,
                reason: "a latch counts down from 1 to 2^53 (Lua's exact integers)",
            }
            .into());
        }
        validate_ttl("ttl", ttl)?;
        let limit = self.core.settings().command_timeout;
        match self.call(&keys, LatchOp::Set { count, ttl }, limit).await {
            Ok(reply) => Ok(reply != LatchReply::AlreadySet),
            Err(e) => Err(self.error(e, Operation::Acquire)),
        }
    }

    /// Counts down by one; the count left. At zero, every waiter wakes;
    /// counting down an open latch (at zero) changes nothing.
    ///
    /// Sent up to three times, with one request id, when an answer is
    /// lost: it counts once.
    ///
    /// # Errors
    /// [`LockError::Latch`] (`expired: false`) when the latch is not set
    /// up; Redis failures as in [`try_set_count`](Self::try_set_count).
    pub async fn count_down(&self) -> Result<u64, LockError> {
        let id = uuid::Uuid::new_v4().to_string();
        self.count_down_with_id(&id).await
    }

    /// Counts down once for `id`: every later count-down with the same id
    /// (a job retried by its queue, a message delivered twice) changes
    /// nothing and returns the count left. Ids are kept until the latch
    /// expires; up to 1024 bytes.
    ///
    /// # Errors
    /// As [`count_down`](Self::count_down); [`LockError::InvalidKey`] for
    /// an empty or too long id.
    pub async fn count_down_with_id(&self, id: &str) -> Result<u64, LockError> {
        let keys = self.keys()?;
        if id.is_empty() || id.len() > MAX_KEY_LEN {
            return Err(LockError::InvalidKey {
                key: self.key.clone(),
                reason: format!(
                    "a count-down id must be 1 to {MAX_KEY_LEN} bytes, not {}",
                    id.len()
                ),
            });
        }
        let limit = self.core.settings().command_timeout;
        let mut tries = 0;
        loop {
            tries += 1;
            match self.call(&keys, LatchOp::CountDown { id }, limit).await {
                Ok(LatchReply::Counting { count, .. }) => return Ok(count),
                Ok(_) => {
                    return Err(LockError::Latch {
                        key: self.key.clone(),
                        expired: false,
                    });
                }
                Err(e) if e.is_transient() && tries < COUNT_DOWN_TRIES => {
                    tracing::debug!(target: "redlock", key = %self.key, error = %e, "count-down failed; sending it again with its id");
                }
                Err(e) => return Err(self.error(e, Operation::Release)),
            }
        }
    }

    /// The count left; `None` when the latch is not set up (never, or its
    /// ttl ended).
    ///
    /// # Errors
    /// As [`try_set_count`](Self::try_set_count).
    pub async fn count(&self) -> Result<Option<u64>, LockError> {
        let keys = self.keys()?;
        let limit = self.core.settings().command_timeout;
        match self.call(&keys, LatchOp::Read, limit).await {
            Ok(LatchReply::Counting { count, .. }) => Ok(Some(count)),
            Ok(_) => Ok(None),
            Err(e) => Err(self.error(e, Operation::Acquire)),
        }
    }

    /// Waits up to `timeout` for the count to reach zero (and, when the
    /// latch is not set up yet, for its set-up first). Woken by a push as
    /// the last count-down lands; polls with the client's retry policy as
    /// the fallback, and at the end of the latch's ttl.
    ///
    /// # Errors
    /// [`LockError::WaitTimeout`] when the count was not zero in time;
    /// [`LockError::Latch`] (`expired: true`) when the latch was set up and
    /// its ttl ended with counts left; Redis failures (the last one, when
    /// the wait ended on it).
    pub async fn wait(&self, timeout: Duration) -> Result<(), LockError> {
        let keys = self.keys()?;
        validate_wait(timeout)?;
        let settings = self.core.settings();
        let deadline = Instant::now() + timeout;
        // Subscribed before the first read: a count-down landing after it
        // wakes this waiter.
        let subscription = self
            .core
            .wakeups()
            .subscribe(&keys.latch, None, MIN_ATTEMPT.min(timeout))
            .await;
        let mut seen = false;
        let mut retries = 0u32;
        loop {
            let woken = subscription.as_ref().map(Subscription::armed);
            let remaining = deadline.saturating_duration_since(Instant::now());
            let limit = settings.command_timeout.min(remaining.max(MIN_ATTEMPT));
            let (last, ttl_left) = match self.call(&keys, LatchOp::Read, limit).await {
                Ok(LatchReply::Counting { count: 0, .. }) => return Ok(()),
                Ok(LatchReply::Counting { ttl_left, .. }) => {
                    seen = true;
                    (None, ttl_left)
                }
                Ok(_) if seen => {
                    return Err(LockError::Latch {
                        key: self.key.clone(),
                        expired: true,
                    });
                }
                Ok(_) => (None, None),
                Err(e) if e.is_transient() => (Some(e), None),
                Err(e) => return Err(self.error(e, Operation::Acquire)),
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(match last {
                    Some(e) => self.error(e, Operation::Acquire),
                    None => LockError::WaitTimeout {
                        key: self.key.clone(),
                        waited: timeout,
                        holder: None,
                    },
                });
            }
            let sleep = next_sleep(&settings.retry, retries, ttl_left, remaining);
            retries = retries.saturating_add(1);
            tokio::select! {
                () = crate::store::subscribe::nap(sleep, woken) => {}
                () = Box::pin(self.core.closed()) => {
                    return Err(LockError::ShutDown { key: self.key.clone() });
                }
            }
        }
    }
}

impl fmt::Debug for Latch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Latch").field("key", &self.key).finish()
    }
}
