//! Where records live: the runtime's record API over a [`LockClient`] (its
//! Redis, on its connections, under its deadlines and error rules; in
//! memory for an in-memory client). This module only turns HTTP responses
//! into stored results and back.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use redlock_runtime::records::{Claimed, Completion, RecordError, RecordKeys, Records};
use redlock_runtime::{LockClient, RedisPool};

/// Where the layer keeps its records: made from a [`LockClient`] (its
/// Redis; an in-memory client keeps records in this process) or from a
/// `bb8-redis` pool.
///
/// Cheap to clone. Records of one store are shared by every layer built
/// with it (and with the same Redis).
#[derive(Clone)]
pub struct IdempotencyStore {
    records: Records,
}

impl fmt::Debug for IdempotencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.records.in_memory() {
            return f.write_str("IdempotencyStore(in-memory)");
        }
        f.debug_tuple("IdempotencyStore")
            .field(&self.records)
            .finish()
    }
}

impl From<LockClient> for IdempotencyStore {
    /// On Redis, the client's connections (and its subscriber connection,
    /// which wakes duplicates waiting with `wait_for_result`); in memory, a
    /// store in this process. A Redlock client has no single Redis: its
    /// records are kept in this process too, with a warning logged, so
    /// build the layer from a single-Redis client or a `bb8-redis` pool
    /// instead.
    fn from(client: LockClient) -> Self {
        (&client).into()
    }
}

impl From<&LockClient> for IdempotencyStore {
    fn from(client: &LockClient) -> Self {
        Self {
            records: Records::new(client),
        }
    }
}

impl From<RedisPool> for IdempotencyStore {
    /// Records in this pool's Redis. Duplicates waiting with
    /// `wait_for_result` poll, as there is no URL to subscribe with.
    fn from(pool: RedisPool) -> Self {
        LockClient::from_pool(pool).into()
    }
}

/// The Redis keys of one record, sharing one `{hash tag}`.
pub(crate) fn record_keys(
    prefix: &str,
    scope_hash: &str,
    method: &str,
    route: &str,
    derived: bool,
    key_hash: &str,
) -> RecordKeys {
    // `prefix{scope_hash:METHOD:route:k|d:key_hash}`, with braces in the
    // route escaped so that the whole record shares one hash tag.
    let route = route.replace('{', "%7B").replace('}', "%7D");
    let kind = if derived { 'd' } else { 'k' };
    let record = format!("{prefix}{{{scope_hash}:{method}:{route}:{kind}:{key_hash}}}");
    let fence = format!("{record}:fence");
    RecordKeys::new(format!("idempotency:{key_hash}"), record, fence)
}

/// A completed record.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    /// `None`: completed, but too large to replay.
    pub(crate) body: Option<Bytes>,
}

impl Stored {
    /// As the runtime stores it.
    pub(crate) fn completion(&self) -> Completion {
        let (status, headers) = (self.status.as_u16(), encode_headers(&self.headers));
        match &self.body {
            Some(body) => Completion::new(status, headers, body.to_vec()),
            None => Completion::unreplayable(status, headers),
        }
    }

    /// As the runtime stored it; `Err` says why it does not decode.
    pub(crate) fn from_completion(c: Completion) -> Result<Self, String> {
        let status = StatusCode::from_u16(c.status)
            .map_err(|_| format!("stored status code {} is not valid", c.status))?;
        Ok(Self {
            status,
            headers: decode_headers(&c.headers)?,
            body: c.replayable.then(|| Bytes::from(c.body)),
        })
    }
}

impl IdempotencyStore {
    /// Claims the record, waiting up to `wait` while another request
    /// holds it (see [`Records::claim_waiting`]).
    pub(crate) async fn claim(
        &self,
        keys: &RecordKeys,
        fingerprint: &str,
        (lease, fence_ttl, limit): (Duration, Duration, Duration),
        wait: Duration,
    ) -> Result<Claimed, RecordError> {
        self.records
            .claim_waiting(keys, fingerprint, lease, fence_ttl, limit, wait)
            .await
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

pub(crate) fn decode_headers(raw: &[u8]) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| "a stored header has no `:`".to_owned())?;
        let name = HeaderName::from_bytes(&line[..colon])
            .map_err(|e| format!("stored header name: {e}"))?;
        let value = HeaderValue::from_bytes(&line[colon + 1..])
            .map_err(|e| format!("stored header value: {e}"))?;
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
        let k = record_keys("idem:", "s", "POST", "/orders/{id}", false, "h");
        assert_eq!(k.record(), "idem:{s:POST:/orders/%7Bid%7D:k:h}");
        assert_eq!(k.fence(), "idem:{s:POST:/orders/%7Bid%7D:k:h}:fence");
        let d = record_keys("idem:", "s", "POST", "/orders", true, "h");
        assert_ne!(
            d.record(),
            record_keys("idem:", "s", "POST", "/orders", false, "h").record()
        );
    }
}
