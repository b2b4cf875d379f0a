//! The process-wide client that `#[distributed_lock]` functions use when
//! they name no `client = ..`.

use std::sync::{PoisonError, RwLock};

use crate::client::LockClient;

static INSTALLED: RwLock<Option<LockClient>> = RwLock::new(None);

/// Installs `client` as the process-wide lock client, used by every
/// `#[distributed_lock]` function that names no `client = ..`. Call it once
/// at startup, before the first such function runs; until then they fail
/// with [`ConfigError::NotInstalled`](crate::ConfigError::NotInstalled).
///
/// Installing again replaces the client (locks taken through the old one
/// stay valid until released) and returns the one it replaced.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use redlock_runtime::{LockClient, install, installed};
///
/// // At startup, usually `LockClient::connect(url).await?`.
/// let previous = install(LockClient::in_memory());
/// assert!(previous.is_none());
/// assert!(installed().is_some());
/// # });
/// ```
pub fn install(client: LockClient) -> Option<LockClient> {
    let mut slot = INSTALLED.write().unwrap_or_else(PoisonError::into_inner);
    slot.replace(client)
}

/// The client [`install`]ed for the process, if any (a cheap clone).
pub fn installed() -> Option<LockClient> {
    INSTALLED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}
