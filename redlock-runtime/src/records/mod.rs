//! Idempotency records: the store under the `redlock-axum` layer, for a
//! layer of your own (a message consumer, a job runner) that must run a
//! piece of work once per key and answer duplicates with its result.
//!
//! A record goes from absent to *in progress* when a request
//! [claims](Records::claim) it: the claim holds a lease (renewed by the
//! client's watchdog while the [`RecordLease`] lives) and a fencing token.
//! A duplicate that claims it meanwhile is told it is
//! processing (`Claimed::Processing`); one with another fingerprint (a hash
//! of the payload, the caller's choice) is told it is a
//! mismatch (`Claimed::Mismatch`). The work then either
//! [completes](RecordLease::complete) it with its result, kept for a
//! retention and replayed (`Claimed::Completed`) to later duplicates, or
//! [releases](RecordLease::release) it, so that a retry runs again (as a
//! lease dropped unfinished, or lost with its holder, does). Every round
//! trip goes over the client's own connections, under its deadlines and
//! error rules; on an in-memory client, records live in this process.
//!
//! ```
//! use std::time::Duration;
//! use redlock_runtime::LockClient;
//! use redlock_runtime::records::{Claimed, Completion, RecordKeys, Records};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = LockClient::builder().in_memory().build().await?;
//! let records = Records::new(&client);
//! // One hash tag for both keys, so that a Cluster keeps them together.
//! let keys = RecordKeys::new(
//!     "payment:7".to_owned(),
//!     "idem:{payment:7}".to_owned(),
//!     "idem:{payment:7}:fence".to_owned(),
//! );
//! let (lease, kept, limit) = (Duration::from_secs(30), Duration::from_secs(3600), Duration::from_secs(1));
//!
//! let Claimed::Claimed(mut claim) = records.claim(&keys, "body-hash", lease, kept, limit).await? else {
//!     unreachable!("the first claim wins");
//! };
//! // A duplicate while the work runs:
//! let busy = records.claim(&keys, "body-hash", lease, kept, limit).await?;
//! assert!(matches!(busy, Claimed::Processing { .. }));
//!
//! // The work is done: keep its result for an hour.
//! let result = Completion::new(200, Vec::new(), b"paid".to_vec());
//! assert!(claim.complete(&result, kept, limit).await?);
//!
//! // A later duplicate gets the result, without running the work again.
//! let Claimed::Completed(replayed) = records.claim(&keys, "body-hash", lease, kept, limit).await? else {
//!     unreachable!("completed");
//! };
//! assert_eq!(replayed.body, b"paid");
//! # Ok(())
//! # }
//! ```
//!
//! A record is not a lock, but it is held like one: a claim is an acquire
//! that never waits (a `HeldLock` of the record kind), its lease is
//! renewed in the watchdog's batches, a claim whose answer was lost is
//! given back like an abandoned acquire, and a lease dropped unfinished is
//! released like a dropped guard.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::memory::MemoryBackend;
use crate::backend::{self, Backend, Claim, Complete, Keys, Mode, OpError};
use crate::client::LockClient;
use crate::core::Core;
use crate::giveback::PendingAcquire;
use crate::guard::LockGuard;
use crate::lock::{HeldLock, Lost, Taken};
use crate::store::subscribe::{Subscription, Wakeups};
use crate::telemetry::Labels;

pub use crate::primitive::record::Completion;
pub use end::{COMPLETE_ATTEMPTS, End, Ended};
pub use wait::MAX_POLL;

mod end;
mod wait;

/// Where a layer keeps its records: the client's Redis, or (in-memory and
/// Redlock clients) this process's memory.
#[derive(Clone)]
pub struct Records {
    core: Arc<Core>,
}

impl fmt::Debug for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Records")
            .field("target", &self.core.settings().target)
            .finish()
    }
}

impl Records {
    /// The records of `client`: in its Redis, or in memory for an
    /// in-memory client. A Redlock client has no single Redis: its records
    /// are kept in this process (with a warning logged once per client),
    /// which protects this instance only; every `Records` of one client
    /// shares them.
    pub fn new(client: &LockClient) -> Self {
        let core = client.core();
        if core.backend().mode() != Mode::Redlock {
            return Self {
                core: Arc::clone(core),
            };
        }
        let local = core.local_records(|| {
            tracing::warn!(
                target: "redlock",
                "a Redlock client has no single Redis to keep idempotency records in: they are \
                 kept in this process's memory, which protects this instance only; build the \
                 layer from a single-Redis LockClient or a bb8-redis pool"
            );
            let mut settings = core.settings().clone();
            settings.target = "in-memory".to_owned();
            let (wakeups, wake) = Wakeups::local();
            let backend = MemoryBackend::new(settings.fence_retention, wake);
            Core::new(Backend::Memory(backend), settings, wakeups)
        });
        Self {
            core: Arc::clone(local),
        }
    }

    /// Whether records are kept in this process's memory.
    pub fn in_memory(&self) -> bool {
        self.core.backend().mode() == Mode::Memory
    }

    /// Claims the record at `keys`: absent -> in progress (ours, for
    /// `lease`), or what is there. `fence_ttl` is how long its fencing
    /// counter is kept. Bounded by `limit`. A claim whose answer was lost,
    /// or that is dropped while on its way, is given back.
    ///
    /// # Errors
    /// The store failed; see [`RecordError::is_transient`].
    pub async fn claim(
        &self,
        keys: &RecordKeys,
        fingerprint: &str,
        lease: Duration,
        fence_ttl: Duration,
        limit: Duration,
    ) -> Result<Claimed, RecordError> {
        let core = &self.core;
        let keys = &keys.0;
        if core.is_closed() {
            return Err(RecordError(OpError::ShutDown));
        }
        let token = uuid::Uuid::new_v4().to_string();
        let mut pending =
            PendingAcquire::new(core, Keys::Record(keys.clone()), token.clone(), false);
        let sent = Instant::now();
        pending.sending(sent, lease);
        let claim = Claim {
            keys,
            token: &token,
            fingerprint,
            lease,
            fence_ttl,
        };
        let reply = core.backend().claim(&claim, limit).await;
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                pending.answered(e.outcome_unknown());
                return Err(RecordError(e));
            }
        };
        if !matches!(reply, Claimed::Claimed(_)) {
            pending.answered(false);
        }
        let claimed = reply.map(|fence| {
            pending.took();
            let taken = Taken {
                keys: Keys::Record(keys.clone()),
                token,
                fence,
                ttl: lease,
                sent,
                renew: true,
                fair: false,
                contended: false,
                hold: None,
                labels: Labels::uncounted(core.backend().mode()),
                parent: tracing::Span::current(),
            };
            let held = HeldLock::new(core.id(), taken, core.backend().validity(lease));
            RecordLease {
                guard: LockGuard::new(Arc::clone(core), held),
                keys: keys.clone(),
            }
        });
        match claimed {
            // Shut down meanwhile: released here (see `acquire::closed_after`).
            Claimed::Claimed(lease) if core.is_closed() => {
                let _ = Box::pin(lease.guard.release()).await;
                Err(RecordError(OpError::ShutDown))
            }
            claimed => Ok(claimed),
        }
    }

    /// Subscribes to changes of the record at `keys` (its completion or
    /// release), bounded by `limit`; `None` when this store has no push
    /// (a client built from a pool alone): poll instead. A message can be
    /// missed, so callers poll too, with a bounded interval.
    pub async fn subscribe(
        &self,
        keys: &RecordKeys,
        limit: Duration,
    ) -> Option<ChannelSubscription> {
        let subscription = self
            .core
            .wakeups()
            .subscribe(&keys.0.record, None, limit)
            .await?;
        Some(ChannelSubscription { subscription })
    }
}

/// The keys of one record: the record and its fencing counter, and the
/// name logs use for it (never the raw idempotency key: it may be a
/// secret, so hash it). Give both keys the same `{hash tag}`: a Redis
/// Cluster must keep them on one node, and refuses the claim otherwise.
#[derive(Debug, Clone)]
pub struct RecordKeys(backend::RecordKeys);

impl RecordKeys {
    /// The record at `record`, its counter at `fence`, shown as `name`.
    pub fn new(name: String, record: String, fence: String) -> Self {
        Self(backend::RecordKeys {
            user: name,
            record,
            fence,
        })
    }

    /// The record's key.
    pub fn record(&self) -> &str {
        &self.0.record
    }

    /// The fencing counter's key.
    pub fn fence(&self) -> &str {
        &self.0.fence
    }

    /// The name logs use for the record.
    pub fn name(&self) -> &str {
        &self.0.user
    }
}

/// What a claim found: the record is ours (`Claimed::Claimed`, holding
/// its [`RecordLease`]), another claimer runs it (`Claimed::Processing`,
/// with what is left of its lease), it completed (`Claimed::Completed`,
/// with its [`Completion`]), or its key was used with another fingerprint
/// (`Claimed::Mismatch`). New answers may be added: match with a wildcard
/// arm. (The stores answer the same type holding the claim's fencing
/// token; this one holds the lease.)
pub type Claimed<L = RecordLease> = crate::primitive::record::Claimed<L>;

/// A claimed record: its lease is renewed by the client's watchdog while
/// this lives; dropped unfinished, the record is released (retried until
/// the lease would end), so a retry can run.
#[derive(Debug)]
pub struct RecordLease {
    guard: LockGuard,
    /// The record's keys (also in the guard's lease, as a lease's).
    keys: backend::RecordKeys,
}

impl RecordLease {
    /// The fencing token issued with the claim.
    pub fn fencing_token(&self) -> u64 {
        self.guard.held().fence()
    }

    /// The held lease, for a context handed to the work.
    pub(crate) fn held(&self) -> Arc<HeldLock> {
        Arc::clone(self.guard.held())
    }

    /// Completes when the lease is known or presumed lost.
    pub fn lost(&self) -> Lost {
        self.guard.lost()
    }

    /// True while the lease is presumed held.
    pub fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    /// in progress -> completed with `result`, kept for `retention`:
    /// `Ok(false)` when the record was no longer ours. Renewals pause while
    /// it runs; after an error the lease is still held (and renewed), so
    /// the caller may try again.
    ///
    /// # Errors
    /// The store failed.
    pub async fn complete(
        &mut self,
        result: &Completion,
        retention: Duration,
        limit: Duration,
    ) -> Result<bool, RecordError> {
        let keys = &self.keys;
        self.guard
            .finish_with(|core: Arc<Core>, held: Arc<HeldLock>| async move {
                let complete = Complete {
                    keys,
                    token: held.token(),
                    result,
                    retention,
                };
                core.backend().complete(&complete, limit).await
            })
            .await
            .map_err(RecordError)
    }

    /// in progress -> absent, so that a retry runs: `Ok(false)` when the
    /// record was no longer ours. On an error, the release is retried from
    /// a spawned task until the lease would end (as on drop).
    ///
    /// # Errors
    /// The store failed.
    pub async fn release(mut self, limit: Duration) -> Result<bool, RecordError> {
        self.guard
            .finish_with(|core: Arc<Core>, held: Arc<HeldLock>| async move {
                held.end(core.backend(), limit).await
            })
            .await
            .map_err(RecordError)
    }
}

/// A failed record operation.
#[derive(Debug)]
pub struct RecordError(OpError);

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.refused_command() {
            // Says what to grant, as `LockError::NotPermitted` does.
            Some(command) => write!(
                f,
                "the Redis user may not run `{command}`, which idempotency records need \
                 (NOPERM): {}",
                crate::error::not_permitted_advice(&command)
            ),
            None => self.0.fmt(f),
        }
    }
}

impl std::error::Error for RecordError {}

impl RecordError {
    /// True when trying again may succeed (a timeout, a connection lost,
    /// Redis loading...), false for what will not pass by itself (the
    /// in-memory store is full).
    pub fn is_transient(&self) -> bool {
        self.0.is_transient()
    }

    /// The command the server refused to the client's user (`NOPERM`:
    /// its ACL does not allow it; `evalsha` for a user without
    /// `+@scripting`, as records run scripts), lower case. Not transient.
    pub fn refused_command(&self) -> Option<String> {
        match &self.0 {
            OpError::Redis(e) => crate::store::refused_command(e),
            _ => None,
        }
    }

    /// True when the in-memory store refused for being full.
    pub fn is_full(&self) -> bool {
        matches!(self.0, OpError::Full(_))
    }

    /// True when the client was shut down
    /// ([`LockClient::shutdown`](crate::LockClient::shutdown)): nothing
    /// new is claimed.
    pub fn is_shut_down(&self) -> bool {
        matches!(self.0, OpError::ShutDown)
    }
}

/// Interest in one record's changes, made by [`Records::subscribe`];
/// unsubscribes (with the client's last subscriber of that channel) on
/// drop.
#[derive(Debug)]
pub struct ChannelSubscription {
    subscription: Subscription,
}

impl ChannelSubscription {
    /// Completes on the next change, or at once if one came since the
    /// subscription started (or since the last `changed`) and was not yet
    /// taken by another subscriber. Each change wakes one subscriber of the
    /// record in this client (the longest waiting).
    pub async fn changed(&self) {
        self.subscription.notify().notified().await;
    }

    /// Wakes the next subscriber of the record in this client, as a change
    /// would.
    pub fn wake_next(&self) {
        self.subscription.notify().notify_one();
    }
}
