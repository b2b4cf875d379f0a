//! The process-wide client that `#[distributed_lock]` functions use when
//! they name no `client = ..`.

use std::sync::{PoisonError, RwLock};

use crate::client::LockClient;
use crate::error::{ConfigError, LockError};

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

/// The client [`install`]ed for the process, or
/// [`ConfigError::NotInstalled`]: a start-up check for a process whose
/// `#[distributed_lock]` functions name no `client = ..`.
///
/// A scheduled job (`on_busy = "skip"` returning `()` or `Option<T>`)
/// cannot return a missing client to its caller: every call would be
/// skipped and logged at error level. Calling this once at start-up, after
/// `install` and before the scheduler starts, turns a forgotten `install`
/// into an error the process stops on.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use redlock_runtime::{LockClient, LockError, install, require_installed};
///
/// assert!(matches!(require_installed(), Err(LockError::Config(_))));
/// // `LockClient::connect(url).await?` checks that Redis answers and takes
/// // the password; then:
/// install(LockClient::in_memory());
/// let locks = require_installed()?; // before starting the scheduler
/// # drop(locks);
/// # Ok::<(), LockError>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// [`LockError::Config`]`(`[`ConfigError::NotInstalled`]`)` before the
/// first [`install`].
pub fn require_installed() -> Result<LockClient, LockError> {
    installed().ok_or(LockError::Config(ConfigError::NotInstalled))
}
