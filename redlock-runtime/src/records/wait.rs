//! A duplicate that waits for the first claimer's result: it subscribes to
//! the record's changes, then claims again on each change (or every
//! [`MAX_POLL`] when no push comes), until the record is ours, completed,
//! a mismatch, or the wait is over. Shared by the `redlock-axum` layer's
//! `wait_for_result` and [`Idempotent::wait`](crate::Idempotent::wait).

use std::time::Duration;

use tokio::time::Instant;

use super::{ChannelSubscription, Claimed, RecordError, RecordKeys, Records};

/// The longest a waiting duplicate sleeps between two looks at the record
/// when no push comes (a client built from a pool alone, or a message
/// missed).
pub const MAX_POLL: Duration = Duration::from_millis(250);

impl Records {
    /// Claims the record at `keys` as [`claim`](Records::claim) does; while
    /// another claimer holds it (`Claimed::Processing`), waits up to `wait`
    /// for it to end, and claims again: the answer is then the completed
    /// result, the record itself (the first claimer released it: a failed
    /// or cancelled run), or `Processing` once `wait` is over. A zero
    /// `wait` claims once.
    ///
    /// The waiter subscribes before it looks again, so a completion in
    /// between is not missed; it also looks every [`MAX_POLL`] (or when
    /// the holder's lease would end, if sooner), as a message can be lost
    /// and a client built from a pool has none.
    ///
    /// # Errors
    /// The store failed; see [`RecordError::is_transient`].
    pub async fn claim_waiting(
        &self,
        keys: &RecordKeys,
        fingerprint: &str,
        lease: Duration,
        fence_ttl: Duration,
        limit: Duration,
        wait: Duration,
    ) -> Result<Claimed, RecordError> {
        let deadline = Instant::now() + wait;
        let mut changes: Option<Changes> = None;
        let mut woken = false;
        loop {
            let claim = self
                .claim(keys, fingerprint, lease, fence_ttl, limit)
                .await?;
            let left = deadline.saturating_duration_since(Instant::now());
            let lease_left = match claim {
                Claimed::Processing { lease_left } if !left.is_zero() => lease_left,
                claim => {
                    if woken
                        && let Some(changes) = &changes
                        && !matches!(claim, Claimed::Claimed(_))
                    {
                        // One message wakes one waiter per client: pass the
                        // news on to the next duplicate.
                        changes.pass_on();
                    }
                    return Ok(claim);
                }
            };
            match changes.as_ref() {
                None => {
                    // Subscribe first, then look again.
                    changes = Some(Changes(self.subscribe(keys, limit.min(left)).await));
                }
                Some(changes) => {
                    let pause = left
                        .min(MAX_POLL)
                        .min(lease_left.max(Duration::from_millis(5)));
                    woken = changes.changed(pause).await;
                }
            }
        }
    }
}

/// A registered interest in a record's next change; `None` inside: no
/// push, poll.
struct Changes(Option<ChannelSubscription>);

impl Changes {
    /// Waits for the next change, at most `max`. True when woken by one.
    async fn changed(&self, max: Duration) -> bool {
        match &self.0 {
            Some(subscription) => tokio::time::timeout(max, subscription.changed())
                .await
                .is_ok(),
            None => {
                tokio::time::sleep(max).await;
                false
            }
        }
    }

    /// Passes a wake-up on to the next waiter in this client (each change
    /// wakes one).
    fn pass_on(&self) {
        if let Some(subscription) = &self.0 {
            subscription.wake_next();
        }
    }
}
