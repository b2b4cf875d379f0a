//! Records on Redis, through a bb8 pool of multiplexed connections.
//!
//! As in the lock runtime, a command does not check a connection out of the
//! pool (bb8 would PING it first, one more round trip per command): a few
//! cloned handles of multiplexed connections ("slots") carry all commands,
//! round robin, and a slot whose connection fails or hangs is emptied and
//! refilled from the pool by the next command.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use redlock_runtime::LockClient;
use redlock_runtime::bb8_redis::RedisConnectionManager;
use redlock_runtime::bb8_redis::bb8::{Pool, RunError};
use redlock_runtime::bb8_redis::redis::RedisResult;
use redlock_runtime::bb8_redis::redis::aio::MultiplexedConnection;

use super::{
    Claim, RecordKey, StoreError, Stored, Watcher, decode_headers, encode_headers, scripts,
};

type Slot = Mutex<Option<MultiplexedConnection>>;

pub(super) struct RedisStore {
    pool: Pool<RedisConnectionManager>,
    slots: Box<[Slot]>,
    next: AtomicUsize,
    /// For push wake-ups through its subscriber connection.
    client: Option<LockClient>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redis")
            .field("pool", &self.pool.state())
            .field("slots", &self.slots.len())
            .field("client", &self.client)
            .finish()
    }
}

impl RedisStore {
    pub(super) fn new(pool: Pool<RedisConnectionManager>, client: Option<LockClient>) -> Self {
        let n = usize::try_from(pool.config().max_size)
            .unwrap_or(1)
            .clamp(1, 16);
        Self {
            pool,
            slots: (0..n).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            client,
        }
    }

    fn slot(&self, i: usize) -> MutexGuard<'_, Option<MultiplexedConnection>> {
        self.slots[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn connection(&self, i: usize) -> Result<MultiplexedConnection, StoreError> {
        if let Some(conn) = self.slot(i).as_ref() {
            return Ok(conn.clone());
        }
        let pooled = self.pool.get().await.map_err(|e| match e {
            RunError::User(e) => StoreError::Redis(e),
            RunError::TimedOut => StoreError::Pool(format!(
                "timed out after {:?}",
                self.pool.config().connection_timeout
            )),
        })?;
        let conn = (*pooled).clone();
        drop(pooled);
        *self.slot(i) = Some(conn.clone());
        Ok(conn)
    }

    /// One command within `limit`; a connection that fails or hangs is let go.
    async fn run<T, F, Fut>(&self, limit: Duration, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let call = async {
            let conn = self.connection(i).await?;
            f(conn).await.map_err(StoreError::from)
        };
        let result = match tokio::time::timeout(limit, call).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout(limit)),
        };
        let broken = match &result {
            Err(StoreError::Timeout(_)) => true,
            Err(StoreError::Redis(e)) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
            }
            _ => false,
        };
        if broken {
            self.slot(i).take();
        }
        result
    }

    pub(super) async fn claim(
        &self,
        key: &RecordKey,
        owner: &str,
        fingerprint: &str,
        lease: Duration,
        fence_ttl: Duration,
        limit: Duration,
    ) -> Result<Claim, StoreError> {
        let reply: Vec<Vec<u8>> = self
            .run(limit, |mut conn| async move {
                scripts::CLAIM
                    .key(&key.record)
                    .key(&key.fence)
                    .arg(owner)
                    .arg(millis(lease))
                    .arg(fingerprint)
                    .arg(millis(fence_ttl))
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        parse_claim(reply)
    }

    pub(super) async fn renew(
        &self,
        key: &RecordKey,
        owner: &str,
        lease: Duration,
        limit: Duration,
    ) -> Result<bool, StoreError> {
        let done: i64 = self
            .run(limit, |mut conn| async move {
                scripts::RENEW
                    .key(&key.record)
                    .arg(owner)
                    .arg(millis(lease))
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(done == 1)
    }

    pub(super) async fn complete(
        &self,
        key: &RecordKey,
        owner: &str,
        stored: &Stored,
        retention: Duration,
        limit: Duration,
    ) -> Result<bool, StoreError> {
        let headers = encode_headers(&stored.headers);
        let (state, body): (&str, &[u8]) = match &stored.body {
            Some(body) => ("c", body),
            None => ("n", b""),
        };
        let done: i64 = self
            .run(limit, |mut conn| {
                let headers = &headers;
                async move {
                    scripts::COMPLETE
                        .key(&key.record)
                        .arg(owner)
                        .arg(state)
                        .arg(stored.status.as_u16())
                        .arg(headers.as_slice())
                        .arg(body)
                        .arg(millis(retention))
                        .invoke_async(&mut conn)
                        .await
                }
            })
            .await?;
        Ok(done == 1)
    }

    pub(super) async fn release(
        &self,
        key: &RecordKey,
        owner: &str,
        limit: Duration,
    ) -> Result<bool, StoreError> {
        let done: i64 = self
            .run(limit, |mut conn| async move {
                scripts::RELEASE
                    .key(&key.record)
                    .arg(owner)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(done == 1)
    }

    pub(super) async fn watch(&self, key: &RecordKey, limit: Duration) -> Watcher {
        if let Some(client) = &self.client
            && let Some(watch) =
                redlock_runtime::__private::subscribe(client, &key.record, limit).await
        {
            return Watcher::Channel(watch);
        }
        Watcher::Poll
    }
}

/// Whole milliseconds, rounded up, at least 1.
fn millis(d: Duration) -> u64 {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    (ms + u64::from(!d.subsec_nanos().is_multiple_of(1_000_000))).max(1)
}

fn parse_claim(reply: Vec<Vec<u8>>) -> Result<Claim, StoreError> {
    let bad = |what: &str| StoreError::Reply(format!("claim: {what}"));
    let number = |raw: &[u8]| -> Option<i64> { std::str::from_utf8(raw).ok()?.parse().ok() };
    let mut fields = reply.into_iter();
    let tag = fields.next().ok_or_else(|| bad("empty reply"))?;
    match tag.as_slice() {
        b"claimed" => {
            let fence = fields
                .next()
                .and_then(|f| number(&f))
                .and_then(|f| u64::try_from(f).ok())
                .ok_or_else(|| bad("no fencing token"))?;
            Ok(Claim::Claimed { fence })
        }
        b"mismatch" => Ok(Claim::Mismatch),
        b"processing" => {
            let pttl = fields.next().and_then(|f| number(&f)).unwrap_or(0);
            let lease_left = Duration::from_millis(u64::try_from(pttl).unwrap_or(0));
            Ok(Claim::Processing { lease_left })
        }
        state @ (b"c" | b"n") => {
            let replayable = state == b"c";
            let code = fields
                .next()
                .and_then(|f| number(&f))
                .and_then(|c| u16::try_from(c).ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or_else(|| bad("no status code"))?;
            let headers = decode_headers(&fields.next().unwrap_or_default())?;
            let body = fields.next().unwrap_or_default();
            Ok(Claim::Completed(Stored {
                status: code,
                headers,
                body: replayable.then(|| Bytes::from(body)),
            }))
        }
        other => Err(bad(&format!(
            "unknown state {:?}",
            String::from_utf8_lossy(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up() {
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::from_micros(1_500)), 2);
        assert_eq!(millis(Duration::from_secs(30)), 30_000);
    }

    #[test]
    fn claim_replies_parse() {
        let v = |items: &[&[u8]]| items.iter().map(|i| i.to_vec()).collect::<Vec<_>>();
        assert!(matches!(
            parse_claim(v(&[b"claimed", b"7"])),
            Ok(Claim::Claimed { fence: 7 })
        ));
        assert!(matches!(
            parse_claim(v(&[b"mismatch"])),
            Ok(Claim::Mismatch)
        ));
        assert!(matches!(
            parse_claim(v(&[b"processing", b"1500"])),
            Ok(Claim::Processing { lease_left }) if lease_left == Duration::from_millis(1500)
        ));
        match parse_claim(v(&[b"c", b"201", b"location:/o/1\n", b"{}"])) {
            Ok(Claim::Completed(s)) => {
                assert_eq!(s.status, StatusCode::CREATED);
                assert_eq!(s.headers["location"], "/o/1");
                assert_eq!(s.body.as_deref(), Some(&b"{}"[..]));
            }
            other => panic!("{other:?}"),
        }
        match parse_claim(v(&[b"n", b"200", b"", b""])) {
            Ok(Claim::Completed(s)) => assert!(s.body.is_none()),
            other => panic!("{other:?}"),
        }
        assert!(parse_claim(v(&[])).is_err());
        assert!(parse_claim(v(&[b"zz"])).is_err());
    }
}
