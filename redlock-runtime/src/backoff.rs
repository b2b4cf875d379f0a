//! Retry pacing while waiting for a busy lock: exponential backoff with full jitter.

use std::time::Duration;

use crate::error::ConfigError;

/// How an [`acquire`](crate::LockRequest::acquire) with a wait paces its
/// retries while the lock is busy.
///
/// The n-th retry sleeps a random time in `[0, min(max, initial * 2^n)]`
/// ("full jitter", so contending clients spread out), then the sleep is cut
/// to the holder's remaining lease (as reported by Redis) and to what is
/// left of the wait.
///
/// ```
/// use std::time::Duration;
/// use redlock_runtime::RetryPolicy;
///
/// let policy = RetryPolicy::new(Duration::from_millis(5), Duration::from_millis(250));
/// assert_eq!(policy.max(), Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    initial: Duration,
    max: Duration,
    jitter: bool,
}

impl Default for RetryPolicy {
    /// 10 ms initial, doubling up to 200 ms.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(200),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// A policy that starts at `initial` and doubles up to `max`.
    ///
    /// Both are checked when the client is built: `initial` must be at
    /// least 1 ms and `max` at least `initial`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            jitter: true,
        }
    }

    /// Whether sleeps are random in `[0, ceiling]` (full jitter, the
    /// default) or exactly the ceiling. Without jitter, clients that collide
    /// keep colliding: turn it off only for a single waiter, or in tests.
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// The first backoff ceiling.
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// The largest backoff ceiling.
    pub fn max(&self) -> Duration {
        self.max
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.initial < Duration::from_millis(1) {
            return Err(ConfigError::InvalidDuration {
                name: "retry initial delay",
                value: self.initial,
                reason: "must be at least 1 ms",
            });
        }
        if self.max < self.initial {
            return Err(ConfigError::InvalidDuration {
                name: "retry max delay",
                value: self.max,
                reason: "must be at least the initial delay",
            });
        }
        Ok(())
    }

    /// The ceiling for retry number `attempt` (0-based).
    pub(crate) fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// A random sleep for retry number `attempt`, at least 1 ms.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        if !self.jitter {
            return ceiling;
        }
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(fastrand::u64(0..=nanos)).max(Duration::from_millis(1))
    }
}

/// The sleep before the next attempt: the jittered backoff, cut to the
/// holder's remaining lease and to the remaining wait.
pub(crate) fn next_sleep(
    policy: &RetryPolicy,
    attempt: u32,
    holder_pttl: Option<Duration>,
    remaining_wait: Duration,
) -> Duration {
    let mut sleep = policy.delay(attempt);
    if let Some(pttl) = holder_pttl {
        // Wake right as the holder's lease ends, not a backoff later.
        sleep = sleep.min(pttl + Duration::from_millis(1));
    }
    sleep.min(remaining_wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_and_caps() {
        let p = RetryPolicy::new(Duration::from_millis(10), Duration::from_millis(200));
        assert_eq!(p.ceiling(0), Duration::from_millis(10));
        assert_eq!(p.ceiling(1), Duration::from_millis(20));
        assert_eq!(p.ceiling(4), Duration::from_millis(160));
        assert_eq!(p.ceiling(5), Duration::from_millis(200));
        assert_eq!(p.ceiling(1000), Duration::from_millis(200));
    }

    #[test]
    fn delay_stays_within_ceiling_and_is_jittered() {
        let p = RetryPolicy::new(Duration::from_millis(10), Duration::from_millis(200));
        let delays: Vec<_> = (0..200).map(|_| p.delay(6)).collect();
        assert!(
            delays
                .iter()
                .all(|d| *d >= Duration::from_millis(1) && *d <= Duration::from_millis(200))
        );
        let distinct: std::collections::HashSet<_> = delays.iter().collect();
        assert!(distinct.len() > 100, "full jitter spreads the delays");
    }

    #[test]
    fn sleep_is_capped_by_pttl_and_remaining_wait() {
        let p = RetryPolicy::new(Duration::from_secs(5), Duration::from_secs(5));
        let s = next_sleep(
            &p,
            3,
            Some(Duration::from_millis(7)),
            Duration::from_secs(1),
        );
        assert!(s <= Duration::from_millis(8));
        let s = next_sleep(&p, 3, None, Duration::from_millis(3));
        assert!(s <= Duration::from_millis(3));
    }

    #[test]
    fn validation() {
        assert!(RetryPolicy::default().validate().is_ok());
        assert!(
            RetryPolicy::new(Duration::ZERO, Duration::from_secs(1))
                .validate()
                .is_err()
        );
        assert!(
            RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(1))
                .validate()
                .is_err()
        );
    }
}
