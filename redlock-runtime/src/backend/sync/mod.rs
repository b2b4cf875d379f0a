//! The synchronizers on one Redis: the read/write lock's two sides and the
//! semaphore's permits (leases like a lock's: acquired, renewed by the
//! watchdog, released), a write lock's downgrade, the countdown latch, and
//! the multi-lock's group of keys under one hash tag, with their scripts
//! (`scripts.rs`, the `.lua` files beside it). (Their twin in process
//! memory is still `backend/memory/sync.rs`: it shares the lock's state.)
//!
//! Writes go through [`acknowledged_write`](RedisBackend::acknowledged_write)
//! like a lock's acquire: with replicas, each is followed by `WAIT` on its
//! connection.

use std::time::Duration;

use super::redis::{acquire_reply, took};
use super::{
    Acquire, AcquireReply, Available, Downgrade, GroupAcquire, GroupReply, Keys, LatchCall,
    LatchOp, LatchReply, OpError, PermitKeys, RwKeys,
};
use crate::store::server::call::ScriptCall;
use crate::store::server::{On, RedisBackend};
use crate::util::millis_ceil;

mod scripts;

pub(crate) use scripts::*;

/// A synchronizer's lease: a reader's, a writer's or a semaphore
/// holder's, with its keys.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shared<'a> {
    Read(&'a RwKeys),
    Write(&'a RwKeys),
    Permits(&'a PermitKeys),
}

impl<'a> Shared<'a> {
    /// The synchronizer's lease `keys` are, if they are one.
    pub(crate) fn of(keys: &'a Keys) -> Option<Self> {
        match keys {
            Keys::Read(rw) => Some(Self::Read(rw)),
            Keys::Write(rw) => Some(Self::Write(rw)),
            Keys::Permits(permits) => Some(Self::Permits(permits)),
            Keys::Lock(_) | Keys::Record(_) => None,
        }
    }
}

impl RedisBackend {
    /// One acquire attempt of a reader, a writer or a semaphore holder.
    pub(crate) async fn acquire_shared(
        &self,
        shared: Shared<'_>,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire {
            token,
            ttl,
            want_time,
            line,
            ..
        } = *request;
        let ttl_ms = millis_ceil(ttl);
        let retention = self.fence_retention_ms;
        // A writer that does not wait does not keep readers out.
        let presence = line.map_or(0, millis_ceil);
        let reply: Vec<i64> = self
            .acknowledged_write(
                token,
                limit,
                |r: &Vec<i64>| took(r),
                |_| match shared {
                    Shared::Permits(keys) => ScriptCall::new(PERMITS_ACQUIRE.on(self.publish))
                        .key(&keys.holders)
                        .key(&keys.counts)
                        .arg(token)
                        .arg(ttl_ms)
                        .arg(keys.limit)
                        .arg(keys.permits),
                    Shared::Write(keys) => ScriptCall::new(WRITE_ACQUIRE.on(self.publish))
                        .key(&keys.rw)
                        .key(&keys.fence)
                        .key(&keys.readers)
                        .key(&keys.writers)
                        .arg(token)
                        .arg(ttl_ms)
                        .arg(presence)
                        .arg(retention)
                        .arg(if want_time { "1" } else { "0" }),
                    Shared::Read(keys) => ScriptCall::new(READ_ACQUIRE.on(self.publish))
                        .key(&keys.rw)
                        .key(&keys.fence)
                        .key(&keys.readers)
                        .key(&keys.writers)
                        .arg(token)
                        .arg(ttl_ms),
                },
            )
            .await?;
        Ok(acquire_reply(&reply))
    }

    /// Releases (or gives back) a reader's, a writer's or a semaphore
    /// holder's lease: `true` when it was still held.
    pub(crate) async fn release_shared(
        &self,
        on: On,
        shared: Shared<'_>,
        token: &str,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let done: i64 = self
            .run(on, Some(token), limit, |mut link| async move {
                let call = match shared {
                    Shared::Permits(keys) => ScriptCall::new(PERMITS_RELEASE.on(self.publish))
                        .key(&keys.holders)
                        .key(&keys.counts),
                    Shared::Write(keys) => ScriptCall::new(WRITE_RELEASE.on(self.publish))
                        .key(&keys.rw)
                        .key(&keys.writers),
                    Shared::Read(keys) => ScriptCall::new(READ_RELEASE.on(self.publish))
                        .key(&keys.readers)
                        .key(&keys.rw)
                        .key(&keys.writers),
                };
                call.arg(token)
                    .invocation()
                    .invoke_async(&mut link.conn)
                    .await
            })
            .await?;
        Ok(done == 1)
    }

    /// Turns a held write lock into a read lock (see
    /// [`DOWNGRADE`]).
    pub(crate) async fn downgrade(
        &self,
        downgrade: &Downgrade<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let Downgrade { keys, token, ttl } = *downgrade;
        let ttl_ms = millis_ceil(ttl);
        let done: i64 = self
            .acknowledged_write(
                token,
                limit,
                |done| *done == 1,
                |_| {
                    ScriptCall::new(DOWNGRADE.on(self.publish))
                        .key(&keys.rw)
                        .key(&keys.readers)
                        .arg(token)
                        .arg(ttl_ms)
                },
            )
            .await?;
        Ok(done == 1)
    }

    /// How many permits of a semaphore are free.
    pub(crate) async fn available(
        &self,
        available: &Available<'_>,
        limit: Duration,
    ) -> Result<u32, OpError> {
        let Available { keys, limit: max } = *available;
        let free: i64 = self
            .run(On::Plain, None, limit, |mut link| async move {
                ScriptCall::new(PERMITS_AVAILABLE.on(self.publish))
                    .key(&keys.holders)
                    .key(&keys.counts)
                    .arg(max)
                    .invocation()
                    .invoke_async(&mut link.conn)
                    .await
            })
            .await?;
        Ok(u32::try_from(free.max(0)).unwrap_or(u32::MAX))
    }

    /// One call on a countdown latch: a set-up or a count-down is a write
    /// (acknowledged by the replicas, when required); a read is not.
    pub(crate) async fn latch(
        &self,
        call: &LatchCall<'_>,
        limit: Duration,
    ) -> Result<LatchReply, OpError> {
        let LatchCall { keys, op } = *call;
        match op {
            LatchOp::Set { count, ttl } => {
                let ttl_ms = millis_ceil(ttl);
                let set: i64 = self
                    .acknowledged_write(
                        &keys.latch,
                        limit,
                        |set| *set == 1,
                        |_| {
                            ScriptCall::new(LATCH_SET.on(self.publish))
                                .key(&keys.latch)
                                .arg(count)
                                .arg(ttl_ms)
                        },
                    )
                    .await?;
                Ok(if set == 1 {
                    LatchReply::Counting {
                        count,
                        ttl_left: Some(ttl),
                    }
                } else {
                    LatchReply::AlreadySet
                })
            }
            LatchOp::CountDown { id } => {
                let left: i64 = self
                    .acknowledged_write(
                        &keys.latch,
                        limit,
                        |left| *left >= 0,
                        |_| {
                            ScriptCall::new(LATCH_COUNT_DOWN.on(self.publish))
                                .key(&keys.latch)
                                .key(&keys.ids)
                                .arg(id)
                        },
                    )
                    .await?;
                Ok(match u64::try_from(left) {
                    Ok(count) => LatchReply::Counting {
                        count,
                        ttl_left: None,
                    },
                    Err(_) => LatchReply::Absent,
                })
            }
            LatchOp::Read => {
                let reply: Vec<i64> = self
                    .run(On::Plain, None, limit, |mut link| async move {
                        ScriptCall::new(LATCH_READ.on(self.publish))
                            .key(&keys.latch)
                            .invocation()
                            .invoke_async(&mut link.conn)
                            .await
                    })
                    .await?;
                let count = reply.first().and_then(|&c| u64::try_from(c).ok());
                let ttl_left = reply
                    .get(1)
                    .and_then(|&t| u64::try_from(t).ok())
                    .map(Duration::from_millis);
                Ok(match count {
                    Some(count) => LatchReply::Counting { count, ttl_left },
                    None => LatchReply::Absent,
                })
            }
        }
    }

    /// Takes every lock of a group under one hash tag, or none (see
    /// [`GROUP_ACQUIRE`]).
    pub(crate) async fn acquire_group(
        &self,
        group: &GroupAcquire<'_>,
        limit: Duration,
    ) -> Result<GroupReply, OpError> {
        let GroupAcquire {
            all, token, ttl, ..
        } = *group;
        let ttl_ms = millis_ceil(ttl);
        let retention = self.fence_retention_ms;
        let reply: Vec<i64> = self
            .acknowledged_write(
                token,
                limit,
                |r: &Vec<i64>| took(r),
                |_| {
                    let mut call = ScriptCall::new(GROUP_ACQUIRE.on(self.publish));
                    for keys in all {
                        call = call.key(&keys.lock).key(&keys.fence).key(&keys.waited);
                    }
                    call.arg(token).arg(ttl_ms).arg(retention)
                },
            )
            .await?;
        group_reply(&reply, all.len())
    }
}

/// Reads a group acquire's reply: `{1, fences..}` or `{0, index, pttl}`.
fn group_reply(reply: &[i64], len: usize) -> Result<GroupReply, OpError> {
    match reply {
        [1, fences @ ..] if fences.len() == len => Ok(GroupReply::Acquired(
            fences
                .iter()
                .map(|&f| u64::try_from(f).unwrap_or(0))
                .collect(),
        )),
        [0, index, pttl] => Ok(GroupReply::Busy {
            index: usize::try_from(*index - 1)
                .unwrap_or(0)
                .min(len.saturating_sub(1)),
            pttl: u64::try_from(*pttl).ok().map(Duration::from_millis),
        }),
        other => Err(OpError::Reply(format!("{other:?}"))),
    }
}
