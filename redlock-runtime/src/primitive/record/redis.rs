//! Idempotency records on one Redis, and their refusal on Redlock: a
//! record lives in one store.

use std::time::Duration;

use super::scripts::*;
use super::{Claim, Claimed, Complete, Completion, RecordKeys};
use crate::store::OpError;
use crate::store::quorum::QuorumBackend;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

impl RedisBackend {
    /// Claims a record; on the owner's connection of the acquire lane, so
    /// a give-back of a claim whose answer was lost lands after it.
    pub(crate) async fn claim(
        &self,
        claim: &Claim<'_>,
        limit: Duration,
    ) -> Result<Claimed<u64>, OpError> {
        let Claim {
            keys,
            token,
            fingerprint,
            lease,
            fence_ttl,
        } = *claim;
        let reply: Vec<Vec<u8>> = self
            .run(On::Waiting, Some(token), limit, |mut link| async move {
                RECORD_CLAIM
                    .on(self.publish)
                    .key(&keys.record)
                    .key(&keys.fence)
                    .arg(token)
                    .arg(millis_ceil(lease).max(1))
                    .arg(fingerprint)
                    .arg(millis_ceil(fence_ttl).max(1))
                    .invoke_async(&mut link.conn)
                    .await
            })
            .await?;
        parse_claim(reply)
    }

    /// Stores a claimed record's result, owner-checked.
    pub(crate) async fn complete(
        &self,
        complete: &Complete<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let Complete {
            keys,
            token,
            result,
            retention,
        } = *complete;
        let state = if result.replayable { "c" } else { "n" };
        let body: &[u8] = if result.replayable { &result.body } else { b"" };
        let done: i64 = self
            .run(On::Plain, Some(token), limit, |mut link| async move {
                RECORD_COMPLETE
                    .on(self.publish)
                    .key(&keys.record)
                    .arg(token)
                    .arg(state)
                    .arg(result.status)
                    .arg(result.headers.as_slice())
                    .arg(body)
                    .arg(millis_ceil(retention).max(1))
                    .invoke_async(&mut link.conn)
                    .await
            })
            .await?;
        Ok(done == 1)
    }
}

impl RedisBackend {
    /// in progress -> absent, owner-checked: whether it was ours.
    pub(crate) async fn release_record(
        &self,
        on: On,
        keys: &RecordKeys,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let done: i64 = self
            .run(on, Some(token), limit, |mut link| async move {
                RECORD_RELEASE
                    .on(self.publish)
                    .key(&keys.record)
                    .arg(token)
                    .invoke_async(&mut link.conn)
                    .await
            })
            .await?;
        Ok(done == 1)
    }
}

impl QuorumBackend {
    /// Records need one store: the record API keeps a Redlock client's
    /// records in memory instead (see `record.rs`), so this never runs.
    pub(crate) async fn claim(
        &self,
        _claim: &Claim<'_>,
        _limit: Duration,
    ) -> Result<Claimed<u64>, OpError> {
        Err(OpError::Reply(
            "idempotency records are not kept on Redlock nodes".to_owned(),
        ))
    }

    /// See [`claim`](Self::claim).
    pub(crate) async fn complete(
        &self,
        _complete: &Complete<'_>,
        _limit: Duration,
    ) -> Result<bool, OpError> {
        Err(OpError::Reply(
            "idempotency records are not kept on Redlock nodes".to_owned(),
        ))
    }
}

/// Reads `RECORD_CLAIM`'s reply.
fn parse_claim(reply: Vec<Vec<u8>>) -> Result<Claimed<u64>, OpError> {
    let bad = |what: &str| OpError::Reply(format!("claim: {what}"));
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
            Ok(Claimed::Claimed(fence))
        }
        b"mismatch" => Ok(Claimed::Mismatch),
        b"processing" => {
            let pttl = fields.next().and_then(|f| number(&f)).unwrap_or(0);
            let lease_left = Duration::from_millis(u64::try_from(pttl).unwrap_or(0));
            Ok(Claimed::Processing { lease_left })
        }
        state @ (b"c" | b"n") => {
            let replayable = state == b"c";
            let status = fields
                .next()
                .and_then(|f| number(&f))
                .and_then(|c| u16::try_from(c).ok())
                .ok_or_else(|| bad("no status code"))?;
            let headers = fields.next().unwrap_or_default();
            let body = fields.next().unwrap_or_default();
            Ok(Claimed::Completed(Completion {
                replayable,
                status,
                headers,
                body,
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
    fn claim_replies_parse() {
        let v = |items: &[&[u8]]| items.iter().map(|i| i.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            parse_claim(v(&[b"claimed", b"7"])).ok(),
            Some(Claimed::Claimed(7))
        );
        assert_eq!(parse_claim(v(&[b"mismatch"])).ok(), Some(Claimed::Mismatch));
        assert_eq!(
            parse_claim(v(&[b"processing", b"1500"])).ok(),
            Some(Claimed::Processing {
                lease_left: Duration::from_millis(1500)
            })
        );
        match parse_claim(v(&[b"c", b"201", b"location:/o/1\n", b"{}"])) {
            Ok(Claimed::Completed(c)) => {
                assert!(c.replayable);
                assert_eq!(c.status, 201);
                assert_eq!(c.headers, b"location:/o/1\n");
                assert_eq!(c.body, b"{}");
            }
            other => panic!("{other:?}"),
        }
        match parse_claim(v(&[b"n", b"200", b"", b""])) {
            Ok(Claimed::Completed(c)) => assert!(!c.replayable),
            other => panic!("{other:?}"),
        }
        assert!(parse_claim(v(&[])).is_err());
        assert!(parse_claim(v(&[b"zz"])).is_err());
    }
}
