//! A synchronizer's lease (a reader's, a writer's, a semaphore holder's):
//! which primitive's script an acquire or release of it runs on one
//! Redis, and the renewal of the leases kept in a sorted set.

use std::time::Duration;

use super::{Acquire, AcquireReply, Keys};
use crate::primitive::{PermitKeys, RwKeys};
use crate::scripts::{LEASES, Lua};
use crate::store::OpError;
use crate::store::server::{On, RedisBackend};

/// Resets one lease in a sorted set (a reader's, a semaphore holder's)
/// (`renew.lua`).
pub(crate) static LEASE_RENEW: Lua = Lua::new(
    "primitive/lease/renew.lua",
    &[LEASES],
    include_str!("renew.lua"),
);

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
        match shared {
            Shared::Read(keys) => self.acquire_read(keys, request, limit).await,
            Shared::Write(keys) => self.acquire_write(keys, request, limit).await,
            Shared::Permits(keys) => self.acquire_permits(keys, request, limit).await,
        }
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
        match shared {
            Shared::Read(keys) => self.release_read(on, keys, token, limit).await,
            Shared::Write(keys) => self.release_write(on, keys, token, limit).await,
            Shared::Permits(keys) => self.release_permits(on, keys, token, limit).await,
        }
    }
}
