//! Why a run-once call did not give the work's own result.

use std::time::Duration;

use crate::records::RecordError;

/// Why [`Idempotent::run`](crate::Idempotent::run) answered without the
/// work's result. The work's own error is not one of these: it is the
/// inner `Err` of `run`'s `Ok`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdempotentError {
    /// Another call with this key runs the work now (here or on another
    /// worker), and this one did not wait for it or waited its whole
    /// `wait`. Try again later (a message consumer: nack or redeliver), or
    /// wait for its result with [`wait`](crate::Idempotent::wait).
    #[error(
        "another call with this idempotency key is running the work now (its lease has \
         {retry_after:?} left); try again later, or wait for its result with `.wait(..)`"
    )]
    InProgress {
        /// What is left of the running call's lease: a crashed worker's
        /// record is taken over after it.
        retry_after: Duration,
    },
    /// The key was used before with another payload (another
    /// [`fingerprint`](crate::Idempotent::fingerprint)): a new payload needs
    /// a new key. The work did not run.
    #[error(
        "this idempotency key was used with another payload (its fingerprint differs); the \
         work did not run: give a new payload a new key"
    )]
    Mismatch,
    /// The work ran before with this key and completed, but its result was
    /// larger than its call's
    /// [`result_limit`](crate::Idempotent::result_limit), so it was not
    /// stored: the work is not run again, and its result cannot be
    /// replayed.
    #[error(
        "the work ran once with this key, but its result ({size} bytes) was larger than the \
         {limit}-byte result limit and was not stored, so it cannot be replayed: raise \
         `result_limit`, or return less (an id to look the result up by)"
    )]
    TooLarge {
        /// The serialized result's size, in bytes.
        size: usize,
        /// The limit it was over.
        limit: usize,
    },
    /// The work ran before with this key and completed, but its result did
    /// not serialize (say a map with non-string keys), so it was not
    /// stored: the work is not run again, and its result cannot be
    /// replayed.
    #[error(
        "the work ran once with this key, but its result did not serialize ({reason}), so it \
         was not stored and cannot be replayed"
    )]
    NotSerializable {
        /// serde's message.
        reason: String,
    },
    /// The stored result cannot be read by this code: written by another
    /// version of this crate, or as another type than the one asked for
    /// (the result type changed). Nothing was overwritten, and the work
    /// did not run. Give the new result type a new
    /// [`scope`](crate::Idempotent::scope) (say `payments/v2`), or wait
    /// for the old records' retention to pass.
    #[error(
        "the stored result cannot be read here ({reason}); nothing was overwritten and the \
         work did not run: give a changed result type a new scope (`payments/v2`), or wait \
         for the old records' retention"
    )]
    Incompatible {
        /// What did not decode.
        reason: String,
    },
    /// The idempotency key is empty or longer than
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes. The work did not run.
    #[error("invalid idempotency key: {reason}; the work did not run")]
    InvalidKey {
        /// What is wrong (the key itself is not shown: it may be a
        /// secret).
        reason: String,
    },
    /// An option is out of range, or the payload given to
    /// [`fingerprint_of`](crate::Idempotent::fingerprint_of) did not
    /// serialize. The work did not run.
    #[error("invalid run-once option: {reason}; the work did not run")]
    InvalidOption {
        /// Which option, and why.
        reason: String,
    },
    /// An `#[idempotent]` function found no client to run with: none
    /// named with `client = ..`, and none installed
    /// ([`install`](crate::install)). The work did not run.
    #[error("no client to keep the run-once record with: {0}")]
    Client(#[source] crate::LockError),
    /// The store failed before the work could be claimed (Redis down,
    /// slower than the client's command timeout, the client shut down...):
    /// the work did not run. See [`is_transient`](Self::is_transient).
    #[error("the idempotency store failed, so the work did not run: {0}")]
    Store(#[source] RecordError),
}

impl IdempotentError {
    /// True when trying again later may succeed: the work is in progress
    /// elsewhere, or the store failed in a way that passes (a timeout, a
    /// connection lost). A message consumer should redeliver on these.
    pub fn is_transient(&self) -> bool {
        match self {
            IdempotentError::InProgress { .. } => true,
            IdempotentError::Store(e) => e.is_transient(),
            _ => false,
        }
    }
}
