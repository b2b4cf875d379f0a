//! [`ForceReleased`]: what an operator's break-glass,
//! [`LockClient::force_release`](crate::LockClient::force_release), ended.

use std::sync::Arc;

use crate::backend::{ForceRelease, keys};
use crate::core::Core;
use crate::error::{LockError, Operation};
use crate::inspect::Holder;
use crate::util::validate_key;

/// What [`LockClient::force_release`](crate::LockClient::force_release)
/// ended. Never an owner token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForceReleased {
    /// The name released.
    pub key: String,
    /// The holders whose leases were ended: the lock's, and the
    /// read/write lock's writer and readers (their names and since when
    /// they held it; no lease is left). Empty when nothing was held.
    pub ended: Vec<Holder>,
    /// The lock's fencing counter as raised when its holder was ended:
    /// every token issued from now on is above it, so above the ended
    /// holder's, and a fenced store that saw this one (or any later one)
    /// rejects the ended holder's writes.
    pub fencing_token: Option<u64>,
    /// The same for the read/write lock, when its writer was ended.
    pub write_fencing_token: Option<u64>,
}

impl ForceReleased {
    /// Whether anything was held (and is now ended).
    pub fn ended_any(&self) -> bool {
        !self.ended.is_empty()
    }
}

/// Ends the lock and the read/write lock named `key`, whoever holds them
/// (see [`LockClient::force_release`](crate::LockClient::force_release)).
pub(crate) async fn force_release(core: &Arc<Core>, key: &str) -> Result<ForceReleased, LockError> {
    validate_key(key)?;
    core.check_open(key)?;
    let settings = core.settings();
    let (lock, rw, _) = keys::of_name(&settings.key_prefix, key);
    let force = ForceRelease {
        keys: &lock,
        rw: &rw,
    };
    let reply = (core.backend())
        .force_release(&force, settings.command_timeout)
        .await
        .map_err(|e| e.into_lock_error(key, Operation::ForceRelease))?;
    let ended: Vec<Holder> = (reply.ended.into_iter())
        .map(|lease| Holder::of(&lease))
        .collect();
    let names: Vec<&str> = (ended.iter())
        .map(|h| h.client_name.as_deref().unwrap_or("an unnamed client"))
        .collect();
    tracing::warn!(
        target: "redlock",
        key = %key,
        operator = %settings.client_name,
        ended = ?names,
        fencing_token = reply.fence.or(reply.write_fence),
        "lock force-released by an operator"
    );
    Ok(ForceReleased {
        key: key.to_owned(),
        ended,
        fencing_token: reply.fence,
        write_fencing_token: reply.write_fence,
    })
}
