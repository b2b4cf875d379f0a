//! Whether a call was sent again after a send whose outcome is unknown.
//!
//! The stores re-send a call whose answer did not come back: on a new
//! connection when the cached one was found dead ([`RedisBackend::run`]),
//! to a slot's new master after a failover (Cluster), to Sentinel's new
//! primary. Every call is safe to repeat, but the repeat's answer does not
//! always mean what the first one's would have: a release re-sent after
//! the first one ran finds the key gone and answers "not the owner". The
//! end of a lease (`HeldLock::end`, in `lock.rs`) runs its call under [`track`] to
//! learn whether that happened, and the places that re-send say so with
//! [`note`]; see `design`, "A lost answer is not a lost lock", for
//! what the end of a lease concludes.
//!
//! A task-local, so that the routing layers in between (Cluster, Sentinel,
//! the Redlock quorum) need no extra argument; a fan-out that spawns a
//! task per node carries it into them with [`carry`]. Outside [`track`],
//! [`note`] does nothing.
//!
//! [`RedisBackend::run`]: super::redis::RedisBackend

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use futures_util::future::Either;
use tokio::task::futures::TaskLocalFuture;

/// Set once a command was sent again; made on the first note (or carry),
/// so a call that re-sends nothing (nearly all) allocates nothing.
type Flag = OnceLock<Arc<AtomicBool>>;

tokio::task_local! {
    static RESENT: Flag;
}

/// Runs `call`, and says whether any of its commands was sent again after
/// a send whose outcome is unknown (it may have run).
///
/// A future of its own, not an `async fn`: an `async fn` would keep `call`
/// as an argument beside the scope that runs it, doubling the size of every
/// future that ends a lease (`tests/reentry.rs` bounds it).
pub(crate) fn track<F: Future>(call: F) -> Tracked<F> {
    Tracked {
        scoped: RESENT.scope(Flag::new(), call),
    }
}

pin_project_lite::pin_project! {
    /// The future of [`track`].
    pub(crate) struct Tracked<F: Future> {
        #[pin]
        scoped: TaskLocalFuture<Flag, F>,
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = (F::Output, bool);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut scoped = self.project().scoped;
        let output = ready!(scoped.as_mut().poll(cx));
        let resent = scoped
            .take_value()
            .and_then(|flag| flag.get().map(|resent| resent.load(Ordering::Acquire)))
            .unwrap_or(false);
        Poll::Ready((output, resent))
    }
}

/// The flag of the [`track`] this task is in, made if it is not yet.
fn flag(cell: &Flag) -> Arc<AtomicBool> {
    Arc::clone(cell.get_or_init(|| Arc::new(AtomicBool::new(false))))
}

/// A command whose send may have run is about to be sent again.
pub(crate) fn note() {
    let _ = RESENT.try_with(|cell| flag(cell).store(true, Ordering::Release));
}

/// `call`, to be spawned, reporting its re-sends to the [`track`] of the
/// task that makes it (if any).
pub(crate) fn carry<F: Future>(call: F) -> impl Future<Output = F::Output> {
    match RESENT.try_with(flag) {
        Ok(resent) => Either::Left(RESENT.scope(Flag::from(resent), call)),
        Err(_) => Either::Right(call),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_note_inside_track_is_seen_and_one_outside_is_not() {
        note(); // outside: nothing to report to, and no panic
        let ((), resent) = track(async {}).await;
        assert!(!resent);
        let ((), resent) = track(async { note() }).await;
        assert!(resent);
    }

    #[tokio::test]
    async fn a_spawned_call_carries_the_note_to_its_maker() {
        let ((), resent) = track(async {
            let task = tokio::spawn(carry(async { note() }));
            task.await.expect("the spawned call ends");
        })
        .await;
        assert!(resent);
        let ((), resent) = track(async {
            // Spawned without `carry`: its note goes nowhere.
            let task = tokio::spawn(async { note() });
            task.await.expect("the spawned call ends");
        })
        .await;
        assert!(!resent);
    }
}
