//! [`LockClient::shutdown`](crate::LockClient::shutdown): a graceful end
//! of a client, bounded by a timeout.
//!
//! In this order:
//! 1. The client closes: every operation started from now on fails with
//!    [`LockError::ShutDown`](crate::LockError::ShutDown), and acquires
//!    that wait give up at once, giving back what an attempt of theirs may
//!    have taken (`giveback.rs`).
//! 2. Every lease on the client's books is ended: marked lost for
//!    [`LostReason::ClientShutDown`](crate::LostReason::ClientShutDown) first (its guard says it is not held,
//!    `lost()` completes, and a body run under it is cancelled), then
//!    released, all together, each retried until the deadline. A renewal
//!    in flight is waited out first (the lease's gate), so none follows
//!    the release; a lease its guard released meanwhile is left alone.
//! 3. The background work (give-backs, releases of dropped guards) is
//!    waited for, until the deadline.
//!
//! An acquire that got its lock just as the client closed either is on
//! the books when step 2 reads them, or sees the client closed right after
//! it registered its lease (the books' lock orders the two), and releases
//! it itself: no lease outlives a shutdown but one whose release failed
//! until the deadline (the store down), which ends with its lease.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::core::Core;
use crate::lock::HeldLock;
use crate::telemetry::{self, How};

/// What [`LockClient::shutdown`](crate::LockClient::shutdown) did. Keys
/// are shown as given (an idempotency record's: the hash of its key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shutdown {
    /// The leases it released.
    pub released: Vec<String>,
    /// The leases that were over when their release went out (lost, or
    /// run out): nothing to release.
    pub already_over: Vec<String>,
    /// The leases whose release did not go through before the timeout
    /// (the store down or slow): each ends when its lease runs out.
    pub left: Vec<String>,
    /// Whether the background work (give-backs of acquires cut short,
    /// releases of dropped guards) finished before the timeout.
    pub settled: bool,
}

impl Shutdown {
    /// True when nothing of this client is left in the store: every lease
    /// released (or already over) and the background work done.
    pub fn is_complete(&self) -> bool {
        self.left.is_empty() && self.settled
    }
}

/// `released 3, already over 1, left 0 (order:42 ...), background work done`.
impl fmt::Display for Shutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "released {}, already over {}, left {}",
            self.released.len(),
            self.already_over.len(),
            self.left.len()
        )?;
        if !self.left.is_empty() {
            write!(
                f,
                " ({}: their leases run out by themselves)",
                self.left.join(", ")
            )?;
        }
        f.write_str(if self.settled {
            ", background work done"
        } else {
            ", background work still running at the timeout"
        })
    }
}

/// How one lease ended.
enum Ended {
    Released,
    AlreadyOver,
    Left,
    /// Its guard released it first, or it was already ended.
    NotOurs,
}

/// Shuts the client down within `timeout` (see the module docs).
pub(crate) async fn shutdown(core: &Arc<Core>, timeout: Duration) -> Shutdown {
    let deadline = Instant::now() + timeout;
    core.close();
    let books = core.watchdog().books();
    tracing::info!(target: "redlock", leases = books.len(), timeout_ms = timeout.as_millis() as u64, "lock client shutting down");
    let ends = books.into_iter().map(|(id, held)| async move {
        let ended = end(core, id, &held, deadline).await;
        (held, ended)
    });
    let mut report = Shutdown::default();
    for (held, ended) in futures_util::future::join_all(ends).await {
        let key = held.key().to_owned();
        match ended {
            Ended::Released => report.released.push(key),
            Ended::AlreadyOver => report.already_over.push(key),
            Ended::Left => report.left.push(key),
            Ended::NotOurs => {}
        }
    }
    report.settled = core.settle(deadline).await;
    if report.is_complete() {
        tracing::info!(target: "redlock", %report, "lock client shut down");
    } else {
        tracing::warn!(target: "redlock", %report, "lock client shut down before all its leases were released");
    }
    report
}

/// Ends one lease on the books (id `id` there).
async fn end(core: &Core, id: u64, held: &HeldLock, deadline: Instant) -> Ended {
    // No renewal in flight, and none after this: the gate is held until the
    // release is answered, and the lease leaves the books.
    let Ok(_gate) = tokio::time::timeout_at(deadline, held.gate()).await else {
        return Ended::Left;
    };
    if held.is_ended() || held.ended_by_shutdown() {
        return Ended::NotOurs;
    }
    core.watchdog().deregister(id);
    let presumed_held = held.presumed_held_at(Instant::now());
    if !held.end_by_shutdown() {
        return Ended::AlreadyOver; // found lost before
    }
    let ended = core
        .retry_until(held.key(), deadline, |limit| {
            held.end_as(core.backend(), limit, presumed_held)
        })
        .await;
    telemetry::held(held.labels(), || held.held_for());
    match ended {
        Some(true) => {
            telemetry::released(held.labels(), How::Shutdown);
            tracing::debug!(target: "redlock", parent: held.span(), key = %held.key(), "lock released by the client's shutdown");
            Ended::Released
        }
        Some(false) => Ended::AlreadyOver,
        None => {
            tracing::warn!(target: "redlock", key = %held.key(), "the shutdown could not release the lock before its timeout; the lease ends by itself");
            Ended::Left
        }
    }
}
