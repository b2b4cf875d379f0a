//! Where records live: Redis (through a `LockClient` or its bb8 pool), or
//! this process's memory for an in-memory `LockClient`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use redlock_runtime::LockClient;
use redlock_runtime::bb8_redis::RedisConnectionManager;
use redlock_runtime::bb8_redis::bb8::Pool;

mod memory;
mod redis_store;
mod scripts;

use self::memory::MemoryStore;
use self::redis_store::RedisStore;

/// Where the layer keeps its records: made from a [`LockClient`] (its Redis
/// pool; an in-memory client keeps records in this process) or from a
/// `bb8-redis` pool.
///
/// Cheap to clone. Records of one store are shared by every layer built
/// with it (and with the same Redis).
#[derive(Clone)]
pub struct IdempotencyStore {
    inner: Arc<Backend>,
}

enum Backend {
    Redis(RedisStore),
    Memory(MemoryStore),
}

impl fmt::Debug for IdempotencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.inner {
            Backend::Redis(r) => f.debug_tuple("IdempotencyStore").field(r).finish(),
            Backend::Memory(_) => f.write_str("IdempotencyStore(in-memory)"),
        }
    }
}

impl From<LockClient> for IdempotencyStore {
    /// On Redis, the client's pool (and its subscriber connection, which
    /// wakes duplicates waiting with `wait_for_result`); in memory, a store
    /// in this process. A Redlock client has no single Redis: its records
    /// are kept in this process too, with a warning logged, so build the
    /// layer from a single-Redis client or a `bb8-redis` pool instead.
    fn from(client: LockClient) -> Self {
        let backend = match client.pool() {
            Some(pool) => Backend::Redis(RedisStore::new(pool.clone(), Some(client.clone()))),
            None => {
                if client.mode() == redlock_runtime::Mode::Redlock {
                    tracing::warn!(
                        target: "redlock_axum",
                        "a Redlock client has no single Redis to keep idempotency records in: \
                         they are kept in this process's memory, which protects this instance \
                         only; build the layer from a single-Redis LockClient or a bb8-redis pool"
                    );
                }
                Backend::Memory(MemoryStore::default())
            }
        };
        Self {
            inner: Arc::new(backend),
        }
    }
}

impl From<&LockClient> for IdempotencyStore {
    fn from(client: &LockClient) -> Self {
        client.clone().into()
    }
}

impl From<Pool<RedisConnectionManager>> for IdempotencyStore {
    /// Records in this pool's Redis. Duplicates waiting with
    /// `wait_for_result` poll, as there is no URL to subscribe with.
    fn from(pool: Pool<RedisConnectionManager>) -> Self {
        Self {
            inner: Arc::new(Backend::Redis(RedisStore::new(pool, None))),
        }
    }
}

/// The Redis keys of one record, sharing one `{hash tag}`.
#[derive(Debug, Clone)]
pub(crate) struct RecordKey {
    pub(crate) record: String,
    pub(crate) fence: String,
}

impl RecordKey {
    /// `prefix{scope_hash:METHOD:route:k|d:key_hash}`, with braces in the
    /// route escaped so that the whole record shares one hash tag.
    pub(crate) fn new(
        prefix: &str,
        scope_hash: &str,
        method: &str,
        route: &str,
        derived: bool,
        key_hash: &str,
    ) -> Self {
        let route = route.replace('{', "%7B").replace('}', "%7D");
        let kind = if derived { 'd' } else { 'k' };
        let record = format!("{prefix}{{{scope_hash}:{method}:{route}:{kind}:{key_hash}}}");
        let fence = format!("{record}:fence");
        Self { record, fence }
    }
}

/// What a claim found.
#[derive(Debug)]
pub(crate) enum Claim {
    /// The record is ours now, with this fencing token.
    Claimed { fence: u64 },
    /// Another request holds it; its lease has this much left.
    Processing { lease_left: Duration },
    /// It completed; replay this (body `None`: too large to replay).
    Completed(Stored),
    /// The key was used with another fingerprint.
    Mismatch,
}

/// A completed record.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    /// `None`: completed, but too large to replay.
    pub(crate) body: Option<Bytes>,
}

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("Redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("Redis failed: {0}")]
    Redis(#[from] redlock_runtime::bb8_redis::redis::RedisError),
    #[error("no Redis connection from the pool: {0}")]
    Pool(String),
    #[error("unexpected reply from Redis: {0}")]
    Reply(String),
    #[error(
        "the in-memory store holds {0} records, its most; use a Redis-backed LockClient for \
         more, or a shorter retention"
    )]
    Full(usize),
}

impl StoreError {
    /// True when the command may have been applied although no answer came.
    pub(crate) fn outcome_unknown(&self) -> bool {
        match self {
            Self::Timeout(_) | Self::Reply(_) => true,
            Self::Redis(e) => e.is_io_error() || e.is_timeout() || e.is_connection_dropped(),
            Self::Pool(_) | Self::Full(_) => false,
        }
    }
}

/// A registered interest in a record's next change (for
/// `wait_for_result`): registered before the record is read again, so a
/// change in between is not missed.
pub(crate) enum Watcher {
    /// Push through the `LockClient`'s subscriber.
    Channel(redlock_runtime::__private::ChannelSubscription),
    /// In-memory: any change wakes all watchers.
    Local(memory::LocalWatch),
    /// No push: poll.
    Poll,
}

impl Watcher {
    /// Waits for the next change, at most `max`. True when woken by one.
    pub(crate) async fn changed(&mut self, max: Duration) -> bool {
        match self {
            Self::Channel(watch) => tokio::time::timeout(max, watch.changed()).await.is_ok(),
            Self::Local(watch) => watch.changed(max).await,
            Self::Poll => {
                tokio::time::sleep(max).await;
                false
            }
        }
    }

    /// Passes a wake-up on to the next watcher in this process (each
    /// message wakes one).
    pub(crate) fn pass_on(&self) {
        if let Self::Channel(watch) = self {
            watch.wake_next();
        }
    }
}

impl IdempotencyStore {
    /// absent -> in progress, or what is there.
    pub(crate) async fn claim(
        &self,
        key: &RecordKey,
        owner: &str,
        fingerprint: &str,
        lease: Duration,
        fence_ttl: Duration,
        limit: Duration,
    ) -> Result<Claim, StoreError> {
        match &*self.inner {
            Backend::Redis(r) => {
                r.claim(key, owner, fingerprint, lease, fence_ttl, limit)
                    .await
            }
            Backend::Memory(m) => m
                .claim(key, owner, fingerprint, lease, fence_ttl)
                .ok_or(StoreError::Full(memory::MAX_RECORDS)),
        }
    }

    /// Resets the lease; false when the record is no longer ours.
    pub(crate) async fn renew(
        &self,
        key: &RecordKey,
        owner: &str,
        lease: Duration,
        limit: Duration,
    ) -> Result<bool, StoreError> {
        match &*self.inner {
            Backend::Redis(r) => r.renew(key, owner, lease, limit).await,
            Backend::Memory(m) => Ok(m.renew(key, owner, lease)),
        }
    }

    /// in progress -> completed; false when the record is no longer ours.
    pub(crate) async fn complete(
        &self,
        key: &RecordKey,
        owner: &str,
        stored: &Stored,
        retention: Duration,
        limit: Duration,
    ) -> Result<bool, StoreError> {
        match &*self.inner {
            Backend::Redis(r) => r.complete(key, owner, stored, retention, limit).await,
            Backend::Memory(m) => Ok(m.complete(key, owner, stored, retention)),
        }
    }

    /// in progress -> absent; false when the record is no longer ours.
    pub(crate) async fn release(
        &self,
        key: &RecordKey,
        owner: &str,
        limit: Duration,
    ) -> Result<bool, StoreError> {
        match &*self.inner {
            Backend::Redis(r) => r.release(key, owner, limit).await,
            Backend::Memory(m) => Ok(m.release(key, owner)),
        }
    }

    /// Starts watching a record for changes.
    pub(crate) async fn watch(&self, key: &RecordKey, limit: Duration) -> Watcher {
        match &*self.inner {
            Backend::Redis(r) => r.watch(key, limit).await,
            Backend::Memory(m) => Watcher::Local(m.watch()),
        }
    }
}

/// `name:value\n` per header; header values never hold `\n`.
pub(crate) fn encode_headers(headers: &HeaderMap) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.push(b':');
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out
}

pub(crate) fn decode_headers(raw: &[u8]) -> Result<HeaderMap, StoreError> {
    let mut headers = HeaderMap::new();
    for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| StoreError::Reply("a stored header has no `:`".to_owned()))?;
        let name = HeaderName::from_bytes(&line[..colon])
            .map_err(|e| StoreError::Reply(format!("stored header name: {e}")))?;
        let value = HeaderValue::from_bytes(&line[colon + 1..])
            .map_err(|e| StoreError::Reply(format!("stored header value: {e}")))?;
        headers.append(name, value);
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let mut h = HeaderMap::new();
        h.append("content-type", HeaderValue::from_static("application/json"));
        h.append("link", HeaderValue::from_static("<a>; rel=x"));
        h.append("link", HeaderValue::from_static("<b>; rel=y"));
        h.append("location", HeaderValue::from_static("/orders/1?a=b:c"));
        let back = decode_headers(&encode_headers(&h)).expect("decodes");
        assert_eq!(back, h);
    }

    #[test]
    fn a_record_shares_one_hash_tag_even_with_braces_in_the_route() {
        let k = RecordKey::new("idem:", "s", "POST", "/orders/{id}", false, "h");
        assert_eq!(k.record, "idem:{s:POST:/orders/%7Bid%7D:k:h}");
        assert_eq!(k.fence, "idem:{s:POST:/orders/%7Bid%7D:k:h}:fence");
        let d = RecordKey::new("idem:", "s", "POST", "/orders", true, "h");
        assert_ne!(
            d.record,
            RecordKey::new("idem:", "s", "POST", "/orders", false, "h").record
        );
    }
}
