//! A lease's verbs on one Redis server, over its connection lanes (see
//! [`store::server`](crate::store::server)): each goes to the verb of the
//! primitive whose keys it carries.

use std::time::Duration;

use super::{
    Acquire, AcquireReply, End, Ended, GiveBack, Keys, Renewal, Shared, acquire_reply, took,
};
use crate::store::OpError;
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

impl RedisBackend {
    /// One acquire attempt of whatever `request.keys` name, by their
    /// primitive (a lock's: see [`acquire_lock`](Self::acquire_lock)).
    pub(crate) async fn acquire(
        &self,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let keys = request.keys;
        if let Some(shared) = Shared::of(keys) {
            // Boxed: a lock's acquire carries none of it.
            return Box::pin(self.acquire_shared(shared, request, limit)).await;
        }
        let Keys::Lock(keys) = keys else {
            return Err(OpError::Unsupported("acquire of a record"));
        };
        self.acquire_lock(keys, request, limit).await
    }

    /// One acquire attempt by the script `call` builds (its reply
    /// `{1, fence[, now_ms]}` or `{0, pttl}`: see [`acquire_reply`]), sent
    /// as every write is (see
    /// [`acknowledged_write`](Self::acknowledged_write)).
    pub(crate) async fn acquire_by<'a>(
        &self,
        token: &str,
        limit: Duration,
        call: impl Fn() -> ScriptCall<'a>,
    ) -> Result<AcquireReply, OpError> {
        let reply: Vec<i64> = self
            .acknowledged_write(token, limit, |r: &Vec<i64>| took(r), |_| call())
            .await?;
        Ok(acquire_reply(&reply))
    }

    /// The lane an acquire of this backend went on: a give-back of an
    /// acquire whose answer was lost must follow it on its connection.
    pub(crate) fn acquire_lane(&self) -> On {
        On::Waiting
    }

    /// Gives back what an acquire that did not return a guard may hold:
    /// the lock, and (fair) its place in the line. Sent on the connection
    /// of that acquire, so it lands after it.
    pub(crate) async fn give_back(
        &self,
        give_back: &GiveBack<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let GiveBack { keys, token, fair } = *give_back;
        match keys {
            Keys::Lock(keys) => self.give_back_lock(keys, token, fair, limit).await,
            Keys::Record(record) => {
                (self.release_record(self.acquire_lane(), record, token, limit)).await
            }
            Keys::Read(rw) => self.give_back_shared(Shared::Read(rw), token, limit).await,
            Keys::Write(rw) => self.give_back_shared(Shared::Write(rw), token, limit).await,
            Keys::Permits(permits) => {
                (self.give_back_shared(Shared::Permits(permits), token, limit)).await
            }
        }
    }

    /// Gives back a synchronizer's lease, on the acquire's connection.
    async fn give_back_shared(
        &self,
        shared: Shared<'_>,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        self.release_shared(self.acquire_lane(), shared, token, limit)
            .await
    }

    /// Ends a held lock: deletes it (a fair one wakes the first waiter in
    /// line), or with a minimum hold not yet over on Redis's clock, cuts
    /// the lease to what is left of it. A single Redis issued the fencing
    /// token from this very counter: nothing to raise.
    pub(crate) async fn end(&self, end: &End<'_>, limit: Duration) -> Result<Ended, OpError> {
        let End { keys, token, .. } = *end;
        let released = match keys {
            Keys::Lock(keys) => return self.end_lock(keys, end, limit).await,
            // Boxed: a plain lock's end carries none of these futures.
            Keys::Record(record) => {
                Box::pin(self.release_record(On::Plain, record, token, limit)).await?
            }
            Keys::Read(rw) => {
                Box::pin(self.release_shared(On::Plain, Shared::Read(rw), token, limit)).await?
            }
            Keys::Write(rw) => {
                Box::pin(self.release_shared(On::Plain, Shared::Write(rw), token, limit)).await?
            }
            Keys::Permits(permits) => {
                let shared = Shared::Permits(permits);
                Box::pin(self.release_shared(On::Plain, shared, token, limit)).await?
            }
        };
        Ok(if released {
            Ended::Deleted
        } else {
            Ended::NotOwner
        })
    }

    pub(crate) async fn extend(
        &self,
        renewal: &Renewal<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        if let Keys::Lock(_) = renewal.keys {
            // A plain lock: `SET .. IFEQ` where the server has it.
            let mut answers = self
                .renew(std::slice::from_ref(renewal), false, limit)
                .await?;
            return answers
                .pop()
                .unwrap_or_else(|| Err(OpError::Reply("no answer to a renewal".to_owned())));
        }
        let Renewal { keys, token, ttl } = *renewal;
        let ttl_ms = millis_ceil(ttl);
        let (first, second) = keys.renewed();
        let done: i64 = self
            .acknowledged_write(
                token,
                limit,
                |done| *done == 1,
                |_| {
                    let call = ScriptCall::new(super::renew::renew_script(keys.kind())).key(first);
                    match second {
                        Some(second) => call.key(second),
                        None => call,
                    }
                    .arg(token)
                    .arg(ttl_ms)
                    .arg(0)
                },
            )
            .await?;
        Ok(done == 1)
    }
}
