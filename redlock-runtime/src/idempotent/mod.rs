//! Run-once calls: [`Idempotent`] (the request, its options, the run)
//! over the [`records`](crate::records) lifecycle; `error.rs` says why a
//! call did not run, `format.rs` how a result is stored.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::client::LockClient;
use crate::lock::{HeldLock, Lost};
use crate::records::{Claimed, End, RecordKeys, Records};

pub use error::IdempotentError;

mod error;
mod format;

/// The default lease of a running call: 30 s, renewed every 10 s while
/// the work runs.
const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// How long a result is kept by default: a day.
const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The largest result stored by default: 1 MiB of JSON.
const DEFAULT_RESULT_LIMIT: usize = 1024 * 1024;
/// The scope of a call that names none.
const DEFAULT_SCOPE: &str = "default";
/// The longest scope.
const MAX_SCOPE_LEN: usize = 256;

impl LockClient {
    /// A call that runs a piece of work once per `key` (a message's id, a
    /// job's run date, a webhook's event id) and answers duplicates with
    /// its result. See [`Idempotent`].
    ///
    /// A key is any non-empty string of at most
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes; others fail with
    /// [`IdempotentError::InvalidKey`] when the call runs.
    pub fn idempotent(&self, key: impl Into<String>) -> Idempotent {
        Idempotent {
            records: Records::new(self),
            prefix: self.key_prefix().to_owned(),
            timeout: self.core().settings().command_timeout,
            key: key.into(),
            scope: DEFAULT_SCOPE.to_owned(),
            fingerprint: Ok(String::new()),
            lease: DEFAULT_LEASE,
            retention: DEFAULT_RETENTION,
            wait: Duration::ZERO,
            result_limit: DEFAULT_RESULT_LIMIT,
        }
    }
}

/// Run a piece of work once per key, and answer duplicates with its
/// result: the promise of the `redlock-axum` layer, for message consumers,
/// webhook processors and retried jobs, where no HTTP layer sits.
///
/// ```
/// use redlock_runtime::{IdempotentError, LockClient};
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = LockClient::in_memory();
/// // A message delivered twice (say by a broker's redelivery):
/// for _ in 0..2 {
///     let receipt = client
///         .idempotent("msg-8f2c")
///         .scope("payments")
///         .fingerprint(b"charge 42 EUR to account 7")
///         .run(|work| async move {
///             // Runs once; the fencing token orders this run against a
///             // late one, for the database to reject.
///             let _ = work.fencing_token();
///             Ok::<_, std::io::Error>(format!("receipt-{}", 1))
///         })
///         .await??;
///     assert_eq!(receipt, "receipt-1"); // the second time, replayed
/// }
/// # Ok(())
/// # }
/// ```
///
/// # What a call answers
///
/// A call claims the record of its key in its scope (see
/// [`records`](crate::records): the same records, scripts and lifecycle as
/// the HTTP layer):
///
/// | the record | the call |
/// |---|---|
/// | absent, or released by a failed run | runs the work, holding a lease renewed by the client's watchdog; stores an `Ok` result, releases the record on an `Err` (or stores the errors [`run_storing_errors`](Self::run_storing_errors) chooses), a panic or a cancellation |
/// | in progress elsewhere | [`IdempotentError::InProgress`], or with [`wait`](Self::wait) waits (bounded) for the result, and runs itself if that run failed |
/// | completed | the stored result, without running the work |
/// | completed with another fingerprint | [`IdempotentError::Mismatch`] |
/// | its holder crashed | taken over once the holder's lease runs out, with a larger fencing token |
///
/// The store failing before the work is claimed is
/// [`IdempotentError::Store`]: the work does not run. A result larger than
/// [`result_limit`](Self::result_limit) (or one that does not
/// serialize) goes to the first caller, and the record is kept as
/// completed without it: duplicates are told
/// [`IdempotentError::TooLarge`], never run the work again.
///
/// # Keys and secrets
///
/// The record is found by the client's key prefix, the scope, and a
/// SHA-256 of the scope and key: the raw key (say a payment's id) never
/// reaches Redis, logs or errors. The scope is written as is
/// (percent-encoded), so an operator can find a scope's records.
///
/// # Topologies
///
/// Every store the client supports: in memory, one Redis, replicas with
/// `WAIT`, Cluster (both keys of a record share one hash tag), Sentinel. A
/// Redlock client has no single Redis: its records are kept in this
/// process, which protects this instance only (a warning is logged once).
///
/// A call is made by [`LockClient::idempotent`]: set its options, then
/// [`run`](Self::run) the work.
#[derive(Debug, Clone)]
#[must_use = "a run-once call does nothing until `run` is awaited"]
pub struct Idempotent {
    records: Records,
    prefix: String,
    timeout: Duration,
    key: String,
    scope: String,
    /// The payload's hash, or why it could not be made.
    fingerprint: Result<String, String>,
    lease: Duration,
    retention: Duration,
    wait: Duration,
    result_limit: usize,
}

impl Idempotent {
    /// What work this is (`"payments"`, `"emails/v2"`): the same key in two
    /// scopes is two records. Change it when the result type changes, so
    /// that old records are not read as the new type. At most 256 bytes.
    /// Defaults to `"default"`.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = scope.into();
        self
    }

    /// The payload the key stands for (hashed with SHA-256; only the hash
    /// is stored): a later call with the same key and another payload gets
    /// [`IdempotentError::Mismatch`] instead of the first payload's result.
    /// Defaults to none: any payload matches.
    pub fn fingerprint(mut self, payload: impl AsRef<[u8]>) -> Self {
        self.fingerprint = Ok(hex(&Sha256::digest(payload.as_ref())));
        self
    }

    /// As [`fingerprint`](Self::fingerprint), over `payload` serialized as
    /// JSON (a message's body less its delivery metadata, say). A payload
    /// that does not serialize fails the call with
    /// [`IdempotentError::InvalidOption`].
    pub fn fingerprint_of<P: Serialize + ?Sized>(mut self, payload: &P) -> Self {
        self.fingerprint = serde_json::to_vec(payload)
            .map(|json| hex(&Sha256::digest(&json)))
            .map_err(|e| format!("the fingerprint's payload did not serialize: {e}"));
        self
    }

    /// How long a running call holds the key without a renewal: the
    /// client's watchdog renews it every third of it while the work runs,
    /// and a crashed worker's key is taken over after it. At least 30 ms.
    /// Defaults to 30 s.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long a completed result is kept and replayed. Defaults to a
    /// day.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// While another call runs the work, wait up to `wait` for its result
    /// (woken by the store's push where the client has one, else looking
    /// every 250 ms), rather than failing at once with
    /// [`IdempotentError::InProgress`]. If that run fails, this call runs
    /// the work itself. Defaults to zero: no waiting.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The largest result stored, in bytes of JSON: a larger one is
    /// returned to its caller, and duplicates get
    /// [`IdempotentError::TooLarge`]. Defaults to 1 MiB.
    pub fn result_limit(mut self, bytes: usize) -> Self {
        self.result_limit = bytes;
        self
    }

    /// Runs `work` once for this key, or answers with what the record
    /// holds (see [`Idempotent`]). `Ok(Ok(value))`: the work's
    /// value, now or replayed; `Ok(Err(e))`: the work ran now and failed
    /// (nothing was stored, so a retry runs it again); `Err(_)`: the work
    /// did not run now, see [`IdempotentError`].
    ///
    /// A panic in `work` releases the record and resumes; dropping the
    /// returned future while the work runs releases it too.
    ///
    /// # Errors
    /// See [`IdempotentError`].
    pub async fn run<F, Fut, T, E>(self, work: F) -> Result<Result<T, E>, IdempotentError>
    where
        F: FnOnce(WorkContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize + DeserializeOwned,
    {
        self.execute(work, |_| None, None).await
    }

    /// As [`run`](Self::run), but an `Err` for which `store` says `true`
    /// is stored and replayed like a value (a payment declined for good),
    /// where `run` releases the record on every error so that a retry runs
    /// again.
    ///
    /// # Errors
    /// See [`IdempotentError`].
    pub async fn run_storing_errors<S, F, Fut, T, E>(
        self,
        store: S,
        work: F,
    ) -> Result<Result<T, E>, IdempotentError>
    where
        S: FnOnce(&E) -> bool,
        F: FnOnce(WorkContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize + DeserializeOwned,
        E: Serialize + DeserializeOwned,
    {
        let limit = self.result_limit;
        let keep = move |e: &E| store(e).then(|| format::encode(false, e, limit));
        self.execute(work, keep, Some(|b: &[u8]| serde_json::from_slice(b)))
            .await
    }

    async fn execute<F, Fut, T, E, K>(
        self,
        work: F,
        keep: K,
        read_err: Option<format::ReadErr<E>>,
    ) -> Result<Result<T, E>, IdempotentError>
    where
        F: FnOnce(WorkContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize + DeserializeOwned,
        K: FnOnce(&E) -> Option<crate::records::Completion>,
    {
        let fingerprint = self.check()?;
        let (keys, key_hash) = self.keys();
        let fence_ttl = self.retention.saturating_add(self.lease);
        let claimed = self
            .records
            .claim_waiting(
                &keys,
                &fingerprint,
                self.lease,
                fence_ttl,
                self.timeout,
                self.wait,
            )
            .await
            .map_err(IdempotentError::Store)?;
        let lease = match claimed {
            Claimed::Claimed(lease) => lease,
            Claimed::Processing { lease_left } => {
                return Err(IdempotentError::InProgress {
                    retry_after: lease_left,
                });
            }
            Claimed::Mismatch => return Err(IdempotentError::Mismatch),
            Claimed::Completed(completion) => {
                tracing::debug!(target: "redlock", record = %keys.name(), "replaying a stored result");
                return format::decode(&completion, read_err);
            }
        };
        let context = WorkContext {
            held: lease.held(),
            key_hash,
        };
        let work = CURRENT.scope(context.clone(), work(context));
        let ran = AssertUnwindSafe(work).catch_unwind().await;
        let (end, result) = match ran {
            Err(panic) => {
                tracing::warn!(target: "redlock", record = %keys.name(), "the work panicked; releasing the record so that a retry runs");
                lease.end(End::Release, self.timeout).await;
                std::panic::resume_unwind(panic);
            }
            Ok(Ok(value)) => {
                let result = format::encode(true, &value, self.result_limit);
                if !result.replayable {
                    tracing::warn!(target: "redlock", record = %keys.name(), limit = self.result_limit, "the result is too large to store (or does not serialize): duplicates are told so, and do not run the work again");
                }
                (End::complete(result, self.retention), Ok(value))
            }
            Ok(Err(error)) => match keep(&error) {
                Some(result) => (End::complete(result, self.retention), Err(error)),
                None => (End::Release, Err(error)),
            },
        };
        lease.end(end, self.timeout).await;
        Ok(result)
    }

    /// The options, checked; the fingerprint.
    fn check(&self) -> Result<String, IdempotentError> {
        let invalid = |reason: String| Err(IdempotentError::InvalidOption { reason });
        if let Some(reason) = crate::util::key_problem(&self.key) {
            return Err(IdempotentError::InvalidKey { reason });
        }
        if self.scope.is_empty() || self.scope.len() > MAX_SCOPE_LEN {
            return invalid(format!(
                "a scope is 1 to {MAX_SCOPE_LEN} bytes; this one is {}",
                self.scope.len()
            ));
        }
        if self.lease < Duration::from_millis(30) {
            return invalid(format!(
                "`lease` is {:?}; at least 30ms is needed (it is renewed every third of it)",
                self.lease
            ));
        }
        if self.retention.is_zero() {
            return invalid("`retention` must not be zero".to_owned());
        }
        self.fingerprint.clone().or_else(invalid)
    }

    /// The record's keys (sharing one hash tag), and the key's hash.
    fn keys(&self) -> (RecordKeys, String) {
        let mut hasher = Sha256::new();
        for part in ["redlock-idempotent", &self.scope, &self.key] {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
        let key_hash = hex(&hasher.finalize()[..16]);
        let scope = crate::__private::encode(&self.scope);
        let record = format!("{}idempotent:{{{scope}:{key_hash}}}", self.prefix);
        let fence = format!("{record}:fence");
        let name = format!("idempotent:{scope}:{key_hash}");
        (RecordKeys::new(name, record, fence), key_hash)
    }
}

tokio::task_local! {
    /// The run-once call whose work this task runs (for
    /// [`WorkContext::current`]).
    static CURRENT: WorkContext;
}

/// What the work is told about its run: its fencing token (pass it to
/// your database, to reject a late writer whose lease was lost), the
/// key's hash (for logs), and whether the lease is still held.
#[derive(Debug, Clone)]
pub struct WorkContext {
    held: Arc<HeldLock>,
    key_hash: String,
}

impl WorkContext {
    /// The context of the run-once work this task runs (the body of an
    /// `#[idempotent]` function, or a closure given to
    /// [`Idempotent::run`]); `None` outside one. In a task the work
    /// spawns, pass the context on instead.
    pub fn current() -> Option<WorkContext> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// The fencing token issued with this run's claim: larger than any
    /// earlier run's of this key (within the fencing counter's retention,
    /// the result's retention plus the lease).
    pub fn fencing_token(&self) -> u64 {
        self.held.fence()
    }

    /// The key's hash (32 hex digits), as the record's name shows it:
    /// what to log instead of the key.
    pub fn key_hash(&self) -> &str {
        &self.key_hash
    }

    /// True while the lease is presumed held.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// Completes when the lease is known or presumed lost (renewals failed
    /// for a whole lease): another worker may take the key over, so stop
    /// writing, or let the fencing token reject late writes.
    pub fn lost(&self) -> Lost {
        self.held.lost_future()
    }
}

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}
