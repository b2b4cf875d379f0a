//! The end of a claimed record once its work is done: completed with the
//! result (retried a few times) or released, from a task of its own that
//! the caller waits for at most a bound. Shared by the `redlock-axum`
//! layer (the response goes out then) and
//! [`Idempotent`](crate::Idempotent) (the result is returned then).
//!
//! Why this never lets two runs overlap: the record stays claimed (its
//! lease renewed by the watchdog while the [`RecordLease`] lives) until
//! the completion or the release lands, or the lease runs out. When every
//! completion attempt fails, the lease is dropped, which releases the
//! record owner-checked (a completion that did land, its answer lost,
//! stays), retried until the lease would end. Until then a duplicate is
//! told `Processing`; after it, it gets the result if the completion
//! landed, else runs the work again: a store that fails for longer than
//! `limit × COMPLETE_ATTEMPTS` can cost a second run, never a concurrent
//! one.

use std::time::Duration;

use super::{Completion, RecordLease};

/// Attempts at storing a completed result before giving up on it.
pub const COMPLETE_ATTEMPTS: u32 = 3;

/// How a claimed record ends.
#[derive(Debug)]
#[non_exhaustive]
pub enum End {
    /// in progress -> completed with `result`, kept for `retention`.
    Complete {
        /// The result to replay.
        result: Completion,
        /// How long it is kept.
        retention: Duration,
    },
    /// in progress -> absent, so that a retry runs.
    Release,
}

impl End {
    /// Completes the record with `result`, kept for `retention`.
    pub fn complete(result: Completion, retention: Duration) -> Self {
        End::Complete { result, retention }
    }
}

/// What became of a record's end, as far as the caller waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// The result is stored: duplicates get it.
    Completed,
    /// The record is released: a retry runs.
    Released,
    /// The record was no longer ours (its lease was lost): it was left
    /// alone, and a retry may run the work again.
    NotOurs,
    /// Storing the result failed every attempt: the record is released
    /// (retried until its lease would end), so a retry runs the work
    /// again. Or a release failed, and is retried so.
    Failed,
    /// The store was slower than the bound: the end goes on in the
    /// background, and duplicates are told `Processing` meanwhile.
    InBackground,
}

impl RecordLease {
    /// Ends the record (see [`End`]) from a task of its own, and waits for
    /// it at most `limit × COMPLETE_ATTEMPTS`: after that it goes on in the
    /// background. A completion is tried up to [`COMPLETE_ATTEMPTS`] times
    /// (each bounded by `limit`); each outcome is logged (target
    /// `redlock`) with the record's name, never its key.
    pub async fn end(self, end: End, limit: Duration) -> Ended {
        let name = self.keys.user.clone();
        let bound = limit * COMPLETE_ATTEMPTS;
        let task = tokio::spawn(async move {
            match end {
                End::Complete { result, retention } => {
                    complete(self, &result, retention, limit).await
                }
                End::Release => release(self, limit).await,
            }
        });
        match tokio::time::timeout(bound, task).await {
            Ok(Ok(ended)) => ended,
            // The task panicked (it does not) or was cancelled with its
            // runtime: the lease was dropped, which releases the record.
            Ok(Err(_)) => Ended::Failed,
            Err(_) => {
                tracing::warn!(target: "redlock", record = %name, bound_ms = bound.as_millis() as u64, "the store is slow to record the end of the work; it goes on in the background (a duplicate meanwhile is told it is processing)");
                Ended::InBackground
            }
        }
    }
}

/// Stores the result (owner-checked), retrying a failed store; if it
/// never succeeds, dropping the lease releases the record.
async fn complete(
    mut lease: RecordLease,
    result: &Completion,
    retention: Duration,
    limit: Duration,
) -> Ended {
    let name = lease.keys.user.clone();
    for attempt in 1..=COMPLETE_ATTEMPTS {
        match lease.complete(result, retention, limit).await {
            Ok(true) => {
                tracing::debug!(target: "redlock", record = %name, status = result.status, replayable = result.replayable, "result stored");
                return Ended::Completed;
            }
            Ok(false) => {
                tracing::warn!(target: "redlock", record = %name, "the lease was lost before the result was stored; the record was left alone and a retry may run the work again");
                return Ended::NotOurs;
            }
            Err(error) if attempt == COMPLETE_ATTEMPTS => {
                tracing::error!(target: "redlock", record = %name, %error, "could not store the result; the record is released and a retry would run the work again");
            }
            Err(error) => {
                tracing::debug!(target: "redlock", record = %name, %error, attempt, "storing the result failed; retrying");
                tokio::time::sleep(Duration::from_millis(50) * attempt).await;
            }
        }
    }
    Ended::Failed
}

/// Releases the record (owner-checked) so that a retry runs.
async fn release(lease: RecordLease, limit: Duration) -> Ended {
    let name = lease.keys.user.clone();
    match lease.release(limit).await {
        Ok(true) => Ended::Released,
        Ok(false) => {
            tracing::debug!(target: "redlock", record = %name, "release: the record was no longer ours");
            Ended::NotOurs
        }
        Err(error) => {
            tracing::warn!(target: "redlock", record = %name, %error, "could not release the record; retried until its lease runs out");
            Ended::Failed
        }
    }
}
