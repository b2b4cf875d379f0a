//! The task that renews a held lock's lease, and notices when it is lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::error::LostReason;
use crate::guard::Shared;

/// How soon a failed renewal is tried again (cut to half the lease left).
const RENEW_RETRY: Duration = Duration::from_millis(50);

/// The renewal period for a ttl: `ttl / 3`, up to 10% earlier at random so
/// the renewals of locks taken together spread out.
fn period(ttl: Duration) -> Duration {
    let third = ttl / 3;
    let jitter_ns = u64::try_from((third / 10).as_nanos()).unwrap_or(0);
    third - Duration::from_nanos(fastrand::u64(0..=jitter_ns))
}

/// Runs until the guard stops it (release or drop abort the task) or the
/// lock is lost.
///
/// With `renew`, the lease is reset every `ttl / 3`. A renewal that finds the
/// token gone marks the lock lost at once; one that fails is retried until
/// the lease (as last confirmed) would run out, and then the lock is presumed
/// lost. Without `renew`, the lock is presumed lost when the lease runs out.
pub(crate) async fn run(shared: Arc<Shared>, renew: bool) {
    let mut retry_at: Option<Instant> = None;
    loop {
        let lease = shared.lease();
        let wake = if renew {
            retry_at
                .unwrap_or(lease.sent + period(lease.ttl))
                .min(lease.deadline)
        } else {
            lease.deadline
        };
        tokio::select! {
            () = sleep_until(wake) => {}
            () = shared.lease_changed.notified() => {
                retry_at = None;
                continue;
            }
        }
        let now = Instant::now();
        let lease = shared.lease();
        if now >= lease.deadline {
            shared.mark_lost(if renew {
                LostReason::Unconfirmed
            } else {
                LostReason::Expired
            });
            return;
        }
        if !renew {
            continue; // extended by hand meanwhile
        }
        let limit = shared
            .client
            .settings()
            .command_timeout
            .min(lease.deadline - now);
        match shared
            .client
            .backend()
            .extend(&shared.keys, &shared.token, lease.ttl, limit)
            .await
        {
            Ok(true) => {
                shared.renewed(now, lease.ttl);
                retry_at = None;
                tracing::trace!(target: "redlock", key = %shared.keys.user, "lock renewed");
            }
            Ok(false) => {
                shared.mark_lost(LostReason::TokenGone);
                return;
            }
            Err(error) => {
                let left = shared
                    .lease()
                    .deadline
                    .saturating_duration_since(Instant::now());
                tracing::warn!(target: "redlock", key = %shared.keys.user, ?error, left_ms = left.as_millis() as u64, "lock renewal failed; retrying");
                if left.is_zero() {
                    shared.mark_lost(LostReason::Unconfirmed);
                    return;
                }
                retry_at = Some(Instant::now() + RENEW_RETRY.min(left / 2));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_is_a_third_with_a_little_jitter() {
        let ttl = Duration::from_secs(3);
        for _ in 0..100 {
            let p = period(ttl);
            assert!(p <= Duration::from_secs(1));
            assert!(p >= Duration::from_millis(900));
        }
    }
}
