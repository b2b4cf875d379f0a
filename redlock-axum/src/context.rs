//! [`IdempotencyContext`]: what the handler (and outer layers) can know
//! about the idempotent request.

/// Put in the request's extensions before the handler runs, and in the
/// response's extensions of every request the layer ran or replayed.
///
/// Absent when the layer let the request through without idempotency (a
/// method it does not cover, no key, or the store unavailable with
/// `fail_open`): take `Option<Extension<IdempotencyContext>>` in handlers
/// that may see such requests.
///
/// ```
/// use axum::Extension;
/// use redlock_axum::IdempotencyContext;
///
/// async fn create_order(Extension(idem): Extension<IdempotencyContext>) -> String {
///     // Pass the fencing token to the database: it rejects a write from a
///     // request whose lease ran out and passed to a retry.
///     format!("fence {}", idem.fencing_token())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyContext {
    pub(crate) key_hash: String,
    pub(crate) fencing_token: u64,
    pub(crate) replayed: bool,
    pub(crate) derived: bool,
}

impl IdempotencyContext {
    /// The hash of the client's key (128 bits of SHA-256, hex): safe to log,
    /// unlike the key.
    pub fn key_hash(&self) -> &str {
        &self.key_hash
    }

    /// The fencing token of this run of the handler: strictly increasing
    /// for each claim of one key (within the record's retention). `0` on a
    /// replayed response.
    ///
    /// Not async, unlike [`LockGuard::fencing_token`](redlock_runtime::LockGuard::fencing_token):
    /// a record's claim runs a script anyway, and issues the token in it,
    /// so it is known before the handler runs.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// True on a response replayed from the store (the handler did not run).
    pub fn replayed(&self) -> bool {
        self.replayed
    }

    /// True when the key was derived from the request (no key was sent).
    pub fn derived(&self) -> bool {
        self.derived
    }
}
