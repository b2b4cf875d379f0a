//! Scoped execution: the locks a task holds through
//! [`LockRequest::run`](crate::LockRequest::run), reentrancy, and
//! [`current_lock`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use crate::core::Core;
use crate::lock::{HeldLock, Lost};

tokio::task_local! {
    /// The innermost lock scope of the running task.
    static SCOPE: Arc<RunScope>;
}

/// One `run` scope: the lock it holds and the scopes around it.
#[derive(Debug)]
pub(crate) struct RunScope {
    /// The client that holds the lock (for a token issued on first ask).
    core: Arc<Core>,
    pub(crate) held: Arc<HeldLock>,
    /// 1 for the scope that acquired the lock, +1 for each reentry.
    pub(crate) depth: usize,
    parent: Option<Arc<RunScope>>,
    /// One re-entry at a time: re-entries of this scope's lock running
    /// concurrently in its task (`join!`) take turns, as other owners would.
    turns: Arc<tokio::sync::Mutex<()>>,
}

impl RunScope {
    /// A scope for `held` inside the current one (if any).
    pub(crate) fn enter(core: Arc<Core>, held: Arc<HeldLock>, depth: usize) -> Arc<RunScope> {
        Arc::new(RunScope {
            core,
            held,
            depth,
            parent: SCOPE.try_with(Arc::clone).ok(),
            turns: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// Waits up to `wait` for this scope's lock to be free of other
    /// re-entries of this task; `None` if another held it the whole wait.
    pub(crate) async fn turn(&self, wait: Duration) -> Option<OwnedMutexGuard<()>> {
        let turns = Arc::clone(&self.turns);
        if wait.is_zero() {
            return turns.try_lock_owned().ok();
        }
        tokio::time::timeout(wait, turns.lock_owned()).await.ok()
    }

    /// Runs `fut` with `scope` as the task's innermost scope.
    pub(crate) fn run<F: Future>(
        scope: Arc<RunScope>,
        fut: F,
    ) -> tokio::task::futures::TaskLocalFuture<Arc<RunScope>, F> {
        SCOPE.scope(scope, fut)
    }

    /// A scope for `held` inside `parent`: the multi-lock's chain of
    /// scopes, one per key, built before any of them runs.
    pub(crate) fn enter_under(
        core: Arc<Core>,
        held: Arc<HeldLock>,
        parent: Option<Arc<RunScope>>,
    ) -> Arc<RunScope> {
        Arc::new(RunScope {
            core,
            held,
            depth: 1,
            parent,
            turns: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// The task's innermost scope, if any.
    pub(crate) fn current() -> Option<Arc<RunScope>> {
        SCOPE.try_with(Arc::clone).ok()
    }

    /// The scope of this task holding `key` through the client `client`
    /// (a core's id) as a lock of a kind `kind` accepts, if any.
    pub(crate) fn holding(
        client: u64,
        key: &str,
        kind: impl Fn(crate::backend::Kind) -> bool,
    ) -> Option<Arc<RunScope>> {
        let mut scope = SCOPE.try_with(Arc::clone).ok();
        while let Some(s) = scope {
            if s.held.key() == key && s.held.client() == client && kind(s.held.keys().kind()) {
                return Some(s);
            }
            scope = s.parent.clone();
        }
        None
    }
}

/// What to do with a [`run`](crate::LockRequest::run) body when its lock is
/// lost while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnLost {
    /// Drop the body's future at once (it stops at its current `.await`) and
    /// return [`LockError::Lost`](crate::LockError::Lost). The default: work
    /// that is no longer exclusive stops.
    #[default]
    Cancel,
    /// Let the body run on; it can check [`current_lock`] (`is_held()`,
    /// `lost()`) and decide. `run` then returns the body's value.
    Signal,
}

/// The lock held by the innermost [`run`](crate::LockRequest::run) scope of
/// the running task, or `None` outside any.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use redlock_runtime::{LockClient, current_lock};
///
/// let locks = LockClient::in_memory();
/// let token = locks
///     .lock("invoice:7")
///     .run(async {
///         let held = current_lock().expect("inside a run scope");
///         assert_eq!(held.key(), "invoice:7");
///         held.fencing_token().await
///     })
///     .await??;
/// assert!(token > 0);
/// assert!(current_lock().is_none());
/// # Ok::<(), redlock_runtime::LockError>(())
/// # }).unwrap();
/// ```
pub fn current_lock() -> Option<CurrentLock> {
    SCOPE
        .try_with(|scope| CurrentLock {
            core: Arc::clone(&scope.core),
            held: Arc::clone(&scope.held),
            depth: scope.depth,
        })
        .ok()
}

/// A lock held by a [`run`](crate::LockRequest::run) scope of the running
/// task; see [`current_lock`].
#[derive(Clone)]
pub struct CurrentLock {
    core: Arc<Core>,
    held: Arc<HeldLock>,
    depth: usize,
}

impl CurrentLock {
    /// The lock's key (without the client's prefix).
    pub fn key(&self) -> &str {
        self.held.key()
    }

    /// The fencing token of the acquisition, issued on first ask (see
    /// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token)).
    ///
    /// # Errors
    /// As [`LockGuard::fencing_token`](crate::LockGuard::fencing_token).
    pub async fn fencing_token(&self) -> Result<u64, crate::LockError> {
        let limit = self.core.settings().command_timeout;
        let prefix = &self.core.settings().key_prefix;
        (self.held)
            .fencing_token(self.core.backend(), prefix, limit)
            .await
    }

    /// True while the lock is presumed held (see
    /// [`LockGuard::is_held`](crate::LockGuard::is_held)).
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// How long the lease is known to last from now (zero once released,
    /// lost or run out).
    pub fn remaining(&self) -> std::time::Duration {
        self.held.remaining()
    }

    /// Completes when the lock is known or presumed lost (see
    /// [`LockGuard::lost`](crate::LockGuard::lost)).
    pub fn lost(&self) -> Lost {
        self.held.lost_future()
    }

    /// How many `run` scopes of this task hold this lock: 1 in the scope
    /// that acquired it, 2 in a nested scope on the same key, and so on.
    pub fn depth(&self) -> usize {
        self.depth
    }
}

impl fmt::Debug for CurrentLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CurrentLock")
            .field("key", &self.key())
            .field("fencing_token", &self.held.issued_fence())
            .field("depth", &self.depth)
            .field("held", &self.is_held())
            .finish()
    }
}
